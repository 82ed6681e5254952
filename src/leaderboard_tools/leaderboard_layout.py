"""The product's facts the host tools need: attribute names, boards, index placement and order, a download's month.

The aggregator and the query function define these in their own zips (lambda_src/aggregator:
download_records.py, leaderboard_order.py; lambda_src/query: boards.py, query.py), which the host
package cannot import: an operator install of this package has no lambda_src/. This module is the
host's one copy; tests/unit/test_one_definition.py holds each fact equal to the functions' (the
constants by value, the functions on generated input), as docs/design.md, "One definition per
fact", lists.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime

ORDER_SCALE = 10**26
TIEBREAK_BYTES = 10
PARTITION_SEPARATOR = "#"
PERIODS = ("hour", "day", "week", "month", "year", "all")
"""The boards a deployment may keep (leaderboard_periods)."""
BUCKET_KEY_LENGTH = {"hour": 13, "day": 10, "week": 8, "month": 7, "year": 4, "all": 3}
"""2018-01-15T10, 2018-01-15, 2018-W03, 2018-01, 2018, all: the aggregator's bucket keys."""
MONTH_KEY = re.compile(r"\A[0-9]{4}-(?:0[1-9]|1[0-2])\Z")
"""A month board's key (and its aggregates' sort key): `YYYY-MM`, as the aggregator writes and the query takes it."""
CATEGORY_SEPARATOR = "@"
MAX_SORT_KEY_BYTES = 1024
"""DynamoDB's limit for a sort key value (Developer Guide, Constraints): a board id is an aggregate's sort key."""
COUNT_FIELD = "downloadCount"
"""The field of a query answer holding a count (docs/query-contract.md), whatever the count attribute's name."""


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
    return period if shards == 1 else f"{period}{PARTITION_SEPARATOR}{leaderboard_shard(entity_id, shards)}"


def leaderboard_partitions(period: str, shards: int) -> list[str]:
    """Every index partition of a board, as the query function reads them."""
    return [period] if shards == 1 else [f"{period}{PARTITION_SEPARATOR}{shard}" for shard in range(shards)]


def order_of(count: int, entity_id: str) -> int:
    prefix = entity_id.encode()[:TIEBREAK_BYTES].ljust(TIEBREAK_BYTES, b"\0")
    return count * ORDER_SCALE + ORDER_SCALE - 1 - int.from_bytes(prefix, "big")


def download_id(sort_key: str) -> str:
    """A download's identity within its song, as a repair's band holds it: the aggregator's
    `download_records.download_id`, copied (16 bytes of SHA-256 of the sort key, base64url, no padding)."""
    digest = hashlib.sha256(sort_key.encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


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
