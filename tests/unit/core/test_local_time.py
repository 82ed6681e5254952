"""Local-time buckets through daylight saving changes, and seasons, against an oracle of the test's own.

The oracle knows each zone only as the table below: the offsets in force and the instants the clocks changed
(the published rules: the US's second Sunday of March and first of November at 02:00 local, the EU's last
Sundays of March and October at 01:00 UTC, New South Wales' first Sundays of April and October). It reads a
moment's wall time as the moment plus the offset then, and where clocks went back keeps the latest wall time
already reached, so the repeated hour counts with its first occurrence; it formats keys with strftime.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from leaderboard_core.buckets import UTC_CALENDAR, Calendar, calendar_from_environment, instant_text
from leaderboard_core.periods import Season
from tests.property_examples import examples

HOUR = timedelta(hours=1)
SECOND = timedelta(seconds=1)
SEASON_START = date(2026, 1, 5)
SEASON_DAYS = 28
ZONES: dict[str, tuple[timedelta, list[tuple[datetime, timedelta]]]] = {
    "America/New_York": (
        timedelta(hours=-5),
        [
            (datetime(2025, 3, 9, 7, tzinfo=UTC), timedelta(hours=-4)),
            (datetime(2025, 11, 2, 6, tzinfo=UTC), timedelta(hours=-5)),
            (datetime(2026, 3, 8, 7, tzinfo=UTC), timedelta(hours=-4)),
            (datetime(2026, 11, 1, 6, tzinfo=UTC), timedelta(hours=-5)),
            (datetime(2027, 3, 14, 7, tzinfo=UTC), timedelta(hours=-4)),
            (datetime(2027, 11, 7, 6, tzinfo=UTC), timedelta(hours=-5)),
        ],
    ),
    "Europe/Berlin": (
        timedelta(hours=1),
        [
            (datetime(2025, 3, 30, 1, tzinfo=UTC), timedelta(hours=2)),
            (datetime(2025, 10, 26, 1, tzinfo=UTC), timedelta(hours=1)),
            (datetime(2026, 3, 29, 1, tzinfo=UTC), timedelta(hours=2)),
            (datetime(2026, 10, 25, 1, tzinfo=UTC), timedelta(hours=1)),
            (datetime(2027, 3, 28, 1, tzinfo=UTC), timedelta(hours=2)),
            (datetime(2027, 10, 31, 1, tzinfo=UTC), timedelta(hours=1)),
        ],
    ),
    "Australia/Sydney": (
        timedelta(hours=11),
        [
            (datetime(2025, 4, 5, 16, tzinfo=UTC), timedelta(hours=10)),
            (datetime(2025, 10, 4, 16, tzinfo=UTC), timedelta(hours=11)),
            (datetime(2026, 4, 4, 16, tzinfo=UTC), timedelta(hours=10)),
            (datetime(2026, 10, 3, 16, tzinfo=UTC), timedelta(hours=11)),
            (datetime(2027, 4, 3, 16, tzinfo=UTC), timedelta(hours=10)),
            (datetime(2027, 10, 2, 16, tzinfo=UTC), timedelta(hours=11)),
        ],
    ),
}
"""Each zone's offset on 2025-01-01, then each change from 2025 to 2027: the instant (UTC) and the offset after."""
PERIODS = ("hour", "day", "week", "month", "year", "season")


def oracle_wall(zone: str, moment: datetime) -> datetime:
    """The wall time (naive) the oracle files a moment under: the latest one reached up to it."""
    offset, changes = ZONES[zone]
    wall = None
    for changed, after in changes:
        if moment < changed:
            break
        if after < offset and moment < changed + (offset - after):
            wall = changed + offset - timedelta(microseconds=1)
        offset = after
    return (wall or moment + offset).replace(tzinfo=None)


def oracle_key(zone: str, moment: datetime, period: str) -> str | None:
    wall = oracle_wall(zone, moment)
    if period == "hour":
        return wall.strftime("%Y-%m-%dT%H")
    if period == "day":
        return wall.strftime("%Y-%m-%d")
    if period == "week":
        iso = wall.isocalendar()
        return f"{iso.year:04d}-W{iso.week:02d}"
    if period == "month":
        return wall.strftime("%Y-%m")
    if period == "year":
        return wall.strftime("%Y")
    seasons_begun = (wall.date() - SEASON_START).days // SEASON_DAYS
    if seasons_begun < 0:
        return None
    return "S" + (SEASON_START + timedelta(days=seasons_begun * SEASON_DAYS)).isoformat()


def calendar_of(zone: str) -> Calendar:
    return Calendar(zone, Season(SEASON_START, SEASON_DAYS))


CHANGES = [(zone, changed) for zone, (_, changes) in ZONES.items() for changed, _ in changes]


@settings(max_examples=examples(600), deadline=None)
@given(
    change=st.sampled_from(CHANGES),
    seconds=st.integers(-3 * 86_400, 3 * 86_400) | st.integers(-7_200, 7_200),
    period=st.sampled_from(PERIODS),
)
@example(change=("America/New_York", datetime(2026, 11, 1, 6, tzinfo=UTC)), seconds=-1, period="hour")
@example(change=("America/New_York", datetime(2026, 11, 1, 6, tzinfo=UTC)), seconds=3_599, period="hour")
@example(change=("Europe/Berlin", datetime(2026, 3, 29, 1, tzinfo=UTC)), seconds=0, period="hour")
def test_a_moment_near_a_clock_change_counts_in_the_local_bucket_the_oracle_names(
    change: tuple[str, datetime], seconds: int, period: str
) -> None:
    # given a moment within days of a daylight saving change, in a zone the deployment names
    zone, changed = change
    calendar, moment = calendar_of(zone), changed + timedelta(seconds=seconds)
    # when the product names its bucket
    key = calendar.bucket_key(moment, period)
    # then it is the oracle's, a key a request may name, and its bucket begins at or before the moment and ends after
    assert key == oracle_key(zone, moment, period)
    if key is None:
        # (a season before the first: no board holds the moment)
        assert period == "season"
        assert moment < datetime(2026, 1, 5, 5, tzinfo=UTC)
        return
    assert calendar.is_bucket_key(period, key)
    bounds = calendar.bounds(period, key)
    assert bounds is not None
    start, end = bounds
    assert end is not None
    assert start <= moment < end
    # and the oracle agrees where it begins and ends: the bucket holds its first and last second, not the ones around
    assert oracle_key(zone, start, period) == key != oracle_key(zone, start - SECOND, period)
    assert oracle_key(zone, end - SECOND, period) == key != oracle_key(zone, end, period)


@settings(max_examples=examples(300), deadline=None)
@given(change=st.sampled_from(CHANGES), seconds=st.integers(-2 * 86_400, 2 * 86_400), period=st.sampled_from(PERIODS))
def test_the_bucket_before_ends_where_each_bucket_begins_so_windows_skip_no_time_and_no_skipped_hour(
    change: tuple[str, datetime], seconds: int, period: str
) -> None:
    # given the bucket of a moment near a clock change, and the window of the two buckets ending with it
    zone, changed = change
    calendar = calendar_of(zone)
    moment = changed + timedelta(seconds=seconds)
    key = calendar.bucket_key(moment, period)
    assume(key is not None)
    keys = calendar.window_keys(period, key, 2)
    # then the one before is the oracle's bucket of the second before this one begins: contiguous, none skipped
    start = calendar.bounds(period, key)[0]  # type: ignore[index]
    before = oracle_key(zone, start - SECOND, period)
    assert keys == [key] + ([before] if before is not None else [])
    if before is not None:
        assert calendar.bounds(period, before)[1] == start  # type: ignore[index]


@pytest.mark.parametrize(
    ("zone", "day", "start", "end", "hours"),
    [
        ("America/New_York", "2026-03-08", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00", 23),
        ("America/New_York", "2026-11-01", "2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00", 25),
        ("Europe/Berlin", "2026-03-29", "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00", 23),
        ("Europe/Berlin", "2026-10-25", "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00", 25),
        ("Australia/Sydney", "2026-04-05", "2026-04-05T00:00:00+11:00", "2026-04-06T00:00:00+10:00", 25),
        ("Australia/Sydney", "2026-10-04", "2026-10-04T00:00:00+10:00", "2026-10-05T00:00:00+11:00", 23),
    ],
)
def test_a_day_of_a_clock_change_runs_local_midnight_to_local_midnight(
    zone: str, day: str, start: str, end: str, hours: int
) -> None:
    calendar = calendar_of(zone)
    began, ended = calendar.bounds("day", day)  # type: ignore[misc]
    assert (instant_text(began, calendar), instant_text(ended, calendar)) == (start, end)
    assert ended - began == hours * HOUR  # type: ignore[operator]


@pytest.mark.parametrize(
    ("zone", "skipped", "repeated"),
    [
        ("America/New_York", "2026-03-08T02", "2026-11-01T01"),
        ("Europe/Berlin", "2026-03-29T02", "2026-10-25T02"),
        ("Australia/Sydney", "2026-10-04T02", "2026-04-05T02"),
    ],
)
def test_the_skipped_hour_is_no_bucket_and_the_repeated_hour_is_one_bucket_of_two_hours(
    zone: str, skipped: str, repeated: str
) -> None:
    calendar = calendar_of(zone)
    # the hour the clocks jump over is no key a request may name, and no window holds it
    assert not calendar.is_bucket_key("hour", skipped)
    after = f"{skipped[:11]}{int(skipped[11:]) + 1:02d}"
    before = f"{skipped[:11]}{int(skipped[11:]) - 1:02d}"
    assert calendar.window_keys("hour", after, 2) == [after, before]
    # the hour the clocks repeat is one key, two hours long
    began, ended = calendar.bounds("hour", repeated)  # type: ignore[misc]
    assert ended - began == 2 * HOUR  # type: ignore[operator]
    assert calendar.bucket_key(began, "hour") == calendar.bucket_key(ended - SECOND, "hour") == repeated


def test_a_season_begins_at_local_midnight_of_its_start_and_nothing_before_the_first_is_in_one() -> None:
    # given 28-day seasons from 2026-01-05 in New York
    calendar = calendar_of("America/New_York")
    first_midnight = datetime(2026, 1, 5, 5, tzinfo=UTC)
    # then a moment before the first season's local midnight is in no season board, and the second after is
    assert calendar.bucket_key(first_midnight - SECOND, "season") is None
    assert calendar.download_boards(first_midnight - SECOND, ("day", "season")) == ["2026-01-04"]
    assert calendar.download_boards(first_midnight, ("day", "season"), "rock") == [
        "2026-01-05",
        "S2026-01-05",
        "2026-01-05@rock",
        "S2026-01-05@rock",
    ]
    # and the season over the March change is 28 local days, an hour short, ending at local midnight
    began, ended = calendar.bounds("season", "S2026-03-02")  # type: ignore[misc]
    assert (instant_text(began, calendar), instant_text(ended, calendar)) == (
        "2026-03-02T00:00:00-05:00",
        "2026-03-30T00:00:00-04:00",
    )
    assert calendar.bucket_key(ended - SECOND, "season") == "S2026-03-02"
    assert calendar.bucket_key(ended, "season") == "S2026-03-30"
    # and a season key is the S and its first day: only those days begin one, and a window stops at the first
    assert calendar.is_bucket_key("season", "S2026-02-02")
    assert not calendar.is_bucket_key("season", "S2026-02-03")
    assert not calendar.is_bucket_key("season", "S2025-12-08")
    assert not calendar.is_bucket_key("season", "2026-01-05")
    assert calendar.window_keys("season", "S2026-03-02", 5) == ["S2026-03-02", "S2026-02-02", "S2026-01-05"]


@settings(max_examples=examples(300), deadline=None)
@given(
    moment=st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)),
    period=st.sampled_from(PERIODS[:-1]),
)
def test_the_default_calendar_keys_utc_buckets_as_before(moment: datetime, period: str) -> None:
    # given the module's default (leaderboard_time_zone = "UTC"), then every key is the UTC one, formatted as always
    expected = {
        "hour": f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}",
        "day": f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}",
        "week": f"{moment.isocalendar().year:04d}-W{moment.isocalendar().week:02d}",
        "month": f"{moment.year:04d}-{moment.month:02d}",
        "year": f"{moment.year:04d}",
    }[period]
    assert calendar_from_environment({}).bucket_key(moment, period) == UTC_CALENDAR.bucket_key(moment, period)
    assert UTC_CALENDAR.bucket_key(moment, period) == expected


@pytest.mark.parametrize(
    ("environment", "refused"),
    [
        ({"LEADERBOARD_TIME_ZONE": "Mars/Olympus_Mons"}, "IANA"),
        ({"LEADERBOARD_TIME_ZONE": "../../etc/passwd"}, "IANA"),
        ({"LEADERBOARD_SEASON_START": "2026-02-30", "LEADERBOARD_SEASON_LENGTH_DAYS": "28"}, "date"),
        ({"LEADERBOARD_SEASON_START": "2026-01-05", "LEADERBOARD_SEASON_LENGTH_DAYS": "0"}, "1 day or more"),
        ({"LEADERBOARD_SEASON_START": "2026-01-05"}, "whole number"),
    ],
)
def test_a_zone_or_season_the_functions_cannot_keep_is_refused(environment: dict[str, str], refused: str) -> None:
    with pytest.raises(ValueError, match=refused):
        calendar_from_environment(environment)


def test_season_in_leaderboard_periods_needs_the_seasons() -> None:
    with pytest.raises(ValueError, match="LEADERBOARD_SEASON_START"):
        Calendar("America/New_York").periods_from_text("day,season")
    assert calendar_of("America/New_York").periods_from_text("day,season") == ("day", "season")
