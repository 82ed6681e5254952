"""What the stream mapping does with failures, where the emulator emulates it (LocalStack; AWS)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leaderboard_tools.aws import Clients
from leaderboard_tools.leaderboard import poll_until
from leaderboard_tools.loadgen import Download
from leaderboard_tools.settings import Endpoint
from tests.acceptance.conftest import log_lines, stack

pytestmark = pytest.mark.usefixtures("stream_mapping_honours_retries_and_partial_batches")


def download(song: str, number: int) -> dict[str, Any]:
    return Download(song, f"download-{number}", "user1", f"2018-05-0{number % 9 + 1}T10:00:00Z").as_item()


def count_of(aws: Clients, table: str, song: str, month: str = "2018-05") -> int | None:
    item = aws.dynamodb.get_item(
        TableName=table, Key={"songID": {"S": song}, "SK": {"S": month}}, ConsistentRead=True
    ).get("Item")
    return None if item is None else int(item["DownloadCount"]["N"])


def put_aggregate(aws: Clients, table: str, song: str, count: dict[str, str], watermark: dict[str, str] | None) -> None:
    item = {"songID": {"S": song}, "SK": {"S": "2018-05"}, "Month": {"S": "2018-05"}, "DownloadCount": count}
    if watermark is not None:
        item["AppliedSequence"] = watermark
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
    # given an aggregate that fails until repaired: its watermark was overwritten with a non-sequence
    with stack(endpoint, "partial", batch_size=10, maximum_retry_attempts=5) as (_, outputs):
        table, log_group = outputs["table_name"], outputs["aggregator_log_group_name"]
        put_aggregate(aws, table, "poisoned", {"N": "0"}, watermark={"S": "overwritten"})
        # when four good downloads and then two of the poisoned song reach the aggregator in one batch
        mapping = outputs["aggregator_event_source_mapping_uuid"]
        set_mapping_enabled(aws, mapping, False)
        for number, song in enumerate(["good-a", "good-b", "good-c", "good-a", "poisoned", "poisoned"]):
            aws.dynamodb.put_item(TableName=table, Item=download(song, number))
        set_mapping_enabled(aws, mapping, True)

        def first_failure() -> dict[str, Any] | None:
            return next((line for line in invocations(aws, log_group) if line.get("failed_keys")), None)

        failed = poll_until(first_failure, timeout=120, interval=2, describe="a batch with a failed aggregate")
        # and the aggregate is repaired while the mapping retries
        put_aggregate(aws, table, "poisoned", {"N": "0"}, watermark=None)
        poll_until(
            lambda: count_of(aws, table, "poisoned") == 2, timeout=120, interval=2, describe="the retried aggregate"
        )
        # then the failing invocation held good records before the poisoned ones and named the first poisoned one
        assert (failed["records_received"], failed["added"]) == (6, 4)
        assert failed["first_sequence"] < failed["retry_from"]
        # and each retry started exactly there
        lines = invocations(aws, log_group)
        retries = lines[lines.index(failed) + 1 :]
        assert retries
        assert {line["first_sequence"] for line in retries} == {failed["retry_from"]}
        assert {song: count_of(aws, table, song) for song in ("good-a", "good-b", "good-c")} == {
            "good-a": 2,
            "good-b": 1,
            "good-c": 1,
        }


def set_mapping_enabled(aws: Clients, mapping_uuid: str, enabled: bool) -> None:
    """Holding the mapping while writing makes the records arrive as one batch, whatever the poller's timing."""
    aws.lambda_.update_event_source_mapping(UUID=mapping_uuid, Enabled=enabled)
    wanted = "Enabled" if enabled else "Disabled"
    poll_until(
        lambda: aws.lambda_.get_event_source_mapping(UUID=mapping_uuid)["State"] == wanted,
        timeout=60,
        describe=f"mapping {wanted}",
    )
