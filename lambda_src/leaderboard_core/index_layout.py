"""Where an aggregate sits in the sparse index: its leaderboard partition, and its order within it.

The index's partition key is the period attribute (the guide's `Month`), which holds the aggregate's
board id: the board id itself with one leaderboard shard (the guide's layout), or "<board>#<k>" with N
shards, k a stable hash of the entity id, so that one board's aggregate updates spread over N index
partitions. The index's sort key is
`LeaderboardOrder` = count x 10^26 + a tie-breaker that, read in descending order, puts equal
counts in ascending order of entity id. The tie-breaker holds the id's first 10 bytes; ids that
share them tie in the index too, and the query function orders those by the full id.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

ORDER_SCALE = 10**26
"""count x ORDER_SCALE + tie-breaker stays within DynamoDB's 38 digits for counts below 10^12."""
MAX_COUNT = 10**12 - 1
"""The largest value (count, or sum's whole part) whose order fits in DynamoDB's 38 digits."""
MAX_DECIMALS = 6
"""Decimals a summed value may carry: its smallest step must stay above the tie-breaker."""
TIEBREAK_BYTES = 10
SUMMED_TIEBREAK_BYTES = 8
SUMMED_TIEBREAK_SCALE = ORDER_SCALE // 10**MAX_DECIMALS
"""A sum's smallest step in the order: 10^-MAX_DECIMALS x ORDER_SCALE = 10^20."""
PARTITION_SEPARATOR = "#"


def leaderboard_shard(entity_id: str, shards: int) -> int:
    """Stable across processes and versions: the first 8 bytes of the id's SHA-256, modulo the shard count."""
    return int.from_bytes(hashlib.sha256(entity_id.encode()).digest()[:8], "big") % shards


def leaderboard_partition(board: str, entity_id: str, shards: int) -> str:
    if shards == 1:
        return board
    return f"{board}{PARTITION_SEPARATOR}{leaderboard_shard(entity_id, shards)}"


def leaderboard_partitions(board: str, shards: int) -> list[str]:
    """Every index partition of a board, as the query function reads them."""
    return [board] if shards == 1 else [f"{board}{PARTITION_SEPARATOR}{shard}" for shard in range(shards)]


def order_tiebreak(entity_id: str, summed: bool = False) -> int:
    """Larger for smaller ids: the index is read in descending order, equal values then come in ascending id order.

    A count moves the order in steps of 10^26, so the first 10 bytes of the id fit below it. A sum
    (at most 6 decimals) moves it in steps of 10^20: then only the first 8 bytes fit (2^64 < 10^20),
    or an id could outweigh a decimal.
    """
    width, scale = (SUMMED_TIEBREAK_BYTES, SUMMED_TIEBREAK_SCALE) if summed else (TIEBREAK_BYTES, ORDER_SCALE)
    prefix = entity_id.encode()[:width].ljust(width, b"\0")
    return scale - 1 - int.from_bytes(prefix, "big")


def order_of(value: int | Decimal, entity_id: str, summed: bool = False) -> int:
    """Exact for counts below 10^12, and for sums with at most 6 decimals below 10^12 (38 digits)."""
    return int(value * ORDER_SCALE) + order_tiebreak(entity_id, summed)


def leave_index(table: str, key: dict[str, Any], count: str, period: str, order: str) -> dict[str, Any]:
    """The UpdateItem taking an aggregate whose count is back at 0 out of the sparse index, only while it is still 0:
    its count (0) and bookkeeping stay, and the next write adding to it puts it back with its order rebuilt from the
    tie-breaker. The aggregator sends it after a retraction, a repair after its band's close."""
    return {
        "TableName": table,
        "Key": key,
        "UpdateExpression": "REMOVE #period, #order",
        "ConditionExpression": "#count = :zero AND attribute_exists(#period)",
        "ExpressionAttributeNames": {"#count": count, "#period": period, "#order": order},
        "ExpressionAttributeValues": {":zero": {"N": "0"}},
    }
