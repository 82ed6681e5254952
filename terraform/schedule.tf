# The lineage sweep on a schedule. A stream that gets no download never invokes the aggregator: after a
# mapping paused past the stream's retention, shards deleted unread would be reported only when the next
# download came. EventBridge Scheduler invokes the aggregator with {"lineageSweep": {"streamArn": ...}},
# and that invocation reads every closed shard not yet read and reports every lineage whose ancestors
# are gone (docs/exactly-once-lineage-sweep.md). Scheduler, not a scheduled rule: AWS calls scheduled rules
# legacy and recommends Scheduler (EventBridge User Guide, "Creating a scheduled rule (legacy)").
locals {
  lineage_sweep_enabled = local.create && var.lineage_sweep_schedule != null
  lineage_sweep_name    = "${var.name}-lineage-sweep"
}

data "aws_caller_identity" "current" {
  count = local.lineage_sweep_enabled ? 1 : 0
}

# EventBridge Scheduler User Guide, "Set up the execution role": the trust policy names
# scheduler.amazonaws.com, with aws:SourceAccount against the confused deputy.
data "aws_iam_policy_document" "lineage_sweep_assume_role" {
  count = local.lineage_sweep_enabled ? 1 : 0

  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["scheduler.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [data.aws_caller_identity.current[0].account_id]
    }
  }
}

resource "aws_iam_role" "lineage_sweep" {
  count = local.lineage_sweep_enabled ? 1 : 0

  name                 = local.lineage_sweep_name
  path                 = var.role_path
  permissions_boundary = var.role_permissions_boundary
  assume_role_policy   = data.aws_iam_policy_document.lineage_sweep_assume_role[0].json
  tags                 = var.tags
}

data "aws_iam_policy_document" "lineage_sweep" {
  count = local.lineage_sweep_enabled ? 1 : 0

  statement {
    sid       = "InvokeTheAggregator"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.aggregator[0].arn]
  }
}

resource "aws_iam_role_policy" "lineage_sweep" {
  count = local.lineage_sweep_enabled ? 1 : 0

  name   = "invoke-aggregator"
  role   = aws_iam_role.lineage_sweep[0].id
  policy = data.aws_iam_policy_document.lineage_sweep[0].json
}

resource "aws_scheduler_schedule" "lineage_sweep" {
  # checkov:skip=CKV_AWS_297: the schedule holds the stream's ARN and nothing of the table; under kms_key_arn its execution role would need the key too (docs/security.md), so the AWS owned key encrypts it, as Scheduler does by default.
  count = local.lineage_sweep_enabled ? 1 : 0

  name                = local.lineage_sweep_name
  description         = "Invokes ${local.aggregator_name} to sweep the lineages of ${local.table_name}'s stream, downloads or none."
  schedule_expression = var.lineage_sweep_schedule

  flexible_time_window {
    mode = "OFF"
  }

  target {
    arn      = aws_lambda_function.aggregator[0].arn
    role_arn = aws_iam_role.lineage_sweep[0].arn
    input    = jsonencode({ lineageSweep = { streamArn = local.table_stream_arn } })

    # A sweep missed is made up by the next one; one an hour late is no better than the next.
    retry_policy {
      maximum_event_age_in_seconds = 3600
      maximum_retry_attempts       = 10
    }
  }

  depends_on = [aws_iam_role_policy.lineage_sweep]
}
