output "table_name" {
  description = "Name of the table holding raw downloads and their aggregates."
  value       = aws_dynamodb_table.this.name
}

output "table_arn" {
  description = "ARN of the table."
  value       = aws_dynamodb_table.this.arn
}

output "table_stream_arn" {
  description = "ARN of the table's stream, which feeds the aggregator."
  value       = aws_dynamodb_table.this.stream_arn
}

output "leaderboard_index_name" {
  description = "Name of the sparse index (period, count) that answers the leaderboard queries."
  value       = var.leaderboard_index_name
}

output "leaderboard_index_arn" {
  description = "ARN of the sparse leaderboard index."
  value       = local.leaderboard_index_arn
}

output "aggregator_function_name" {
  description = "Name of the aggregator Lambda."
  value       = aws_lambda_function.aggregator.function_name
}

output "aggregator_function_arn" {
  description = "ARN of the aggregator Lambda."
  value       = aws_lambda_function.aggregator.arn
}

output "aggregator_log_group_name" {
  description = "Log group of the aggregator, with one 'batch summary' line per invocation."
  value       = aws_cloudwatch_log_group.aggregator.name
}

output "aggregator_event_source_mapping_uuid" {
  description = "UUID of the stream mapping that invokes the aggregator."
  value       = aws_lambda_event_source_mapping.aggregator.uuid
}

output "query_function_name" {
  description = "Name of the query Lambda."
  value       = aws_lambda_function.query.function_name
}

output "query_function_arn" {
  description = "ARN of the query Lambda."
  value       = aws_lambda_function.query.arn
}

output "failure_queue_url" {
  description = "URL of the queue receiving batches the mapping gave up on and records the aggregator rejected."
  value       = aws_sqs_queue.failures.url
}

output "failure_queue_arn" {
  description = "ARN of the failure queue."
  value       = aws_sqs_queue.failures.arn
}

output "leaderboard_shards" {
  description = "Index partitions per period: 1 is the guide's layout, N spreads a period over '<period>#0'..'<period>#N-1'."
  value       = var.leaderboard_shards
}
