"""Reading the table's stream from the host: shards, their progress items, and a shard through its empty pages.

DynamoDB Streams documents that a read may come back empty before the records ("If there are no
stream records available in the portion of the shard that the iterator points to, GetRecords
returns an empty list. Note that it might take multiple calls to get to a portion of the shard
that contains stream records", API Reference, *GetRecords*), that a shard is read to its end when
`NextShardIterator` is null, that an iterator expires after 15 minutes (`ExpiredIteratorException`)
and that records older than 24 hours are trimmed (`TrimmedDataAccessException`). It also limits
readers: "More than 2 processes are reading from the same streams shard at the same time.
Exceeding this limit may result in request throttling" (`LimitExceededException`). Lambda's
mapping and the aggregator already read each shard, so these reads back off on throttling
(botocore's standard retries, then a bounded backoff here), read one shard with one thread, and
stop within a time budget.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_core.bookkeeping import (
    CHECKPOINT,
    CHECKPOINT_SEQUENCE,
    RESUME_AT,
    SEQUENCE_WIDTH,
    SHARD_ENDED,
    SHARD_KEY,
)

THROTTLING = frozenset({"LimitExceededException", "ThrottlingException", "ProvisionedThroughputExceededException"})
PAGE_LIMIT = 1000
"""GetRecords' largest page ("GetRecords was called with a value of more than 1000 for the limit")."""
MINIMUM_SEQUENCE_DIGITS = 21
"""SequenceNumber: "Length Constraints: Minimum length of 21. Maximum length of 40"."""


def api_sequences(sequence: str, shard_start: str | None = None) -> list[str]:
    """The forms a sequence number padded to 40 digits (the progress table's) may take in GetShardIterator.

    The API takes it as a string of 21 to 40 characters and documents no padding: AWS writes it
    without leading zeros; a stream whose shard starts at a zero-padded number writes every number
    of the shard at that width. Each form is tried in turn; reads filter by value, so a refused form
    only costs a read from TRIM_HORIZON.
    """
    digits = str(int(sequence))
    forms = [digits.zfill(MINIMUM_SEQUENCE_DIGITS)]
    if shard_start and shard_start.startswith("0") and len(shard_start) > len(digits):
        forms.append(digits.zfill(len(shard_start)))
    ordered = (sequence, *forms) if len(sequence) < SEQUENCE_WIDTH else (*forms, sequence)
    return list(dict.fromkeys(form for form in ordered if len(form) <= SEQUENCE_WIDTH))


def sequence_of(record: dict[str, Any]) -> int:
    return int(record["dynamodb"]["SequenceNumber"])


def created_of(record: dict[str, Any]) -> float | None:
    """ApproximateCreationDateTime in epoch seconds ("rounded down to the closest second"), as boto3 parses it."""
    value = record.get("dynamodb", {}).get("ApproximateCreationDateTime")
    if value is None:
        return None
    return value.timestamp() if hasattr(value, "timestamp") else float(value)


def stream_shards(streams: Any, stream_arn: str) -> list[dict[str, Any]]:
    """Every shard DescribeStream lists (it pages by LastEvaluatedShardId; botocore has no paginator for it)."""
    shards: list[dict[str, Any]] = []
    parameters: dict[str, Any] = {"StreamArn": stream_arn}
    while True:
        description = streams.describe_stream(**parameters)["StreamDescription"]
        shards.extend(description.get("Shards", []))
        last = description.get("LastEvaluatedShardId")
        if not last:
            return shards
        parameters["ExclusiveStartShardId"] = last


def starting_sequence(shard: dict[str, Any]) -> str | None:
    return (shard.get("SequenceNumberRange") or {}).get("StartingSequenceNumber")


def is_open(shard: dict[str, Any]) -> bool:
    return "EndingSequenceNumber" not in (shard.get("SequenceNumberRange") or {})


@dataclass(frozen=True)
class ShardProgress:
    """A shard's item in the progress table (absent: nothing counted from it yet)."""

    shard_id: str
    checkpoint: str | None
    """Padded to 40 digits: everything of the shard at or below it is counted (or reported)."""
    ended: bool
    exists: bool
    checkpoint_sequence: str | None = None
    """The checkpoint as the stream spells it (GetShardIterator takes that string)."""
    resume_at: str | None = None
    """Read from this sequence (inclusive) while the checkpoint is below it: the shard's first record, or the
    first after a reported trimmed gap."""

    @property
    def start(self) -> tuple[str | None, str | None]:
        """(at, after): where the aggregator's next read of the shard begins, as the progress item says."""
        if self.resume_at is not None and (self.checkpoint is None or int(self.resume_at) > int(self.checkpoint)):
            return self.resume_at, None
        return None, self.checkpoint_sequence or self.checkpoint


def progress_key(stream_arn: str, shard_id: str) -> dict[str, Any]:
    """A shard's key in the progress table."""
    return {SHARD_KEY: {"S": f"{stream_arn}|{shard_id}"}}


def shard_progress(dynamodb: Any, progress_table: str, stream_arn: str, shard_id: str) -> ShardProgress:
    item = dynamodb.get_item(TableName=progress_table, Key=progress_key(stream_arn, shard_id), ConsistentRead=True).get(
        "Item"
    )
    if not item:
        return ShardProgress(shard_id, None, ended=False, exists=False)
    return ShardProgress(
        shard_id,
        (item.get(CHECKPOINT) or {}).get("S"),
        ended=bool((item.get(SHARD_ENDED) or {}).get("BOOL", False)),
        exists=True,
        checkpoint_sequence=(item.get(CHECKPOINT_SEQUENCE) or {}).get("S"),
        resume_at=(item.get(RESUME_AT) or {}).get("S"),
    )


@dataclass
class ShardReadOutcome:
    """How far one read of a shard got, and how many records it passed to its callback."""

    shard_id: str
    records: int = 0
    end: str = "not read"
    """shard_end (NextShardIterator null), bound (a record past the bound), tip (empty pages at an open
    shard's newest record), budget (out of time: what lies beyond is unknown)."""
    trimmed: bool = False
    """The starting point was older than the stream's retention: read from TRIM_HORIZON."""

    @property
    def complete(self) -> bool:
        return self.end in ("shard_end", "bound", "tip")


class ShardReader:
    """Reads one shard in sequence order, through empty pages, with backoff on throttling and a time budget."""

    def __init__(
        self,
        streams: Any,
        stream_arn: str,
        *,
        budget_seconds: float = 300.0,
        empty_pages_at_tip: int = 5,
        empty_page_pause: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._streams = streams
        self._stream_arn = stream_arn
        self._budget = budget_seconds
        self._empty_pages_at_tip = empty_pages_at_tip
        self._pause = empty_page_pause
        self._sleep = sleep
        self._clock = clock

    def _iterator(
        self, shard_id: str, kind: str, sequence: str | None, outcome: ShardReadOutcome, shard_start: str | None
    ) -> str | None:
        """An iterator at (or after) `sequence`; from TRIM_HORIZON when no form of it is accepted (trimmed)."""
        if sequence is not None:
            for form in api_sequences(sequence, shard_start):
                try:
                    return self._streams.get_shard_iterator(
                        StreamArn=self._stream_arn, ShardId=shard_id, ShardIteratorType=kind, SequenceNumber=form
                    ).get("ShardIterator")
                except ClientError as error:
                    if _code(error) not in ("TrimmedDataAccessException", "ValidationException"):
                        raise
            outcome.trimmed = True
        return self._streams.get_shard_iterator(
            StreamArn=self._stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
        ).get("ShardIterator")

    def read(
        self,
        shard_id: str,
        on_record: Callable[[dict[str, Any]], None],
        *,
        after: str | None = None,
        at: str | None = None,
        past_bound: Callable[[dict[str, Any]], bool] = lambda record: False,
        open_shard: bool = True,
        shard_start: str | None = None,
    ) -> ShardReadOutcome:
        """Hand every record from `after` (exclusive), `at` (inclusive) or TRIM_HORIZON to `on_record`, in order.

        Stops before the first record for which `past_bound` is true, at the shard's end, at the tip of
        an open shard (consecutive empty pages), or when the budget is spent.
        """
        outcome = ShardReadOutcome(shard_id)
        deadline = self._clock() + self._budget
        kind, start = (
            ("AT_SEQUENCE_NUMBER", at) if at else ("AFTER_SEQUENCE_NUMBER", after) if after else ("TRIM_HORIZON", None)
        )
        iterator = self._iterator(shard_id, kind, start, outcome, shard_start)
        # records at or below the floor are skipped by value: a start refused in every form reads from TRIM_HORIZON
        floor = int(at) - 1 if at else int(after) if after else -1
        last_seen: str | None = None
        empty_pages, throttled = 0, 0
        while iterator:
            if self._clock() > deadline:
                outcome.end = "budget"
                return outcome
            try:
                page = self._streams.get_records(ShardIterator=iterator, Limit=PAGE_LIMIT)
            except ClientError as error:
                code = _code(error)
                if code in THROTTLING:
                    throttled += 1
                    self._sleep(min(10.0, 0.5 * 2**throttled) * random.uniform(0.5, 1.0))
                    continue
                if code == "ExpiredIteratorException":
                    iterator = (
                        self._iterator(shard_id, "AFTER_SEQUENCE_NUMBER", last_seen, outcome, shard_start)
                        if last_seen
                        else self._iterator(shard_id, kind, start, outcome, shard_start)
                    )
                    continue
                if code == "TrimmedDataAccessException":
                    outcome.trimmed = True
                    iterator = self._iterator(shard_id, "TRIM_HORIZON", None, outcome, shard_start)
                    continue
                raise
            throttled = 0
            records = page.get("Records", [])
            for record in records:
                if sequence_of(record) <= floor:
                    continue
                if past_bound(record):
                    outcome.end = "bound"
                    return outcome
                outcome.records += 1
                last_seen = record["dynamodb"]["SequenceNumber"]
                on_record(record)
            iterator = page.get("NextShardIterator")
            if records:
                empty_pages = 0
                continue
            empty_pages += 1
            if iterator and open_shard and empty_pages >= self._empty_pages_at_tip:
                outcome.end = "tip"
                return outcome
            if iterator:
                self._sleep(self._pause)
        outcome.end = "shard_end"
        return outcome


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))
