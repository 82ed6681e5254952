"""Reviewer's attack that held: any interleaving of readers, late writers, checkpoints and pruning stays exact.

Two shards feed one aggregate. A reader snapshots its shard's checkpoint C and the aggregate's
records in (C, B]; its write may land at any later step (an abandoned thread, a slow retry), and
the checkpoint moves to B only after that write was acknowledged. Every record is two hours old,
so each write of one shard prunes the other's watermark as soon as its checkpoint has passed it:
the transactional proof path runs constantly. The count never exceeds the truth, and one
catch-up per shard at the end makes it exact. Passes on main (f1b1447).
"""

from __future__ import annotations

from typing import Any

import boto3
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from aggregate_store import AggregateStore, WatermarkContention
from aggregate_writes import Contribution
from delivery import ShardRef
from download_records import AggregateKey, Schema
from leaderboard_core.bookkeeping import pad_sequence
from shard_progress import ProgressStore
from tests.streams import STREAM_ARN
from tests.unit.conftest import PROGRESS_TABLE, TABLE, count_of, create_progress_table, create_table

KEY = AggregateKey("song1", "2018-01")
NOW = 1_516_000_000
SHARDS = (ShardRef(STREAM_ARN, "shardId-a"), ShardRef(STREAM_ARN, "shardId-b"))

STEP = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 1), st.integers(1, 3)),
    st.tuples(st.just("read"), st.integers(0, 1)),
    st.tuples(st.just("catch up"), st.integers(0, 1)),
    st.tuples(st.just("write"), st.integers(0, 20)),
    st.tuples(st.just("advance"), st.integers(0, 20)),
)


class Reader:
    def __init__(self, shard: int, records: list[str]) -> None:
        self.shard = shard
        self.records = records
        self.written = False


def fresh_tables() -> Any:
    dynamodb = create_table(TABLE, fresh=True)
    if PROGRESS_TABLE in dynamodb.list_tables()["TableNames"]:
        boto3.client("dynamodb", region_name="us-east-1").delete_table(TableName=PROGRESS_TABLE)
    create_progress_table()
    return dynamodb


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=30))
def test_review_any_interleaving_of_readers_late_writes_and_pruning_is_exact(aws: None, steps: list[Any]) -> None:
    # given two shards of one aggregate, records two hours old, and one store and progress table
    dynamodb = fresh_tables()
    progress = ProgressStore(dynamodb, PROGRESS_TABLE, clock=lambda: NOW)
    store = AggregateStore(dynamodb, TABLE, Schema(), progress, clock=lambda: NOW)
    shard_records: list[list[str]] = [[], []]
    for shard in SHARDS:
        progress.first_seen(shard, None, None)
    readers: list[Reader] = []

    def read(shard: int) -> Reader:
        checkpoint = progress.read(SHARDS[shard]).checkpoint
        return Reader(shard, [s for s in shard_records[shard] if checkpoint is None or s > checkpoint])

    def write(reader: Reader) -> None:
        if reader.records and not reader.written:
            try:
                outcome = store.apply(KEY, SHARDS[reader.shard], [Contribution(s, NOW - 7200) for s in reader.records])
            except WatermarkContention:
                return
            for name in ("transactions", "pruned_watermarks", "already_applied"):
                if getattr(outcome, name):
                    event(name)
        reader.written = True

    # when readers read, write and advance in any order, late writes included
    for step in steps:
        if step[0] == "append":
            shard, count = step[1], step[2]
            start = len(shard_records[shard])
            shard_records[shard] += [pad_sequence(str((start + n + 1) * 10)) for n in range(count)]
        elif step[0] == "read":
            readers.append(read(step[1]))
        elif step[0] == "catch up":
            reader = read(step[1])
            write(reader)
            if reader.written and reader.records:
                progress.advance(
                    SHARDS[reader.shard], reader.records[-1], reader.records[-1].lstrip("0"), NOW - 7200, ended=False
                )
        elif step[0] == "write" and readers:
            write(readers[step[1] % len(readers)])
        elif step[0] == "advance" and readers:
            reader = readers[step[1] % len(readers)]
            if reader.written and reader.records:
                progress.advance(
                    SHARDS[reader.shard], reader.records[-1], reader.records[-1].lstrip("0"), NOW - 7200, ended=False
                )
        # then the count never exceeds what the shards hold
        assert (count_of(dynamodb, "song1", "2018-01") or 0) <= sum(map(len, shard_records))
    # and one catch-up per shard from its checkpoint makes it exact
    for shard in (0, 1):
        write(read(shard))
    assert (count_of(dynamodb, "song1", "2018-01") or 0) == sum(map(len, shard_records))
