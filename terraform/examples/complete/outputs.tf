output "table_name" {
  description = "Name of the downloads table."
  value       = module.leaderboard.table_name
}

output "query_function_arn" {
  description = "ARN of the query function that answers leaderboard requests."
  value       = module.leaderboard.query_function_arn
}

output "failure_queue_url" {
  description = "URL of the failure queue (see the module's docs/operations.md, Reconcile and recover)."
  value       = module.leaderboard.failure_queue_url
}

output "cloudwatch_metric_alarm_arns" {
  description = "ARNs of the alarms by purpose."
  value       = module.leaderboard.cloudwatch_metric_alarm_arns
}

output "alarm_sns_topic_arn" {
  description = "SNS topic the alarms notify: subscribe the on-call's endpoint to it."
  value       = module.leaderboard.alarm_sns_topic_arn
}

output "kms_key_arn" {
  description = "ARN of the key that encrypts the stack's data."
  value       = aws_kms_key.data.arn
}
