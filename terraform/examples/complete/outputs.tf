output "table_name" {
  description = "Name of the table."
  value       = module.leaderboard.table_name
}

output "table_stream_arn" {
  description = "ARN of the table's stream."
  value       = module.leaderboard.table_stream_arn
}

output "leaderboard_index_name" {
  description = "Name of the sparse leaderboard index."
  value       = module.leaderboard.leaderboard_index_name
}

output "aggregator_function_name" {
  description = "Name of the aggregator Lambda."
  value       = module.leaderboard.aggregator_function_name
}

output "aggregator_log_group_name" {
  description = "Log group of the aggregator."
  value       = module.leaderboard.aggregator_log_group_name
}

output "query_function_name" {
  description = "Name of the query Lambda."
  value       = module.leaderboard.query_function_name
}

output "failure_queue_url" {
  description = "URL of the failure queue."
  value       = module.leaderboard.failure_queue_url
}

output "aggregator_event_source_mapping_uuid" {
  description = "UUID of the stream mapping that invokes the aggregator."
  value       = module.leaderboard.aggregator_event_source_mapping_uuid
}

output "leaderboard_shards" {
  description = "Index partitions per month."
  value       = module.leaderboard.leaderboard_shards
}
