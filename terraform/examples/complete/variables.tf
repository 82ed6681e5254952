variable "region" {
  description = "AWS region of the stack."
  type        = string
  default     = "eu-west-1"
}

variable "name" {
  description = "Prefix of every resource name."
  type        = string
  default     = "leaderboard-complete"
}

variable "package_s3_bucket" {
  description = "Bucket holding the release's zips, uploaded under dynamodb-materialized-aggregation/<version>/."
  type        = string
}

variable "release_manifest_path" {
  description = "The release's manifest.json (make release VERSION=...), kept in the platform repository: version, runtime and the zips' hashes are read from it."
  type        = string
  default     = "release/manifest.json"
}

variable "role_permissions_boundary" {
  description = "ARN of the permissions boundary the platform requires on roles; null: none."
  type        = string
  default     = null
}

variable "tags" {
  description = "Tags of every resource."
  type        = map(string)
  default     = { team = "music", service = "leaderboards" }
}
