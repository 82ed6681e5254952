"""The model's DynamoDB Streams client keeps to the API reference (and to moto where moto implements it).

Each test names the sentence of `aws_delivery.DOCS` it holds the fake to. Adversarial behaviour
(random page sizes, empty pages mid-shard, throttling, late nulls, short DescribeStream pages)
is switched on in the property tests: whatever the fake chooses, a reader that follows the API
reads every record once, in order. The moto test plays the same writes on both with the fake's
adversarial choices off and compares what a reader gets, field by field (items are created by
PutItem there: moto's UpdateItem of a new item emits two INSERT records, where DynamoDB writes one
record per modification).
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime
from itertools import pairwise
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.property_examples import examples
from tests.stream_model.aws_delivery import DOCS, START, StreamOfTable, Written
from tests.stream_model.environment import STREAM_ARN
from tests.stream_model.environment import TABLE as MODEL_TABLE
from tests.stream_model.fake_dynamodb import FakeDynamoDB
from tests.stream_model.fake_streams import FakeStreams, ReadBehaviour
from tests.unit.conftest import create_table

API = botocore.session.get_session().get_service_model("dynamodbstreams")


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def stream_with(
    writes: int, seed: int = 0, behaviour: ReadBehaviour | None = None, songs: int = 1
) -> tuple[StreamOfTable, FakeStreams, Clock]:
    clock = Clock()
    stream = StreamOfTable(random.Random(seed), clock, set())
    for number in range(writes):
        stream.write_download(Written(f"song{number % songs + 1}", f"download-{number:05d}", "2018-01-15T12:30:00Z"))
        clock.now += 1
    streams = FakeStreams(stream, clock, random.Random(seed + 1), behaviour or ReadBehaviour())
    return stream, streams, clock


def read_all(streams: FakeStreams, shard_id: str, kind: str = "TRIM_HORIZON", **extra: Any) -> list[dict[str, Any]]:
    """A reader that follows the API: pages until NextShardIterator is null, retrying throttled reads."""
    iterator = streams.get_shard_iterator(StreamArn=STREAM_ARN, ShardId=shard_id, ShardIteratorType=kind, **extra)
    position: str | None = iterator["ShardIterator"]
    records: list[dict[str, Any]] = []
    throttled = []
    for _ in range(100_000):
        if position is None:
            return records
        try:
            page = streams.get_records(ShardIterator=position, Limit=1000)
        except ClientError as error:
            throttled.append(error.response["Error"]["Code"])
            continue
        records += page["Records"]
        position = page.get("NextShardIterator")
    raise AssertionError(f"no null iterator after 100,000 pages ({len(throttled)} throttled)")


def only_shard(stream: StreamOfTable) -> str:
    (shard_id,) = stream.shards
    return shard_id


ADVERSARIAL = st.builds(
    ReadBehaviour,
    empty_pages=st.sampled_from([0.0, 0.3, 0.7]),
    limit_exceeded=st.sampled_from([0.0, 0.2]),
    max_page=st.sampled_from([1, 3, 1000]),
    null_late=st.sampled_from([0.0, 1.0]),
)


@settings(max_examples=examples(60), deadline=None)
@given(writes=st.integers(1, 40), seed=st.integers(0, 1000), behaviour=ADVERSARIAL)
def test_a_closed_shard_reads_once_in_sequence_order_through_empty_pages_to_a_null_iterator(
    writes: int, seed: int, behaviour: ReadBehaviour
) -> None:
    # given a closed shard, read with every adversarial choice the API leaves open (empty-pages, shard-end)
    assert {"empty-pages", "shard-end"} <= set(DOCS)
    stream, streams, _ = stream_with(writes, seed, behaviour)
    shard = stream.shards[only_shard(stream)]
    stream.reshard(shard, 1, False)
    # when a reader follows NextShardIterator until it is null
    records = read_all(streams, shard.shard_id)
    # then it got every record once, in sequence order
    sequences = [int(record["dynamodb"]["SequenceNumber"]) for record in records]
    assert sequences == [record.sequence for record in shard.records]
    assert sequences == sorted(set(sequences))


@settings(max_examples=examples(30), deadline=None)
@given(writes=st.integers(1, 20), seed=st.integers(0, 1000))
def test_an_open_shard_never_answers_a_null_iterator(writes: int, seed: int) -> None:
    # given an open shard (shard-end: null only once the shard is closed and read to its end)
    stream, streams, _ = stream_with(writes, seed, ReadBehaviour(empty_pages=0.3, limit_exceeded=0.0))
    iterator = streams.get_shard_iterator(
        StreamArn=STREAM_ARN, ShardId=only_shard(stream), ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    # when it is read well past its last record
    for _ in range(writes + 20):
        page = streams.get_records(ShardIterator=iterator, Limit=5)
        # then every page holds at most Limit records and names a next iterator
        assert len(page["Records"]) <= 5
        assert page.get("NextShardIterator")
        iterator = page["NextShardIterator"]


def test_empty_pages_come_in_the_middle_of_a_shard_and_the_reader_still_gets_everything() -> None:
    # given a shard whose reads are mostly empty pages (empty-pages)
    stream, streams, _ = stream_with(30, 3, ReadBehaviour(empty_pages=0.8, limit_exceeded=0.0, max_page=2))
    shard = stream.shards[only_shard(stream)]
    stream.reshard(shard, 1, False)
    iterator = streams.get_shard_iterator(
        StreamArn=STREAM_ARN, ShardId=shard.shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    pages: list[int] = []
    while iterator is not None:
        page = streams.get_records(ShardIterator=iterator)
        pages.append(len(page["Records"]))
        iterator = page.get("NextShardIterator")
    # then empty pages came between records, and all 30 records were read
    first, last = pages.index(next(n for n in pages if n)), max(i for i, n in enumerate(pages) if n)
    assert 0 in pages[first:last]
    assert sum(pages) == 30


@pytest.mark.parametrize("limit", [0, 1001, "10"])
def test_get_records_refuses_a_limit_outside_1_to_1000(limit: Any) -> None:
    stream, streams, _ = stream_with(3)
    iterator = streams.get_shard_iterator(
        StreamArn=STREAM_ARN, ShardId=only_shard(stream), ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    with pytest.raises(ClientError) as raised:
        streams.get_records(ShardIterator=iterator, Limit=limit)
    assert raised.value.response["Error"]["Code"] == "ValidationException"


def test_iterator_types_start_where_the_api_reference_says() -> None:
    # given a shard of ten records, three of them old enough to be trimmed (retention)
    stream, streams, clock = stream_with(10, behaviour=ReadBehaviour.faithful())
    shard = stream.shards[only_shard(stream)]
    stream.reshard(shard, 1, False)
    sequences = [record.sequence for record in shard.records]
    clock.now = shard.records[2].inserted + 24 * 3600 + 0.5

    # when each iterator type is read to the shard's end
    def read(kind: str, sequence: int | None = None) -> list[int]:
        extra = {"SequenceNumber": str(sequence)} if sequence is not None else {}
        return [int(r["dynamodb"]["SequenceNumber"]) for r in read_all(streams, shard.shard_id, kind, **extra)]

    # then TRIM_HORIZON starts at the oldest untrimmed record, AT and AFTER at and after a sequence number,
    # and LATEST after the last record
    assert read("TRIM_HORIZON") == sequences[3:]
    assert read("AT_SEQUENCE_NUMBER", sequences[5]) == sequences[5:]
    assert read("AFTER_SEQUENCE_NUMBER", sequences[5]) == sequences[6:]
    assert read("LATEST") == []
    # and a sequence number older than the trim point is refused (trimmed-access)
    for kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
        with pytest.raises(ClientError) as raised:
            read(kind, sequences[1])
        assert raised.value.response["Error"]["Code"] == "TrimmedDataAccessException"


def test_an_iterator_expires_after_15_minutes_and_a_trimmed_position_cannot_be_read() -> None:
    assert {"iterator-expiry", "trimmed-access"} <= set(DOCS)
    stream, streams, clock = stream_with(5, behaviour=ReadBehaviour.faithful())
    shard_id = only_shard(stream)

    def iterator() -> str:
        return streams.get_shard_iterator(StreamArn=STREAM_ARN, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")[
            "ShardIterator"
        ]

    # given iterators fetched now
    fresh, stale = iterator(), iterator()
    # when 14 minutes pass, one still reads; when 16 have passed, the other has expired
    clock.now += 14 * 60
    assert streams.get_records(ShardIterator=fresh)["Records"]
    clock.now += 2 * 60
    with pytest.raises(ClientError) as expired:
        streams.get_records(ShardIterator=stale)
    assert expired.value.response["Error"]["Code"] == "ExpiredIteratorException"
    # and an iterator at a record that is trimmed before it is used fails with TrimmedDataAccessException
    clock.now = stream.shards[shard_id].records[0].inserted + 24 * 3600 - 60
    early = iterator()
    clock.now += 61
    with pytest.raises(ClientError) as trimmed:
        streams.get_records(ShardIterator=early)
    assert trimmed.value.response["Error"]["Code"] == "TrimmedDataAccessException"


def test_get_records_is_throttled_now_and_then() -> None:
    assert "read-throttling" in DOCS
    stream, streams, _ = stream_with(3, behaviour=ReadBehaviour(limit_exceeded=0.5))
    iterator = streams.get_shard_iterator(
        StreamArn=STREAM_ARN, ShardId=only_shard(stream), ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    codes = []
    for _ in range(40):
        try:
            streams.get_records(ShardIterator=iterator)
            codes.append("ok")
        except ClientError as error:
            codes.append(error.response["Error"]["Code"])
    assert set(codes) == {"ok", "LimitExceededException"}


@settings(max_examples=examples(30), deadline=None)
@given(seed=st.integers(0, 1000), splits=st.lists(st.tuples(st.integers(0, 9), st.sampled_from([1, 2])), max_size=6))
def test_describe_stream_pages_list_every_shard_once_with_its_lineage(seed: int, splits: list[Any]) -> None:
    # given a stream whose shards split and roll over (shards-split), described in short pages (describe-pages)
    stream, streams, _ = stream_with(6, seed, ReadBehaviour(describe_page=2, describe_empty_last=0.5), songs=4)
    for index, children in splits:
        open_shards = [shard for shard in stream.shards.values() if not shard.closed]
        stream.reshard(open_shards[index % len(open_shards)], children, lower=bool(index % 2))
    # when a reader pages with ExclusiveStartShardId until LastEvaluatedShardId is absent
    described: list[dict[str, Any]] = []
    start: str | None = None
    while True:
        extra = {"ExclusiveStartShardId": start} if start else {}
        description = streams.describe_stream(StreamArn=STREAM_ARN, **extra)["StreamDescription"]
        described += description["Shards"]
        start = description.get("LastEvaluatedShardId")
        if not start:
            break
    # then every shard is listed once, with its parent, and an ending sequence number exactly when closed
    assert [shard["ShardId"] for shard in described] == list(stream.shards)
    for entry in described:
        shard = stream.shards[entry["ShardId"]]
        assert entry.get("ParentShardId") == shard.parent_id
        assert ("EndingSequenceNumber" in entry["SequenceNumberRange"]) == shard.closed
        assert set(entry) <= set(API.shape_for("Shard").members)


def test_records_come_as_boto3_returns_them() -> None:
    # given a closed shard read through the fake
    stream, streams, _ = stream_with(3, behaviour=ReadBehaviour.faithful())
    stream.reshard(stream.shards[only_shard(stream)], 1, False)
    (record, *_) = read_all(streams, stream.shards.__iter__().__next__())
    # then its fields are those of the API's Record and StreamRecord, the creation time a datetime,
    # and there is no eventSourceARN (that is the event source mapping's addition)
    assert set(record) <= set(API.shape_for("Record").members)
    assert set(record["dynamodb"]) <= set(API.shape_for("StreamRecord").members)
    assert "eventSourceARN" not in record
    assert isinstance(record["dynamodb"]["ApproximateCreationDateTime"], datetime)


def write_all(client: Any, writes: list[tuple[str, str, int]]) -> None:
    """New items by PutItem, changes by UpdateItem (moto's UpdateItem of a new item emits two INSERTs)."""
    seen: set[tuple[str, str]] = set()
    for song, key, value in writes:
        if (song, key) not in seen:
            seen.add((song, key))
            client.put_item(
                TableName=MODEL_TABLE,
                Item={"songID": {"S": song}, "SK": {"S": key}, "Plays": {"N": str(value)}},
            )
            continue
        client.update_item(
            TableName=MODEL_TABLE,
            Key={"songID": {"S": song}, "SK": {"S": key}},
            UpdateExpression="SET Plays = :value",
            ExpressionAttributeValues={":value": {"N": str(value)}},
        )


def moto_reads(writes: list[tuple[str, str, int]]) -> list[dict[str, Any]]:
    client = create_table(MODEL_TABLE, fresh=True)
    write_all(client, writes)
    arn = client.describe_table(TableName=MODEL_TABLE)["Table"]["LatestStreamArn"]
    moto_streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    (shard,) = moto_streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    first = moto_streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
    iterator = first["ShardIterator"]
    records: list[dict[str, Any]] = []
    while True:
        page = moto_streams.get_records(ShardIterator=iterator, Limit=1000)
        if not page["Records"]:
            return records
        records += page["Records"]
        iterator = page["NextShardIterator"]


def fake_reads(writes: list[tuple[str, str, int]]) -> list[dict[str, Any]]:
    clock = Clock()
    stream = StreamOfTable(random.Random(0), clock, set())
    write_all(FakeDynamoDB(on_change=stream.on_table_change), writes)
    streams = FakeStreams(stream, clock, random.Random(1), ReadBehaviour.faithful())
    shard_id = only_shard(stream)
    stream.reshard(stream.shards[shard_id], 1, False)
    return read_all(streams, shard_id)


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    writes=st.lists(
        st.tuples(st.just("song1"), st.sampled_from(["a", "b", "c"]), st.integers(0, 9)), min_size=1, max_size=8
    )
)
def test_the_fake_reads_what_moto_reads_for_the_same_writes(aws: None, writes: list[tuple[str, str, int]]) -> None:
    # given the same item writes (PutItem, then UpdateItem) on moto (one shard) and on the fake (faithful reads)
    on_moto, on_fake = moto_reads(writes), fake_reads(writes)
    # then both streams hold the same changes, in order, with the same fields and field types
    assert len(on_fake) == len(on_moto)
    for mine, theirs in zip(on_fake, on_moto, strict=True):
        assert set(mine) == set(theirs)
        assert set(mine["dynamodb"]) == set(theirs["dynamodb"])
        for field in ("eventName", "eventSource", "awsRegion"):
            assert mine[field] == theirs[field]
        for field in ("Keys", "NewImage", "StreamViewType"):
            assert mine["dynamodb"][field] == theirs["dynamodb"][field]
        for field in ("ApproximateCreationDateTime", "SequenceNumber", "SizeBytes"):
            assert type(mine["dynamodb"][field]) is type(theirs["dynamodb"][field])
    sequences = [int(record["dynamodb"]["SequenceNumber"]) for record in on_fake]
    assert sequences == sorted(set(sequences))


def test_edits_and_deletions_come_with_both_images_and_ttls_identity_as_boto3_returns_them() -> None:
    # given a stream with both images (images): a download written, edited, then deleted; another expired by TTL
    clock = Clock()
    stream = StreamOfTable(random.Random(0), clock, set(), retractions=True)
    first = Written("song1", "download-1", "2018-01-15T12:30:00Z")
    second = Written("song1", "download-2", "2018-02-15T12:30:00Z")
    edited = replace(first, timestamp="2018-03-01T00:30:00Z")
    stream.write_download(first)
    stream.write_download(second)
    stream.modify_download(first, edited)
    stream.remove_download(edited, by_ttl=False)
    stream.remove_download(second, by_ttl=True)
    shard_id = only_shard(stream)
    stream.reshard(stream.shards[shard_id], 1, False)
    streams = FakeStreams(stream, clock, random.Random(1), ReadBehaviour.faithful())
    # when the shard is read through the fake
    records = read_all(streams, shard_id)
    # then (event-names) the MODIFY carries the old and the new image, each REMOVE the old one only, every field is
    # one of the API's; TTL's REMOVE names the service in userIdentity by the API's Identity members (ttl-identity),
    # as boto3's model of the API spells them, and the application's names nobody
    assert [record["eventName"] for record in records] == ["INSERT", "INSERT", "MODIFY", "REMOVE", "REMOVE"]
    modified, removed, expired = records[2:]
    assert modified["dynamodb"]["OldImage"]["Timestamp"] == {"S": "2018-01-15T12:30:00Z"}
    assert modified["dynamodb"]["NewImage"]["Timestamp"] == {"S": "2018-03-01T00:30:00Z"}
    assert removed["dynamodb"]["OldImage"]["Timestamp"] == {"S": "2018-03-01T00:30:00Z"}
    assert "NewImage" not in removed["dynamodb"]
    assert "NewImage" not in expired["dynamodb"]
    assert "userIdentity" not in removed
    assert expired["userIdentity"] == {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}
    assert set(expired["userIdentity"]) == set(API.shape_for("Identity").members)
    for record in records:
        assert set(record) <= set(API.shape_for("Record").members)
        assert set(record["dynamodb"]) <= set(API.shape_for("StreamRecord").members)
        assert record["dynamodb"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    # and the mapping hands the expiry over as the Developer Guide's JSON shows it
    lambda_form = stream.shards[shard_id].records[-1].lambda_form()
    assert lambda_form["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    assert "ttl-identity" in DOCS
    assert "images" in DOCS


def _descends(stream: StreamOfTable, shard_id: str, ancestor_id: str) -> bool:
    shard = stream.shards[shard_id]
    while shard.parent_id is not None:
        if shard.parent_id == ancestor_id:
            return True
        shard = stream.shards[shard.parent_id]
    return False


@settings(max_examples=examples(25), deadline=None)
@given(
    seed=st.integers(0, 1000),
    changes=st.lists(st.sampled_from(["split", "rollover", "heat"]), min_size=1, max_size=4),
)
def test_every_record_of_an_item_lies_down_the_lineage_of_the_one_before_it(seed: int, changes: list[str]) -> None:
    # given items of three songs written to a stream, the last one into a shard its key does not hash to (as the
    # application writes on after a paused mapping), and between edits of every item the shards split, roll over or
    # split for heat
    clock = Clock()
    stream = StreamOfTable(random.Random(seed), clock, set(), retractions=True)
    items = [Written(f"song{number % 3 + 1}", f"download-{number}", "2018-01-15T12:30:00Z") for number in range(6)]
    written = {item.key: [stream.write_download(item)] for item in items[:-1]}
    elsewhere = next(partition for partition in ("p0", "p1") if partition != stream.route(*items[-1].key))
    written[items[-1].key] = [stream.write_download(items[-1], into=stream.shard_of(elsewhere))]
    current = {item.key: item for item in items}
    for step, change in enumerate(changes):
        open_shards = [shard for shard in stream.shards.values() if not shard.closed]
        if change == "heat":
            stream.heat("song1")
        else:
            stream.reshard(open_shards[step % len(open_shards)], 2 if change == "split" else 1, lower=step % 2 == 1)
        for key, item in current.items():
            edited = replace(item, user=f"user{step + 2}")
            written[key].append(stream.modify_download(item, edited))
            current[key] = edited
    for key, item in current.items():
        written[key].append(stream.remove_download(item, by_ttl=False))
    # then (per-item-order, parent-before-child) each record of an item is in the shard of the one before it, later
    # in it, or in a descendant of that shard: a reader of the lineage meets them in the order they were written
    for records in written.values():
        for before, after in pairwise(records):
            same = after.shard_id == before.shard_id and after.sequence > before.sequence
            assert same or _descends(stream, after.shard_id, before.shard_id), (before, after)
