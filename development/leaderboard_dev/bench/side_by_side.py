"""Ours against the guide's handler: stacks of the same module that differ only in the aggregator.

For each contender (ours `per_batch`, the module's default; ours `per_window`; the guide's one ADD
per download) and each batch size, one stack takes two loads of the same generated downloads:

- a clean load, written as fast as this client can: aggregate writes against the lower bound of
  the batches (or windows) actually delivered, aggregator throughput (records per second of its
  own processing time), freshness (last write acknowledged → every download counted), and the
  aggregate writes per song that the index takes (from the table's stream);
- then the same stack with a faulty build (leaderboard_dev.fault_builds: a share of the
  invocations fail after half of their records, the same share for every contender) and a second
  load in another month: the count error against the generator's own counts.

The bound, per batch: the distinct (song, month) pairs of its downloads, as the aggregator records
them (`distinct_aggregates` of each invocation that succeeded); with `per_window`, the distinct
pairs of each window, from the stream ranges the aggregator logged. Nothing coalescing a batch
(or a window) into one write per aggregate can write less.
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leaderboard_dev.aws import Clients, clients
from leaderboard_dev.bench.index_layout import bench_stack
from leaderboard_dev.bench.workload import (
    StreamContents,
    count_error,
    downloads_for,
    neighbour_months,
    phase_lines,
    read_aggregates,
    read_stream,
    say,
    truth_of,
    wait_for,
    write_paced,
)
from leaderboard_dev.fault_builds import faulty_aggregator, guide_aggregator
from leaderboard_dev.leaderboard import NotSettled
from leaderboard_dev.observe import aggregator_invocations, log_lines
from leaderboard_dev.settings import DIST, Endpoint

CLEAN_MONTH, CLEAN_SEED = "2024-01", 101
FAULT_MONTH, FAULT_SEED = "2024-06", 202


@dataclass(frozen=True)
class Contender:
    name: str
    aggregate_writes: str
    guide: bool = False
    separate_aggregates_table: bool = False
    """separate_aggregates_table: the aggregates in a table of their own, the stream holding downloads only."""

    @property
    def short(self) -> str:
        return {"ours_per_batch": "ob", "ours_per_window": "ow", "guide": "gd", "ours_separate_table": "os"}[self.name]


CONTENDERS = (
    Contender("ours_per_batch", "per_batch"),
    Contender("ours_per_window", "per_window"),
    Contender("guide", "per_batch", guide=True),
    Contender("ours_separate_table", "per_batch", separate_aggregates_table=True),
)
BY_NAME = {contender.name: contender for contender in CONTENDERS}


@dataclass(frozen=True)
class Plan:
    """Sizes of one benchmark run; FULL and SMOKE below. Per batch size: its clean load and batching window."""

    batch_sizes: tuple[int, ...]
    clean_downloads: tuple[int, ...]
    """The clean load at each batch size: big batches need many downloads to form more than a few."""
    batching_windows: tuple[int, ...]
    """MaximumBatchingWindowInSeconds at each batch size: long enough for this client's rate to fill a batch."""
    fault_downloads: int
    fault_batching_window_seconds: int
    """For the fault load: short, so that every batch size gets enough invocations for the fault rate to show."""
    fault_rate: float
    tumbling_window_seconds: int
    ladder: tuple[int, ...]
    rate_load: int
    rate_shares: tuple[float, ...]
    read_repeats: int
    workers: int
    """Stacks measured at once (processes): the emulator and Terraform wait far more than they compute."""
    clean_load: bool = True
    guide_batch_sizes: tuple[int, ...] | None = None
    """The batch sizes the guide's handler runs at (None: all). On the emulator, a batch of 10,000 single ADDs
    outlasts the module's 60-second aggregator timeout: every such invocation times out and is retried."""
    separate_table_batch_sizes: tuple[int, ...] = ()
    """The batch sizes `ours_separate_table` runs at, beside `ours_per_batch` (one table against two)."""
    board_configurations: tuple[str, ...] = ()
    """The boards part (bench/boards.py): the module's configurations of periods and category it deploys."""
    board_batch_sizes: tuple[int, ...] = ()
    board_batching_windows: tuple[int, ...] = ()
    board_downloads: int = 0
    """Each configuration's load at each of its batch sizes."""
    handler_cpu: bool = False
    """Measure the handler's CPU per download without the emulator (bench/handler_cpu.py), for the cost table."""
    catch_up_backlogs: tuple[int, ...] = (10_000,)
    """Backlogs (records behind the checkpoint) whose catch-up memory is measured (bench/catch_up_memory.py)."""
    catch_up_item_bytes: tuple[int, ...] = (100, 4096)
    all_in_downloads: int = 2_000
    """Downloads each per_batch configuration of the all-in part measures (bench/all_in.py), after a warm-up."""
    all_in_window_downloads: int = 6_000
    """Downloads of a 60-second window at the all-in part's rate: what per_window measures, whole."""
    backfill_downloads: int = 500
    """Items of history the backfill part counts (bench/backfill_cost.py)."""
    ledger_batch_sizes: tuple[int, ...] = ()
    """The batch sizes the ledger part runs at (bench/ledger_cost.py), all_in_downloads each; none: not run."""
    ledger_steady_downloads: int = 0
    """Downloads each configuration of the ledger part measures again at steady state (twice); 0: not measured."""

    def contenders_at(self, batch_size: int) -> tuple[Contender, ...]:
        guide_runs = self.guide_batch_sizes is None or batch_size in self.guide_batch_sizes
        separate_runs = batch_size in self.separate_table_batch_sizes
        return tuple(
            contender
            for contender in CONTENDERS
            if (guide_runs or not contender.guide) and (separate_runs or not contender.separate_aggregates_table)
        )

    def settle_timeout(self, downloads: int, fault_rate: float = 0.0) -> float:
        """Generous: on two shared cores the emulator's aggregator takes up to 50 ms a download, plus a window. Under
        faults each failed invocation is retried, bisected, on a worker started cold again (seconds each while CI runs
        both suites): a loaded MiniStack counted 900 of 2,000 downloads in 405 s at a 0.25 fault rate (six times
        50 ms a download)."""
        return 300 + self.tumbling_window_seconds + downloads / 20 * (1 + 20 * fault_rate)

    def clean_downloads_at(self, batch_size: int) -> int:
        return self.clean_downloads[self.batch_sizes.index(batch_size)]

    def batching_window_at(self, batch_size: int) -> int:
        return self.batching_windows[self.batch_sizes.index(batch_size)]


FULL = Plan(
    batch_sizes=(100, 1000, 10_000),
    clean_downloads=(10_000, 10_000, 100_000),
    batching_windows=(1, 5, 30),
    fault_downloads=5_000,
    fault_batching_window_seconds=2,
    fault_rate=0.25,
    tumbling_window_seconds=60,
    ladder=(1_000, 10_000, 100_000),
    rate_load=5_000,
    rate_shares=(0.25, 0.5, 1.0),
    read_repeats=3,
    workers=5,
    guide_batch_sizes=(100, 1000),
    separate_table_batch_sizes=(100,),
    board_configurations=("month", "day_month_all", "day_month_all_category"),
    board_batch_sizes=(100, 1000),
    board_batching_windows=(1, 5),
    board_downloads=10_000,
    handler_cpu=True,
    catch_up_backlogs=(10_000, 100_000, 1_000_000),
    catch_up_item_bytes=(100, 1024, 4096),
    all_in_downloads=3_000,
    all_in_window_downloads=60_000,
    backfill_downloads=20_000,
    ledger_batch_sizes=(100, 1000),
    ledger_steady_downloads=12_000,
)
SMOKE = Plan(
    batch_sizes=(100,),
    clean_downloads=(0,),
    batching_windows=(1,),
    fault_downloads=2_000,
    fault_batching_window_seconds=1,
    fault_rate=0.25,
    tumbling_window_seconds=5,
    ladder=(300, 3_000),
    rate_load=1_000,
    rate_shares=(0.5, 1.0),
    read_repeats=3,
    workers=4,
    clean_load=False,
)


def package(contender: Contender, fault_rate: float, directory: Path) -> Path:
    """The shipped zip, its faulty build, or the guide's handler, built once per run into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    if contender.guide:
        path = directory / f"guide-{fault_rate}.zip"
        return path if path.is_file() else guide_aggregator(fault_rate, path)
    if fault_rate == 0:
        return DIST / "aggregator.zip"
    path = directory / f"faulty-{fault_rate}.zip"
    return path if path.is_file() else faulty_aggregator(DIST / "aggregator.zip", fault_rate, path)


def run_contender(endpoint: Endpoint, name: str, batch_size: int, plan: Plan, directory: Path) -> dict[str, Any]:
    """One stack: the clean load, then the faulty build and the fault load. Top-level, so a process pool can run it.

    Without a clean load (the smoke), the stack takes the faulty build at once and the fault load stands for both.
    """
    contender = BY_NAME[name]
    aws = clients(endpoint)
    first_rate = 0.0 if plan.clean_load else plan.fault_rate
    variables = {
        "batch_size": batch_size,
        "maximum_batching_window_in_seconds": plan.batching_window_at(batch_size)
        if plan.clean_load
        else plan.fault_batching_window_seconds,
        "tumbling_window_in_seconds": plan.tumbling_window_seconds,
        "aggregate_writes": contender.aggregate_writes,
        "aggregator_package_path": str(package(contender, first_rate, directory)),
        "separate_aggregates_table": contender.separate_aggregates_table,
    }
    label = f"{name}, batch size {batch_size}"
    say(f"{label}: deploying")
    with bench_stack(endpoint, f"{contender.short}{batch_size}", **variables) as (deployment, outputs):
        clean = None
        if plan.clean_load:
            clean_load = Load(CLEAN_MONTH, CLEAN_SEED, plan.clean_downloads_at(batch_size))
            clean = measure_load(aws, outputs, contender, plan, clean_load)
            say(f"{label}: {clean['writes_per_100']:.1f} writes per 100, {clean['freshness_seconds']:.1f} s fresh")
            deployment.variables["aggregator_package_path"] = str(package(contender, plan.fault_rate, directory))
            deployment.variables["maximum_batching_window_in_seconds"] = plan.fault_batching_window_seconds
            outputs = deployment.apply()
        load = Load(FAULT_MONTH, FAULT_SEED, plan.fault_downloads, plan.fault_rate)
        faults = measure_load(aws, outputs, contender, plan, load)
        say(f"{label}: count error {faults['count_error']['absolute']} under faults")
    return {"aggregator": name, "batch_size": batch_size, "clean": clean or faults, "faults": faults}


@dataclass(frozen=True)
class Load:
    month: str
    seed: int
    downloads: int
    fault_rate: float = 0.0


def measure_load(aws: Clients, outputs: dict[str, Any], contender: Contender, plan: Plan, load: Load) -> dict[str, Any]:
    """Write the load as fast as this client can, wait for the truth, and take every figure of it.

    Freshness (clean loads only: under faults the guide reaches the total early, by over-counting):
    from the last acknowledged write until the aggregates add up to the downloads. Then the truth:
    every record checkpointed once (the logs), and for ours at least every download counted.
    """
    table, log_group = outputs["table_name"], outputs["aggregator_log_group_name"]
    aggregates = outputs.get("aggregates_table_name") or table
    downloads = downloads_for(load.downloads, load.month, load.seed)
    truth = truth_of(downloads)
    keys = candidate_keys(truth, load.month)
    total = len(downloads)
    since_ms = int(time.time() * 1000) - 1000
    timing = write_paced(aws, table, downloads, on_phase=phase_lines(f"{contender.name} {load.month}", total))
    freshness = None
    if not load.fault_rate:
        settled_at = wait_for(
            lambda: sum(read_aggregates(aws, aggregates, keys).values()) >= total,
            timeout=plan.settle_timeout(total),
            interval=1.0,
            describe=f"{contender.name}: {total} downloads counted",
        )
        freshness = round(settled_at - timing.finished_at, 2)
    state: dict[str, Any] = {"invocations": []}

    def every_record_delivered() -> bool:
        state["invocations"] = aggregator_invocations(log_lines(aws, log_group, since_ms))
        if delivered(state["invocations"]) < total:
            return False
        observed = read_aggregates(aws, aggregates, keys)
        if contender.aggregate_writes == "per_window" and total_writes(state["invocations"]) < len(observed):
            return False  # the window's final invocation has not logged its writes yet
        return contender.guide or sum(observed.values()) >= total

    settled = True
    try:
        wait_for(
            every_record_delivered,
            plan.settle_timeout(total, load.fault_rate),
            2.0,
            f"{contender.name}: every record delivered",
        )
    except NotSettled:
        settled = False
    invocations = state["invocations"]
    observed = read_aggregates(aws, aggregates, keys)
    stream = None if contender.guide else read_stream(aws, outputs["table_stream_arn"])
    failed = [invocation for invocation in invocations if not invocation["succeeded"]]
    succeeded = [invocation for invocation in invocations if invocation["succeeded"]]
    return {
        "month": load.month,
        "downloads": total,
        "fault_rate": load.fault_rate,
        "settled": settled,
        "ingest_rate": round(timing.rate, 1),
        "write_seconds": round(timing.seconds, 2),
        "freshness_seconds": freshness,
        "count_error": count_error(observed, truth),
        "failed_invocations": len(failed),
        "records_delivered_more_than_once": sum(i["records"] for i in invocations) - delivered(invocations),
        "retry_writes_allowance": sum(i["aggregate_writes"] for i in failed)
        + sum(i["already_applied"] for i in succeeded)
        + (failed_windows_bound(invocations, stream) if contender.aggregate_writes == "per_window" and stream else 0),
        **write_figures(invocations, contender, stream, total),
        **throughput(invocations),
        "aggregate_writes_by_song": None if stream is None else writes_by_song(stream, load.month),
        "invocations_logged": invocations if load.fault_rate and not contender.guide else None,
    }


def total_writes(invocations: list[dict[str, Any]]) -> int:
    return sum(invocation["aggregate_writes"] for invocation in invocations)


def candidate_keys(truth: dict[tuple[str, str], int], month: str) -> set[tuple[str, str]]:
    """Every aggregate a contender may write for this load: ours in the UTC month, the guide's in a neighbour too."""
    return {(song, candidate) for song, _ in truth for candidate in neighbour_months(month)}


def delivered(invocations: list[dict[str, Any]]) -> int:
    """Records the mapping checkpointed: those of the invocations that succeeded."""
    return sum(invocation["records"] for invocation in invocations if invocation["succeeded"])


def write_figures(
    invocations: list[dict[str, Any]], contender: Contender, stream: StreamContents | None, downloads: int
) -> dict[str, Any]:
    succeeded = [invocation for invocation in invocations if invocation["succeeded"] and invocation["records"]]
    writes = sum(invocation["aggregate_writes"] for invocation in invocations)
    recorded_bound = sum(invocation["distinct_aggregates"] for invocation in succeeded)
    figures: dict[str, Any] = {
        "aggregate_writes": writes,
        "batches": len(succeeded),
        "mean_batch": round(downloads / len(succeeded), 1) if succeeded else 0.0,
        "largest_batch": max((invocation["records"] for invocation in succeeded), default=0),
        "bound_recorded_per_batch": recorded_bound,
    }
    if stream is not None:
        figures["bound_from_stream_per_batch"] = distinct_per_group(succeeded, stream, by_window=False)
        # every success, final invocations without records too: each closes its window
        closing = [invocation for invocation in invocations if invocation["succeeded"]]
        figures["bound_from_stream_per_window"] = distinct_per_group(closing, stream, by_window=True)
        figures["bound_from_stream_per_read"] = distinct_per_read(closing, stream)
    bound = figures["bound_from_stream_per_window"] if contender.aggregate_writes == "per_window" else recorded_bound
    figures.update(
        bound=bound,
        stream_records_read_per_100=round(100 * sum(i["records_read"] for i in invocations) / downloads, 2),
        writes_per_100=round(100 * writes / downloads, 2),
        bound_per_100=round(100 * bound / downloads, 2),
        writes_over_bound=round(writes / bound, 4) if bound else None,
    )
    return figures


def failed_windows_bound(invocations: list[dict[str, Any]], stream: StreamContents) -> int:
    """What per_window's failed final invocations may have written before they failed, their retries writing it again:
    up to the distinct aggregates of each window one closed (its own summary logs none), once per window: its retry
    does not make it two."""
    windows = {i["window_start"] for i in invocations if i.get("final") and not i["succeeded"]}
    within = [{**i, "final": False} for i in invocations if i["window_start"] in windows]
    return distinct_per_group(within, stream, by_window=True)


def distinct_per_group(invocations: list[dict[str, Any]], stream: StreamContents, by_window: bool) -> int:
    """Distinct (song, month) pairs per batch, or per window, from the stream records in each invocation's range. A
    window is what its final invocation closes: a window start closed twice (its records delivered again after a
    failure, within the same window interval) is two windows, each written once."""
    sequences = sorted(stream.download_keys)
    groups: dict[Any, set[tuple[str, str]]] = {}
    closed: dict[Any, int] = {}
    for number, invocation in enumerate(invocations):
        start = invocation["window_start"]
        if invocation["first_sequence"] is not None and invocation["last_sequence"] is not None:
            low = bisect_left(sequences, int(invocation["first_sequence"]))
            high = bisect_right(sequences, int(invocation["last_sequence"]))
            group = groups.setdefault((start, closed.get(start, 0)) if by_window else number, set())
            group.update(stream.download_keys[sequence] for sequence in sequences[low:high])
        if by_window and invocation.get("final"):
            closed[start] = closed.get(start, 0) + 1
    return sum(len(group) for group in groups.values())


def distinct_per_read(invocations: list[dict[str, Any]], stream: StreamContents) -> int:
    """Distinct (song, month) pairs of each read the invocations logged (`read_ranges`), from the stream's records in
    its range: what a reader writing each aggregate once per read writes. A window's final invocation reads in steps
    when one read would outlast its time or memory budget, so per_window writes up to this, not to its windows."""
    sequences = sorted(stream.download_keys)
    total = 0
    for invocation in invocations:
        for first, last in invocation.get("read_ranges") or []:
            within = sequences[bisect_left(sequences, int(first)) : bisect_right(sequences, int(last))]
            total += len({stream.download_keys[sequence] for sequence in within})
    return total


def throughput(invocations: list[dict[str, Any]]) -> dict[str, Any]:
    """Records per second of the aggregator's own processing time (every invocation's duration, final ones too)."""
    records = delivered(invocations)
    milliseconds = sum(invocation["duration_ms"] for invocation in invocations)
    return {
        "invocations": len(invocations),
        "processing_seconds": round(milliseconds / 1000, 3),
        "records_per_second": round(1000 * records / milliseconds, 1) if milliseconds else None,
    }


def writes_by_song(stream: StreamContents, month: str) -> dict[str, int]:
    """Successful writes of each song's aggregate of `month`: what the index takes (each moves its sort key)."""
    return {song: count for (song, period), count in sorted(stream.aggregate_writes.items()) if period == month}
