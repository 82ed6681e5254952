"""The operator tools on a deployment on New York's clock with seasons: the recount buckets by the deployed zone and
seasons, the board flags take seasons, and sizing counts a season as one more period."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, date, datetime, timedelta

import boto3
import pytest

from leaderboard_tools.commands.leaderboards.flags import board_request, key_argument
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile import Reconciler
from tests.unit.tools.operator_stack import QUICK_BANDS, ModelAggregator, MotoStack, deploy, set_count
from tests.unit.tools.test_sizing import size_command

REGION = "us-east-1"
NEW_YORK = {
    "LEADERBOARD_PERIODS": "day,month,season",
    "LEADERBOARD_TIME_ZONE": "America/New_York",
    "LEADERBOARD_SEASON_START": "2026-01-05",
    "LEADERBOARD_SEASON_LENGTH_DAYS": "28",
}
DOWNLOADS = [
    ("song1", "d1", "2026-01-05T04:30:00Z"),  # 2026-01-04 23:30 EST: before the first season
    ("song1", "d2", "2026-01-05T05:30:00Z"),  # the first season's first hour
    ("song1", "d3", "2026-03-08T06:30:00Z"),  # 01:30 EST, before the clocks go forward
    ("song2", "d4", "2026-03-08T23:30:00-04:00"),  # 2026-03-09 in UTC, the 8th in New York
    ("song2", "d5", "2026-04-01T03:30:00Z"),  # 2026-03-31 23:30 EDT: March, though April in UTC
]


def new_york_boards(timestamp: str) -> list[str]:
    """The test's own New York buckets: EST before 2026-03-08T07:00Z, EDT after (to November)."""
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(UTC)
    offset = timedelta(hours=-5) if moment < datetime(2026, 3, 8, 7, tzinfo=UTC) else timedelta(hours=-4)
    local = (moment + offset).date()
    boards = [local.isoformat(), local.isoformat()[:7]]
    if local >= date(2026, 1, 5):
        boards.append(f"S{date(2026, 1, 5) + timedelta(days=(local - date(2026, 1, 5)).days // 28 * 28)}")
    return boards


def stored_aggregates(stack: MotoStack) -> dict[tuple[str, str], int]:
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=stack.table, ConsistentRead=True)["Items"]
    return {
        (item["songID"]["S"], item["SK"]["S"]): int(item["DownloadCount"]["N"]) for item in items if "Month" in item
    }


def test_the_aggregator_and_reconcile_bucket_by_the_deployed_clock_and_seasons(aws: None) -> None:
    # given a New York deployment with seasons, its downloads counted as the aggregator parses them
    stack = deploy(aggregator_settings=NEW_YORK)
    for song, download, timestamp in DOWNLOADS:
        item = {"songID": {"S": song}, "SK": {"S": download}, "Timestamp": {"S": timestamp}}
        boto3.client("dynamodb", region_name=REGION).put_item(TableName=stack.table, Item=item)
    ModelAggregator(stack).run()
    expected = Counter((song, board) for song, _, timestamp in DOWNLOADS for board in new_york_boards(timestamp))
    assert ("song1", "S2026-01-05") in expected
    assert expected[("song2", "2026-03")] == 2
    # then the stored counts are the test's own New York recount: local days and months, seasons from the first
    assert {key: count for key, count in stored_aggregates(stack).items() if count} == dict(expected)
    # and when two boards drift and every board is recounted and repaired, the recount buckets as the aggregator did
    set_count(stack, "song2", "2026-03", 7)
    set_count(stack, "song1", "S2026-01-05", 0)
    clients = operator_clients(region=REGION)
    deployment = discover(clients, stack.table)
    assert deployment.calendar.zone_name == "America/New_York"
    run = Reconciler(clients, deployment, empty_page_pause=0, **QUICK_BANDS).run(None, repair=True)
    assert run.exact
    assert {key: count for key, count in stored_aggregates(stack).items() if count} == dict(expected)
    repaired = {(d.entity_id, report.board, d.recounted) for report in run.boards for d in report.differences}
    assert repaired == {("song2", "2026-03", 2), ("song1", "S2026-01-05", 1)}


def test_the_board_flags_take_a_season_by_its_key() -> None:
    assert key_argument("S2026-01-05") == "S2026-01-05"
    request = board_request(
        type("Arguments", (), {"month": None, "period": "season", "key": "S2026-01-05", "category": None})()
    )
    assert request == {"period": "season", "key": "S2026-01-05"}


def test_size_counts_a_season_as_one_more_period(capsys: pytest.CaptureFixture[str]) -> None:
    # given the same load sized with three periods, one of them a season or a week
    base = ["--downloads-per-second", "2000", "--songs", "10000", "--output", "json"]
    seasons = size_command([*base, "--periods", "day,month,season"], capsys)
    weeks = size_command([*base, "--periods", "day,month,week"], capsys)
    months = size_command([*base, "--periods", "month"], capsys)
    # then a season adds what any period adds: an aggregate write per song and batch
    assert seasons[0] == weeks[0] == 0
    sized = {
        name: {**json.loads(out), "periods": None}
        for name, (_, out, _) in (("season", seasons), ("week", weeks), ("month", months))
    }
    assert sized["season"] == sized["week"] != sized["month"]
