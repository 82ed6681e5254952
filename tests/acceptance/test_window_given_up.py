"""A window given up: its final invocation fails past MaximumRetryAttempts, then `recover` makes the counts exact.

"Tumbling windows fully support the existing retry policies maxRetryAttempts and maxRecordAge" (Lambda
Developer Guide): a final invocation that keeps failing is given up like a batch, and its records are
named in an on-failure record in the failure queue. A faulty build of the shipped aggregator fails
the final invocations (in per_batch, every invocation: otherwise the batches already counted
everything); the shipped build is then deployed again and `recover` answers the failure queue.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import poll_until
from leaderboard_dev.loadgen import write_items
from leaderboard_dev.observe import log_lines
from leaderboard_dev.settings import REPOSITORY, Endpoint
from tests.acceptance.conftest import FaultBuilds, differences, downloads, recount, stack, stored, stream_records


def failure_queue(aws: Clients, queue_url: str) -> list[dict[str, Any]]:
    """Every message body in the failure queue, left there (peeked, made visible again at once)."""
    bodies: list[dict[str, Any]] = []
    handles: list[str] = []
    for _ in range(10):
        messages = aws.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        )
        if not messages:
            break
        bodies += [json.loads(message["Body"]) for message in messages]
        handles += [message["ReceiptHandle"] for message in messages]
    for handle in handles:
        aws.sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0)
    return bodies


def given_up(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The mapping's own on-failure records (DDBStreamBatchInfo)."""
    return [body for body in bodies if "DDBStreamBatchInfo" in body]


def windows_given_up(bodies: list[dict[str, Any]], sequences: list[int], namings: int) -> list[dict[str, Any]] | None:
    """The on-failure records of the windows given up, once each download written is named `namings` times, else None.

    The downloads are written in one BatchWriteItem at the start of a window, but "all records have an
    approximate timestamp available that Lambda uses in boundary determinations": read in two polls
    across a boundary, they fall into two windows, each given up with its own record. In per_batch
    each download is named twice, by its batch's record and then by its window's, which spans it:
    only the widest spans are the windows.
    """

    def span(body: dict[str, Any]) -> tuple[int, int]:
        info = body["DDBStreamBatchInfo"]
        return int(info["startSequenceNumber"]), int(info["endSequenceNumber"])

    exhausted = [body for body in given_up(bodies) if body["requestContext"]["condition"] == "RetryAttemptsExhausted"]
    spans = [span(body) for body in exhausted]
    if any(sum(first <= sequence <= last for first, last in spans) < namings for sequence in sequences):
        return None
    by_span = {span(body): body for body in exhausted}
    return [
        body
        for (first, last), body in by_span.items()
        if not any(other != (first, last) and other[0] <= first and last <= other[1] for other in by_span)
    ]


def start_of_a_window(seconds: int) -> None:
    """Wait until half a second into a tumbling window, so that writes made now all fall into it."""
    time.sleep((0.5 - time.time()) % seconds)


def final_invocation_faults(aws: Clients, log_group: str) -> int:
    return sum(
        1
        for line in log_lines(aws, log_group)
        if line.get("message") == "test-only fault injected" and line.get("final_invocation")
    )


RECOVER = [sys.executable, "-m", "leaderboard_tools", "recover"]


def recover(table: str, queue_url: str, attempts: int = 6) -> dict[str, Any]:
    """The host tool, as an operator runs it: again while it answers 4 (pending: what remains waits on the stream)."""
    for _ in range(attempts):
        result = subprocess.run(
            # The emulator stamps stream records with this machine's clock: a 2 s margin is its true skew.
            [*RECOVER, "--table", table, "--queue-url", queue_url, "--clock-margin-seconds", "2", "--output", "json"],
            capture_output=True,
            text=True,
            check=False,
            cwd=REPOSITORY,
        )
        if result.returncode != 4:
            break
        time.sleep(10)
    assert result.returncode == 0, f"recover exited {result.returncode}: {result.stdout}\n{result.stderr}"
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    ("aggregate_writes", "record_fault_rate", "count"),
    [("per_batch", 1.0, 6), ("per_window", 0.0, 12)],
    ids=["per_batch, every invocation failing", "per_window, final invocations failing"],
)
def test_a_window_given_up_is_made_exact_by_recover(
    endpoint: Endpoint,
    aws: Clients,
    fault_builds: FaultBuilds,
    aggregate_writes: str,
    record_fault_rate: float,
    count: int,
) -> None:
    # given a build whose final invocations always fail before any work (per_batch: every invocation does),
    # and one retry
    failing = str(fault_builds.faulty(record_fault_rate, processed_share=0, final_rate=1.0))
    retries, window = 1, 5
    with stack(
        endpoint,
        "given-up",
        batch_size=10,
        tumbling_window_in_seconds=window,
        maximum_retry_attempts=retries,
        aggregate_writes=aggregate_writes,
        aggregator_package_path=failing,
    ) as (deployment, outputs):
        table, queue_url = outputs["table_name"], outputs["failure_queue_url"]
        log_group = outputs["aggregator_log_group_name"]
        # when downloads arrive in one window (one BatchWriteItem), and its final invocation fails past its retries
        written = downloads(f"given-up-{aggregate_writes}", count, seed=1403)
        start_of_a_window(window)
        write_items(aws.dynamodb, table, [download.as_item() for download in written])

        def inserted() -> list[int]:
            _, stream = stream_records(aws, outputs["table_stream_arn"])
            return [int(record["dynamodb"]["SequenceNumber"]) for record in stream if record["eventName"] == "INSERT"]

        sequences = poll_until(
            lambda: len(found := inserted()) == count and found, timeout=60, describe="the downloads in the stream"
        )
        namings = 2 if aggregate_writes == "per_batch" else 1
        records = poll_until(
            lambda: windows_given_up(failure_queue(aws, queue_url), sequences, namings),
            timeout=420,
            interval=3,
            describe="the windows given up, their on-failure records in the failure queue naming every download",
        )
        # then each window really was given up, after 1 + retries final invocations, with counts at stake
        assert sum(record["DDBStreamBatchInfo"]["batchSize"] for record in records) == count
        assert [record["requestContext"]["approximateInvokeCount"] for record in records] == [1 + retries] * len(
            records
        )
        # (per_batch: the batch itself was given up first, and the window's final invocations come after it)
        expected_faults = (1 + retries) * len(records)
        faults = poll_until(
            lambda: (
                final_invocation_faults(aws, log_group) >= expected_faults and final_invocation_faults(aws, log_group)
            ),
            timeout=120,
            interval=2,
            describe="the final invocations' faults in the log",
        )
        assert faults == expected_faults
        assert differences(stored(aws, table), recount(written)) != {}
        # when the shipped aggregator is deployed again, and recover answers the failure queue
        deployment.variables.pop("aggregator_package_path")
        deployment.apply()
        report = recover(table, queue_url)
        # then every aggregate equals the recount of the downloads written
        assert differences(stored(aws, table), recount(written)) == {}, report
        # and the on-failure records are gone, answered
        assert given_up(failure_queue(aws, queue_url)) == []
