"""The sizing arithmetic: aggregate updates from batches of a Zipf catalogue, index writes per partition."""

from __future__ import annotations

import random

import pytest

from leaderboard_tools.sizing import Boards, Workload, board_pressure, partition_load, shards_needed


def test_batches_of_one_update_one_aggregate_per_download() -> None:
    load = partition_load(Workload(downloads_per_second=300, songs=50, batch_size=1), 1)
    assert load.aggregate_updates_per_second == pytest.approx(300)
    assert load.index_writes_per_second == pytest.approx(600)


def test_one_song_is_updated_once_per_batch() -> None:
    load = partition_load(Workload(downloads_per_second=1000, songs=1, batch_size=100), 4)
    assert load.aggregate_updates_per_second == pytest.approx(10)
    assert load.busiest_partition_index_writes_per_second == pytest.approx(20)


def test_the_partitions_share_the_index_writes() -> None:
    workload = Workload(downloads_per_second=5000, songs=2000)
    one, eight = partition_load(workload, 1), partition_load(workload, 8)
    assert eight.index_writes_per_second == pytest.approx(one.index_writes_per_second)
    assert one.index_writes_per_second / 8 <= eight.busiest_partition_index_writes_per_second
    assert eight.busiest_partition_index_writes_per_second < one.busiest_partition_index_writes_per_second


def test_distinct_aggregates_per_batch_match_a_simulation_of_the_catalogue() -> None:
    # given the formula's expected updates per batch, and 3,000 batches drawn from the same Zipf catalogue
    workload = Workload(downloads_per_second=100, songs=1000, batch_size=100)
    expected_per_batch = partition_load(workload, 1).aggregate_updates_per_second  # one batch per second
    rng = random.Random(11)
    weights = workload.popularity()
    songs = range(len(weights))
    simulated = sum(len(set(rng.choices(songs, weights=weights, k=100))) for _ in range(3000)) / 3000
    # then they agree within 2 %
    assert simulated == pytest.approx(expected_per_batch, rel=0.02)


def test_the_fewest_shards_keep_the_busiest_partition_under_half_its_limit() -> None:
    workload = Workload(downloads_per_second=5000, songs=100_000)
    needed, load = shards_needed(workload)
    assert needed is not None
    assert load.busiest_share_of_limit <= 0.5
    assert partition_load(workload, needed - 1).busiest_share_of_limit > 0.5


def test_no_shard_count_helps_when_one_song_alone_writes_too_often() -> None:
    # 30,000 downloads/s in batches of 10: the top song's aggregate is written in nearly every batch
    needed, load = shards_needed(Workload(downloads_per_second=30_000, songs=1000, batch_size=10))
    assert needed is None
    assert load.busiest_share_of_limit > 0.5


def test_windows_write_each_aggregate_at_most_once_per_window() -> None:
    load = partition_load(Workload(1000, songs=10, aggregate_writes="per_window", window_seconds=5), 1)
    assert load.aggregate_updates_per_second == pytest.approx(10 / 5, rel=0.01)


def test_every_period_board_takes_the_month_boards_load_and_the_table_takes_them_all() -> None:
    # given 5,000 downloads/s kept in day, month and all-time boards, and the same with ten categories
    workload = Workload(downloads_per_second=5000, songs=1000)
    month_only = board_pressure(workload, Boards(periods=1), 4)
    three = board_pressure(workload, Boards(periods=3), 4)
    with_categories = board_pressure(workload, Boards(periods=3, categories=10), 4)
    # then each overall board is as hot as the month's, and the table's updates triple, then double again
    assert three.overall_board == month_only.overall_board
    assert three.aggregate_updates_per_second == pytest.approx(3 * month_only.aggregate_updates_per_second)
    assert with_categories.aggregate_updates_per_second == pytest.approx(6 * month_only.aggregate_updates_per_second)
    # and a category board is cooler than the overall board, while the hottest song's partition grows
    assert with_categories.busiest_category_board_index_writes_per_second is not None
    assert (
        with_categories.busiest_category_board_index_writes_per_second
        < with_categories.overall_board.busiest_partition_index_writes_per_second
    )
    assert month_only.hottest_entity_writes_per_second < three.hottest_entity_writes_per_second
    assert three.hottest_entity_writes_per_second < with_categories.hottest_entity_writes_per_second


def test_the_hottest_songs_partition_takes_its_downloads_and_one_update_per_board_and_batch() -> None:
    workload = Workload(downloads_per_second=1000, songs=1, batch_size=100)
    pressure = board_pressure(workload, Boards(periods=6, categories=2), 1)
    # one song: 1,000 downloads/s written raw, and 10 batches/s each updating its 12 boards
    assert pressure.hottest_entity_writes_per_second == pytest.approx(1000 + 10 * 12)
