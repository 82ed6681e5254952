# The claims of a backfill (backfill_claims): one item per download that the aggregator or
# `leaderboard-tools backfill` counted while both could meet it, naming which one did, and where
# each backfill segment stopped. Needed only while a backfill may run; removing it ends the claims.
# In ledger mode (ledger) the same table is the ledger, kept for good: each download's item also
# records the first stream record the aggregator applied and what the backfill counted of it.
locals {
  claims_table_enabled = var.backfill_claims || var.ledger
}

resource "aws_dynamodb_table" "claims" {
  # checkov:skip=CKV_AWS_119: a customer managed key is optional (var.kms_key_arn); without it the AWS owned key encrypts the table, at no charge.
  count = local.create && local.claims_table_enabled ? 1 : 0

  name         = local.claims_table_name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "ClaimKey"

  deletion_protection_enabled = var.deletion_protection_enabled

  attribute {
    name = "ClaimKey"
    type = "S"
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery_enabled
  }

  server_side_encryption {
    enabled     = var.kms_key_arn != null
    kms_key_arn = var.kms_key_arn
  }

  tags = var.tags
}
