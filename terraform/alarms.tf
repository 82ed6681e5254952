# Alarms that show trouble before a leaderboard is visibly wrong (off by default: emulators do not
# keep every alarm attribute, see docs/emulators.md). Each fires on the first sign; treat_missing_data is
# notBreaching because an idle pipeline publishes nothing.
locals {
  alarms_enabled  = local.create && var.create_alarms
  alarm_topic_arn = var.create_alarm_sns_topic ? one(aws_sns_topic.alarms[*].arn) : var.alarm_sns_topic_arn
  alarm_actions   = local.alarm_topic_arn == null ? [] : [local.alarm_topic_arn]

  aggregator_dimensions  = { FunctionName = local.aggregator_name }
  table_dimensions       = { TableName = local.aggregates_table_name }
  anomaly_dimensions     = { service = local.aggregator_name } # Powertools' default EMF dimension: POWERTOOLS_SERVICE_NAME
  anomaly_metric_purpose = "the aggregator's anomaly metric (namespace MaterializedAggregation)"

  alarms = {
    iterator_age = {
      namespace   = "AWS/Lambda", metric = "IteratorAge", dimensions = local.aggregator_dimensions
      statistic   = "Maximum", period = 60, evaluation_periods = 5
      threshold   = var.alarm_iterator_age_threshold_seconds * 1000 # the metric is in milliseconds
      description = "The stream mapping falls behind: the oldest record read is older than ${var.alarm_iterator_age_threshold_seconds} s for 5 minutes (leaderboards lag; records older than maximum_record_age_in_seconds go to the failure queue)."
    }
    failure_queue_messages = {
      namespace   = "AWS/SQS", metric = "ApproximateNumberOfMessagesVisible", dimensions = { QueueName = local.failure_queue_name }
      statistic   = "Maximum", period = 300, evaluation_periods = 1, threshold = 0
      description = "Records the pipeline gave up on or rejected wait in the failure queue: counts may be missing downloads (see docs/operations.md, Alarms)."
    }
    aggregator_errors = {
      namespace   = "AWS/Lambda", metric = "Errors", dimensions = local.aggregator_dimensions
      statistic   = "Sum", period = 300, evaluation_periods = 1, threshold = 0
      description = "The aggregator failed an invocation: a stream batch (the mapping retries it; repeated failures end in the failure queue), a band record (its queue retries it) or a scheduled lineage sweep (a loss report the failure queue refused; Lambda retries it)."
    }
    aggregator_throttles = {
      namespace   = "AWS/Lambda", metric = "Throttles", dimensions = local.aggregator_dimensions
      statistic   = "Sum", period = 300, evaluation_periods = 1, threshold = 0
      description = "The aggregator was throttled (account or reserved concurrency): the stream falls behind, and band records and scheduled sweeps wait."
    }
    table_write_throttles = {
      namespace   = "AWS/DynamoDB", metric = "WriteThrottleEvents", dimensions = local.table_dimensions
      statistic   = "Sum", period = 300, evaluation_periods = 1, threshold = 0
      description = "Writes to the table of the aggregates were throttled (and of the downloads, where they share it; on-demand tables throttle at partition limits too)."
    }
    table_read_throttles = {
      namespace   = "AWS/DynamoDB", metric = "ReadThrottleEvents", dimensions = local.table_dimensions
      statistic   = "Sum", period = 300, evaluation_periods = 1, threshold = 0
      description = "Reads of the table of the aggregates were throttled (the aggregator's reads, leaderboard and song queries)."
    }
    index_write_throttles = {
      namespace   = "AWS/DynamoDB", metric = "WriteThrottleEvents", dimensions = merge(local.table_dimensions, { GlobalSecondaryIndexName = var.leaderboard_index_name })
      statistic   = "Sum", period = 300, evaluation_periods = 1, threshold = 0
      description = "The leaderboard index throttled its replication: it back-pressures aggregate writes to the table (see docs/leaderboard-shards.md)."
    }
    refused_records = {
      namespace   = "MaterializedAggregation", metric = "RefusedRecords", dimensions = local.anomaly_dimensions
      statistic   = "Sum", period = 300, evaluation_periods = 1, threshold = 0
      description = "The aggregator refused records (${local.anomaly_metric_purpose}): they were not counted."
    }
    records_trimmed = {
      namespace   = "MaterializedAggregation", metric = "TrimmedRecords", dimensions = local.anomaly_dimensions
      statistic   = "Sum", period = 300, evaluation_periods = 1, threshold = 0
      description = "The aggregator found records trimmed from the stream before it read them (${local.anomaly_metric_purpose}): run recover, which recounts."
    }
    previous_stream_watermarks = {
      namespace   = "MaterializedAggregation", metric = "PreviousStreamWatermarks", dimensions = local.anomaly_dimensions
      statistic   = "Sum", period = 300, evaluation_periods = 1, threshold = 0
      description = "Aggregates carry watermarks of a previous stream (${local.anomaly_metric_purpose}): the stream was replaced."
    }
    failed_aggregates = {
      namespace   = "MaterializedAggregation", metric = "FailedAggregates", dimensions = local.anomaly_dimensions
      statistic   = "Sum", period = 300, evaluation_periods = 1, threshold = 0
      description = "Aggregate writes failed or were deferred (${local.anomaly_metric_purpose}): the batch is retried."
    }
    throttled_stream_reads = {
      namespace   = "MaterializedAggregation", metric = "ThrottledStreamReads", dimensions = local.anomaly_dimensions
      statistic   = "Sum", period = 300, evaluation_periods = 3, threshold = 0
      description = "The aggregator's own reads of the stream were throttled for 15 minutes (${local.anomaly_metric_purpose}): counts are delayed, not lost; see docs/operations.md, Alarms."
    }
    unsettled_band_records = {
      namespace   = "MaterializedAggregation", metric = "UnsettledBandRecords", dimensions = local.anomaly_dimensions
      statistic   = "Sum", period = 300, evaluation_periods = 1, threshold = 0
      description = "A repair's band record past its deadline could not be settled (${local.anomaly_metric_purpose}): the aggregate could not be read or the failure queue refused the report; it is retried. See docs/operations.md, Alarms."
    }
    replicated_source = {
      namespace   = "MaterializedAggregation", metric = "ReplicatedSource", dimensions = local.anomaly_dimensions
      statistic   = "Sum", period = 300, evaluation_periods = 1, threshold = 0
      description = "The table whose stream the aggregator reads has (or had) a replica while retractions are on (${local.anomaly_metric_purpose}): a replicated expiry cannot be told from a deletion, so the aggregator counts nothing more and recover answers nothing. Detach (retractions = false and ledger = false), or remove the replica and delete the #replicas-seen item by hand after 24 hours; then recount: docs/exactly-once-retractions.md, Replicated tables."
    }
    rejected_records = {
      namespace   = "MaterializedAggregation", metric = "RejectedRecords", dimensions = local.anomaly_dimensions
      statistic   = "Sum", period = 300, evaluation_periods = 1, threshold = 0
      description = "Malformed downloads were rejected to the failure queue (${local.anomaly_metric_purpose})."
    }
  }
}

# CloudWatch publishes alarm notifications to an encrypted topic only under a customer managed key
# whose policy lets cloudwatch.amazonaws.com use it (Amazon SNS Developer Guide, "Enable
# compatibility between event sources from AWS services and encrypted topics": "Use a customer
# managed KMS key", then add the service to "the KMS policy"); the policy of the AWS managed key
# alias/aws/sns cannot be changed, so under it the alarms would never notify. Hence: the customer
# key when given (the key policy of docs/security.md), else no encryption, by choice: a notification holds the
# alarm's name, state and metric, no data of the table.
resource "aws_sns_topic" "alarms" {
  # checkov:skip=CKV_AWS_26: without kms_key_arn the topic is unencrypted on purpose: CloudWatch alarms cannot publish under alias/aws/sns (see the comment above and docs/security.md, Customer managed key).
  count = local.alarms_enabled && var.create_alarm_sns_topic ? 1 : 0

  name              = "${var.name}-alarms"
  kms_master_key_id = var.kms_key_arn
  tags              = var.tags
}

resource "aws_cloudwatch_metric_alarm" "this" {
  for_each = local.alarms_enabled ? local.alarms : {}

  alarm_name          = "${var.name}-${replace(each.key, "_", "-")}"
  alarm_description   = each.value.description
  namespace           = each.value.namespace
  metric_name         = each.value.metric
  dimensions          = each.value.dimensions
  statistic           = each.value.statistic
  period              = each.value.period
  evaluation_periods  = each.value.evaluation_periods
  datapoints_to_alarm = each.value.evaluation_periods
  threshold           = each.value.threshold
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}
