# A production-shaped stack on AWS: a customer managed key for the data, downloads that expire,
# alarms that notify an SNS topic, roles under a path and a permissions boundary, more leaderboard
# shards, deletion protection. The release's zips come from S3 and its manifest from this folder.

provider "aws" {
  region = var.region
}

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {} # its `id` is the region's code on hashicorp/aws 5 and 6 (`name` is deprecated in 6)

locals {
  release = jsondecode(file(var.release_manifest_path))
  account = data.aws_caller_identity.current.account_id
}

# One key for the table, the failure queue, the log groups, the functions' environment and the
# alarms' topic: the key policy the module's docs/security.md asks for (Customer managed key). The account's
# IAM policies are delegated to (the functions' roles use the key through DynamoDB and SQS), the
# logs service principal may use it for this stack's log groups, CloudWatch for the alarms' topic.
data "aws_iam_policy_document" "key" {
  # checkov:skip=CKV_AWS_109: a key policy's resource "*" is the key itself; the account's administrators manage it.
  # checkov:skip=CKV_AWS_111: a key policy's resource "*" is the key itself; the account's administrators manage it.
  # checkov:skip=CKV_AWS_356: a key policy's resource "*" is the key itself, not every resource.
  statement {
    sid       = "AccountAdministration"
    actions   = ["kms:*"]
    resources = ["*"]

    principals {
      type        = "AWS"
      identifiers = ["arn:${data.aws_partition.current.partition}:iam::${local.account}:root"]
    }
  }

  statement {
    sid       = "LogGroupsOfTheStack"
    actions   = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]
    resources = ["*"]

    principals {
      type        = "Service"
      identifiers = ["logs.${data.aws_region.current.id}.amazonaws.com"]
    }

    condition {
      test     = "ArnLike"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values   = ["arn:${data.aws_partition.current.partition}:logs:${data.aws_region.current.id}:${local.account}:log-group:/aws/lambda/${var.name}-*"]
    }
  }

  # CloudWatch alarms publish to the encrypted alarms' topic (Amazon SNS Developer Guide, "Enable
  # compatibility between event sources from AWS services and encrypted topics"): the statement as
  # documented there. AWS documents no source condition for it, so none is added.
  statement {
    sid       = "AlarmsPublishToTheEncryptedTopic"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey*"]
    resources = ["*"]

    principals {
      type        = "Service"
      identifiers = ["cloudwatch.amazonaws.com"]
    }
  }
}

resource "aws_kms_key" "data" {
  description         = "${var.name}: leaderboard table, failure queue, logs, functions' environment, alarms' topic"
  enable_key_rotation = true
  policy              = data.aws_iam_policy_document.key.json
  tags                = var.tags
}

resource "aws_kms_alias" "data" {
  name          = "alias/${var.name}"
  target_key_id = aws_kms_key.data.key_id
}

module "leaderboard" {
  source = "../.."

  name = var.name
  tags = var.tags

  package_s3_bucket                   = var.package_s3_bucket
  aggregator_package_s3_key           = "dynamodb-materialized-aggregation/${local.release.version}/aggregator.zip"
  aggregator_package_source_code_hash = local.release.files["aggregator.zip"].sha256_base64
  query_package_s3_key                = "dynamodb-materialized-aggregation/${local.release.version}/query.zip"
  query_package_source_code_hash      = local.release.files["query.zip"].sha256_base64
  lambda_runtime                      = local.release.runtime

  kms_key_arn                 = aws_kms_key.data.arn
  deletion_protection_enabled = true
  download_ttl_attribute_name = "ExpiresAt"
  leaderboard_shards          = 4

  batch_size                         = 500
  maximum_batching_window_in_seconds = 2
  aggregator_timeout                 = 120
  log_retention_in_days              = 400

  role_path                 = "/leaderboard/"
  role_permissions_boundary = var.role_permissions_boundary

  create_alarms                        = true
  create_alarm_sns_topic               = true
  alarm_iterator_age_threshold_seconds = 600
}
