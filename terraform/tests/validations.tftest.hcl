# Plan-level tests of the module's validations and preconditions, against a mocked provider:
# every setting outside the exactly-once guarantee must be refused with its message.
# Run by tests/unit/terraform/test_module_validations.py (or `terraform test` in terraform/).

mock_provider "aws" {
  mock_data "aws_iam_policy_document" {
    defaults = {
      json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}"
    }
  }

  mock_data "aws_region" {
    defaults = {
      id   = "eu-west-1"
      name = "eu-west-1"
    }
  }

  # ARNs as the services spell them, for the runs that apply (the mocks' random strings are no ARN): used at apply
  # only, so planned runs see these attributes unknown as before.
  mock_resource "aws_iam_role" {
    defaults = { arn = "arn:aws:iam::123456789012:role/validation" }
  }

  mock_resource "aws_sqs_queue" {
    defaults = { arn = "arn:aws:sqs:eu-west-1:123456789012:validation" }
  }

  mock_resource "aws_lambda_function" {
    defaults = { arn = "arn:aws:lambda:eu-west-1:123456789012:function:validation" }
  }

  # A platform's table with a stream of new images, no replicas: what source_table_name needs.
  mock_data "aws_dynamodb_table" {
    defaults = {
      arn              = "arn:aws:dynamodb:eu-west-1:123456789012:table/platform"
      stream_arn       = "arn:aws:dynamodb:eu-west-1:123456789012:table/platform/stream/2025-01-01T00:00:00.000"
      stream_enabled   = true
      stream_view_type = "NEW_AND_OLD_IMAGES"
      hash_key         = "PK"
      range_key        = "SK"
      replica          = []
    }
  }
}

variables {
  name = "validation"
  # Any file stands in for the zips: nothing is deployed, only planned.
  aggregator_package_path = "versions.tf"
  query_package_path      = "versions.tf"
}

run "the_defaults_plan" {
  command = plan

  assert {
    condition     = aws_lambda_event_source_mapping.aggregator[0].tumbling_window_in_seconds == 60
    error_message = "the mapping must use tumbling windows by default"
  }

  assert {
    condition     = aws_lambda_event_source_mapping.aggregator[0].parallelization_factor == 1
    error_message = "the mapping must process one batch per shard at a time"
  }

  assert {
    condition     = aws_lambda_event_source_mapping.aggregator[0].bisect_batch_on_function_error == true
    error_message = "failed batches must be bisected"
  }

  assert {
    condition     = aws_lambda_function.aggregator[0].environment[0].variables["AGGREGATE_WRITES"] == "per_batch"
    error_message = "aggregates are written every batch by default"
  }

  assert {
    condition     = one([for index in aws_dynamodb_table.this[0].global_secondary_index : index.range_key]) == "LeaderboardOrder"
    error_message = "the index must sort by the leaderboard order (count, then id)"
  }

  assert {
    condition     = one([for index in aws_dynamodb_table.this[0].global_secondary_index : index.non_key_attributes]) == toset(["DownloadCount"])
    error_message = "the index must carry the count, so that a page needs nothing else"
  }

  assert {
    condition     = aws_lambda_function.query[0].environment[0].variables["LEADERBOARD_SHARDS"] == "1" && aws_lambda_function.query[0].environment[0].variables["LEADERBOARD_SHARDS_PREVIOUS"] == ""
    error_message = "one leaderboard shard, no layout change under way, by default"
  }
}

run "the_default_boards_are_the_guides_months_counted" {
  command = plan

  assert {
    condition     = alltrue([for function in [aws_lambda_function.aggregator[0], aws_lambda_function.query[0]] : function.environment[0].variables["LEADERBOARD_PERIODS"] == "month" && function.environment[0].variables["CATEGORY_ATTRIBUTE"] == "" && function.environment[0].variables["SUM_ATTRIBUTE"] == ""])
    error_message = "both functions keep monthly boards of counts, no category, by default"
  }

  assert {
    condition     = output.leaderboard_periods == tolist(["month"])
    error_message = "the output names the periods served"
  }
}

run "periods_a_category_and_a_sum_reach_both_functions" {
  command = plan

  variables {
    leaderboard_periods     = ["day", "week", "all"]
    category_attribute_name = "Genre"
    sum_attribute_name      = "Revenue"
  }

  assert {
    condition     = alltrue([for function in [aws_lambda_function.aggregator[0], aws_lambda_function.query[0]] : function.environment[0].variables["LEADERBOARD_PERIODS"] == "day,week,all" && function.environment[0].variables["CATEGORY_ATTRIBUTE"] == "Genre" && function.environment[0].variables["SUM_ATTRIBUTE"] == "Revenue"])
    error_message = "the aggregator and the query function read the same boards"
  }

  assert {
    condition     = output.leaderboard_periods == tolist(["day", "week", "all"])
    error_message = "the output names the periods served"
  }
}

run "an_unknown_period_is_refused" {
  command = plan

  variables {
    leaderboard_periods = ["day", "fortnight"]
  }

  expect_failures = [var.leaderboard_periods]
}

run "no_period_is_refused" {
  command = plan

  variables {
    leaderboard_periods = []
  }

  expect_failures = [var.leaderboard_periods]
}

run "a_period_listed_twice_is_refused" {
  command = plan

  variables {
    leaderboard_periods = ["day", "day"]
  }

  expect_failures = [var.leaderboard_periods]
}

run "an_empty_category_attribute_name_is_refused" {
  command = plan

  variables {
    category_attribute_name = ""
  }

  expect_failures = [var.category_attribute_name]
}

run "a_category_attribute_that_is_a_key_is_refused" {
  command = plan

  variables {
    category_attribute_name = "songID"
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "a_category_attribute_that_is_the_count_is_refused" {
  command = plan

  variables {
    category_attribute_name = "DownloadCount"
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "a_category_attribute_that_is_the_summed_one_is_refused" {
  command = plan

  variables {
    category_attribute_name = "Revenue"
    sum_attribute_name      = "Revenue"
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "a_summed_attribute_that_is_the_timestamp_is_refused" {
  command = plan

  variables {
    sum_attribute_name = "Timestamp"
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "a_summed_attribute_that_is_the_ttl_attribute_is_refused" {
  command = plan

  variables {
    download_ttl_attribute_name = "ExpiresAt"
    sum_attribute_name          = "ExpiresAt"
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "a_layout_change_plans" {
  command = plan

  variables {
    leaderboard_shards          = 4
    leaderboard_shards_previous = 1
  }

  assert {
    condition     = aws_lambda_function.query[0].environment[0].variables["LEADERBOARD_SHARDS_PREVIOUS"] == "1"
    error_message = "the query function must read the previous layout while the change is under way"
  }
}

run "a_layout_change_to_the_same_count_is_refused" {
  command = plan

  variables {
    leaderboard_shards          = 4
    leaderboard_shards_previous = 4
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "more_than_64_shards_are_refused" {
  command = plan

  variables {
    leaderboard_shards = 65
  }

  expect_failures = [var.leaderboard_shards]
}

run "per_window_writes_plan" {
  command = plan

  variables {
    aggregate_writes           = "per_window"
    tumbling_window_in_seconds = 300
  }

  assert {
    condition     = aws_lambda_function.aggregator[0].environment[0].variables["AGGREGATE_WRITES"] == "per_window" && aws_lambda_event_source_mapping.aggregator[0].tumbling_window_in_seconds == 300
    error_message = "per_window writes once per window, of the mapping's length"
  }
}

run "per_batch_defaults_to_batches_of_100" {
  command = plan

  assert {
    condition     = aws_lambda_event_source_mapping.aggregator[0].batch_size == 100
    error_message = "per_batch's default batch is 100 records"
  }
}

run "per_window_defaults_to_batches_of_1000" {
  command = plan

  variables {
    aggregate_writes = "per_window"
  }

  assert {
    condition     = aws_lambda_event_source_mapping.aggregator[0].batch_size == 1000
    error_message = "per_window's default batch is 1000 records: its invocations before a window's last each write the progress table"
  }
}

run "a_batch_size_given_is_the_mappings" {
  command = plan

  variables {
    aggregate_writes = "per_window"
    batch_size       = 250
  }

  assert {
    condition     = aws_lambda_event_source_mapping.aggregator[0].batch_size == 250
    error_message = "a batch_size given overrides the write mode's default"
  }
}

run "a_batch_size_above_10000_is_refused" {
  command = plan

  variables {
    batch_size = 10001
  }

  expect_failures = [var.batch_size]
}

run "a_parallelization_factor_above_one_is_refused" {
  command = plan

  variables {
    parallelization_factor = 2
  }

  expect_failures = [var.parallelization_factor]
}

run "a_mapping_without_tumbling_window_is_refused" {
  command = plan

  variables {
    tumbling_window_in_seconds = 0
  }

  expect_failures = [var.tumbling_window_in_seconds]
}

run "an_unknown_write_mode_is_refused" {
  command = plan

  variables {
    aggregate_writes = "per_download"
  }

  expect_failures = [var.aggregate_writes]
}

run "records_that_expire_before_their_window_ends_are_refused" {
  command = plan

  variables {
    tumbling_window_in_seconds    = 900
    maximum_record_age_in_seconds = 1200
  }

  expect_failures = [aws_lambda_event_source_mapping.aggregator]
}

run "infinite_retries_are_refused" {
  command = plan

  variables {
    maximum_retry_attempts = -1
  }

  expect_failures = [var.maximum_retry_attempts]
}

run "an_infinite_record_age_is_refused" {
  command = plan

  variables {
    maximum_record_age_in_seconds = -1
  }

  expect_failures = [var.maximum_record_age_in_seconds]
}

run "provisioned_mode_without_capacities_is_refused" {
  command = plan

  variables {
    billing_mode = "PROVISIONED"
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "a_name_with_spaces_is_refused" {
  command = plan

  variables {
    name = "my leaderboard"
  }

  expect_failures = [var.name]
}

run "a_key_id_instead_of_a_key_arn_is_refused" {
  command = plan

  variables {
    kms_key_arn = "1234abcd-12ab-34cd-56ef-1234567890ab"
  }

  expect_failures = [var.kms_key_arn]
}

run "an_old_python_runtime_is_refused" {
  command = plan

  variables {
    lambda_runtime = "python3.9"
  }

  expect_failures = [var.lambda_runtime]
}

run "without_any_package_planning_fails_and_says_what_to_provide" {
  command = plan

  variables {
    aggregator_package_path = null
    query_package_path      = null
  }

  expect_failures = [aws_lambda_function.aggregator, aws_lambda_function.query]
}

run "packages_from_s3_plan_with_their_hashes" {
  command = plan

  variables {
    aggregator_package_path             = null
    query_package_path                  = null
    package_s3_bucket                   = "platform-artifacts"
    aggregator_package_s3_key           = "leaderboard/0.2.0/aggregator.zip"
    query_package_s3_key                = "leaderboard/0.2.0/query.zip"
    aggregator_package_source_code_hash = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    query_package_source_code_hash      = "n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg="
  }

  assert {
    condition = (
      aws_lambda_function.aggregator[0].s3_bucket == "platform-artifacts"
      && aws_lambda_function.aggregator[0].s3_key == "leaderboard/0.2.0/aggregator.zip"
      && aws_lambda_function.aggregator[0].source_code_hash == "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
      && aws_lambda_function.aggregator[0].filename == null
    )
    error_message = "the aggregator must come from its S3 object, versioned by the manifest's hash"
  }

  assert {
    condition = (
      aws_lambda_function.query[0].s3_key == "leaderboard/0.2.0/query.zip"
      && aws_lambda_function.query[0].source_code_hash == "n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg="
    )
    error_message = "the query function must come from its S3 object, versioned by the manifest's hash"
  }
}

run "a_package_from_s3_without_its_hash_is_refused" {
  command = plan

  variables {
    aggregator_package_path   = null
    package_s3_bucket         = "platform-artifacts"
    aggregator_package_s3_key = "leaderboard/0.2.0/aggregator.zip"
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "a_path_and_an_s3_key_together_are_refused" {
  command = plan

  variables {
    package_s3_bucket                   = "platform-artifacts"
    aggregator_package_s3_key           = "leaderboard/0.2.0/aggregator.zip"
    aggregator_package_source_code_hash = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "a_local_zip_that_is_not_the_one_its_hash_describes_is_refused" {
  command = plan

  variables {
    query_package_source_code_hash = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
  }

  expect_failures = [aws_lambda_function.query]
}

run "a_malformed_hash_is_refused" {
  command = plan

  variables {
    aggregator_package_source_code_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
  }

  expect_failures = [var.aggregator_package_source_code_hash]
}

run "create_false_plans_nothing_and_needs_no_package" {
  command = plan

  variables {
    create                  = false
    aggregator_package_path = null
    query_package_path      = null
  }

  assert {
    condition = (
      length(aws_dynamodb_table.this) + length(aws_lambda_function.aggregator) + length(aws_lambda_function.query)
      + length(aws_lambda_event_source_mapping.aggregator) + length(aws_sqs_queue.failures) + length(aws_sqs_queue.recount_bands) + length(aws_lambda_event_source_mapping.band_records)
      + length(aws_iam_role.aggregator) + length(aws_iam_role.query) == 0
    )
    error_message = "create = false must create nothing"
  }

  assert {
    condition     = output.table_arn == null && output.query_function_arn == null && output.aggregator_role_arn == null
    error_message = "create = false must leave every output null"
  }
}

run "roles_take_the_path_and_the_permissions_boundary" {
  command = plan

  variables {
    role_path                 = "/service-roles/"
    role_permissions_boundary = "arn:aws:iam::123456789012:policy/platform-boundary"
  }

  assert {
    condition = alltrue([
      for role in [aws_iam_role.aggregator[0], aws_iam_role.query[0]] :
      role.path == "/service-roles/" && role.permissions_boundary == "arn:aws:iam::123456789012:policy/platform-boundary"
    ])
    error_message = "both roles must carry the path and the permissions boundary"
  }
}

run "a_role_path_without_slashes_is_refused" {
  command = plan

  variables {
    role_path = "service-roles"
  }

  expect_failures = [var.role_path]
}

run "the_table_uses_the_aws_owned_key_unless_a_key_is_given" {
  command = plan

  assert {
    condition     = aws_dynamodb_table.this[0].server_side_encryption[0].enabled == false
    error_message = "without kms_key_arn the table must use the AWS owned key (SSE disabled), not the billed AWS managed key"
  }
}

run "the_table_uses_the_customer_key_when_given" {
  command = plan

  variables {
    kms_key_arn = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
  }

  assert {
    condition = (
      aws_dynamodb_table.this[0].server_side_encryption[0].enabled == true
      && aws_dynamodb_table.this[0].server_side_encryption[0].kms_key_arn == "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    )
    error_message = "with kms_key_arn the table must use that key"
  }
}

run "no_ttl_by_default" {
  command = plan

  assert {
    condition     = length(aws_dynamodb_table.this[0].ttl) == 0 && output.download_ttl_attribute_name == null
    error_message = "without download_ttl_attribute_name the module must not configure TTL"
  }
}

run "a_ttl_attribute_enables_the_tables_ttl" {
  command = plan

  variables {
    download_ttl_attribute_name = "ExpiresAt"
  }

  assert {
    condition     = one(aws_dynamodb_table.this[0].ttl).attribute_name == "ExpiresAt" && one(aws_dynamodb_table.this[0].ttl).enabled
    error_message = "the table's TTL must be enabled on the download attribute"
  }

  assert {
    condition     = jsondecode(one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria[0].filter).pattern).eventName == ["INSERT"]
    error_message = "the mapping must pass INSERTs only, so that expiries (REMOVE) never reach the aggregator"
  }
}

run "the_timestamp_as_ttl_attribute_is_refused" {
  command = plan

  variables {
    download_ttl_attribute_name = "Timestamp"
  }

  expect_failures = [aws_dynamodb_table.this]
}

run "no_alarm_by_default" {
  command = plan

  assert {
    condition     = length(aws_cloudwatch_metric_alarm.this) == 0 && length(aws_sns_topic.alarms) == 0 && output.alarm_sns_topic_arn == null
    error_message = "alarms are off by default"
  }
}

run "alarms_watch_the_stream_the_queue_the_function_the_table_and_the_anomalies" {
  command = plan

  variables {
    create_alarms          = true
    create_alarm_sns_topic = true
  }

  assert {
    condition = toset(keys(aws_cloudwatch_metric_alarm.this)) == toset([
      "iterator_age", "failure_queue_messages", "aggregator_errors", "aggregator_throttles", "table_write_throttles",
      "table_read_throttles", "index_write_throttles", "refused_records", "records_trimmed",
      "previous_stream_watermarks", "failed_aggregates", "throttled_stream_reads", "rejected_records",
      "unsettled_band_records", "replicated_source",
    ])
    error_message = "one alarm per watched metric"
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["iterator_age"].namespace == "AWS/Lambda"
      && aws_cloudwatch_metric_alarm.this["iterator_age"].metric_name == "IteratorAge"
      && aws_cloudwatch_metric_alarm.this["iterator_age"].statistic == "Maximum"
      && aws_cloudwatch_metric_alarm.this["iterator_age"].threshold == 300000
      && aws_cloudwatch_metric_alarm.this["iterator_age"].dimensions == tomap({ FunctionName = "validation-aggregator" })
    )
    error_message = "the iterator age alarm watches the aggregator's IteratorAge maximum, in milliseconds"
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["failure_queue_messages"].namespace == "AWS/SQS"
      && aws_cloudwatch_metric_alarm.this["failure_queue_messages"].metric_name == "ApproximateNumberOfMessagesVisible"
      && aws_cloudwatch_metric_alarm.this["failure_queue_messages"].dimensions == tomap({ QueueName = "validation-aggregator-failures" })
      && aws_cloudwatch_metric_alarm.this["failure_queue_messages"].threshold == 0
    )
    error_message = "the failure queue alarm fires on its first visible message"
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["index_write_throttles"].namespace == "AWS/DynamoDB"
      && aws_cloudwatch_metric_alarm.this["index_write_throttles"].metric_name == "WriteThrottleEvents"
      && aws_cloudwatch_metric_alarm.this["index_write_throttles"].dimensions == tomap({ TableName = "validation-downloads", GlobalSecondaryIndexName = "MonthDownloadsIndex" })
      && aws_cloudwatch_metric_alarm.this["table_write_throttles"].dimensions == tomap({ TableName = "validation-downloads" })
    )
    error_message = "table and index throttling are watched on their own dimensions"
  }

  assert {
    condition     = toset([for purpose in ["refused_records", "records_trimmed", "previous_stream_watermarks", "failed_aggregates", "throttled_stream_reads", "rejected_records"] : aws_cloudwatch_metric_alarm.this[purpose].namespace]) == toset(["MaterializedAggregation"])
    error_message = "anomaly alarms watch Powertools' EMF namespace MaterializedAggregation"
  }

  assert {
    condition     = toset([for purpose in ["refused_records", "records_trimmed", "previous_stream_watermarks", "failed_aggregates", "throttled_stream_reads", "rejected_records"] : aws_cloudwatch_metric_alarm.this[purpose].metric_name]) == toset(["RefusedRecords", "TrimmedRecords", "PreviousStreamWatermarks", "FailedAggregates", "ThrottledStreamReads", "RejectedRecords"])
    error_message = "anomaly alarms watch the aggregator's five anomaly metrics"
  }

  assert {
    condition     = alltrue([for purpose in ["refused_records", "records_trimmed", "previous_stream_watermarks", "failed_aggregates", "throttled_stream_reads", "rejected_records"] : aws_cloudwatch_metric_alarm.this[purpose].dimensions["service"] == "validation-aggregator" && length(aws_cloudwatch_metric_alarm.this[purpose].dimensions) == 1])
    error_message = "anomaly alarms use Powertools' one default dimension, service = the aggregator's function name"
  }

  assert {
    condition     = alltrue([for purpose in ["refused_records", "records_trimmed", "previous_stream_watermarks", "failed_aggregates", "rejected_records"] : aws_cloudwatch_metric_alarm.this[purpose].statistic == "Sum" && aws_cloudwatch_metric_alarm.this[purpose].threshold == 0])
    error_message = "anomaly alarms fire on the first occurrence"
  }

  assert {
    condition     = alltrue([for alarm in aws_cloudwatch_metric_alarm.this : alarm.treat_missing_data == "notBreaching" && alarm.comparison_operator == "GreaterThanThreshold"])
    error_message = "an idle pipeline must not alarm"
  }

  assert {
    condition     = aws_sns_topic.alarms[0].name == "validation-alarms" && aws_sns_topic.alarms[0].kms_master_key_id == null
    error_message = "without a customer key the created topic is unencrypted: CloudWatch alarms cannot publish to a topic under alias/aws/sns"
  }
}

run "the_alarm_topic_uses_the_customer_key_when_given" {
  command = plan

  variables {
    create_alarms          = true
    create_alarm_sns_topic = true
    kms_key_arn            = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
  }

  assert {
    condition     = aws_sns_topic.alarms[0].kms_master_key_id == "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    error_message = "with kms_key_arn the alarms' topic is encrypted with that key (whose policy must let cloudwatch.amazonaws.com use it)"
  }
}

run "no_setting_puts_the_alarm_topic_under_the_aws_managed_key" {
  command = plan

  variables {
    create_alarms          = true
    create_alarm_sns_topic = true
    kms_key_arn            = null
  }

  assert {
    condition     = !contains(["alias/aws/sns", "aws/sns"], coalesce(aws_sns_topic.alarms[0].kms_master_key_id, "none"))
    error_message = "CloudWatch alarms cannot publish to a topic encrypted with the AWS managed key alias/aws/sns"
  }
}

run "alarms_notify_a_given_topic" {
  command = plan

  variables {
    create_alarms       = true
    alarm_sns_topic_arn = "arn:aws:sns:us-east-1:123456789012:platform-alarms"
  }

  assert {
    condition     = length(aws_sns_topic.alarms) == 0 && output.alarm_sns_topic_arn == "arn:aws:sns:us-east-1:123456789012:platform-alarms"
    error_message = "a given topic is used, not created"
  }

  assert {
    condition     = alltrue([for alarm in aws_cloudwatch_metric_alarm.this : alarm.alarm_actions == toset(["arn:aws:sns:us-east-1:123456789012:platform-alarms"]) && alarm.ok_actions == toset(["arn:aws:sns:us-east-1:123456789012:platform-alarms"])])
    error_message = "every alarm notifies the given topic on ALARM and OK"
  }
}

run "an_iterator_age_threshold_below_a_minute_is_refused" {
  command = plan

  variables {
    create_alarms                        = true
    alarm_iterator_age_threshold_seconds = 10
  }

  expect_failures = [var.alarm_iterator_age_threshold_seconds]
}

run "a_topic_name_instead_of_an_arn_is_refused" {
  command = plan

  variables {
    create_alarms       = true
    alarm_sns_topic_arn = "platform-alarms"
  }

  expect_failures = [var.alarm_sns_topic_arn]
}

run "the_lineage_sweep_is_scheduled_every_15_minutes_by_default" {
  command = plan

  assert {
    condition     = aws_scheduler_schedule.lineage_sweep[0].schedule_expression == "rate(15 minutes)"
    error_message = "the lineage sweep must be scheduled every 15 minutes by default"
  }

  assert {
    condition     = aws_scheduler_schedule.lineage_sweep[0].flexible_time_window[0].mode == "OFF"
    error_message = "the lineage sweep must run at its times"
  }
}

run "no_lineage_sweep_schedule_creates_no_schedule" {
  command = plan

  variables {
    lineage_sweep_schedule = null
  }

  assert {
    condition     = length(aws_scheduler_schedule.lineage_sweep) == 0 && length(aws_iam_role.lineage_sweep) == 0
    error_message = "lineage_sweep_schedule = null must create no schedule and no role"
  }
}

run "a_lineage_sweep_schedule_that_is_no_expression_is_refused" {
  command = plan

  variables {
    lineage_sweep_schedule = "every 15 minutes"
  }

  expect_failures = [var.lineage_sweep_schedule]
}

run "a_lineage_sweep_schedule_a_day_apart_is_refused" {
  command = plan

  variables {
    lineage_sweep_schedule = "rate(1 day)"
  }

  expect_failures = [var.lineage_sweep_schedule]
}

run "a_lineage_sweep_schedule_of_6_hours_plans" {
  command = plan

  variables {
    lineage_sweep_schedule = "rate(6 hours)"
  }

  assert {
    condition     = aws_scheduler_schedule.lineage_sweep[0].schedule_expression == "rate(6 hours)"
    error_message = "rate(6 hours) is the longest schedule allowed"
  }
}

run "the_guides_layout_filters_out_aggregate_writes" {
  command = plan

  assert {
    condition = jsondecode(one(one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter).pattern) == {
      eventName = ["INSERT"]
      dynamodb  = { NewImage = { Month = { S = [{ exists = false }] } } }
    }
    error_message = "where aggregates share the table, only INSERTs without the period attribute may pass"
  }

  assert {
    condition     = length(aws_dynamodb_table.aggregates) == 0 && aws_lambda_function.aggregator[0].environment[0].variables["AGGREGATES_TABLE_NAME"] == "validation-downloads"
    error_message = "by default the aggregates live beside the downloads, in one table"
  }
}

run "a_separate_aggregates_table_takes_the_index_and_the_aggregates" {
  command = plan

  variables {
    separate_aggregates_table = true
  }

  assert {
    condition     = length(aws_dynamodb_table.this[0].global_secondary_index) == 0 && toset([for attribute in aws_dynamodb_table.this[0].attribute : attribute.name]) == toset(["songID", "SK"])
    error_message = "the downloads table carries no index when the aggregates have a table of their own"
  }

  assert {
    condition     = aws_dynamodb_table.aggregates[0].name == "validation-aggregates" && one([for index in aws_dynamodb_table.aggregates[0].global_secondary_index : index.range_key]) == "LeaderboardOrder" && aws_dynamodb_table.aggregates[0].stream_enabled != true
    error_message = "the aggregates table holds the sparse index, and has no stream"
  }

  assert {
    condition     = jsondecode(one(one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter).pattern) == { eventName = ["INSERT"] }
    error_message = "with the aggregates elsewhere, every INSERT of the stream is a download"
  }

  assert {
    condition     = aws_lambda_function.aggregator[0].environment[0].variables["AGGREGATES_TABLE_NAME"] == "validation-aggregates" && aws_lambda_function.query[0].environment[0].variables["AGGREGATES_TABLE_NAME"] == "validation-aggregates" && aws_lambda_function.aggregator[0].environment[0].variables["TABLE_NAME"] == "validation-downloads"
    error_message = "the aggregator reads the downloads' stream and writes the aggregates table, which the query function reads"
  }
}

run "a_source_table_is_read_and_never_changed" {
  command = plan

  variables {
    source_table_name  = "platform"
    source_item_filter = { attribute = "type", value = "DOWNLOAD" }
  }

  assert {
    condition     = length(aws_dynamodb_table.this) == 0 && aws_dynamodb_table.aggregates[0].name == "validation-aggregates"
    error_message = "with a source table the module creates no downloads table, and keeps aggregates in its own"
  }

  assert {
    condition     = aws_lambda_event_source_mapping.aggregator[0].event_source_arn == "arn:aws:dynamodb:eu-west-1:123456789012:table/platform/stream/2025-01-01T00:00:00.000"
    error_message = "the aggregator reads the source table's stream"
  }

  assert {
    condition = jsondecode(one(one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter).pattern) == {
      eventName = ["INSERT"]
      dynamodb  = { NewImage = { type = { S = ["DOWNLOAD"] } } }
    }
    error_message = "only INSERTs of items that source_item_filter marks as downloads pass"
  }

  assert {
    condition     = aws_lambda_function.aggregator[0].environment[0].variables["TABLE_NAME"] == "platform" && aws_lambda_function.aggregator[0].environment[0].variables["SOURCE_ITEM_ATTRIBUTE"] == "type" && aws_lambda_function.aggregator[0].environment[0].variables["SOURCE_ITEM_VALUE"] == "DOWNLOAD"
    error_message = "the aggregator knows the source table and the rule that marks a download"
  }

  assert {
    condition     = output.aggregates_table_name == "validation-aggregates" && output.table_name == "platform"
    error_message = "the outputs name the source table and the aggregates table with its index"
  }
}

run "a_source_table_without_a_stream_is_refused" {
  command = plan

  variables {
    source_table_name = "platform"
  }

  override_data {
    target = data.aws_dynamodb_table.source
    values = { stream_enabled = false, stream_view_type = "", replica = [] }
  }

  expect_failures = [data.aws_dynamodb_table.source]
}

run "a_source_table_whose_stream_carries_keys_only_is_refused" {
  command = plan

  variables {
    source_table_name = "platform"
  }

  override_data {
    target = data.aws_dynamodb_table.source
    values = { stream_enabled = true, stream_view_type = "KEYS_ONLY", replica = [] }
  }

  expect_failures = [data.aws_dynamodb_table.source]
}

run "a_source_table_under_the_aws_owned_key_grants_no_key" {
  command = plan

  variables {
    source_table_name = "platform"
  }

  override_data {
    target = data.aws_dynamodb_table.source
    values = { stream_enabled = true, stream_view_type = "NEW_IMAGE", replica = [], server_side_encryption = [] }
  }

  assert {
    condition     = !anytrue([for statement in data.aws_iam_policy_document.aggregator[0].statement : statement.sid == "DecryptTheSourceTable"])
    error_message = "no key statement without a key"
  }
}

run "a_global_source_table_is_refused_unless_this_region_aggregates" {
  command = plan

  variables {
    source_table_name = "platform"
  }

  override_data {
    target = data.aws_dynamodb_table.source
    values = { stream_enabled = true, stream_view_type = "NEW_IMAGE", replica = [{ region_name = "us-east-1" }] }
  }

  expect_failures = [data.aws_dynamodb_table.source]
}

run "a_global_source_table_plans_in_the_region_named_to_aggregate" {
  command = plan

  variables {
    source_table_name               = "platform"
    global_table_aggregating_region = "eu-west-1"
  }

  override_data {
    target = data.aws_dynamodb_table.source
    values = { stream_enabled = true, stream_view_type = "NEW_IMAGE", replica = [{ region_name = "us-east-1" }] }
  }

  assert {
    condition     = aws_dynamodb_table.aggregates[0].name == "validation-aggregates"
    error_message = "the named region aggregates"
  }
}

run "a_ttl_attribute_on_a_source_table_is_refused" {
  command = plan

  variables {
    source_table_name           = "platform"
    download_ttl_attribute_name = "ExpiresAt"
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "a_source_item_filter_on_the_entity_is_refused" {
  command = plan

  variables {
    source_table_name  = "platform"
    source_item_filter = { attribute = "songID", value = "x" }
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "backfill_claims_add_the_claims_table_the_aggregator_claims_in" {
  command = plan

  variables {
    source_table_name = "platform"
    backfill_claims   = true
  }

  assert {
    condition     = aws_dynamodb_table.claims[0].name == "validation-claims" && aws_dynamodb_table.claims[0].hash_key == "ClaimKey"
    error_message = "backfill_claims creates <name>-claims, keyed by the claim"
  }

  assert {
    condition     = aws_lambda_function.aggregator[0].environment[0].variables["CLAIMS_TABLE_NAME"] == "validation-claims"
    error_message = "the aggregator claims every download there"
  }
}

run "claims_beside_sums_are_refused" {
  command = plan

  variables {
    backfill_claims    = true
    sum_attribute_name = "Revenue"
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "no_claims_by_default" {
  command = plan

  assert {
    condition     = length(aws_dynamodb_table.claims) == 0 && aws_lambda_function.aggregator[0].environment[0].variables["CLAIMS_TABLE_NAME"] == ""
    error_message = "without backfill_claims the aggregator claims nothing"
  }

  assert {
    condition     = aws_lambda_function.aggregator[0].environment[0].variables["LEDGER"] == "false" && output.claims_table_name == null
    error_message = "no ledger by default"
  }
}

run "without_retractions_the_stream_carries_new_images_and_only_inserts_pass" {
  command = plan

  assert {
    condition     = aws_dynamodb_table.this[0].stream_view_type == "NEW_IMAGE" && aws_lambda_function.aggregator[0].environment[0].variables["RETRACTIONS"] == "false"
    error_message = "by default the stream keeps its view type and the aggregator follows no deletion or edit"
  }

  assert {
    condition     = length(one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter) == 1
    error_message = "by default the mapping has the one INSERT filter"
  }
}

run "retractions_pass_the_changes_of_downloads_but_not_of_aggregates" {
  command = plan

  variables {
    retractions = true
  }

  assert {
    condition     = aws_dynamodb_table.this[0].stream_view_type == "NEW_AND_OLD_IMAGES" && aws_lambda_function.aggregator[0].environment[0].variables["RETRACTIONS"] == "true"
    error_message = "with retractions the stream carries old images and the aggregator takes them back"
  }

  assert {
    condition     = length(one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter) == 4
    error_message = "the INSERT filter, one for MODIFYs and two for REMOVEs"
  }

  assert {
    condition = anytrue([for filter in one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter : jsondecode(filter.pattern) == {
      eventName = ["INSERT"]
      dynamodb  = { NewImage = { Month = { S = [{ exists = false }] } } }
    }])
    error_message = "the INSERT filter stays as it is"
  }

  assert {
    condition = anytrue([for filter in one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter : jsondecode(filter.pattern) == {
      eventName = ["MODIFY"]
      dynamodb  = { OldImage = { Month = { S = [{ exists = false }] }, DownloadCount = { N = [{ exists = false }] } } }
    }])
    error_message = "a MODIFY passes when its old image carries neither the period nor the count"
  }

  assert {
    condition = anytrue([for filter in one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter : jsondecode(filter.pattern) == {
      eventName    = ["REMOVE"]
      userIdentity = { principalId = [{ exists = false }] }
      dynamodb     = { OldImage = { Month = { S = [{ exists = false }] }, DownloadCount = { N = [{ exists = false }] } } }
    }])
    error_message = "a REMOVE of a download by no named principal passes"
  }

  assert {
    condition = anytrue([for filter in one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter : jsondecode(filter.pattern) == {
      eventName    = ["REMOVE"]
      userIdentity = { principalId = [{ anything-but = ["dynamodb.amazonaws.com"] }] }
      dynamodb     = { OldImage = { Month = { S = [{ exists = false }] }, DownloadCount = { N = [{ exists = false }] } } }
    }])
    error_message = "a REMOVE of a download by any principal but DynamoDB's TTL passes"
  }
}

run "retractions_on_a_source_table_pass_changes_into_and_out_of_the_marker" {
  command = plan

  variables {
    source_table_name  = "platform"
    source_item_filter = { attribute = "type", value = "DOWNLOAD" }
    retractions        = true
    ledger             = true
  }

  assert {
    condition     = length(one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter) == 5
    error_message = "five filters: AWS's default quota per mapping"
  }

  assert {
    condition = anytrue([for filter in one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter : jsondecode(filter.pattern) == {
      eventName = ["MODIFY"]
      dynamodb  = { OldImage = { type = { S = ["DOWNLOAD"] } } }
    }])
    error_message = "a MODIFY of a marked item passes"
  }

  assert {
    condition = anytrue([for filter in one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter : jsondecode(filter.pattern) == {
      eventName = ["MODIFY"]
      dynamodb  = { NewImage = { type = { S = ["DOWNLOAD"] } } }
    }])
    error_message = "a MODIFY that marks an item passes"
  }

  assert {
    condition = anytrue([for filter in one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter : jsondecode(filter.pattern) == {
      eventName    = ["REMOVE"]
      userIdentity = { principalId = [{ anything-but = ["dynamodb.amazonaws.com"] }] }
      dynamodb     = { OldImage = { type = { S = ["DOWNLOAD"] } } }
    }])
    error_message = "a REMOVE of a marked item by any principal but DynamoDB's TTL passes"
  }
}

run "retractions_on_a_source_table_whose_stream_has_no_old_images_are_refused" {
  command = plan

  variables {
    source_table_name = "platform"
    retractions       = true
    ledger            = true
  }

  override_data {
    target = data.aws_dynamodb_table.source
    values = { stream_enabled = true, stream_view_type = "NEW_IMAGE", replica = [] }
  }

  expect_failures = [data.aws_dynamodb_table.source]
}

run "the_first_reached_tie_break_reaches_the_aggregator" {
  command = plan

  variables {
    leaderboard_tie_break = "first_reached"
  }

  assert {
    condition     = aws_lambda_function.aggregator[0].environment[0].variables.LEADERBOARD_TIE_BREAK == "first_reached"
    error_message = "the aggregator is told the tie-break"
  }
}

run "an_unknown_tie_break_is_refused" {
  command = plan

  variables {
    leaderboard_tie_break = "oldest"
  }

  expect_failures = [var.leaderboard_tie_break]
}

run "the_first_reached_tie_break_with_retractions_is_refused" {
  command = plan

  variables {
    leaderboard_tie_break = "first_reached"
    retractions           = true
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "the_first_reached_tie_break_in_ledger_mode_is_refused" {
  command = plan

  variables {
    leaderboard_tie_break = "first_reached"
    retractions           = true
    ledger                = true
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "the_first_reached_tie_break_beside_backfill_claims_is_refused" {
  command = plan

  variables {
    leaderboard_tie_break = "first_reached"
    backfill_claims       = true
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "retractions_beside_backfill_claims_are_refused" {
  command = plan

  variables {
    source_table_name = "platform"
    backfill_claims   = true
    retractions       = true
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "retractions_beside_backfill_claims_on_the_modules_own_table_are_refused" {
  command = plan

  variables {
    backfill_claims = true
    retractions     = true
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "ledger_mode_keeps_the_claims_table_as_the_ledger_and_follows_changes" {
  command = plan

  variables {
    source_table_name  = "platform"
    source_item_filter = { attribute = "type", value = "DOWNLOAD" }
    retractions        = true
    ledger             = true
  }

  assert {
    condition     = aws_dynamodb_table.claims[0].name == "validation-claims" && aws_dynamodb_table.claims[0].hash_key == "ClaimKey"
    error_message = "ledger mode creates <name>-claims, keyed by the claim: the ledger"
  }

  assert {
    condition     = aws_lambda_function.aggregator[0].environment[0].variables["LEDGER"] == "true" && aws_lambda_function.aggregator[0].environment[0].variables["CLAIMS_TABLE_NAME"] == "validation-claims" && aws_lambda_function.aggregator[0].environment[0].variables["RETRACTIONS"] == "true"
    error_message = "the aggregator keeps its ledger in the claims table and follows edits and deletions"
  }

  assert {
    condition     = anytrue([for statement in data.aws_iam_policy_document.aggregator[0].statement : statement.sid == "ClaimDownloads"])
    error_message = "the aggregator may write the ledger"
  }

  assert {
    condition     = length(one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter) == 5
    error_message = "the INSERT filter and the four of retractions with a marker"
  }

  assert {
    condition = anytrue([for filter in one(aws_lambda_event_source_mapping.aggregator[0].filter_criteria).filter : jsondecode(filter.pattern) == {
      eventName    = ["REMOVE"]
      userIdentity = { principalId = [{ anything-but = ["dynamodb.amazonaws.com"] }] }
      dynamodb     = { OldImage = { type = { S = ["DOWNLOAD"] } } }
    }])
    error_message = "a REMOVE of a marked item by any principal but DynamoDB's TTL passes, as with retractions"
  }

  assert {
    condition     = output.claims_table_name == "validation-claims"
    error_message = "the claims table's output names the ledger"
  }
}

run "ledger_mode_on_the_modules_own_table_plans" {
  command = plan

  variables {
    retractions = true
    ledger      = true
  }

  assert {
    condition     = aws_dynamodb_table.claims[0].name == "validation-claims" && aws_dynamodb_table.this[0].stream_view_type == "NEW_AND_OLD_IMAGES" && aws_lambda_function.aggregator[0].environment[0].variables["LEDGER"] == "true"
    error_message = "ledger mode on the module's own table: the ledger, and a stream with old images"
  }
}

run "the_defaults_take_two_readers_per_shard_with_bounded_retries" {
  command = plan

  assert {
    condition     = aws_lambda_function.aggregator[0].environment[0].variables["STREAM_READERS"] == "2"
    error_message = "the aggregator reads its shards itself by default: two readers per shard"
  }

  assert {
    condition     = aws_lambda_event_source_mapping.aggregator[0].maximum_retry_attempts == 10 && aws_lambda_event_source_mapping.aggregator[0].maximum_record_age_in_seconds == 3600 && aws_lambda_event_source_mapping.aggregator[0].bisect_batch_on_function_error == true
    error_message = "by default the mapping retries a failing batch a bounded number of times, bisected, as before"
  }
}

run "ledger_mode_keeps_two_readers_per_shard_by_default" {
  command = plan

  variables {
    retractions = true
    ledger      = true
  }

  assert {
    condition     = aws_lambda_function.aggregator[0].environment[0].variables["STREAM_READERS"] == "2" && aws_lambda_event_source_mapping.aggregator[0].maximum_retry_attempts == 10 && aws_lambda_event_source_mapping.aggregator[0].maximum_record_age_in_seconds == 3600
    error_message = "ledger mode alone changes neither the readers nor the mapping's retries"
  }
}

run "one_stream_reader_in_ledger_mode_retries_until_the_records_expire" {
  command = plan

  variables {
    source_table_name  = "platform"
    source_item_filter = { attribute = "type", value = "DOWNLOAD" }
    retractions        = true
    ledger             = true
    stream_readers     = 1
  }

  assert {
    condition     = aws_lambda_function.aggregator[0].environment[0].variables["STREAM_READERS"] == "1" && aws_lambda_function.aggregator[0].environment[0].variables["LEDGER"] == "true"
    error_message = "the aggregator is told it is not a reader of the shards, in ledger mode"
  }

  assert {
    condition     = aws_lambda_event_source_mapping.aggregator[0].maximum_retry_attempts == -1 && aws_lambda_event_source_mapping.aggregator[0].maximum_record_age_in_seconds == -1
    error_message = "with one reader the mapping retries a failing batch until its records expire (-1 and -1)"
  }

  assert {
    condition     = aws_lambda_event_source_mapping.aggregator[0].bisect_batch_on_function_error == true && aws_lambda_event_source_mapping.aggregator[0].parallelization_factor == 1
    error_message = "with one reader the mapping still bisects a failing batch, one batch per shard at a time"
  }

  assert {
    condition     = length(one(aws_lambda_event_source_mapping.aggregator[0].destination_config).on_failure) == 1
    error_message = "a batch the mapping gives up still reaches the failure queue, for recover to read it back"
  }

  assert {
    condition     = anytrue([for statement in data.aws_iam_policy_document.aggregator[0].statement : statement.sid == "ReadTheStreams" && toset(statement.actions) == toset(["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"])])
    error_message = "the aggregator still reads a given-up range back and the shards' lineage"
  }
}

run "one_stream_reader_ignores_the_bounded_retry_settings" {
  command = plan

  variables {
    retractions                   = true
    ledger                        = true
    stream_readers                = 1
    maximum_record_age_in_seconds = 60
  }

  assert {
    condition     = aws_lambda_event_source_mapping.aggregator[0].maximum_record_age_in_seconds == -1
    error_message = "with one reader the record age is -1 whatever maximum_record_age_in_seconds says, so its window check does not apply"
  }
}

run "one_stream_reader_without_ledger_is_refused" {
  command = plan

  variables {
    stream_readers = 1
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "one_stream_reader_with_retractions_but_without_ledger_is_refused" {
  command = plan

  variables {
    retractions    = true
    stream_readers = 1
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "three_stream_readers_are_refused" {
  command = plan

  variables {
    retractions    = true
    ledger         = true
    stream_readers = 3
  }

  expect_failures = [var.stream_readers]
}

run "ledger_without_retractions_is_refused" {
  command = plan

  variables {
    ledger = true
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "ledger_beside_backfill_claims_is_refused" {
  command = plan

  variables {
    retractions     = true
    ledger          = true
    backfill_claims = true
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "retractions_on_an_attached_table_without_ledger_are_refused" {
  command = plan

  variables {
    source_table_name = "platform"
    retractions       = true
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "ledger_mode_on_a_global_source_table_is_refused" {
  command = plan

  variables {
    source_table_name               = "platform"
    global_table_aggregating_region = "eu-west-1"
    retractions                     = true
    ledger                          = true
  }

  override_data {
    target = data.aws_dynamodb_table.source
    values = { stream_enabled = true, stream_view_type = "NEW_AND_OLD_IMAGES", replica = [{ region_name = "us-east-1" }] }
  }

  expect_failures = [data.aws_dynamodb_table.source]
}

run "retractions_without_ledger_on_a_global_source_table_are_refused" {
  command = plan

  variables {
    source_table_name               = "platform"
    global_table_aggregating_region = "eu-west-1"
    retractions                     = true
  }

  override_data {
    target = data.aws_dynamodb_table.source
    values = { stream_enabled = true, stream_view_type = "NEW_AND_OLD_IMAGES", replica = [{ region_name = "us-east-1" }] }
  }

  expect_failures = [data.aws_dynamodb_table.source]
}

run "a_local_time_zone_with_seasons_plans_and_reaches_both_functions" {
  command = plan

  variables {
    leaderboard_periods   = ["day", "month", "season"]
    leaderboard_time_zone = "America/New_York"
    leaderboard_season    = { start = "2026-01-05", length_days = 28 }
  }

  assert {
    condition     = aws_lambda_function.aggregator[0].environment[0].variables["LEADERBOARD_TIME_ZONE"] == "America/New_York" && aws_lambda_function.query[0].environment[0].variables["LEADERBOARD_TIME_ZONE"] == "America/New_York"
    error_message = "both functions must bucket by the zone"
  }

  assert {
    condition     = aws_lambda_function.query[0].environment[0].variables["LEADERBOARD_SEASON_START"] == "2026-01-05" && aws_lambda_function.aggregator[0].environment[0].variables["LEADERBOARD_SEASON_LENGTH_DAYS"] == "28"
    error_message = "both functions must know the seasons"
  }
}

run "a_made_up_time_zone_is_refused" {
  command = plan

  variables {
    leaderboard_time_zone = "Mars/Olympus_Mons"
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "a_season_period_without_leaderboard_season_is_refused" {
  command = plan

  variables {
    leaderboard_periods = ["day", "season"]
  }

  expect_failures = [aws_lambda_function.aggregator]
}

run "a_season_of_no_days_is_refused" {
  command = plan

  variables {
    leaderboard_periods = ["season"]
    leaderboard_season  = { start = "2026-01-05", length_days = 0 }
  }

  expect_failures = [var.leaderboard_season]
}

run "a_season_starting_on_no_real_date_is_refused" {
  command = plan

  variables {
    leaderboard_periods = ["season"]
    leaderboard_season  = { start = "2026-02-30", length_days = 28 }
  }

  expect_failures = [var.leaderboard_season]
}

run "retractions_on_the_modules_own_table_with_a_replica_added_since_are_refused" {
  command = apply

  variables {
    retractions = true
  }

  override_data {
    target = data.aws_dynamodb_table.own
    values = { replica = [{ region_name = "us-east-1" }] }
  }

  expect_failures = [data.aws_dynamodb_table.own]
}

run "retractions_on_the_modules_own_table_without_replicas_apply" {
  command = apply

  variables {
    retractions = true
  }

  assert {
    condition     = length(data.aws_dynamodb_table.own) == 1
    error_message = "with retractions the module's own table must be read back for replicas"
  }
}
