"""The periods a board may be kept for, on the local wall clock: each one's keys, their shape, and where a bucket begins
and the next begins (buckets.py reads them through the deployment's time zone).

Keys: `2018-01-15T10` hour, `2018-01-15` day, `2018-W03` ISO 8601 week of the ISO week-numbering year, `2018-01`
month, `2018` year, `S2026-01-05` the season beginning that day (leaderboard_season), `all`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

ALL_TIME = "all"
SEASON = "season"


@dataclass(frozen=True)
class Period:
    """One period, all it takes to keep its boards, on the local wall clock: a wall time's key, a key's shape, where
    its bucket begins and where the next begins.

    Every other fact (the periods a deployment may keep, key formats and lengths, rolling windows, a
    board id's period) is derived from these, so that a new period is one entry here (and
    `leaderboard_periods`' validation in terraform/variables.tf).
    """

    name: str
    key_format: str
    """As an error message shows it, and as long as every key."""
    shape: re.Pattern[str]
    key_of: Callable[[datetime], str | None]
    """The key of the bucket holding a local wall time (naive); None where no bucket of the period holds it."""
    wall_start: Callable[[str], datetime]
    """The local wall time a key's bucket begins at (naive); ValueError for a key of the right shape naming no real
    date, hour or ISO week."""
    wall_next: Callable[[str], datetime]
    """The local wall time the bucket after a key's begins at; OverflowError or ValueError past the calendar."""
    previous: Callable[[str], str | None]
    """The key of the bucket before a key's; None before the calendar's first (or the first season)."""
    shape_suffices: bool = False
    """Every key of the right shape names a bucket (months and years, year 0 included), whether or not its wall time
    is one `datetime` can hold."""


def _ymd(wall: datetime) -> str:
    return f"{wall.year:04d}-{wall.month:02d}-{wall.day:02d}"


def _hour_key(wall: datetime) -> str:
    return f"{_ymd(wall)}T{wall.hour:02d}"


def _week_key(wall: datetime) -> str:
    year, week, _ = wall.isocalendar()
    return f"{year:04d}-W{week:02d}"


def _hour_start(key: str) -> datetime:
    return datetime(int(key[:4]), int(key[5:7]), int(key[8:10]), int(key[11:13]))


def _day_start(key: str) -> datetime:
    return datetime(int(key[:4]), int(key[5:7]), int(key[8:10]))


def _week_start(key: str) -> datetime:
    return datetime.combine(date.fromisocalendar(int(key[:4]), int(key[6:8]), 1), datetime.min.time())


def _month_start(key: str) -> datetime:
    return datetime(int(key[:4]), int(key[5:7]), 1)


def _month_next(key: str) -> datetime:
    index = int(key[:4]) * 12 + int(key[5:7])
    return datetime(index // 12, index % 12 + 1, 1)


def _month_before(key: str) -> str | None:
    index = int(key[:4]) * 12 + int(key[5:7]) - 2
    return f"{index // 12:04d}-{index % 12 + 1:02d}" if index >= 0 else None


def _period(
    name: str,
    key_format: str,
    shape: str,
    key_of: Callable[[datetime], str],
    start: Callable[[str], datetime],
    step: timedelta,
) -> Period:
    """A period of fixed wall-clock length (hour, day, week): the next bucket begins a step after a key's, and the
    bucket before is the one of the wall time a step before it."""

    def previous(key: str) -> str | None:
        try:
            return key_of(start(key) - step)
        except OverflowError:
            return None

    return Period(name, key_format, re.compile(shape), key_of, start, lambda key: start(key) + step, previous)


MONTH_KEY = re.compile(r"\A[0-9]{4}-(?:0[1-9]|1[0-2])\Z")
"""A month board's key (and its aggregates' sort key): `YYYY-MM`."""

BUCKETED_PERIODS = (
    _period(
        "hour",
        "YYYY-MM-DDTHH",
        r"\A(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})T(?P<hour>[0-9]{2})\Z",
        _hour_key,
        _hour_start,
        timedelta(hours=1),
    ),
    _period(
        "day",
        "YYYY-MM-DD",
        r"\A(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})\Z",
        _ymd,
        _day_start,
        timedelta(days=1),
    ),
    _period(
        "week", "YYYY-Www", r"\A(?P<year>[0-9]{4})-W(?P<week>[0-9]{2})\Z", _week_key, _week_start, timedelta(weeks=1)
    ),
    Period(
        "month",
        "YYYY-MM",
        MONTH_KEY,
        lambda wall: f"{wall.year:04d}-{wall.month:02d}",
        _month_start,
        _month_next,
        _month_before,
        shape_suffices=True,
    ),
    Period(
        "year",
        "YYYY",
        re.compile(r"\A(?P<year>[0-9]{4})\Z"),
        lambda wall: f"{wall.year:04d}",
        lambda key: datetime(int(key), 1, 1),
        lambda key: datetime(int(key) + 1, 1, 1),
        lambda key: f"{int(key) - 1:04d}" if int(key) > 0 else None,
        shape_suffices=True,
    ),
)
"""Every period of the calendar, shortest first: weeks are ISO 8601 weeks of the ISO week-numbering year."""
PERIODS_BY_NAME = {period.name: period for period in BUCKETED_PERIODS}

PERIODS = (*PERIODS_BY_NAME, ALL_TIME)
"""What every deployment may maintain (leaderboard_periods), a board per bucket; `all` is one board for all time.
`season` too, where the deployment sets its seasons (`Calendar.period_names`)."""
PERIOD_NAMES = (*PERIODS_BY_NAME, SEASON, ALL_TIME)
"""Every period `leaderboard_periods` may name."""
SEASON_KEY_FORMAT = "SYYYY-MM-DD"
SEASON_SHAPE = re.compile(r"\AS(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})\Z")
"""A season's key: `S` and the local date it begins, so that it is never a day's key (both are sort keys of the
same entity's aggregates)."""
KEY_FORMATS = {period.name: period.key_format for period in BUCKETED_PERIODS}
"""The calendar's periods' key formats; a season's is SEASON_KEY_FORMAT."""
BUCKET_KEY_LENGTH = {**{period.name: len(period.key_format) for period in BUCKETED_PERIODS}, ALL_TIME: len(ALL_TIME)}
"""The length of each period's bucket keys: 2018-01-15T10, 2018-01-15, 2018-W03, 2018-01, 2018, all."""


@dataclass(frozen=True)
class Season:
    """Seasons of `length_days` local days, the first beginning at local midnight of `start` (leaderboard_season)."""

    start: date
    length_days: int

    def period(self) -> Period:
        """The season as a period: its key is `S` and its first local day; nothing before `start` is in a season."""

        def start_of(key: str) -> datetime:
            first = date(int(key[1:5]), int(key[6:8]), int(key[9:11]))
            if first < self.start or (first - self.start).days % self.length_days:
                raise ValueError(f"{key} begins no season of {self.length_days} days from {self.start.isoformat()}")
            return datetime.combine(first, datetime.min.time())

        def key_of(wall: datetime) -> str | None:
            days = (wall.date() - self.start).days
            if days < 0:
                return None
            return self._key(self.start + timedelta(days=days - days % self.length_days))

        def previous(key: str) -> str | None:
            first = start_of(key).date()
            return None if first == self.start else self._key(first - timedelta(days=self.length_days))

        return Period(
            SEASON,
            SEASON_KEY_FORMAT,
            SEASON_SHAPE,
            key_of,
            start_of,
            lambda key: start_of(key) + timedelta(days=self.length_days),
            previous,
        )

    @staticmethod
    def _key(first: date) -> str:
        return f"S{first.year:04d}-{first.month:02d}-{first.day:02d}"
