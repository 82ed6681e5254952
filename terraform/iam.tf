data "aws_iam_policy_document" "lambda_assume_role" {
  count = local.create ? 1 : 0

  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

# Shared by both roles when tracing is on. X-Ray has no resource-level permissions for these actions.
data "aws_iam_policy_document" "tracing" {
  count = local.create ? 1 : 0

  statement {
    sid       = "WriteTraces"
    actions   = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"]
    resources = ["*"]
  }
}

locals {
  tracing_policy_documents = local.create && var.tracing_mode == "Active" ? [data.aws_iam_policy_document.tracing[0].json] : []
}

################################################################################
# Aggregator: read this table's streams, update this table, send to this queue. Nothing else.
################################################################################

resource "aws_iam_role" "aggregator" {
  count = local.create ? 1 : 0

  name                 = local.aggregator_name
  path                 = var.role_path
  permissions_boundary = var.role_permissions_boundary
  assume_role_policy   = data.aws_iam_policy_document.lambda_assume_role[0].json
  tags                 = var.tags
}

data "aws_iam_policy_document" "aggregator" {
  count = local.create ? 1 : 0

  source_policy_documents = local.tracing_policy_documents

  # Every stream of this table, not only the current one: the aggregator reads each shard it counts
  # (and a direct invocation may name a shard of an earlier stream); DescribeStream finds a shard's parent.
  statement {
    sid       = "ReadTheStreams"
    actions   = ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"]
    resources = ["${local.table_arn}/stream/*"]
  }

  statement {
    sid       = "UpdateAggregates"
    actions   = ["dynamodb:UpdateItem", "dynamodb:GetItem"]
    resources = [local.table_arn]
  }

  # The checkpoint of each shard; ConditionCheckItem proves a pruned watermark's records uncounted.
  statement {
    sid       = "KeepShardProgress"
    actions   = ["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"]
    resources = [aws_dynamodb_table.progress[0].arn]
  }

  statement {
    sid       = "ReportFailures"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.failures[0].arn]
  }

  statement {
    sid       = "WriteOwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.aggregator[0].arn}:*"]
  }

  dynamic "statement" {
    for_each = var.kms_key_arn == null ? [] : [var.kms_key_arn]

    content {
      sid       = "UseTheCustomerKey"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [statement.value]
    }
  }
}

resource "aws_iam_role_policy" "aggregator" {
  count = local.create ? 1 : 0

  name   = "least-privilege"
  role   = aws_iam_role.aggregator[0].id
  policy = data.aws_iam_policy_document.aggregator[0].json
}

################################################################################
# Query: Query on the leaderboard index; GetItem of one aggregate for a rank.
################################################################################

resource "aws_iam_role" "query" {
  count = local.create ? 1 : 0

  name                 = local.query_name
  path                 = var.role_path
  permissions_boundary = var.role_permissions_boundary
  assume_role_policy   = data.aws_iam_policy_document.lambda_assume_role[0].json
  tags                 = var.tags
}

data "aws_iam_policy_document" "query" {
  count = local.create ? 1 : 0

  source_policy_documents = local.tracing_policy_documents

  statement {
    sid       = "QueryTheLeaderboard"
    actions   = ["dynamodb:Query"]
    resources = [local.leaderboard_index_arn]
  }

  statement {
    sid       = "ReadOneAggregate"
    actions   = ["dynamodb:GetItem"]
    resources = [local.table_arn]
  }

  statement {
    sid       = "WriteOwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.query[0].arn}:*"]
  }

  dynamic "statement" {
    for_each = var.kms_key_arn == null ? [] : [var.kms_key_arn]

    content {
      sid       = "UseTheCustomerKey"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]
    }
  }
}

resource "aws_iam_role_policy" "query" {
  count = local.create ? 1 : 0

  name   = "least-privilege"
  role   = aws_iam_role.query[0].id
  policy = data.aws_iam_policy_document.query[0].json
}
