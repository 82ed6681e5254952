"""How many leaderboard shards a workload needs: from downloads per second to index writes per partition.

The arithmetic of docs/sizing.md. A batch (or a window) writes each aggregate it
touches once; in a Zipf catalogue, song i (popularity p_i) is touched by a batch of B downloads
with probability 1 - (1 - p_i)^B. Every aggregate update moves the index sort key, which
DynamoDB applies to the index as a delete and a put: two index writes. All of a month's
aggregates sit in one index partition with one leaderboard shard, in N with N; DynamoDB
accepts about 1,000 writes per second per partition, and an index that falls behind throttles
writes to the table itself.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from leaderboard_core.index_layout import leaderboard_shard

PARTITION_WRITE_LIMIT = 1000
"""Writes per second one partition accepts (DynamoDB Developer Guide, partition key design)."""
INDEX_WRITES_PER_UPDATE = 2
"""An update that changes an item's index sort key is a delete and a put in the index."""


@dataclass(frozen=True)
class Workload:
    downloads_per_second: float
    songs: int
    zipf_exponent: float = 1.1
    batch_size: int = 100
    aggregate_writes: str = "per_batch"
    window_seconds: float = 60

    def popularity(self) -> list[float]:
        weights = [1 / rank**self.zipf_exponent for rank in range(1, self.songs + 1)]
        total = sum(weights)
        return [weight / total for weight in weights]

    def updates_per_second(self) -> list[float]:
        """Per song (most popular first): aggregate updates per second."""
        if self.aggregate_writes == "per_window":
            draws = self.downloads_per_second * self.window_seconds
            return [(1 - (1 - p) ** draws) / self.window_seconds for p in self.popularity()]
        batches_per_second = self.downloads_per_second / self.batch_size
        return [batches_per_second * (1 - (1 - p) ** self.batch_size) for p in self.popularity()]


@dataclass(frozen=True)
class PartitionLoad:
    shards: int
    aggregate_updates_per_second: float
    index_writes_per_second: float
    busiest_partition_index_writes_per_second: float

    @property
    def busiest_share_of_limit(self) -> float:
        return self.busiest_partition_index_writes_per_second / PARTITION_WRITE_LIMIT


def song_id(rank: int) -> str:
    """The load generator's ids: song001, song002, ... (the placement of real ids differs, their spread not)."""
    return f"song{rank:03d}"


def partition_load(workload: Workload, shards: int) -> PartitionLoad:
    updates = _updates(workload)
    per_partition = [0.0] * shards
    for placement, rate in zip(_placements(workload.songs), updates, strict=True):
        per_partition[placement % shards] += rate
    total = sum(updates)
    return PartitionLoad(
        shards=shards,
        aggregate_updates_per_second=total,
        index_writes_per_second=INDEX_WRITES_PER_UPDATE * total,
        busiest_partition_index_writes_per_second=INDEX_WRITES_PER_UPDATE * max(per_partition),
    )


@functools.lru_cache(maxsize=8)
def _updates(workload: Workload) -> list[float]:
    return workload.updates_per_second()


@functools.lru_cache(maxsize=8)
def _placements(songs: int) -> list[int]:
    """leaderboard_shard(id, n) == placement % n: the hash is computed once per song."""
    return [leaderboard_shard(song_id(rank), 2**64) for rank in range(1, songs + 1)]


def shards_needed(workload: Workload, target_share: float = 0.5, most: int = 64) -> tuple[int | None, PartitionLoad]:
    """The fewest shards keeping the busiest partition under `target_share` of its limit, or None if none does.

    None happens when the most popular song alone writes more than that: its aggregate cannot be
    split, so the remedy is larger batches or per_window writes, not more shards.
    """
    load = partition_load(workload, 1)
    for shards in range(1, most + 1):
        load = partition_load(workload, shards)
        if load.busiest_share_of_limit <= target_share:
            return shards, load
    return None, load


@dataclass(frozen=True)
class Boards:
    """The boards a download is counted in: one per maintained period, and as many again with a category."""

    periods: int = 1
    categories: int = 0
    """0: no category boards; K: a catalogue spread over K categories (song i in category i mod K)."""

    @property
    def per_download(self) -> int:
        return self.periods * (2 if self.categories else 1)


@dataclass(frozen=True)
class BoardPressure:
    overall_board: PartitionLoad
    """Each period's current overall board: all of them alike, and the one `leaderboard_shards` is sized for."""
    busiest_category_board_index_writes_per_second: float | None
    aggregate_updates_per_second: float
    """Every board of every period together: what the table takes."""
    hottest_entity_writes_per_second: float
    """The most popular song's table partition: its downloads plus its aggregates' updates, every board included."""

    @property
    def hottest_entity_share_of_limit(self) -> float:
        return self.hottest_entity_writes_per_second / PARTITION_WRITE_LIMIT


def board_pressure(workload: Workload, boards: Boards, shards: int) -> BoardPressure:
    """Index and table pressure when each download is counted in several boards.

    Every period's current board takes the same updates (each batch touches each song's board of
    each period once), so an `all` board is as hot as the month's and, never rotating, stays so; a
    category board takes only its category's songs. All of a song's boards share its partition key,
    hence its table partition, with its raw downloads.
    """
    overall = partition_load(workload, shards)
    updates = _updates(workload)
    category_busiest = None
    if boards.categories:
        per_category = [0.0] * boards.categories
        for rank, rate in enumerate(updates):
            per_category[rank % boards.categories] += rate
        category_busiest = INDEX_WRITES_PER_UPDATE * max(per_category) / shards
    top_downloads = workload.downloads_per_second * workload.popularity()[0]
    return BoardPressure(
        overall_board=overall,
        busiest_category_board_index_writes_per_second=category_busiest,
        aggregate_updates_per_second=overall.aggregate_updates_per_second * boards.per_download,
        hottest_entity_writes_per_second=top_downloads + updates[0] * boards.per_download,
    )
