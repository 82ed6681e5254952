"""Retention: downloads that expire through the table's TTL leave every count as it was.

DynamoDB deletes an expired item and writes a REMOVE record to the stream, whose userIdentity says
TTL deleted it: the mapping's filter never passes it, and the aggregator, which reads its shard
itself, skips it (with `retractions` too: an expiry is not a deletion). The test expires downloads, finds their
REMOVE records in the stream, then writes one more download and waits until it is counted: the
shard is delivered in order, so by then every REMOVE before it has gone past the mapping.

Both emulators answer LocalStack's developer endpoint `DELETE /_aws/dynamodb/expired`, which deletes expired
items now, each deletion a REMOVE in the stream with TTL's userIdentity. LocalStack deletes them with BatchWriteItem
through DynamoDB Local (its own worker does the same hourly when DYNAMODB_REMOVE_EXPIRED_ITEMS is set), and the
project's hook stamps their records (leaderboard_dev/emulators/ttl_expiry.py). MiniStack 1.5.33's reaper deletes
expired items once a minute without a stream record; the project's launcher sends its deletions, and the endpoint's,
down DeleteItem's path with TTL's userIdentity (leaderboard_dev/emulators/ministack_ttl.py). The reaper may delete
some before the endpoint does: the endpoint counts only the rest, and every expired download is checked for its REMOVE.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections import Counter
from typing import Any

import pytest

from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import index_ranking, poll_until, wait_until_totals
from leaderboard_dev.loadgen import Download, write_items
from leaderboard_dev.observe import log_lines
from leaderboard_dev.settings import Endpoint
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from tests.acceptance.conftest import shard_ids, stack

TTL_ATTRIBUTE = "ExpiresAt"
MONTH = "2018-06"


def download(song: str, number: int, expires_at: int | None) -> dict[str, Any]:
    item = Download(song, f"download-{number:03d}", "user1", f"{MONTH}-{number % 28 + 1:02d}T10:00:00Z").as_item()
    if expires_at is not None:
        item[TTL_ATTRIBUTE] = {"N": str(expires_at)}
    return item


def removed_keys(aws: Clients, stream_arn: str) -> set[tuple[str, str]]:
    """Keys of every REMOVE record in the stream, read from the start of each shard to its current end."""
    removed: set[tuple[str, str]] = set()
    for shard_id in shard_ids(aws, stream_arn):
        iterator = aws.dynamodbstreams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        for _ in range(1000):
            page = aws.dynamodbstreams.get_records(ShardIterator=iterator, Limit=1000)
            for record in page["Records"]:
                if record["eventName"] == "REMOVE":
                    keys = record["dynamodb"]["Keys"]
                    removed.add((keys["songID"]["S"], keys["SK"]["S"]))
            iterator = page.get("NextShardIterator")
            if not page["Records"] or iterator is None:
                break
    return removed


def expire_now(endpoint: Endpoint) -> int:
    """The developer endpoint of LocalStack (and of the project's MiniStack): delete expired items now; how many."""
    request = urllib.request.Request(f"{endpoint.url}/_aws/dynamodb/expired", method="DELETE")
    with urllib.request.urlopen(request, timeout=60) as response:
        expired: int = json.loads(response.read())["ExpiredItems"]
    return expired


@pytest.mark.parametrize("retractions", [False, True], ids=["inserts only", "retractions"])
def test_expired_downloads_are_deleted_and_leave_the_counts_unchanged(
    endpoint: Endpoint, aws: Clients, retractions: bool
) -> None:
    # given a stack whose downloads expire on their ExpiresAt attribute (with retractions: deletions are followed,
    # but an expiry is not a deletion: its REMOVE carries TTL's userIdentity)
    variables = {"batch_size": 10, "download_ttl_attribute_name": TTL_ATTRIBUTE, "retractions": retractions}
    with stack(endpoint, "ttl", **variables) as (_, outputs):
        table = outputs["table_name"]
        setting = aws.dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
        assert (setting["TimeToLiveStatus"], setting.get("AttributeName")) == ("ENABLED", TTL_ATTRIBUTE)
        # and the reconcile tool finds the same attribute (DescribeTimeToLive), so it bounds its repairs by it
        clients = operator_clients(region=endpoint.region, endpoint_url=endpoint.url)
        assert discover(clients, table).ttl_attribute == TTL_ATTRIBUTE
        # and downloads already counted: some past their expiry, some expiring in a day, some without expiry
        past, future = int(time.time()) - 3600, int(time.time()) + 86_400
        expiring = [download("fading", number, past) for number in range(6)]
        expiring += [download("steady", number, past) for number in range(6, 8)]
        lasting = [download("fading", number, future) for number in range(8, 10)]
        lasting += [download("steady", number, None) for number in range(10, 15)]
        write_items(aws.dynamodb, table, expiring + lasting)
        index = outputs["leaderboard_index_name"]
        wait_until_totals(aws.dynamodb, table, index, {MONTH: 15}, timeout=240)
        assert index_ranking(aws.dynamodb, table, index, MONTH) == [("fading", 8), ("steady", 7)]

        # when DynamoDB deletes the expired downloads (those its background sweep has not deleted yet, now)
        assert expire_now(endpoint) <= len(expiring)

        def expired_gone() -> bool:
            return all(
                "Item" not in aws.dynamodb.get_item(TableName=table, Key=key_of(item), ConsistentRead=True)
                for item in expiring
            )

        poll_until(expired_gone, timeout=60, interval=2, describe="the expired downloads deleted")
        # then each deletion is a REMOVE record in the stream, and the others are still there
        expired_keys = {(item["songID"]["S"], item["SK"]["S"]) for item in expiring}
        poll_until(
            lambda: expired_keys <= removed_keys(aws, outputs["table_stream_arn"]),
            timeout=60,
            interval=2,
            describe="a REMOVE record per expired download",
        )
        assert all("Item" in aws.dynamodb.get_item(TableName=table, Key=key_of(item)) for item in lasting)
        # and once a later download is counted (the REMOVEs came before it in the shard), no count has moved
        aws.dynamodb.put_item(TableName=table, Item=download("steady", 15, None))
        wait_until_totals(aws.dynamodb, table, index, {MONTH: 16}, timeout=240)
        assert index_ranking(aws.dynamodb, table, index, MONTH) == [("fading", 8), ("steady", 8)]
        # and no REMOVE was counted or reported (nothing queued)
        summaries = poll_until(
            lambda: (
                (lines := batch_summaries(aws, outputs["aggregator_log_group_name"]))
                and sum(line["downloads"] for line in lines) >= 16
                and lines
            ),
            timeout=60,
            interval=2,
            describe="batch summaries of all 16 downloads in the log",
        )
        # (the aggregator reads its shard itself: it skips the REMOVEs, MODIFYs and aggregate items it finds there)
        skipped = set(Counter(reason for line in summaries for reason in line.get("ignored") or {}))
        if retractions:
            # (with retractions it read each expiry's REMOVE and knew it for TTL's)
            assert "expired by TTL: an expiry never changes a count" in skipped
            assert skipped <= {"aggregate item", "expired by TTL: an expiry never changes a count"}
        else:
            assert skipped <= {
                "aggregate item",
                "eventName 'MODIFY' is not a new download",
                "eventName 'REMOVE' is not a new download",
            }
        queued = aws.sqs.receive_message(QueueUrl=outputs["failure_queue_url"], WaitTimeSeconds=1).get("Messages", [])
        assert queued == []


def key_of(item: dict[str, Any]) -> dict[str, Any]:
    return {"songID": item["songID"], "SK": item["SK"]}


def batch_summaries(aws: Clients, log_group: str) -> list[dict[str, Any]]:
    return [line for line in log_lines(aws, log_group) if line.get("message") == "batch summary"]
