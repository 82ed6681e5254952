output "table_name" {
  description = "Name of the platform's table, whose downloads are counted."
  value       = module.leaderboard.table_name
}

output "aggregates_table_name" {
  description = "Name of the module's aggregates table, which holds the leaderboard index."
  value       = module.leaderboard.aggregates_table_name
}

output "claims_table_name" {
  description = "Name of the backfill's claims table, null once backfill_claims is false."
  value       = module.leaderboard.claims_table_name
}

output "query_function_arn" {
  description = "ARN of the query function that answers leaderboard requests."
  value       = module.leaderboard.query_function_arn
}

output "cloudwatch_metric_alarm_arns" {
  description = "ARNs of the alarms by purpose."
  value       = module.leaderboard.cloudwatch_metric_alarm_arns
}
