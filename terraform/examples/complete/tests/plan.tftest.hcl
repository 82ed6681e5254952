# Plans the example against a mocked provider: no AWS account, no zip needed.
mock_provider "aws" {
  mock_data "aws_iam_policy_document" {
    defaults = {
      json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}"
    }
  }

  mock_data "aws_caller_identity" {
    defaults = {
      account_id = "123456789012"
    }
  }

  mock_data "aws_partition" {
    defaults = {
      partition = "aws"
    }
  }

  mock_data "aws_region" {
    defaults = {
      id = "eu-west-1"
    }
  }

  mock_resource "aws_kms_key" {
    defaults = {
      arn = "arn:aws:kms:eu-west-1:123456789012:key/11111111-2222-3333-4444-555555555555"
    }
  }
}

variables {
  package_s3_bucket         = "my-artifacts"
  release_manifest_path     = "tests/manifest.json"
  role_permissions_boundary = "arn:aws:iam::123456789012:policy/platform-boundary"
}

run "the_complete_example_plans" {
  command = plan

  assert {
    condition     = module.leaderboard.table_name == "leaderboard-complete-downloads"
    error_message = "the table is named after the stack"
  }

  assert {
    condition     = length(module.leaderboard.cloudwatch_metric_alarm_names) == 15
    error_message = "the AWS examples create the alarms"
  }

  assert {
    condition     = module.leaderboard.download_ttl_attribute_name == "ExpiresAt"
    error_message = "downloads expire in the complete example"
  }

  assert {
    condition     = aws_kms_key.data.enable_key_rotation
    error_message = "the data key rotates"
  }

  assert {
    condition = anytrue([
      for statement in data.aws_iam_policy_document.key.statement :
      contains(flatten([for principal in statement.principals : principal.identifiers]), "arn:aws:iam::123456789012:root")
      && contains(statement.actions, "kms:*")
    ])
    error_message = "the key policy delegates to the account's IAM policies (the functions' roles use the key through them)"
  }

  assert {
    condition = anytrue([
      for statement in data.aws_iam_policy_document.key.statement :
      contains(flatten([for principal in statement.principals : principal.identifiers]), "logs.eu-west-1.amazonaws.com")
      && alltrue([for action in ["kms:Encrypt*", "kms:Decrypt*", "kms:GenerateDataKey*"] : contains(statement.actions, action)])
    ])
    error_message = "the logs service principal may use the key, or the encrypted log groups cannot be created"
  }

  assert {
    condition = anytrue([
      for statement in data.aws_iam_policy_document.key.statement :
      flatten([for principal in statement.principals : principal.identifiers]) == ["cloudwatch.amazonaws.com"]
      && toset(statement.actions) == toset(["kms:Decrypt", "kms:GenerateDataKey*"])
      && length(statement.condition) == 0
    ])
    error_message = "CloudWatch may use the key for the alarms' topic exactly as the SNS Developer Guide documents it, with no condition AWS does not document for it"
  }
}
