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

# A repair (reconcile --repair, recover) records each band it opens here before opening it, and
# deletes the record when it closes the band: a record older than any band lives belongs to a
# repair that died with its band open, and the recount_band_outlived alarm says so (recover acts
# on it). The module's functions never read it; the operator tools find it in the aggregator's
# environment (RECOUNT_BAND_QUEUE_URL).
resource "aws_sqs_queue" "recount_bands" {
  count = local.create ? 1 : 0

  name                      = local.band_queue_name
  message_retention_seconds = var.failure_queue_message_retention_seconds
  sqs_managed_sse_enabled   = var.kms_key_arn == null ? true : null
  kms_master_key_id         = var.kms_key_arn
  tags                      = var.tags
}
