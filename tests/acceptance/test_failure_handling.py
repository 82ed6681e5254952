"""What the stream mapping and the aggregator do with failures: retries, the failure queue, work kept in the window."""

from __future__ import annotations

import json
from typing import Any

from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import poll_until
from leaderboard_dev.loadgen import Download
from leaderboard_dev.observe import log_lines
from leaderboard_dev.settings import Endpoint
from tests.acceptance.conftest import FaultBuilds, stack


def download(song: str, number: int) -> dict[str, Any]:
    return Download(song, f"download-{number}", "user1", f"2018-05-0{number % 9 + 1}T10:00:00Z").as_item()


def count_of(aws: Clients, table: str, song: str, month: str = "2018-05") -> int | None:
    item = aws.dynamodb.get_item(
        TableName=table, Key={"songID": {"S": song}, "SK": {"S": month}}, ConsistentRead=True
    ).get("Item")
    return None if item is None else int(item["DownloadCount"]["N"])


def lines_with(aws: Clients, log_group: str, *messages: str) -> list[dict[str, Any]]:
    return [line for line in log_lines(aws, log_group) if line.get("message") in messages]


def test_a_batch_that_keeps_failing_goes_to_the_failure_queue_after_the_retries(
    endpoint: Endpoint, aws: Clients, fault_builds: FaultBuilds
) -> None:
    # given a build of the aggregator that fails every invocation with records after half of them, and 2 retries
    package = str(fault_builds.faulty(1.0))
    with stack(endpoint, "retries", batch_size=10, maximum_retry_attempts=2, aggregator_package_path=package) as (
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
        # then the mapping invoked it 1 + 2 times and gave up with a failure record naming the batch and its shard
        assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
        assert record["requestContext"]["approximateInvokeCount"] == 3
        assert record["DDBStreamBatchInfo"]["batchSize"] == 1
        assert record["DDBStreamBatchInfo"]["shardId"]
        faults = poll_until(
            lambda: (
                len(lines_with(aws, outputs["aggregator_log_group_name"], "test-only fault injected")) >= 3
                and lines_with(aws, outputs["aggregator_log_group_name"], "test-only fault injected")
            ),
            timeout=90,
            describe="three logged invocations",
        )
        assert len(faults) == 3
        # and the download was counted once, although three invocations processed it
        assert count_of(aws, outputs["table_name"], "stubborn-song") == 1


def test_an_aggregate_that_cannot_be_written_holds_the_checkpoint_and_is_written_once_it_can(
    endpoint: Endpoint, aws: Clients
) -> None:
    with stack(endpoint, "pending", batch_size=10, tumbling_window_in_seconds=5, maximum_retry_attempts=1000) as (
        _,
        outputs,
    ):
        table, log_group = outputs["table_name"], outputs["aggregator_log_group_name"]
        # given an aggregate no update can succeed on: its count was overwritten with a string
        poisoned = {"songID": {"S": "poisoned"}, "SK": {"S": "2018-05"}, "Month": {"S": "2018-05"}}
        aws.dynamodb.put_item(
            TableName=table,
            Item={**poisoned, "DownloadCount": {"S": "overwritten"}, "LeaderboardOrder": {"N": "1"}},
        )
        # when two good downloads and two of the poisoned song arrive
        for number, song in enumerate(["good-a", "poisoned", "good-b", "poisoned"]):
            aws.dynamodb.put_item(TableName=table, Item=download(song, number))
        # then the good ones are counted at once, the poisoned aggregate holds the shard's checkpoint back,
        # and the window's final invocation fails, so the mapping retries it
        poll_until(
            lambda: (count_of(aws, table, "good-a"), count_of(aws, table, "good-b")) == (1, 1),
            timeout=120,
            interval=2,
            describe="the good aggregates",
        )
        poll_until(
            lambda: lines_with(aws, log_group, "aggregate update failed; the checkpoint waits for it"),
            timeout=120,
            interval=2,
            describe="the poisoned aggregate failing",
        )
        # when the aggregate is repaired
        aws.dynamodb.delete_item(TableName=table, Key={"songID": poisoned["songID"], "SK": poisoned["SK"]})
        # then a later invocation of the shard writes it, exactly once, and counts nothing else twice
        poll_until(
            lambda: count_of(aws, table, "poisoned") == 2, timeout=120, interval=2, describe="the repaired aggregate"
        )
        assert (count_of(aws, table, "good-a"), count_of(aws, table, "good-b"), count_of(aws, table, "poisoned")) == (
            1,
            1,
            2,
        )
