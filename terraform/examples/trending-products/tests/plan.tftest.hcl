# Plans the example against a mocked provider: no AWS account, no zip needed.
mock_provider "aws" {
  mock_data "aws_iam_policy_document" {
    defaults = {
      json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}"
    }
  }
}

variables {
  package_s3_bucket                   = "my-artifacts"
  release_version                     = "0.2.0"
  aggregator_package_source_code_hash = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
  query_package_source_code_hash      = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
}

run "the_trending_products_example_plans" {
  command = plan

  assert {
    condition     = module.trending_products.table_name == "trending-products-downloads"
    error_message = "the table is named after the stack"
  }

  assert {
    condition     = module.trending_products.leaderboard_index_name == "TrendingProductsIndex"
    error_message = "the index has the example's name"
  }

  assert {
    condition     = module.trending_products.leaderboard_periods == tolist(["day", "week"])
    error_message = "the example keeps daily and weekly boards"
  }

  assert {
    condition     = length(module.trending_products.cloudwatch_metric_alarm_names) == 15
    error_message = "the AWS examples create the alarms"
  }
}
