"""Recovery on the emulator: batches given up on are recounted from the failure queue; drift is reconciled."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

from leaderboard_tools.aws import Clients
from leaderboard_tools.leaderboard import poll_until
from leaderboard_tools.leaderboard_layout import AttributeNames
from leaderboard_tools.loadgen import Download, write_items
from leaderboard_tools.reconcile import Reconciler
from leaderboard_tools.recover import recover
from leaderboard_tools.settings import REPOSITORY, Endpoint
from tests.acceptance.conftest import FaultBuilds, stack

MONTH = "2018-08"
SETTLE_SECONDS = 12
"""More than the stack's 5-second tumbling window: what did not move for this long is settled."""


def downloads_of(counts: dict[str, int], prefix: str) -> list[Download]:
    return [
        Download(song, f"{prefix}-{song}-{n}", "user1", f"{MONTH}-{n % 27 + 1:02d}T08:00:00Z")
        for song, count in counts.items()
        for n in range(count)
    ]


def stored(aws: Clients, table: str, songs: list[str]) -> dict[str, int | None]:
    result = {}
    for song in songs:
        item = aws.dynamodb.get_item(
            TableName=table, Key={"songID": {"S": song}, "SK": {"S": MONTH}}, ConsistentRead=True
        ).get("Item")
        result[song] = None if item is None else int(item["DownloadCount"]["N"])
    return result


def failure_records(aws: Clients, queue_url: str) -> int:
    """Failure records now in the queue, left there (a peek that makes them visible again at once)."""
    messages = aws.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
        "Messages", []
    )
    for message in messages:
        aws.sqs.change_message_visibility(
            QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    return sum(1 for message in messages if "DDBStreamBatchInfo" in json.loads(message["Body"]))


def test_batches_given_up_on_are_recovered_exactly_and_drift_is_reconciled(
    endpoint: Endpoint, aws: Clients, fault_builds: FaultBuilds
) -> None:
    # given an aggregator build that fails every invocation before any work, and no retries
    failing = str(fault_builds.faulty(1.0, processed_share=0))
    with stack(
        endpoint,
        "recover",
        batch_size=10,
        tumbling_window_in_seconds=5,
        maximum_retry_attempts=0,
        aggregator_package_path=failing,
    ) as (deployment, outputs):
        table, queue_url = outputs["table_name"], outputs["failure_queue_url"]
        lost = {"lost-a": 4, "lost-b": 2}
        # when downloads arrive, every batch holding them is given up on and reported in the failure queue
        write_items(aws.dynamodb, table, [d.as_item() for d in downloads_of(lost, "first")])
        poll_until(lambda: failure_records(aws, queue_url) > 0, timeout=180, interval=3, describe="failure records")
        assert stored(aws, table, sorted(lost)) == {"lost-a": None, "lost-b": None}
        # and the shipped aggregator is deployed again, and counts new downloads
        deployment.variables.pop("aggregator_package_path")
        deployment.apply()
        later = {"lost-a": 1, "steady": 3}
        write_items(aws.dynamodb, table, [d.as_item() for d in downloads_of(later, "later")])
        poll_until(
            lambda: stored(aws, table, ["steady"]) == {"steady": 3}, timeout=180, interval=3, describe="later counts"
        )
        # when recover reads the failure queue
        reconciler = Reconciler(aws.dynamodb, table, settle_seconds=SETTLE_SECONDS)
        report = recover(aws.sqs, aws.dynamodbstreams, reconciler, queue_url, AttributeNames())
        # then every aggregate the given-up batches touched holds its downloads, and the messages are gone
        truth = Counter(lost) + Counter(later)
        assert stored(aws, table, sorted(truth)) == dict(truth), report.as_json()
        assert report.deleted == report.messages > 0
        assert report.kept == []
        # and a second run finds nothing to do and changes nothing
        again = recover(aws.sqs, aws.dynamodbstreams, reconciler, queue_url, AttributeNames())
        assert (again.messages, again.deleted) == (0, 0)
        assert stored(aws, table, sorted(truth)) == dict(truth)

        # given drift introduced by hand on one aggregate
        aws.dynamodb.update_item(
            TableName=table,
            Key={"songID": {"S": "steady"}, "SK": {"S": MONTH}},
            UpdateExpression="ADD #count :three",
            ExpressionAttributeNames={"#count": "DownloadCount"},
            ExpressionAttributeValues={":three": {"N": "3"}},
        )
        # when reconcile runs, it finds exactly that drift, and repairs exactly that
        found = reconciler.run(MONTH)
        assert found.as_json()["differences"] == [{"songID": "steady", "stored": 6, "recounted": 3, "repaired": False}]
        repaired = reconciler.run(MONTH, repair=True)
        assert repaired.repaired
        assert stored(aws, table, sorted(truth)) == dict(truth)
        assert reconciler.run(MONTH).differences == []


def test_the_command_line_prints_the_json_the_readme_describes(endpoint: Endpoint, aws: Clients) -> None:
    with stack(endpoint, "reconcile-cli", batch_size=10) as (_, outputs):
        table = outputs["table_name"]
        write_items(aws.dynamodb, table, [d.as_item() for d in downloads_of({"cli-song": 2}, "cli")])
        poll_until(
            lambda: stored(aws, table, ["cli-song"]) == {"cli-song": 2}, timeout=180, interval=3, describe="counts"
        )
        result = subprocess.run(
            [sys.executable, "-m", "leaderboard_tools", "reconcile", "--table", table, "--month", MONTH, "--json"],
            capture_output=True,
            text=True,
            check=False,
            cwd=REPOSITORY,
        )
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == {"month": MONTH, "differences": [], "repaired": False}
