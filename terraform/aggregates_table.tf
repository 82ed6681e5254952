# The aggregates' own table (separate_aggregates_table, and always with source_table_name): the same keys as
# aggregates have beside the downloads (entity, board id), the same sparse leaderboard index, and no stream, so
# the aggregator reads none of its own writes back.
resource "aws_dynamodb_table" "aggregates" {
  # checkov:skip=CKV_AWS_119: a customer managed key is optional (var.kms_key_arn); without it the AWS owned key encrypts the table, at no charge.
  count = local.create && local.separate_aggregates ? 1 : 0

  name           = local.aggregates_table_name
  billing_mode   = var.billing_mode
  read_capacity  = local.provisioned ? var.table_read_capacity : null
  write_capacity = local.provisioned ? var.table_write_capacity : null
  hash_key       = var.entity_attribute_name
  range_key      = var.sort_key_attribute_name

  deletion_protection_enabled = var.deletion_protection_enabled

  dynamic "attribute" {
    for_each = merge({ (var.entity_attribute_name) = "S", (var.sort_key_attribute_name) = "S" }, local.leaderboard_index_attributes)

    content {
      name = attribute.key
      type = attribute.value
    }
  }

  global_secondary_index {
    name               = local.leaderboard_index.name
    hash_key           = local.leaderboard_index.hash_key
    range_key          = local.leaderboard_index.range_key
    projection_type    = local.leaderboard_index.projection_type
    non_key_attributes = local.leaderboard_index.non_key_attributes
    read_capacity      = local.leaderboard_index.read_capacity
    write_capacity     = local.leaderboard_index.write_capacity
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
