"""Boards: one leaderboard per UTC period bucket, optionally per category, as the aggregator writes them.

The layout is the contract of /work/specs/issue16-layout.md (docs/query-contract.md): bucket keys
`2018-01-15T10` (hour), `2018-01-15` (day), `2018-W03` (ISO 8601 week of the ISO week-numbering
year), `2018-01` (month), `2018` (year), `all`; a board id is the bucket key, or
`<key>@<category>` with the category percent-encoded; with N leaderboard shards, a board's index
partitions are `<board>#0` .. `<board>#N-1`. The query function's zip holds only its own modules,
so it keeps this copy of the aggregator's bucket arithmetic and index placement;
tests/unit/test_one_definition.py holds each copy equal to the aggregator's (docs/design.md,
"One definition per fact").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import quote

PERIODS = ("hour", "day", "week", "month", "year", "all")
ALL_TIME = "all"
CATEGORY_SEPARATOR = "@"
PARTITION_SEPARATOR = "#"
MAX_SORT_KEY_BYTES = 1024
"""DynamoDB's limit for a sort key value (Developer Guide, Constraints): a board id is an aggregate's sort key."""

_KEY_SHAPES = {
    "hour": re.compile(r"\A(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})T(?P<hour>[0-9]{2})\Z"),
    "day": re.compile(r"\A(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})\Z"),
    "week": re.compile(r"\A(?P<year>[0-9]{4})-W(?P<week>[0-9]{2})\Z"),
    "month": re.compile(r"\A(?P<year>[0-9]{4})-(?P<month>0[1-9]|1[0-2])\Z"),
    "year": re.compile(r"\A(?P<year>[0-9]{4})\Z"),
}
KEY_FORMATS = {"hour": "YYYY-MM-DDTHH", "day": "YYYY-MM-DD", "week": "YYYY-Www", "month": "YYYY-MM", "year": "YYYY"}


@dataclass(frozen=True)
class Boards:
    """What the deployment maintains: its periods, whether category boards exist, whether values are sums."""

    periods: tuple[str, ...] = ("month",)
    categories: bool = False
    summed: bool = False


def boards_from_environment(environ: Mapping[str, str]) -> Boards:
    """The module sets LEADERBOARD_PERIODS (comma-separated), CATEGORY_ATTRIBUTE and SUM_ATTRIBUTE (empty: none)."""
    text = environ.get("LEADERBOARD_PERIODS", "month")
    periods = tuple(period for period in text.split(",") if period)
    if not periods or any(period not in PERIODS for period in periods):
        raise ValueError(f"LEADERBOARD_PERIODS is {text!r}, not a comma-separated list of {', '.join(PERIODS)}")
    return Boards(periods, bool(environ.get("CATEGORY_ATTRIBUTE")), bool(environ.get("SUM_ATTRIBUTE")))


def bucket_key(moment: datetime, period: str) -> str:
    """The UTC bucket of `period` holding `moment` (an aware datetime in UTC)."""
    if period == "hour":
        return f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}"
    if period == "day":
        return f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
    if period == "week":
        year, week, _ = moment.isocalendar()
        return f"{year:04d}-W{week:02d}"
    if period == "month":
        return f"{moment.year:04d}-{moment.month:02d}"
    if period == "year":
        return f"{moment.year:04d}"
    if period == ALL_TIME:
        return ALL_TIME
    raise ValueError(f"unknown period {period!r}")


def is_bucket_key(period: str, key: str) -> bool:
    """Exactly the key the aggregator writes for some moment: ASCII digits, a real date, hour and ISO week."""
    shape = _KEY_SHAPES.get(period)
    match = shape.match(key) if shape is not None else None
    if match is None:
        return False
    fields = {name: int(value) for name, value in match.groupdict().items()}
    try:
        if period in ("hour", "day"):
            datetime(fields["year"], fields["month"], fields["day"], fields.get("hour", 0), tzinfo=UTC)
        elif period == "week":
            date.fromisocalendar(fields["year"], fields["week"], 1)
    except ValueError:
        return False
    return True


def window_keys(period: str, key: str, last: int) -> list[str]:
    """The `last` bucket keys ending with `key`, newest first; buckets before the calendar's first are left out."""
    if period == "year":
        return [f"{year:04d}" for year in range(int(key), int(key) - last, -1) if year >= 0]
    if period == "month":
        index = int(key[:4]) * 12 + int(key[5:7]) - 1
        return [f"{i // 12:04d}-{i % 12 + 1:02d}" for i in range(index, index - last, -1) if i >= 0]
    start = _moment_of(period, key)
    step = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(weeks=1)}[period]
    keys = []
    for back in range(last):
        try:
            keys.append(bucket_key(start - back * step, period))
        except OverflowError:
            break
    return keys


def _moment_of(period: str, key: str) -> datetime:
    """The first moment of an hour, day or week bucket."""
    if period == "week":
        year, week = int(key[:4]), int(key[6:8])
        return datetime.combine(date.fromisocalendar(year, week, 1), datetime.min.time(), tzinfo=UTC)
    hour = int(key[11:13]) if period == "hour" else 0
    return datetime(int(key[:4]), int(key[5:7]), int(key[8:10]), hour, tzinfo=UTC)


def board_id(key: str, category: str | None = None) -> str:
    """The aggregate's sort key and index partition: the bucket key, or `<key>@<category>` percent-encoded."""
    return key if category is None else f"{key}{CATEGORY_SEPARATOR}{quote(category, safe='')}"


def leaderboard_shard(entity_id: str, shards: int) -> int:
    """The aggregator's leaderboard shard of an entity: the first 8 bytes of its id's SHA-256, modulo the shards."""
    return int.from_bytes(hashlib.sha256(entity_id.encode()).digest()[:8], "big") % shards


def leaderboard_partition(board: str, entity_id: str, shards: int) -> str:
    """The index partition the aggregator writes an entity's aggregate of this board to."""
    return board if shards == 1 else f"{board}{PARTITION_SEPARATOR}{leaderboard_shard(entity_id, shards)}"


def leaderboard_partitions(board: str, shards: int) -> list[str]:
    """Every index partition of a board."""
    return [board] if shards == 1 else [f"{board}{PARTITION_SEPARATOR}{shard}" for shard in range(shards)]


@dataclass(frozen=True)
class Board:
    """One leaderboard, and how the request named it (the answer names it the same way)."""

    period: str
    key: str
    category: str | None = None
    month_form: bool = False
    """Asked as {"month": ...}: the answer keeps that request's shape, byte for byte."""

    @classmethod
    def month(cls, month: str, category: str | None = None) -> Board:
        return cls("month", month, category, month_form=True)

    @property
    def id(self) -> str:
        return board_id(self.key, self.category)

    def named(self) -> dict[str, Any]:
        """The answer's first fields: `month`, or `period` and `key` (none for `all`); then `category` if any."""
        fields: dict[str, Any] = {"month": self.key} if self.month_form else {"period": self.period}
        if not self.month_form and self.period != ALL_TIME:
            fields["key"] = self.key
        if self.category is not None:
            fields["category"] = self.category
        return fields

    def at(self, key: str) -> Board:
        """The same period and category at another bucket."""
        return Board(self.period, key, self.category, self.month_form)
