################################################################################
# Aggregator
################################################################################

resource "aws_cloudwatch_log_group" "aggregator" {
  count = local.create ? 1 : 0

  name              = "/aws/lambda/${local.aggregator_name}"
  retention_in_days = var.log_retention_in_days
  kms_key_id        = var.kms_key_arn
  tags              = var.tags
}

resource "aws_lambda_function" "aggregator" {
  # checkov:skip=CKV_AWS_116: the stream mapping invokes it synchronously; its on-failure destination is the failure queue (a function DLQ serves async invocations only).
  # checkov:skip=CKV_AWS_115: concurrency is bounded by the stream: one invocation per shard at a time.
  # checkov:skip=CKV_AWS_117: it reaches only DynamoDB, SQS and CloudWatch APIs; placing it in a VPC is the caller's network policy, not the pattern's.
  count = local.create ? 1 : 0

  function_name           = local.aggregator_name
  description             = "Counts new downloads from the stream of ${local.table_name} into the aggregates of its leaderboards, exactly once."
  role                    = aws_iam_role.aggregator[0].arn
  runtime                 = var.lambda_runtime
  handler                 = "aggregator.lambda_handler"
  filename                = local.packages.aggregator.filename
  s3_bucket               = local.packages.aggregator.s3_bucket
  s3_key                  = local.packages.aggregator.s3_key
  source_code_hash        = local.packages.aggregator.source_code_hash
  memory_size             = var.aggregator_memory_size
  timeout                 = var.aggregator_timeout
  kms_key_arn             = var.kms_key_arn
  code_signing_config_arn = var.code_signing_config_arn

  environment {
    variables = {
      TABLE_NAME                     = local.table_name
      TABLE_ARN                      = local.table_arn
      AGGREGATES_TABLE_NAME          = local.aggregates_table_name
      SOURCE_ITEM_ATTRIBUTE          = var.source_item_filter == null ? "" : var.source_item_filter.attribute
      SOURCE_ITEM_VALUE              = var.source_item_filter == null ? "" : var.source_item_filter.value
      RETRACTIONS                    = var.retractions ? "true" : "false"
      PROGRESS_TABLE_NAME            = aws_dynamodb_table.progress[0].name
      CLAIMS_TABLE_NAME              = local.claims_table_enabled ? aws_dynamodb_table.claims[0].name : ""
      LEDGER                         = var.ledger ? "true" : "false"
      STREAM_READERS                 = tostring(var.stream_readers)
      ENTITY_ATTRIBUTE               = var.entity_attribute_name
      SORT_KEY_ATTRIBUTE             = var.sort_key_attribute_name
      TIMESTAMP_ATTRIBUTE            = var.timestamp_attribute_name
      PERIOD_ATTRIBUTE               = var.period_attribute_name
      COUNT_ATTRIBUTE                = var.count_attribute_name
      ORDER_ATTRIBUTE                = var.order_attribute_name
      LEADERBOARD_SHARDS             = tostring(var.leaderboard_shards)
      LEADERBOARD_PERIODS            = local.leaderboard_periods
      LEADERBOARD_TIE_BREAK          = var.leaderboard_tie_break
      LEADERBOARD_TIME_ZONE          = var.leaderboard_time_zone
      LEADERBOARD_TIME_ZONE_DATA     = local.time_zone_data_version
      LEADERBOARD_SEASON_START       = local.season_start
      LEADERBOARD_SEASON_LENGTH_DAYS = local.season_length_days
      CATEGORY_ATTRIBUTE             = local.category_attribute
      SUM_ATTRIBUTE                  = local.sum_attribute
      FAILURE_QUEUE_URL              = aws_sqs_queue.failures[0].url
      RECOUNT_BAND_QUEUE_URL         = aws_sqs_queue.recount_bands[0].url
      AGGREGATE_WRITES               = var.aggregate_writes
      WRITE_CONCURRENCY              = tostring(var.aggregator_write_concurrency)
      DEADLINE_MARGIN_MS             = tostring(var.aggregator_deadline_margin_ms)
      POWERTOOLS_SERVICE_NAME        = local.aggregator_name
      POWERTOOLS_METRICS_NAMESPACE   = "MaterializedAggregation"
    }
  }

  tracing_config {
    mode = var.tracing_mode
  }

  tags = var.tags

  lifecycle {
    precondition {
      condition     = contains(local.time_zones, var.leaderboard_time_zone)
      error_message = "leaderboard_time_zone ${var.leaderboard_time_zone} is no zone of the IANA time zone database the functions carry (terraform/time_zones.tf): name one such as UTC, America/New_York or Europe/Berlin."
    }

    precondition {
      condition     = !contains(var.leaderboard_periods, "season") || var.leaderboard_season != null
      error_message = "leaderboard_periods names season but leaderboard_season is null: set leaderboard_season = { start = \"YYYY-MM-DD\", length_days = N }, or leave season out."
    }

    precondition {
      condition     = var.leaderboard_shards_previous == null || var.leaderboard_shards_previous != var.leaderboard_shards
      error_message = "leaderboard_shards_previous must differ from leaderboard_shards (or be null when no change is under way)."
    }

    precondition {
      condition     = var.category_attribute_name == null ? true : !contains(concat(local.named_attributes, [local.sum_attribute]), var.category_attribute_name)
      error_message = "category_attribute_name must be an attribute of its own: not a key, the timestamp, an attribute of aggregates, the TTL attribute or sum_attribute_name."
    }

    precondition {
      condition     = var.sum_attribute_name == null ? true : !contains(local.named_attributes, var.sum_attribute_name)
      error_message = "sum_attribute_name must be an attribute of its own: not a key, the timestamp, an attribute of aggregates or the TTL attribute."
    }

    precondition {
      condition     = !local.provisioned || alltrue([for capacity in [var.table_read_capacity, var.table_write_capacity, var.index_read_capacity, var.index_write_capacity] : capacity != null])
      error_message = "billing_mode PROVISIONED needs table_read_capacity, table_write_capacity, index_read_capacity and index_write_capacity."
    }

    precondition {
      condition     = var.source_item_filter == null ? true : !contains(concat(local.named_attributes, [local.category_attribute, local.sum_attribute]), var.source_item_filter.attribute)
      error_message = "source_item_filter.attribute must be an attribute of its own: not the entity, the timestamp, a key, an attribute of aggregates, the TTL, category or summed attribute."
    }

    precondition {
      condition     = !(var.leaderboard_tie_break == "first_reached" && var.retractions)
      error_message = "leaderboard_tie_break = \"first_reached\" with retractions (or ledger): a deletion or an edit can take back an entity's latest counted download, and its aggregate keeps only the latest instant, not the one before it, so the tie-break would rank it by a download no longer counted. Use leaderboard_tie_break = \"entity\" with retractions, or keep retractions = false."
    }

    precondition {
      condition     = !(var.leaderboard_tie_break == "first_reached" && var.backfill_claims)
      error_message = "leaderboard_tie_break = \"first_reached\" with backfill_claims: the backfill adds counts without their downloads' instants, so a backfilled entity would not rank by its latest counted download. Run the backfill with leaderboard_tie_break = \"entity\", then switch and run `leaderboard-tools reconcile --repair` to set each board's instants."
    }

    precondition {
      condition     = !(var.backfill_claims && var.sum_attribute_name != null)
      error_message = "backfill_claims with sum_attribute_name: the backfill counts downloads and does not add sums yet, so the claims would cost a write per download for nothing."
    }

    precondition {
      condition     = !(var.backfill_claims && var.retractions && !var.ledger)
      error_message = "backfill_claims with retractions: a backfill's claims name who counted a download, not which image of it was counted, so an edit during the backfill could move its contribution twice. Use ledger = true instead of backfill_claims (with retractions = true): the ledger records what the backfill counted of each download, so a backfill may run beside retractions at any time."
    }

    precondition {
      condition     = !var.ledger || var.retractions
      error_message = "ledger = true needs retractions = true: the ledger moves each download's contribution through its edits and deletions, which reach the aggregator (with the old images it reads) only with retractions. Set retractions = true, or ledger = false."
    }

    precondition {
      condition     = var.stream_readers == 2 || var.ledger
      error_message = "stream_readers = 1 needs ledger = true: only the ledger's versioned items let the aggregator apply what the mapping delivers (retried, out of order, bisected) without reading the shard itself. Set ledger = true (with retractions = true), or keep stream_readers = 2."
    }

    precondition {
      condition     = !(var.ledger && var.backfill_claims)
      error_message = "ledger with backfill_claims: ledger mode keeps the claims table for good as its ledger, in which the backfill counts at any time with nothing to release, so backfill_claims is redundant. Remove backfill_claims (or set it to false) and keep ledger = true."
    }

    precondition {
      condition     = !(local.source_table_given && var.retractions && !var.ledger)
      error_message = "retractions = true on the attached table ${coalesce(var.source_table_name, "-")} needs ledger = true: the table holds downloads written before its stream was read, and a deletion or an edit of one the aggregator never counted would take back or move another download's count, silently. Set ledger = true (with retractions = true): the ledger records what was counted of each download and takes back only that. Or keep retractions = false."
    }

    precondition {
      condition     = !local.source_table_given || var.download_ttl_attribute_name == null
      error_message = "download_ttl_attribute_name sets TTL on the table the module creates; with source_table_name the module changes nothing of that table: set TTL where the table is defined (the operator tools read it from the table)."
    }

    precondition {
      condition     = local.packages.aggregator.given
      error_message = "The aggregator has no package. Set aggregator_package_path (the aggregator.zip of a release: `make release`), or package_s3_bucket with aggregator_package_s3_key and aggregator_package_source_code_hash (sha256_base64 of aggregator.zip in the release's manifest.json)."
    }

    precondition {
      condition     = local.packages.aggregator.unambiguous
      error_message = "Give the aggregator's package either as aggregator_package_path or as aggregator_package_s3_key (in package_s3_bucket), not both."
    }

    precondition {
      condition     = local.packages.aggregator.matches_hash
      error_message = "aggregator_package_path is not the zip aggregator_package_source_code_hash describes (its base64 sha256 differs)."
    }

    precondition {
      condition     = local.packages.aggregator.hashed
      error_message = "From S3, aggregator_package_source_code_hash is required: the base64 sha256 of the zip (sha256_base64 in the release's manifest.json), so that Terraform deploys a new package under the same key."
    }
  }

  depends_on = [aws_cloudwatch_log_group.aggregator, aws_iam_role_policy.aggregator]
}

# Tumbling-window events name their shard: the aggregator reads that shard itself from its
# checkpoint in the progress table, through the highest record delivered. What the mapping
# delivers, retries, merges, splits or gives up on is a trigger and a bound, never what is
# counted, so it reports no partial batch.
# With stream_readers = 1 the mapping is the only steady reader and its deliveries are what is
# applied: it retries a failing batch until its records expire ("-1 means infinite: failed records
# are retried until the record expires", Lambda Developer Guide, Lambda parameters for Amazon
# DynamoDB event source mappings), bisecting it; the aggregator fails a batch for an outage only.
resource "aws_lambda_event_source_mapping" "aggregator" {
  count = local.create ? 1 : 0

  event_source_arn                   = local.table_stream_arn
  function_name                      = aws_lambda_function.aggregator[0].arn
  starting_position                  = var.starting_position
  batch_size                         = local.batch_size
  maximum_batching_window_in_seconds = var.maximum_batching_window_in_seconds
  tumbling_window_in_seconds         = var.tumbling_window_in_seconds
  maximum_retry_attempts             = local.one_stream_reader ? -1 : var.maximum_retry_attempts
  maximum_record_age_in_seconds      = local.one_stream_reader ? -1 : var.maximum_record_age_in_seconds
  bisect_batch_on_function_error     = true
  parallelization_factor             = var.parallelization_factor

  filter_criteria {
    dynamic "filter" {
      for_each = local.event_filters

      content {
        pattern = filter.value
      }
    }
  }

  destination_config {
    on_failure {
      destination_arn = aws_sqs_queue.failures[0].arn
    }
  }

  lifecycle {
    precondition {
      condition     = local.one_stream_reader || var.maximum_record_age_in_seconds >= 2 * var.tumbling_window_in_seconds
      error_message = "maximum_record_age_in_seconds must be at least twice tumbling_window_in_seconds: a window holds its records until it ends, and they must not expire before it is written."
    }
  }

  depends_on = [aws_iam_role_policy.aggregator]
}

################################################################################
# Query
################################################################################

resource "aws_cloudwatch_log_group" "query" {
  count = local.create ? 1 : 0

  name              = "/aws/lambda/${local.query_name}"
  retention_in_days = var.log_retention_in_days
  kms_key_id        = var.kms_key_arn
  tags              = var.tags
}

resource "aws_lambda_function" "query" {
  # checkov:skip=CKV_AWS_116: invoked synchronously; the caller receives any error, there is nothing to dead-letter.
  # checkov:skip=CKV_AWS_117: it reaches only the DynamoDB API; placing it in a VPC is the caller's network policy, not the pattern's.
  count = local.create ? 1 : 0

  function_name                  = local.query_name
  description                    = "Serves the leaderboards of ${local.table_name} from the sparse index of ${local.aggregates_table_name}: pages, ranks, neighbours, rolling windows."
  role                           = aws_iam_role.query[0].arn
  runtime                        = var.lambda_runtime
  handler                        = "query.lambda_handler"
  filename                       = local.packages.query.filename
  s3_bucket                      = local.packages.query.s3_bucket
  s3_key                         = local.packages.query.s3_key
  source_code_hash               = local.packages.query.source_code_hash
  memory_size                    = var.query_memory_size
  timeout                        = var.query_timeout
  kms_key_arn                    = var.kms_key_arn
  code_signing_config_arn        = var.code_signing_config_arn
  reserved_concurrent_executions = var.reserved_concurrent_executions

  environment {
    variables = {
      AGGREGATES_TABLE_NAME          = local.aggregates_table_name
      INDEX_NAME                     = var.leaderboard_index_name
      ENTITY_ATTRIBUTE               = var.entity_attribute_name
      SORT_KEY_ATTRIBUTE             = var.sort_key_attribute_name
      PERIOD_ATTRIBUTE               = var.period_attribute_name
      COUNT_ATTRIBUTE                = var.count_attribute_name
      ORDER_ATTRIBUTE                = var.order_attribute_name
      LEADERBOARD_SHARDS             = tostring(var.leaderboard_shards)
      LEADERBOARD_SHARDS_PREVIOUS    = var.leaderboard_shards_previous == null ? "" : tostring(var.leaderboard_shards_previous)
      LEADERBOARD_PERIODS            = local.leaderboard_periods
      LEADERBOARD_TIME_ZONE          = var.leaderboard_time_zone
      LEADERBOARD_SEASON_START       = local.season_start
      LEADERBOARD_SEASON_LENGTH_DAYS = local.season_length_days
      CATEGORY_ATTRIBUTE             = local.category_attribute
      SUM_ATTRIBUTE                  = local.sum_attribute
      POWERTOOLS_SERVICE_NAME        = local.query_name
    }
  }

  tracing_config {
    mode = var.tracing_mode
  }

  tags = var.tags

  lifecycle {
    precondition {
      condition     = local.packages.query.given
      error_message = "The query function has no package. Set query_package_path (the query.zip of a release: `make release`), or package_s3_bucket with query_package_s3_key and query_package_source_code_hash (sha256_base64 of query.zip in the release's manifest.json)."
    }

    precondition {
      condition     = local.packages.query.unambiguous
      error_message = "Give the query function's package either as query_package_path or as query_package_s3_key (in package_s3_bucket), not both."
    }

    precondition {
      condition     = local.packages.query.matches_hash
      error_message = "query_package_path is not the zip query_package_source_code_hash describes (its base64 sha256 differs)."
    }

    precondition {
      condition     = local.packages.query.hashed
      error_message = "From S3, query_package_source_code_hash is required: the base64 sha256 of the zip (sha256_base64 in the release's manifest.json), so that Terraform deploys a new package under the same key."
    }
  }

  depends_on = [aws_cloudwatch_log_group.query, aws_iam_role_policy.query]
}

# The band queue's records reach the aggregator at their bands' deadlines (band_records.py): a band
# a repair never closed goes to the failure queue; a record whose band is still open before its
# deadline (a delay is at most 15 minutes) goes back to the queue (ReportBatchItemFailures).
resource "aws_lambda_event_source_mapping" "band_records" {
  count = local.create ? 1 : 0

  event_source_arn        = aws_sqs_queue.recount_bands[0].arn
  function_name           = aws_lambda_function.aggregator[0].arn
  batch_size              = 10
  function_response_types = ["ReportBatchItemFailures"]
}
