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

  # Condition keys, each as the documentation defines it:
  # - dynamodb:Attributes: "Represents a list of the attribute names in a request, or the attributes
  #   that are returned from a request"; "If you use dynamodb:Attributes, you must specify the names
  #   of all of the primary key and index key attributes for the table and any secondary indexes
  #   that are listed in the policy"; "To allow all attributes whose name matches a pattern, use StringLike instead of StringEquals,
  #   and use a multi-character pattern match wildcard character (*)" (DynamoDB Developer Guide,
  #   "Using IAM policy conditions for fine-grained access control"). Tested with ForAllValues, which
  #   "also returns true if there are no context keys in the request" (IAM User Guide, "Multivalued
  #   context key examples"): a GetItem names its key, so never none.
  # - dynamodb:Select: "Represents the Select parameter of a Query or Scan request" (the same guide;
  #   "Filters access by the Select parameter of a Query or Scan request", Service Authorization
  #   Reference, "Actions, resources, and condition keys for Amazon DynamoDB"). GetItem has no Select
  #   parameter. The guide's attribute-limited examples, GetItem among their actions, test the key
  #   with StringEqualsIfExists ("If the user specifies the Select parameter, then its value must be
  #   SPECIFIC_ATTRIBUTES"); its read-only variant allows StringEquals "because the Select parameter
  #   always has a value (ALL_ATTRIBUTES, unless otherwise specified)", which the key's definition
  #   does not promise of a GetItem. What decides is IAM's rule for a key the request context lacks:
  #   "If the key that you specify in a policy condition is not present in the request context, the
  #   values do not match and the condition is false", except with ...IfExists: "If the key is not
  #   present, evaluate the condition element as true" (IAM User Guide, "IAM JSON policy elements:
  #   Condition operators"). StringEquals would deny every GetItem whose context has no Select;
  #   StringEqualsIfExists allows a GetItem of allowed attributes either way and still refuses
  #   ALL_ATTRIBUTES where the key is present (tests/unit/terraform/test_query_role_conditions.py).
  # - kms:ViaService: "limits use of a KMS key to requests from specified AWS services", named
  #   dynamodb.<region>.amazonaws.com and sqs.<region>.amazonaws.com, with the .amazonaws.com suffix
  #   in every partition (AWS KMS Developer Guide, "kms:ViaService"). Lambda decrypts the functions'
  #   environment with a grant made when the function is configured, not with these roles ("Lambda
  #   uses your permissions to create a grant on the key", Lambda Developer Guide, "Securing
  #   environment variables"); log groups use the key through the logs service principal (key policy).
  key_attributes = [var.entity_attribute_name, var.sort_key_attribute_name, var.period_attribute_name, var.order_attribute_name]
  # What the query function's GetItem reads of an aggregate (its count and order), with the keys.
  query_item_attributes = concat(local.key_attributes, [var.count_attribute_name])
  # Everything an aggregate carries: keys, count, the aggregator's bookkeeping, and the latest counted download's
  # instant (leaderboard_tie_break). One watermark per stream shard, named by a hash of stream and shard, hence
  # patterns (docs/exactly-once.md).
  aggregate_attributes = concat(local.query_item_attributes, ["Watermark_*", "WatermarksPruned*", "RecountedThrough", "RecountBand", "RecountHeld", "AppliedSequence", "LatestCounted"])
  kms_via_dynamodb     = local.create ? "dynamodb.${data.aws_region.current[0].id}.amazonaws.com" : null
  kms_via_sqs          = local.create ? "sqs.${data.aws_region.current[0].id}.amazonaws.com" : null
}

# The region's code is `id`: `name` is deprecated from hashicorp/aws 6.0 (for `region`, which 5.x lacks), and both
# majors set `id` to the region's code (tests/unit/terraform/test_provider_schema.py).
data "aws_region" "current" {
  count = local.create ? 1 : 0
}

################################################################################
# Aggregator: read this table's streams, update this table's aggregates, send to this queue.
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
  # With stream_readers = 1 it reads no shard steadily, only the range of a batch the mapping gave up
  # when `recover` hands it back (which may be of an earlier stream), with the same three actions.
  statement {
    sid       = "ReadTheStreams"
    actions   = ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"]
    resources = ["${local.table_arn}/stream/*"]
  }

  # Lambda's mapping lists the table's streams with the function's role (AWSLambdaDynamoDBExecutionRole
  # grants it). ListStreams has no resource type in the Service Authorization Reference: only "*"
  # matches it, and it lists stream ARNs, no data.
  statement {
    sid       = "ListTheStreams"
    actions   = ["dynamodb:ListStreams"]
    resources = ["*"]
  }

  # With retractions (and so in ledger mode), the replica guard (lambda_src/aggregator/replica_guard.py) asks
  # DescribeTable whether the table whose stream it reads has gained a replica since the plan: AWS, "TTL deletions
  # that are replicated to global table regions are not identifiable in DynamoDB streams in the regions the deletion
  # is replicated to". Table metadata only, no item; the sticky record of a replica goes to the progress table.
  dynamic "statement" {
    for_each = var.retractions ? [local.table_arn] : []

    content {
      sid       = "DescribeTheWatchedTable"
      actions   = ["dynamodb:DescribeTable"]
      resources = [statement.value]
    }
  }

  # Writes only what an aggregate carries, on any key: DynamoDB has no condition key on the sort
  # key, and dynamodb:LeadingKeys (the partition key) is every song. Not narrowed, and why: the
  # aggregator reads whole aggregates (GetItem without a projection: every shard's watermark) and
  # its writes return ALL_NEW / ALL_OLD, while an attribute-limited read needs Select =
  # SPECIFIC_ATTRIBUTES and ReturnValues NONE / UPDATED_*; so where aggregates share the downloads'
  # table this role can still read a download. With a separate aggregates table it reads no table of downloads.
  statement {
    sid       = "UpdateAggregates"
    actions   = ["dynamodb:UpdateItem"]
    resources = [local.aggregates_table_arn]

    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:Attributes"
      values   = local.aggregate_attributes
    }
  }

  statement {
    sid       = "ReadAggregates"
    actions   = ["dynamodb:GetItem"]
    resources = [local.aggregates_table_arn]
  }

  # The checkpoint of each shard; ConditionCheckItem proves a pruned watermark's records uncounted.
  statement {
    sid       = "KeepShardProgress"
    actions   = ["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"]
    resources = [aws_dynamodb_table.progress[0].arn]
  }

  # While a backfill may run, and for good in ledger mode: a claim per download, its owner (and in ledger mode the first
  # stream record applied) set only where none is (leaderboard_core.claims). The table holds claims only (a hash of each
  # download's key, who counted it, what the backfill counted); the UpdateItem returns ALL_NEW, which an attribute
  # condition (dynamodb:Attributes) would have to cover, so none is set.
  dynamic "statement" {
    for_each = local.claims_table_enabled ? [aws_dynamodb_table.claims[0].arn] : []

    content {
      sid       = "ClaimDownloads"
      actions   = ["dynamodb:UpdateItem"]
      resources = [statement.value]
    }
  }

  statement {
    sid       = "ReportFailures"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.failures[0].arn]
  }

  # What Lambda's mapping of the band queue needs of the function's role (AWSLambdaSQSQueueExecutionRole).
  statement {
    sid       = "ReadBandRecords"
    actions   = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"]
    resources = [aws_sqs_queue.recount_bands[0].arn]
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

      # The table and its streams (DynamoDB); the failure queue and the band queue (SQS, whose senders
      # need GenerateDataKey and Decrypt, its receivers Decrypt: Amazon SQS Developer Guide, "Amazon SQS
      # key management").
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = [local.kms_via_dynamodb, local.kms_via_sqs]
      }
    }
  }

  # A platform's table keeps its own key: "DynamoDB streams are always encrypted with a table-level encryption key"
  # (DynamoDB Developer Guide, "Encryption at rest usage notes"), so reading its stream and its items decrypts under
  # it, through DynamoDB only. A key policy that delegates to IAM needs this statement; one that allows the account's
  # DynamoDB users through kms:ViaService (the AWS managed key's) is not widened by it.
  dynamic "statement" {
    for_each = local.source_table_kms_key_arn == null ? [] : [local.source_table_kms_key_arn]

    content {
      sid       = "DecryptTheSourceTable"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = [local.kms_via_dynamodb]
      }
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
# Query: Query on the leaderboard index (sparse: aggregates only, their keys and count projected;
# "Global secondary index queries cannot fetch attributes from the parent table", DynamoDB API
# Reference, Query, Select); GetItem of one aggregate's count and order for a rank.
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

  # A rank reads one aggregate's count and order, `among` those of up to 100 (BatchGetItem); never a
  # download (UserID included): a read may name only these attributes, and its Select, where the request
  # context carries one, must be SPECIFIC_ATTRIBUTES (IfExists: the key is the Select parameter of a
  # Query or Scan; see locals).
  statement {
    sid       = "ReadOneAggregate"
    actions   = ["dynamodb:GetItem", "dynamodb:BatchGetItem"]
    resources = [local.aggregates_table_arn]

    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:Attributes"
      values   = local.query_item_attributes
    }

    condition {
      test     = "StringEqualsIfExists"
      variable = "dynamodb:Select"
      values   = ["SPECIFIC_ATTRIBUTES"]
    }
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

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = [local.kms_via_dynamodb]
      }
    }
  }
}

resource "aws_iam_role_policy" "query" {
  count = local.create ? 1 : 0

  name   = "least-privilege"
  role   = aws_iam_role.query[0].id
  policy = data.aws_iam_policy_document.query[0].json
}
