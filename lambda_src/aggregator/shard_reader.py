"""Read one shard of the table's stream in sequence order, from the aggregator's own checkpoint.

What the event source mapping delivers is a trigger and a bound, never what is counted: a retry
may present records out of order, merged with newer ones or split, and sequence numbers are not
contiguous, so a delivered batch cannot tell whether an earlier record is missing. The shard
itself can: GetRecords reads "stream records sequentially" from a position, so reading from the
checkpoint yields every record after it, in order, without gaps. See docs/exactly-once.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from delivery import ShardRef
from leaderboard_core.bookkeeping import pad_sequence
from telemetry import logger

PAGE_LIMIT = 1000
"""GetRecords: "The upper limit is 1000." """
EMPTY_PAGES_AT_THE_TIP = 3
"""An unbounded read of an open shard stops after this many empty pages in a row: any prefix is correct."""
MAX_EMPTY_PAGES = 1000
"""A bounded read, or one of a closed shard, gives up after this many empty pages in a row (a bound beyond the tip was
named by a direct invocation, not delivered; a closed shard's end is its null NextShardIterator, not a run of empty
pages)."""
THROTTLE_RETRIES = 5
"""LimitExceededException: more than two readers of one shard, or too many requests; retried with backoff."""
THROTTLED = ("LimitExceededException", "ProvisionedThroughputExceededException", "ThrottlingException")


@dataclass(frozen=True)
class TrimmedGap:
    """The start is older than the stream's 24-hour retention: records after it may be gone unread."""

    checkpoint: str | None
    """The sequence the read was to start after (None: the shard's first record was already gone)."""
    first_readable_sequence: str | None
    first_readable_created: int | None


@dataclass
class ShardRead:
    records: list[dict[str, Any]] = field(default_factory=list)
    """Every record after the starting position, in sequence order, as Lambda events carry them."""
    reached_bound: bool = False
    shard_ended: bool = False
    """GetRecords returned NextShardIterator null, or the read met the closed shard's EndingSequenceNumber: every
    record after the start was read."""
    trimmed: TrimmedGap | None = None
    at_tip: bool = False
    """Stopped after empty pages in a row: everything the shard holds now was read (within the bound)."""
    start_contradicted: bool = False
    """GetShardIterator granted the shard's first sequence number twice and GetRecords called it trimmed twice."""
    pages: int = 0
    empty_pages: int = 0
    throttled: int = 0
    bytes_read: int = 0
    """The records' sizes as the stream states them (`SizeBytes`): what `keep_reading` bounds memory by."""

    @property
    def last_sequence(self) -> str | None:
        return pad_sequence(self.records[-1]["dynamodb"]["SequenceNumber"]) if self.records else None

    @property
    def last_raw_sequence(self) -> str | None:
        return self.records[-1]["dynamodb"]["SequenceNumber"] if self.records else None


def read_shard(
    streams: Any,
    shard: ShardRef,
    start: tuple[str | None, str | None],
    bound: str | None,
    keep_reading: Callable[[int, int], bool],
    sleep: Callable[[float], None] = time.sleep,
    nothing_counted: bool = False,
    ending: str | None = None,
) -> ShardRead:
    """Records of `shard` from `start` = (AT this sequence, AFTER this one), as the stream spells them, through `bound`.

    With neither, nothing says where the shard began (DescribeStream did not show its first sequence
    number, and AWS gives a listing without `StartingSequenceNumber` no meaning: "Required: No"), so
    it is read from the trim horizon and the records before the first one read are reported as
    possibly trimmed. Stops at the bound
    (records beyond it are left for a later read), at the shard's end, after a few empty pages
    when no bound is given, or when `keep_reading(records so far, their bytes)` says so: asked before
    every page ("a maximum of 1 MB of data or 1000 stream records"), it bounds memory whatever the
    backlog. Empty pages in the middle of a shard are read through: "it might take multiple calls
    to get to a portion of the shard that contains stream records". A closed shard's `ending` (DescribeStream's
    EndingSequenceNumber, "the last sequence number for the stream records contained within a shard") ends the read
    at that record, as a null NextShardIterator does, without the empty pages that may come after it; where it is
    not met, the read goes on to the null iterator, never taken for a tip after a few empty pages. Records after it
    in its page contradict it: they are kept, the error logged, and the read goes on as if it were not met. A start
    older than the trim point is reported (`trimmed`) and reading goes on from the trim horizon.
    """
    result = ShardRead()
    last = pad_sequence(ending) if ending is not None else None
    at, after = start
    pending = _PendingGap(None, certain=False) if at is None and after is None else None
    iterator, pending = _iterator(streams, shard, at, after, pending)
    refused_at_start = 0
    empty_in_a_row = 0
    while iterator is not None and keep_reading(len(result.records), result.bytes_read):
        try:
            page = streams.get_records(ShardIterator=iterator, Limit=PAGE_LIMIT)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            granted_at_start = nothing_counted and at is not None and after is None and pending is None
            refused_at_start += 1 if code == "TrimmedDataAccessException" and granted_at_start else 0
            if refused_at_start >= 2:
                # Trimmed, yet the iterator at the same number was granted again: a trim point that moves only
                # forward cannot do that ("a sequence number older than the trim point" is refused by
                # GetShardIterator), so the shard's listed first number names no record (DynamoDB Local).
                result.start_contradicted = True
                at = None
                iterator, pending = _iterator(streams, shard, at, after, pending)
                continue
            if code in ("ExpiredIteratorException", "TrimmedDataAccessException"):
                iterator, pending = _iterator(streams, shard, at, after, pending)
                continue
            if code in THROTTLED and result.throttled < THROTTLE_RETRIES:
                result.throttled += 1
                sleep(min(2.0, 0.1 * 2**result.throttled))
                continue
            if code in THROTTLED:
                return _with_gap(result, pending)
            raise
        result.pages += 1
        records = page.get("Records") or []
        if not records:
            result.empty_pages += 1
            empty_in_a_row += 1
        else:
            empty_in_a_row = 0
        if last is not None and last in [pad_sequence(record["dynamodb"]["SequenceNumber"]) for record in records[:-1]]:
            logger.error(
                "records after the shard's EndingSequenceNumber; read on as if it were not met",
                extra={
                    "shard": shard.shard_id,
                    "ending": ending,
                    "last_sequence": records[-1]["dynamodb"]["SequenceNumber"],
                },
            )
            last = None
        for record in records:
            sequence = pad_sequence(record["dynamodb"]["SequenceNumber"])
            if pending is not None:
                # The first record met after the trim horizon, whatever the bound: the gap ends before it.
                result.trimmed = TrimmedGap(pending.checkpoint, record["dynamodb"]["SequenceNumber"], _created(record))
                pending = None
            if bound is not None and sequence > bound:
                result.reached_bound = True
                return result
            result.records.append(_as_lambda_record(record, shard))
            result.bytes_read += record_bytes(record)
            at, after = None, record["dynamodb"]["SequenceNumber"]
            if sequence == last:
                result.shard_ended = True
                result.reached_bound = True
                return _with_gap(result, pending)
            if bound is not None and sequence == bound:
                result.reached_bound = True
                return result
        iterator = page.get("NextShardIterator")
        if iterator is None:
            result.shard_ended = True
            result.reached_bound = True
            return _with_gap(result, pending)
        if empty_in_a_row >= (EMPTY_PAGES_AT_THE_TIP if bound is None and ending is None else MAX_EMPTY_PAGES):
            result.at_tip = True
            return _with_gap(result, pending)
    return _with_gap(result, pending)


@dataclass(frozen=True)
class _PendingGap:
    """A read from the trim horizon whose gap ends before the first record it meets."""

    checkpoint: str | None
    certain: bool
    """TrimmedDataAccessException said the start was trimmed (else: the start is unknown, a gap only possible)."""


def _with_gap(result: ShardRead, pending: _PendingGap | None) -> ShardRead:
    """A trim the stream reported is reported even when no record was met after it."""
    if pending is not None and pending.certain:
        result.trimmed = TrimmedGap(pending.checkpoint, None, None)
    return result


def _iterator(
    streams: Any, shard: ShardRef, at: str | None, after: str | None, pending: _PendingGap | None
) -> tuple[str | None, _PendingGap | None]:
    """An iterator at `at`, just after `after`, or at the trim horizon; a start that was trimmed makes a pending gap.

    The gap's end is the first record the read itself meets, never a separate look-ahead: the trim point
    moves between calls ("before you use the iterator in a GetRecords request, a stream record in the
    shard exceeds the 24 hour period and is trimmed", TrimmedDataAccessException).
    """
    parameters: dict[str, Any] = {"StreamArn": shard.stream_arn, "ShardId": shard.shard_id}
    if at is not None:
        parameters.update(ShardIteratorType="AT_SEQUENCE_NUMBER", SequenceNumber=at)
    elif after is not None:
        parameters.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=after)
    else:
        parameters["ShardIteratorType"] = "TRIM_HORIZON"
    try:
        return streams.get_shard_iterator(**parameters).get("ShardIterator"), pending
    except ClientError as error:
        trimmed = error.response.get("Error", {}).get("Code") == "TrimmedDataAccessException"
        if not trimmed or (at is None and after is None):
            raise
    horizon = {"StreamArn": shard.stream_arn, "ShardId": shard.shard_id, "ShardIteratorType": "TRIM_HORIZON"}
    return streams.get_shard_iterator(**horizon).get("ShardIterator"), _PendingGap(after, certain=True)


def record_bytes(record: dict[str, Any]) -> int:
    """The record's size as the stream states it (`SizeBytes`), or as its new image serialises when it states none."""
    stream = record.get("dynamodb") or {}
    size = stream.get("SizeBytes")
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size
    return len(json.dumps(stream.get("NewImage") or {}, default=str))


def _created(record: dict[str, Any]) -> int | None:
    value = record.get("dynamodb", {}).get("ApproximateCreationDateTime")
    if isinstance(value, datetime):
        return int(value.timestamp())
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    return None


_LAMBDA_IDENTITY_FIELDS = {"Type": "type", "PrincipalId": "principalId"}
"""GetRecords' Identity shape names its fields Type and PrincipalId; Lambda events (and their filters, "DynamoDB
Streams and Time to Live") name them type and principalId."""


def _as_lambda_record(record: dict[str, Any], shard: ShardRef) -> dict[str, Any]:
    """GetRecords omits eventSourceARN, returns creation times as datetimes and names userIdentity's fields as its
    Identity shape does; Lambda events carry all three as data, with the field names a TTL deletion is known by."""
    stream = dict(record.get("dynamodb") or {})
    created = stream.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        stream["ApproximateCreationDateTime"] = created.timestamp()
    converted = {**record, "dynamodb": stream, "eventSourceARN": shard.stream_arn}
    identity = record.get("userIdentity")
    if isinstance(identity, dict):
        converted["userIdentity"] = {_LAMBDA_IDENTITY_FIELDS.get(name, name): value for name, value in identity.items()}
    return converted
