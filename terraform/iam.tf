data "aws_iam_policy_document" "lambda_assume_role" {
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
  statement {
    sid       = "WriteTraces"
    actions   = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"]
    resources = ["*"]
  }
}

locals {
  tracing_policy_documents = var.tracing_mode == "Active" ? [data.aws_iam_policy_document.tracing.json] : []
}

################################################################################
# Aggregator: read this table's streams, update this table, send to this queue. Nothing else.
################################################################################

resource "aws_iam_role" "aggregator" {
  name               = local.aggregator_name
  assume_role_policy = data.aws_iam_policy_document.lambda_assume_role.json
  tags               = var.tags
}

data "aws_iam_policy_document" "aggregator" {
  source_policy_documents = local.tracing_policy_documents

  # Every stream of this table, not only the current one: a direct invocation replaying records
  # of an earlier stream is verified against that stream.
  statement {
    sid       = "ReadTheStreams"
    actions   = ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"]
    resources = ["${aws_dynamodb_table.this.arn}/stream/*"]
  }

  statement {
    sid       = "UpdateAggregates"
    actions   = ["dynamodb:UpdateItem", "dynamodb:GetItem"]
    resources = [aws_dynamodb_table.this.arn]
  }

  statement {
    sid       = "ReportFailures"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.failures.arn]
  }

  statement {
    sid       = "WriteOwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.aggregator.arn}:*"]
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
  name   = "least-privilege"
  role   = aws_iam_role.aggregator.id
  policy = data.aws_iam_policy_document.aggregator.json
}

################################################################################
# Query: Query on the leaderboard index; GetItem of one aggregate for a rank.
################################################################################

resource "aws_iam_role" "query" {
  name               = local.query_name
  assume_role_policy = data.aws_iam_policy_document.lambda_assume_role.json
  tags               = var.tags
}

data "aws_iam_policy_document" "query" {
  source_policy_documents = local.tracing_policy_documents

  statement {
    sid       = "QueryTheLeaderboard"
    actions   = ["dynamodb:Query"]
    resources = [local.leaderboard_index_arn]
  }

  statement {
    sid       = "ReadOneAggregate"
    actions   = ["dynamodb:GetItem"]
    resources = [aws_dynamodb_table.this.arn]
  }

  statement {
    sid       = "WriteOwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.query.arn}:*"]
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
  name   = "least-privilege"
  role   = aws_iam_role.query.id
  policy = data.aws_iam_policy_document.query.json
}
