"""A DynamoDB Streams client over the model's shards: faithful to the API reference, adversarial within it.

DescribeStream pages its shards (ExclusiveStartShardId / LastEvaluatedShardId, sometimes a last
page that is empty); GetShardIterator takes TRIM_HORIZON, LATEST, AT_SEQUENCE_NUMBER and
AFTER_SEQUENCE_NUMBER; GetRecords returns a shard's records in sequence order, in pages of random
size up to Limit (at most 1000), with empty pages in the middle of a shard, NextShardIterator
absent only once a closed shard is read to its end, ExpiredIteratorException for an iterator
older than 15 minutes, TrimmedDataAccessException for positions older than the 24-hour
retention, and now and then LimitExceededException. Records come as boto3 returns them:
ApproximateCreationDateTime a datetime, no eventSourceARN. The sentences are in
`aws_delivery.DOCS`; `tests/unit/stream_model/test_fake_streams.py` holds the fake to them and to moto.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from tests.stream_model.aws_delivery import StreamOfTable
from tests.stream_model.environment import STREAM_ARN, TABLE

ITERATOR_LIFETIME_SECONDS = 15 * 60
ITERATOR_TYPES = ("TRIM_HORIZON", "LATEST", "AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER")


@dataclass(frozen=True)
class ReadBehaviour:
    """How adversarial the reads are; `faithful()` is a plain stream for comparisons with moto."""

    empty_pages: float = 0.25
    """Chance that a page is empty although records follow (empty-pages)."""
    empty_runs: int = 4
    """An empty page may be followed by up to this many more."""
    limit_exceeded: float = 0.04
    max_page: int = 1000
    """Pages hold a random number of records from 1 to min(Limit, max_page)."""
    null_late: float = 0.3
    """Chance that the page reaching a closed shard's end still carries a NextShardIterator (then [] and null)."""
    describe_page: int = 3
    describe_empty_last: float = 0.3
    closed_tail: float = 0.0
    """Chance that a closed shard read to its last record answers empty pages, with a NextShardIterator, before its
    null one: "If there are no stream records available in the portion of the shard that the iterator points to,
    GetRecords returns an empty list" (GetRecords); nothing says the portion after the last record is crossed in one
    call."""
    closed_tail_runs: int = 0
    """Such a tail holds 1 to this many empty pages."""

    def calm(self) -> ReadBehaviour:
        """No throttling: what a reader sees when nothing else is reading (the model's drain)."""
        return replace(self, limit_exceeded=0.0)

    @classmethod
    def faithful(cls) -> ReadBehaviour:
        return cls(
            empty_pages=0.0, empty_runs=0, limit_exceeded=0.0, null_late=0.0, describe_page=100, describe_empty_last=0
        )


@dataclass
class _Iterator:
    shard_id: str
    position: int
    issued: float
    ends_next: bool = False
    """Already at a closed shard's end: the next GetRecords returns [] and no NextShardIterator."""
    tail: int = 0
    """Empty pages still to answer at a closed shard's end (0: none drawn yet; -1: the tail is behind)."""


def _error(code: str, operation: str, message: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)  # type: ignore[arg-type]


@dataclass
class FakeStreams:
    stream: StreamOfTable
    clock: Callable[[], float]
    rng: random.Random
    behaviour: ReadBehaviour = field(default_factory=ReadBehaviour)
    hazards: set[str] = field(default_factory=set)
    before_call: Callable[[str, dict[str, Any]], None] | None = None
    calls: int = 0
    _iterators: dict[str, _Iterator] = field(default_factory=dict)
    _empty_run: int = 0
    created: float | None = None
    """When the stream was created (CreationRequestDateTime): the model's clock when the fake is made, unless given."""

    def __post_init__(self) -> None:
        if self.created is None:
            self.created = self.clock()

    def _call(self, operation: str, parameters: dict[str, Any]) -> None:
        self.calls += 1
        if self.before_call is not None:
            self.before_call(operation, parameters)

    def _check_stream(self, operation: str, arn: Any) -> None:
        if arn != STREAM_ARN:
            raise _error("ResourceNotFoundException", operation, f"Requested resource not found: Stream: {arn}")

    # ------------------------------------------------------------------ DescribeStream

    def describe_stream(self, **parameters: Any) -> dict[str, Any]:
        self._call("DescribeStream", parameters)
        self._check_stream("DescribeStream", parameters.get("StreamArn"))
        limit = parameters.get("Limit", 100)
        if not isinstance(limit, int) or not 1 <= limit <= 100:
            raise _error("ValidationException", "DescribeStream", "Limit must be between 1 and 100")
        now = self.clock()
        shards = self.stream.listed(now)
        shard_filter = parameters.get("ShardFilter")
        if shard_filter:
            if shard_filter.get("Type") != "CHILD_SHARDS" or "ShardId" not in shard_filter:
                raise _error("ValidationException", "DescribeStream", "ShardFilter Type must be CHILD_SHARDS")
            shards = [shard for shard in shards if shard.parent_id == shard_filter["ShardId"]]
        start = parameters.get("ExclusiveStartShardId")
        if start is not None:
            shards = [shard for shard in shards if shard.shard_id > start]
        size = self.rng.randint(1, max(1, min(limit, self.behaviour.describe_page)))
        page, rest = shards[:size], shards[size:]
        description: dict[str, Any] = {
            "StreamArn": STREAM_ARN,
            "StreamLabel": STREAM_ARN.rsplit("/", 1)[-1],
            "StreamStatus": "ENABLED",
            "StreamViewType": self.stream.view_type,
            "CreationRequestDateTime": datetime.fromtimestamp(self.created or 0.0, UTC),
            "TableName": TABLE,
            "KeySchema": [
                {"AttributeName": "songID", "KeyType": "HASH"},
                {"AttributeName": "SK", "KeyType": "RANGE"},
            ],
            "Shards": [self._describe_shard(shard) for shard in page],
        }
        if rest or (page and self.rng.random() < self.behaviour.describe_empty_last):
            description["LastEvaluatedShardId"] = page[-1].shard_id  # describe-pages
        return {"StreamDescription": description}

    @staticmethod
    def _describe_shard(shard: Any) -> dict[str, Any]:
        sequence_range = {"StartingSequenceNumber": str(shard.start)}
        if shard.closed:
            sequence_range["EndingSequenceNumber"] = str(shard.ending_sequence())
        described: dict[str, Any] = {"ShardId": shard.shard_id, "SequenceNumberRange": sequence_range}
        if shard.parent_id is not None:
            described["ParentShardId"] = shard.parent_id
        return described

    # ------------------------------------------------------------------ GetShardIterator

    def get_shard_iterator(self, **parameters: Any) -> dict[str, Any]:
        self._call("GetShardIterator", parameters)
        self._check_stream("GetShardIterator", parameters.get("StreamArn"))
        now = self.clock()
        shard = self.stream.shards.get(parameters.get("ShardId", ""))
        if shard is None or shard.gone(now):
            raise _error("ResourceNotFoundException", "GetShardIterator", "Requested resource not found: Shard")
        kind = parameters.get("ShardIteratorType")
        if kind not in ITERATOR_TYPES:
            raise _error("ValidationException", "GetShardIterator", f"Invalid ShardIteratorType {kind!r}")
        trimmed = shard.trimmed(now)
        if kind == "TRIM_HORIZON":
            position = trimmed
        elif kind == "LATEST":
            position = len(shard.records)
        else:
            raw = parameters.get("SequenceNumber")
            if not isinstance(raw, str) or not raw.isdigit() or len(raw) > 40:
                raise _error("ValidationException", "GetShardIterator", "SequenceNumber must be 1-40 digits")
            sequence = int(raw)
            if sequence < shard.start or (shard.closed and sequence > shard.ending_sequence()):
                raise _error("ValidationException", "GetShardIterator", f"Invalid SequenceNumber {raw} for shard")
            trim_point = shard.records[trimmed].sequence if trimmed < len(shard.records) else shard.next_sequence + 1
            if trimmed and sequence < trim_point:
                self.hazards.add("trimmed records")
                raise _error(
                    "TrimmedDataAccessException",
                    "GetShardIterator",
                    "The operation attempted to read past the oldest stream record in a shard.",
                )
            position = shard.index_at_or_after(sequence + (1 if kind == "AFTER_SEQUENCE_NUMBER" else 0))
        return {"ShardIterator": self._issue(shard.shard_id, position, now)}

    def _issue(self, shard_id: str, position: int, now: float, ends_next: bool = False, tail: int = 0) -> str:
        token = f"{shard_id}|{position}|{len(self._iterators)}|{self.rng.getrandbits(64):016x}"
        self._iterators[token] = _Iterator(shard_id, position, now, ends_next, tail)
        return token

    # ------------------------------------------------------------------ GetRecords

    def get_records(self, **parameters: Any) -> dict[str, Any]:
        self._call("GetRecords", parameters)
        limit = parameters.get("Limit", 1000)
        if not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise _error("ValidationException", "GetRecords", "Limit must be between 1 and 1000")
        iterator = self._iterators.get(parameters.get("ShardIterator", ""))
        if iterator is None:
            raise _error("ValidationException", "GetRecords", "Invalid ShardIterator")
        now = self.clock()
        if now - iterator.issued > ITERATOR_LIFETIME_SECONDS:
            self.hazards.add("expired iterator")
            raise _error("ExpiredIteratorException", "GetRecords", "Iterator expired")
        if self.rng.random() < self.behaviour.limit_exceeded:
            self.hazards.add("throttled GetRecords")
            raise _error("LimitExceededException", "GetRecords", "Rate exceeded for shard")
        shard = self.stream.shards[iterator.shard_id]
        if iterator.position < shard.trimmed(now):
            self.hazards.add("trimmed records")
            raise _error(
                "TrimmedDataAccessException",
                "GetRecords",
                "The operation attempted to read past the oldest stream record in a shard.",
            )
        if iterator.ends_next:
            return {"Records": []}
        if iterator.tail > 0:
            self.hazards.add("empty pages at a closed shard's end")
            left = iterator.tail - 1
            return {
                "Records": [],
                "NextShardIterator": self._issue(shard.shard_id, iterator.position, now, tail=left or -1),
            }
        available = len(shard.records) - iterator.position
        size = 0
        if available > 0 and self._empty_page():
            self.hazards.add("empty GetRecords page")
        elif available > 0:
            size = self.rng.randint(1, min(limit, available, self.behaviour.max_page))
        position = iterator.position + size
        page = {"Records": [record.api_form() for record in shard.records[iterator.position : position]]}
        if shard.closed and position == len(shard.records):
            if self.behaviour.closed_tail and iterator.tail == 0 and self.rng.random() < self.behaviour.closed_tail:
                run = self.rng.randint(1, max(1, self.behaviour.closed_tail_runs))
                page["NextShardIterator"] = self._issue(shard.shard_id, position, now, tail=run)
                return page
            if self.rng.random() < self.behaviour.null_late:
                page["NextShardIterator"] = self._issue(shard.shard_id, position, now, ends_next=True)
            return page  # shard-end: no NextShardIterator once a closed shard is read to its end
        page["NextShardIterator"] = self._issue(shard.shard_id, position, now)
        return page

    def _empty_page(self) -> bool:
        if self._empty_run > 0:
            self._empty_run -= 1
            return True
        if self.rng.random() < self.behaviour.empty_pages:
            self._empty_run = self.rng.randint(0, self.behaviour.empty_runs)
            return True
        return False

    def list_streams(self, **parameters: Any) -> dict[str, Any]:
        self._call("ListStreams", parameters)
        return {
            "Streams": [{"StreamArn": STREAM_ARN, "TableName": TABLE, "StreamLabel": STREAM_ARN.rsplit("/", 1)[-1]}]
        }
