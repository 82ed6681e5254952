"""A model of how AWS may deliver a table's stream to a Lambda function: the oracle of the unit tier.

It allows everything AWS's documentation allows and nothing it rules out, and lets the history
(`tests/stream_model/histories.py`) choose among the allowed behaviours adversarially: several
shards that split, roll over and split for heat, children with lower sequence numbers, creation
times that do not follow sequence order, the aggregator's own writes in the stream, malformed
downloads, downloads edited and deleted (both images, by the application or by Time to Live, each
item's records in one lineage in the order they were made); and a mapping that retries out of
order, smaller or larger, with the last state or a fresh one, ends windows early, gives windows
and batches up (retries, record age), discards old records without invoking, while operators
invoke the function directly ahead of it and behind it. Every rule names the sentence it encodes
(`DOCS`). The emulators do none of this.

The rules it shares with the emulators' engine (a record's window, what a batch holds, the windowed event, whether an
invocation succeeded, the retry quota, the on-failure record) are defined once, with their citations, in
`leaderboard_dev.emulators.delivery_rules`; what is adversarial, and the whole stream, is this module's.
"""

from __future__ import annotations

import copy
import hashlib
import math
import os
import random
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.utils import parse_timestamp

from leaderboard_dev.emulators import delivery_rules
from leaderboard_dev.emulators.delivery_rules import (
    LAMBDA_ERRORS,
    LAMBDA_WINDOWS,
    Outcome,
    batch_end,
    failure_record,
    judge,
    retries_exhausted,
    too_old,
    window_event,
    window_start,
)
from tests.stream_model.environment import STREAM_ARN, TABLE, Design, Environment, FakeQueue
from tests.stream_model.fake_dynamodb import FakeDynamoDB, Item, Killed

DYNAMODB_STREAMS = "DynamoDB Developer Guide, 'Change data capture for DynamoDB Streams'"
STREAMS_API = "DynamoDB Streams API Reference"
PARTITION_KEYS = "DynamoDB Developer Guide, 'Best practices for designing and using partition keys effectively'"
LAMBDA_FILTERS = "Lambda Developer Guide, 'Control which events Lambda sends to your function'"
EVENT_LIBRARIES = "AWS Lambda event libraries, TimeWindowProperties (aws-lambda-java-events, aws_lambda_events)"

DOCS: dict[str, tuple[str, str]] = {
    **delivery_rules.DOCS,
    "exactly-once-in-stream": (DYNAMODB_STREAMS, "Each stream record appears exactly once in the stream."),
    "per-item-order": (
        DYNAMODB_STREAMS,
        "For each item that is modified in a DynamoDB table, the stream records appear in the same sequence as the "
        "actual modifications to the item.",
    ),
    "images": (
        "DynamoDB API Reference, 'StreamSpecification'",
        "StreamViewType: NEW_IMAGE - The entire item, as it appears after it was modified, is written to the stream. "
        "NEW_AND_OLD_IMAGES - Both the new and the old item images of the item are written to the stream.",
    ),
    "event-names": (
        f"{STREAMS_API}, 'Record'",
        "eventName: INSERT - a new item was added to the table. MODIFY - one or more of an existing item's attributes "
        "were modified. REMOVE - the item was deleted from the table",
    ),
    "ttl-identity": (
        "DynamoDB Developer Guide, 'DynamoDB Streams and Time to Live'",
        "Items that are deleted by the Time to Live process after expiration have the following fields: "
        'Records[<index>].userIdentity.type "Service"; Records[<index>].userIdentity.principalId '
        '"dynamodb.amazonaws.com". (As Lambda delivers it; GetRecords answers with the API\'s own member names, '
        "DynamoDB Streams API Reference, 'Identity': PrincipalId, Type.)",
    ),
    "shards-split": (
        DYNAMODB_STREAMS,
        "Any shard can also split into multiple new shards; this also occurs automatically. (It's also possible for a "
        "parent shard to have just one child shard.)",
    ),
    "shards-ephemeral": (
        DYNAMODB_STREAMS,
        "Shards are ephemeral: They are created and deleted automatically, as needed. (The model deletes a shard 24 "
        "hours after it closed, when the retention has trimmed all its records.)",
    ),
    "parent-before-child": (
        DYNAMODB_STREAMS,
        "Because shards have a lineage (parent and children), an application must always process a parent shard "
        "before it processes a child shard.",
    ),
    "sequence-within-shard": (
        f"{STREAMS_API}, 'Shard'",
        "SequenceNumberRange: The range of possible sequence numbers for the shard. (Nothing relates the ranges of "
        "different shards.)",
    ),
    "creation-time": (
        f"{STREAMS_API}, 'StreamRecord'",
        "ApproximateCreationDateTime: The approximate date and time when the stream record was created ... rounded "
        "down to the closest second. (Nothing says it grows with the sequence number.)",
    ),
    "own-writes-in-stream": (
        f"{STREAMS_API}, 'Record'",
        "eventName: INSERT - a new item was added to the table. MODIFY - one or more of an existing item's attributes "
        "were modified. (The aggregate items are items of the same table: their writes are in its stream.)",
    ),
    "split-for-heat": (
        PARTITION_KEYS,
        "You can also break up an item collection into segments by sort key, as long as the item collection isn't "
        "traffic that is tracked by a monotonic increase or decrease of the sort key.",
    ),
    "retention": (
        f"{STREAMS_API}, 'GetShardIterator'",
        "In DynamoDB Streams, there is a 24 hour limit on data retention. Stream records whose age exceeds this limit "
        "are subject to removal (trimming) from the stream.",
    ),
    "empty-pages": (
        f"{STREAMS_API}, 'GetRecords'",
        "If there are no stream records available in the portion of the shard that the iterator points to, GetRecords "
        "returns an empty list. Note that it might take multiple calls to get to a portion of the shard that contains "
        "stream records.",
    ),
    "shard-end": (
        f"{STREAMS_API}, 'GetRecords'",
        "NextShardIterator: ... If set to null, the shard has been closed and the requested iterator will not return "
        "any more data.",
    ),
    "iterator-expiry": (
        f"{STREAMS_API}, 'GetShardIterator'",
        "A shard iterator expires 15 minutes after it is returned to the requester.",
    ),
    "trimmed-access": (
        f"{STREAMS_API}, 'GetRecords' (TrimmedDataAccessException)",
        "You might receive a TrimmedDataAccessException if: You request a shard iterator with a sequence number older "
        "than the trim point (24 hours). You obtain a shard iterator, but before you use the iterator in a GetRecords "
        "request, a stream record in the shard exceeds the 24 hour period and is trimmed.",
    ),
    "read-throttling": (
        f"{STREAMS_API}, 'GetRecords' (errors)",
        "LimitExceededException is among the errors GetRecords returns.",
    ),
    "describe-pages": (
        f"{STREAMS_API}, 'DescribeStream'",
        "LastEvaluatedShardId: ... If LastEvaluatedShardId is not empty, it does not necessarily mean that there is "
        "more data in the result set. The only way to know when you have reached the end of the result set is when "
        "LastEvaluatedShardId is empty.",
    ),
    "filter": (
        LAMBDA_FILTERS,
        "Once your filter criteria processes an Kinesis or DynamoDB record, the streams iterator advances past this "
        "record. If the record doesn't satisfy your filter criteria, you don't have to manually delete the record.",
    ),
    "retries": (
        LAMBDA_ERRORS,
        "During invocation: If the function is invoked but returns an error, Lambda retries until the records expire, "
        "exceed the maximum age (MaximumRecordAgeInSeconds), or reach the configured retry quota "
        "(MaximumRetryAttempts). ... Splitting batches doesn't consume the retry quota.",
    ),
    "discard-before-invocation": (
        LAMBDA_ERRORS,
        "Before invocation: If a Lambda event source mapping is unable to invoke the function due to throttling or "
        "other issues, it retries until the records expire or exceed the maximum age configured on the event source "
        "mapping (MaximumRecordAgeInSeconds).",
    ),
    "at-least-once": (
        LAMBDA_WINDOWS,
        "Lambda will process each record at least once, but doesn't guarantee that each record will be processed "
        "only once. In rare cases, such as error handling, some records might be processed more than once. Records "
        "are always processed in order the first time. If records are processed more than once, they might be "
        "processed out of order.",
    ),
    "window-final": (
        LAMBDA_WINDOWS,
        "At the end of the window, the flag isFinalInvokeForWindow is set to true ... After successful invocation, "
        "your function checkpoints the sequence number and stream processing continues. If invocation is "
        "unsuccessful, your Lambda function suspends further processing until a successful invocation.",
    ),
    "window-early": (
        EVENT_LIBRARIES,
        "isWindowTerminatedEarly: Set to true if window is terminated prematurely. Subsequent invoke will continue "
        "the same window with a fresh state.",
    ),
    "window-resharding": (
        LAMBDA_WINDOWS,
        "When the shard ends, Lambda considers the window closed, and the child shards start their own window in a "
        "fresh state.",
    ),
    "window-retries": (
        LAMBDA_WINDOWS,
        "Tumbling windows fully support the existing retry policies maxRetryAttempts and maxRecordAge.",
    ),
    "queue-batch-errors": (
        "Amazon SQS API Reference, 'SendMessageBatch'",
        "The result of sending each message is reported individually in the response. Because the batch request can "
        "result in a combination of successful and unsuccessful actions, you should check for batch errors even when "
        "the call returns an HTTP status code of 200. (And a call can fail whole, as any call can.)",
    ),
    "mapping-paused": (
        "Lambda API Reference, 'UpdateEventSourceMapping'",
        "You can change the function that Lambda invokes, or pause invocation and resume later from the same "
        "location. (Enabled: false pauses polling. Nothing says what a mapping resumed after the retention does with "
        "records trimmed, or shards deleted, meanwhile: the model skips them without a failure record.)",
    ),
    "scheduled-invocation": (
        "EventBridge Scheduler API Reference, 'RetryPolicy'; Lambda Developer Guide, 'How Lambda handles errors and "
        "retries with asynchronous invocation'",
        "'the maximum number of times EventBridge Scheduler will try to deliver the event to a target'. 'Even if your "
        "function doesn't return an error, it's possible for it to receive the same event from Lambda multiple times "
        "because the queue itself is eventually consistent. If the function can't keep up with incoming events, events "
        "might also be deleted from the queue without being sent to the function.' (So a scheduled invocation may come "
        "twice or never: the model fires it during pauses as the history chooses, none at all included, and once when "
        "the history ends; a loss must be reported by the first one that runs.)",
    ),
}

RETENTION_SECONDS = 24 * 3600
ASYNC_ATTEMPTS = 3
"""scheduled-invocation: "by default Lambda attempts to run it two more times" after a function error."""
SWEEP_FAULTS = (
    "none",
    "none",
    "killed",
    "deadline",
    "queue_refuses",
    "throttled_progress",
    "late_write",
    "write_timeout",
)
"""What may befall a scheduled sweep, as any invocation, when the history says so (the drain's own comes calm)."""
SCHEDULE_SECONDS = 900
"""The lineage sweep's schedule (terraform's lineage_sweep_schedule default, rate(15 minutes))."""
START = 1_600_000_000.0
"""The model's clock starts here (epoch seconds); downloads' own Timestamps are in 2018, independent of it."""

HAZARDS = (
    "reordered retry",
    "larger retry",
    "smaller retry",
    "fresh state on retry",
    "early termination",
    "window given up",
    "batch given up",
    "retry quota 0",
    "record-age discard",
    "records expired",
    "direct ahead of the mapping",
    "direct behind the mapping",
    "direct invented records",
    "direct during a mapping invocation",
    "direct paused while the mapping goes on",
    "pruning",
    "empty GetRecords page",
    "throttled GetRecords",
    "expired iterator",
    "trimmed records",
    "split for heat",
    "shard split",
    "rollover",
    "child with lower sequence numbers",
    "non-monotonic creation times",
    "own writes in the stream",
    "malformed record",
    "late write",
    "lost write response",
    "lost response",
    "killed function",
    "timed out",
    "throttled write",
    "final invocation with records",
    "mapping paused past the retention",
    "failure queue refused a send",
    "scheduled sweep during a pause",
)
"""Every hazard class a history can show; the suite asserts that each occurs."""


# ---------------------------------------------------------------------------------------------- the stream


@dataclass(frozen=True)
class Written:
    """A download as the application writes it; `malformed` names what is wrong with it (0: nothing)."""

    song_id: str
    download_id: str
    timestamp: str
    malformed: int = 0
    genre: dict[str, str] | None = None
    """The category attribute as written (a DynamoDB value), when the history's boards have categories."""
    plays: dict[str, str] | None = None
    """The summed attribute as written (a DynamoDB value), when the history's boards sum."""
    user: str = "user1"
    """UserID: an attribute no board counts (an edit of it moves nothing)."""
    kind: str | None = None
    """The marker attribute `Type` (source_item_filter): DOWNLOAD for a download, another value for other items; None
    where the table holds downloads only."""

    @property
    def key(self) -> tuple[str, str]:
        return self.song_id, self.download_id


MARKER = ("Type", "DOWNLOAD")
"""source_item_filter of histories whose table holds other items too."""
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
"""ttl-identity: as Lambda delivers it."""
TTL_IDENTITY_API = {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}
"""ttl-identity: as GetRecords returns it (the API's Identity shape, as boto3 parses it)."""


def image_of(written: Written) -> Item:
    """The item a download is stored as; `malformed` 1-3 spoil its timestamp (4, 5 are spoilt by the caller)."""
    image: Item = {"songID": {"S": written.song_id}, "SK": {"S": written.download_id}, "UserID": {"S": written.user}}
    if written.malformed == 1:
        pass  # no Timestamp at all
    elif written.malformed == 2:
        image["Timestamp"] = {"S": "2018-13-45T99:00:00Z"}
    elif written.malformed == 3:
        image["Timestamp"] = {"N": "1514764800"}
    else:
        image["Timestamp"] = {"S": written.timestamp}
    if written.genre is not None:
        image["Genre"] = written.genre
    if written.plays is not None:
        image["Plays"] = written.plays
    if written.kind is not None:
        image[MARKER[0]] = {"S": written.kind}
    return image


@dataclass
class StreamRecord:
    shard_id: str
    sequence: int
    inserted: float
    """When the record entered the stream (model clock): window boundaries, record age and trimming."""
    created: int
    """ApproximateCreationDateTime as the record carries it: whole seconds, not monotonic in sequence order."""
    event_name: str
    keys: Item
    image: Item
    written: Written | None
    """The download this record carries (its new image); None for the aggregator's own writes and for REMOVEs."""
    old_image: Item | None = None
    """The item before a MODIFY or REMOVE; the record carries it where the view type has old images (images)."""
    old_written: Written | None = None
    """The download a MODIFY or REMOVE changed (its old image); None for INSERTs and the aggregator's own writes."""
    by_ttl: bool = False
    """A REMOVE by Time to Live: the record names DynamoDB's service in userIdentity (ttl-identity)."""
    view_type: str = "NEW_IMAGE"
    passes: bool | None = None
    """What the module's filter decided when the record was appended (StreamOfTable.passes); None: INSERTs only."""

    @property
    def passes_filter(self) -> bool:
        """The module's filter: INSERTs whose new image has no Month (the aggregates' attribute), and with retractions
        the MODIFYs and REMOVEs of downloads (StreamOfTable.passes)."""
        if self.passes is not None:
            return self.passes
        return self.event_name == "INSERT" and "Month" not in self.image

    @property
    def is_download(self) -> bool:
        return self.written is not None and not self.written.malformed

    def lambda_form(self) -> dict[str, Any]:
        """As the event source mapping delivers it: creation time a number, eventSourceARN present."""
        stream: dict[str, Any] = {
            "ApproximateCreationDateTime": float(self.created),
            "Keys": copy.deepcopy(self.keys),
        }
        if self.event_name != "REMOVE":
            stream["NewImage"] = copy.deepcopy(self.image)
        if self.view_type == "NEW_AND_OLD_IMAGES" and self.old_image is not None:
            stream["OldImage"] = copy.deepcopy(self.old_image)
        stream.update({"SequenceNumber": str(self.sequence), "SizeBytes": 100, "StreamViewType": self.view_type})
        record = {
            "eventID": f"{self.sequence:x}",
            "eventName": self.event_name,
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1",
            "dynamodb": stream,
            "eventSourceARN": STREAM_ARN,
        }
        if self.by_ttl:
            record["userIdentity"] = dict(TTL_IDENTITY)
        return record

    def api_form(self) -> dict[str, Any]:
        """As boto3 returns it from GetRecords: creation time a datetime, no eventSourceARN, userIdentity in the API's
        member names."""
        record = self.lambda_form()
        del record["eventSourceARN"]
        record["dynamodb"]["ApproximateCreationDateTime"] = parse_timestamp(self.created)
        if self.by_ttl:
            record["userIdentity"] = dict(TTL_IDENTITY_API)
        return record


@dataclass
class Shard:
    shard_id: str
    parent_id: str | None
    partition: str
    start: int
    next_sequence: int
    records: list[StreamRecord] = field(default_factory=list)
    inserted: list[float] = field(default_factory=list)
    closed_at: float | None = None

    @property
    def closed(self) -> bool:
        return self.closed_at is not None

    def trimmed(self, now: float) -> int:
        """How many of the oldest records are trimmed (inserted more than 24 hours ago)."""
        return bisect_right(self.inserted, now - RETENTION_SECONDS)

    def gone(self, now: float) -> bool:
        """Closed more than 24 hours ago: deleted (shards-ephemeral), no longer part of the stream."""
        return self.closed_at is not None and self.closed_at < now - RETENTION_SECONDS

    def index_at_or_after(self, sequence: int) -> int:
        return bisect_left([record.sequence for record in self.records], sequence)

    def ending_sequence(self) -> int:
        return self.records[-1].sequence if self.records else self.start


def stable_hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)


@dataclass
class StreamOfTable:
    """The table's stream: which shard each change lands in, with which sequence number and creation time."""

    rng: random.Random
    clock: Callable[[], float]
    hazards: set[str]
    creation_jitter: int = 2
    shards: dict[str, Shard] = field(default_factory=dict)
    open_shard: dict[str, str] = field(default_factory=dict)
    """Leaf partition -> its open shard."""
    splits: dict[str, tuple[str, str | None, list[str]]] = field(default_factory=dict)
    """Partition -> (kind: key, heat or rollover; the hot song; child partitions)."""
    retractions: bool = False
    """The table's stream carries old images too (NEW_AND_OLD_IMAGES), and the module's filter passes the MODIFYs and
    REMOVEs of downloads."""
    marker: tuple[str, str] | None = None
    """source_item_filter: the attribute and value that mark a download (None: every item is one)."""
    homes: dict[tuple[str, str], str] = field(default_factory=dict)
    """Item key -> the partition its first record went to: every later record of the item goes to that partition's
    lineage (per-item-order)."""
    _counter: int = 0

    @property
    def view_type(self) -> str:
        return "NEW_AND_OLD_IMAGES" if self.retractions else "NEW_IMAGE"

    def route(self, song_id: str, sort_key: str, partition: str | None = None) -> str:
        """The leaf partition of an item: songs by hash of the partition key, a hot song's items by sort key; from
        `partition` down its splits when the item's records began there."""
        partition = partition or f"p{stable_hash(song_id) % 2}"
        while partition in self.splits:
            kind, hot_song, children = self.splits[partition]
            if kind == "key":
                partition = children[stable_hash(song_id + partition) % len(children)]
            elif kind == "heat":
                partition = children[1 + stable_hash(sort_key) % 2] if song_id == hot_song else children[0]
            else:
                partition = children[0]
        return partition

    def _new_shard(self, partition: str, parent: Shard | None, lower: bool = False) -> Shard:
        self._counter += 1
        shard_id = f"shardId-{self._counter:020d}-{self.rng.getrandbits(32):08x}"
        if parent is None:
            start = self.rng.randint(10**20, 2 * 10**20)
        elif lower:
            # sequence-within-shard: nothing relates a child's numbers to its parent's
            start = parent.start - self.rng.randint(10**3, 10**6)
            self.hazards.add("child with lower sequence numbers")
        else:
            start = parent.next_sequence + self.rng.randint(1, 1000)
        shard = Shard(shard_id, parent.shard_id if parent else None, partition, start, start)
        self.shards[shard_id] = shard
        self.open_shard[partition] = shard_id
        return shard

    def shard_of(self, partition: str) -> Shard:
        if partition not in self.open_shard:
            self._new_shard(partition, None)
        return self.shards[self.open_shard[partition]]

    def append(
        self,
        event_name: str,
        keys: Item,
        image: Item,
        written: Written | None,
        into: Shard | None = None,
        old: Item | None = None,
    ) -> StreamRecord:
        """One change of one item: one record in the open shard of the item's partition (exactly-once-in-stream).

        `into`: a new item's first record in that open shard instead (nothing says which partition a key hashes to);
        the item's later records follow it there, down that shard's lineage (per-item-order).
        """
        item_key = (keys["songID"]["S"], keys["SK"]["S"])
        if into is not None:
            self.homes[item_key] = into.partition
        shard = into or self.shard_of(self.route(*item_key, partition=self.homes.get(item_key)))
        shard.next_sequence += self.rng.randint(1, 50)
        now = self.clock()
        created = math.floor(now) - self.rng.randint(0, self.creation_jitter)
        if shard.records and created < shard.records[-1].created:
            self.hazards.add("non-monotonic creation times")
        record = StreamRecord(shard.shard_id, shard.next_sequence, now, created, event_name, keys, image, written)
        if self.retractions or self.marker is not None:
            record.old_image, record.view_type = old, self.view_type
            record.passes = self.passes(event_name, image if event_name != "REMOVE" else None, old)
        shard.records.append(record)
        shard.inserted.append(now)
        return record

    def passes(self, event_name: str, new: Item | None, old: Item | None) -> bool:
        """The module's filter, as patterns can say it (filter): INSERTs of downloads, and with retractions the
        MODIFYs and REMOVEs of items whose old image is no aggregate (no Month, no count) and, with a marker, one of
        whose images is marked. Patterns cannot compare images, nor does the model's filter read userIdentity: TTL
        expiries and changes that move nothing pass, and the aggregator ignores them."""
        marked = [image for image in (new, old) if image is not None and self._marked(image)]
        if event_name == "INSERT":
            return new is not None and "Month" not in new and bool(marked)
        aggregate = old is None or "Month" in old or "DownloadCount" in old
        return self.retractions and not aggregate and bool(marked)

    def _marked(self, image: Item) -> bool:
        return self.marker is None or image.get(self.marker[0]) == {"S": self.marker[1]}

    def write_download(self, written: Written, into: Shard | None = None) -> StreamRecord:
        """One PutItem of a new download item: one INSERT record."""
        image = image_of(written)
        if written.malformed:
            self.hazards.add("malformed record")
        keys = {"songID": image["songID"], "SK": image["SK"]}
        return self.append("INSERT", keys, image, written, into)

    def modify_download(self, old: Written, new: Written) -> StreamRecord:
        """One UpdateItem of a download that changes it: one MODIFY record with both images (event-names, images)."""
        image = image_of(new)
        if new.malformed:
            self.hazards.add("malformed record")
        keys = {"songID": image["songID"], "SK": image["SK"]}
        record = self.append("MODIFY", keys, image, new, old=image_of(old))
        record.old_written = old
        return record

    def remove_download(self, old: Written, by_ttl: bool) -> StreamRecord:
        """One DeleteItem of a download, or Time to Live's: one REMOVE record with the old image (event-names,
        ttl-identity)."""
        image = image_of(old)
        keys = {"songID": image["songID"], "SK": image["SK"]}
        record = self.append("REMOVE", keys, {}, None, old=image)
        record.old_written, record.by_ttl = old, by_ttl
        return record

    def on_table_change(self, table: str, key: Item, old: Item | None, new: Item | None) -> None:
        """FakeDynamoDB's listener: the aggregator's writes to the main table are records of the stream too."""
        if table != TABLE or new is None:
            return
        if old is not None and any(name.startswith("Watermark_") and name not in new for name in old):
            self.hazards.add("pruning")
        self.hazards.add("own writes in the stream")
        self.append("INSERT" if old is None else "MODIFY", key, new, None, old=old)

    def reshard(self, shard: Shard, children: int, lower: bool) -> None:
        """shards-split: an open shard ends; one child (rollover) or two (split by partition key) take over."""
        if shard.closed:
            return
        shard.closed_at = self.clock()
        names = [f"{shard.partition}.{index}" for index in range(children)]
        self.splits[shard.partition] = ("key" if children > 1 else "rollover", None, names)
        self.hazards.add("shard split" if children > 1 else "rollover")
        for name in names:
            self._new_shard(name, shard, lower=lower and name == names[0])

    def heat(self, song_id: str) -> None:
        """split-for-heat: the song's partition splits, its items spread over two children by sort key."""
        partition = self.route(song_id, "")
        if any(hot == song_id for _, hot, _ in self.splits.values()):
            return
        shard = self.shard_of(partition)
        shard.closed_at = self.clock()
        names = [f"{partition}.rest", f"{partition}.hot0", f"{partition}.hot1"]
        self.splits[partition] = ("heat", song_id, names)
        self.hazards.add("split for heat")
        for name in names:
            self._new_shard(name, shard)

    def listed(self, now: float) -> list[Shard]:
        """The shards DescribeStream lists: all but those closed more than 24 hours ago, oldest first."""
        return [shard for shard in self.shards.values() if not shard.gone(now)]


# ---------------------------------------------------------------------------------------------- the mapping


@dataclass
class Retry:
    """After a failure: the records from the checkpoint on that must still be processed once more."""

    pending: set[int]
    frontier: int
    """Index after the highest record handed out since the checkpoint."""
    failed_size: int


@dataclass
class Lane:
    """Lambda's reader of one shard: its checkpoint, window, state, and what a failure left to retry."""

    shard: Shard
    position: int = 0
    """Lambda's checkpoint: index of the first record not yet processed (or discarded)."""
    window_start: int | None = None
    state: dict[str, Any] | None = None
    last_batch: tuple[int, int] | None = None
    """Indices (first, last) of the window's last batch handed out: what a given-up window's record names."""
    retry: Retry | None = None
    final_due: bool = False
    final_records: list[int] = field(default_factory=list)
    attempts: int = 0

    def idle(self, now: float, window_seconds: int) -> bool:
        records = self.shard.records
        if self.final_due or self.retry is not None:
            return False
        if any(record.passes_filter for record in records[self.position :]):
            return False
        if self.window_start is not None:
            return not (self.shard.closed or now >= self.window_start + window_seconds)
        return True

    def done(self) -> bool:
        return (
            self.shard.closed
            and self.window_start is None
            and self.retry is None
            and not self.final_due
            and not any(record.passes_filter for record in self.shard.records[self.position :])
        )


@dataclass
class Paused:
    """A direct invocation suspended in its own thread; only one thread ever runs at a time."""

    handoff: threading.Event = field(default_factory=threading.Event)
    resume: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    active: Any = None
    done: bool = False
    result: Any = None


@dataclass(frozen=True)
class MappingSettings:
    window_seconds: int | None = 5
    """None: plain stream events without windows (the guide's handler, version 0.1)."""
    batch_size: int = 10
    maximum_retry_attempts: int | None = 2
    """None: -1, retried until the records expire."""
    maximum_record_age: int | None = 3600
    """None: -1, until the records expire (24 hours)."""


@dataclass(frozen=True)
class Delivery:
    """How the mapping's next invocation of one shard goes; fields that do not apply are ignored."""

    size: int = 10
    fault: str = "none"
    at: int = 0
    part: int = 0
    """After a failure: 0 every pending record, 1 the lower half, 2 the upper half, 3 any since the checkpoint."""
    order: int = 0
    """After a failure: 0 ascending, 1 descending, 2 upper half first, 3 shuffled."""
    extend: int = 0
    """After a failure: newer records merged into the retry."""
    fresh: bool = False
    """After a failure: a fresh state instead of the last successful one."""
    early: bool = False
    """isWindowTerminatedEarly on this invocation."""
    final_records: bool = False
    """When this batch ends its window: deliver it in the final invocation."""


FAULTS = (
    "none",
    "killed",
    "lost_response",
    "throttled",
    "throttled_progress",
    "deadline",
    "late_write",
    "write_timeout",
    "queue_refuses",
)


class World:
    """One history's AWS: the stream, the mapping's lanes, the fakes, the failure queue and the clock."""

    def __init__(self, design_factory: Callable[[Environment], Design], settings: MappingSettings, seed: int) -> None:
        from tests.stream_model.fake_streams import FakeStreams, ReadBehaviour

        self.rng = random.Random(seed)
        self.schedule_rng = random.Random(seed + 2)
        """The schedule's own choices (instances, faults): a history's other draws stay as they were without it."""
        self.now = START
        self.hazards: set[str] = set()
        self.settings = settings
        self.stream = StreamOfTable(self.rng, self.clock, self.hazards)
        self.dynamodb = FakeDynamoDB(on_change=self.stream.on_table_change)
        behaviour = ReadBehaviour(
            empty_pages=0.25,
            limit_exceeded=0.04,
            max_page=self.rng.choice([2, 7, 1000]),
            closed_tail=float(os.environ.get("MODEL_CLOSED_EMPTY_TAIL", "0")),
            closed_tail_runs=int(os.environ.get("MODEL_CLOSED_EMPTY_TAIL_RUNS", "0")),
        )
        self.streams = FakeStreams(self.stream, self.clock, random.Random(seed + 1), behaviour, self.hazards)
        self.queue = FakeQueue()
        self.env = Environment(
            self.dynamodb,
            self.streams,
            self.queue,
            self.clock,
            self.wait,
            table_items=lambda: [image_of(written) for written in self.table.values()],
            deleted=lambda: [key for key, by_ttl in self.removed.items() if not by_ttl and key not in self.table],
        )
        self.design = design_factory(self.env)
        self.lanes: dict[str, Lane] = {}
        self.written: list[tuple[Written, StreamRecord]] = []
        """Every INSERT of a download, with its record."""
        self.table: dict[tuple[str, str], Written] = {}
        """The downloads in the table now, by key (song, download id), in the order they were first written."""
        self.expired: list[Written] = []
        """Downloads Time to Live deleted, as they were: an expiry never changes a count."""
        self.deleted: dict[tuple[str, str], None] = {}
        """Keys deleted (by the application or TTL), in order: what a rewrite writes again."""
        self.removed: dict[tuple[str, str], bool] = {}
        """Each key's last removal: whether Time to Live made it."""
        self.changes: list[StreamRecord] = []
        """Every record of a download (INSERT, MODIFY, REMOVE), in the order the application wrote them."""
        self.retraction_kinds: set[str] = set()
        """What the history's edits and deletions did (a deletion, a move across a year...): the suite asks for each."""
        self.invocations = 0
        self.delivered_high: dict[str, int] = {}
        """Per shard, the highest sequence the mapping has handed the function (for the oracle only)."""
        self.failure_reach: list[tuple[str, int]] = []
        """Per on-failure record: its shard and the highest sequence the mapping had handed the function there."""
        self.drain_discards = 0
        self.draining = False
        self._active: Callable[[str, dict[str, Any]], None] | None = None
        self.paused: list[Paused] = []
        self.config: Any = None
        """The history's configuration, for the steps that read it."""
        self.backfills: dict[int, tuple[str, str] | None] = {}
        """Ledger mode: each backfill run under way and the last key its scan read."""
        self.backfill_read: set[tuple[str, str]] = set()
        """Ledger mode: the keys some backfill has read."""
        self.dynamodb.before_call = self._before_call
        self.streams.before_call = self._before_call
        self.queue.before_call = self._before_call
        if settings.maximum_retry_attempts == 0:
            self.hazards.add("retry quota 0")

    def clock(self) -> float:
        return self.now

    def _before_call(self, operation: str, parameters: dict[str, Any]) -> None:
        self.now += 0.005
        if self._active is not None:
            self._active(operation, parameters)

    # ------------------------------------------------------------------ lanes

    def sync_lanes(self) -> list[Lane]:
        for shard_id, shard in self.stream.shards.items():
            self.lanes.setdefault(shard_id, Lane(shard))
        return list(self.lanes.values())

    def runnable(self) -> list[Lane]:
        """Lanes Lambda may invoke now: not done, and their parent done (parent-before-child)."""
        result = []
        for lane in self.sync_lanes():
            parent = self.lanes.get(lane.shard.parent_id) if lane.shard.parent_id else None
            if lane.done() or (parent is not None and not parent.done()):
                continue
            result.append(lane)
        return result

    def _window_of(self, record: StreamRecord) -> int:
        return window_start(record.inserted, self.settings.window_seconds or 1)

    @property
    def windowed(self) -> bool:
        return self.settings.window_seconds is not None and self.design.uses_windows

    # ------------------------------------------------------------------ invocations

    def invoke(
        self,
        event: dict[str, Any],
        fault: str = "none",
        at: int = 0,
        nested: Any = None,
        pause: Callable[[], None] | None = None,
    ) -> tuple[bool, Any]:
        """One invocation under a fault; returns (succeeded as its caller sees it, response). Whether the mapping
        takes a response for a success (a window's state, a partial batch) is `_mapping_invoke`'s.

        `nested` runs another invocation at the at-th call; `pause` suspends this one there (it runs
        in a thread of its own, and the history goes on until a Resume step or the drain).
        """
        self.invocations += 1
        started = self.now
        timeout = 3.0 if fault == "deadline" else 60.0
        deadline = started + timeout
        calls = 0
        outer = self._active

        def before(operation: str, parameters: dict[str, Any]) -> None:
            nonlocal calls
            calls += 1
            if fault == "deadline":
                self.now += 0.4
            if self.now > deadline:
                self.hazards.add("timed out")
                raise Killed("Lambda ended the invocation at its timeout")
            if fault == "killed" and calls > at:
                self.hazards.add("killed function")
                raise Killed("the function was killed")
            if pause is not None and calls == max(1, at):
                pause()
            if nested is not None and calls == max(1, at):
                self.hazards.add("direct during a mapping invocation")
                self._active = outer
                try:
                    nested()
                finally:
                    self._active = before

        if fault == "throttled":
            songs = {f"song{at % 4 + 1}", f"song{self.rng.randint(1, 4)}"}
            self.dynamodb.throttle = lambda p: self._throttled(p, lambda key: key.get("songID", {}).get("S") in songs)
        elif fault == "throttled_progress":
            self.dynamodb.throttle = lambda p: self._throttled(p, lambda key: "ShardKey" in key)
        elif fault == "late_write":
            self.dynamodb.delay_write = lambda _p: self.rng.random() < 0.4
        elif fault == "write_timeout":
            self.dynamodb.lose_response = lambda _p: self._lost_write()
        elif fault == "queue_refuses":
            self.queue.refuse = self._refused_send
        self._active = before
        try:
            response = self.design.invoke(copy.deepcopy(event), lambda: int((deadline - self.now) * 1000))
            succeeded = True
            if fault == "killed":
                self.hazards.add("killed function")
                raise Killed("the function was killed before it could answer")
        except Killed:
            response, succeeded = None, False
            self.design.restart()
        except Exception:
            response, succeeded = None, False
        finally:
            self._active = outer
            self.dynamodb.throttle = None
            self.dynamodb.delay_write = None
            self.dynamodb.lose_response = None
            self.queue.refuse = None
        self.now += 0.05
        if succeeded and fault == "lost_response":
            self.hazards.add("lost response")
            succeeded = False  # at-least-once: done, yet retried
        return succeeded, response

    def _throttled(self, parameters: dict[str, Any], matches: Callable[[dict[str, Any]], bool]) -> bool:
        key = parameters.get("Key") or parameters.get("Item") or {}
        if matches(key):
            self.hazards.add("throttled write")
            return True
        return False

    def _lost_write(self) -> bool:
        if self.rng.random() < 0.4:
            self.hazards.add("lost write response")
            return True
        return False

    def _refused_send(self) -> int:
        refused = self.rng.choice((0, 1, 2))
        if refused:
            self.hazards.add("failure queue refused a send")
        return refused

    def land_one(self, index: int) -> None:
        if self.dynamodb.delayed:
            self.hazards.add("late write")
            self.dynamodb.land_delayed(lambda size: index % size)

    # ------------------------------------------------------------------ the mapping's step

    def deliver(self, lane: Lane, step: Delivery) -> None:
        if self.windowed and self.settings.window_seconds is not None:
            self._expire(lane)
            if lane.final_due:
                self._final(lane, step)
            elif lane.retry is not None:
                self._retry(lane, step)
            else:
                self._first_time(lane, step)
        else:
            self._expire(lane)
            if lane.retry is not None:
                self._retry(lane, step)
            else:
                self._first_time(lane, step)

    def _matching(self, lane: Lane, start: int, stop: int | None = None) -> list[int]:
        records = lane.shard.records
        return [i for i in range(start, len(records) if stop is None else stop) if records[i].passes_filter]

    def _expire(self, lane: Lane) -> None:
        """record-age / retention: records older than the maximum age (or trimmed) are discarded without invoking."""
        age = min(self.settings.maximum_record_age or RETENTION_SECONDS, RETENTION_SECONDS)
        records = lane.shard.records
        width = self.settings.window_seconds or 1
        if self.windowed and lane.window_start is not None and too_old(self.now - (lane.window_start + width), age):
            # window-retries: a window whose records are all past the maximum age is given up
            self.hazards.add("window given up")
            self.hazards.add("records expired" if age == RETENTION_SECONDS else "record-age discard")
            named = lane.final_records or (list(lane.last_batch) if lane.last_batch else [])
            if lane.retry is not None:
                named = sorted(set(named) | lane.retry.pending)
                lane.position = max(lane.position, lane.retry.frontier)
                lane.retry = None
            if named:
                self._on_failure(lane, named, "RecordAgeExceeded")
            lane.position = max([lane.position, *(i + 1 for i in named)])
            lane.window_start, lane.state, lane.final_due, lane.final_records = None, None, False, []
            lane.last_batch, lane.attempts = None, 0
        # record-age: the leading records older than the maximum (the shard's insertion times are in order)
        cutoff = bisect_left(lane.shard.inserted, True, key=lambda inserted: not too_old(self.now - inserted, age))
        if cutoff <= lane.position:
            return
        old = self._matching(lane, lane.position, cutoff)
        if lane.retry is not None:
            old = sorted(set(old) & (lane.retry.pending | set(range(lane.retry.frontier, cutoff))))
        if old:
            expired = age == RETENTION_SECONDS or self.now - records[old[0]].inserted >= RETENTION_SECONDS
            self.hazards.add("records expired" if expired else "record-age discard")
            self._on_failure(lane, old, "RecordAgeExceeded")
        if lane.retry is not None:
            lane.retry.pending = {i for i in lane.retry.pending if i >= cutoff}
            if not lane.retry.pending:
                # retry-quota counts the retries of one batch: the next batch starts with none
                lane.position = max(cutoff, lane.retry.frontier)
                lane.retry, lane.attempts = None, 0
                return
        lane.final_records = [i for i in lane.final_records if i >= cutoff]
        lane.position = max(lane.position, cutoff) if lane.retry is None else lane.position

    def _on_failure(self, lane: Lane, indices: list[int], condition: str) -> None:
        """discarded-to-destination: the on-failure record names the shard and the sequence range."""
        if self.draining:
            self.drain_discards += 1
        records = lane.shard.records
        first, last = records[min(indices)], records[max(indices)]
        shard_id = lane.shard.shard_id
        self.failure_reach.append((shard_id, max(self.delivered_high.get(shard_id, 0), last.sequence)))
        self.queue.messages.append(
            failure_record(
                condition,
                shard_id,
                STREAM_ARN,
                (str(first.sequence), first.created),
                (str(last.sequence), last.created),
                len(indices),
                lane.attempts,
                self.now,
            )
        )

    def _event(self, lane: Lane, indices: list[int], final: bool, state: dict[str, Any], early: bool) -> dict[str, Any]:
        records = [lane.shard.records[i].lambda_form() for i in indices]
        if indices:
            highest = max(lane.shard.records[i].sequence for i in indices)
            self.delivered_high[lane.shard.shard_id] = max(self.delivered_high.get(lane.shard.shard_id, 0), highest)
        if not self.windowed:
            return {"Records": records}
        width = self.settings.window_seconds or 1
        start = lane.window_start if lane.window_start is not None else 0
        return window_event(records, start, width, state, lane.shard.shard_id, STREAM_ARN, final, early)

    def _first_time(self, lane: Lane, step: Delivery) -> None:
        records = lane.shard.records
        matching = self._matching(lane, lane.position)
        width = self.settings.window_seconds or 1
        if not matching:
            lane.position = len(records)  # filter: the iterator advances past records that do not match
            if lane.window_start is not None and (lane.shard.closed or self.now >= lane.window_start + width):
                lane.final_due = True
                self._final(lane, step)
            return
        window = self._window_of(records[matching[0]])
        if self.windowed and lane.window_start is not None and window != lane.window_start:
            lane.final_due = True
            self._final(lane, step)
            return
        if self.windowed and lane.window_start is None:
            lane.window_start, lane.state, lane.last_batch = window, {}, None
        batch = matching[: batch_end(matching, 0, max(1, step.size), self._window_of_index(lane))]
        end = batch[-1] + 1
        if self.windowed and step.final_records and self._window_complete(lane, end, window):
            self.hazards.add("final invocation with records")
            lane.final_due, lane.final_records = True, batch
            self._final(lane, step)
            return
        self._batch(lane, batch, step, end, state=lane.state or {}, retried=[])

    def _window_of_index(self, lane: Lane) -> Callable[[int], int | None]:
        """batch-contents: the window of the lane's record at an index (None without windows)."""
        records = lane.shard.records
        return (lambda index: self._window_of(records[index])) if self.windowed else (lambda _index: None)

    def _window_complete(self, lane: Lane, end: int, window: int) -> bool:
        later = self._matching(lane, end)
        if later:
            return self._window_of(lane.shard.records[later[0]]) != window
        return lane.shard.closed or self.now >= window + (self.settings.window_seconds or 1)

    def _batch(
        self, lane: Lane, presented: list[int], step: Delivery, end: int, state: dict[str, Any], retried: list[int]
    ) -> None:
        early = self.windowed and step.early
        event = self._event(lane, presented, final=False, state=state, early=early)
        outcome = self._mapping_invoke(lane, event, step)
        if outcome.reported:
            # partial-batch: the lowest reported record is the checkpoint; everything from it is retried
            lowest = min(presented[index] for index in outcome.reported)
            self._failed(lane, [i for i in presented if i >= lowest], max(end, lowest + 1))
            return
        if not outcome.succeeded:
            self._failed(lane, presented, end)
            return
        lane.attempts = 0
        lane.last_batch = (min(presented), max(presented))
        if self.windowed:
            lane.state = dict(outcome.state or {})
            if early:
                self.hazards.add("early termination")
                lane.state = {}  # window-early: the same window continues with a fresh state
        if lane.retry is None:
            lane.position = max(lane.position, end)
            return
        lane.retry.pending -= set(presented)
        lane.retry.frontier = max(lane.retry.frontier, end)
        if not lane.retry.pending:
            lane.position = max(lane.position, lane.retry.frontier)
            lane.retry = None

    def _mapping_invoke(self, lane: Lane, event: dict[str, Any], step: Delivery) -> Outcome:
        """One of the mapping's invocations of the lane, under the step's fault, judged as the mapping judges its
        answer: a window's state, a partial batch response (delivery_rules.judge)."""
        nested = self._nested_direct(lane, step)
        succeeded, response = self.invoke(event, step.fault if step.fault != "interleave" else "none", step.at, nested)
        records = event["Records"]
        return judge(not succeeded, response, records, self.windowed, self.design.reports_batch_item_failures)

    def _failed(self, lane: Lane, presented: list[int], end: int) -> None:
        lane.attempts += 1
        self.now += min(2.0 ** min(lane.attempts, 6), 60.0)  # retries back off
        pending = set(presented) | (lane.retry.pending if lane.retry is not None else set())
        if retries_exhausted(lane.attempts, self.settings.maximum_retry_attempts):
            # retries / retry-quota: discarded to the on-failure destination, processing continues
            self.hazards.add("batch given up")
            self._on_failure(lane, sorted(pending), "RetryAttemptsExhausted")
            frontier = max(end, lane.retry.frontier if lane.retry is not None else end)
            lane.position, lane.retry, lane.attempts = max(lane.position, frontier), None, 0
            return
        if lane.retry is None:
            lane.retry = Retry(pending, end, len(presented))
        else:
            lane.retry.pending = pending
            lane.retry.frontier = max(lane.retry.frontier, end)
            lane.retry.failed_size = len(presented)

    def _retry(self, lane: Lane, step: Delivery) -> None:
        """at-least-once: from the checkpoint on, any records again, in any order, split or merged with newer ones."""
        retry = lane.retry
        assert retry is not None
        records = lane.shard.records
        pending = sorted(retry.pending)
        if step.part == 1:
            chosen = pending[: max(1, len(pending) // 2)]
        elif step.part == 2:
            chosen = pending[len(pending) // 2 :]
        elif step.part == 3:
            since = self._matching(lane, lane.position, retry.frontier)
            chosen = sorted(self.rng.sample(since, self.rng.randint(1, len(since))))
        else:
            chosen = pending
        window = self._window_of(records[pending[0]]) if self.windowed else None
        newer = [
            i for i in self._matching(lane, retry.frontier) if window is None or self._window_of(records[i]) == window
        ][: step.extend]
        if step.order == 1:
            again = sorted(chosen, reverse=True)
        elif step.order == 2:
            again = chosen[len(chosen) // 2 :] + chosen[: len(chosen) // 2]
        elif step.order == 3:
            again = self.rng.sample(chosen, len(chosen))
        else:
            again = list(chosen)
        # at-least-once: records new to this retry are in order; the ones processed before may come anywhere
        if step.order == 0:
            presented = sorted(again + newer)
        else:
            presented = again + newer if self.rng.random() < 0.5 else newer + again
        if presented != sorted(presented) or (pending and min(chosen) > pending[0]):
            self.hazards.add("reordered retry")
        if newer:
            self.hazards.add("larger retry")
        if len(chosen) < retry.failed_size:
            self.hazards.add("smaller retry")
        state = lane.state or {}
        if step.fresh and self.windowed:
            if state:
                self.hazards.add("fresh state on retry")
            state = {}
        end = max(retry.frontier, (max(newer) + 1) if newer else 0)
        self._batch(lane, presented, step, end, state=state, retried=chosen)

    def _final(self, lane: Lane, step: Delivery) -> None:
        """window-final: the window's last invocation; nothing else of the shard until it succeeds or is given up."""
        indices = lane.final_records
        state = lane.state or {}
        if step.fresh and lane.attempts > 0:
            if state:
                self.hazards.add("fresh state on retry")
            state = {}
        event = self._event(lane, indices, final=True, state=state, early=False)
        succeeded = self._mapping_invoke(lane, event, step).succeeded
        end = (max(indices) + 1) if indices else lane.position
        if not succeeded:
            lane.attempts += 1
            self.now += min(2.0 ** min(lane.attempts, 6), 60.0)
            if not retries_exhausted(lane.attempts, self.settings.maximum_retry_attempts):
                return
            self.hazards.add("window given up")
            named = indices or ([lane.last_batch[0], lane.last_batch[1]] if lane.last_batch else [])
            if named:
                self._on_failure(lane, named, "RetryAttemptsExhausted")
        lane.position = max(lane.position, end)
        lane.window_start, lane.state, lane.final_due, lane.final_records = None, None, False, []
        lane.last_batch, lane.attempts = None, 0

    # ------------------------------------------------------------------ direct invocations

    def _nested_direct(self, lane: Lane, step: Delivery) -> Callable[[], None] | None:
        if step.fault != "interleave":
            return None
        return lambda: self.direct(lane, "ahead", 1, "none", 0)

    def direct(self, lane: Lane, kind: str, count: int, fault: str, at: int, pick: int = -1) -> tuple[bool, Any]:
        """An operator's direct invocation following the aggregator's contract, with real or invented records."""
        event = self.direct_event(lane, kind, count, pick)
        if event is None:
            return False, None
        if fault == "pause":
            self._start_paused(event, at)
            return False, None
        return self.invoke(event, fault, at)

    def _start_paused(self, event: dict[str, Any], at: int) -> None:
        """A direct invocation stopped at its at-th call to AWS while the history goes on: a slow concurrent reader."""
        paused = Paused()

        def suspend() -> None:
            paused.active = self._active
            self._active = None
            paused.handoff.set()
            paused.resume.wait()
            self._active = paused.active

        def run() -> None:
            try:
                paused.result = self.invoke(event, "none", at, pause=suspend)
            finally:
                paused.done = True
                paused.handoff.set()

        paused.thread = threading.Thread(target=run, daemon=True)
        paused.thread.start()
        paused.handoff.wait()
        paused.handoff.clear()
        if not paused.done:
            self.hazards.add("direct paused while the mapping goes on")
            self.paused.append(paused)

    def resume(self, index: int) -> None:
        """A paused direct invocation goes on to its end (Lambda's timeout may have passed meanwhile)."""
        if not self.paused:
            return
        paused = self.paused.pop(index % len(self.paused))
        paused.resume.set()
        paused.handoff.wait()
        if paused.thread is not None:
            paused.thread.join()

    def direct_event(self, lane: Lane, kind: str, count: int, pick: int = -1) -> dict[str, Any] | None:
        """The event; `pick` >= 0 claims the candidates from that index on instead of a random sample."""
        records = lane.shard.records
        matching = self._matching(lane, 0)
        event: dict[str, Any] = {"shardId": lane.shard.shard_id, "eventSourceARN": STREAM_ARN}
        if kind in ("ahead", "behind"):
            ahead = [i for i in matching if i >= lane.position and i >= lane.shard.trimmed(self.now)]
            behind = [i for i in matching if i < lane.position and i >= lane.shard.trimmed(self.now)]
            candidates = ahead if kind == "ahead" else behind
            if not candidates:
                return None
            if pick >= 0:
                chosen = candidates[min(pick, len(candidates) - 1) :][:count]
            else:
                chosen = sorted(self.rng.sample(candidates, min(count, len(candidates))))
            self.hazards.add("direct ahead of the mapping" if kind == "ahead" else "direct behind the mapping")
            event["Records"] = [records[i].lambda_form() for i in chosen]
        elif kind == "invented":
            taken = {record.sequence for record in records}
            claims = []
            for _ in range(max(1, count)):
                base = self.rng.choice(records).sequence if records and self.rng.random() < 0.7 else lane.shard.start
                sequence = base + self.rng.randint(1, 3) if self.rng.random() < 0.8 else lane.shard.next_sequence + 77
                if sequence in taken:
                    continue
                song = f"song{self.rng.randint(1, 4)}"
                image = {
                    "songID": {"S": song},
                    "SK": {"S": f"invented-{sequence}"},
                    "Timestamp": {"S": "2018-01-15T12:30:00Z"},
                }
                keys = {"songID": image["songID"], "SK": image["SK"]}
                claims.append(
                    StreamRecord(
                        lane.shard.shard_id,
                        sequence,
                        self.now,
                        int(self.now),
                        "INSERT",
                        keys,
                        image,
                        None,
                        view_type=self.stream.view_type,
                    ).lambda_form()
                )
            if not claims:
                return None
            self.hazards.add("direct invented records")
            event["Records"] = claims
        else:
            ahead = [i for i in matching if i >= lane.position]
            if ahead and self.rng.random() < 0.7:
                event["throughSequenceNumber"] = str(records[self.rng.choice(ahead)].sequence)
                self.hazards.add("direct ahead of the mapping")
            else:
                event["throughSequenceNumber"] = str(lane.shard.next_sequence + self.rng.randint(1, 10**6))
                self.hazards.add("direct invented records")
            event["Records"] = []
        return event

    # ------------------------------------------------------------------ the rest of the history

    def write(self, written: Written, into: Shard | None = None) -> None:
        record = self.stream.write_download(written, into)
        self.written.append((written, record))
        self.table[written.key] = written
        self.changes.append(record)
        self.now += 0.25

    def modify(self, new: Written) -> None:
        """The application updates a download still in the table (same key): one MODIFY."""
        old = self.table[new.key]
        self.changes.append(self.stream.modify_download(old, new))
        self.table[new.key] = new
        self.now += 0.25

    def remove(self, key: tuple[str, str], by_ttl: bool) -> None:
        """The application, or Time to Live, deletes a download: one REMOVE; what TTL deletes stays counted."""
        old = self.table.pop(key)
        self.changes.append(self.stream.remove_download(old, by_ttl))
        if by_ttl:
            self.expired.append(old)
        self.deleted[key] = None
        self.removed[key] = by_ttl
        self.now += 0.25

    def wait(self, seconds: float) -> None:
        self.now += seconds

    def resume_mapping(self) -> None:
        """mapping-paused: enabled again, the mapping goes on from where each lane stopped, if it still can.

        A lane whose shard was deleted meanwhile is done; one whose records were trimmed past its
        position goes on from the oldest record left. Neither writes a failure record.
        """
        for lane in self.sync_lanes():
            trimmed = len(lane.shard.records) if lane.shard.gone(self.now) else lane.shard.trimmed(self.now)
            if lane.position >= trimmed:
                continue
            self.hazards.add("mapping paused past the retention")
            lane.position = trimmed
            lane.window_start, lane.state, lane.final_due, lane.final_records = None, None, False, []
            lane.last_batch, lane.retry, lane.attempts = None, None, 0

    def scheduled_sweep(self, twice: bool = False, during_pause: bool = False, faulted: bool = False) -> None:
        """scheduled-invocation: the schedule invokes the function with no record at all; with `twice`, Lambda
        hands it the same event again."""
        if not self.design.sweeps_on_schedule:
            return
        if during_pause:
            self.hazards.add("scheduled sweep during a pause")
        for _ in range(2 if twice else 1):
            for _attempt in range(ASYNC_ATTEMPTS):
                if self.schedule_rng.random() < 0.5:
                    self.design.restart()  # nothing says which instance a scheduled invocation finds, or a fresh one
                fault = self.schedule_rng.choice(SWEEP_FAULTS) if faulted else "none"
                succeeded, _ = self.invoke(
                    {"lineageSweep": {"streamArn": STREAM_ARN}}, fault=fault, at=self.schedule_rng.randint(1, 12)
                )
                if succeeded:
                    break

    def drain(self, max_rounds: int = 5000) -> None:
        """After the history: Lambda catches up without faults until every shard is read (windows closed); the
        schedule's invocation comes first (a stream may get no download again: nothing else would invoke)."""
        while self.paused:
            self.resume(0)
        self.draining = True
        self.streams.behaviour = self.streams.behaviour.calm()
        self.scheduled_sweep()
        for delayed in range(len(self.dynamodb.delayed)):
            self.land_one(delayed)
        for _ in range(max_rounds):
            lanes = [lane for lane in self.runnable() if not lane.idle(self.now, self.settings.window_seconds or 1)]
            if not lanes:
                open_windows = [lane for lane in self.lanes.values() if lane.window_start is not None]
                if not open_windows:
                    self.draining = False
                    return
                self.now += self.settings.window_seconds or 1
                continue
            for lane in lanes:
                self.deliver(lane, Delivery(size=self.settings.batch_size))
        raise AssertionError("the mapping did not catch up: a shard is stuck")
