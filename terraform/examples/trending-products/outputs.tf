output "table_name" {
  description = "Name of the table: purchases are written here, the aggregates appear beside them."
  value       = module.trending_products.table_name
}

output "leaderboard_index_name" {
  description = "Name of the sparse index of the aggregates (Board, RevenueOrder)."
  value       = module.trending_products.leaderboard_index_name
}

output "leaderboard_periods" {
  description = "Periods with a board: day and week (ISO 8601), UTC."
  value       = module.trending_products.leaderboard_periods
}

output "query_function_name" {
  description = "Name of the query function (leaderboard-tools top|rank|all --function, or a direct invocation)."
  value       = module.trending_products.query_function_name
}

output "query_function_arn" {
  description = "ARN of the query function that answers the trending requests."
  value       = module.trending_products.query_function_arn
}

output "aggregator_function_name" {
  description = "Name of the aggregator function."
  value       = module.trending_products.aggregator_function_name
}

output "aggregator_log_group_name" {
  description = "Log group of the aggregator, with one 'batch summary' line per invocation."
  value       = module.trending_products.aggregator_log_group_name
}

output "failure_queue_url" {
  description = "URL of the failure queue: purchases rejected as malformed (no Revenue, or not a number) are reported here."
  value       = module.trending_products.failure_queue_url
}

output "cloudwatch_metric_alarm_arns" {
  description = "ARNs of the alarms by purpose."
  value       = module.trending_products.cloudwatch_metric_alarm_arns
}
