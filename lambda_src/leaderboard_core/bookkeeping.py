"""The aggregator's bookkeeping, as the operator tools read and repair it: sequence numbers, download ids, the
progress table's attributes and an aggregate's.

The aggregator writes all of these (shard_progress.py, aggregate_store.py); the recount and recover read the
progress table to tell what is in flight, and a repair conditions on an aggregate's watermarks and fence.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any

SEQUENCE_WIDTH = 40
"""DynamoDB stream sequence numbers have at most 40 digits; padding them makes string order numeric order."""


def pad_sequence(raw: str) -> str:
    return raw.zfill(SEQUENCE_WIDTH)


def download_id(sort_key: str) -> str:
    """A download's identity within its song: 16 bytes of SHA-256 of its sort key, base64url without padding.

    A repair's band holds the downloads it was not sure of under this id, and the repair compares
    them with those it recounted: fixed size, whatever the key's length (up to 1,024 bytes).
    """
    digest = hashlib.sha256(sort_key.encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


# ---------------------------------------------------------------- the progress table: one item per stream shard
# Every attribute the aggregator writes there (shard_progress.py writes them, progress_item.py reads them): the
# names as stored, a contract with the operator tools and any table already deployed.

SHARD_KEY = "ShardKey"
"""The progress table's hash key (terraform/progress.tf): `<stream ARN>|<shard id>`, or `#genesis`."""
CHECKPOINT = "Checkpoint"
"""The padded sequence number through which every download of the shard is counted."""
CHECKPOINT_SEQUENCE = "CheckpointSequence"
"""The checkpoint's sequence number as the stream spells it: where reading resumes (GetShardIterator wants it)."""
RESUME_AT = "ResumeAt"
"""A sequence number (as the stream spells it) to read *from* while the checkpoint is below it: the shard's
first record before anything is counted, or the first record after a reported trimmed gap."""
SHARD_ENDED = "ShardEnded"
"""The shard was read to a null iterator: closed, and counted to its end."""
STREAM_ARN, SHARD_ID = "StreamArn", "ShardId"
"""The shard the item is about, as the stream names it (its key hashes them together)."""
UPDATED_AT = "UpdatedAt"
"""When (epoch seconds) the aggregator last wrote the item."""
CHECKPOINT_CREATED = "CheckpointCreated"
"""The second of creation of the checkpoint's record (ApproximateCreationDateTime): how old the counted part is."""
DELIVERED_HIGH = "DeliveredHigh"
"""The highest sequence number (padded) the mapping has delivered: a final invocation with a fresh state and no records
reads through it, so a window whose state was lost is still read whole before Lambda moves on."""
FIRST_SEEN = "FirstSeenAt"
GENESIS = "Genesis"
"""A token drawn once per progress table (item `#genesis`), copied into every shard's item and onto every pruned
aggregate: a progress table recreated since an aggregate was pruned cannot vouch for what was pruned."""
GENESIS_KEY = "#genesis"
LEDGER_FROM = "LedgerFrom"
"""On the genesis item, in ledger mode: when the first reader drew the token, ledger mode on. A genesis without it was
drawn by a deployment that counted without the ledger, whose downloads have no ledger item."""
PARENT_SHARD = "ParentShardId"
LINEAGE_COUNTED = "LineageCounted"
"""Every ancestor of the shard is ended: counted through its end, or its loss reported to the failure queue."""
LINEAGE_UNKNOWN = "LineageUnknown"
"""DescribeStream did not list the shard when it was first seen: its parent, if any, is not known."""
LOST_UNREAD = "LostUnread"
"""The shard was gone from the stream before this deployment read it: its loss is reported, it is never read."""
GAP_REPORTED_FROM = "GapReportedFrom"
"""The start (`at:<sequence>` or `after:<sequence>`) from which a trimmed gap with no readable record after it was
reported: an idle shard whose checkpoint aged past the retention is reported once, not at every sweep."""
SWEEP_CURSOR_KEY = "#lineage-sweep"
"""The progress table's item that keeps where the last lineage sweep cut short by its budget stopped."""
NEXT_SHARD = "NextShardId"
CLOSED_UNREAD_SINCE = "ClosedUnreadSince"
"""When (epoch seconds) a lineage sweep first found the shard closed and not read to its end: a sweep at least a
sweep's interval later reads it to its end, whichever function instance runs it."""
REPLICAS_SEEN_KEY = "#replicas-seen"
"""The progress table's item written once, never deleted by the tool, when the aggregator (retractions or ledger on)
first finds its stream's table replicated (aggregator/replica_guard.py): from then on the aggregator refuses every
record and `recover` every answer, since a replicated TTL expiry reaches this stream as a deletion."""
REPLICA_REGIONS = "ReplicaRegions"
"""On the REPLICAS_SEEN_KEY item: the other regions (or the global table's version) DescribeTable named."""


def replicas_seen_of(item: Mapping[str, Any] | None) -> tuple[int, tuple[str, ...]] | None:
    """The REPLICAS_SEEN_KEY item as the aggregator and `recover` both read it: (when it was first seen, epoch seconds;
    what DescribeTable named); None where no such item is."""
    if not item:
        return None
    return int(item.get(FIRST_SEEN, {}).get("N", "0")), tuple(item.get(REPLICA_REGIONS, {}).get("SS", ()))


EMPTY_TAIL_WALKED_AT = "EmptyTailWalkedAt"
"""When (epoch seconds) a read of the closed shard last gave up after MAX_EMPTY_PAGES in a row without reaching its
EndingSequenceNumber (that record trimmed, or none there): a parent's drain walks them again only a sweep's interval
later, whichever function instance drains it."""

# ---------------------------------------------------------------- an aggregate's bookkeeping

WATERMARK_PREFIX = "Watermark_"
"""One watermark per stream shard that wrote the aggregate: `Watermark_<hash of stream and shard>`."""
WATERMARKS_PRUNED = "WatermarksPruned"
"""How many watermarks were ever removed from the aggregate: once set, a missing watermark proves nothing."""
WATERMARKS_PRUNED_UNDER = "WatermarksPrunedUnder"
"""The progress table's genesis token when a watermark was removed: only that table's checkpoints can vouch for it."""
APPLIED_SEQUENCE = "AppliedSequence"
"""Release 0.1.0's one watermark per aggregate: what it counted lies at or below it, whatever the shard; a shard
this version has not written the aggregate from adds only what lies above it."""
RECOUNTED_THROUGH = "RecountedThrough"
"""A repair's fence: the count includes every download created at or before this second that the recount saw."""
RECOUNT_BAND = "RecountBand"
"""Set by a repair while it is sure to come back ("<token>|<deadline epoch second>"): until then a record created
at or before RecountedThrough is held on the aggregate, not refused, and the repair counts those its recount missed."""
RECOUNT_HELD = "RecountHeld"
"""The held downloads, a string set of `download_id`s; with retractions one entry per held record (band_holds.py)."""
