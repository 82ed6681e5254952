"""The aggregator's placement of aggregates in the index, for host-side tools (sizing, rekey, reconcile).

The same arithmetic as lambda_src/aggregator/leaderboard_order.py, which the Lambda packages
alone; tests/unit/test_leaderboard_layout.py holds the two equal on random ids.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

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
