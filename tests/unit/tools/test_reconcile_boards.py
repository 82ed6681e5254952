"""Reconcile on moto, for every board a deployment keeps: day, month, all-time and category boards are recounted,
compared and repaired as months are, against counts this test makes from the downloads it writes."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from leaderboard_core.buckets import period_of_board
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile import Reconciler
from tests.unit.tools.operator_stack import (
    QUICK_BANDS,
    ModelAggregator,
    MotoStack,
    aggregate_item,
    deploy,
    run,
    set_count,
    stored_count,
    write_download,
)

REGION = "us-east-1"
ENCODED = {"rock": "rock", "hip hop/rap": "hip%20hop%2Frap"}
"""Each category as its board ids carry it, percent-encoded by hand."""
DOWNLOADS = [
    ("song1", "d1", "2018-03-10T10:00:00Z", "rock"),
    ("song1", "d2", "2018-03-10T23:30:00-05:00", "rock"),  # 2018-03-11 in UTC
    ("song1", "d3", "2018-03-11T01:00:00Z", None),
    ("song2", "d4", "2018-03-11T12:00:00+02:00", "hip hop/rap"),
    ("song2", "d5", "2018-04-01T00:30:00+01:00", None),  # March in UTC
    ("song2", "d6", "2018-04-02T08:00:00Z", "rock"),
]


def expected_counts(downloads: list[tuple[str, str, str, str | None]]) -> Counter[tuple[str, str]]:
    """Each (song, board) and its downloads: UTC day, month and all time, and with a category each of those again."""
    counts: Counter[tuple[str, str]] = Counter()
    for song, _, timestamp, category in downloads:
        day = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(UTC).date().isoformat()
        buckets = (day, day[:7], "all")
        for bucket in buckets:
            counts[(song, bucket)] += 1
            if category is not None:
                counts[(song, f"{bucket}@{ENCODED[category]}")] += 1
    return counts


def write(stack: MotoStack, song: str, download: str, timestamp: str, category: str | None) -> None:
    item = {"songID": {"S": song}, "SK": {"S": download}, "Timestamp": {"S": timestamp}}
    if category is not None:
        item["Genre"] = {"S": category}
    boto3.client("dynamodb", region_name=REGION).put_item(TableName=stack.table, Item=item)


def stored_aggregates(stack: MotoStack) -> dict[tuple[str, str], int]:
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=stack.table, ConsistentRead=True)["Items"]
    return {
        (item["songID"]["S"], item["SK"]["S"]): int(item["DownloadCount"]["N"]) for item in items if "Month" in item
    }


def reconciler(stack: MotoStack) -> Reconciler:
    clients = operator_clients(region=REGION)
    return Reconciler(clients, discover(clients, stack.table), empty_page_pause=0, **QUICK_BANDS)


def boards_stack() -> MotoStack:
    """Day, month and all-time boards with a Genre's beside them; the downloads counted (the model counts months)."""
    stack = deploy(aggregator_settings={"LEADERBOARD_PERIODS": "day,month,all", "CATEGORY_ATTRIBUTE": "Genre"})
    for download in DOWNLOADS:
        write(stack, *download)
    ModelAggregator(stack).run()
    return stack


def test_day_category_and_all_time_boards_are_recounted_and_repaired_to_the_downloads(aws: None) -> None:
    # given every board the deployment keeps, some drifted by hand and the boards the model never writes missing
    stack = boards_stack()
    set_count(stack, "song1", "2018-03-11", 9)
    set_count(stack, "song1", "2018-03@rock", 0)
    set_count(stack, "song2", "all", 7)
    set_count(stack, "song2", "all@hip%20hop%2Frap", 3)
    set_count(stack, "song2", "2018-03-12", 4)  # a day without a download of song2
    expected = expected_counts(DOWNLOADS)
    # when every board is recounted and repaired
    run = reconciler(stack).run(None, repair=True)
    # then every board and aggregate is exact: the stored counts are the downloads counted here, nothing else is left
    assert run.exact
    assert {key: count for key, count in stored_aggregates(stack).items() if count} == dict(expected)
    assert stored_count(stack, "song2", "2018-03-12") == 0
    repaired = {(d.entity_id, report.board, d.recounted) for report in run.boards for d in report.differences}
    assert {("song1", "2018-03-11", 2), ("song1", "2018-03@rock", 2), ("song2", "all", 3)} <= repaired
    assert ("song2", "all@hip%20hop%2Frap", 1) in repaired
    assert all(d.state == "repaired" for report in run.boards for d in report.differences)


def test_a_day_board_targeted_alone_is_recounted_and_the_other_boards_are_left(aws: None) -> None:
    # given a drifted day board and a drifted month board of song1
    stack = boards_stack()
    set_count(stack, "song1", "2018-03-10", 5)
    set_count(stack, "song1", "2018-03", 8)
    # when the day board alone is repaired (reconcile --month names any board)
    report = reconciler(stack).run_month("2018-03-10", repair=True)
    # then the day board is its downloads (d1; d2 is the 11th in UTC), and the month is untouched
    assert [(d.entity_id, d.stored, d.recounted, d.state) for d in report.differences] == [
        ("song1", 5, expected_counts(DOWNLOADS)[("song1", "2018-03-10")], "repaired")
    ]
    assert (stored_count(stack, "song1", "2018-03-10"), stored_count(stack, "song1", "2018-03")) == (1, 8)


def test_a_category_board_with_a_download_in_flight_is_pending_and_left_as_it_is(aws: None) -> None:
    # given song1's all-time rock board drifted, song2's right, and a rock download of song1 the aggregator has not
    # read yet
    stack = boards_stack()
    set_count(stack, "song1", "all@rock", 6)
    set_count(stack, "song2", "all@rock", 1)
    set_count(stack, "song2", "all", 3)
    write(stack, "song1", "d7", "2018-05-01T00:00:00Z", "rock")
    # when that board and the all-time board without a download in flight of song2 are repaired
    run = reconciler(stack).run({"all@rock": None, "all": {"song2"}}, repair=True)
    # then song1's board, with a download in flight, is pending and untouched; song2's boards are exact
    [pending] = run.board("all@rock").differences
    assert (pending.entity_id, pending.stored, pending.state) == ("song1", 6, "pending")
    assert stored_count(stack, "song1", "all@rock") == 6
    assert run.board("all").differences == []
    # and once the aggregator's stream is read (the model counts months: the board stays drifted), a recount repairs it
    ModelAggregator(stack).run()
    again = reconciler(stack).run_month("all@rock", repair=True)
    expected = expected_counts([*DOWNLOADS, ("song1", "d7", "2018-05-01T00:00:00Z", "rock")])
    assert [(d.entity_id, d.state) for d in again.differences] == [("song1", "repaired")]
    assert stored_count(stack, "song1", "all@rock") == expected[("song1", "all@rock")] == 3


def test_a_board_of_a_period_the_deployment_does_not_keep_is_refused_and_left(aws: None) -> None:
    stack = boards_stack()
    set_count(stack, "song1", "2018-W10", 5)
    report: Any = reconciler(stack).run_month("2018-W10", repair=True)
    assert report.refused == (
        "2018-W10 is a week board: the deployment keeps day, month, all boards (LEADERBOARD_PERIODS), never this one"
    )
    assert stored_count(stack, "song1", "2018-W10") == 5


@pytest.mark.parametrize(
    ("board", "period"),
    [
        ("2018-01-15T10", "hour"),
        ("2018-01-15", "day"),
        ("2018-W03", "week"),
        ("2018-01", "month"),
        ("2018", "year"),
        ("all", "all"),
        ("2018-01@rock", "month"),
        ("all@hip%20hop%2Frap", "all"),
        ("2018-01@", None),
        ("2018-13", None),
        ("2018-02-30", None),
        ("d0001", None),
    ],
)
def test_a_board_id_names_its_period(board: str, period: str | None) -> None:
    assert period_of_board(board) == period


PAST_THE_CALENDAR = "9999-12-31T23:30:00-01:00"
"""Parses, but its UTC moment is after year 9999: the aggregator rejects it, and no board counts it."""


def test_a_download_past_the_calendar_in_utc_does_not_stop_the_recount_of_every_other_board(aws: None) -> None:
    # given a day/month/all deployment: song1 with two downloads on 2018-03-10, its day board drifted to 5, and
    # song2 with one download whose UTC moment is past year 9999
    stack = deploy(aggregator_settings={"LEADERBOARD_PERIODS": "day,month,all"})
    write_download(stack, "song1", "d1", "2018-03-10T10:00:00Z")
    write_download(stack, "song1", "d2", "2018-03-10T11:00:00Z")
    write_download(stack, "song2", "d3", PAST_THE_CALENDAR)
    set_count(stack, "song1", "2018-03-10", 5)
    clients = operator_clients(region="us-east-1")
    reconciler = Reconciler(clients, discover(clients, stack.table), empty_page_pause=0, **QUICK_BANDS)
    # when every board is recounted (what recover does for a records_trimmed message)
    report = reconciler.run(None)
    # then song1's day board is found to hold its two downloads, not 5, and song2's download counts nowhere
    [difference] = report.board("2018-03-10").differences
    assert (difference.entity_id, difference.stored, difference.recounted) == ("song1", 5, 2)
    assert all(d.entity_id != "song2" for board in report.boards for d in board.differences)


def test_reconcile_board_recounts_a_day_board_from_the_command_line(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a deployment keeping day boards only, song1 with one download on 2018-03-10 and its day board at 5
    stack = deploy(aggregator_settings={"LEADERBOARD_PERIODS": "day"})
    write_download(stack, "song1", "d1", "2018-03-10T10:00:00Z")
    set_count(stack, "song1", "2018-03-10", 5)
    # when the operator recounts that board by its id
    code = run(["reconcile", "--table", stack.table, "--board", "2018-03-10", "--json", "--region", "us-east-1"])
    # then the difference is reported (exit 3) as for a month board
    out, err = capsys.readouterr()
    assert code == 3, err
    assert [(d["songID"], d["stored"], d["recounted"]) for d in json.loads(out)["differences"]] == [("song1", 5, 1)]
    # and a text that names no board is refused by the parser (exit 2), before anything is read
    assert run(["reconcile", "--table", stack.table, "--board", "2018-13-99", "--region", "us-east-1"]) == 2


def without_mapping(stack: MotoStack) -> list[str]:
    """Deletes the stack's event source mappings (as while Terraform replaces one); the flags the tools then ask for."""
    lambda_client = boto3.client("lambda", region_name="us-east-1")
    for mapping in lambda_client.list_event_source_mappings(EventSourceArn=stack.stream_arn)["EventSourceMappings"]:
        lambda_client.delete_event_source_mapping(UUID=mapping["UUID"])
    names = stack.names
    return [
        "--timestamp-attribute", names.timestamp, "--period-attribute", names.period,
        "--count-attribute", names.count, "--order-attribute", names.order,
        "--progress-table", str(stack.progress_table), "--shards", "1", "--queue-url", stack.queue_url,
        "--region", "us-east-1",
    ]  # fmt: skip


def test_a_sum_deployment_whose_mapping_is_not_found_is_never_repaired_into_counts(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a deployment summing Seconds: song1's one download, its March aggregate holding the sum 300
    stack = deploy(aggregator_settings={"SUM_ATTRIBUTE": "Seconds"})
    write_download(stack, "song1", "d1", "2018-03-10T10:00:00Z")
    ModelAggregator(stack).run()
    set_count(stack, "song1", "2018-03", 300)
    # and its event source mapping not found for now, the operator passing the flags the tools ask for
    flags = without_mapping(stack)
    # when the operator repairs March
    code = run(["reconcile", "--table", stack.table, "--month", "2018-03", "--repair", *flags])
    # then nothing is written: the tools cannot tell a sum deployment from a count one, and say so
    assert stored_count(stack, "song1", "2018-03") == 300
    assert code != 0
    assert "the boards it keeps" in capsys.readouterr().err


def test_a_day_deployment_whose_mapping_is_not_found_gets_no_month_board_written(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a deployment keeping day boards only, song1's download counted in its day board
    stack = deploy(aggregator_settings={"LEADERBOARD_PERIODS": "day"})
    write_download(stack, "song1", "d1", "2018-03-10T10:00:00Z")
    set_count(stack, "song1", "2018-03-10", 1)
    # and its event source mapping not found for now
    flags = without_mapping(stack)
    # when the operator repairs March
    code = run(["reconcile", "--table", stack.table, "--month", "2018-03", "--repair", *flags])
    # then no month aggregate is written: the deployment keeps none, and the tools cannot know its periods
    assert aggregate_item(stack, "song1", "2018-03") is None
    assert code != 0
    assert "the boards it keeps" in capsys.readouterr().err
