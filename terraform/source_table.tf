# A table the platform already has (source_table_name): read, never changed. Its stream feeds the aggregator;
# the operator tools read its items for recounts. What the module needs of it is checked at plan time.
data "aws_dynamodb_table" "source" {
  count = local.create && local.source_table_given ? 1 : 0

  name = var.source_table_name

  lifecycle {
    postcondition {
      condition     = self.stream_enabled
      error_message = "The source table ${var.source_table_name} has no stream. Enable it where the table is defined (stream_enabled = true, stream_view_type = \"NEW_IMAGE\" or \"NEW_AND_OLD_IMAGES\"): the aggregator counts what the stream carries."
    }

    postcondition {
      condition     = contains(["NEW_IMAGE", "NEW_AND_OLD_IMAGES"], self.stream_view_type)
      error_message = "The stream of ${var.source_table_name} carries ${self.stream_view_type == "" ? "no" : self.stream_view_type} images, and the aggregator reads each download from its new image: set stream_view_type = \"NEW_IMAGE\" or \"NEW_AND_OLD_IMAGES\" where the table is defined (changing it replaces the stream)."
    }

    postcondition {
      condition     = !var.retractions || self.stream_view_type == "NEW_AND_OLD_IMAGES"
      error_message = "retractions = true, but the stream of ${var.source_table_name} has the view type ${self.stream_view_type == "" ? "none" : self.stream_view_type}, without old images: to take back what a deletion or an edit removes, the aggregator reads each record's old image. Set stream_view_type = \"NEW_AND_OLD_IMAGES\" where the table is defined (changing it replaces the stream: what the old one held unread is not counted; `leaderboard-tools reconcile --repair` recounts), or keep retractions = false."
    }

    # Each replica of a global table has a stream of its own, and aggregates written from two regions would
    # conflict (last writer wins): one region aggregates, named on purpose.
    postcondition {
      condition     = length(self.replica) == 0 || var.global_table_aggregating_region == data.aws_region.current[0].id
      error_message = "The source table ${var.source_table_name} has replicas (a global table): each replica has its own stream, and aggregates written from two regions would conflict. Apply the module in one region only and name it: global_table_aggregating_region = that region (this is ${data.aws_region.current[0].id})."
    }

    # AWS, DynamoDB Developer Guide, "Working with expired items and time to live (TTL)": "TTL deletions that are
    # replicated to global table regions are not identifiable in DynamoDB streams in the regions the deletion is
    # replicated to" (S13 in docs/exactly-once.md). Ledger mode does not tell them apart either.
    postcondition {
      condition     = !var.retractions || length(self.replica) == 0
      error_message = "retractions = true on ${var.source_table_name}, a table with replicas (a global table), ledger or not: AWS says \"TTL deletions that are replicated to global table regions are not identifiable in DynamoDB streams in the regions the deletion is replicated to\" (DynamoDB Developer Guide, Working with expired items and time to live), so an expiry in another region would reach this stream as a deletion and take its download's count back. Keep retractions = false (and ledger = false) on a global table."
    }
  }
}
