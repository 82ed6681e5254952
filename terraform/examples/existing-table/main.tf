# The module attached to a table the platform already has: a single-table design (users, playlists and
# downloads in one table, keyed PK/SK) that another stack owns, with years of downloads in it. The
# module reads that table and never changes it; only its name reaches the module. Its aggregates go to
# a table of the module's own, <name>-aggregates. With terraform-aws-modules/dynamodb-table in the
# platform's stack, the table is:
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
# and source_table_name = module.platform_table.dynamodb_table_id, or its name as here.

provider "aws" {
  region = var.region
}

module "leaderboard" {
  source = "../.."

  name = var.name

  # Downloads are the items with type = "DOWNLOAD"; each names its song in songID (not a key of this table).
  source_table_name     = var.source_table_name
  source_item_filter    = { attribute = "type", value = "DOWNLOAD" }
  entity_attribute_name = "songID"

  # The downloads the table held before this apply are counted by `leaderboard-tools backfill`, which needs the
  # claims from the apply that attaches the module on (docs/attaching.md, "The history the stream does not carry").
  backfill_claims = var.backfill_claims

  package_s3_bucket                   = var.package_s3_bucket
  aggregator_package_s3_key           = "dynamodb-materialized-aggregation/${var.release_version}/aggregator.zip"
  aggregator_package_source_code_hash = var.aggregator_package_source_code_hash
  query_package_s3_key                = "dynamodb-materialized-aggregation/${var.release_version}/query.zip"
  query_package_source_code_hash      = var.query_package_source_code_hash

  create_alarms = true
}
