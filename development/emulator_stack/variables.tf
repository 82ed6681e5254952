# Every variable a caller of leaderboard_dev.terraform_stack.Stack passes (the acceptance tests,
# the demo, the benchmark); tests/unit/development/test_emulator_stack.py keeps this list complete.

variable "name" {
  description = "Prefix of every resource name (the stack's workspace name)."
  type        = string
  default     = "leaderboard-demo"
}

variable "region" {
  description = "Region the emulator answers for."
  type        = string
  default     = "us-east-1"
}

variable "aws_endpoint_url" {
  description = "The LocalStack-compatible endpoint (for example http://127.0.0.1:4566); empty: the provider's default endpoints and credentials."
  type        = string
  default     = ""
}

variable "aggregator_package_path" {
  description = "Aggregator zip to deploy (a faulty build, the guide's handler); null: dist/aggregator.zip of this repository."
  type        = string
  default     = null
}

variable "query_package_path" {
  description = "Query zip to deploy; null: dist/query.zip of this repository."
  type        = string
  default     = null
}

variable "batch_size" {
  description = "Most stream records per aggregator invocation."
  type        = number
  default     = 100
}

variable "aggregator_timeout" {
  description = "Timeout (s) of the aggregator, as the module's aggregator_timeout."
  type        = number
  default     = 60
}

variable "maximum_batching_window_in_seconds" {
  description = "How long the mapping gathers records before invoking the aggregator."
  type        = number
  default     = 1
}

variable "maximum_retry_attempts" {
  description = "Retries of a failing batch before it goes to the failure queue."
  type        = number
  default     = 10
}

variable "maximum_record_age_in_seconds" {
  description = "Age after which a failing record goes to the failure queue."
  type        = number
  default     = 3600
}

variable "tumbling_window_in_seconds" {
  description = "Length of the mapping's tumbling window (its events name the shard)."
  type        = number
  default     = 60
}

variable "aggregate_writes" {
  description = "per_batch or per_window: when the aggregator writes each aggregate."
  type        = string
  default     = "per_batch"
}

variable "leaderboard_shards" {
  description = "Index partitions per month (1: the guide's layout)."
  type        = number
  default     = 1
}

variable "leaderboard_tie_break" {
  description = "How equal counts list: entity, or first_reached (the older latest counted download first)."
  type        = string
  default     = "entity"
}

variable "leaderboard_shards_previous" {
  description = "While changing leaderboard_shards: the previous value; null otherwise."
  type        = number
  default     = null
}

variable "count_attribute_name" {
  description = "Attribute holding an aggregate's count (the module's default: DownloadCount)."
  type        = string
  default     = "DownloadCount"
}

variable "download_ttl_attribute_name" {
  description = "Attribute holding a download's expiry; null: no TTL."
  type        = string
  default     = null
}

variable "leaderboard_periods" {
  description = "Periods with a leaderboard (hour, day, week, month, year, all)."
  type        = list(string)
  default     = ["month"]
}

variable "leaderboard_time_zone" {
  description = "IANA zone whose local clock every bucket follows."
  type        = string
  default     = "UTC"
}

variable "leaderboard_season" {
  description = "Seasons for the period season ({ start, length_days }); null: none."
  type = object({
    start       = string
    length_days = number
  })
  default = null
}

variable "category_attribute_name" {
  description = "Attribute of a download naming its category; null: no category boards."
  type        = string
  default     = null
}

variable "sum_attribute_name" {
  description = "Number attribute of a download added instead of 1; null: boards count."
  type        = string
  default     = null
}

variable "create_alarms" {
  description = "Create the module's CloudWatch alarms (LocalStack keeps their attributes; MiniStack does not)."
  type        = bool
  default     = false
}

variable "create_alarm_sns_topic" {
  description = "With create_alarms: the module creates the SNS topic the alarms notify."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags of every resource."
  type        = map(string)
  default     = { Project = "dynamodb-materialized-aggregation", Stack = "emulator" }
}

variable "source_table_name" {
  description = "A table created outside the module whose downloads it counts; null: the module creates one."
  type        = string
  default     = null
}

variable "separate_aggregates_table" {
  description = "Keep the aggregates in <name>-aggregates even with the module's own downloads table."
  type        = bool
  default     = false
}

variable "source_item_filter" {
  description = "The string attribute and value that mark a download among other item types; null: every item."
  type = object({
    attribute = string
    value     = string
  })
  default = null
}

variable "entity_attribute_name" {
  description = "The counted entity's attribute."
  type        = string
  default     = "songID"
}

variable "backfill_claims" {
  description = "The backfill's claims table, in which the aggregator claims every download."
  type        = bool
  default     = false
}

variable "retractions" {
  description = "Follow deletions and edits of downloads (the stream then carries old and new images)."
  type        = bool
  default     = false
}

variable "ledger" {
  description = "Ledger mode: the claims table kept for good as the ledger (with retractions)."
  type        = bool
  default     = false
}

variable "stream_readers" {
  description = "Readers of each stream shard the module takes: 2, or 1 with ledger (the mapping its only steady reader)."
  type        = number
  default     = 2
}
