"""One conditional write per aggregate and shard: exact under redelivery, independent across shards (moto)."""

from __future__ import annotations

from typing import Any

import pytest

from aggregate_store import (
    PRUNED_BEFORE_ATTRIBUTE,
    AggregateStore,
    CorruptWatermark,
    WatermarkInconsistency,
    WatermarkRetention,
)
from delivery import ShardRef
from download_records import AggregateKey, Schema, pad_sequence
from leaderboard_order import leaderboard_partition, order_of
from tests.streams import STREAM_ARN, TABLE_ARN
from tests.unit.conftest import TABLE, count_of
from window_state import Segment

KEY = AggregateKey("song1", "2018-01")
SHARD_A = ShardRef(STREAM_ARN, "shardId-a")
SHARD_B = ShardRef(STREAM_ARN, "shardId-b")
RETENTION = WatermarkRetention(maximum_record_age_seconds=3600, window_seconds=60)
NOW = 1_516_000_000


def exact(*sequences: int, created: int = NOW) -> Segment:
    padded = tuple(pad_sequence(str(n)) for n in sequences)
    return Segment(len(padded), padded[0], padded[-1], created, created, sequences=padded)


def compressed(count: int, low: int, high: int, created: int = NOW) -> Segment:
    return Segment(count, pad_sequence(str(low)), pad_sequence(str(high)), created, created)


def store(client: Any, now: float = NOW) -> AggregateStore:
    return AggregateStore(client, TABLE, Schema(), RETENTION, clock=lambda: now)


def item(dynamodb: Any) -> dict[str, Any]:
    return dynamodb.get_item(TableName=TABLE, Key={"songID": {"S": "song1"}, "SK": {"S": "2018-01"}})["Item"]


def test_the_first_write_costs_one_update_and_records_the_shards_watermark(dynamodb: Any) -> None:
    # when three downloads of one shard are applied
    outcome = store(dynamodb).apply(KEY, SHARD_A, [exact(200, 205, 210)])
    # then one write adds them, and the aggregate carries the shard's watermark and the month
    assert (outcome.added, outcome.already_applied, outcome.writes) == (3, 0, 1)
    stored = item(dynamodb)
    assert stored["Month"] == {"S": "2018-01"}
    assert stored["DownloadCount"] == {"N": "3"}
    assert stored[SHARD_A.watermark_name] == {"S": f"{pad_sequence('210')}|{NOW}|2018-01-01T00:00:00.000"}


def test_a_redelivered_segment_adds_nothing(dynamodb: Any) -> None:
    store(dynamodb).apply(KEY, SHARD_A, [exact(200, 205, 210)])
    outcome = store(dynamodb).apply(KEY, SHARD_A, [exact(200, 205, 210)])
    assert (outcome.added, outcome.already_applied) == (0, 3)
    assert count_of(dynamodb, "song1", "2018-01") == 3


def test_a_longer_redelivery_adds_exactly_the_records_above_the_watermark(dynamodb: Any) -> None:
    # given the first two downloads applied, as by an attempt whose batch was then extended
    store(dynamodb).apply(KEY, SHARD_A, [exact(200, 205)])
    # when a delivery with those and two newer ones arrives
    outcome = store(dynamodb).apply(KEY, SHARD_A, [exact(200, 205, 210, 215)])
    # then only the two newer ones are added, in a second, conditional write
    assert (outcome.added, outcome.already_applied, outcome.writes) == (2, 2, 2)
    assert count_of(dynamodb, "song1", "2018-01") == 4


def test_sibling_shards_of_one_song_count_independently_in_any_order(dynamodb: Any) -> None:
    # given one song split for heat: shard A holds 200 and 210, shard B 205 and 215, read at the same time
    # when B's batch is applied before A's (the reviewer's example that lost two downloads in 0.1)
    store(dynamodb).apply(KEY, SHARD_B, [exact(205, 215)])
    outcome = store(dynamodb).apply(KEY, SHARD_A, [exact(200, 210)])
    # then nothing of A is taken for already applied: sequence numbers of two shards are never compared
    assert outcome.added == 2
    assert count_of(dynamodb, "song1", "2018-01") == 4


def test_a_child_shard_with_lower_sequence_numbers_still_counts(dynamodb: Any) -> None:
    store(dynamodb).apply(KEY, SHARD_A, [exact(900, 950)])
    store(dynamodb).apply(KEY, SHARD_B, [exact(10, 20)])
    assert count_of(dynamodb, "song1", "2018-01") == 4


def test_a_watermark_inside_downloads_written_together_is_an_inconsistency_not_a_guess(dynamodb: Any) -> None:
    # given a watermark at 205, and a pending segment 200..210 that travelled through the state without its list
    store(dynamodb).apply(KEY, SHARD_A, [exact(200, 205)])
    # when it is applied, then the aggregate is refused loudly and left as it was
    with pytest.raises(WatermarkInconsistency):
        store(dynamodb).apply(KEY, SHARD_A, [compressed(3, 200, 210)])
    assert count_of(dynamodb, "song1", "2018-01") == 2


def test_a_corrupt_watermark_fails_the_aggregate_until_repaired(dynamodb: Any) -> None:
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "2018-01"},
            "DownloadCount": {"N": "7"},
            SHARD_A.watermark_name: {"S": "overwritten"},
        },
    )
    with pytest.raises(CorruptWatermark):
        store(dynamodb).apply(KEY, SHARD_A, [exact(200)])
    assert count_of(dynamodb, "song1", "2018-01") == 7


def test_stale_watermarks_are_pruned_and_older_records_are_then_refused_not_counted(dynamodb: Any) -> None:
    # given shard A's watermark from long ago, past any record age the mapping delivers
    old = NOW - RETENTION.prune_after_seconds - 100
    store(dynamodb, now=old).apply(KEY, SHARD_A, [exact(200, 210, created=old)])
    # when shard B writes the aggregate now
    outcome = store(dynamodb).apply(KEY, SHARD_B, [exact(5, created=NOW)])
    # then A's watermark is removed in a second write, and the aggregate remembers up to when it pruned
    assert (outcome.added, outcome.pruned_watermarks, outcome.writes) == (1, 1, 2)
    stored = item(dynamodb)
    assert SHARD_A.watermark_name not in stored
    pruned_before = int(stored[PRUNED_BEFORE_ATTRIBUTE]["N"])
    assert old < pruned_before < NOW
    # when one of A's old records is delivered again, then it is refused: it cannot be proven uncounted
    again = store(dynamodb).apply(KEY, SHARD_A, [exact(210, created=old)])
    assert (again.added, [s.low[-3:] for s in again.refused]) == (0, ["210"])
    # and a record of A created after the pruning horizon still counts
    fresh = store(dynamodb).apply(KEY, SHARD_A, [exact(300, created=NOW)])
    assert fresh.added == 1
    assert count_of(dynamodb, "song1", "2018-01") == 4


def test_watermarks_of_a_previous_stream_are_noticed(dynamodb: Any) -> None:
    previous = ShardRef(f"{TABLE_ARN}/stream/2017-06-01T00:00:00.000", "shardId-a")
    store(dynamodb).apply(KEY, previous, [exact(500)])
    outcome = store(dynamodb).apply(KEY, SHARD_A, [exact(3)])
    assert outcome.previous_stream_labels == ("2017-06-01T00:00:00.000",)
    assert count_of(dynamodb, "song1", "2018-01") == 2


def test_every_write_sets_the_index_partition_and_the_order_from_the_count(dynamodb: Any) -> None:
    # given four leaderboard shards
    sharded = AggregateStore(dynamodb, TABLE, Schema(), RETENTION, clock=lambda: NOW, leaderboard_shards=4)
    # when the aggregate is written twice
    sharded.apply(KEY, SHARD_A, [exact(200, 205)])
    sharded.apply(KEY, SHARD_A, [exact(210)])
    # then it sits in its shard's partition of the month, ordered by its count and id
    stored = item(dynamodb)
    assert stored["Month"] == {"S": leaderboard_partition("2018-01", "song1", 4)}
    assert stored["Month"]["S"].startswith("2018-01#")
    assert stored["LeaderboardOrder"] == {"N": str(order_of(3, "song1"))}


def test_an_aggregate_written_before_the_order_existed_gets_its_order_from_its_count(dynamodb: Any) -> None:
    # given an aggregate with a count of 7 and no order, as version 0.2 wrote it
    dynamodb.put_item(
        TableName=TABLE,
        Item={"songID": {"S": "song1"}, "SK": {"S": "2018-01"}, "Month": {"S": "2018-01"}, "DownloadCount": {"N": "7"}},
    )
    # when a download is added, then the first write is refused and the second sets the order outright
    outcome = store(dynamodb).apply(KEY, SHARD_A, [exact(200)])
    assert (outcome.added, outcome.writes) == (1, 2)
    assert item(dynamodb)["LeaderboardOrder"] == {"N": str(order_of(8, "song1"))}
