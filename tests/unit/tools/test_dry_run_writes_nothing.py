"""`reconcile --repair --dry-run` and `rekey --dry-run` on every path
that could still write, every request counted at botocore's level (a `before-call` handler in every client created
after the fixture) against an allowlist of read-only operations, not a denylist of known writes."""

from __future__ import annotations

import json
from typing import Any

import boto3
import botocore.handlers
import pytest

from tests.unit.tools.operator_stack import (
    MONTH,
    REGION,
    ModelAggregator,
    aggregate_item,
    deploy,
    drifted_song,
    killed_repair_holding_a_missed_download,
    run,
    set_count,
    stored_count,
    write_download,
)

READ_ONLY = {
    "DescribeTable",
    "GetItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "DescribeTimeToLive",
    "DescribeStream",
    "GetShardIterator",
    "GetRecords",
    "ListStreams",
    "GetFunctionConfiguration",
    "GetFunction",
    "ListEventSourceMappings",
    "GetEventSourceMapping",
    "GetQueueAttributes",
    "GetQueueUrl",
    "ListTables",
    "GetCallerIdentity",
    "DescribeContinuousBackups",
    "ListTagsOfResource",
}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    called: list[str] = []

    def record(model: Any, **_: Any) -> None:
        called.append(model.name)

    monkeypatch.setattr(
        botocore.handlers, "BUILTIN_HANDLERS", [("before-call", record), *botocore.handlers.BUILTIN_HANDLERS]
    )
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    return called


def snapshot(stack: Any) -> Any:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    items = []
    for table in {stack.table, stack.aggregates_table, *([stack.progress_table] if stack.progress_table else [])}:
        items += sorted(
            json.dumps(i, sort_keys=True) for i in dynamodb.scan(TableName=table, ConsistentRead=True)["Items"]
        )
    sqs = boto3.client("sqs", region_name=REGION)
    queues = []
    for url in filter(None, (stack.queue_url, stack.band_queue_url)):
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        queues.append(  # a delayed record becoming visible is time passing, not a write: the total
            sum(
                int(attributes[name])
                for name in (
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesDelayed",
                    "ApproximateNumberOfMessagesNotVisible",
                )
            )
        )
    return items, queues


def dry_run(stack: Any, calls: list[str], argv: list[str]) -> tuple[Any, set[str]]:
    before = snapshot(stack)
    calls.clear()
    code = run(argv)
    made = set(calls)
    assert snapshot(stack) == before
    return code, made


@pytest.mark.parametrize("band_queue", [False, True])
@pytest.mark.parametrize("output", ["json", "table", "text"])
def test_dry_run_repair_of_a_drift_makes_only_reads(aws: None, calls: list[str], band_queue: bool, output: str) -> None:
    stack = drifted_song(band_queue=band_queue)
    code, made = dry_run(
        stack,
        calls,
        ["reconcile", "--table", stack.table, "--month", MONTH, "--repair", "--dry-run", "--output", output],
    )
    assert code == 3
    assert made <= READ_ONLY, made - READ_ONLY
    assert stored_count(stack, "song1", MONTH) == 5


def test_dry_run_repair_with_downloads_in_flight_absent_aggregates_and_a_left_open_band(
    aws: None, calls: list[str]
) -> None:
    # given song1 drifted, a band left open by a killed repair, song2 counted then drifted, song3 never counted (in
    # flight: the aggregator has not read it), song4's aggregate with no download at all
    stack = drifted_song()
    killed_repair_holding_a_missed_download(stack, band_seconds=120)
    write_download(stack, "song2", "e1")
    ModelAggregator(stack).run()
    set_count(stack, "song2", MONTH, 9)
    write_download(stack, "song3", "f1")
    set_count(stack, "song4", MONTH, 4)
    for argv in (
        ["reconcile", "--table", stack.table, "--month", MONTH, "--repair", "--dry-run", "--json"],
        [
            "reconcile",
            "--table",
            stack.table,
            "--board",
            MONTH,
            "--repair",
            "--dry-run",
            "--songs",
            "song1,song3,song4",
        ],
        [
            "reconcile",
            "--table",
            stack.table,
            "--month",
            MONTH,
            "--repair",
            "--dry-run",
            "--shards",
            "1",
            "--queue-url",
            stack.queue_url,
            "--output",
            "text",
        ],
    ):
        code, made = dry_run(stack, calls, argv)
        assert not isinstance(code, BaseException), code
        assert made <= READ_ONLY, (argv, made - READ_ONLY)


def test_dry_run_rekey_with_unordered_and_moved_aggregates_makes_only_reads(aws: None, calls: list[str]) -> None:
    stack = deploy(shards=4, previous_shards=1)
    for n in range(12):
        write_download(stack, f"song{n}", f"d{n}")
    ModelAggregator(stack).run()
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    for n in range(6):  # the old layout, some without an order (written before LeaderboardOrder existed)
        dynamodb.update_item(
            TableName=stack.table,
            Key={"songID": {"S": f"song{n}"}, "SK": {"S": MONTH}},
            UpdateExpression="SET #p = :old" + (" REMOVE #o" if n % 2 else ""),
            ExpressionAttributeNames={"#p": "Month", **({"#o": "LeaderboardOrder"} if n % 2 else {})},
            ExpressionAttributeValues={":old": {"S": MONTH}},
        )
    for output in ("json", "table", "text"):
        code, made = dry_run(
            stack, calls, ["rekey", "--table", stack.table, "--shards", "4", "--dry-run", "--output", output]
        )
        assert code == 0, code
        assert made <= READ_ONLY, made - READ_ONLY
    assert (aggregate_item(stack, "song1", MONTH) or {})["Month"]["S"] == MONTH
