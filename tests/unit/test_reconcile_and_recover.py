"""Reconcile and recover on moto: differences found, exactly those repaired, nothing raced, TTL respected."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from leaderboard_tools.leaderboard_layout import AttributeNames, order_of
from leaderboard_tools.reconcile import Reconciler, ReconcileRefused
from leaderboard_tools.recover import recover
from tests.unit.conftest import TABLE, count_of

MONTH = "2018-03"
NOW = 1_900_000_000.0


def download(dynamodb: Any, song: str, number: int, timestamp: str = "2018-03-10T10:00:00Z", **extra: Any) -> None:
    item = {"songID": {"S": song}, "SK": {"S": f"d{number:04d}"}, "Timestamp": {"S": timestamp}, **extra}
    dynamodb.put_item(TableName=TABLE, Item=item)


def aggregate(dynamodb: Any, song: str, count: int, watermark: str = "0" * 39 + "1|1|label") -> None:
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": song},
            "SK": {"S": MONTH},
            "Month": {"S": MONTH},
            "DownloadCount": {"N": str(count)},
            "LeaderboardOrder": {"N": str(order_of(count, song))},
            "Watermark_AAAA": {"S": watermark},
        },
    )


def reconciler(dynamodb: Any, **overrides: Any) -> Reconciler:
    settings: dict[str, Any] = {"settle_seconds": 0, "sleep": lambda seconds: None, "clock": lambda: NOW}
    return Reconciler(dynamodb, TABLE, **(settings | overrides))


@pytest.fixture
def month(dynamodb: Any) -> Any:
    """song1: 3 downloads, counted 3; song2: 2 downloads, counted 5 (edited by hand); song3: 4 downloads, counted 1."""
    number = 0
    for song, downloads in (("song1", 3), ("song2", 2), ("song3", 4)):
        for _ in range(downloads):
            number += 1
            download(dynamodb, song, number)
    download(dynamodb, "song1", 99, timestamp="2018-02-28T23:30:00-05:00")  # March in UTC
    download(dynamodb, "song1", 98, timestamp="2018-04-01T00:30:00Z")  # April
    download(dynamodb, "song4", 97, timestamp="not a date")  # never countable
    aggregate(dynamodb, "song1", 4)
    aggregate(dynamodb, "song2", 5)
    aggregate(dynamodb, "song3", 1)
    return dynamodb


def test_reconcile_reports_exactly_the_differences(month: Any) -> None:
    report = reconciler(month).run(MONTH)
    assert report.as_json() == {
        "month": MONTH,
        "differences": [
            {"songID": "song2", "stored": 5, "recounted": 2, "repaired": False},
            {"songID": "song3", "stored": 1, "recounted": 4, "repaired": False},
        ],
        "repaired": False,
    }
    assert count_of(month, "song2", MONTH) == 5


def test_repair_fixes_exactly_those_and_a_second_run_finds_nothing(month: Any) -> None:
    # when the differences are repaired
    report = reconciler(month).run(MONTH, repair=True)
    # then song2 and song3 hold their recounts, with their index order, and the watermark untouched
    assert report.repaired
    assert [(count_of(month, song, MONTH)) for song in ("song1", "song2", "song3")] == [4, 2, 4]
    item = month.get_item(TableName=TABLE, Key={"songID": {"S": "song3"}, "SK": {"S": MONTH}})["Item"]
    assert item["LeaderboardOrder"] == {"N": str(order_of(4, "song3"))}
    assert item["Watermark_AAAA"] == {"S": "0" * 39 + "1|1|label"}
    # and a second run reports no difference
    assert reconciler(month).run(MONTH, repair=True).differences == []


def test_a_few_songs_are_recounted_from_their_partitions_only(month: Any) -> None:
    report = reconciler(month).run(MONTH, ["song3"], repair=True)
    assert [(d.entity_id, d.recounted, d.repaired) for d in report.differences] == [("song3", 4, True)]
    assert count_of(month, "song2", MONTH) == 5


def test_an_aggregate_the_aggregator_writes_meanwhile_is_left_for_the_next_run(month: Any) -> None:
    # given the aggregator moving song3's watermark and count while reconcile waits for it to settle
    def aggregator_writes(seconds: float) -> None:
        aggregate(month, "song3", 2, watermark="0" * 39 + "2|2|label")

    report = reconciler(month, sleep=aggregator_writes).run(MONTH, repair=True)
    # then song3 is reported live and not touched; song2, settled, is repaired
    reasons = {d.entity_id: (d.repaired, d.reason) for d in report.differences}
    assert reasons["song2"] == (True, None)
    assert reasons["song3"][0] is False
    assert "live" in reasons["song3"][1]
    assert count_of(month, "song3", MONTH) == 2
    assert not report.repaired


def enable_ttl(dynamodb: Any) -> None:
    dynamodb.update_time_to_live(
        TableName=TABLE, TimeToLiveSpecification={"Enabled": True, "AttributeName": "ExpiresAt"}
    )


def test_with_ttl_a_month_with_an_expired_download_is_refused(month: Any) -> None:
    enable_ttl(month)
    download(month, "song1", 50, ExpiresAt={"N": str(int(NOW) - 10)})
    with pytest.raises(ReconcileRefused, match="expired"):
        reconciler(month).run(MONTH, repair=True)
    assert count_of(month, "song2", MONTH) == 5


def test_with_ttl_no_count_is_repaired_downwards(month: Any) -> None:
    enable_ttl(month)
    report = reconciler(month).run(MONTH, repair=True)
    outcome = {d.entity_id: (d.repaired, d.reason) for d in report.differences}
    assert outcome["song3"] == (True, None)
    assert outcome["song2"][0] is False
    assert "TTL" in outcome["song2"][1]
    assert count_of(month, "song2", MONTH) == 5


def test_a_missing_aggregate_is_created_from_the_recount(dynamodb: Any) -> None:
    download(dynamodb, "lost-song", 1)
    download(dynamodb, "lost-song", 2)
    report = reconciler(dynamodb, leaderboard_shards=4).run(MONTH, repair=True)
    assert [(d.entity_id, d.stored, d.recounted, d.repaired) for d in report.differences] == [("lost-song", 0, 2, True)]
    item = dynamodb.get_item(TableName=TABLE, Key={"songID": {"S": "lost-song"}, "SK": {"S": MONTH}})["Item"]
    assert item["Month"]["S"].startswith(f"{MONTH}#")


def test_recover_recounts_what_the_failure_queue_names_and_deletes_it(month: Any, sqs_queue: tuple[Any, str]) -> None:
    sqs, queue_url = sqs_queue
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    description = month.describe_table(TableName=TABLE)["Table"]
    stream_arn = description["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    song3 = [r for r in records if r["dynamodb"].get("NewImage", {}).get("songID", {}).get("S") == "song3"]
    # given the mapping's failure record for a batch of song3's downloads, and a malformed download's message
    failure = {
        "requestContext": {"condition": "RetryAttemptsExhausted"},
        "DDBStreamBatchInfo": {
            "shardId": shard,
            "streamArn": stream_arn,
            "startSequenceNumber": song3[0]["dynamodb"]["SequenceNumber"],
            "endSequenceNumber": song3[-1]["dynamodb"]["SequenceNumber"],
            "approximateArrivalOfFirstRecord": "2018-03-10T10:00:00Z",
            "approximateArrivalOfLastRecord": "2018-03-10T10:00:00Z",
            "batchSize": len(song3),
        },
    }
    rejected = {"kind": "rejected_download", "reason": "Timestamp is not ISO 8601", "sequenceNumber": "7", "record": {}}
    for body in (failure, rejected):
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(body))
    # when recover runs
    report = recover(sqs, streams, reconciler(month), queue_url, AttributeNames())
    # then song3 (and only the aggregates of that batch) is recounted and repaired, and both messages are gone
    assert count_of(month, "song3", MONTH) == 4
    assert count_of(month, "song2", MONTH) == 5
    assert (report.messages, report.deleted, report.kept) == (2, 2, [])
    assert report.rejected_downloads == [{"reason": "Timestamp is not ISO 8601", "sequenceNumber": "7"}]
    # and a second run finds nothing to do
    again = recover(sqs, streams, reconciler(month), queue_url, AttributeNames())
    assert (again.messages, again.deleted) == (0, 0)


def test_a_batch_no_longer_in_the_stream_recounts_its_whole_months(month: Any, sqs_queue: tuple[Any, str]) -> None:
    sqs, queue_url = sqs_queue
    failure = {
        "DDBStreamBatchInfo": {
            "shardId": "shardId-00000000000000000000-gone0000",
            "streamArn": "arn:aws:dynamodb:us-east-1:123456789012:table/deleted-table/stream/2000-01-01T00:00:00.000",
            "startSequenceNumber": "100000000000000000001",
            "endSequenceNumber": "100000000000000000009",
            "approximateArrivalOfFirstRecord": "2018-03-20T10:00:00Z",
            "approximateArrivalOfLastRecord": "2018-03-20T11:00:00Z",
            "batchSize": 9,
        }
    }
    sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(failure))
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    report = recover(sqs, streams, reconciler(month), queue_url, AttributeNames())
    assert (count_of(month, "song2", MONTH), count_of(month, "song3", MONTH)) == (2, 4)
    assert report.deleted == 1
