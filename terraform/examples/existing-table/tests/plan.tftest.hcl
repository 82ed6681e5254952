# Plans the example against a mocked provider: no AWS account, no zip needed.
mock_provider "aws" {
  mock_data "aws_iam_policy_document" {
    defaults = {
      json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}"
    }
  }

  # The platform's table as DynamoDB describes it: a stream of both images, no replicas.
  mock_data "aws_dynamodb_table" {
    defaults = {
      stream_enabled   = true
      stream_view_type = "NEW_AND_OLD_IMAGES"
      replica          = []
    }
  }
}

variables {
  package_s3_bucket                   = "my-artifacts"
  release_version                     = "0.2.0"
  aggregator_package_source_code_hash = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
  query_package_source_code_hash      = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
}

run "the_existing_table_example_plans" {
  command = plan

  assert {
    condition     = module.leaderboard.table_name == "music-platform" && module.leaderboard.aggregates_table_name == "music-leaderboards-aggregates"
    error_message = "the module reads the platform's table and keeps its aggregates in a table of its own"
  }

  assert {
    condition     = module.leaderboard.claims_table_name == "music-leaderboards-claims"
    error_message = "the example attaches with the claims `leaderboard-tools backfill` needs to count the table's history"
  }

  assert {
    condition     = length(module.leaderboard.cloudwatch_metric_alarm_names) == 15
    error_message = "the AWS examples create the alarms"
  }
}
