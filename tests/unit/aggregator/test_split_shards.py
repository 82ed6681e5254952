"""A shard's parent, closed, drained to its end before the shard's own records are counted: on moto's table, with a
stream client that presents moto's one shard as a closed parent, and a child holding the deletion of its download.
"""

from __future__ import annotations

import copy
import dataclasses
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.exceptions import ClientError

from delivery import ShardRef
from described_shard import ShardFacts
from shard_reader import EMPTY_PAGES_AT_THE_TIP, MAX_EMPTY_PAGES, read_shard
from stream_description import described_ending
from tests.unit.aggregator.handler_on_moto import Deployed
from tests.unit.conftest import FakeLambdaContext, count_of
from two_readers import AggregatesNotWritten

CHILD = "shardId-00000002000000000000-c0ffee00"


class SplitStream:
    """moto's shard closed after its one download (DescribeStream gives it an EndingSequenceNumber), `empty` empty pages
    before it, and a child shard that holds the download's REMOVE.

    AWS, *DescribeStream*: "If both StartingSequenceNumber and EndingSequenceNumber are present, then that shard is
    closed and can no longer receive more data." *GetRecords*: "it might take multiple calls to get to a portion of the
    shard that contains stream records"; *NextShardIterator*: "If set to null, the shard has been closed and the
    requested iterator will not return any more data."
    """

    def __init__(self, streams: Any, parent: str, download: dict[str, Any], empty: int) -> None:
        self._streams = streams
        self.parent = parent
        self.end = download["dynamodb"]["SequenceNumber"]
        self.empty = empty
        removal = copy.deepcopy(download)
        removal["eventName"] = "REMOVE"
        removal["dynamodb"]["OldImage"] = removal["dynamodb"].pop("NewImage")
        removal["dynamodb"]["StreamViewType"] = "NEW_AND_OLD_IMAGES"
        removal["dynamodb"]["SequenceNumber"] = str(int(self.end) + 1000)
        self.removal = removal

    def describe_stream(self, **parameters: Any) -> Any:
        description = self._streams.describe_stream(StreamArn=parameters["StreamArn"])["StreamDescription"]
        closed = {"StartingSequenceNumber": self.end, "EndingSequenceNumber": self.end}
        child = {"StartingSequenceNumber": self.removal["dynamodb"]["SequenceNumber"]}
        description["Shards"] = [
            {"ShardId": self.parent, "SequenceNumberRange": closed},
            {"ShardId": CHILD, "ParentShardId": self.parent, "SequenceNumberRange": child},
        ]
        description.pop("LastEvaluatedShardId", None)
        return {"StreamDescription": description}

    def get_shard_iterator(self, **parameters: Any) -> Any:
        if parameters["ShardId"] == CHILD:
            passed = parameters["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER"
            return {"ShardIterator": f"child|{1 if passed else 0}"}
        answer = self._streams.get_shard_iterator(**parameters)
        return {"ShardIterator": f"parent|{self.empty}|{answer['ShardIterator']}"}

    def get_records(self, **parameters: Any) -> Any:
        iterator = parameters["ShardIterator"]
        if iterator.startswith("child|"):
            return {"Records": [self.removal][int(iterator.split("|")[1]) :], "NextShardIterator": "child|1"}
        _, left, real = iterator.split("|", 2)
        if int(left) > 0:
            return {"Records": [], "NextShardIterator": f"parent|{int(left) - 1}|{real}"}
        page = self._streams.get_records(**{**parameters, "ShardIterator": real})
        return {"Records": [r for r in page["Records"] if int(r["dynamodb"]["SequenceNumber"]) <= int(self.end)]}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams, name)


def _as_delivered(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """As a Lambda event carries it: its ARN named, its creation time a number."""
    created = record["dynamodb"]["ApproximateCreationDateTime"].timestamp()
    return {
        **record,
        "dynamodb": {**record["dynamodb"], "ApproximateCreationDateTime": created},
        "eventSourceARN": stream_arn,
    }


def test_a_closed_parent_is_read_past_a_run_of_empty_pages_before_its_childs_deletion_is_counted(
    deployed: Deployed, lambda_context: Any
) -> None:
    # given a download in a parent shard DescribeStream calls closed, behind more empty pages than an open shard's tip
    deployed.with_schema(retractions=True)
    deployed.write("song1", 1)
    iterator = deployed.streams.get_shard_iterator(
        StreamArn=deployed.stream_arn, ShardId=deployed.shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    download = deployed.streams.get_records(ShardIterator=iterator)["Records"][0]
    split = SplitStream(deployed.streams, deployed.shard_id, download, empty=EMPTY_PAGES_AT_THE_TIP + 1)
    deployed.use_streams(split)
    # when the mapping delivers the child's first window: the download's deletion
    event = deployed.window_event([_as_delivered(split.removal, deployed.stream_arn)], final=True)
    deployed.invoke({**event, "shardId": CHILD}, lambda_context)
    # then the parent's download was counted first: the count is back at 0 and no retraction is reported as uncounted
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 0
    assert [message["kind"] for message in deployed.failure_messages()] == []


def test_a_parent_this_instance_last_saw_open_is_described_again_and_read_to_its_end(
    deployed: Deployed, lambda_context: Any
) -> None:
    # given a download behind empty pages in a parent this function instance listed while it was still open (its
    # child listed already), and lineages swept since (the next sweep, which lists every shard anew, not yet due)
    deployed.with_schema(retractions=True)
    deployed.write("song1", 1)
    iterator = deployed.streams.get_shard_iterator(
        StreamArn=deployed.stream_arn, ShardId=deployed.shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    download = deployed.streams.get_records(ShardIterator=iterator)["Records"][0]
    split = SplitStream(deployed.streams, deployed.shard_id, download, empty=EMPTY_PAGES_AT_THE_TIP + 1)
    deployed.use_streams(split)
    listed = deployed.dependencies.shards
    listed[deployed.shard_id] = ShardFacts(None, download["dynamodb"]["SequenceNumber"])
    listed[CHILD] = ShardFacts(deployed.shard_id, split.removal["dynamodb"]["SequenceNumber"])
    deployed.dependencies.lineages_swept_at = deployed.dependencies.clock()
    # when, the parent closed since, the mapping delivers its child's first window: the download's deletion
    event = deployed.window_event([_as_delivered(split.removal, deployed.stream_arn)], final=True)
    deployed.invoke({**event, "shardId": CHILD}, lambda_context)
    # then the parent was read to its end first: the count is back at 0 and nothing is reported
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 0
    assert [message["kind"] for message in deployed.failure_messages()] == []


PAGE_SECONDS = 0.03
"""A GetRecords call's latency on the virtual clock: DynamoDB Streams answers in tens of milliseconds."""


class Clock:
    def __init__(self) -> None:
        self.now = 0.0


class VirtualContext(FakeLambdaContext):
    """Lambda's remaining time on the virtual clock: only the stream's calls take time."""

    def __init__(self, clock: Clock, remaining_ms: int = 60_000) -> None:
        super().__init__(remaining_ms)
        self._clock = clock
        self._ends = clock.now + remaining_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, round((self._ends - self._clock.now) * 1000))


class TailStream:
    """moto's shard closed after its one download, `tail` empty pages after it before the null NextShardIterator,
    and a child that holds the download's REMOVE; each GetRecords takes PAGE_SECONDS on a virtual clock.

    AWS allows the tail: *GetRecords*: "If there are no stream records available in the portion of the shard that the
    iterator points to, GetRecords returns an empty list. Note that it might take multiple calls to get to a portion of
    the shard that contains stream records." Nothing bounds those calls; the end is told by "NextShardIterator ... If
    set to null, the shard has been closed", and by DescribeStream's EndingSequenceNumber, "The last sequence number
    for the stream records contained within a shard" (`ending`: that record, or, past it, a number no read meets).
    """

    def __init__(
        self, streams: Any, parent: str, download: dict[str, Any], tail: int, clock: Clock, past_the_end: bool
    ) -> None:
        self._streams = streams
        self.parent = parent
        self.download = download
        self.end = download["dynamodb"]["SequenceNumber"]
        self.ending = str(int(self.end) + 1) if past_the_end else self.end
        self.tail = tail
        self.clock = clock
        self.parent_pages = 0
        self.described = 0
        removal = copy.deepcopy(download)
        removal["eventName"] = "REMOVE"
        removal["dynamodb"]["OldImage"] = removal["dynamodb"].pop("NewImage")
        removal["dynamodb"]["StreamViewType"] = "NEW_AND_OLD_IMAGES"
        removal["dynamodb"]["SequenceNumber"] = str(int(self.end) + 1000)
        self.removal = removal

    def describe_stream(self, **parameters: Any) -> Any:
        self.described += 1
        description = self._streams.describe_stream(StreamArn=parameters["StreamArn"])["StreamDescription"]
        closed = {"StartingSequenceNumber": self.end, "EndingSequenceNumber": self.ending}
        child = {"StartingSequenceNumber": self.removal["dynamodb"]["SequenceNumber"]}
        description["Shards"] = [
            {"ShardId": self.parent, "SequenceNumberRange": closed},
            {"ShardId": CHILD, "ParentShardId": self.parent, "SequenceNumberRange": child},
        ]
        description.pop("LastEvaluatedShardId", None)
        return {"StreamDescription": description}

    def get_shard_iterator(self, **parameters: Any) -> Any:
        if parameters["ShardId"] == CHILD:
            passed = parameters["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER"
            return {"ShardIterator": f"child|{1 if passed else 0}"}
        if parameters["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER":
            return {"ShardIterator": f"tail|{self.tail}"}
        return {"ShardIterator": "parent|head"}

    def get_records(self, **parameters: Any) -> Any:
        self.clock.now += PAGE_SECONDS
        iterator = parameters["ShardIterator"]
        if iterator.startswith("child|"):
            return {"Records": [self.removal][int(iterator.split("|")[1]) :], "NextShardIterator": "child|1"}
        self.parent_pages += 1
        if iterator == "parent|head":
            return {"Records": [self.download], "NextShardIterator": f"tail|{self.tail}"}
        left = int(iterator.split("|")[1])
        if left > 0:
            return {"Records": [], "NextShardIterator": f"tail|{left - 1}"}
        return {"Records": []}  # NextShardIterator null: the closed shard's end

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams, name)


class DescribeRefused(TailStream):
    """DescribeStream refused (LimitExceededException: "You can call DescribeStream at a maximum rate of 10 times per
    second", after the SDK's own retries); GetRecords answers as ever."""

    def describe_stream(self, **parameters: Any) -> Any:
        raise ClientError({"Error": {"Code": "LimitExceededException", "Message": "Rate exceeded"}}, "DescribeStream")


def _split(deployed: Deployed, tail: int, clock: Clock, past_the_end: bool = False) -> TailStream:
    deployed.with_schema(retractions=True)
    deployed.write("song1", 1)
    iterator = deployed.streams.get_shard_iterator(
        StreamArn=deployed.stream_arn, ShardId=deployed.shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    download = deployed.streams.get_records(ShardIterator=iterator)["Records"][0]
    split = TailStream(deployed.streams, deployed.shard_id, download, tail, clock, past_the_end)
    deployed.use_streams(split)
    return split


ENDINGS = pytest.mark.parametrize(
    "past_the_end", [False, True], ids=["ending at the last record", "ending no read meets"]
)


def test_a_closed_parent_read_to_its_ending_sequence_number_is_ended_without_its_empty_tail(
    deployed: Deployed,
) -> None:
    # given a closed parent whose download, its EndingSequenceNumber, is followed by 5,000 empty pages (the lineage
    # sweep, which probes the parent's first page, not due)
    clock = Clock()
    split = _split(deployed, tail=5000, clock=clock)
    deployed.dependencies.lineages_swept_at = deployed.dependencies.clock()
    event = deployed.window_event([_as_delivered(split.removal, deployed.stream_arn)], final=True)
    # when the mapping delivers the child's window
    deployed.invoke({**event, "shardId": CHILD}, VirtualContext(clock))
    # then the parent was read through its last record only, marked ended, and its download counted before the deletion
    assert split.parent_pages == 1
    assert deployed.dependencies.progress.read(ShardRef(deployed.stream_arn, deployed.shard_id)).ended
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 0
    assert [message["kind"] for message in deployed.failure_messages()] == []


@ENDINGS
def test_a_closed_parents_empty_tail_longer_than_the_budget_does_not_block_its_child(
    deployed: Deployed, past_the_end: bool
) -> None:
    # given a closed parent whose download is followed by 950 empty pages (under MAX_EMPTY_PAGES) at 30 ms a page:
    # more than the 27.5 s read budget of a 60 s invocation with the default 5 s margin
    clock = Clock()
    split = _split(deployed, tail=950, clock=clock, past_the_end=past_the_end)
    deployed.configure(deadline_margin_ms=5000)
    event = deployed.window_event([_as_delivered(split.removal, deployed.stream_arn)], final=True)
    # when the mapping delivers the child's final window, and retries it twice
    failures = 0
    for _ in range(3):
        try:
            deployed.invoke({**event, "shardId": CHILD}, VirtualContext(clock))
        except AggregatesNotWritten:
            failures += 1
    # then the child's deletion is counted at last (the count back at 0) and some invocation succeeded
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 0
    assert failures < 3


@ENDINGS
def test_a_closed_parents_long_empty_tail_is_walked_once_not_by_every_invocation_of_its_child(
    deployed: Deployed, past_the_end: bool
) -> None:
    # given a closed parent whose download is followed by 5,000 empty pages, on a clock that gives the walk its time
    clock = Clock()
    split = _split(deployed, tail=5000, clock=clock, past_the_end=past_the_end)
    event = deployed.window_event([_as_delivered(split.removal, deployed.stream_arn)], final=True)
    # when the mapping delivers the child's window three times (three windows, or retries)
    for _ in range(3):
        clock.now += 1
        deployed.invoke({**event, "shardId": CHILD}, VirtualContext(clock, remaining_ms=900_000))
    # then the parent was not walked 1,000 pages by each of them
    assert split.parent_pages < 2 * MAX_EMPTY_PAGES + 10, split.parent_pages


def test_a_refused_describe_stream_does_not_leave_a_parent_unread_before_its_child(deployed: Deployed) -> None:
    # given a parent whose download is followed at once by its end (no empty page), a child holding its deletion, both
    # already known to the progress table, and a fresh function instance (nothing described yet, the sweep not due)
    clock = Clock()
    split = _split(deployed, tail=0, clock=clock)
    split.__class__ = DescribeRefused
    deps = deployed.dependencies
    deps.progress.first_seen(ShardRef(deployed.stream_arn, deployed.shard_id), split.end, None, lineage_counted=True)
    deps.progress.first_seen(
        ShardRef(deployed.stream_arn, CHILD), split.removal["dynamodb"]["SequenceNumber"], deployed.shard_id
    )
    deps.shards.clear()
    deps.lineages_swept_at = deps.clock()
    # when the mapping delivers the child's final window while DescribeStream refuses
    event = deployed.window_event([_as_delivered(split.removal, deployed.stream_arn)], final=True)
    deployed.invoke({**event, "shardId": CHILD}, VirtualContext(clock))
    # then the parent's download was counted before its deletion: back at 0, nothing reported
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 0
    assert [message["kind"] for message in deployed.failure_messages()] == []


class ListsNothing:
    """DescribeStream lists no shard: the parent was deleted, or lies past the pages searched."""

    def __init__(self) -> None:
        self.described = 0

    def describe_stream(self, **parameters: Any) -> Any:
        self.described += 1
        return {"StreamDescription": {"StreamArn": parameters["StreamArn"], "Shards": []}}


def test_a_parent_describe_stream_does_not_list_is_not_searched_for_at_every_drain(deployed: Deployed) -> None:
    # given a stream whose DescribeStream does not list the parent
    streams = ListsNothing()
    deployed.use_streams(streams)
    parent = ShardRef(deployed.stream_arn, deployed.shard_id)
    # when two drains ask whether the parent is closed
    endings = [described_ending(deployed.dependencies, parent) for _ in range(2)]
    # then it is read as an open shard both times, and described once
    assert endings == [None, None]
    assert streams.described == 1


class HeadStream(TailStream):
    """A closed parent whose one download lies behind `head` empty pages (GetRecords: "it might take multiple calls to
    get to a portion of the shard that contains stream records"), its EndingSequenceNumber that download, and a child
    whose REMOVE of it arrives only after the child's first invocation (`child_records`)."""

    def __init__(self, *args: Any, head: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head = head
        self.child_records: list[dict[str, Any]] = []

    def get_shard_iterator(self, **parameters: Any) -> Any:
        if parameters["ShardId"] == CHILD:
            passed = parameters["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER" and bool(self.child_records)
            return {"ShardIterator": f"child|{1 if passed else 0}"}
        if parameters["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER":
            return {"ShardIterator": "head|0|after"}
        return {"ShardIterator": f"head|{self.head}|at"}

    def get_records(self, **parameters: Any) -> Any:
        self.clock.now += PAGE_SECONDS
        iterator = parameters["ShardIterator"]
        if iterator.startswith("child|"):
            return {"Records": self.child_records[int(iterator.split("|")[1]) :], "NextShardIterator": "child|1"}
        self.parent_pages += 1
        _, left, kind = iterator.split("|")
        if int(left) > 0:
            return {"Records": [], "NextShardIterator": f"head|{int(left) - 1}|{kind}"}
        return {"Records": [self.download] if kind == "at" else []}  # then NextShardIterator null


def test_a_parent_drain_cut_short_by_its_share_is_not_put_off_for_fifteen_minutes(deployed: Deployed) -> None:
    # given a closed parent whose download lies behind 100 empty pages, and its child
    clock = Clock()
    deployed.with_schema(retractions=True)
    deployed.write("song1", 1)
    iterator = deployed.streams.get_shard_iterator(
        StreamArn=deployed.stream_arn, ShardId=deployed.shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    download = deployed.streams.get_records(ShardIterator=iterator)["Records"][0]
    split = HeadStream(deployed.streams, deployed.shard_id, download, 0, clock, False, head=100)
    deployed.use_streams(split)
    deployed.configure(deadline_margin_ms=5000)
    deployed.dependencies.lineages_swept_at = deployed.dependencies.clock()
    # when the child's first final window (no record yet) comes with 10 s left: the parent's share reads ~20 pages
    deployed.invoke({**deployed.window_event([], final=True), "shardId": CHILD}, VirtualContext(clock, 10_000))
    parent = deployed.dependencies.progress.read(ShardRef(deployed.stream_arn, deployed.shard_id))
    assert parent.checkpoint is None
    assert split.parent_pages < 100
    # and a minute later its next window, with a whole minute, delivers the deletion of the parent's download
    clock.now += 60
    split.child_records = [split.removal]
    event = deployed.window_event([_as_delivered(split.removal, deployed.stream_arn)], final=True)
    deployed.invoke({**event, "shardId": CHILD}, VirtualContext(clock, 60_000))
    # then the parent was drained to its download first (~225 pages of share to read): back at 0, nothing reported
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 0
    assert [message["kind"] for message in deployed.failure_messages()] == []


class SlowParentWrites:
    """The aggregate store, whose writes of the parent's downloads take `seconds` each on the virtual clock, one at a
    time (a throttled table: a backlog the read budget takes in well under the ancestors' share)."""

    def __init__(self, store: Any, parent: str, clock: Clock, seconds: float) -> None:
        self._store, self._parent, self._clock, self._seconds = store, parent, clock, seconds

    def apply(self, key: Any, shard: ShardRef, contributions: Any) -> Any:
        if shard.shard_id == self._parent:
            self._clock.now += self._seconds
        return self._store.apply(key, shard, contributions)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class BacklogStream(TailStream):
    """A closed parent holding `downloads` in one page, its EndingSequenceNumber the last; the child holds the first
    one's REMOVE."""

    def __init__(self, streams: Any, parent: str, downloads: list[dict[str, Any]], clock: Clock) -> None:
        super().__init__(streams, parent, downloads[0], 0, clock, False)
        self.downloads = downloads
        self.ending = downloads[-1]["dynamodb"]["SequenceNumber"]
        self.removal["dynamodb"]["SequenceNumber"] = str(int(self.ending) + 1000)

    def get_records(self, **parameters: Any) -> Any:
        if parameters["ShardIterator"] != "parent|head":
            return super().get_records(**parameters)
        self.clock.now += PAGE_SECONDS
        self.parent_pages += 1
        return {"Records": self.downloads, "NextShardIterator": "tail|0"}


def test_a_parents_writes_stay_within_the_ancestors_share(deployed: Deployed) -> None:
    # given a closed parent holding six downloads whose writes take 5 s each, one at a time (30 s of a 60 s invocation),
    # and its child holding the deletion of the first
    clock = Clock()
    deployed.with_schema(retractions=True)
    for number in range(1, 7):
        deployed.write(f"song{number}", 1)
    iterator = deployed.streams.get_shard_iterator(
        StreamArn=deployed.stream_arn, ShardId=deployed.shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    downloads = deployed.streams.get_records(ShardIterator=iterator)["Records"]
    split = BacklogStream(deployed.streams, deployed.shard_id, downloads, clock)
    deployed.use_streams(split)
    deployed.configure(deadline_margin_ms=5000)
    deployed.dependencies.lineages_swept_at = deployed.dependencies.clock()
    slow = SlowParentWrites(deployed.dependencies.store, deployed.shard_id, clock, 5.0)
    deployed.dependencies = dataclasses.replace(
        deployed.dependencies, store=slow, executor=ThreadPoolExecutor(max_workers=1)
    )
    event = deployed.window_event([_as_delivered(split.removal, deployed.stream_arn)], final=True)
    # when the mapping delivers the child's final window
    deployed.invoke({**event, "shardId": CHILD}, VirtualContext(clock))
    # then the parent's writes stopped within its share (the first counted, the last left to a later invocation), and
    # the child's own read had its time: the window succeeded, the deletion counted after its download
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 0
    assert count_of(deployed.dynamodb, "song6", "2018-01") is None
    assert [message["kind"] for message in deployed.failure_messages()] == []


class PastItsEnding:
    """A closed shard whose first page holds records after its EndingSequenceNumber's record (AWS says none are: "The
    last sequence number for the stream records contained within a shard"), then only empty pages."""

    def __init__(self, sequences: list[int]) -> None:
        self.pages = 0
        self.records = [
            {"eventName": "INSERT", "dynamodb": {"SequenceNumber": str(sequence), "SizeBytes": 100}}
            for sequence in sequences
        ]

    def get_shard_iterator(self, **_parameters: Any) -> Any:
        return {"ShardIterator": "first"}

    def get_records(self, **parameters: Any) -> Any:
        self.pages += 1
        return {"Records": self.records if parameters["ShardIterator"] == "first" else [], "NextShardIterator": "next"}


def test_records_after_a_shards_ending_in_its_page_are_kept_and_the_shard_not_ended(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # given a closed shard whose EndingSequenceNumber's record is followed in its page by two more
    streams = PastItsEnding([100, 200, 300, 400])
    shard = ShardRef("arn:aws:dynamodb:us-east-1:000000000000:table/songs/stream/x", "shardId-1")
    # when its drain reads it (three pages allowed)
    read = read_shard(streams, shard, ("100", None), None, lambda _records, _bytes: streams.pages < 3, ending="200")
    # then every record of the page is kept, the read went on past the page, the shard is not taken for ended, and the
    # contradiction is logged naming the shard
    assert [record["dynamodb"]["SequenceNumber"] for record in read.records] == ["100", "200", "300", "400"]
    assert streams.pages == 3
    assert not read.shard_ended
    errors = [record for record in caplog.records if record.levelname == "ERROR"]
    assert [getattr(record, "shard", None) for record in errors] == ["shardId-1"]
