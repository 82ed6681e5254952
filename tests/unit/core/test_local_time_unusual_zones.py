"""Local-time buckets in zones the first tests left out: half-hour and 45-minute offsets, Lord Howe's 30-minute
daylight saving shift, Troll's two-hour one, Chile's changes at local midnight, Samoa's skipped day; and year
boundaries.

The oracle knows each zone only as a hand table of the offsets in force and the instants (UTC) the clocks changed,
taken from the published rules. It scans the days around each change in 15-minute steps (every local hour and day
boundary of these zones falls on one), names each moment's buckets by its own wall time (where the clocks went back,
the latest wall time already reached), and reads each bucket's start as the first scanned moment holding it and
the bucket before as the key of the scanned moment just before that start.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from leaderboard_core.buckets import Calendar, Season, instant_text, utc_moment

STEP = timedelta(minutes=15)
TINY = timedelta(microseconds=1)
H = timedelta(hours=1)
M = timedelta(minutes=1)

TABLES: dict[str, tuple[timedelta, list[tuple[datetime, timedelta]]]] = {
    # first Sundays of April (02:00 daylight -> 01:30) and October (02:00 standard -> 02:30)
    "Australia/Lord_Howe": (
        11 * H,
        [
            (datetime(2026, 4, 4, 15, tzinfo=UTC), 10 * H + 30 * M),
            (datetime(2026, 10, 3, 15, 30, tzinfo=UTC), 11 * H),
            (datetime(2027, 4, 3, 15, tzinfo=UTC), 10 * H + 30 * M),
        ],
    ),
    # Apr Sun>=2 03:00 UTC (local midnight -> 23:00 the day before), Sep Sun>=2 04:00 UTC (midnight -> 01:00)
    "America/Santiago": (
        -3 * H,
        [
            (datetime(2026, 4, 5, 3, tzinfo=UTC), -4 * H),
            (datetime(2026, 9, 6, 4, tzinfo=UTC), -3 * H),
            (datetime(2027, 4, 4, 3, tzinfo=UTC), -4 * H),
        ],
    ),
    # 2011-12-29 24:00 -10 became 2011-12-31 00:00 +14: the 30th never happened; daylight ended 2012-04-01 04:00
    "Pacific/Apia": (
        -10 * H,
        [
            (datetime(2011, 12, 30, 10, tzinfo=UTC), 14 * H),
            (datetime(2012, 3, 31, 14, tzinfo=UTC), 13 * H),
        ],
    ),
    # a two-hour shift: 01:00 UTC on the EU's last Sundays of March and October, +00 <-> +02
    "Antarctica/Troll": (
        timedelta(0),
        [
            (datetime(2026, 3, 29, 1, tzinfo=UTC), 2 * H),
            (datetime(2026, 10, 25, 1, tzinfo=UTC), timedelta(0)),
        ],
    ),
    "Asia/Kathmandu": (5 * H + 45 * M, [(datetime(2026, 12, 31, 18, 15, tzinfo=UTC), 5 * H + 45 * M)]),
    "Asia/Kolkata": (5 * H + 30 * M, [(datetime(2026, 12, 31, 18, 30, tzinfo=UTC), 5 * H + 30 * M)]),
    "America/New_York": (-5 * H, [(datetime(2027, 1, 1, 5, tzinfo=UTC), -5 * H)]),
}
"""Each zone's offset before its first listed change, then each change: the instant (UTC) and the offset after.
(An entry whose offset does not change marks a year boundary to scan around.)"""
PERIODS = ("hour", "day", "week", "month", "year", "season")


def wall_of(zone: str, moment: datetime) -> datetime:
    offset, changes = TABLES[zone]
    reached = None
    for changed, after in changes:
        if moment < changed:
            break
        if after < offset and moment < changed + (offset - after):
            reached = changed + offset - TINY
        offset = after
    return (reached if reached is not None else moment + offset).replace(tzinfo=None)


def season_of(zone: str) -> Season:
    """Two-day seasons from a day just before the zone's first listed change, so that several begin in the scan."""
    first_change = TABLES[zone][1][0][0]
    return Season(first_change.date() - timedelta(days=3), 2)


def oracle_key(zone: str, moment: datetime, period: str) -> str | None:
    wall = wall_of(zone, moment)
    if period == "hour":
        return wall.strftime("%Y-%m-%dT%H")
    if period == "day":
        return wall.strftime("%Y-%m-%d")
    if period == "week":
        year, week, _ = wall.isocalendar()
        return f"{year:04d}-W{week:02d}"
    if period == "month":
        return wall.strftime("%Y-%m")
    if period == "year":
        return wall.strftime("%Y")
    season = season_of(zone)
    begun = (wall.date() - season.start).days
    if begun < 0:
        return None
    return "S" + (season.start + timedelta(days=begun - begun % season.length_days)).isoformat()


def scan(zone: str, change: datetime) -> list[datetime]:
    start = change - timedelta(days=3)
    return [start + STEP * n for n in range(int(timedelta(days=6) / STEP))]


CASES = [(zone, changed) for zone, (_, changes) in TABLES.items() for changed, _ in changes]


@pytest.mark.parametrize(("zone", "change"), CASES, ids=[f"{zone}-{changed:%Y-%m-%d}" for zone, changed in CASES])
@pytest.mark.parametrize("period", PERIODS)
def test_every_moment_near_a_change_in_an_unusual_zone_counts_in_the_oracles_bucket_with_its_start_and_the_one_before(
    zone: str, change: datetime, period: str
) -> None:
    # given a deployment on the zone's clock with two-day seasons, and the moments around one of its changes
    calendar = Calendar(zone, season_of(zone))
    moments = scan(zone, change)
    # when each moment's bucket is named, by the product and by the oracle
    keys = [calendar.bucket_key(moment, period) for moment in moments]
    expected = [oracle_key(zone, moment, period) for moment in moments]
    # then they agree at every moment
    assert keys == expected
    # and every bucket that begins inside the scan begins where the oracle's first moment of it is, ends where the
    # next begins, and its window's bucket before is the oracle's
    for index in range(1, len(moments)):
        key, before = expected[index], expected[index - 1]
        if key == before or key is None:
            continue
        assert calendar.is_bucket_key(period, key)
        start, end = calendar.bounds(period, key)  # type: ignore[misc]
        assert start == moments[index], (key, instant_text(start, calendar))
        later = [m for m, k in zip(moments[index:], expected[index:], strict=True) if k != key]
        if later:
            assert end == later[0], (key, instant_text(end, calendar))
        assert calendar.window_keys(period, key, 2) == [key] + ([before] if before is not None else [])


@pytest.mark.parametrize(
    ("zone", "period", "key", "start", "end"),
    [
        ("Australia/Lord_Howe", "day", "2026-04-05", "2026-04-05T00:00:00+11:00", "2026-04-06T00:00:00+10:30"),
        ("Australia/Lord_Howe", "hour", "2026-04-05T01", "2026-04-05T01:00:00+11:00", "2026-04-05T02:00:00+10:30"),
        ("Australia/Lord_Howe", "hour", "2026-10-04T02", "2026-10-04T02:30:00+11:00", "2026-10-04T03:00:00+11:00"),
        ("America/Santiago", "day", "2026-04-04", "2026-04-04T00:00:00-03:00", "2026-04-05T00:00:00-04:00"),
        ("America/Santiago", "day", "2026-09-06", "2026-09-06T01:00:00-03:00", "2026-09-07T00:00:00-03:00"),
        ("Pacific/Apia", "day", "2011-12-29", "2011-12-29T00:00:00-10:00", "2011-12-31T00:00:00+14:00"),
        ("Pacific/Apia", "week", "2011-W52", "2011-12-26T00:00:00-10:00", "2012-01-02T00:00:00+14:00"),
        ("Asia/Kathmandu", "hour", "2026-01-01T00", "2026-01-01T00:00:00+05:45", "2026-01-01T01:00:00+05:45"),
        ("Asia/Kolkata", "week", "2026-W53", "2026-12-28T00:00:00+05:30", "2027-01-04T00:00:00+05:30"),
    ],
)
def test_a_board_in_an_unusual_zone_begins_and_ends_at_its_local_wall_times(
    zone: str, period: str, key: str, start: str, end: str
) -> None:
    calendar = Calendar(zone)
    began, ended = calendar.bounds(period, key)  # type: ignore[misc]
    assert (instant_text(began, calendar), instant_text(ended, calendar)) == (start, end)


def test_samoas_skipped_day_is_no_bucket_and_windows_pass_over_it() -> None:
    calendar = Calendar("Pacific/Apia")
    assert not calendar.is_bucket_key("day", "2011-12-30")
    assert not any(calendar.is_bucket_key("hour", f"2011-12-30T{hour:02d}") for hour in range(24))
    assert calendar.window_keys("day", "2011-12-31", 3) == ["2011-12-31", "2011-12-29", "2011-12-28"]
    assert calendar.window_keys("hour", "2011-12-31T00", 2) == ["2011-12-31T00", "2011-12-29T23"]
    # a season beginning on the skipped day begins when the clocks jumped
    seasons = Calendar("Pacific/Apia", Season(date(2011, 12, 30), 7))
    began, _ = seasons.bounds("season", "S2011-12-30")  # type: ignore[misc]
    assert began == datetime(2011, 12, 30, 10, tzinfo=UTC)
    assert seasons.bucket_key(began - TINY, "season") is None
    assert seasons.bucket_key(began, "season") == "S2011-12-30"


@pytest.mark.parametrize(
    ("zone", "moment", "boards"),
    [
        # New Year's Eve in New York is New Year's Day in UTC: the download counts in 2026's local boards
        (
            "America/New_York",
            "2027-01-01T03:00:00Z",
            ["2026-12-31T22", "2026-12-31", "2026-W53", "2026-12", "2026"],
        ),
        (
            "America/New_York",
            "2027-01-01T04:59:59.999999+00:00",
            ["2026-12-31T23", "2026-12-31", "2026-W53", "2026-12", "2026"],
        ),
        (
            "America/New_York",
            "2027-01-01T00:00:00-05:00",
            ["2027-01-01T00", "2027-01-01", "2026-W53", "2027-01", "2027"],
        ),
        # and in Kiritimati (+14) New Year's Day comes while UTC is still on the 31st
        ("Pacific/Kiritimati", "2026-12-31T10:00:00", ["2027-01-01T00", "2027-01-01", "2026-W53", "2027-01", "2027"]),
        ("Asia/Kathmandu", "2026-12-31T18:14:59Z", ["2026-12-31T23", "2026-12-31", "2026-W53", "2026-12", "2026"]),
        ("Asia/Kathmandu", "2026-12-31T18:15:00Z", ["2027-01-01T00", "2027-01-01", "2026-W53", "2027-01", "2027"]),
        # ISO week 1 of 2026 began on 2025-12-29
        ("Asia/Kolkata", "2025-12-28T18:30:00Z", ["2025-12-29T00", "2025-12-29", "2026-W01", "2025-12", "2025"]),
    ],
)
def test_a_download_near_the_new_year_counts_in_its_local_years_boards(
    zone: str, moment: str, boards: list[str]
) -> None:
    calendar = Calendar(zone)
    assert calendar.download_boards(utc_moment(moment), ("hour", "day", "week", "month", "year")) == boards


FRACTION_CASES = [
    # Troll: 03:00 +02 -> 01:00 +00; the latest hour reached is 02
    ("Antarctica/Troll", "2026-10-25T01:00:00.000001Z", "hour", "2026-10-25T02"),
    ("Antarctica/Troll", "2026-10-25T01:00:00.5Z", "hour", "2026-10-25T02"),
    ("Antarctica/Troll", "2026-10-25T02:30:00.250Z", "hour", "2026-10-25T02"),
    # Chatham: 03:45 +13:45 -> 02:45 +12:45; 03:15:00.123 +12:45 is in the hour 03 however it is read
    ("Pacific/Chatham", "2026-04-04T14:30:00.123Z", "hour", "2026-04-05T03"),
    ("Pacific/Chatham", "2026-04-04T14:59:59.5Z", "hour", "2026-04-05T03"),
    # St. John's, 2006: 00:01 -02:30 -> 23:01 -03:30 the day before; the latest day reached is the 29th
    ("America/St_Johns", "2006-10-29T02:45:00.5Z", "day", "2006-10-29"),
]


@pytest.mark.parametrize(("zone", "timestamp", "period", "key"), FRACTION_CASES)
def test_a_moment_with_a_fraction_of_a_second_where_clocks_went_back_is_in_the_latest_bucket_reached(
    zone: str, timestamp: str, period: str, key: str
) -> None:
    # given a moment with a fraction of a second in the span the clocks repeated
    calendar = Calendar(zone)
    moment = utc_moment(timestamp)
    # when its bucket is named, then it is the one the same moment without its fraction is in, and it holds the moment
    assert calendar.bucket_key(moment, period) == calendar.bucket_key(moment.replace(microsecond=0), period) == key
    start, end = calendar.bounds(period, key)  # type: ignore[misc]
    assert start <= moment < end
