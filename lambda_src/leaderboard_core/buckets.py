"""Periods, their UTC buckets and board ids: where a download counts, and how a request names a board.

A board is one leaderboard: a period's bucket (`2018-01-15T10` hour, `2018-01-15` day, `2018-W03`
ISO 8601 week of the ISO week-numbering year, `2018-01` month, `2018` year, `all`), and with a
category `<bucket>@<category>`, the category percent-encoded. The board id is the aggregate's sort
key and its index partition (docs/query-contract.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from urllib.parse import quote

ALL_TIME = "all"
CATEGORY_SEPARATOR = "@"
MAX_SORT_KEY_BYTES = 1024
"""DynamoDB: a sort key's "maximum length is 1,024 bytes" (Developer Guide, *Constraints*); a board id is one."""


@dataclass(frozen=True)
class Period:
    """One period, all it takes to keep its boards: how a moment names its bucket, a key's shape, the bucket before.

    Every other fact (the periods a deployment may keep, key formats and lengths, rolling windows, a
    board id's period) is derived from the table below, so that a new period is one entry here (and
    `leaderboard_periods`' validation in terraform/variables.tf).
    """

    name: str
    key_format: str
    """As an error message shows it, and as long as every key."""
    shape: re.Pattern[str]
    key_of: Callable[[datetime], str]
    """The key of the UTC bucket holding a moment."""
    previous: Callable[[str], str | None]
    """The key of the bucket before a key's; None before the calendar's first."""
    exists: Callable[[re.Match[str]], bool] = lambda _match: True
    """Whether a key of the right shape names a real bucket (a real date, hour or ISO week)."""


def _ymd(moment: datetime) -> str:
    return f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"


def _starts(start: Callable[[str], datetime]) -> Callable[[re.Match[str]], bool]:
    """Which keys of the right shape exist: those whose bucket has a first moment (a real date, hour or ISO week)."""

    def exists(match: re.Match[str]) -> bool:
        try:
            start(match.string)
        except ValueError:
            return False
        return True

    return exists


def _stepped(
    key_of: Callable[[datetime], str], start: Callable[[str], datetime], step: timedelta
) -> Callable[[str], str | None]:
    """The bucket before, for periods of a fixed length: the key of the moment one step before the bucket's start."""

    def previous(key: str) -> str | None:
        try:
            return key_of(start(key) - step)
        except OverflowError:
            return None

    return previous


def _week_start(key: str) -> datetime:
    return datetime.combine(date.fromisocalendar(int(key[:4]), int(key[6:8]), 1), datetime.min.time(), tzinfo=UTC)


def _hour_key(moment: datetime) -> str:
    return f"{_ymd(moment)}T{moment.hour:02d}"


def _week_key(moment: datetime) -> str:
    year, week, _ = moment.isocalendar()
    return f"{year:04d}-W{week:02d}"


def _hour_start(key: str) -> datetime:
    return datetime(int(key[:4]), int(key[5:7]), int(key[8:10]), int(key[11:13]), tzinfo=UTC)


def _day_start(key: str) -> datetime:
    return datetime(int(key[:4]), int(key[5:7]), int(key[8:10]), tzinfo=UTC)


def _month_before(key: str) -> str | None:
    index = int(key[:4]) * 12 + int(key[5:7]) - 2
    return f"{index // 12:04d}-{index % 12 + 1:02d}" if index >= 0 else None


MONTH_KEY = re.compile(r"\A[0-9]{4}-(?:0[1-9]|1[0-2])\Z")
"""A month board's key (and its aggregates' sort key): `YYYY-MM`."""

BUCKETED_PERIODS = (
    Period(
        "hour",
        "YYYY-MM-DDTHH",
        re.compile(r"\A(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})T(?P<hour>[0-9]{2})\Z"),
        _hour_key,
        _stepped(_hour_key, _hour_start, timedelta(hours=1)),
        _starts(_hour_start),
    ),
    Period(
        "day",
        "YYYY-MM-DD",
        re.compile(r"\A(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})\Z"),
        _ymd,
        _stepped(_ymd, _day_start, timedelta(days=1)),
        _starts(_day_start),
    ),
    Period(
        "week",
        "YYYY-Www",
        re.compile(r"\A(?P<year>[0-9]{4})-W(?P<week>[0-9]{2})\Z"),
        _week_key,
        _stepped(_week_key, _week_start, timedelta(weeks=1)),
        _starts(_week_start),
    ),
    Period("month", "YYYY-MM", MONTH_KEY, lambda moment: f"{moment.year:04d}-{moment.month:02d}", _month_before),
    Period(
        "year",
        "YYYY",
        re.compile(r"\A(?P<year>[0-9]{4})\Z"),
        lambda moment: f"{moment.year:04d}",
        lambda key: f"{int(key) - 1:04d}" if int(key) > 0 else None,
    ),
)
"""Every period with buckets in time, shortest first: weeks are ISO 8601 weeks of the ISO week-numbering year."""
_BY_NAME = {period.name: period for period in BUCKETED_PERIODS}

PERIODS = (*_BY_NAME, ALL_TIME)
"""What a deployment may maintain (leaderboard_periods), a board per UTC bucket; `all` is one board for all time."""
KEY_FORMATS = {period.name: period.key_format for period in BUCKETED_PERIODS}
BUCKET_KEY_LENGTH = {**{period.name: len(period.key_format) for period in BUCKETED_PERIODS}, ALL_TIME: len(ALL_TIME)}
"""The length of each period's bucket keys: 2018-01-15T10, 2018-01-15, 2018-W03, 2018-01, 2018, all."""


def periods_from_text(text: str) -> tuple[str, ...]:
    """LEADERBOARD_PERIODS as the module sets it (comma-separated); ValueError for anything else."""
    periods = tuple(period for period in text.split(",") if period)
    if not periods or any(period not in PERIODS for period in periods):
        raise ValueError(f"LEADERBOARD_PERIODS is {text!r}, not a comma-separated list of {', '.join(PERIODS)}")
    if len(set(periods)) != len(periods):
        raise ValueError(f"LEADERBOARD_PERIODS is {text!r}: a period named twice would count each download twice")
    return periods


class MomentOutOfRange(ValueError):
    """A timestamp that parses, but whose UTC moment lies before year 1 or after 9999: no bucket holds it."""


def utc_moment(timestamp: str) -> datetime:
    """The UTC moment of an ISO 8601 timestamp; one without an offset is taken as UTC, as the data model states.

    ValueError for anything else (MomentOutOfRange for a moment past the calendar in UTC), so that a caller rejects
    it: an OverflowError would escape a caller that expects bad input to raise ValueError.
    """
    text = timestamp.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    try:
        return moment.astimezone(UTC) if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    except OverflowError as error:
        raise MomentOutOfRange("is outside the years 1 to 9999 in UTC: no bucket holds it") from error


def bucket_key(moment: datetime, period: str) -> str:
    """The UTC bucket of a period holding `moment`."""
    if period == ALL_TIME:
        return ALL_TIME
    if period not in _BY_NAME:
        raise ValueError(f"unknown period {period!r}")
    return _BY_NAME[period].key_of(moment)


def month_of(timestamp: str) -> str:
    """The UTC month `YYYY-MM` of an ISO 8601 timestamp.

    The guide slices the first seven characters, which files a download at
    2018-01-31T23:30:00-05:00 under January although it happened in February UTC.
    """
    return bucket_key(utc_moment(timestamp), "month")


def is_bucket_key(period: str, key: str) -> bool:
    """Exactly the key the aggregator writes for some moment: ASCII digits, a real date, hour and ISO week."""
    definition = _BY_NAME.get(period)
    match = definition.shape.match(key) if definition is not None else None
    return match is not None and definition.exists(match)


def window_keys(period: str, key: str, last: int) -> list[str]:
    """The `last` bucket keys ending with `key`, newest first; buckets before the calendar's first are left out."""
    previous = _BY_NAME[period].previous
    keys = [key]
    while len(keys) < last and (before := previous(keys[-1])) is not None:
        keys.append(before)
    return keys[:last]


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
    return next((period.name for period in BUCKETED_PERIODS if is_bucket_key(period.name, bucket)), None)
