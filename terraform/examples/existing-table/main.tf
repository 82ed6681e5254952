# The module attached to a table the platform already has: a single-table design (users, playlists and
# downloads in one table, keyed PK/SK), which the module reads and never changes. Its aggregates go to a
# table of the module's own, <name>-aggregates. The platform's table is written here as a plain
# aws_dynamodb_table so that the example plans offline; usually it lives in another stack, and only its
# name reaches the module. With terraform-aws-modules/dynamodb-table the same table is:
#
#   module "platform_table" {
#     source           = "terraform-aws-modules/dynamodb-table/aws"
#     name             = "music-platform"
#     hash_key         = "PK"
#     range_key        = "SK"
#     stream_enabled   = true
#     stream_view_type = "NEW_AND_OLD_IMAGES"
#     attributes       = [{ name = "PK", type = "S" }, { name = "SK", type = "S" }]
#   }
#
# and source_table_name = module.platform_table.dynamodb_table_id.

provider "aws" {
  region = var.region
}

resource "aws_dynamodb_table" "platform" {
  # checkov:skip=CKV_AWS_119: the platform's own table, encrypted with the AWS owned key; the example's subject is the module beside it.
  name             = "music-platform"
  billing_mode     = "PAY_PER_REQUEST"
  hash_key         = "PK"
  range_key        = "SK"
  stream_enabled   = true
  stream_view_type = "NEW_AND_OLD_IMAGES"

  attribute {
    name = "PK"
    type = "S"
  }

  attribute {
    name = "SK"
    type = "S"
  }

  point_in_time_recovery {
    enabled = true
  }
}

module "leaderboard" {
  source = "../.."

  name = var.name

  # Downloads are the items with type = "DOWNLOAD"; each names its song in songID (not a key of this table).
  source_table_name     = aws_dynamodb_table.platform.name
  source_item_filter    = { attribute = "type", value = "DOWNLOAD" }
  entity_attribute_name = "songID"

  package_s3_bucket                   = var.package_s3_bucket
  aggregator_package_s3_key           = "dynamodb-materialized-aggregation/${var.release_version}/aggregator.zip"
  aggregator_package_source_code_hash = var.aggregator_package_source_code_hash
  query_package_s3_key                = "dynamodb-materialized-aggregation/${var.release_version}/query.zip"
  query_package_source_code_hash      = var.query_package_source_code_hash

  create_alarms = true
}
