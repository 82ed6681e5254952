"""Review of b0a90f0 (bounded steps within one invocation): what the steps keep from one step to the next.

The shipped `process_delivery` on the stream model's DynamoDB and `BacklogStream`, as in test_catch_up_memory.py.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

import aggregator
from leaderboard_dev.bench.catch_up_memory import BacklogStream, catch_up
from tests.stream_model.fake_dynamodb import FakeDynamoDB

TABLE, PROGRESS_TABLE = "memory-downloads", "memory-progress"


class MalformedBacklog(BacklogStream):
    """The same backlog, every download's Timestamp malformed (a producer's bug, a wrong TIMESTAMP attribute):
    each record is Rejected, reported to the failure queue (which takes it) and passed by the checkpoint."""

    def record(self, index: int) -> dict[str, Any]:
        record = super().record(index)
        record["dynamodb"]["NewImage"]["Timestamp"] = {"S": "not a timestamp"}
        return record


@pytest.mark.xfail(
    strict=True,
    reason="b0a90f0: report.rejected keeps every Rejected record (the whole stream record) of every step until "
    "publish, so a backlog of rejected records is held whole by one invocation, not one step's worth (rule 9)",
)
def test_an_invocation_passing_100000_rejected_records_of_4_kb_in_steps_peaks_under_256_mib() -> None:
    # given a shard whose checkpoint lags 100,000 malformed downloads of 4 KB (400 MB) behind the bound
    stream = MalformedBacklog(records=100_000, item_bytes=4096)
    # when the aggregator is invoked through the backlog's end, with time enough to read it all
    (invocation,) = catch_up(aggregator, FakeDynamoDB(), stream, 2, TABLE, PROGRESS_TABLE)
    # then that one invocation reads the whole backlog in several steps (every record rejected and reported)...
    assert invocation.caught_up
    assert invocation.records_read == 100_000
    assert invocation.downloads == 0
    assert stream.iterators > 1
    # ...and, as for counted downloads, peaks under 256 MiB: one step's records at a time
    assert invocation.peak_mib < 256, invocation


class Clock:
    """Simulated time of one invocation: each call to the stream or the failure queue costs what it costs on AWS."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.elapsed_ms = 0.0
        self.lowest_remaining_ms = float(timeout_ms)

    def remaining_ms(self) -> int:
        remaining = self.timeout_ms - self.elapsed_ms
        self.lowest_remaining_ms = min(self.lowest_remaining_ms, remaining)
        return int(remaining)

    def spend(self, ms: float) -> None:
        self.elapsed_ms += ms


class TimedMalformedBacklog(MalformedBacklog):
    """GetShardIterator 20 ms, GetRecords (a page of up to 1,000 records) 50 ms."""

    def __init__(self, clock: Clock, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.clock = clock

    def get_shard_iterator(self, **parameters: Any) -> dict[str, Any]:
        self.clock.spend(20)
        return super().get_shard_iterator(**parameters)

    def get_records(self, **parameters: Any) -> dict[str, Any]:
        self.clock.spend(50)
        return super().get_records(**parameters)


@pytest.mark.xfail(
    strict=True,
    reason="b0a90f0: a step starts whenever the deadline margin and 2 s remain, reads a whole budget in about a "
    "second and then reports what it rejected (send_failures: not bounded by the deadline, 10 messages per "
    "SendMessageBatch, one after another), so the last step of a backlog of rejected records runs past the timeout",
)
def test_an_invocation_through_60000_rejected_records_ends_before_its_timeout() -> None:
    from aggregate_store import AggregateStore
    from aggregator_settings import PER_BATCH, Settings
    from delivery import parse_delivery
    from dependencies import Dependencies
    from download_records import Schema
    from leaderboard_dev.bench.catch_up_memory import SHARD_ID, STREAM_ARN
    from leaderboard_dev.bench.handler_cpu import InlineExecutor
    from shard_progress import ProgressStore

    # given a 60-second invocation (margin 5 s, the default), a backlog of 60,000 rejected records (three read
    # budgets) behind its bound, GetRecords at 50 ms a page and SendMessageBatch at 10 ms per batch of ten
    clock = Clock(timeout_ms=60_000)
    stream = TimedMalformedBacklog(clock, records=60_000, item_bytes=100)
    table_arn = STREAM_ARN.rsplit("/stream/", 1)[0]
    settings = Settings(
        aggregates_table_name=TABLE,
        table_arn=table_arn,
        progress_table_name=PROGRESS_TABLE,
        schema=Schema(),
        leaderboard_shards=1,
        failure_queue_url=None,
        aggregate_writes=PER_BATCH,
        write_concurrency=1,
        deadline_margin_ms=5000,
    )
    sent: list[int] = []

    def send_failures(messages: list[Any]) -> bool:
        sent.append(len(messages))
        clock.spend(10 * -(-len(messages) // 10))
        return True

    dynamodb = FakeDynamoDB()
    progress = ProgressStore(dynamodb, PROGRESS_TABLE)
    dependencies = Dependencies(
        store=AggregateStore(dynamodb, TABLE, settings.schema, progress),
        progress=progress,
        streams=stream,
        executor=InlineExecutor(),
        send_failures=send_failures,
    )
    event = {"shardId": SHARD_ID, "eventSourceARN": STREAM_ARN, "throughSequenceNumber": stream.last_sequence}
    # when it is invoked through the backlog's end
    with contextlib.suppress(aggregator.AggregatesNotWritten):  # out of time before its bound: retried
        aggregator.process_delivery(parse_delivery(event, table_arn), dependencies, settings, clock.remaining_ms)
    # then it handed its answer back before Lambda's timeout (a step it began was finished within it)
    assert clock.timeout_ms - clock.elapsed_ms > 0, (clock.elapsed_ms, sent)
