"""A lagging checkpoint is caught up in bounded steps: one invocation's memory does not grow with the backlog.

The shipped `process_delivery`, on the stream model's DynamoDB and a stream made on demand
(`leaderboard_dev.bench.catch_up_memory.BacklogStream`), asked to count through the end of a backlog
of 100,000 downloads of 4 KB (400 MB of records; the function has 512 MB by default).
"""

from __future__ import annotations

from collections import Counter

import aggregator
from aggregator_settings import Settings
from leaderboard_dev.bench.catch_up_memory import BacklogStream, catch_up
from tests.stream_model.fake_dynamodb import FakeDynamoDB

TABLE, PROGRESS_TABLE = "memory-downloads", "memory-progress"


def test_an_invocation_catching_up_100000_records_of_4_kb_in_steps_peaks_under_256_mib() -> None:
    # given a shard whose checkpoint lags 100,000 downloads of 4 KB (400 MB) behind the bound
    stream = BacklogStream(records=100_000, item_bytes=4096)
    # when the aggregator is invoked through the backlog's end, with time enough to read it all
    (invocation,) = catch_up(aggregator, FakeDynamoDB(), stream, 2, TABLE, PROGRESS_TABLE)
    # then that one invocation reads the whole backlog in several steps and peaks under 256 MiB
    assert invocation.caught_up
    assert invocation.records_read == 100_000
    assert stream.iterators > 1
    assert invocation.peak_mib < 256, invocation


def test_an_invocation_short_of_time_reads_a_bounded_step_and_the_next_goes_on_from_its_checkpoint() -> None:
    # given a shard whose checkpoint lags 100,000 downloads of 4 KB behind the bound
    stream = BacklogStream(records=100_000, item_bytes=4096)
    # when each invocation has time for ten pages of the stream only
    first, second = catch_up(aggregator, FakeDynamoDB(), stream, 2, TABLE, PROGRESS_TABLE, pages_per_invocation=10)
    # then each reads a bounded step, moves the checkpoint on, and is not caught up
    assert 0 < first.records_read < 100_000
    assert second.records_read > 0
    assert first.checkpoint_after is not None
    assert second.checkpoint_after is not None
    assert second.checkpoint_after > first.checkpoint_after
    assert not first.caught_up


def test_a_backlog_of_several_read_budgets_drains_in_one_invocation_each_step_exact() -> None:
    # given a backlog several read budgets long
    records = Settings.read_budget_records * 2 + 777
    stream, dynamodb = BacklogStream(records=records, item_bytes=100, songs=7), FakeDynamoDB()
    # when the aggregator is invoked through its end
    invocations = list(catch_up(aggregator, dynamodb, stream, 10, TABLE, PROGRESS_TABLE))
    # then one invocation read it (in steps of at most a budget and a page), and every download is counted once
    assert len(invocations) == 1
    assert invocations[0].caught_up
    assert invocations[0].downloads == records
    expected = Counter(f"song-{index % 7:04d}" for index in range(records))
    stored = {
        item["songID"]["S"]: int(item["DownloadCount"]["N"])
        for (table, _), item in dynamodb.items.items()
        if table == TABLE and item.get("Month", {}).get("S") == "2018-01"
    }
    assert stored == dict(expected)
