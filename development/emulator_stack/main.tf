# The root configuration the acceptance suite, the demo and the benchmark apply to an emulator
# (leaderboard_dev.terraform_stack.Stack): the module with every service at one
# LocalStack-compatible endpoint and the fake credentials emulators accept. Not an example for
# AWS: those are under terraform/examples/ (minimal, complete, trending-products).

locals {
  emulated = var.aws_endpoint_url != ""
  endpoint = local.emulated ? var.aws_endpoint_url : null
}

provider "aws" {
  region = var.region

  # Against an emulator: no credential or account look-ups, every service at one endpoint.
  skip_credentials_validation = local.emulated
  skip_requesting_account_id  = local.emulated
  skip_metadata_api_check     = local.emulated
  s3_use_path_style           = local.emulated
  access_key                  = local.emulated ? "test" : null
  secret_key                  = local.emulated ? "test" : null

  endpoints {
    cloudwatch     = local.endpoint
    cloudwatchlogs = local.endpoint
    dynamodb       = local.endpoint
    iam            = local.endpoint
    kms            = local.endpoint
    lambda         = local.endpoint
    s3             = local.endpoint
    scheduler      = local.endpoint
    sns            = local.endpoint
    sqs            = local.endpoint
    sts            = local.endpoint
  }
}

module "leaderboard" {
  source = "../../terraform"

  name = var.name
  # The zips `make build` writes into this repository's dist/, unless a test deploys another build.
  aggregator_package_path = coalesce(var.aggregator_package_path, "${path.module}/../../dist/aggregator.zip")
  query_package_path      = coalesce(var.query_package_path, "${path.module}/../../dist/query.zip")

  batch_size                         = var.batch_size
  aggregator_timeout                 = var.aggregator_timeout
  maximum_batching_window_in_seconds = var.maximum_batching_window_in_seconds
  maximum_retry_attempts             = var.maximum_retry_attempts
  maximum_record_age_in_seconds      = var.maximum_record_age_in_seconds
  tumbling_window_in_seconds         = var.tumbling_window_in_seconds
  aggregate_writes                   = var.aggregate_writes
  leaderboard_shards                 = var.leaderboard_shards
  leaderboard_shards_previous        = var.leaderboard_shards_previous
  leaderboard_tie_break              = var.leaderboard_tie_break
  download_ttl_attribute_name        = var.download_ttl_attribute_name
  count_attribute_name               = var.count_attribute_name
  leaderboard_periods                = var.leaderboard_periods
  leaderboard_time_zone              = var.leaderboard_time_zone
  leaderboard_season                 = var.leaderboard_season
  category_attribute_name            = var.category_attribute_name
  sum_attribute_name                 = var.sum_attribute_name
  source_table_name                  = var.source_table_name
  separate_aggregates_table          = var.separate_aggregates_table
  source_item_filter                 = var.source_item_filter
  entity_attribute_name              = var.entity_attribute_name
  backfill_claims                    = var.backfill_claims
  retractions                        = var.retractions
  ledger                             = var.ledger
  stream_readers                     = var.stream_readers
  create_alarms                      = var.create_alarms
  create_alarm_sns_topic             = var.create_alarm_sns_topic
  tags                               = var.tags
}
