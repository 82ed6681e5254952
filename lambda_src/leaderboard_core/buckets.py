"""Buckets in the deployment's time zone, and board ids: where a download counts, how a request names a board, and
when that board begins and ends (the periods themselves, on the wall clock, are periods.py's).

A board is one leaderboard: a period's bucket (periods.py), and with a category `<bucket>@<category>`, the
category percent-encoded. The board id is the aggregate's sort key and its index partition
(docs/query-contract.md).

A bucket is a span of the deployment's local wall clock (`leaderboard_time_zone`, UTC by default): a day
begins at local midnight, whatever its length in hours. Where clocks go back, the wall clock repeats; a
moment's bucket is the one of the latest wall time reached up to it, so the repeated hour counts with its
first occurrence under one key (`2026-11-01T01` in New York holds both) and buckets never overlap. Where
clocks go forward, a skipped hour is no bucket: no moment holds it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from importlib import resources
from urllib.parse import quote
from zoneinfo import ZoneInfo

from leaderboard_core.periods import ALL_TIME, PERIOD_NAMES, PERIODS_BY_NAME, SEASON, SEASON_SHAPE, Period, Season

CATEGORY_SEPARATOR = "@"
MAX_SORT_KEY_BYTES = 1024
"""DynamoDB: a sort key's "maximum length is 1,024 bytes" (Developer Guide, *Constraints*); a board id is one."""
UTC_ZONE = "UTC"
TIME_ZONE_VARIABLE = "LEADERBOARD_TIME_ZONE"
TIME_ZONE_DATA_VARIABLE = "LEADERBOARD_TIME_ZONE_DATA"
"""The tzdata release the functions carry (the aggregator's environment): the tools bucket only by the same one."""
SEASON_START_VARIABLE = "LEADERBOARD_SEASON_START"
SEASON_LENGTH_VARIABLE = "LEADERBOARD_SEASON_LENGTH_DAYS"
TIME_ZONE_DATA = "tzdata"
"""The pinned IANA time zone database every zone is read from (in each zip, and a dependency of the tools), so that
the aggregator, the query function and the tools bucket alike whatever the machine's own zone files say."""


class MomentOutOfRange(ValueError):
    """A timestamp that parses, but whose moment lies before year 1 or after 9999 in UTC or on the local clock: no
    bucket holds it."""


@functools.cache
def time_zone_names() -> tuple[str, ...]:
    """Every zone of the pinned time zone database (tzdata's list of its zones), sorted."""
    return tuple(sorted(resources.files(TIME_ZONE_DATA).joinpath("zones").read_text().split()))


def time_zone(name: str) -> tzinfo:
    """The zone named, from the pinned database; UTC itself for `UTC`. ValueError for a name it does not hold."""
    if name == UTC_ZONE:
        return UTC
    if name not in time_zone_names():
        raise ValueError(f"{TIME_ZONE_VARIABLE} is {name!r}, not a zone of the IANA time zone database")
    with resources.files(f"{TIME_ZONE_DATA}.zoneinfo").joinpath(*name.split("/")).open("rb") as data:
        return ZoneInfo.from_file(data, key=name)


@dataclass(frozen=True)
class Calendar:
    """The deployment's clock for boards: its time zone (LEADERBOARD_TIME_ZONE) and its seasons, if it keeps any.

    Every bucket of every period is read through it: the aggregator's, the query function's and the tools'.
    """

    zone_name: str = UTC_ZONE
    season: Season | None = None
    zone: tzinfo = field(init=False, repr=False, compare=False)
    periods: Mapping[str, Period] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "zone", time_zone(self.zone_name))
        seasons = {SEASON: self.season.period()} if self.season is not None else {}
        object.__setattr__(self, "periods", {**PERIODS_BY_NAME, **seasons})

    @property
    def period_names(self) -> tuple[str, ...]:
        """The periods this deployment may keep: the calendar's, `season` where it has seasons, `all`."""
        return (*self.periods, ALL_TIME)

    def wall(self, moment: datetime) -> datetime:
        """The local wall time (naive) whose bucket holds `moment`: in a repeated hour, the latest reached so far."""
        try:
            local = moment.astimezone(self.zone)
        except OverflowError as error:
            raise MomentOutOfRange("is outside the years 1 to 9999 on the local clock: no bucket holds it") from error
        if local.fold and self.zone is not UTC:
            local = self._before_clocks_went_back(moment, local)
        return local.replace(tzinfo=None, fold=0)

    def _before_clocks_went_back(self, moment: datetime, local: datetime) -> datetime:
        """The wall time just before the clocks went back, for a moment of the repeated span they made."""
        repeated = local.replace(fold=0).utcoffset() - local.utcoffset()  # type: ignore[operator]
        changed = self._change_between((moment - repeated).replace(microsecond=0), moment)
        return (changed - timedelta(microseconds=1)).astimezone(self.zone)

    def _change_between(self, before: datetime, after: datetime) -> datetime:
        """The first whole second after `before` (and at or before `after`) where the zone's offset differs."""
        offset = before.astimezone(self.zone).utcoffset()
        low, high = 0, max(1, int((after - before).total_seconds()))
        while low < high:
            middle = (low + high) // 2
            if (before + timedelta(seconds=middle)).astimezone(self.zone).utcoffset() != offset:
                high = middle
            else:
                low = middle + 1
        return before + timedelta(seconds=low)

    def instant(self, wall: datetime) -> datetime:
        """The first moment (UTC) whose wall time is at or past `wall`: where a bucket beginning then begins. For a
        wall time the clocks skipped, the moment they skipped it."""
        if self.zone is UTC:
            return wall.replace(tzinfo=UTC)
        first = wall.replace(tzinfo=self.zone, fold=0).astimezone(UTC)
        if first.astimezone(self.zone).replace(tzinfo=None) == wall:
            return first
        return self._change_between(wall.replace(tzinfo=self.zone, fold=1).astimezone(UTC), first)

    def bucket_key(self, moment: datetime, period: str) -> str | None:
        """The bucket of a period holding `moment`; None where none does (before the first season)."""
        if period == ALL_TIME:
            return ALL_TIME
        return self._period(period).key_of(self.wall(moment))

    def _period(self, name: str) -> Period:
        if name not in self.periods:
            raise ValueError(f"unknown period {name!r}")
        return self.periods[name]

    def bounds(self, period: str, key: str) -> tuple[datetime, datetime | None] | None:
        """When a bucket begins and when the next begins (UTC; None past the calendar); None for `all` and for a
        bucket that begins outside the calendar (a month or year of year 0)."""
        if period == ALL_TIME:
            return None
        definition = self.periods[period]
        try:
            start = self.instant(definition.wall_start(key))
        except (OverflowError, ValueError):
            return None
        try:
            return start, self.instant(definition.wall_next(key))
        except (OverflowError, ValueError):
            return start, None

    def is_bucket_key(self, period: str, key: str) -> bool:
        """Exactly the key the aggregator writes for some moment: ASCII digits, a real date, hour, ISO week and season,
        and a bucket the local clock does not skip (an hour clocks jump over is none)."""
        definition = self.periods.get(period)
        if definition is None or definition.shape.match(key) is None:
            return False
        try:
            start = definition.wall_start(key)
        except ValueError:
            return definition.shape_suffices
        if self.zone is UTC:
            return True
        try:
            begins = self.instant(start)
        except (OverflowError, ValueError):
            return False
        try:
            return begins < self.instant(definition.wall_next(key))
        except (OverflowError, ValueError):
            return True

    def previous_key(self, period: str, key: str) -> str | None:
        """The bucket before a key's, passing over buckets the local clock skipped."""
        previous = self.periods[period].previous
        before = previous(key)
        while before is not None and not self.is_bucket_key(period, before):
            before = previous(before)
        return before

    def window_keys(self, period: str, key: str, last: int) -> list[str]:
        """The `last` bucket keys ending with `key`, newest first; buckets before the calendar's first (or the first
        season) are left out, and so are hours the local clock skipped."""
        keys = [key]
        while len(keys) < last and (before := self.previous_key(period, keys[-1])) is not None:
            keys.append(before)
        return keys

    def download_boards(self, moment: datetime, periods: Iterable[str], category: str | None = None) -> list[str]:
        """Every board a download at `moment` counts in: its bucket of each period kept (none before the first
        season), then, with a category, the category's board of each; the first is the one a failure message names
        for the download."""
        wall = self.wall(moment)
        keys = (ALL_TIME if period == ALL_TIME else self._period(period).key_of(wall) for period in periods)
        buckets = [bucket for bucket in keys if bucket is not None]
        boards = [board_id(bucket) for bucket in buckets]
        if category is not None:
            boards += [board_id(bucket, category) for bucket in buckets]
        return boards

    def periods_from_text(self, text: str) -> tuple[str, ...]:
        """LEADERBOARD_PERIODS as the module sets it (comma-separated); ValueError for anything else."""
        periods = tuple(period for period in text.split(",") if period)
        if SEASON in periods and self.season is None:
            raise ValueError(
                f"LEADERBOARD_PERIODS is {text!r}: season needs {SEASON_START_VARIABLE} and {SEASON_LENGTH_VARIABLE}"
            )
        return _period_list(text, self.period_names)

    def period_of_board(self, board: str) -> str | None:
        """The period of a board id (`2018-01@rock`: month, `all`: all); None for an id no period's bucket has. A
        season's id is known by its shape whether or not this calendar has seasons."""
        bucket, separator, category = board.partition(CATEGORY_SEPARATOR)
        if separator and not category:
            return None
        if bucket == ALL_TIME:
            return ALL_TIME
        if self.season is None and _season_shaped(bucket):
            return SEASON
        return next((name for name in self.periods if self.is_bucket_key(name, bucket)), None)


def is_key_shaped(period: str, key: str) -> bool:
    """A key of a period's shape naming a real date, hour or ISO week, whatever the deployment's zone and seasons:
    what a caller can check before asking the deployment (which may still find it no bucket of its own)."""
    return _season_shaped(key) if period == SEASON else UTC_CALENDAR.is_bucket_key(period, key)


def _season_shaped(bucket: str) -> bool:
    match = SEASON_SHAPE.match(bucket)
    if match is None:
        return False
    try:
        date(int(match["year"]), int(match["month"]), int(match["day"]))
    except ValueError:
        return False
    return True


UTC_CALENDAR = Calendar()
"""Today's boards: UTC buckets and no seasons; what a function or tool reads where the module sets no time zone."""


def calendar_from_environment(environ: Mapping[str, str]) -> Calendar:
    """LEADERBOARD_TIME_ZONE (default UTC) and LEADERBOARD_SEASON_START with LEADERBOARD_SEASON_LENGTH_DAYS (both
    empty: no seasons), as the module sets them; ValueError for anything else."""
    zone = environ.get(TIME_ZONE_VARIABLE) or UTC_ZONE
    start, length = environ.get(SEASON_START_VARIABLE) or "", environ.get(SEASON_LENGTH_VARIABLE) or ""
    if not start and not length:
        return Calendar(zone)
    try:
        season = Season(date.fromisoformat(start), int(length))
    except ValueError as error:
        raise ValueError(
            f"{SEASON_START_VARIABLE} {start!r} and {SEASON_LENGTH_VARIABLE} {length!r} are not a date YYYY-MM-DD "
            "and a whole number of days"
        ) from error
    if season.length_days < 1 or len(start) != len("YYYY-MM-DD"):
        raise ValueError(f"{SEASON_LENGTH_VARIABLE} is {length!r}: a season lasts 1 day or more")
    return Calendar(zone, season)


def periods_from_text(text: str, calendar: Calendar = UTC_CALENDAR) -> tuple[str, ...]:
    """LEADERBOARD_PERIODS as the module sets it (comma-separated); ValueError for anything else."""
    return calendar.periods_from_text(text)


def any_periods_from_text(text: str) -> tuple[str, ...]:
    """leaderboard_periods of any deployment, `season` included (what sizing takes); ValueError for anything else."""
    return _period_list(text, PERIOD_NAMES)


def _period_list(text: str, names: tuple[str, ...]) -> tuple[str, ...]:
    periods = tuple(period for period in text.split(",") if period)
    if not periods or any(period not in names for period in periods):
        raise ValueError(f"LEADERBOARD_PERIODS is {text!r}, not a comma-separated list of {', '.join(names)}")
    if len(set(periods)) != len(periods):
        raise ValueError(f"LEADERBOARD_PERIODS is {text!r}: a period named twice would count each download twice")
    return periods


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


def bucket_key(moment: datetime, period: str, calendar: Calendar = UTC_CALENDAR) -> str | None:
    """The bucket of a period holding `moment` on the deployment's calendar (UTC by default)."""
    return calendar.bucket_key(moment, period)


def month_of(timestamp: str, calendar: Calendar = UTC_CALENDAR) -> str:
    """The month `YYYY-MM` of an ISO 8601 timestamp on the deployment's clock (UTC by default).

    The guide slices the first seven characters, which files a download at
    2018-01-31T23:30:00-05:00 under January although it happened in February UTC.
    """
    month = calendar.bucket_key(utc_moment(timestamp), "month")
    assert month is not None, "every moment is in a month"
    return month


def is_bucket_key(period: str, key: str, calendar: Calendar = UTC_CALENDAR) -> bool:
    """Exactly the key the aggregator writes for some moment: ASCII digits, a real date, hour and ISO week."""
    return calendar.is_bucket_key(period, key)


def window_keys(period: str, key: str, last: int, calendar: Calendar = UTC_CALENDAR) -> list[str]:
    """The `last` bucket keys ending with `key`, newest first; buckets before the calendar's first are left out."""
    return calendar.window_keys(period, key, last)


def board_id(bucket: str, category: str | None = None) -> str:
    """The board id (aggregate sort key, index partition): the bucket, or `<bucket>@<category>`, percent-encoded."""
    return bucket if category is None else f"{bucket}{CATEGORY_SEPARATOR}{quote(category, safe='')}"


def download_boards(
    moment: datetime, periods: Iterable[str], category: str | None = None, calendar: Calendar = UTC_CALENDAR
) -> list[str]:
    """Every board a download at `moment` counts in (Calendar.download_boards), on the deployment's calendar."""
    return calendar.download_boards(moment, periods, category)


def fits_sort_key(boards: Iterable[str]) -> bool:
    """Every board id fits DynamoDB's sort key: a category too long for it makes a download uncountable."""
    return all(len(board.encode()) <= MAX_SORT_KEY_BYTES for board in boards)


def period_of_board(board: str, calendar: Calendar = UTC_CALENDAR) -> str | None:
    """The period of a board id (`2018-01@rock`: month, `all`: all); None for an id no period's bucket has."""
    return calendar.period_of_board(board)


def instant_text(moment: datetime | None, calendar: Calendar) -> str | None:
    """An instant as an answer names it: ISO 8601 to the second with the zone's offset there (`Z` in UTC)."""
    if moment is None:
        return None
    text = moment.astimezone(calendar.zone).isoformat(timespec="seconds")
    return text.replace("+00:00", "Z") if calendar.zone is UTC else text
