"""The aggregator's placement of aggregates in the index and its month of a download, for host-side tools.

The same arithmetic as lambda_src/aggregator/leaderboard_order.py and the same month parser as
lambda_src/aggregator/download_records.py, which the Lambda packages alone (an operator install
of this package has no lambda_src/); tests/unit/test_leaderboard_layout.py holds each copy equal
to the aggregator's on generated input.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

ORDER_SCALE = 10**26
TIEBREAK_BYTES = 10


@dataclass(frozen=True)
class AttributeNames:
    """The table's attribute names, as the module's attribute-name variables set them (the guide's by default)."""

    entity: str = "songID"
    sort_key: str = "SK"
    timestamp: str = "Timestamp"
    period: str = "Month"
    count: str = "DownloadCount"
    order: str = "LeaderboardOrder"


GUIDE_NAMES = AttributeNames()


def leaderboard_shard(entity_id: str, shards: int) -> int:
    return int.from_bytes(hashlib.sha256(entity_id.encode()).digest()[:8], "big") % shards


def leaderboard_partition(period: str, entity_id: str, shards: int) -> str:
    return period if shards == 1 else f"{period}#{leaderboard_shard(entity_id, shards)}"


def order_of(count: int, entity_id: str) -> int:
    prefix = entity_id.encode()[:TIEBREAK_BYTES].ljust(TIEBREAK_BYTES, b"\0")
    return count * ORDER_SCALE + ORDER_SCALE - 1 - int.from_bytes(prefix, "big")


def month_of(timestamp: str) -> str:
    """The UTC month `YYYY-MM` a download counts in: the aggregator's `download_records.month_of`, copied.

    A recount that parsed timestamps differently from the aggregator would "repair" correct counts
    (surrounding spaces, a lowercase z); ValueError for what the aggregator rejects too.
    """
    text = timestamp.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return f"{moment.year:04d}-{moment.month:02d}"
