"""A lagging shard's backlog as the shipped aggregator reads it: a DynamoDB Streams client made on demand, and
direct invocations of `process_delivery` through its end, each measured alone.

`BacklogStream` holds a backlog of downloads (the checkpoint lagged: a paused mapping, an outage, a throttled shard)
of the stated size as GetRecords returns them, pages of at most 1 MB or 1,000 records, so that a backlog of a million
records of 4 KB costs nothing to hold. DynamoDB is whatever client the caller gives: moto in `make bench`'s memory
measurement, the stream model's fake in the unit tests of catch-up.
"""

from __future__ import annotations

import importlib
import math
import multiprocessing
import tracemalloc
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

STREAM_ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/backlog-downloads/stream/2018-01-01T00:00:00.000"
SHARD_ID = "shardId-00000001600000000000-backlog0"
FIRST_SEQUENCE = 10**20
SEQUENCE_STEP = 100
PAGE_BYTES = 1024 * 1024
"""GetRecords "can retrieve a maximum of 1 MB of data or 1000 stream records, whichever comes first"."""
PAGE_RECORDS = 1000


class BacklogStream:
    """A DynamoDB Streams client over one open shard of `records` downloads of about `item_bytes` each, made on demand.

    Download i is of song `i % songs` in January 2018; its sequence number is FIRST_SEQUENCE + i * SEQUENCE_STEP.
    """

    def __init__(self, records: int, item_bytes: int, songs: int = 100) -> None:
        self.records = records
        self.item_bytes = item_bytes
        self.songs = songs
        self.get_records_calls = 0
        self.iterators = 0
        """GetShardIterator calls: one per read of the shard, so one per step of an invocation."""

    def sequence(self, index: int) -> int:
        return FIRST_SEQUENCE + index * SEQUENCE_STEP

    @property
    def last_sequence(self) -> str:
        return str(self.sequence(self.records - 1))

    def describe_stream(self, **_: Any) -> dict[str, Any]:
        shard = {"ShardId": SHARD_ID, "SequenceNumberRange": {"StartingSequenceNumber": str(FIRST_SEQUENCE)}}
        return {"StreamDescription": {"StreamArn": STREAM_ARN, "StreamStatus": "ENABLED", "Shards": [shard]}}

    def get_shard_iterator(self, **parameters: Any) -> dict[str, Any]:
        self.iterators += 1
        kind = parameters["ShardIteratorType"]
        if kind == "TRIM_HORIZON":
            return {"ShardIterator": "0"}
        offset = int(parameters["SequenceNumber"]) - FIRST_SEQUENCE
        index = math.ceil(offset / SEQUENCE_STEP) if kind == "AT_SEQUENCE_NUMBER" else offset // SEQUENCE_STEP + 1
        return {"ShardIterator": str(max(0, index))}

    def get_records(self, **parameters: Any) -> dict[str, Any]:
        self.get_records_calls += 1
        position = int(parameters["ShardIterator"])
        limit = min(int(parameters.get("Limit", PAGE_RECORDS)), PAGE_RECORDS)
        page: list[dict[str, Any]] = []
        size = 0
        while position < self.records and len(page) < limit and size + self.item_bytes <= PAGE_BYTES:
            page.append(self.record(position))
            size += self.item_bytes
            position += 1
        return {"Records": page, "NextShardIterator": str(position)}

    def record(self, index: int) -> dict[str, Any]:
        """As boto3 returns it from GetRecords: the new image padded to the item size, SizeBytes stated."""
        image = {
            "songID": {"S": f"song-{index % self.songs:04d}"},
            "SK": {"S": f"download-{index:09d}"},
            "UserID": {"S": f"user-{index % 9973}"},
            "Timestamp": {"S": f"2018-01-{1 + index % 28:02d}T12:{index % 60:02d}:00Z"},
        }
        padding = self.item_bytes - sum(len(name) + len(value["S"]) for name, value in image.items())
        if padding > 0:
            image["Details"] = {"S": "x" * padding}
        return {
            "eventID": f"{index:x}",
            "eventName": "INSERT",
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1",
            "dynamodb": {
                "ApproximateCreationDateTime": datetime(2018, 1, 1, tzinfo=UTC),
                "Keys": {"songID": image["songID"], "SK": image["SK"]},
                "NewImage": image,
                "SequenceNumber": str(self.sequence(index)),
                "SizeBytes": self.item_bytes,
                "StreamViewType": "NEW_IMAGE",
            },
        }


@dataclass(frozen=True)
class Invocation:
    peak_mib: float
    records_read: int
    downloads: int
    checkpoint_after: str | None
    caught_up: bool


def backlog_invocation(
    dynamodb: Any,
    stream: BacklogStream,
    table: str,
    progress_table: str,
    deadline_margin_ms: int,
    send_failures: Callable[[list[Any]], bool],
    memory_mb: int | None = None,
) -> tuple[Any, Any, Any]:
    """The shipped aggregator's settings and dependencies over `stream` and `dynamodb` (one leaderboard shard, months,
    writes one at a time; the read budget of a function of `memory_mb`, None: the settings' defaults), and a direct
    invocation through the backlog's end."""
    from aggregate_store import AggregateStore
    from aggregator_settings import MEMORY_SIZE_VARIABLE, PER_BATCH, Settings, read_budget
    from delivery import parse_delivery
    from dependencies import Dependencies
    from download_records import Schema
    from shard_progress import ProgressStore

    table_arn = STREAM_ARN.rsplit("/stream/", 1)[0]
    settings = Settings(
        aggregates_table_name=table,
        table_arn=table_arn,
        progress_table_name=progress_table,
        schema=Schema(),
        leaderboard_shards=1,
        failure_queue_url=None,
        aggregate_writes=PER_BATCH,
        write_concurrency=1,
        deadline_margin_ms=deadline_margin_ms,
        **read_budget({MEMORY_SIZE_VARIABLE: str(memory_mb)} if memory_mb else {}),
    )
    progress = ProgressStore(dynamodb, progress_table)
    dependencies = Dependencies(
        store=AggregateStore(dynamodb, table, settings.schema, progress),
        progress=progress,
        streams=stream,
        executor=InlineExecutor(),
        send_failures=send_failures,
    )
    event = {"shardId": SHARD_ID, "eventSourceARN": STREAM_ARN, "throughSequenceNumber": stream.last_sequence}
    return settings, dependencies, parse_delivery(event, table_arn)


def catch_up(
    two_readers: Any,
    dynamodb: Any,
    stream: BacklogStream,
    invocations: int,
    table: str,
    progress_table: str,
    pages_per_invocation: int | None = None,
    memory_mb: int | None = None,
    memory_ceiling: bool = True,
    resident: bool = False,
) -> Iterator[Invocation]:
    """Invoke the shipped `process_delivery` (`two_readers`, loaded from lambda_src) through the backlog's end, up to
    `invocations` times or until it is caught up, each one measured alone: tracemalloc's peak, reset before it, or
    with `resident` the process's resident memory (ResidentMeter; catch_up_alone runs it in a fresh process).

    An invocation reads in bounded steps for as long as its time allows: here, `pages_per_invocation` GetRecords
    pages (None: no end), after which it has only the time to write what its step read. With `memory_ceiling`
    False the settings hold no memory ceiling: tracemalloc's own bookkeeping is resident memory too, so under it
    the ceiling would cut steps that in Lambda it leaves whole.
    """
    from invocation_context import InvocationContext

    settings, dependencies, delivery = backlog_invocation(
        dynamodb,
        stream,
        table,
        progress_table,
        deadline_margin_ms=1000,
        send_failures=lambda _messages: True,
        memory_mb=memory_mb,
    )
    if not memory_ceiling:
        settings = replace(settings, memory_ceiling_bytes=None)
    meter = ResidentMeter() if resident else TracedMeter()
    with meter:
        for _ in range(invocations):
            meter.reset()
            remaining_ms = _invocation_time(stream, pages_per_invocation, settings.deadline_margin_ms)
            try:
                _, report = two_readers.process_delivery(
                    delivery, InvocationContext(settings, dependencies, remaining_ms)
                )
            except two_readers.AggregatesNotWritten as not_yet:
                report = not_yet.report  # a step short of the bound: Lambda (or recover) invokes again
            yield Invocation(
                round(meter.peak_bytes() / 2**20, 1),
                report.records_read,
                report.downloads,
                report.checkpoint_after,
                report.caught_up,
            )
            if report.caught_up:
                return


class TracedMeter:
    """tracemalloc's peak of the Python allocations since `reset`: the same in any process, about six times the CPU."""

    def __enter__(self) -> TracedMeter:
        self._started = not tracemalloc.is_tracing()
        if self._started:
            tracemalloc.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self._started:
            tracemalloc.stop()

    def reset(self) -> None:
        tracemalloc.reset_peak()
        self._baseline = tracemalloc.get_traced_memory()[0]

    def peak_bytes(self) -> int:
        return tracemalloc.get_traced_memory()[1] - self._baseline


class ResidentMeter:
    """The process's resident memory (what Lambda's memory limit is on): its high-water mark since `reset` above what
    was resident then. Linux only (proc(5), /proc/pid/clear_refs "5": reset the peak resident set size); meaningful
    in a fresh process, where no freed memory of earlier work lies resident to be reused (catch_up_alone)."""

    def __enter__(self) -> ResidentMeter:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def reset(self) -> None:
        Path("/proc/self/clear_refs").write_text("5")
        self._baseline = _status_kib("VmRSS") * 1024

    def peak_bytes(self) -> int:
        return _status_kib("VmHWM") * 1024 - self._baseline


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise LookupError(f"/proc/self/status has no {field}")


def catch_up_alone(
    two_readers_module: str,
    dynamodb_factory: Callable[[], Any],
    stream: BacklogStream,
    invocations: int,
    table: str,
    progress_table: str,
    **options: Any,
) -> tuple[list[Invocation], BacklogStream]:
    """`catch_up` in a fresh process, each invocation measured by its resident memory (ResidentMeter): the memory
    Lambda limits, without tracemalloc's CPU. `two_readers` is imported there by name; the backlog goes there and
    back, its counters as the invocations left them."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(
            _catch_up_here, (two_readers_module, dynamodb_factory, stream, invocations, table, progress_table, options)
        )


def _catch_up_here(
    two_readers_module: str,
    dynamodb_factory: Callable[[], Any],
    stream: BacklogStream,
    invocations: int,
    table: str,
    progress_table: str,
    options: dict[str, Any],
) -> tuple[list[Invocation], BacklogStream]:
    two_readers = importlib.import_module(two_readers_module)
    found = list(
        catch_up(two_readers, dynamodb_factory(), stream, invocations, table, progress_table, resident=True, **options)
    )
    return found, stream


def _invocation_time(stream: BacklogStream, pages: int | None, deadline_margin_ms: int) -> Callable[[], int]:
    """An invocation's remaining time: ample until it has read `pages` pages, then only enough to write (no step
    more: the aggregator keeps 2 s at least beyond its deadline margin for writing)."""
    first = stream.get_records_calls
    return lambda: 900_000 if pages is None or stream.get_records_calls - first < pages else deadline_margin_ms + 2000


class InlineExecutor(Executor):
    """Runs each aggregate write at submission, on the calling thread: a measurement sees the handler, not a pool, and
    the stream model replays a history exactly."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:
            future.set_exception(error)
        return future
