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

# A repair (reconcile --repair, recover) records each band it opens here before opening it,
# delayed toward the band's deadline. The aggregator's band_records mapping meets each record
# then: a band still open past its deadline (its repair died, holding downloads nobody counts) is
# copied to the failure queue, whose alarm fires and which recover answers; any other is done.
resource "aws_sqs_queue" "recount_bands" {
  count = local.create ? 1 : 0

  name                       = local.band_queue_name
  message_retention_seconds  = 1209600                    # 14 days, SQS's longest: a record must outlive every retry of it
  visibility_timeout_seconds = 6 * var.aggregator_timeout # Lambda Developer Guide, SQS: "at least six times the timeout that you configure on your function"
  sqs_managed_sse_enabled    = var.kms_key_arn == null ? true : null
  kms_master_key_id          = var.kms_key_arn
  tags                       = var.tags
}
