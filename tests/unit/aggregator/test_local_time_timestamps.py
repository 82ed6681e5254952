"""A download's timestamp with an offset, with Z and without one, in a deployment on Lord Howe Island's clock (a
30-minute daylight saving shift, a +10:30 standard offset): the aggregator and the recount file it under the boards
the oracle of tests/unit/core/test_local_time_unusual_zones.py names; one without an offset is read as UTC."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from types import SimpleNamespace

import pytest

from download_records import Download, Ignored, Schema, parse_record
from leaderboard_core.attributes import AttributeNames
from leaderboard_core.buckets import Calendar, Season, utc_moment
from leaderboard_tools.reconcile.recount import boards_of_download
from tests.streams import download_record
from tests.unit.core.test_local_time_unusual_zones import oracle_key, season_of

ZONE = "Australia/Lord_Howe"
PERIODS = ("hour", "day", "week", "month", "year", "season")
CALENDAR = Calendar(ZONE, season_of(ZONE))
SCHEMA = Schema(periods=PERIODS, calendar=CALENDAR)


@pytest.mark.parametrize(
    "timestamp",
    [
        "2026-04-04T14:59:59Z",  # 01:59:59 +11, the first pass through 01:30-02:00
        "2026-04-04T15:00:00Z",  # 01:30 +10:30 again: still the hour 01
        "2026-04-05T01:45:00+10:30",  # the second 01:45
        "2026-04-05T01:45:00+11:00",  # the first 01:45
        "2026-04-04T15:29:59.999999",  # no offset: UTC, 01:59:59.999999 +10:30
        "2026-04-04T15:30:00",  # no offset: UTC, 02:00 +10:30
        "2026-10-03T15:30:00z",  # 02:00 +10:30 skipped: 02:30 +11
        "2026-04-01T13:00:00+00:00",  # 2026-04-02 00:00 +11, before the first two-day season (2026-04-01)
        "2026-03-31T12:59:59Z",  # 2026-03-31 23:59:59 +11: before the first season
    ],
)
def test_the_aggregator_and_the_recount_file_a_timestamp_where_the_oracle_does(timestamp: str) -> None:
    # given a download at the timestamp, in a Lord Howe deployment keeping every period and two-day seasons
    moment = utc_moment(timestamp)
    expected = [key for key in (oracle_key(ZONE, moment, period) for period in PERIODS) if key is not None]
    # when the aggregator parses it and the recount buckets it
    parsed = parse_record(download_record(7, "song1", timestamp), SCHEMA)
    deployment = SimpleNamespace(names=AttributeNames(), category_attribute=None, periods=PERIODS, calendar=CALENDAR)
    recounted = boards_of_download({"songID": {"S": "song1"}, "Timestamp": {"S": timestamp}}, deployment)  # type: ignore[arg-type]
    # then both name the oracle's boards
    assert isinstance(parsed, Download)
    assert [key.board for key in (parsed.key, *parsed.also)] == expected == recounted


def test_a_download_before_the_first_season_of_a_season_only_deployment_is_ignored_and_recounted_nowhere() -> None:
    calendar = Calendar(ZONE, Season(date(2026, 4, 1), 2))
    parsed = parse_record(
        download_record(7, "song1", "2026-03-31T12:59:59Z"), Schema(periods=("season",), calendar=calendar)
    )
    deployment = SimpleNamespace(
        names=AttributeNames(), category_attribute=None, periods=("season",), calendar=calendar
    )
    assert isinstance(parsed, Ignored)
    assert boards_of_download({"songID": {"S": "song1"}, "Timestamp": {"S": "2026-03-31T12:59:59Z"}}, deployment) == []  # type: ignore[arg-type]


def test_the_local_time_docs_say_how_a_timestamp_without_an_offset_is_read() -> None:
    contract = (Path(__file__).resolve().parents[3] / "docs" / "query-contract.md").read_text()
    section = contract[contract.index("**Time zone.**") : contract.index("## Redis verbs")]
    assert "offset" in section.replace("the zone's offset", "")


def test_backfill_names_the_first_season_as_why_a_download_before_it_is_in_no_board() -> None:
    from leaderboard_tools.backfill.transactions import rejection_reason, scanned_download

    calendar = Calendar(ZONE, Season(date(2026, 4, 1), 2))
    deployment = SimpleNamespace(
        names=AttributeNames(), category_attribute=None, periods=("season",), calendar=calendar
    )
    item = {"songID": {"S": "song1"}, "SK": {"S": "d1"}, "Timestamp": {"S": "2026-03-31T12:59:59Z"}}
    assert scanned_download(item, deployment) is None  # type: ignore[arg-type]
    assert "season" in rejection_reason(item, deployment)  # type: ignore[arg-type]
