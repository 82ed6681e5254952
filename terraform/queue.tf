# Receives what the stream mapping gives up on (batches past their retries or age) and the
# records the aggregator rejects as malformed, so nothing leaves the pipeline unseen.
resource "aws_sqs_queue" "failures" {
  count = local.create ? 1 : 0

  name                      = local.failure_queue_name
  message_retention_seconds = var.failure_queue_message_retention_seconds
  sqs_managed_sse_enabled   = var.kms_key_arn == null ? true : null
  kms_master_key_id         = var.kms_key_arn
  tags                      = var.tags
}
