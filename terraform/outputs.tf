# With create = false every output is null.

output "table_name" {
  description = "Name of the table holding the downloads, whose stream feeds the aggregator: the module's own, or source_table_name. In the guide's layout it holds the aggregates too."
  value       = local.create ? local.table_name : null
}

output "table_arn" {
  description = "ARN of the table holding the downloads."
  value       = local.table_arn
}

output "table_stream_arn" {
  description = "ARN of the table's stream, which feeds the aggregator."
  value       = local.table_stream_arn
}

output "download_ttl_attribute_name" {
  description = "Attribute on which the table's TTL deletes expired downloads; null without TTL. A recount from raw downloads sees only those not yet expired."
  value       = local.create ? var.download_ttl_attribute_name : null
}

output "leaderboard_index_name" {
  description = "Name of the sparse index (period, order) that answers the leaderboard queries."
  value       = local.create ? var.leaderboard_index_name : null
}

output "leaderboard_index_arn" {
  description = "ARN of the sparse leaderboard index."
  value       = local.leaderboard_index_arn
}

output "leaderboard_shards" {
  description = "Index partitions per period: 1 is the guide's layout, N spreads a period over '<period>#0'..'<period>#N-1'."
  value       = local.create ? var.leaderboard_shards : null
}

output "leaderboard_periods" {
  description = "Periods with a leaderboard (hour, day, week, month, year, all): what the query function serves."
  value       = local.create ? var.leaderboard_periods : null
}

output "aggregator_function_name" {
  description = "Name of the aggregator Lambda."
  value       = one(aws_lambda_function.aggregator[*].function_name)
}

output "aggregator_function_arn" {
  description = "ARN of the aggregator Lambda."
  value       = one(aws_lambda_function.aggregator[*].arn)
}

output "aggregator_role_name" {
  description = "Name of the aggregator's IAM role."
  value       = one(aws_iam_role.aggregator[*].name)
}

output "aggregator_role_arn" {
  description = "ARN of the aggregator's IAM role."
  value       = one(aws_iam_role.aggregator[*].arn)
}

output "aggregator_log_group_name" {
  description = "Log group of the aggregator, with one 'batch summary' line per invocation."
  value       = one(aws_cloudwatch_log_group.aggregator[*].name)
}

output "aggregator_event_source_mapping_uuid" {
  description = "UUID of the stream mapping that invokes the aggregator."
  value       = one(aws_lambda_event_source_mapping.aggregator[*].uuid)
}

output "query_function_name" {
  description = "Name of the query Lambda."
  value       = one(aws_lambda_function.query[*].function_name)
}

output "query_function_arn" {
  description = "ARN of the query Lambda."
  value       = one(aws_lambda_function.query[*].arn)
}

output "query_role_name" {
  description = "Name of the query function's IAM role."
  value       = one(aws_iam_role.query[*].name)
}

output "query_role_arn" {
  description = "ARN of the query function's IAM role."
  value       = one(aws_iam_role.query[*].arn)
}

output "failure_queue_url" {
  description = "URL of the queue receiving batches the mapping gave up on and records the aggregator rejected or refused."
  value       = one(aws_sqs_queue.failures[*].url)
}

output "failure_queue_arn" {
  description = "ARN of the failure queue."
  value       = one(aws_sqs_queue.failures[*].arn)
}

output "recount_band_queue_url" {
  description = "URL of the queue where a repair records each band it opens, delayed toward its deadline, for the aggregator to check then; operators running reconcile --repair or recover need sqs:SendMessage, ReceiveMessage, DeleteMessage and ChangeMessageVisibility on it."
  value       = one(aws_sqs_queue.recount_bands[*].url)
}

output "recount_band_queue_arn" {
  description = "ARN of the queue of the repairs' band records."
  value       = one(aws_sqs_queue.recount_bands[*].arn)
}

output "lineage_sweep_schedule_arn" {
  description = "ARN of the EventBridge Scheduler schedule that invokes the aggregator's lineage sweep (null without lineage_sweep_schedule)."
  value       = one(aws_scheduler_schedule.lineage_sweep[*].arn)
}

output "lineage_sweep_schedule_name" {
  description = "Name of the schedule that invokes the aggregator's lineage sweep (null without lineage_sweep_schedule)."
  value       = one(aws_scheduler_schedule.lineage_sweep[*].name)
}

output "cloudwatch_metric_alarm_arns" {
  description = "ARNs of the alarms by purpose (iterator_age, failure_queue_messages, aggregator_errors, aggregator_throttles, table_write_throttles, table_read_throttles, index_write_throttles, refused_records, records_trimmed, previous_stream_watermarks, failed_aggregates, throttled_stream_reads, unsettled_band_records, rejected_records); empty without create_alarms, null with create = false."
  value       = local.create ? { for purpose, alarm in aws_cloudwatch_metric_alarm.this : purpose => alarm.arn } : null
}

output "cloudwatch_metric_alarm_names" {
  description = "Names of the alarms by purpose; empty without create_alarms."
  value       = local.create ? { for purpose, alarm in aws_cloudwatch_metric_alarm.this : purpose => alarm.alarm_name } : null
}

output "alarm_sns_topic_arn" {
  description = "SNS topic the alarms notify: the one created (create_alarm_sns_topic) or given (alarm_sns_topic_arn); null without."
  value       = local.alarms_enabled ? local.alarm_topic_arn : null
}

output "progress_table_name" {
  description = "Name of the progress table: per stream shard, the checkpoint through which every download is counted (operator tools read it)."
  value       = one(aws_dynamodb_table.progress[*].name)
}

output "progress_table_arn" {
  description = "ARN of the progress table."
  value       = one(aws_dynamodb_table.progress[*].arn)
}

output "aggregates_table_name" {
  description = "Name of the table holding the aggregates and the leaderboard index: the downloads table itself in the guide's layout, <name>-aggregates with source_table_name or separate_aggregates_table."
  value       = local.create ? local.aggregates_table_name : null
}

output "aggregates_table_arn" {
  description = "ARN of the table holding the aggregates and the leaderboard index."
  value       = local.aggregates_table_arn
}

output "claims_table_name" {
  description = "Name of the claims table: the backfill's claims (backfill_claims) or, in ledger mode (ledger), the ledger; null without either."
  value       = one(aws_dynamodb_table.claims[*].name)
}

output "claims_table_arn" {
  description = "ARN of the claims table (backfill_claims or ledger); null without either."
  value       = one(aws_dynamodb_table.claims[*].arn)
}
