################################################################################
# Naming and tags
################################################################################

variable "create" {
  description = "Whether to create anything. false: the module creates no resource and its outputs are null (for stacks that deploy it in some environments only)."
  type        = bool
  default     = true
}

variable "name" {
  description = "Prefix of every resource name (table, functions, roles, queue, log groups). Letters, digits, '-' and '_', at most 40 characters."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,40}$", var.name))
    error_message = "name must be 1-40 characters of letters, digits, '-' or '_'."
  }
}

variable "tags" {
  description = "Tags applied to every taggable resource."
  type        = map(string)
  default     = {}
}

################################################################################
# Table
################################################################################

variable "source_table_name" {
  description = "An existing table holding the downloads (a platform's own, often a single-table design), which the module reads and never changes: no index, TTL or item of the module's is added to it. Its stream must be enabled with a view type carrying new images. Aggregates then live in a table of the module's own, <name>-aggregates. null: the module creates the downloads table, <name>-downloads."
  type        = string
  default     = null

  validation {
    condition     = var.source_table_name == null ? true : can(regex("^[A-Za-z0-9_.-]{3,255}$", var.source_table_name))
    error_message = "source_table_name must be null or a DynamoDB table name: 3-255 letters, digits, '_', '-' or '.'."
  }
}

variable "separate_aggregates_table" {
  description = "With the module's own downloads table: keep aggregates in a table of their own, <name>-aggregates, so that the stream carries downloads only and the aggregator reads none of its own writes back. false is the guide's layout (aggregates beside the downloads, one table). Always true in effect with source_table_name. Changing it on a live stack starts the aggregates anew in the other table: recount them with `leaderboard-tools reconcile --repair`."
  type        = bool
  default     = false
}

variable "source_item_filter" {
  description = "Where downloads share the table with other item types: the string attribute and value that mark a download (for example { attribute = \"type\", value = \"DOWNLOAD\" }). The stream mapping's filter, the aggregator and the operator tools apply the same rule; an item that matches it but cannot be counted is reported. null: every item with the entity and timestamp attributes is a download."
  type = object({
    attribute = string
    value     = string
  })
  default = null

  validation {
    condition     = var.source_item_filter == null ? true : length(var.source_item_filter.attribute) >= 1 && length(var.source_item_filter.attribute) <= 255 && length(var.source_item_filter.value) >= 1
    error_message = "source_item_filter needs an attribute name of 1 to 255 characters and a non-empty value."
  }
}

variable "retractions" {
  description = "Whether deletions and edits of downloads are followed. false (the default): downloads are immutable; the mapping passes INSERTs only, a deleted or edited download stays counted as it was first written, and `leaderboard-tools reconcile` is how a count catches up. true: a deletion by anyone but TTL takes its download's contribution back and an edit moves it (out of the old image's boards and amount, into the new image's); expiries by TTL still change no count. The stream must then carry old images: the module's own table gets stream_view_type NEW_AND_OLD_IMAGES (false keeps NEW_IMAGE), and a source_table_name table must have it already. Changing the view type gives the table a new stream (the provider disables the old one and enables another): what the old stream held unread and what is written in between are not counted, so switch while no download is written, or run `leaderboard-tools reconcile --repair` afterwards. On a source_table_name table only with ledger = true (its history was never read from the stream), and never on a table with replicas (a replicated expiry by TTL is not told from a deletion): refused at plan on a table that has one, and a replica added later stops the aggregator for good (it checks DescribeTable at most once a minute per instance, raises the ReplicatedSource alarm, and counts nothing more until retractions and ledger are off; docs/exactly-once-retractions.md, Replicated tables). A legacy (2017.11.29) global table does not show in DescribeTable: check it with `aws dynamodb describe-global-table` before turning this on. Not with backfill_claims."
  type        = bool
  default     = false
  nullable    = false
}

variable "global_table_aggregating_region" {
  description = "For a source table with replicas (a global table): the one region whose stream the module reads, which must be the region this module is applied in. Each replica has a stream of its own, and aggregates written from two regions would conflict (last writer wins), so apply the module in this region only. null: a source table with replicas is refused."
  type        = string
  default     = null
}

variable "billing_mode" {
  description = "PAY_PER_REQUEST (on-demand) or PROVISIONED. With PROVISIONED, set the four capacity variables."
  type        = string
  default     = "PAY_PER_REQUEST"

  validation {
    condition     = contains(["PAY_PER_REQUEST", "PROVISIONED"], var.billing_mode)
    error_message = "billing_mode must be PAY_PER_REQUEST or PROVISIONED."
  }
}

variable "table_read_capacity" {
  description = "Read capacity units of the table; required when billing_mode is PROVISIONED."
  type        = number
  default     = null
}

variable "table_write_capacity" {
  description = "Write capacity units of the table; required when billing_mode is PROVISIONED."
  type        = number
  default     = null
}

variable "index_read_capacity" {
  description = "Read capacity units of the leaderboard index; required when billing_mode is PROVISIONED."
  type        = number
  default     = null
}

variable "index_write_capacity" {
  description = "Write capacity units of the leaderboard index; required when billing_mode is PROVISIONED."
  type        = number
  default     = null
}

variable "point_in_time_recovery_enabled" {
  description = "Continuous backups of the table."
  type        = bool
  default     = true
}

variable "deletion_protection_enabled" {
  description = "Refuse to delete the table until this is turned off."
  type        = bool
  default     = false
}

variable "download_ttl_attribute_name" {
  description = "Attribute of a download holding its expiry (epoch seconds): enables the table's TTL on it, so that DynamoDB deletes expired downloads. Counts are unaffected (an expiry is a REMOVE by the DynamoDB service, which the mapping's filter drops and the aggregator ignores, with retractions too); aggregates never expire. null: no TTL. Setting it back to null leaves TTL as it is on the table (the provider does not turn it off)."
  type        = string
  default     = null

  validation {
    condition     = var.download_ttl_attribute_name == null ? true : can(regex("^[A-Za-z0-9_.-]{1,255}$", var.download_ttl_attribute_name))
    error_message = "download_ttl_attribute_name must be 1-255 letters, digits, '_', '-' or '.'."
  }
}

variable "kms_key_arn" {
  description = "Customer managed KMS key for the table, the failure queue, the log groups, the functions' environment and the alarms' topic; its key policy must allow what docs/security.md's \"Customer managed key\" lists. null: the table uses the AWS owned key (no charge), the queue SQS-managed encryption, the log groups and functions their service keys, the alarms' topic no encryption (CloudWatch alarms cannot publish under alias/aws/sns)."
  type        = string
  default     = null

  validation {
    condition     = var.kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:", var.kms_key_arn))
    error_message = "kms_key_arn must be a KMS key ARN."
  }
}

################################################################################
# Data model (the guide's names by default)
################################################################################

variable "entity_attribute_name" {
  description = "The counted entity's attribute (the guide's songID): the partition key of the module's tables; on a source_table_name table any string attribute of the downloads."
  type        = string
  default     = "songID"
}

variable "sort_key_attribute_name" {
  description = "Sort key of the module's tables: a unique event id on raw items of the downloads table it creates, the board id (2018-01) on aggregates. With source_table_name, the aggregates table's sort key only: a download is identified by its table's primary key, whatever that is."
  type        = string
  default     = "SK"
}

variable "timestamp_attribute_name" {
  description = "ISO 8601 timestamp of a raw event, from which its month is derived."
  type        = string
  default     = "Timestamp"
}

variable "period_attribute_name" {
  description = "Attribute carried only by aggregates (the guide's Month): the partition key of the sparse index. Its value is the period with one leaderboard shard, and '<period>#<k>' with several."
  type        = string
  default     = "Month"
}

variable "count_attribute_name" {
  description = "Counter of an aggregate (the guide's DownloadCount), projected into the sparse index."
  type        = string
  default     = "DownloadCount"
}

variable "order_attribute_name" {
  description = "Sort key of the sparse index: count x 10^26 + a tie-breaker from the entity id, so that equal counts list in ascending id order."
  type        = string
  default     = "LeaderboardOrder"
}

variable "leaderboard_index_name" {
  description = "Name of the sparse global secondary index (period partition, order)."
  type        = string
  default     = "MonthDownloadsIndex"
}

variable "leaderboard_shards" {
  description = "Index partitions per period. 1 is the guide's layout (partition key = the month); with N, each aggregate sits under '<month>#<k>', k a stable hash of its entity id, and the query function merges the N partitions. Size it with `leaderboard-tools size` (docs/sizing.md)."
  type        = number
  default     = 1

  validation {
    condition     = var.leaderboard_shards >= 1 && var.leaderboard_shards <= 64 && floor(var.leaderboard_shards) == var.leaderboard_shards
    error_message = "leaderboard_shards must be a whole number from 1 to 64."
  }
}

variable "leaderboard_tie_break" {
  description = "How equal values list on a board: \"entity\" (ascending entity id) or \"first_reached\" (the entity whose latest counted download is older first, then the entity id; the latest counted download's Timestamp, to the millisecond, is a fact of the data, so the order does not depend on batching, retries or shards). first_reached costs one strongly consistent read per aggregate write, and is refused with retractions (and so ledger): a deletion cannot give an aggregate back the instant of its previous latest download without keeping them all; and with backfill_claims (the backfill adds counts without their instants). See docs/query-contract.md."
  type        = string
  default     = "entity"

  validation {
    condition     = contains(["entity", "first_reached"], var.leaderboard_tie_break)
    error_message = "leaderboard_tie_break must be \"entity\" or \"first_reached\"."
  }
}

variable "leaderboard_shards_previous" {
  description = "While changing leaderboard_shards: the previous value, so that the query function also reads the old layout until `leaderboard-tools rekey` has moved every aggregate (docs/operations.md, Changing the number of shards). null otherwise."
  type        = number
  default     = null

  validation {
    condition     = var.leaderboard_shards_previous == null ? true : (var.leaderboard_shards_previous >= 1 && var.leaderboard_shards_previous <= 64 && floor(var.leaderboard_shards_previous) == var.leaderboard_shards_previous)
    error_message = "leaderboard_shards_previous must be null or a whole number from 1 to 64."
  }
}

variable "leaderboard_periods" {
  description = "Periods with a leaderboard, each bucket on the local clock of leaderboard_time_zone: hour (2018-01-15T10), day (2018-01-15), week (ISO 8601, 2018-W03), month (2018-01), year (2018), season (S2026-01-05: the season beginning that day, with leaderboard_season), all (one board). [\"month\"] is the guide's layout; each more period adds an aggregate write per song and batch (docs/query-contract.md)."
  type        = list(string)
  default     = ["month"]

  validation {
    condition     = length(var.leaderboard_periods) >= 1 && length(var.leaderboard_periods) == length(distinct(var.leaderboard_periods)) && alltrue([for period in var.leaderboard_periods : contains(["hour", "day", "week", "month", "year", "season", "all"], period)])
    error_message = "leaderboard_periods must list one or more distinct periods from hour, day, week, month, year, season, all."
  }
}

variable "leaderboard_time_zone" {
  description = "IANA time zone whose local clock every bucket follows (America/New_York): a day begins at local midnight, through daylight saving changes (a day of 23 or 25 hours). \"UTC\": UTC buckets. The zone must be one of terraform/time_zones.tf, the tzdata both zips carry (docs/query-contract.md)."
  type        = string
  default     = "UTC"
  nullable    = false
}

variable "leaderboard_season" {
  description = "Seasons for the period season: length_days local days each, the first beginning at local midnight of start (YYYY-MM-DD) in leaderboard_time_zone; a download before start is in no season. null: no seasons (season may then not be in leaderboard_periods)."
  type = object({
    start       = string
    length_days = number
  })
  default = null

  validation {
    condition     = var.leaderboard_season == null ? true : can(regex("^[0-9]{4}-[0-9]{2}-[0-9]{2}$", var.leaderboard_season.start)) && can(formatdate("YYYY-MM-DD", "${var.leaderboard_season.start}T00:00:00Z"))
    error_message = "leaderboard_season.start must be a real date, YYYY-MM-DD."
  }

  validation {
    condition     = var.leaderboard_season == null ? true : var.leaderboard_season.length_days >= 1 && floor(var.leaderboard_season.length_days) == var.leaderboard_season.length_days
    error_message = "leaderboard_season.length_days must be a whole number of days, 1 or more."
  }
}

variable "category_attribute_name" {
  description = "Attribute of a raw record naming its category (for example Genre): each period then has a board per category beside the overall one. A record without it counts in the overall boards only; one whose value is not a non-empty string is rejected as malformed. null: no category boards."
  type        = string
  default     = null

  validation {
    condition     = var.category_attribute_name == null ? true : length(var.category_attribute_name) >= 1 && length(var.category_attribute_name) <= 255
    error_message = "category_attribute_name must be null or an attribute name of 1 to 255 characters."
  }
}

variable "sum_attribute_name" {
  description = "Number attribute of a raw record added instead of 1 (revenue, minutes played): boards rank by the exact sum, which the query function returns as a decimal string. A record whose value is missing, not a number, has more than 6 decimals or reaches 10^12 is rejected as malformed. null: boards count records."
  type        = string
  default     = null

  validation {
    condition     = var.sum_attribute_name == null ? true : length(var.sum_attribute_name) >= 1 && length(var.sum_attribute_name) <= 255
    error_message = "sum_attribute_name must be null or an attribute name of 1 to 255 characters."
  }
}

################################################################################
# Functions
################################################################################

variable "aggregator_package_path" {
  description = "Local path of the aggregator zip (aggregator.zip of a release, `make release`). Set it, or deploy from S3 (package_s3_bucket, aggregator_package_s3_key)."
  type        = string
  default     = null
}

variable "query_package_path" {
  description = "Local path of the query zip (query.zip of a release). Set it, or deploy from S3 (package_s3_bucket, query_package_s3_key)."
  type        = string
  default     = null
}

variable "package_s3_bucket" {
  description = "S3 bucket holding the functions' zips of a release, in the functions' region. null: the packages are local paths."
  type        = string
  default     = null

  validation {
    condition     = var.package_s3_bucket == null ? true : can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.package_s3_bucket))
    error_message = "package_s3_bucket must be an S3 bucket name (3-63 lower-case letters, digits, '.' and '-')."
  }
}

variable "aggregator_package_s3_key" {
  description = "Key of aggregator.zip in package_s3_bucket (for example <prefix>/<version>/aggregator.zip)."
  type        = string
  default     = null
}

variable "query_package_s3_key" {
  description = "Key of query.zip in package_s3_bucket."
  type        = string
  default     = null
}

variable "aggregator_package_source_code_hash" {
  description = "Base64 sha256 of aggregator.zip (files[\"aggregator.zip\"].sha256_base64 in the release's manifest.json). Required from S3, where it is how Terraform notices a new package; with a local path, checked against the file."
  type        = string
  default     = null

  validation {
    condition     = var.aggregator_package_source_code_hash == null ? true : can(regex("^[A-Za-z0-9+/]{43}=$", var.aggregator_package_source_code_hash))
    error_message = "aggregator_package_source_code_hash must be a base64 sha256 (44 characters ending in '='), as filebase64sha256() and the release manifest give it."
  }
}

variable "query_package_source_code_hash" {
  description = "Base64 sha256 of query.zip (files[\"query.zip\"].sha256_base64 in the release's manifest.json). Required from S3; with a local path, checked against the file."
  type        = string
  default     = null

  validation {
    condition     = var.query_package_source_code_hash == null ? true : can(regex("^[A-Za-z0-9+/]{43}=$", var.query_package_source_code_hash))
    error_message = "query_package_source_code_hash must be a base64 sha256 (44 characters ending in '='), as filebase64sha256() and the release manifest give it."
  }
}

variable "lambda_runtime" {
  description = "Python runtime of both functions."
  type        = string
  default     = "python3.12"

  validation {
    condition     = can(regex("^python3\\.(1[2-9])$", var.lambda_runtime))
    error_message = "lambda_runtime must be python3.12 or newer."
  }
}

variable "aggregator_memory_size" {
  description = "Memory (MB) of the aggregator. A catch-up step reads up to 128 stream records and 64 KiB of them per MB, and no further page once the process holds 60 % of it (docs/exactly-once.md, rule 9); a table whose items hold long lists of small numbers or booleans needs 1024."
  type        = number
  default     = 512

  validation {
    condition     = var.aggregator_memory_size >= 128 && var.aggregator_memory_size <= 10240
    error_message = "aggregator_memory_size must be 128-10240."
  }
}

variable "aggregator_timeout" {
  description = "Timeout (s) of the aggregator. It stops taking new aggregates deadline_margin_ms before it and reports the rest as failures, so size it for the batch."
  type        = number
  default     = 60

  validation {
    condition     = var.aggregator_timeout >= 10 && var.aggregator_timeout <= 900
    error_message = "aggregator_timeout must be 10-900 seconds."
  }
}

variable "aggregator_write_concurrency" {
  description = "Aggregate updates the aggregator runs in parallel within one batch."
  type        = number
  default     = 8

  validation {
    condition     = var.aggregator_write_concurrency >= 1 && var.aggregator_write_concurrency <= 64
    error_message = "aggregator_write_concurrency must be 1-64."
  }
}

variable "aggregator_deadline_margin_ms" {
  description = "Time (ms) before its timeout at which the aggregator stops starting updates and reports the rest of the batch for retry."
  type        = number
  default     = 5000

  validation {
    condition     = var.aggregator_deadline_margin_ms >= 500
    error_message = "aggregator_deadline_margin_ms must be at least 500."
  }
}

variable "lineage_sweep_schedule" {
  description = "How often EventBridge Scheduler invokes the aggregator to sweep the stream's lineages, as a rate expression of at most 6 hours (a closed shard is read at the second sweep that finds it unread, well within the stream's 24 hours), so that shards a paused mapping left behind are read or reported even when no download comes. null: no schedule; the sweep then runs only beside the mapping's invocations, and a stream that gets no download reports nothing (see docs/operations.md, Pausing the mapping)."
  type        = string
  default     = "rate(15 minutes)"

  validation {
    condition     = var.lineage_sweep_schedule == null || can(regex("^rate\\((1 minute|([2-9]|[1-9][0-9]|[12][0-9][0-9]|3[0-5][0-9]|360) minutes|1 hour|[2-6] hours)\\)$", var.lineage_sweep_schedule))
    error_message = "lineage_sweep_schedule must be a rate expression from rate(1 minute) to rate(6 hours) (EventBridge Scheduler's syntax: rate(1 hour), rate(5 minutes)), or null."
  }
}

variable "query_memory_size" {
  description = "Memory (MB) of the query function."
  type        = number
  default     = 256

  validation {
    condition     = var.query_memory_size >= 128 && var.query_memory_size <= 10240
    error_message = "query_memory_size must be 128-10240."
  }
}

variable "query_timeout" {
  description = "Timeout (s) of the query function."
  type        = number
  default     = 10

  validation {
    condition     = var.query_timeout >= 3 && var.query_timeout <= 900
    error_message = "query_timeout must be 3-900 seconds."
  }
}

variable "log_retention_in_days" {
  description = "Retention of both functions' log groups."
  type        = number
  default     = 365

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_in_days)
    error_message = "log_retention_in_days must be a value CloudWatch Logs accepts."
  }
}

variable "tracing_mode" {
  description = "X-Ray tracing of both functions: Active or PassThrough."
  type        = string
  default     = "Active"

  validation {
    condition     = contains(["Active", "PassThrough"], var.tracing_mode)
    error_message = "tracing_mode must be Active or PassThrough."
  }
}

variable "role_path" {
  description = "IAM path of both functions' roles (for example /service-roles/). null: '/'."
  type        = string
  default     = null

  validation {
    condition     = var.role_path == null ? true : can(regex("^/([\\x21-\\x7E]{0,510}/)?$", var.role_path))
    error_message = "role_path must start and end with '/' (at most 512 printable characters)."
  }
}

variable "role_permissions_boundary" {
  description = "ARN of the managed policy set as permissions boundary of both functions' roles. null: none."
  type        = string
  default     = null

  validation {
    condition     = var.role_permissions_boundary == null ? true : can(regex("^arn:aws[a-z-]*:iam::([0-9]{12}|aws):policy/", var.role_permissions_boundary))
    error_message = "role_permissions_boundary must be the ARN of an IAM managed policy."
  }
}

variable "code_signing_config_arn" {
  description = "Lambda code signing configuration for both functions. null: none. The release zips are unsigned: with an Enforce policy, sign them with AWS Signer first and deploy the signed objects (docs/security.md, Code signing)."
  type        = string
  default     = null
}

variable "reserved_concurrent_executions" {
  description = "Reserved concurrency of the query function. null: unreserved (the aggregator's concurrency follows the stream's shards)."
  type        = number
  default     = null
}

################################################################################
# Stream mapping
################################################################################

variable "batch_size" {
  description = "Most stream records per aggregator invocation. null: 100 with aggregate_writes = per_batch, 1000 with per_window (whose invocations before a window's last each note what they were handed in the progress table, so fewer and larger ones cost less). The mapping is always given it: emulators differ in their default."
  type        = number
  default     = null

  validation {
    condition     = var.batch_size == null || try(var.batch_size >= 1 && var.batch_size <= 10000, false)
    error_message = "batch_size must be 1-10000 (or null for the default of aggregate_writes)."
  }
}

variable "maximum_batching_window_in_seconds" {
  description = "How long the mapping gathers records before invoking; longer windows mean fewer, larger coalesced writes."
  type        = number
  default     = 1

  validation {
    condition     = var.maximum_batching_window_in_seconds >= 0 && var.maximum_batching_window_in_seconds <= 300
    error_message = "maximum_batching_window_in_seconds must be 0-300."
  }
}

variable "maximum_retry_attempts" {
  description = "Retries of a failing batch before its records go to the failure queue. Finite, so a poison batch cannot block a shard. With stream_readers = 1 the mapping is given -1 instead (retried until its records expire): the aggregator fails a batch for an outage only, never for a record's content."
  type        = number
  default     = 10

  validation {
    condition     = var.maximum_retry_attempts >= 0 && var.maximum_retry_attempts <= 10000
    error_message = "maximum_retry_attempts must be 0-10000 (never -1: infinite retries block the shard)."
  }
}

variable "maximum_record_age_in_seconds" {
  description = "Age after which a failing record goes to the failure queue. Finite, below the stream's 24 h retention; at least twice tumbling_window_in_seconds. Watermarks are kept this long plus the window and a margin. With stream_readers = 1 the mapping is given -1 instead, as maximum_retry_attempts."
  type        = number
  default     = 3600

  validation {
    condition     = var.maximum_record_age_in_seconds >= 60 && var.maximum_record_age_in_seconds <= 86400
    error_message = "maximum_record_age_in_seconds must be 60-86400 (never -1)."
  }
}

variable "parallelization_factor" {
  description = "Concurrent batches per shard. Must be 1: with more, Lambda keeps order only per item, and exact counting needs each shard's records in order (docs/exactly-once.md)."
  type        = number
  default     = 1

  validation {
    condition     = var.parallelization_factor == 1
    error_message = "parallelization_factor must be 1: with more, Lambda keeps records in order only per item (partition and sort key), and the aggregator's per-shard watermarks need each shard's records in order. Scale with more shards (DynamoDB adds them with write activity), not with concurrent batches per shard."
  }
}

variable "tumbling_window_in_seconds" {
  description = "Length of the mapping's tumbling window. Window events name their shard, which the per-shard watermarks need; with aggregate_writes = per_window it is also how often each aggregate is written."
  type        = number
  default     = 60

  validation {
    condition     = var.tumbling_window_in_seconds >= 1 && var.tumbling_window_in_seconds <= 900
    error_message = "tumbling_window_in_seconds must be 1-900: the aggregator needs tumbling-window events (they carry the shardId), so 0 is not allowed."
  }
}

variable "aggregate_writes" {
  description = "When the aggregator writes an aggregate: per_batch (one conditional write per aggregate and batch; fresh within one batch) or per_window (one per aggregate, shard and window; fewer writes, fresh within tumbling_window_in_seconds)."
  type        = string
  default     = "per_batch"

  validation {
    condition     = contains(["per_batch", "per_window"], var.aggregate_writes)
    error_message = "aggregate_writes must be per_batch or per_window."
  }
}

variable "starting_position" {
  description = "Where a new mapping starts reading. Only TRIM_HORIZON: the aggregator reads each shard itself from its checkpoint, and a shard it has not counted yet from its trim horizon, which LATEST would contradict."
  type        = string
  default     = "TRIM_HORIZON"

  validation {
    condition     = var.starting_position == "TRIM_HORIZON"
    error_message = "starting_position must be TRIM_HORIZON: the aggregator counts every shard from its first retained record (LATEST cannot be honoured exactly)."
  }
}

variable "failure_queue_message_retention_seconds" {
  description = "Retention of the on-failure queue (default 14 days, the SQS maximum)."
  type        = number
  default     = 1209600

  validation {
    condition     = var.failure_queue_message_retention_seconds >= 60 && var.failure_queue_message_retention_seconds <= 1209600
    error_message = "failure_queue_message_retention_seconds must be 60-1209600."
  }
}

variable "create_alarms" {
  description = "Create the CloudWatch alarms: stream iterator age, failure queue messages, aggregator errors and throttles, table and index throttling, the aggregator's anomaly metrics. Off by default (emulators do not keep every alarm attribute); on in the AWS examples."
  type        = bool
  default     = false
}

variable "create_alarm_sns_topic" {
  description = "With create_alarms: create an SNS topic (<name>-alarms) that the alarms notify on ALARM and OK, encrypted with kms_key_arn when given, else unencrypted (CloudWatch alarms cannot publish under alias/aws/sns). Subscribe to it outside the module."
  type        = bool
  default     = false
}

variable "alarm_sns_topic_arn" {
  description = "With create_alarms: an existing SNS topic the alarms notify on ALARM and OK (ignored when create_alarm_sns_topic is true). null: no notification."
  type        = string
  default     = null

  validation {
    condition     = var.alarm_sns_topic_arn == null ? true : can(regex("^arn:[a-z-]+:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$", var.alarm_sns_topic_arn))
    error_message = "alarm_sns_topic_arn must be an SNS topic ARN."
  }
}

variable "alarm_iterator_age_threshold_seconds" {
  description = "Iterator age of the stream mapping (seconds) above which, for 5 minutes, the alarm fires. The default, 300, is five tumbling windows of 60 s: well past normal batching."
  type        = number
  default     = 300

  validation {
    condition     = var.alarm_iterator_age_threshold_seconds >= 60 && var.alarm_iterator_age_threshold_seconds <= 604800
    error_message = "alarm_iterator_age_threshold_seconds must be 60-604800 (a stream keeps records 24 hours; the mapping's maximum record age is up to 7 days)."
  }
}

################################################################################
# Backfill
################################################################################

variable "backfill_claims" {
  description = "Claims for `leaderboard-tools backfill`, which counts the downloads a table held before the module was attached (its history) exactly once beside the stream: a table <name>-claims, in which the aggregator claims every download before counting it and every deletion it reads before its download (one conditional write each) and the backfill every download it counts, with the boards it counted it in. Turn it on in the apply that attaches the module, run the backfill, then off once the backfill says so (docs/attaching.md). Not with ledger, which keeps the claims for good. false: no backfill can run (but in ledger mode)."
  type        = bool
  default     = false
}

variable "ledger" {
  description = "Ledger mode: the claims table <name>-claims is kept for good as a ledger of the downloads, one item per download key, recording which stream record of it the aggregator applied first and what `leaderboard-tools backfill` counted of it. Every insert, edit and deletion then moves its download's contribution exactly once, from what the ledger says was counted to what the item's new image counts, whatever the table held before its stream was read; a deletion of a download never counted changes nothing; and the backfill may run at any time, be killed, run again or run twice at once, with nothing to release. Costs one conditional write per download key and aggregator step (about one per download: `leaderboard-tools size --ledger` prices it) and the ledger's storage. Requires retractions = true, and so never on a table with replicas, legacy (2017.11.29) global tables included, which only `aws dynamodb describe-global-table` shows (docs/exactly-once-retractions.md, Replicated tables); replaces backfill_claims (not with it). Turn it on in the apply that attaches the module and keep it on: turned off, the ledger is deleted with its table (docs/attaching.md)."
  type        = bool
  default     = false
  nullable    = false
}

variable "stream_readers" {
  description = "Readers of each stream shard the module takes, of the 2 DynamoDB Streams allows before it throttles (`leaderboard-tools readers` counts them). 2: the mapping and the aggregator's own reads of the shard from its checkpoint. 1 (ledger mode only): the mapping is the only steady reader; the aggregator applies what it delivers by each ledger item's version and refuses direct invocations, the mapping retries a failing batch until its records expire (maximum_retry_attempts and maximum_record_age_in_seconds -1, bisected), and `leaderboard-tools recover` reads a batch it gave up back from the stream. Leaves the second reader to another consumer of the table's stream. Set it with ledger, in the apply that attaches the module: to change a running stack's readers, attach a new stack and backfill it (docs/attaching.md)."
  type        = number
  default     = 2
  nullable    = false

  validation {
    condition     = contains([1, 2], var.stream_readers)
    error_message = "stream_readers must be 1 or 2."
  }
}
