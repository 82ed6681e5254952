"""The aggregator's bookkeeping, as the operator tools read and repair it: sequence numbers, download ids, the
progress table's attributes and an aggregate's.

The aggregator writes all of these (shard_progress.py, aggregate_store.py); the recount and recover read the
progress table to tell what is in flight, and a repair conditions on an aggregate's watermarks and fence.
"""

from __future__ import annotations

import base64
import hashlib

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
