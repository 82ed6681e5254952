locals {
  create             = var.create
  source_table_given = var.source_table_name != null
  # With a source table the aggregates always have a table of their own: the module writes nothing into a table it does not own.
  separate_aggregates   = local.source_table_given || var.separate_aggregates_table
  table_name            = local.source_table_given ? var.source_table_name : "${var.name}-downloads"
  aggregates_table_name = local.separate_aggregates ? "${var.name}-aggregates" : local.table_name
  aggregator_name       = "${var.name}-aggregator"
  default_batch_size    = { per_batch = 100, per_window = 1000 }
  batch_size            = coalesce(var.batch_size, local.default_batch_size[var.aggregate_writes])
  query_name            = "${var.name}-query"
  failure_queue_name    = "${var.name}-aggregator-failures"
  band_queue_name       = "${var.name}-recount-bands"
  progress_table_name   = "${var.name}-progress"
  claims_table_name     = "${var.name}-claims"
  provisioned           = var.billing_mode == "PROVISIONED"
  # The mapping as the only steady reader of each shard (ledger mode's versioned items); else the aggregator reads too.
  one_stream_reader    = var.stream_readers == 1
  table_arn            = local.source_table_given ? one(data.aws_dynamodb_table.source[*].arn) : one(aws_dynamodb_table.this[*].arn)
  table_stream_arn     = local.source_table_given ? one(data.aws_dynamodb_table.source[*].stream_arn) : one(aws_dynamodb_table.this[*].stream_arn)
  aggregates_table_arn = local.separate_aggregates ? one(aws_dynamodb_table.aggregates[*].arn) : local.table_arn
  # The key a platform's table (and so its stream) is encrypted under, when it names one (KMS: an AWS managed or a
  # customer managed key); null under the AWS owned key, which needs no permission.
  source_table_kms_key_arn = one(compact(flatten([
    for table in data.aws_dynamodb_table.source : [for encryption in table.server_side_encryption : encryption.kms_key_arn if encryption.enabled]
  ])))
  leaderboard_index_arn = local.create ? "${local.aggregates_table_arn}/index/${var.leaderboard_index_name}" : null

  # Both functions read the boards from these (empty: none), the aggregator to write them, the query function to serve them.
  leaderboard_periods = join(",", var.leaderboard_periods)
  season_start        = var.leaderboard_season == null ? "" : var.leaderboard_season.start
  season_length_days  = var.leaderboard_season == null ? "" : tostring(var.leaderboard_season.length_days)
  category_attribute  = var.category_attribute_name == null ? "" : var.category_attribute_name
  sum_attribute       = var.sum_attribute_name == null ? "" : var.sum_attribute_name
  # The attributes the module names; a category or summed attribute must be none of them, nor each other.
  named_attributes = compact([
    var.entity_attribute_name, var.sort_key_attribute_name, var.timestamp_attribute_name, var.period_attribute_name,
    var.count_attribute_name, var.order_attribute_name, var.download_ttl_attribute_name == null ? "" : var.download_ttl_attribute_name,
  ])

  # New downloads reach the aggregator (with retractions, the changes below too): INSERTs, which, where aggregates
  # share the table, carry no period attribute (aggregate writes never pass, so they cannot re-invoke it), and which
  # match source_item_filter. A download that is malformed still passes, so the aggregator reports it instead of the
  # filter dropping it unseen.
  new_download_conditions = merge(
    local.separate_aggregates ? {} : { (var.period_attribute_name) = { S = [{ exists = false }] } },
    var.source_item_filter == null ? {} : { (var.source_item_filter.attribute) = { S = [var.source_item_filter.value] } },
  )
  new_raw_event_filter = jsonencode(merge(
    { eventName = ["INSERT"] },
    { for section, image in { dynamodb = { NewImage = local.new_download_conditions } } : section => image if length(local.new_download_conditions) > 0 },
  ))

  # With retractions, the MODIFYs and REMOVEs that can move a count pass too (filters are ORed, five at most by
  # default; these make five at most): those whose old image is no aggregate (where aggregates share the table: it has
  # neither the period nor the count, which an aggregate back at 0 keeps), with source_item_filter those whose old or
  # new image is marked, and no REMOVE by TTL, whose userIdentity names dynamodb.amazonaws.com (anything-but needs the
  # field present: a REMOVE passes with no principalId or another one). The filter only decides which records invoke
  # the aggregator; it reads every record of the shard, and ignores expiries and changes that move no count.
  not_aggregate_conditions = local.separate_aggregates ? {} : {
    (var.period_attribute_name) = { S = [{ exists = false }] }
    (var.count_attribute_name)  = { N = [{ exists = false }] }
  }
  marker_conditions = var.source_item_filter == null ? {} : { (var.source_item_filter.attribute) = { S = [var.source_item_filter.value] } }
  removed_by = [
    { principalId = [{ exists = false }] },
    { principalId = [{ anything-but = ["dynamodb.amazonaws.com"] }] },
  ]
  retraction_filters = concat(
    [{ eventName = ["MODIFY"], images = { OldImage = merge(local.not_aggregate_conditions, local.marker_conditions) } }],
    var.source_item_filter == null ? [] : [
      { eventName = ["MODIFY"], images = { OldImage = local.not_aggregate_conditions, NewImage = local.marker_conditions } },
    ],
    [for identity in local.removed_by : {
      eventName    = ["REMOVE"]
      userIdentity = identity
      images       = { OldImage = merge(local.not_aggregate_conditions, local.marker_conditions) }
    }],
  )
  retraction_event_filters = [for filter in local.retraction_filters : jsonencode(merge(
    { for key, value in filter : key => value if key != "images" },
    { for section, images in { dynamodb = { for image, conditions in filter.images : image => conditions if length(conditions) > 0 } } : section => images if length(images) > 0 },
  ))]
  event_filters = concat([local.new_raw_event_filter], var.retractions ? local.retraction_event_filters : [])

  # The sparse leaderboard index, on whichever table holds the aggregates. Only aggregates carry the period
  # attribute. Sorted by the order (count, then id), with the count projected, so that a page needs nothing but
  # the index; the guide's own queries (Month = :m, descending) still list the top songs with their DownloadCount.
  leaderboard_index = {
    name               = var.leaderboard_index_name
    hash_key           = var.period_attribute_name
    range_key          = var.order_attribute_name
    projection_type    = "INCLUDE"
    non_key_attributes = [var.count_attribute_name]
    read_capacity      = local.provisioned ? var.index_read_capacity : null
    write_capacity     = local.provisioned ? var.index_write_capacity : null
  }
  leaderboard_index_attributes = { (var.period_attribute_name) = "S", (var.order_attribute_name) = "N" }
  # The module's own downloads table carries the index only when the aggregates live in it.
  downloads_table_attributes = merge(
    { (var.entity_attribute_name) = "S", (var.sort_key_attribute_name) = "S" },
    local.separate_aggregates ? {} : local.leaderboard_index_attributes,
  )
}

# The downloads table, unless the platform brings its own (source_table_name, source_table.tf).
resource "aws_dynamodb_table" "this" {
  # checkov:skip=CKV_AWS_119: a customer managed key is optional (var.kms_key_arn); without it the AWS owned key encrypts the table, at no charge.
  count = local.create && !local.source_table_given ? 1 : 0

  name             = local.table_name
  billing_mode     = var.billing_mode
  read_capacity    = local.provisioned ? var.table_read_capacity : null
  write_capacity   = local.provisioned ? var.table_write_capacity : null
  hash_key         = var.entity_attribute_name
  range_key        = var.sort_key_attribute_name
  stream_enabled   = true
  stream_view_type = var.retractions ? "NEW_AND_OLD_IMAGES" : "NEW_IMAGE"

  deletion_protection_enabled = var.deletion_protection_enabled

  dynamic "attribute" {
    for_each = local.downloads_table_attributes

    content {
      name = attribute.key
      type = attribute.value
    }
  }

  dynamic "global_secondary_index" {
    for_each = local.separate_aggregates ? [] : [local.leaderboard_index]

    content {
      name               = global_secondary_index.value.name
      hash_key           = global_secondary_index.value.hash_key
      range_key          = global_secondary_index.value.range_key
      projection_type    = global_secondary_index.value.projection_type
      non_key_attributes = global_secondary_index.value.non_key_attributes
      read_capacity      = global_secondary_index.value.read_capacity
      write_capacity     = global_secondary_index.value.write_capacity
    }
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery_enabled
  }

  # Expired downloads are removed by DynamoDB (a REMOVE stream record each, by the DynamoDB service,
  # which the mapping's filter never passes and the aggregator ignores, retractions or not), so
  # counts never change. Aggregates carry no TTL attribute and stay.
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
      condition = var.download_ttl_attribute_name == null ? true : !contains([
        var.entity_attribute_name, var.sort_key_attribute_name, var.timestamp_attribute_name, var.period_attribute_name,
        var.count_attribute_name, var.order_attribute_name,
      ], var.download_ttl_attribute_name)
      error_message = "download_ttl_attribute_name must be an attribute of its own, not a key, the timestamp or an attribute of aggregates."
    }

    # The module defines no replica. One added from elsewhere (the console, aws_dynamodb_table_replica, another
    # configuration: AWS, "add or remove replicas at any time") is left alone rather than deleted by the next apply,
    # and is refused below with retractions on.
    ignore_changes = [replica]
  }
}

# With retractions, the module's own table read back as it is now, so that a replica added since the last apply is
# refused at the next plan, as a source_table_name table's is (source_table.tf): AWS, DynamoDB Developer Guide,
# "Working with expired items and time to live (TTL)": "TTL deletions that are replicated to global table regions are
# not identifiable in DynamoDB streams in the regions the deletion is replicated to". The table's own `replica` cannot
# carry the check: it is what the configuration says (none), not what the table has. Read at plan once the table
# exists (while the table has changes to apply, at apply). Between two plans, the aggregator's replica guard
# (lambda_src/aggregator/replica_guard.py) finds one at run time. A legacy (2017.11.29) global table shows in neither
# (docs/exactly-once-retractions.md, "Replicated tables").
data "aws_dynamodb_table" "own" {
  count = local.create && !local.source_table_given && var.retractions ? 1 : 0

  name = aws_dynamodb_table.this[0].name

  lifecycle {
    postcondition {
      condition     = length(self.replica) == 0
      error_message = "retractions = true on ${self.name}, which now has replicas (${join(", ", [for replica in self.replica : replica.region_name])}): AWS says \"TTL deletions that are replicated to global table regions are not identifiable in DynamoDB streams in the regions the deletion is replicated to\" (DynamoDB Developer Guide, Working with expired items and time to live), so an expiry in another region would reach this stream as a deletion and take its download's count back. Remove the replica, or set retractions = false and ledger = false; then recount (docs/exactly-once-retractions.md, Replicated tables)."
    }
  }
}
