"""One conditional write per aggregate and shard, from exact lists: exact under redelivery, across shards (moto)."""

from __future__ import annotations

from typing import Any

from aggregate_store import (
    RECOUNTED_THROUGH,
    WATERMARKS_PRUNED,
    AggregateStore,
)
from aggregate_writes import Contribution, watermark_value
from delivery import ShardRef
from download_records import AggregateKey, Schema
from leaderboard_core.bookkeeping import pad_sequence
from leaderboard_core.index_layout import leaderboard_partition, order_of
from shard_progress import ProgressStore
from tests.streams import STREAM_ARN, TABLE_ARN
from tests.unit.conftest import PROGRESS_TABLE, TABLE, count_of

KEY = AggregateKey("song1", "2018-01")
SHARD_A = ShardRef(STREAM_ARN, "shardId-a")
SHARD_B = ShardRef(STREAM_ARN, "shardId-b")
NOW = 1_516_000_000
HOUR = 3600


def records(*sequences: int, created: int = NOW) -> list[Contribution]:
    return [Contribution(pad_sequence(str(n)), created) for n in sequences]


def store(client: Any, now: float = NOW, shards: int = 1) -> AggregateStore:
    progress = ProgressStore(client, PROGRESS_TABLE, clock=lambda: now)
    return AggregateStore(client, TABLE, Schema(), progress, clock=lambda: now, leaderboard_shards=shards)


def checkpoint(client: Any, shard: ShardRef, sequence: int, ended: bool = False) -> None:
    """The shard's progress as the aggregator keeps it: its item created when first seen, then its checkpoint raised."""
    progress = ProgressStore(client, PROGRESS_TABLE, clock=lambda: NOW)
    progress.first_seen(shard, None, None)
    progress.advance(shard, pad_sequence(str(sequence)), str(sequence), NOW, ended)


OTHERS = [ShardRef(STREAM_ARN, f"shardId-{name}") for name in "cdef"]


def fed_by_many_shards(client: Any) -> None:
    """Four more shards' watermarks on the aggregate, not yet passed by any checkpoint: with A's, more than pruning
    waits for."""
    for index, other in enumerate(OTHERS):
        store(client).apply(KEY, other, records(1000 + index))


def item(dynamodb: Any) -> dict[str, Any]:
    return dynamodb.get_item(TableName=TABLE, Key={"songID": {"S": "song1"}, "SK": {"S": "2018-01"}})["Item"]


def test_the_first_write_costs_one_update_and_records_the_shards_watermark(dynamodb: Any) -> None:
    # when three downloads of one shard are applied
    outcome = store(dynamodb).apply(KEY, SHARD_A, records(200, 205, 210))
    # then one write adds them, and the aggregate carries the shard's watermark and the month
    assert (outcome.added, outcome.already_applied, outcome.writes) == (3, 0, 1)
    stored = item(dynamodb)
    assert stored["Month"] == {"S": "2018-01"}
    assert stored["DownloadCount"] == {"N": "3"}
    assert stored[SHARD_A.watermark_name] == {"S": watermark_value(pad_sequence("210"), NOW, SHARD_A)}
    assert stored[SHARD_A.watermark_name]["S"].endswith("|2018-01-01T00:00:00.000|shardId-a")


def test_a_redelivered_list_adds_nothing(dynamodb: Any) -> None:
    store(dynamodb).apply(KEY, SHARD_A, records(200, 205, 210))
    outcome = store(dynamodb).apply(KEY, SHARD_A, records(200, 205, 210))
    assert (outcome.added, outcome.already_applied, outcome.writes) == (0, 3, 1)
    assert count_of(dynamodb, "song1", "2018-01") == 3


def test_a_longer_list_adds_exactly_the_records_above_the_watermark(dynamodb: Any) -> None:
    # given the first two downloads applied, as by an invocation whose response was lost
    store(dynamodb).apply(KEY, SHARD_A, records(200, 205))
    # when a reader with those and two newer ones writes
    outcome = store(dynamodb).apply(KEY, SHARD_A, records(200, 205, 210, 215))
    # then only the two newer ones are added, in a second, conditional write
    assert (outcome.added, outcome.already_applied, outcome.writes) == (2, 2, 2)
    assert count_of(dynamodb, "song1", "2018-01") == 4


def test_sibling_shards_of_one_song_count_independently_in_any_order(dynamodb: Any) -> None:
    # given one song split for heat: shard A holds 200 and 210, shard B 205 and 215, read at the same time
    store(dynamodb).apply(KEY, SHARD_B, records(205, 215))
    outcome = store(dynamodb).apply(KEY, SHARD_A, records(200, 210))
    # then nothing of A is taken for already applied: sequence numbers of two shards are never compared
    assert outcome.added == 2
    assert count_of(dynamodb, "song1", "2018-01") == 4


def test_a_child_shard_with_lower_sequence_numbers_still_counts(dynamodb: Any) -> None:
    store(dynamodb).apply(KEY, SHARD_A, records(900, 950))
    store(dynamodb).apply(KEY, SHARD_B, records(10, 20))
    assert count_of(dynamodb, "song1", "2018-01") == 4


def test_a_corrupt_watermark_refuses_the_records_instead_of_guessing(dynamodb: Any) -> None:
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "2018-01"},
            "DownloadCount": {"N": "7"},
            SHARD_A.watermark_name: {"S": "overwritten"},
        },
    )
    outcome = store(dynamodb).apply(KEY, SHARD_A, records(200))
    assert outcome.added == 0
    assert [(c.sequence[-3:], "overwritten" in why) for c, why in outcome.refused] == [("200", True)]
    assert count_of(dynamodb, "song1", "2018-01") == 7


def test_records_created_at_or_before_a_recount_fence_are_refused_and_later_ones_counted(dynamodb: Any) -> None:
    # given an aggregate repaired by a recount of every download created up to NOW
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "2018-01"},
            "DownloadCount": {"N": "5"},
            "LeaderboardOrder": {"N": str(order_of(5, "song1"))},
            RECOUNTED_THROUGH: {"N": str(NOW)},
        },
    )
    # when a reader brings one download created before the fence and one after
    outcome = store(dynamodb).apply(KEY, SHARD_A, [*records(200, created=NOW - 5), *records(210, created=NOW + 5)])
    # then the earlier one is refused (the recount holds it) and the later one counted
    assert outcome.added == 1
    assert [(c.sequence[-3:], "recount" in why) for c, why in outcome.refused] == [("200", True)]
    assert count_of(dynamodb, "song1", "2018-01") == 6


def test_few_watermarks_are_never_pruned(dynamodb: Any) -> None:
    # given an aggregate fed by two shards, A read to its end
    store(dynamodb).apply(KEY, SHARD_A, records(200, 210))
    checkpoint(dynamodb, SHARD_A, 210, ended=True)
    # when B writes it, then A's watermark stays: the item is small, and no later write will need a proof
    outcome = store(dynamodb).apply(KEY, SHARD_B, records(5))
    assert (outcome.pruned_watermarks, WATERMARKS_PRUNED in item(dynamodb)) == (0, False)


def test_a_watermark_is_pruned_only_once_its_shards_checkpoint_has_passed_it(dynamodb: Any) -> None:
    # given an aggregate fed by more shards than pruning waits for, and shard A's watermark an hour old
    fed_by_many_shards(dynamodb)
    old = NOW - HOUR - 100
    store(dynamodb, now=old).apply(KEY, SHARD_A, records(200, 210, created=old))
    # when shard B writes while A's checkpoint is still below the watermark, then it stays
    checkpoint(dynamodb, SHARD_A, 205)
    kept = store(dynamodb).apply(KEY, SHARD_B, records(5))
    assert (kept.pruned_watermarks, SHARD_A.watermark_name in item(dynamodb)) == (0, True)
    # when A's checkpoint has passed it, then the next write removes it and marks the aggregate pruned
    checkpoint(dynamodb, SHARD_A, 210)
    pruned = store(dynamodb).apply(KEY, SHARD_B, records(6))
    assert (pruned.pruned_watermarks, pruned.writes) == (1, 2)
    stored = item(dynamodb)
    assert SHARD_A.watermark_name not in stored
    assert stored[WATERMARKS_PRUNED] == {"N": "1"}
    assert count_of(dynamodb, "song1", "2018-01") == 8


def test_after_pruning_a_late_write_is_proven_counted_and_a_new_record_proven_uncounted(dynamodb: Any) -> None:
    # given A's watermark pruned once A's checkpoint passed 210 and A ended
    fed_by_many_shards(dynamodb)
    store(dynamodb).apply(KEY, SHARD_A, records(200, 210))
    checkpoint(dynamodb, SHARD_A, 210, ended=False)
    checkpoint(dynamodb, SHARD_A, 220, ended=True)
    store(dynamodb).apply(KEY, SHARD_B, records(5))
    assert SHARD_A.watermark_name not in item(dynamodb)
    # when a write of A's 200..210 lands late (an abandoned thread), then the checkpoint proves them counted
    late = store(dynamodb).apply(KEY, SHARD_A, records(200, 210))
    assert (late.added, late.already_applied, late.transactions) == (0, 2, 0)
    # and records of A above the checkpoint (a reader that started from it) are counted, in a transaction
    fresh = store(dynamodb).apply(KEY, SHARD_A, records(230, 240))
    assert (fresh.added, fresh.transactions) == (2, 1)
    assert count_of(dynamodb, "song1", "2018-01") == 9


def test_a_progress_table_recreated_since_pruning_vouches_for_nothing(dynamodb: Any) -> None:
    # given A's watermark pruned under the progress table's genesis
    fed_by_many_shards(dynamodb)
    store(dynamodb).apply(KEY, SHARD_A, records(200, 210))
    checkpoint(dynamodb, SHARD_A, 210, ended=True)
    store(dynamodb).apply(KEY, SHARD_B, records(5))
    # when the progress table is lost and recreated, and A is read again from its start
    for entry in dynamodb.scan(TableName=PROGRESS_TABLE)["Items"]:
        dynamodb.delete_item(TableName=PROGRESS_TABLE, Key={"ShardKey": entry["ShardKey"]})
    ProgressStore(dynamodb, PROGRESS_TABLE, clock=lambda: NOW).first_seen(SHARD_A, None, None)
    again = store(dynamodb).apply(KEY, SHARD_A, records(200, 210))
    # then nothing is added: the records are refused for a recount, never counted twice
    assert (again.added, len(again.refused)) == (0, 2)
    assert "recount" in again.refused[0][1]
    assert count_of(dynamodb, "song1", "2018-01") == 7


def test_watermarks_of_a_previous_stream_are_noticed(dynamodb: Any) -> None:
    previous = ShardRef(f"{TABLE_ARN}/stream/2017-06-01T00:00:00.000", "shardId-a")
    store(dynamodb).apply(KEY, previous, records(500))
    outcome = store(dynamodb).apply(KEY, SHARD_A, records(3))
    assert outcome.previous_stream_labels == ("2017-06-01T00:00:00.000",)
    assert count_of(dynamodb, "song1", "2018-01") == 2


def test_every_write_sets_the_index_partition_and_the_order_from_the_count(dynamodb: Any) -> None:
    # given four leaderboard shards
    sharded = store(dynamodb, shards=4)
    # when the aggregate is written twice
    sharded.apply(KEY, SHARD_A, records(200, 205))
    sharded.apply(KEY, SHARD_A, records(210))
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
    outcome = store(dynamodb).apply(KEY, SHARD_A, records(200))
    assert (outcome.added, outcome.writes) == (1, 2)
    assert item(dynamodb)["LeaderboardOrder"] == {"N": str(order_of(8, "song1"))}
