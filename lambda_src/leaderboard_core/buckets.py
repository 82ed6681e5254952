"""Periods, their UTC buckets and board ids: where a download counts, and how a request names a board.

A board is one leaderboard: a period's bucket (`2018-01-15T10` hour, `2018-01-15` day, `2018-W03`
ISO 8601 week of the ISO week-numbering year, `2018-01` month, `2018` year, `all`), and with a
category `<bucket>@<category>`, the category percent-encoded. The board id is the aggregate's sort
key and its index partition (docs/query-contract.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from urllib.parse import quote

PERIODS = ("hour", "day", "week", "month", "year", "all")
"""What a deployment may maintain (leaderboard_periods), a board per UTC bucket."""
ALL_TIME = "all"
CATEGORY_SEPARATOR = "@"
MAX_SORT_KEY_BYTES = 1024
"""DynamoDB: a sort key's "maximum length is 1,024 bytes" (Developer Guide, *Constraints*); a board id is one."""
KEY_FORMATS = {"hour": "YYYY-MM-DDTHH", "day": "YYYY-MM-DD", "week": "YYYY-Www", "month": "YYYY-MM", "year": "YYYY"}
BUCKET_KEY_LENGTH = {"hour": 13, "day": 10, "week": 8, "month": 7, "year": 4, "all": 3}
"""The length of each period's bucket keys: 2018-01-15T10, 2018-01-15, 2018-W03, 2018-01, 2018, all."""
MONTH_KEY = re.compile(r"\A[0-9]{4}-(?:0[1-9]|1[0-2])\Z")
"""A month board's key (and its aggregates' sort key): `YYYY-MM`."""

_KEY_SHAPES = {
    "hour": re.compile(r"\A(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})T(?P<hour>[0-9]{2})\Z"),
    "day": re.compile(r"\A(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})\Z"),
    "week": re.compile(r"\A(?P<year>[0-9]{4})-W(?P<week>[0-9]{2})\Z"),
    "month": MONTH_KEY,
    "year": re.compile(r"\A(?P<year>[0-9]{4})\Z"),
}


def periods_from_text(text: str) -> tuple[str, ...]:
    """LEADERBOARD_PERIODS as the module sets it (comma-separated); ValueError for anything else."""
    periods = tuple(period for period in text.split(",") if period)
    if not periods or any(period not in PERIODS for period in periods):
        raise ValueError(f"LEADERBOARD_PERIODS is {text!r}, not a comma-separated list of {', '.join(PERIODS)}")
    return periods


def utc_moment(timestamp: str) -> datetime:
    """The UTC moment of an ISO 8601 timestamp; one without an offset is taken as UTC, as the data model states."""
    text = timestamp.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    return moment.astimezone(UTC) if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def bucket_key(moment: datetime, period: str) -> str:
    """The UTC bucket of a period holding `moment`; weeks are ISO 8601 weeks of the ISO week-numbering year."""
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


def month_of(timestamp: str) -> str:
    """The UTC month `YYYY-MM` of an ISO 8601 timestamp.

    The guide slices the first seven characters, which files a download at
    2018-01-31T23:30:00-05:00 under January although it happened in February UTC.
    """
    return bucket_key(utc_moment(timestamp), "month")


def is_bucket_key(period: str, key: str) -> bool:
    """Exactly the key the aggregator writes for some moment: ASCII digits, a real date, hour and ISO week."""
    shape = _KEY_SHAPES.get(period)
    match = shape.match(key) if shape is not None else None
    if match is None:
        return False
    if period == "month":
        return True
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


def board_id(bucket: str, category: str | None = None) -> str:
    """The board id (aggregate sort key, index partition): the bucket, or `<bucket>@<category>`, percent-encoded."""
    return bucket if category is None else f"{bucket}{CATEGORY_SEPARATOR}{quote(category, safe='')}"


def download_boards(moment: datetime, periods: Iterable[str], category: str | None = None) -> list[str]:
    """Every board a download at `moment` counts in: its bucket of each period kept, then, with a category, the
    category's board of each; the first is the one a failure message names for the download."""
    buckets = [bucket_key(moment, period) for period in periods]
    boards = [board_id(bucket) for bucket in buckets]
    if category is not None:
        boards += [board_id(bucket, category) for bucket in buckets]
    return boards


def fits_sort_key(boards: Iterable[str]) -> bool:
    """Every board id fits DynamoDB's sort key: a category too long for it makes a download uncountable."""
    return all(len(board.encode()) <= MAX_SORT_KEY_BYTES for board in boards)


def period_of_board(board: str) -> str | None:
    """The period of a board id (`2018-01@rock`: month, `all`: all); None for an id no period's bucket has."""
    bucket, separator, category = board.partition(CATEGORY_SEPARATOR)
    if separator and not category:
        return None
    if bucket == ALL_TIME:
        return ALL_TIME
    return next((period for period in KEY_FORMATS if is_bucket_key(period, bucket)), None)
