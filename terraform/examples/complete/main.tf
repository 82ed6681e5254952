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
    sqs            = local.endpoint
    sts            = local.endpoint
  }
}

module "leaderboard" {
  source = "../.."

  name                               = var.name
  aggregator_package_path            = var.aggregator_package_path
  batch_size                         = var.batch_size
  maximum_batching_window_in_seconds = var.maximum_batching_window_in_seconds
  maximum_retry_attempts             = var.maximum_retry_attempts
  tumbling_window_in_seconds         = var.tumbling_window_in_seconds
  aggregate_writes                   = var.aggregate_writes
  leaderboard_shards                 = var.leaderboard_shards
  leaderboard_shards_previous        = var.leaderboard_shards_previous
  tags                               = var.tags
}
