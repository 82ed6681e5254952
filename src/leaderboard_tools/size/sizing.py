"""How many leaderboard shards a workload needs and whether any number fits (monthly_cost.py: what it costs).

The arithmetic of docs/sizing.md. A batch (or a window) writes each aggregate it
touches once; in a Zipf catalogue, song i (popularity p_i) is touched by a batch of B downloads
with probability 1 - (1 - p_i)^B. Every aggregate update moves the index sort key, which
DynamoDB applies to the index as a delete and a put: two index writes. All of a month's
aggregates sit in one index partition with one leaderboard shard, in N with N; DynamoDB
accepts about 1,000 writes per second per partition, and an index that falls behind throttles
writes to the table itself.

Two kinds of partition must stay under that limit, and `recommend` checks both: the index's (N
spreads them; the fewest N keeping the busiest under `target_share` of the limit is the answer) and
the table partition of the most popular song, which holds its downloads and, in the guide's one
table, every aggregate of it (no N spreads it: when it is over the limit, no N fits).
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from dataclasses import dataclass, field

from leaderboard_core.index_layout import leaderboard_shard

PARTITION_WRITE_LIMIT = 1000
"""Writes per second one partition accepts (DynamoDB Developer Guide, partition key design)."""
INDEX_WRITES_PER_UPDATE = 2
"""An update that changes an item's index sort key is a delete and a put in the index."""

# The module's own limits and defaults (terraform/variables.tf), held equal by tests/unit/core/test_one_definition.py.
SHARDS_MOST = 64
"""leaderboard_shards: a whole number from 1 to 64."""
BATCH_SIZE_RANGE = (1, 10_000)
"""batch_size: 1-10000 records per invocation."""
BATCH_SIZE_DEFAULTS = {"per_batch": 100, "per_window": 1000}
"""batch_size's default by aggregate_writes (terraform/main.tf, local.default_batch_size)."""
WINDOW_SECONDS_RANGE = (1, 900)
"""tumbling_window_in_seconds: 1-900 (the aggregator needs window events, so never 0)."""
WINDOW_SECONDS_DEFAULT = 60
AGGREGATOR_MEMORY_MB = 512
"""aggregator_memory_size's default, at which the aggregator's GB-seconds are counted."""
QUERY_MEMORY_MB = 256
"""query_memory_size's default."""
AGGREGATOR_WRITE_CONCURRENCY = 8
"""aggregator_write_concurrency's default: aggregate writes an invocation has in flight at once."""

# What `size` itself accepts beyond the module's limits: the arithmetic runs once per song.
RATE_MOST = 10_000_000
"""Downloads (or queries) a second: far past what one table takes, where the arithmetic still holds finite figures."""
SONGS_MOST = 1_000_000
"""A catalogue this large takes about ten seconds; beyond it the tail changes the figures little and the run a lot."""
ZIPF_EXPONENT_MOST = 10.0
"""Popularity 1 / rank^s: past s = 10 the first song holds all but a thousandth of the downloads."""

# The aggregator's calls and CPU per invocation, as the benchmark measured them (docs/benchmark.md, "The handler's CPU
# per download"; development/benchmark-results/results.json, handler_cpu, ours_per_batch).
CALLS_IN_LINE_BESIDE_GET_RECORDS = 3
"""Per invocation, one after another: GetItem and UpdateItem of its shard's progress, and GetShardIterator."""
RECORDS_PER_GET_RECORDS = 1000
"""GetRecords returns up to 1,000 records: measured 1, 2 and 11 calls at batches of 100, 1,000 and 10,000."""
CPU_MS_PER_RECORD = 0.151
CPU_MS_PER_AGGREGATE_WRITE = 1.57
"""The handler's CPU, fitted (least largest relative error) to the seven ours_per_batch cases the benchmark measured
(three batch sizes, three board configurations; make bench at 76e1831): each within -13 % .. +13 % of its
measurement."""
CALL_LATENCY_SECONDS = 0.010
"""The benchmark's stated latency of a DynamoDB or Streams call: the upper end of AWS's "single-digit
milliseconds" for single-item operations (docs/benchmark.md, figure 8)."""
QUERY_READER_THREADS = 32
"""The query function reads up to 32 index partitions at once (query.MAX_READER_THREADS)."""
TOP_PAGE_READ_UNITS_PER_PARTITION = 0.5
"""A top-10 page reads 11 entries of each partition (about 40 fill 4 KB): one eventually consistent read of 4 KB."""
AMONG_READ_UNITS_PER_ENTITY = 0.5
"""An among request reads each entity's aggregate in one BatchGetItem, eventually consistent, each item rounded up to
4 KB on its own: half a read unit an entity (an aggregate is far under 4 KB)."""
AMONG_ENTITIES_MOST = 100
"""Entities one among request names at most (the keys of one BatchGetItem)."""


@dataclass(frozen=True)
class Workload:
    downloads_per_second: float
    songs: int
    zipf_exponent: float = 1.1
    batch_size: int = BATCH_SIZE_DEFAULTS["per_batch"]
    aggregate_writes: str = "per_batch"
    window_seconds: float = WINDOW_SECONDS_DEFAULT
    edit_share: float = 0.0
    """With `retractions`: the share of downloads later edited in what they count (their song, time, category or
    sum): each edit is one more stream record, and writes the aggregate it leaves and the one it enters."""
    delete_share: float = 0.0
    """With `retractions`: the share of downloads later deleted (not by TTL): one more stream record each, and a
    write of the aggregate it leaves."""
    ledger: bool = False
    """Ledger mode (`ledger`, with `retractions`): one conditional write of the ledger per download key and step."""
    first_reached: bool = False
    """The tie-break `first_reached`: one strongly consistent read of each aggregate before its write."""

    def __post_init__(self) -> None:
        """The arithmetic's domain: what `size` refuses at its command line, refused here too (ValueError)."""
        refusals = [
            (0 < self.downloads_per_second <= RATE_MOST, f"downloads_per_second above 0, at most {RATE_MOST:,}"),
            (1 <= self.songs <= SONGS_MOST, f"songs 1-{SONGS_MOST}"),
            (0 <= self.zipf_exponent <= ZIPF_EXPONENT_MOST, f"zipf_exponent 0-{ZIPF_EXPONENT_MOST:g}"),
            (BATCH_SIZE_RANGE[0] <= self.batch_size <= BATCH_SIZE_RANGE[1], "batch_size 1-10000"),
            (self.aggregate_writes in ("per_batch", "per_window"), "aggregate_writes per_batch or per_window"),
            (WINDOW_SECONDS_RANGE[0] <= self.window_seconds <= WINDOW_SECONDS_RANGE[1], "window_seconds 1-900"),
            (0 <= self.edit_share <= 1, "edit_share 0-1"),
            (0 <= self.delete_share <= 1, "delete_share 0-1"),
        ]
        wrong = [wanted for holds, wanted in refusals if not holds]
        if wrong:
            raise ValueError(f"not a workload: {self} (wanted {', '.join(wrong)})")

    def popularity(self) -> list[float]:
        weights = [1 / rank**self.zipf_exponent for rank in range(1, self.songs + 1)]
        total = sum(weights)
        return [weight / total for weight in weights]

    @property
    def records_per_second(self) -> float:
        """Stream records of downloads: each download's INSERT, and one more record for each edit and deletion."""
        return self.downloads_per_second * (1 + self.edit_share + self.delete_share)

    def updates_per_second(self) -> list[float]:
        """Per song (most popular first): aggregate updates per second.

        A batch (or a window) writes each aggregate its records touch once. Each record is a download, a deletion or
        an edit in their shares, of a song drawn by popularity: a download touches the song's current aggregate, a
        deletion the one it leaves, an edit the one it leaves and the one it enters. Deletions and edits are taken to
        touch other aggregates than the batch's downloads (older buckets) and each other: an edit writes two, a
        deletion one, coalesced with the batch's other edits (deletions) of the song.
        """
        if self.aggregate_writes == "per_window":
            records, per_second = self.records_per_second * self.window_seconds, 1 / self.window_seconds
        else:
            records, per_second = self.batch_size, self.records_per_second / self.batch_size
        total = 1 + self.edit_share + self.delete_share
        kinds = [(1 / total, 1), (self.delete_share / total, 1), (self.edit_share / total, 2)]
        return [
            per_second * sum(writes * (1 - (1 - share * p) ** records) for share, writes in kinds if share)
            for p in self.popularity()
        ]

    @property
    def ledger_writes_per_second(self) -> float:
        """Ledger mode: one conditional write per distinct download key in a step. A download's insert and its later
        edits and deletions are taken to fall in different steps, so each stream record is a write of its own (the
        most a step writes); 0 without the ledger."""
        return self.records_per_second if self.ledger else 0.0

    @property
    def invocations_per_second(self) -> float:
        """The aggregator's invocations with records, batches full (a window's final invocation left out)."""
        return self.records_per_second / self.batch_size


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


def shards_needed(
    workload: Workload, target_share: float = 0.5, most: int = SHARDS_MOST
) -> tuple[int | None, PartitionLoad]:
    """The fewest shards keeping the busiest index partition under `target_share` of its limit, or None if none does.

    None happens when the most popular song alone writes more than that: its aggregate cannot be
    split, so the remedy is larger batches or per_window writes, not more shards. N partitions take
    at least 1/N of the index writes each, so no N below that bound is computed.
    """
    total = INDEX_WRITES_PER_UPDATE * sum(_updates(workload))
    fewest = max(1, math.ceil(total / (target_share * PARTITION_WRITE_LIMIT) - 1e-9))
    load = partition_load(workload, min(fewest, most))
    for shards in range(fewest, most + 1):
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
    """The busiest index partition of any category board (songs placed as the module places them)."""
    aggregate_updates_per_second: float
    """Every board of every period together: what the table takes."""
    hottest_entity_writes_per_second: float
    """The most popular song's table partition: its downloads plus its aggregates' updates, every board included
    (with the aggregates in a table of their own, the busier of the two partitions)."""
    hottest_entity_downloads_per_second: float = 0.0
    """The application's writes of its download items: downloads, edits and deletions."""
    hottest_entity_aggregate_updates_per_second: float = 0.0
    separate_aggregates_table: bool = False

    @property
    def hottest_entity_share_of_limit(self) -> float:
        return self.hottest_entity_writes_per_second / PARTITION_WRITE_LIMIT


def board_pressure(
    workload: Workload, boards: Boards, shards: int, separate_aggregates_table: bool = False
) -> BoardPressure:
    """Index and table pressure when each download is counted in several boards.

    Every period's current board takes the same updates (each batch touches each song's board of
    each period once), so an `all` board is as hot as the month's and, never rotating, stays so; a
    category board takes only its category's songs. All of a song's boards share its partition key,
    hence its table partition, with its raw downloads (in the guide's one table; with
    `separate_aggregates_table`, its aggregates share one partition of the aggregates' table).
    """
    overall = partition_load(workload, shards)
    updates = _updates(workload)
    category_busiest = None
    if boards.categories:
        per_partition: defaultdict[tuple[int, int], float] = defaultdict(float)
        for rank, (placement, rate) in enumerate(zip(_placements(workload.songs), updates, strict=True)):
            per_partition[(rank % boards.categories, placement % shards)] += rate
        category_busiest = INDEX_WRITES_PER_UPDATE * max(per_partition.values())
    top_downloads = workload.records_per_second * workload.popularity()[0]
    top_updates = updates[0] * boards.per_download
    return BoardPressure(
        overall_board=overall,
        busiest_category_board_index_writes_per_second=category_busiest,
        aggregate_updates_per_second=overall.aggregate_updates_per_second * boards.per_download,
        hottest_entity_writes_per_second=(
            max(top_downloads, top_updates) if separate_aggregates_table else top_downloads + top_updates
        ),
        hottest_entity_downloads_per_second=top_downloads,
        hottest_entity_aggregate_updates_per_second=top_updates,
        separate_aggregates_table=separate_aggregates_table,
    )


INDEX_TOO_HOT = "index"
"""No N keeps the busiest index partition under the target: the most popular song's aggregate alone is too hot."""
PARTITION_KEY_TOO_HOT = "partition_key"
"""The most popular song's table partition is over the limit, which no N changes."""


@dataclass(frozen=True)
class Sizing:
    """`size`'s answer: the shards, or why no number fits, and the load at the shard counts it shows."""

    workload: Workload
    boards: Boards
    target_share: float
    leaderboard_shards: int | None
    """The fewest N that keeps every partition under its limit; None when no N does."""
    shown: int
    """The shard count the figures below are for: leaderboard_shards, or the most the module allows."""
    load: PartitionLoad
    pressure: BoardPressure
    rows: list[PartitionLoad]
    """1, 2, 4, ... below `shown`, then `shown` itself."""
    too_hot: list[str] = field(default_factory=list)
    """INDEX_TOO_HOT and/or PARTITION_KEY_TOO_HOT when no N fits."""

    @property
    def fits(self) -> bool:
        return self.leaderboard_shards is not None


def recommend(
    workload: Workload, boards: Boards, target_share: float = 0.5, separate_aggregates_table: bool = False
) -> Sizing:
    """The fewest shards keeping every index partition under `target_share` of the limit (every board's) and the
    most popular song's table partition under the limit itself; or no number, and why."""
    index_shards, _ = shards_needed(workload, target_share)
    shown = index_shards or SHARDS_MOST
    pressure = board_pressure(workload, boards, shown, separate_aggregates_table)
    too_hot = [] if index_shards is not None else [INDEX_TOO_HOT]
    if pressure.hottest_entity_writes_per_second > PARTITION_WRITE_LIMIT:
        too_hot.append(PARTITION_KEY_TOO_HOT)
    rows = [partition_load(workload, 2**power) for power in range(7) if 2**power < shown]
    rows.append(pressure.overall_board)
    return Sizing(
        workload=workload,
        boards=boards,
        target_share=target_share,
        leaderboard_shards=None if too_hot else shown,
        shown=shown,
        load=pressure.overall_board,
        pressure=pressure,
        rows=rows,
        too_hot=too_hot,
    )
