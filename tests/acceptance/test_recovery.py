"""Recovery on the emulator: the operator tools read the deployment, answer the failure queue, and repair drift
without ever racing a lagging stream."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from typing import Any

from leaderboard_core.index_layout import leaderboard_partition
from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import poll_until, query_all_pages
from leaderboard_dev.loadgen import Download, write_items
from leaderboard_dev.settings import REPOSITORY, Endpoint
from leaderboard_tools.deployment import Deployment, discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile import Reconciler
from leaderboard_tools.recover import recover
from tests.acceptance.conftest import FaultBuilds, stack

MONTH = "2018-08"


def downloads_of(counts: dict[str, int], prefix: str) -> list[Download]:
    return [
        Download(song, f"{prefix}-{song}-{n}", "user1", f"{MONTH}-{n % 27 + 1:02d}T08:00:00Z")
        for song, count in counts.items()
        for n in range(count)
    ]


def stored(aws: Clients, table: str, songs: list[str], count_attribute: str = "DownloadCount") -> dict[str, int | None]:
    result = {}
    for song in songs:
        item = aws.dynamodb.get_item(
            TableName=table, Key={"songID": {"S": song}, "SK": {"S": MONTH}}, ConsistentRead=True
        ).get("Item")
        result[song] = None if item is None else int(item[count_attribute]["N"])
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


EMULATOR_BANDS = {"clock_margin_seconds": 2, "band_settle_seconds": 1, "band_poll_seconds": 1}
"""The emulator stamps stream records with this machine's clock, so a 2 s clock margin is its true skew (at the
default 60 s every repair waits a minute for its band)."""
EMULATOR_MARGIN = ("--clock-margin-seconds", "2")


def operator(endpoint: Endpoint, table: str) -> tuple[Any, Deployment, Reconciler]:
    """The operator tools as an operator builds them: boto3's session at the given endpoint, the deployment read."""
    clients = operator_clients(region=endpoint.region, endpoint_url=endpoint.url)
    deployment = discover(clients, table)
    return clients, deployment, Reconciler(clients, deployment, empty_page_pause=0.2, **EMULATOR_BANDS)


def cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    """`python -m leaderboard_tools ...` as docs/operations.md documents it; AWS_ENDPOINT_URL from the environment."""
    return subprocess.run(
        [sys.executable, "-m", "leaderboard_tools", *arguments],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPOSITORY,
        env=os.environ.copy(),
    )


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
        # (the design keeps them in the stream behind the shard's checkpoint: the next invocation that reads
        # the shard, here a window's final invocation without records, may count them already)
        write_items(aws.dynamodb, table, [d.as_item() for d in downloads_of(lost, "first")])
        poll_until(lambda: failure_records(aws, queue_url) > 0, timeout=180, interval=3, describe="failure records")
        assert all((count or 0) <= lost[song] for song, count in stored(aws, table, sorted(lost)).items())
        # and the shipped aggregator is deployed again, and counts new downloads
        deployment.variables.pop("aggregator_package_path")
        deployment.apply()
        later = {"lost-a": 1, "steady": 3}
        write_items(aws.dynamodb, table, [d.as_item() for d in downloads_of(later, "later")])
        poll_until(
            lambda: stored(aws, table, ["steady"]) == {"steady": 3}, timeout=180, interval=3, describe="later counts"
        )
        # when recover reads the failure queue (the queue and everything else found from the table)
        clients, found, reconciler = operator(endpoint, table)
        assert found.failure_queue_url == queue_url
        report = recover(clients, found, reconciler, queue_url)
        # then every aggregate the given-up batches touched holds its downloads, and the messages are gone
        truth = Counter(lost) + Counter(later)
        assert stored(aws, table, sorted(truth)) == dict(truth), report.as_json()
        assert report.deleted == report.messages > 0, report.as_json()
        assert report.kept == []
        # and a second run finds nothing to do and changes nothing
        again = recover(clients, found, reconciler, queue_url)
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
        drift = reconciler.run_month(MONTH)
        assert [(d.entity_id, d.stored, d.recounted) for d in drift.differences] == [("steady", 6, 3)]
        repaired = reconciler.run_month(MONTH, repair=True)
        assert repaired.repaired, repaired.as_json()
        assert stored(aws, table, sorted(truth)) == dict(truth)
        assert reconciler.run_month(MONTH).differences == []

        # given a batch the aggregator has not read yet (the mapping disabled) and its failure record
        mapping = outputs["aggregator_event_source_mapping_uuid"]
        disable(aws, mapping)
        write_items(aws.dynamodb, table, [d.as_item() for d in downloads_of({"direct-song": 2}, "direct")])
        shard, records = downloads_in_stream(aws, table, "direct-song")
        assert len(records) == 2
        aws.sqs.send_message(
            QueueUrl=queue_url, MessageBody=json.dumps(batch_failure(table_stream(aws, table), shard, records))
        )
        # when recover runs, then it has the aggregator count the range through its end, and deletes the record
        report = recover(clients, found, reconciler, queue_url)
        assert (report.deleted, report.kept) == (1, []), report.as_json()
        assert report.batches[0]["aggregator"]["reachedBound"] is True, report.batches
        assert report.batches[0]["aggregates"] == [["direct-song", MONTH]]
        assert stored(aws, table, ["direct-song"]) == {"direct-song": 2}


def disable(aws: Clients, mapping: str) -> None:
    """Stop the mapping, and let an invocation already under way return (two of the stack's 5-second windows)."""
    aws.lambda_.update_event_source_mapping(UUID=mapping, Enabled=False)
    poll_until(
        lambda: aws.lambda_.get_event_source_mapping(UUID=mapping)["State"] == "Disabled",
        timeout=120,
        interval=2,
        describe="mapping disabled",
    )
    time.sleep(10)


def table_stream(aws: Clients, table: str) -> str:
    return aws.dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]


def downloads_in_stream(aws: Clients, table: str, song: str) -> tuple[str, list[dict[str, Any]]]:
    """The stream records of a song's downloads, read from the trim horizon of the stack's one shard."""
    stream = table_stream(aws, table)
    shard = aws.dynamodbstreams.describe_stream(StreamArn=stream)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = aws.dynamodbstreams.get_shard_iterator(StreamArn=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    found: list[dict[str, Any]] = []
    position = iterator["ShardIterator"]
    for _ in range(50):
        page = aws.dynamodbstreams.get_records(ShardIterator=position, Limit=1000)
        found += [
            record
            for record in page["Records"]
            if record["eventName"] == "INSERT"
            and (record["dynamodb"].get("NewImage") or {}).get("songID", {}).get("S") == song
            and "Month" not in record["dynamodb"]["NewImage"]
        ]
        position = page.get("NextShardIterator")
        if not page["Records"] or not position:
            break
    return shard, found


def batch_failure(stream: str, shard: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The mapping's on-failure record for a batch of these records, in its documented shape."""
    return {
        "requestContext": {"condition": "RetryAttemptsExhausted"},
        "DDBStreamBatchInfo": {
            "shardId": shard,
            "streamArn": stream,
            "startSequenceNumber": records[0]["dynamodb"]["SequenceNumber"],
            "endSequenceNumber": records[-1]["dynamodb"]["SequenceNumber"],
            "approximateArrivalOfFirstRecord": "2018-08-01T00:00:00Z",
            "approximateArrivalOfLastRecord": "2018-08-01T00:00:00Z",
            "batchSize": len(records),
        },
    }


def test_the_command_line_prints_the_json_the_operations_page_describes(endpoint: Endpoint, aws: Clients) -> None:
    with stack(endpoint, "reconcile-cli", batch_size=10) as (_, outputs):
        table = outputs["table_name"]
        write_items(aws.dynamodb, table, [d.as_item() for d in downloads_of({"cli-song": 2}, "cli")])
        poll_until(
            lambda: stored(aws, table, ["cli-song"]) == {"cli-song": 2}, timeout=180, interval=3, describe="counts"
        )
        result = cli("reconcile", "--table", table, "--month", MONTH, "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == {
            "board": MONTH,
            "month": MONTH,
            "differences": [],
            "repaired": False,
            "pending": [],
        }


def test_a_dry_run_repair_says_what_it_would_repair_and_changes_nothing(endpoint: Endpoint, aws: Clients) -> None:
    # given a stack with counted downloads, and one count drifted by hand
    with stack(endpoint, "dry-run", batch_size=10) as (_, outputs):
        table = outputs["table_name"]
        truth = {"kept-song": 2, "drifted-song": 3}
        write_items(aws.dynamodb, table, [d.as_item() for d in downloads_of(truth, "dry")])
        poll_until(lambda: stored(aws, table, sorted(truth)) == truth, timeout=180, interval=3, describe="counts")
        aws.dynamodb.update_item(
            TableName=table,
            Key={"songID": {"S": "drifted-song"}, "SK": {"S": MONTH}},
            UpdateExpression="SET DownloadCount = :nine",
            ExpressionAttributeValues={":nine": {"N": "9"}},
        )
        before = aws.dynamodb.get_item(
            TableName=table, Key={"songID": {"S": "drifted-song"}, "SK": {"S": MONTH}}, ConsistentRead=True
        )["Item"]
        # when reconcile --repair runs with --dry-run
        dry = cli("reconcile", "--table", table, "--month", MONTH, "--repair", "--dry-run", "--json", *EMULATOR_MARGIN)
        # then it reports the difference it would repair, exits 3, and the aggregate is exactly as it was
        assert dry.returncode == 3, (dry.returncode, dry.stdout, dry.stderr)
        report = json.loads(dry.stdout)
        assert {d["songID"]: (d["stored"], d["recounted"], d["state"]) for d in report["differences"]} == {
            "drifted-song": (9, 3, "would_repair")
        }, report
        after = aws.dynamodb.get_item(
            TableName=table, Key={"songID": {"S": "drifted-song"}, "SK": {"S": MONTH}}, ConsistentRead=True
        )["Item"]
        assert after == before
        # and the same command without --dry-run repairs it
        repair = cli("reconcile", "--table", table, "--month", MONTH, "--repair", "--json", *EMULATOR_MARGIN)
        assert repair.returncode == 0, (repair.returncode, repair.stdout, repair.stderr)
        assert stored(aws, table, sorted(truth)) == truth


def test_a_repair_while_the_stream_lags_leaves_what_is_in_flight_and_every_count_ends_exact(
    endpoint: Endpoint, aws: Clients
) -> None:
    # given a stack with four leaderboard shards and its count attribute renamed, and counted downloads
    count = "Plays"
    with stack(
        endpoint,
        "repair",
        batch_size=10,
        tumbling_window_in_seconds=5,
        leaderboard_shards=4,
        count_attribute_name=count,
    ) as (_, outputs):
        table, mapping = outputs["table_name"], outputs["aggregator_event_source_mapping_uuid"]
        counted = {"existing-song": 3, "drifted-song": 2, "lost-song": 2}
        write_items(aws.dynamodb, table, [d.as_item() for d in downloads_of(counted, "first")])
        poll_until(
            lambda: stored(aws, table, sorted(counted), count) == counted, timeout=240, interval=3, describe="counts"
        )
        # and drift by hand: one count edited, one aggregate deleted
        aws.dynamodb.update_item(
            TableName=table,
            Key={"songID": {"S": "drifted-song"}, "SK": {"S": MONTH}},
            UpdateExpression="SET #count = :nine",
            ExpressionAttributeNames={"#count": count},
            ExpressionAttributeValues={":nine": {"N": "9"}},
        )
        aws.dynamodb.delete_item(TableName=table, Key={"songID": {"S": "lost-song"}, "SK": {"S": MONTH}})
        # and a stream that lags longer than any settle time: the mapping disabled, downloads written meanwhile
        disable(aws, mapping)
        in_flight = {"existing-song": 2, "new-song": 2}
        write_items(aws.dynamodb, table, [d.as_item() for d in downloads_of(in_flight, "lagging")])
        truth = dict(Counter(counted) + Counter(in_flight))
        # when reconcile --repair runs as docs/operations.md documents it (--table alone)
        began = time.monotonic()
        result = cli("reconcile", "--table", table, "--month", MONTH, "--repair", "--json", *EMULATOR_MARGIN)
        repair_seconds = time.monotonic() - began
        # then it repaired what nothing in flight can change, left the rest pending, and its exit code says so
        assert result.returncode == 4, (result.returncode, result.stdout, result.stderr)
        report = json.loads(result.stdout)
        states = {d["songID"]: d["state"] for d in report["differences"]}
        assert states == {
            "drifted-song": "repaired",
            "lost-song": "repaired",
            "existing-song": "pending",
            "new-song": "pending",
        }, report
        songs = sorted(truth)

        def never_above_the_truth() -> dict[str, int | None]:
            now = stored(aws, table, songs, count)
            assert all((now[song] or 0) <= truth[song] for song in songs), f"over-counted: {now}, truth {truth}"
            return now

        assert never_above_the_truth() == {**truth, "existing-song": 3, "new-song": None}
        lost = aws.dynamodb.get_item(TableName=table, Key={"songID": {"S": "lost-song"}, "SK": {"S": MONTH}})["Item"]
        assert lost["Month"]["S"] == leaderboard_partition(MONTH, "lost-song", 4)
        # when the mapping is enabled again, then every count ends exact, never above the truth at any poll
        aws.lambda_.update_event_source_mapping(UUID=mapping, Enabled=True)
        poll_until(lambda: never_above_the_truth() == truth, timeout=300, interval=3, describe="exact counts")
        # and the query function lists every song with its count (the repaired aggregate in its partition)
        listed = dict(query_all_pages(aws.lambda_, outputs["query_function_name"], MONTH, page_size=10))
        assert listed == truth
        # and a second repair finds nothing left to do
        again = cli("reconcile", "--table", table, "--month", MONTH, "--repair", "--json", *EMULATOR_MARGIN)
        assert again.returncode == 0, again.stdout + again.stderr
        assert json.loads(again.stdout)["differences"] == []
        print(f"reconcile --repair took {repair_seconds:.1f} s")
