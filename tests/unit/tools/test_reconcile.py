"""Reconcile on moto: differences found in the aggregator's own months, exactly those repaired, TTL respected,
memory bounded by songs, every page read through boto3's paginators."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from aggregate_store import AggregateStore
from aggregate_writes import Contribution
from delivery import ShardRef
from download_records import AggregateKey, Download, Rejected, Schema, parse_record
from leaderboard_core.attributes import AttributeNames
from leaderboard_core.bookkeeping import RECOUNTED_THROUGH, pad_sequence
from leaderboard_core.index_layout import order_of
from leaderboard_tools.deployment import Deployment, discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile import Reconciler
from shard_progress import ProgressStore
from tests.unit.tools.operator_stack import (
    MONTH,
    QUICK_BANDS,
    REGION,
    ModelAggregator,
    MotoStack,
    aggregate_item,
    deploy,
    set_count,
    stored_count,
    write_download,
)

NOW = 1_900_000_000.0


def reconciler(stack: MotoStack, clients: Any = None, **overrides: Any) -> Reconciler:
    clients = clients or operator_clients(region="us-east-1")
    settings: dict[str, Any] = {"empty_page_pause": 0, **QUICK_BANDS}
    return Reconciler(clients, discover(clients, stack.table), **(settings | overrides))


@pytest.fixture
def month(aws: None) -> MotoStack:
    """song1: 3 downloads, counted 3; song2: 2 downloads, counted 5 (edited by hand); song3: 4 downloads, counted 1.

    Every download is counted by the aggregator (nothing in flight); the timestamps the aggregator accepts
    (an offset, a lowercase z, surrounding spaces) count in their UTC month.
    """
    stack = deploy()
    number = 0
    for song, downloads in (("song1", 2), ("song2", 2), ("song3", 4)):
        for _ in range(downloads):
            number += 1
            write_download(stack, song, f"d{number:04d}")
    write_download(stack, "song1", "d0099", timestamp="2018-02-28T23:30:00-05:00")  # March in UTC
    write_download(stack, "song1", "d0098", timestamp="2018-04-01T00:30:00Z")  # April
    write_download(stack, "song4", "d0097", timestamp="not a date")  # never countable
    ModelAggregator(stack).run()
    set_count(stack, "song2", MONTH, 5)
    set_count(stack, "song3", MONTH, 1)
    return stack


def test_reconcile_reports_exactly_the_differences(month: MotoStack) -> None:
    report = reconciler(month).run_month(MONTH)
    assert report.as_json() == {
        "board": MONTH,
        "month": MONTH,
        "differences": [
            {"songID": "song2", "stored": 5, "recounted": 2, "repaired": False, "state": "differs"},
            {"songID": "song3", "stored": 1, "recounted": 4, "repaired": False, "state": "differs"},
        ],
        "repaired": False,
        "pending": [],
    }
    assert stored_count(month, "song2", MONTH) == 5


def test_repair_fixes_exactly_those_and_a_second_run_finds_nothing(month: MotoStack) -> None:
    # when the differences are repaired
    report = reconciler(month).run_month(MONTH, repair=True)
    # then song2 and song3 hold their recounts, with their index order and a recount fence, watermark untouched,
    # and their bands closed
    assert report.repaired
    assert [stored_count(month, song, MONTH) for song in ("song1", "song2", "song3")] == [3, 2, 4]
    item = aggregate_item(month, "song3", MONTH)
    assert item is not None
    assert item["LeaderboardOrder"] == {"N": str(order_of(4, "song3"))}
    assert [name for name in item if name.startswith("Watermark_")]
    assert RECOUNTED_THROUGH in item
    assert not {"RecountBand", "RecountHeld"} & set(item)
    assert RECOUNTED_THROUGH not in (aggregate_item(month, "song1", MONTH) or {})
    # and a second run reports no difference
    assert reconciler(month).run_month(MONTH, repair=True).differences == []


def test_a_few_songs_are_recounted_from_their_partitions_only(month: MotoStack) -> None:
    report = reconciler(month).run_month(MONTH, ["song3"], repair=True)
    assert [(d.entity_id, d.recounted, d.repaired) for d in report.differences] == [("song3", 4, True)]
    assert stored_count(month, "song2", MONTH) == 5


def test_the_recount_reads_timestamps_as_the_aggregator_does(aws: None) -> None:
    # given downloads whose timestamps the aggregator accepts: a lowercase z, surrounding spaces
    stack = deploy()
    for number, timestamp in enumerate(["2018-03-10T10:00:00z", " 2018-03-10T10:00:00Z ", "2018-03-10T10:00:00+00:00"]):
        write_download(stack, "song1", f"d{number}", timestamp=timestamp)
    ModelAggregator(stack).run()
    # when reconcile --repair runs, then it finds the aggregator's count right and leaves it
    report = reconciler(stack).run_month(MONTH, repair=True)
    assert (report.downloads, report.differences) == (3, [])
    assert stored_count(stack, "song1", MONTH) == 3


class WritesMeanwhile:
    """The aggregator counts a download of song3 between the repair's snapshot and its write."""

    def __init__(self, client: Any, stack: MotoStack) -> None:
        self._client = client
        self._stack = stack
        self.raced = False

    def update_item(self, **parameters: Any) -> Any:
        if not self.raced and parameters["Key"]["songID"]["S"] == "song3":
            self.raced = True
            set_count(self._stack, "song3", MONTH, 2)
        return self._client.update_item(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_an_aggregate_the_aggregator_writes_meanwhile_is_left_for_the_next_run(month: MotoStack) -> None:
    clients = operator_clients(region="us-east-1")
    racing = type(clients)(
        WritesMeanwhile(clients.dynamodb, month), clients.dynamodbstreams, clients.lambda_, clients.sqs
    )
    report = reconciler(month, clients=racing).run_month(MONTH, repair=True)
    outcome = {d.entity_id: d.state for d in report.differences}
    assert outcome == {"song2": "repaired", "song3": "conflict"}
    assert stored_count(month, "song3", MONTH) == 2
    assert not report.repaired


def ttl_month(stack_ttl: str | None = "ExpiresAt") -> MotoStack:
    stack = deploy(ttl_attribute=stack_ttl)
    for number in range(2):
        write_download(stack, "song2", f"d{number}")
    for number in range(4):
        write_download(stack, "song3", f"e{number}")
    ModelAggregator(stack).run()
    set_count(stack, "song2", MONTH, 5)
    set_count(stack, "song3", MONTH, 1)
    return stack


def test_with_ttl_a_month_with_an_expired_download_is_refused(aws: None) -> None:
    stack = ttl_month()
    import boto3

    boto3.client("dynamodb", region_name="us-east-1").put_item(
        TableName=stack.table,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "x"},
            "Timestamp": {"S": "2018-03-01T00:00:00Z"},
            "ExpiresAt": {"N": str(int(NOW) - 10)},
        },
    )
    ModelAggregator(stack).run()
    report = reconciler(stack, clock=lambda: NOW).run_month(MONTH, repair=True)
    assert report.refused is not None
    assert "expired" in report.refused
    assert stored_count(stack, "song2", MONTH) == 5


def test_with_ttl_no_count_is_repaired_downwards(aws: None) -> None:
    stack = ttl_month()
    report = reconciler(stack).run_month(MONTH, repair=True)
    outcome = {d.entity_id: (d.state, d.reason) for d in report.differences}
    assert outcome["song3"] == ("repaired", None)
    assert outcome["song2"][0] == "ttl"
    assert "TTL" in (outcome["song2"][1] or "")
    assert stored_count(stack, "song2", MONTH) == 5


# ---------------------------------------------------------------- 6. memory bounded by songs, paginators


class GeneratedTable:
    """A DynamoDB client whose table holds `downloads` downloads of a few songs, generated page by page.

    It answers only through paginators: a hand-written Scan or Query loop fails here.
    """

    def __init__(self, deployment: Deployment, downloads: int, songs: int = 3) -> None:
        self._names = deployment.names
        self._downloads = downloads
        self._songs = songs

    def get_paginator(self, operation: str) -> Any:
        assert operation in ("scan", "query"), operation
        return self

    def paginate(self, **parameters: Any) -> Iterator[dict[str, Any]]:
        if "attribute_exists" in parameters.get("FilterExpression", ""):
            yield {"Items": [], "ScannedCount": 0}
            return
        segment, segments = parameters.get("Segment", 0), parameters.get("TotalSegments", 1)
        share = range(segment, self._downloads, segments)
        for start in range(0, len(share), 1000):
            yield {
                "Items": [
                    {
                        self._names.entity: {"S": f"song{number % self._songs}"},
                        self._names.timestamp: {"S": f"2018-03-{number % 28 + 1:02d}T10:00:00Z"},
                    }
                    for number in share[start : start + 1000]
                ],
                "ScannedCount": len(share[start : start + 1000]),
            }

    def describe_time_to_live(self, **_: Any) -> dict[str, Any]:
        return {"TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}}


@pytest.mark.slow  # a month of 120,000 downloads: CI runs it, make check does not
def test_the_recount_holds_counters_per_song_not_the_downloads(aws: None) -> None:
    # given a month of 120,000 downloads of three songs, read through paginators only
    stack = deploy()
    clients = operator_clients(region="us-east-1")
    deployment = discover(clients, stack.table)
    table = GeneratedTable(deployment, 120_000)
    generated = type(clients)(table, clients.dynamodbstreams, clients.lambda_, clients.sqs)
    # when the month is recounted
    tracemalloc.start()
    report = Reconciler(generated, deployment, segments=4).run_month(MONTH)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # then every download is counted, and the recount's memory stayed far below the downloads' (~60 MB as items)
    assert report.downloads == 120_000
    assert [d.recounted for d in report.differences] == [40_000, 40_000, 40_000]
    assert peak < 10_000_000, f"peak {peak / 1e6:.1f} MB"


def test_no_hand_written_pagination_is_left_in_the_operator_tools() -> None:
    from pathlib import Path

    import leaderboard_tools

    package = Path(leaderboard_tools.__file__).parent
    loops = [
        path.relative_to(package).as_posix() for path in package.rglob("*.py") if "LastEvaluatedKey" in path.read_text()
    ]
    # The backfill's scan saves each segment's place (its LastEvaluatedKey) in the claims table after every page, and
    # paces each request: it pages by hand, on purpose (test_backfill.py resumes it from there).
    assert loops == ["backfill/scan.py"]


def test_attribute_names_come_from_the_deployment(aws: None) -> None:
    stack = deploy(names=AttributeNames(count="Downloads", entity="trackId"))
    write_download(stack, "t1", "d1")
    ModelAggregator(stack).run()
    set_count(stack, "t1", MONTH, 9)
    report = reconciler(stack).run_month(MONTH, repair=True)
    assert [(d.entity_id, d.stored, d.recounted, d.state) for d in report.differences] == [("t1", 9, 1, "repaired")]
    assert stored_count(stack, "t1", MONTH) == 1


def test_every_board_the_deployment_keeps_is_recounted_and_repaired_not_only_months(aws: None) -> None:
    import boto3

    # given an aggregator keeping day and month boards and a category's boards beside them: song1's day board right,
    # and a category board it never counted in (its download carries no category) holding 1
    stack = deploy(aggregator_settings={"LEADERBOARD_PERIODS": "day,month", "CATEGORY_ATTRIBUTE": "Genre"})
    write_download(stack, "song1", "d1")
    ModelAggregator(stack).run()
    client = boto3.client("dynamodb", region_name="us-east-1")
    for board in ("2018-03-10", "2018-03@rock"):
        client.put_item(
            TableName=stack.table,
            Item={"songID": {"S": "song1"}, "SK": {"S": board}, "Month": {"S": board}, "DownloadCount": {"N": "1"}},
        )
    # when every board of the table is recounted and repaired (recover's answer to trimmed records)
    run = reconciler(stack).run(None, repair=True)
    # then every board is compared: the month and the day agree, the category board is repaired to its recount
    assert [
        (board.board, [(d.entity_id, d.stored, d.recounted, d.state) for d in board.differences])
        for board in run.boards
    ] == [(MONTH, []), ("2018-03-10", []), ("2018-03@rock", [("song1", 1, 0, "repaired")])]
    assert (stored_count(stack, "song1", "2018-03-10"), stored_count(stack, "song1", "2018-03@rock")) == (1, 0)
    # and the run's report says so: every board equals its recount now, the category board by its repair
    assert run.exact
    assert [board.repaired for board in run.boards] == [False, False, True]


def test_an_all_time_board_named_as_a_target_is_recounted_and_boards_the_deployment_does_not_keep_are_refused(
    aws: None,
) -> None:
    import boto3

    # given an all-time board of song1 that holds 5, in a deployment keeping month and all-time boards only
    stack = deploy(aggregator_settings={"LEADERBOARD_PERIODS": "month,all"})
    write_download(stack, "song1", "d1")
    ModelAggregator(stack).run()
    boto3.client("dynamodb", region_name="us-east-1").put_item(
        TableName=stack.table,
        Item={"songID": {"S": "song1"}, "SK": {"S": "all"}, "Month": {"S": "all"}, "DownloadCount": {"N": "5"}},
    )
    # when it is named, beside a month, a day board and a category board, for a repair
    targets = {"all": {"song1"}, MONTH: {"song1"}, "2018-03-10": {"song1"}, "2018-03@rock": {"song1"}}
    run = reconciler(stack).run(targets, repair=True)
    # then the month and the all-time board are recounted (all repaired to 1), the boards it does not keep refused
    assert [(report.board, report.refused) for report in run.boards] == [
        (MONTH, None),
        ("all", None),
        ("2018-03-10", "2018-03-10 is a day board: the deployment keeps month, all boards (LEADERBOARD_PERIODS), never "
         "this one"),
        ("2018-03@rock", "2018-03@rock is a category board: the deployment keeps none (no CATEGORY_ATTRIBUTE)"),
    ]  # fmt: skip
    assert [(d.entity_id, d.stored, d.recounted, d.state) for d in run.board("all").differences] == [
        ("song1", 5, 1, "repaired")
    ]
    assert (stored_count(stack, "song1", "all"), stored_count(stack, "song1", "2018-03-10")) == (1, None)


def test_a_deployment_that_sums_is_refused_before_anything_is_read(aws: None) -> None:
    from leaderboard_tools.reconcile import RecountUnsupported

    stack = deploy(aggregator_settings={"SUM_ATTRIBUTE": "Minutes"})
    with pytest.raises(RecountUnsupported, match="sums Minutes"):
        reconciler(stack).run_month(MONTH, repair=True)


def test_a_repair_lets_the_fence_guard_what_a_lost_progress_table_can_no_longer_vouch_for(month: MotoStack) -> None:
    # given song3's aggregate pruned under a progress table since lost, and release 0.1.0's watermark on it
    boto3.client("dynamodb", region_name="us-east-1").update_item(
        TableName=month.table,
        Key={"songID": {"S": "song3"}, "SK": {"S": MONTH}},
        UpdateExpression="SET WatermarksPruned = :n, WatermarksPrunedUnder = :old, AppliedSequence = :seq",
        ExpressionAttributeValues={":n": {"N": "3"}, ":old": {"S": "lost-genesis"}, ":seq": {"S": "0" * 40}},
    )
    # when its difference is repaired
    reconciler(month).run_month(MONTH, ["song3"], repair=True)
    # then the count is the recount, the fence is set, and nothing the aggregator would refuse for is left on it
    item = aggregate_item(month, "song3", MONTH) or {}
    assert (stored_count(month, "song3", MONTH), RECOUNTED_THROUGH in item) == (4, True)
    assert not {"WatermarksPruned", "WatermarksPrunedUnder", "AppliedSequence"} & set(item)


def test_the_recount_counts_exactly_the_downloads_the_aggregator_counts(aws: None) -> None:
    # given a stack with category boards (CATEGORY_ATTRIBUTE = Genre), one good download of song1 and one whose
    # Genre is a number
    stack = deploy(aggregator_settings={"CATEGORY_ATTRIBUTE": "Genre"})
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    names = stack.names
    for download_id, genre in (("d1", {"S": "rock"}), ("d2", {"N": "7"})):
        dynamodb.put_item(
            TableName=stack.table,
            Item={
                names.entity: {"S": "song1"},
                names.sort_key: {"S": download_id},
                names.timestamp: {"S": "2018-03-10T10:00:00Z"},
                "Genre": genre,
            },
        )
    # the shipped aggregator's parser counts the first and rejects the second (reported, never countable)
    schema = Schema(category="Genre")
    image = {"songID": {"S": "song1"}, "SK": {"S": "d2"}, "Timestamp": {"S": "2018-03-10T10:00:00Z"}}

    def parsed(genre: dict[str, str]) -> Any:
        stream = {"SequenceNumber": "2", "NewImage": image | {"Genre": genre}}
        return parse_record({"eventName": "INSERT", "dynamodb": stream}, schema)

    assert isinstance(parsed({"S": "rock"}), Download)
    assert isinstance(parsed({"N": "7"}), Rejected)
    # and the month board holds what the aggregator counted: one, the stream caught up
    ModelAggregator(stack).run()
    set_count(stack, "song1", MONTH, 1)
    ModelAggregator(stack).run()
    # when reconcile recounts the month
    clients = operator_clients(region=REGION)
    report = Reconciler(clients, discover(clients, stack.table), empty_page_pause=0).run_month(MONTH)
    # then it finds no difference: the recount and the aggregator agree on what a download is
    assert [(d.entity_id, d.stored, d.recounted) for d in report.differences] == []


def test_a_download_written_after_a_repair_returned_is_counted_by_the_aggregator(aws: None) -> None:
    # given song1 with two downloads and a hand-edited count of 5, the aggregator caught up
    stack = deploy()
    write_download(stack, "song1", "d1")
    write_download(stack, "song1", "d2")
    ModelAggregator(stack).run()
    set_count(stack, "song1", MONTH, 5)
    ModelAggregator(stack).run()
    # and reconcile --repair has set it right and returned (a clock margin of 2 s: the fence lies 2 s past the
    # recount, which a repair that returned at once would leave in the future)
    clients = operator_clients(region=REGION)
    settings = QUICK_BANDS | {"clock_margin_seconds": 2}
    report = Reconciler(clients, discover(clients, stack.table), empty_page_pause=0, **settings).run_month(
        MONTH, repair=True
    )
    assert [d.state for d in report.differences] == ["repaired"]
    assert stored_count(stack, "song1", MONTH) == 2
    # when a listener downloads song1 afterwards and the shipped aggregator's store counts its record
    write_download(stack, "song1", "d3")
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    shard_id = ModelAggregator(stack).shard_ids()[0]
    assert stack.progress_table is not None
    store = AggregateStore(dynamodb, stack.table, Schema(), ProgressStore(dynamodb, stack.progress_table))
    outcome = store.apply(
        AggregateKey("song1", MONTH),
        ShardRef(stack.stream_arn, shard_id),
        [Contribution(pad_sequence("9" * 25), int(time.time()))],
    )
    # then it is counted, not refused as "counted by a recount" (it was written after the recount ended)
    assert (outcome.added, [reason for _, reason in outcome.refused]) == (1, [])
    assert stored_count(stack, "song1", MONTH) == 3
    assert aggregate_item(stack, "song1", MONTH) is not None


def test_a_ttl_attribute_that_is_not_a_number_does_not_stop_the_recount(aws: None) -> None:
    # given a table with TTL on ExpiresAt, a download whose ExpiresAt is a string (DynamoDB's TTL acts only on
    # Number attributes, so it never expires) and a drifted count
    stack = deploy(ttl_attribute="ExpiresAt")
    names = stack.names
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName=stack.table,
        Item={
            names.entity: {"S": "song1"},
            names.sort_key: {"S": "d1"},
            names.timestamp: {"S": "2018-03-10T10:00:00Z"},
            "ExpiresAt": {"S": "never"},
        },
    )
    ModelAggregator(stack).run()
    set_count(stack, "song1", MONTH, 4)
    # when reconcile recounts the month, then it reports the difference instead of raising KeyError
    clients = operator_clients(region=REGION)
    report = Reconciler(clients, discover(clients, stack.table), empty_page_pause=0).run_month(MONTH)
    assert [(d.entity_id, d.stored, d.recounted) for d in report.differences] == [("song1", 4, 1)]


def test_a_count_at_0_out_of_the_index_whose_downloads_remain_is_repaired(aws: None) -> None:
    # given song1 with two downloads, counted, then its count brought to 0 and out of the index as retractions leave
    # it (each deletion of a download this deployment never counted takes one back: "the count understates, silently,
    # until reconcile compares it with the items", docs/exactly-once-retractions.md)
    stack = deploy(retractions=True)
    write_download(stack, "song1", "d1")
    write_download(stack, "song1", "d2")
    ModelAggregator(stack).run()
    names = stack.names
    boto3.client("dynamodb", region_name=REGION).update_item(
        TableName=stack.aggregates_table,
        Key={names.entity: {"S": "song1"}, names.sort_key: {"S": MONTH}},
        UpdateExpression="SET #count = :zero REMOVE #period, #order",
        ExpressionAttributeNames={"#count": names.count, "#order": names.order, "#period": names.period},
        ExpressionAttributeValues={":zero": {"N": "0"}},
    )
    # when the month is reconciled and repaired
    report = reconciler(stack).run_month(MONTH, repair=True)
    # then the difference is found and repaired: the board lists song1 with its two downloads
    assert [(d.entity_id, d.recounted, d.repaired) for d in report.differences] == [("song1", 2, True)]
    assert stored_count(stack, "song1", MONTH) == 2
    assert (aggregate_item(stack, "song1", MONTH) or {}).get(names.period) is not None
