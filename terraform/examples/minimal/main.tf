# The least a stack needs on AWS: a name and a release's zips in S3 (see the repository's README,
# "Using the module from another stack"). Alarms are on, without notification.

provider "aws" {
  region = var.region
}

module "leaderboard" {
  source = "../.."

  name = var.name

  package_s3_bucket                   = var.package_s3_bucket
  aggregator_package_s3_key           = "dynamodb-materialized-aggregation/${var.release_version}/aggregator.zip"
  aggregator_package_source_code_hash = var.aggregator_package_source_code_hash
  query_package_s3_key                = "dynamodb-materialized-aggregation/${var.release_version}/query.zip"
  query_package_source_code_hash      = var.query_package_source_code_hash

  create_alarms = true
}
