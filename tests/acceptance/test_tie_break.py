"""The tie-break first_reached on the emulator: one small deployment with four leaderboard shards, downloads with equal
counts written in shuffled batches; the query function lists equal counts by the older latest download, then by id, at
every page size and in every rank; reconcile --repair restores a drifted count and instant to what the data says."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from leaderboard_core.index_layout import FIRST_REACHED, LATEST_COUNTED, instant_of, order_of
from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import invoke_function, poll_until, query_all_pages
from leaderboard_dev.loadgen import Download, write_items
from leaderboard_dev.settings import Endpoint, emulator_environment
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile import Reconciler
from tests.acceptance.conftest import stack

MONTH = "2018-04"
EMULATOR_BANDS = {"clock_margin_seconds": 2, "band_settle_seconds": 1, "band_poll_seconds": 1}
"""As test_recovery.py: the emulator stamps stream records with this machine's clock."""
LATEST = {
    "hit-a": "2018-04-20T10:00:00Z",
    "hit-b": "2018-04-09T10:00:00.500Z",
    "hit-c": "2018-04-09T12:00:00.500+02:00",
    "mid-a": "2018-04-28T00:00:00Z",
    "mid-b": "2018-04-03T00:00:00Z",
    **{f"song{n:02d}": f"2018-04-{10 + n % 3:02d}T08:00:00Z" for n in range(12)},
}
"""Each song's latest download: hit-b and hit-c the same instant in two offsets, the songs three instants among 12."""
COUNTS = {"hit-a": 6, "hit-b": 6, "hit-c": 6, "mid-a": 4, "mid-b": 4, **{f"song{n:02d}": 1 + n % 2 for n in range(12)}}


def moment(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))


def downloads() -> list[Download]:
    """Each song's downloads: its latest, and the others earlier in the month, all shuffled."""
    chance = random.Random(40)
    played = []
    for song, count in COUNTS.items():
        played.append((song, LATEST[song]))
        played += [
            (song, f"2018-04-0{chance.randint(1, 2)}T{chance.randint(0, 23):02d}:00:00Z") for _ in range(count - 1)
        ]
    chance.shuffle(played)
    return [Download(song, f"d-{number:04d}", "user1", timestamp) for number, (song, timestamp) in enumerate(played)]


def oracle() -> list[tuple[str, int]]:
    """Count descending, then the older latest download, then the id (by its UTF-8 bytes)."""
    ranked = sorted(COUNTS, key=lambda song: (-COUNTS[song], moment(LATEST[song]), song.encode()))
    return [(song, COUNTS[song]) for song in ranked]


@pytest.fixture(scope="module")
def tie_broken(endpoint: Endpoint, aws: Clients) -> Iterator[dict[str, Any]]:
    with stack(endpoint, "tiebreak", batch_size=7, leaderboard_shards=4, leaderboard_tie_break=FIRST_REACHED) as (
        _,
        outputs,
    ):
        write_items(aws.dynamodb, outputs["table_name"], [download.as_item() for download in downloads()])
        poll_until(
            lambda: query_all_pages(aws.lambda_, outputs["query_function_name"], MONTH, page_size=1000) == oracle(),
            timeout=240,
            interval=3,
            describe="the first_reached leaderboard",
        )
        yield outputs


@pytest.mark.parametrize("page_size", [1, 3, 10])
def test_equal_counts_list_by_the_older_latest_download_at_every_page_size(
    tie_broken: dict[str, Any], aws: Clients, page_size: int
) -> None:
    # given shuffled downloads with ties counted on four leaderboard shards, then every page size lists the oracle's
    assert query_all_pages(aws.lambda_, tie_broken["query_function_name"], MONTH, page_size=page_size) == oracle()


def test_every_rank_is_the_songs_place_under_the_tie_break(tie_broken: dict[str, Any], aws: Clients) -> None:
    for place, (song, count) in enumerate(oracle(), start=1):
        answer = invoke_function(aws.lambda_, tie_broken["query_function_name"], {"month": MONTH, "songID": song})
        assert answer == {"month": MONTH, "songID": song, "downloadCount": count, "rank": place}


def test_among_and_competition_ranks_follow_the_tie_break(tie_broken: dict[str, Any], aws: Clients) -> None:
    # when the three songs tied at 6 and one at 4 are asked among themselves, under competition ranks
    request = {"month": MONTH, "among": ["hit-a", "mid-b", "hit-c", "hit-b"], "rankPolicy": "competition"}
    answer = invoke_function(aws.lambda_, tie_broken["query_function_name"], request)
    # then they list as the board does (hit-b and hit-c share their latest instant: by id), tied ones sharing rank 1
    assert [(item["songID"], item["rank"]) for item in answer["items"]] == [
        ("hit-b", 1),
        ("hit-c", 1),
        ("hit-a", 1),
        ("mid-b", 4),
    ]


def test_reconcile_repairs_a_drifted_count_and_instant_to_the_datas_order(
    tie_broken: dict[str, Any], aws: Clients, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tie_broken["table_name"]
    for name, value in emulator_environment(endpoint).items():
        monkeypatch.setenv(name, value)
    # given hit-a's count edited by hand (its order by entity) and mid-b's latest instant moved forward
    aws.dynamodb.update_item(
        TableName=table,
        Key={"songID": {"S": "hit-a"}, "SK": {"S": MONTH}},
        UpdateExpression="SET DownloadCount = :nine, LeaderboardOrder = :order",
        ExpressionAttributeValues={":nine": {"N": "9"}, ":order": {"N": str(order_of(9, "hit-a"))}},
    )
    aws.dynamodb.update_item(
        TableName=table,
        Key={"songID": {"S": "mid-b"}, "SK": {"S": MONTH}},
        UpdateExpression="SET #latest = :latest",
        ExpressionAttributeNames={"#latest": LATEST_COUNTED},
        ExpressionAttributeValues={":latest": {"N": str(instant_of(moment("2018-04-29T00:00:00Z")))}},
    )
    clients = operator_clients(region=endpoint.region, endpoint_url=endpoint.url)
    reconciler = Reconciler(clients, discover(clients, table), empty_page_pause=0.2, **EMULATOR_BANDS)
    # when reconcile --repair runs
    report = reconciler.run_month(MONTH, repair=True)
    # then both are repaired, and the board lists as the data says, with nothing left to repair
    assert {d.entity_id: d.state for d in report.differences} == {"hit-a": "repaired", "mid-b": "repaired"}
    assert query_all_pages(aws.lambda_, tie_broken["query_function_name"], MONTH, page_size=4) == oracle()
    assert reconciler.run_month(MONTH).differences == []
