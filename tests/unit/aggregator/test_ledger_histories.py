"""Ledger mode over random histories: inserts, edits (across months, into and out of the filter, broken and fixed),
deletions and re-puts of a few download keys, some written before the stream; a backfill at a random point; a split;
reads through random records, a child read before its parent, and stale readers reading again. Whatever the history,
once every shard is read the boards equal a recount of the items' last images."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from progress_item import Progress
from tests.unit.aggregator.ledger_on_moto import ROOT, LedgerWorld
from tests.unit.conftest import create_progress_table, create_table

CHILD = "shardId-00000002000000000000-bbbb0000"
SONGS = ("song1", "song2")
NUMBERS = (0, 1, 2)
MONTHS = ("2018-01", "2018-02")

keys = st.tuples(st.sampled_from(SONGS), st.sampled_from(NUMBERS))
mostly = st.sampled_from([True, True, True, False])
puts = st.tuples(st.just("put"), keys, st.sampled_from(MONTHS), mostly, mostly)
steps = st.one_of(
    puts,
    puts,
    st.tuples(st.just("delete"), keys),
    st.tuples(st.just("read"), st.floats(min_value=0, max_value=1), st.booleans()),
    st.tuples(st.just("reread"), st.integers(min_value=0, max_value=10)),
)


@dataclass
class Play:
    world: LedgerWorld
    writing: str = ROOT
    seen: dict[str, list[Progress]] = field(default_factory=dict)

    def shards(self) -> list[str]:
        return [shard_id for shard_id, log in self.world.shards.items() if log.records]

    def step(self, step: tuple[Any, ...]) -> None:
        world = self.world
        match step:
            case ("put", (song, number), month, valid, download):
                world.put(self.writing, song, number, month, valid, download)
            case ("delete", (song, number)):
                world.delete(self.writing, song, number)
            case ("read", where, child_first) if self.shards():
                shard_id = self.shards()[-1] if child_first else self.shards()[0]
                records = world.shards[shard_id].records
                through = records[min(len(records) - 1, int(where * len(records)))]["dynamodb"]["SequenceNumber"]
                self.seen.setdefault(shard_id, [world.unread(shard_id)])
                if world.progress(shard_id).exists:
                    self.seen[shard_id].append(world.progress(shard_id))
                if int(through) > int(world.progress(shard_id).checkpoint or 0):
                    world.read(shard_id, through=through, skip_ancestors=child_first and shard_id == CHILD)
            case ("reread", which) if self.seen:
                shard_id = sorted(self.seen)[which % len(self.seen)]
                stale = self.seen[shard_id][which % len(self.seen[shard_id])]
                world.reread(shard_id, stale)

    def split(self) -> None:
        """The shard splits: the writes from now on go to its child, whose sequence numbers are lower."""
        if self.writing == ROOT and self.world.shards[ROOT].records:
            self.world.split(ROOT, CHILD, first_sequence=500)
            self.writing = CHILD

    def finish(self) -> None:
        for shard_id in self.shards():
            if int(self.world.last(shard_id)) > int(self.world.progress(shard_id).checkpoint or 0):
                self.world.read(shard_id)


history_before = st.lists(st.tuples(keys, st.sampled_from(MONTHS)), max_size=3)


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each history starts a moto of its own; no emulator endpoint may leak in."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    before=history_before,
    history=st.lists(steps, max_size=24),
    backfill_at=st.integers(min_value=0, max_value=24),
    split_at=st.integers(min_value=1, max_value=12),
)
def test_any_history_read_any_way_ends_with_the_boards_of_the_items_last_images(
    credentials: None, before: list[Any], history: list[tuple[Any, ...]], backfill_at: int, split_at: int
) -> None:
    with mock_aws():
        # given the tables, the failure queue, the items written before the stream, and the history on the stream with
        # a backfill and a split at random points, and reads as they come
        create_progress_table()
        dynamodb = create_table()
        sqs = boto3.client("sqs", region_name="us-east-1")
        world = LedgerWorld(dynamodb, sqs, sqs.create_queue(QueueName="test-failures")["QueueUrl"])
        for (song, number), month in before:
            world.history_before_the_stream(song, number, month)
        play = Play(world)
        for position, step in enumerate(history):
            if position == backfill_at:
                world.backfill()
            if position == split_at:
                play.split()
            play.step(step)
        if backfill_at >= len(history):
            world.backfill()
        # when every shard is read to its last record, parents first
        play.finish()
        # then the boards are the recount of the items' last images, and nothing was refused
        assert world.boards() == world.recount()
        assert [message for message in world.reports() if message["kind"] != "rejected_download"] == []
