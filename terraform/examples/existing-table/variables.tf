variable "region" {
  description = "AWS region of the stack."
  type        = string
  default     = "eu-west-1"
}

variable "name" {
  description = "Prefix of every resource name."
  type        = string
  default     = "music-leaderboards"
}

variable "source_table_name" {
  description = "Name of the platform's table: keyed PK/SK, with a stream of new and old images."
  type        = string
  default     = "music-platform"
}

variable "backfill_claims" {
  description = "Claims for `leaderboard-tools backfill --table <source_table_name>`, which counts the table's history. Apply false once `leaderboard-tools backfill --table <source_table_name> --release-check` exits 0."
  type        = bool
  default     = true
}

variable "package_s3_bucket" {
  description = "Bucket holding the release's zips, uploaded under dynamodb-materialized-aggregation/<version>/."
  type        = string
}

variable "release_version" {
  description = "Version of the release (make release VERSION=...)."
  type        = string
}

variable "aggregator_package_source_code_hash" {
  description = "files[\"aggregator.zip\"].sha256_base64 of the release's manifest.json."
  type        = string
}

variable "query_package_source_code_hash" {
  description = "files[\"query.zip\"].sha256_base64 of the release's manifest.json."
  type        = string
}
