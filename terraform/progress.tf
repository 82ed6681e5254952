# The progress table: one item per stream shard, holding the checkpoint through which every
# download of that shard is counted. The aggregator reads each shard itself from here, so that
# retries out of order, merged or split, direct invocations and windows given up never change
# what is counted (docs/exactly-once.md). Only the aggregator writes it; operator tools read it.
resource "aws_dynamodb_table" "progress" {
  # After the claims table, when there is one: a claims table newer than this one came with a later apply than the
  # aggregator's first, which the backfill refuses (it may have counted downloads before claiming them).
  depends_on = [aws_dynamodb_table.claims]

  # checkov:skip=CKV_AWS_119: a customer managed key is optional (var.kms_key_arn); without it the AWS owned key encrypts the table, at no charge.
  count = local.create ? 1 : 0

  name         = local.progress_table_name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "ShardKey"

  deletion_protection_enabled = var.deletion_protection_enabled

  attribute {
    name = "ShardKey"
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
