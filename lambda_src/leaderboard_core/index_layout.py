"""Where an aggregate sits in the sparse index: its leaderboard partition, and its order within it.

The index's partition key is the period attribute (the guide's `Month`), which holds the aggregate's
board id: the board id itself with one leaderboard shard (the guide's layout), or "<board>#<k>" with N
shards, k a stable hash of the entity id, so that one board's aggregate updates spread over N index
partitions. The index's sort key is
`LeaderboardOrder` = count x 10^26 + a tie-breaker that, read in descending order, puts equal
counts in ascending order of entity id. The tie-breaker holds the id's first 10 bytes; ids that
share them tie in the index too, and the query function orders those by the full id.

With the tie-break `first_reached` the tie-breaker is the latest counted download's instant first, then the id:
`(LATEST_LIMIT - 1 - latest milliseconds since 0001-01-01) x 10^k + the id's first bytes`, so that, read in
descending order, equal values list the entity whose latest counted download is older first (k = 11 and 4 bytes for
counts, k = 5 and 2 bytes for sums, whose smallest step is 10^20).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
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
ENTITY_TIE_BREAK = "entity"
FIRST_REACHED = "first_reached"
TIE_BREAKS = (ENTITY_TIE_BREAK, FIRST_REACHED)
TIE_BREAK_VARIABLE = "LEADERBOARD_TIE_BREAK"
"""The module's `leaderboard_tie_break`, in the aggregator's environment."""
LATEST_COUNTED = "LatestCounted"
"""first_reached: the latest counted download's instant (milliseconds since 0001-01-01 UTC), kept beside the count."""
LATEST_LIMIT = 10**15
"""Above every instant of the years 1 to 9999 in milliseconds since 0001-01-01 (about 3.2 x 10^14)."""
_EPOCH = datetime(1, 1, 1, tzinfo=UTC)
_FIRST_REACHED_LAYOUT = {False: (10**11, 4), True: (10**5, 2)}
"""The id's scale and bytes below the instant: 10^15 x 10^11 = ORDER_SCALE, 10^15 x 10^5 = SUMMED_TIEBREAK_SCALE."""


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


def instant_of(moment: datetime) -> int:
    """A UTC moment as whole milliseconds since 0001-01-01: what `first_reached` compares (sub-millisecond is cut)."""
    elapsed = moment.astimezone(UTC) - _EPOCH
    return (elapsed.days * 86_400 + elapsed.seconds) * 1000 + elapsed.microseconds // 1000


def latest_counted_text(instant: int | None) -> str:
    """An instant of `instant_of` as ISO 8601 UTC to the millisecond, for messages; "none" when there is none."""
    if instant is None:
        return "none"
    moment = _EPOCH + timedelta(milliseconds=instant)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def first_reached_tiebreak(latest: int, entity_id: str, summed: bool = False) -> int:
    """Larger for an older latest instant, then for a smaller id: below one step of the value (10^26, or 10^20)."""
    scale, width = _FIRST_REACHED_LAYOUT[summed]
    prefix = entity_id.encode()[:width].ljust(width, b"\0")
    return (LATEST_LIMIT - 1 - latest) * scale + scale - 1 - int.from_bytes(prefix, "big")


def ranked_order(
    value: int | Decimal, entity_id: str, summed: bool = False, latest: int | None = None, tie_break: str = "entity"
) -> int:
    """The order under a tie-break: `order_of` for `entity`; for `first_reached`, value then `latest` then id (no
    latest: no download counted, after every entity of the same value that has one)."""
    if tie_break != FIRST_REACHED:
        return order_of(value, entity_id, summed)
    if latest is None:
        latest = LATEST_LIMIT - 1
    return int(value * ORDER_SCALE) + first_reached_tiebreak(latest, entity_id, summed)


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
