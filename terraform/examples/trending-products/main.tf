# Trending products on AWS: the module's attribute names are enough for any entity. The raw
# records are purchases (productID, SK = the purchase id, Category, Revenue, PurchasedAt); the
# aggregator sums their Revenue into a board per day and per ISO week, overall and per category,
# following refunds (a purchase deleted or corrected), and the query function answers the top
# products, a product's rank and its neighbours, and rolling windows ("the last 7 days"). The
# release's zips come from S3, as in ../minimal.

provider "aws" {
  region = var.region
}

module "trending_products" {
  source = "../.."

  name = var.name

  package_s3_bucket                   = var.package_s3_bucket
  aggregator_package_s3_key           = "dynamodb-materialized-aggregation/${var.release_version}/aggregator.zip"
  aggregator_package_source_code_hash = var.aggregator_package_source_code_hash
  query_package_s3_key                = "dynamodb-materialized-aggregation/${var.release_version}/query.zip"
  query_package_source_code_hash      = var.query_package_source_code_hash

  # A purchase: productID (partition key), SK (the purchase id), PurchasedAt (ISO 8601), Category, Revenue.
  entity_attribute_name    = "productID"
  timestamp_attribute_name = "PurchasedAt"
  category_attribute_name  = "Category"
  sum_attribute_name       = "Revenue"

  # The aggregates: one per product and board, e.g. (productID = p-1, SK = 2025-01-03@books), holding
  # Board (the index partition), RevenueTotal (the exact sum) and RevenueOrder (the index sort key).
  period_attribute_name  = "Board"
  count_attribute_name   = "RevenueTotal"
  order_attribute_name   = "RevenueOrder"
  leaderboard_index_name = "TrendingProductsIndex"
  leaderboard_periods    = ["day", "week"]

  # Refunds: a purchase deleted takes its revenue back from its boards, and a purchase whose Revenue (or
  # Category, or PurchasedAt) is corrected moves it. The table's stream then carries old images too.
  retractions = true

  create_alarms = true
}
