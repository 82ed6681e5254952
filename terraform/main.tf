locals {
  create                = var.create
  table_name            = "${var.name}-downloads"
  aggregator_name       = "${var.name}-aggregator"
  query_name            = "${var.name}-query"
  failure_queue_name    = "${var.name}-aggregator-failures"
  band_queue_name       = "${var.name}-recount-bands"
  progress_table_name   = "${var.name}-progress"
  provisioned           = var.billing_mode == "PROVISIONED"
  table_arn             = one(aws_dynamodb_table.this[*].arn)
  leaderboard_index_arn = local.create ? "${local.table_arn}/index/${var.leaderboard_index_name}" : null

  # Both functions read the boards from these (empty: none), the aggregator to write them, the query function to serve them.
  leaderboard_periods = join(",", var.leaderboard_periods)
  category_attribute  = var.category_attribute_name == null ? "" : var.category_attribute_name
  sum_attribute       = var.sum_attribute_name == null ? "" : var.sum_attribute_name
  # The attributes the module names; a category or summed attribute must be none of them, nor each other.
  named_attributes = compact([
    var.entity_attribute_name, var.sort_key_attribute_name, var.timestamp_attribute_name, var.period_attribute_name,
    var.count_attribute_name, var.order_attribute_name, var.download_ttl_attribute_name == null ? "" : var.download_ttl_attribute_name,
  ])

  # Only raw events reach the aggregator: INSERTs whose new image has no period attribute.
  # A raw event that is malformed still passes, so the aggregator reports it instead of the
  # filter dropping it unseen; aggregate writes never pass, so they cannot re-invoke it.
  new_raw_event_filter = jsonencode(jsondecode(templatefile("${path.module}/templates/new_raw_event_filter.json.tftpl", {
    period_attribute = var.period_attribute_name
  })))
}

resource "aws_dynamodb_table" "this" {
  # checkov:skip=CKV_AWS_119: a customer managed key is optional (var.kms_key_arn); without it the AWS owned key encrypts the table, at no charge.
  count = local.create ? 1 : 0

  name             = local.table_name
  billing_mode     = var.billing_mode
  read_capacity    = local.provisioned ? var.table_read_capacity : null
  write_capacity   = local.provisioned ? var.table_write_capacity : null
  hash_key         = var.entity_attribute_name
  range_key        = var.sort_key_attribute_name
  stream_enabled   = true
  stream_view_type = "NEW_IMAGE"

  deletion_protection_enabled = var.deletion_protection_enabled

  attribute {
    name = var.entity_attribute_name
    type = "S"
  }

  attribute {
    name = var.sort_key_attribute_name
    type = "S"
  }

  attribute {
    name = var.period_attribute_name
    type = "S"
  }

  attribute {
    name = var.order_attribute_name
    type = "N"
  }

  # Sparse: only aggregates carry the period attribute. Sorted by the order (count, then id),
  # with the count projected, so that a page needs nothing but the index; the guide's own
  # queries (Month = :m, descending) still list the top songs with their DownloadCount.
  global_secondary_index {
    name               = var.leaderboard_index_name
    hash_key           = var.period_attribute_name
    range_key          = var.order_attribute_name
    projection_type    = "INCLUDE"
    non_key_attributes = [var.count_attribute_name]
    read_capacity      = local.provisioned ? var.index_read_capacity : null
    write_capacity     = local.provisioned ? var.index_write_capacity : null
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery_enabled
  }

  # Expired downloads are removed by DynamoDB (a REMOVE stream record each, which the mapping's
  # filter never passes: only INSERTs reach the aggregator), so counts never change. Aggregates
  # carry no TTL attribute and stay.
  dynamic "ttl" {
    for_each = var.download_ttl_attribute_name == null ? [] : [var.download_ttl_attribute_name]

    content {
      attribute_name = ttl.value
      enabled        = true
    }
  }

  # Disabled means the AWS owned key, which costs nothing; enabled without a key would select the
  # AWS managed key (aws/dynamodb), billed per request. A customer managed key when one is given.
  server_side_encryption {
    enabled     = var.kms_key_arn != null
    kms_key_arn = var.kms_key_arn
  }

  tags = var.tags

  lifecycle {
    precondition {
      condition     = var.leaderboard_shards_previous == null || var.leaderboard_shards_previous != var.leaderboard_shards
      error_message = "leaderboard_shards_previous must differ from leaderboard_shards (or be null when no change is under way)."
    }

    precondition {
      condition = var.download_ttl_attribute_name == null ? true : !contains([
        var.entity_attribute_name, var.sort_key_attribute_name, var.timestamp_attribute_name, var.period_attribute_name,
        var.count_attribute_name, var.order_attribute_name,
      ], var.download_ttl_attribute_name)
      error_message = "download_ttl_attribute_name must be an attribute of its own, not a key, the timestamp or an attribute of aggregates."
    }

    precondition {
      condition     = var.category_attribute_name == null ? true : !contains(concat(local.named_attributes, [local.sum_attribute]), var.category_attribute_name)
      error_message = "category_attribute_name must be an attribute of its own: not a key, the timestamp, an attribute of aggregates, the TTL attribute or sum_attribute_name."
    }

    precondition {
      condition     = var.sum_attribute_name == null ? true : !contains(local.named_attributes, var.sum_attribute_name)
      error_message = "sum_attribute_name must be an attribute of its own: not a key, the timestamp, an attribute of aggregates or the TTL attribute."
    }

    precondition {
      condition     = !local.provisioned || alltrue([for capacity in [var.table_read_capacity, var.table_write_capacity, var.index_read_capacity, var.index_write_capacity] : capacity != null])
      error_message = "billing_mode PROVISIONED needs table_read_capacity, table_write_capacity, index_read_capacity and index_write_capacity."
    }
  }
}
