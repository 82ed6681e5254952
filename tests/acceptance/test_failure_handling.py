"""What the stream mapping does with failures, where the emulator emulates it (LocalStack; AWS)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leaderboard_tools.aws import Clients
from leaderboard_tools.leaderboard import poll_until
from leaderboard_tools.settings import Endpoint
from tests.acceptance.conftest import log_lines, stack

pytestmark = pytest.mark.usefixtures("stream_mapping_honours_retries_and_partial_batches")


def download(song: str, number: int, month: str = "2018-05") -> dict[str, Any]:
    return {
        "songID": {"S": song},
        "SK": {"S": f"download-{number}"},
        "Timestamp": {"S": f"{month}-0{number % 9 + 1}T10:00:00Z"},
    }


def count_of(aws: Clients, table: str, song: str, month: str = "2018-05") -> int | None:
    item = aws.dynamodb.get_item(
        TableName=table, Key={"songID": {"S": song}, "SK": {"S": month}}, ConsistentRead=True
    ).get("Item")
    return None if item is None else int(item["DownloadCount"]["N"])


def put_aggregate(aws: Clients, table: str, song: str, count: dict[str, str], month: str = "2018-05") -> None:
    item = {"songID": {"S": song}, "SK": {"S": month}, "Month": {"S": month}, "DownloadCount": count}
    aws.dynamodb.put_item(TableName=table, Item=item)


def invocations(aws: Clients, log_group: str) -> list[dict[str, Any]]:
    return [
        line
        for line in log_lines(aws, log_group)
        if line.get("message") in ("batch summary", "test-only fault injected")
    ]


def test_a_batch_that_keeps_failing_goes_to_the_failure_queue_after_the_retries(
    endpoint: Endpoint, aws: Clients
) -> None:
    # given an aggregator that fails every invocation after applying its batch, and 2 retries
    with stack(endpoint, "retries", batch_size=10, maximum_retry_attempts=2, test_fault_injection_rate=1) as (
        _,
        outputs,
    ):
        # when one download arrives (a batch of one cannot be bisected, on AWS either)
        aws.dynamodb.put_item(TableName=outputs["table_name"], Item=download("stubborn-song", 1))

        def failure_record() -> dict[str, Any] | None:
            messages = aws.sqs.receive_message(
                QueueUrl=outputs["failure_queue_url"], MaxNumberOfMessages=10, WaitTimeSeconds=1
            ).get("Messages", [])
            bodies = [json.loads(message["Body"]) for message in messages]
            return next((body for body in bodies if "requestContext" in body), None)

        record = poll_until(failure_record, timeout=180, interval=2, describe="a failure record in the queue")
        # then the mapping invoked it 1 + 2 times, gave up with a failure record naming the batch
        assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
        assert record["requestContext"]["approximateInvokeCount"] == 3
        assert record["DDBStreamBatchInfo"]["batchSize"] == 1
        faults = poll_until(
            lambda: (
                len(invocations(aws, outputs["aggregator_log_group_name"])) >= 3
                and invocations(aws, outputs["aggregator_log_group_name"])
            ),
            timeout=30,
            describe="three logged invocations",
        )
        assert [line["message"] for line in faults] == ["test-only fault injected"] * 3
        # and the download was counted once, although three invocations applied it
        assert count_of(aws, outputs["table_name"], "stubborn-song") == 1


def test_a_partial_batch_response_makes_the_retry_start_at_the_failed_record(endpoint: Endpoint, aws: Clients) -> None:
    # given an aggregate that cannot be updated: its counter was written as a string
    with stack(endpoint, "partial", batch_size=10, maximum_batching_window_in_seconds=5, maximum_retry_attempts=5) as (
        _,
        outputs,
    ):
        table, log_group = outputs["table_name"], outputs["aggregator_log_group_name"]
        aws.dynamodb.put_item(
            TableName=table,
            Item={
                "songID": {"S": "poisoned"},
                "SK": {"S": "2018-05"},
                "Month": {"S": "2018-05"},
                "DownloadCount": {"S": "lots"},
            },
        )
        # when four good downloads and then two of the poisoned song arrive in one batch
        for number, song in enumerate(["good-a", "good-b", "good-c", "good-a", "poisoned", "poisoned"]):
            aws.dynamodb.put_item(TableName=table, Item=download(song, number))

        def first_failure() -> list[dict[str, Any]] | None:
            lines = [line for line in invocations(aws, log_group) if line["records_received"]]
            return lines if any(line["failed_keys"] for line in lines) else None

        first = poll_until(first_failure, timeout=120, interval=2, describe="a batch with a failed aggregate")
        # and the aggregate is repaired while the mapping retries
        aws.dynamodb.put_item(
            TableName=table,
            Item={
                "songID": {"S": "poisoned"},
                "SK": {"S": "2018-05"},
                "Month": {"S": "2018-05"},
                "DownloadCount": {"N": "0"},
            },
        )
        settled = poll_until(
            lambda: count_of(aws, table, "poisoned") == 2 and invocations(aws, log_group),
            timeout=120,
            interval=2,
            describe="the retried aggregate",
        )
        # then the first invocation saw all six records and every retry started at the first poisoned one
        assert first[0]["records_received"] == 6
        assert first[0]["added"] == 4
        retries = [line for line in settled[1:] if line["records_received"]]
        assert retries
        assert all(line["records_received"] == 2 for line in retries)
        assert {song: count_of(aws, table, song) for song in ("good-a", "good-b", "good-c")} == {
            "good-a": 2,
            "good-b": 1,
            "good-c": 1,
        }
