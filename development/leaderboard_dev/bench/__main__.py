"""`python -m leaderboard_dev.bench [part] [--smoke]`: the benchmark on the emulator AWS_ENDPOINT_URL names.

Parts: `all` (default: the handler's CPU, then side by side, boards, reads and freshness, then
the report), `side-by-side`, `boards` (writes per 100 downloads by the boards kept: boards.json),
`handler-cpu` (the aggregator's CPU per download without the emulator: handler_cpu.json),
`all-in` (every request of each configuration counted at the SDK and priced, without the emulator:
all_in.json), `catch-up-memory` (peak memory of the invocations that catch up a lagging checkpoint, without the
emulator: catch_up_memory.json), `ledger` (ledger mode against per_batch and the guide, all in, without the
emulator: ledger.json), `backfill` (what `leaderboard-tools backfill` asks of DynamoDB per item of
history, on moto: backfill.json), `board-features` (the tie-break first_reached against entity, and `among`
against N rank requests: board_features.json), `reads`
(reads_freshness.json), `index-layout` (the leaderboard-shard measurements, on their own:
index_layout.json), and `report` (redraws summary, table, plots and docs/benchmark.md's Results from
results.json and the parts measured on their own, without an emulator). The full run writes its raw
figures to development/benchmark-results/, the summary and plots to docs/benchmark-results/ and
docs/benchmark.md's Results section; `--smoke` writes build/bench-smoke/ only.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from leaderboard_dev.aws import clients
from leaderboard_dev.bench import board_features, index_layout
from leaderboard_dev.bench.all_in import run_all_in
from leaderboard_dev.bench.backfill_cost import run_backfill_cost
from leaderboard_dev.bench.boards import run_configuration
from leaderboard_dev.bench.catch_up_memory import run_catch_up_memory
from leaderboard_dev.bench.handler_cpu import cases, run_handler_cpu
from leaderboard_dev.bench.ledger_cost import cases as ledger_cases
from leaderboard_dev.bench.ledger_cost import run_ledger_cost
from leaderboard_dev.bench.reads_freshness import run_reads_and_freshness
from leaderboard_dev.bench.report import DOCUMENT, parts_older_than_the_aggregator, provenance, write_results
from leaderboard_dev.bench.side_by_side import FULL, SMOKE, Plan, run_contender
from leaderboard_dev.bench.workload import say
from leaderboard_dev.emulators.lifecycle import identify
from leaderboard_dev.settings import REPOSITORY, Endpoint, endpoint_from_environment

RESULTS = REPOSITORY / "development" / "benchmark-results"
"""The raw figures (JSON): bulky, for the report part and for anyone checking a number."""
FIGURES = REPOSITORY / "docs" / "benchmark-results"
"""What a reader looks at: summary.md and the plots, linked from docs/benchmark.md."""
SMOKE_RESULTS = REPOSITORY / "build" / "bench-smoke"
PARTS = ("all", "side-by-side", "boards", "handler-cpu", "all-in", "catch-up-memory", "reads", "index-layout", "report")
PARTS = (*PARTS, "backfill", "ledger", "board-features")
ALONE = {
    "reads": "reads_freshness.json",
    "boards": "boards.json",
    "handler-cpu": "handler_cpu.json",
    "all-in": "all_in.json",
    "catch-up-memory": "catch_up_memory.json",
    "backfill": "backfill.json",
    "board-features": "board_features.json",
    "ledger": "ledger.json",
}
"""Parts rerun on their own, beside the full run's results.json; `report` merges them."""
RESULT_KEYS = {
    "reads": "reads_freshness",
    "boards": "boards",
    "handler-cpu": "handler_cpu",
    "all-in": "all_in",
    "catch-up-memory": "catch_up_memory",
    "backfill": "backfill",
    "board-features": "board_features",
    "ledger": "ledger",
}


def run_measurements(endpoint: Endpoint, plan: Plan, parts: set[str], scratch: Path) -> dict[str, Any]:
    """The handler's CPU, side by side (every contender at every batch size), boards and reads, `plan.workers` jobs
    at a time."""
    jobs: list[tuple[str, Any, tuple[Any, ...]]] = []
    if parts & {"all", "handler-cpu"} and plan.handler_cpu:
        # First, beside the stacks: moto answers in process, and thread CPU time leaves the other processes out.
        measured = cases(plan.batch_sizes, plan.guide_batch_sizes or plan.batch_sizes, plan.board_batch_sizes)
        jobs.append(("handler_cpu", run_handler_cpu, (measured,)))
    if parts & {"all", "all-in"}:
        jobs.append(("all_in", run_all_in, (plan.all_in_downloads, plan.all_in_window_downloads)))
    if parts & {"all", "catch-up-memory"}:
        jobs.append(("catch_up_memory", run_catch_up_memory, (plan.catch_up_backlogs, plan.catch_up_item_bytes)))
    if parts & {"all", "backfill"}:
        jobs.append(("backfill", run_backfill_cost, (plan.backfill_downloads,)))
    if parts & {"all", "ledger"} and plan.ledger_batch_sizes:
        sizes = (plan.all_in_downloads, plan.all_in_window_downloads, plan.ledger_steady_downloads)
        jobs.append(("ledger", run_ledger_cost, (*sizes, ledger_cases(plan.ledger_batch_sizes))))
    if parts & {"all", "reads"}:
        jobs.append(("reads_freshness", run_reads_and_freshness, (endpoint, plan)))
    if "board-features" in parts or ("all" in parts and plan.clean_load):  # alone only in the smoke (make test)
        sizes = board_features.sizes_for(smoke=not plan.clean_load)
        for tie_break in board_features.TIE_BREAKS:
            jobs.append(("board_features", board_features.run_tie_break, (endpoint, tie_break, sizes, scratch)))
        jobs.append(("board_features", board_features.run_among, (endpoint, sizes, scratch)))
    if parts & {"all", "side-by-side"}:
        for batch_size in sorted(plan.batch_sizes, reverse=True):  # the longest first: the run ends sooner
            for contender in plan.contenders_at(batch_size):
                jobs.append(("side_by_side", run_contender, (endpoint, contender.name, batch_size, plan, scratch)))
    if parts & {"all", "boards"}:
        for name in plan.board_configurations:
            arguments = (
                endpoint,
                name,
                plan.board_batch_sizes,
                plan.board_batching_windows,
                plan.board_downloads,
                plan.tumbling_window_seconds,
            )
            jobs.append(("boards", run_configuration, arguments))
    results: dict[str, Any] = {"side_by_side": [], "reads_freshness": None}
    if parts & {"all", "boards"}:
        results["boards"] = []
    if not jobs:
        return results
    # Processes, not threads: Terraform runs with a swapped os.environ (terraform_stack.Stack._run).
    with ProcessPoolExecutor(max_workers=min(plan.workers, len(jobs)), mp_context=get_context("spawn")) as pool:
        futures: list[tuple[str, Future[Any]]] = [(key, pool.submit(job, *arguments)) for key, job, arguments in jobs]
        outcomes = [
            (key, arguments, _outcome(future)) for (key, future), (_, _, arguments) in zip(futures, jobs, strict=True)
        ]
    for key, arguments, outcome in outcomes:
        if "error" in outcome:
            what = {"side_by_side": f"{arguments[1]} at batch size {arguments[2]}", "boards": f"boards {arguments[1]}"}
            say(f"{what.get(key, key)} failed: {outcome['error']}")
            results.setdefault("failures", []).append({"part": what.get(key, key), **outcome})
        elif key == "side_by_side":
            results["side_by_side"].append(outcome)
        elif key == "boards":
            results["boards"] += outcome["runs"]
        elif key == "board_features":
            board_features.merge_into(results, outcome)
        else:
            results[key] = outcome
    return results


def _outcome(future: Future[Any]) -> dict[str, Any]:
    """A job's result, or its failure: one stack that cannot settle must not cost the figures of the others."""
    try:
        return future.result()
    except Exception as error:  # recorded in results.json and printed
        return {"error": f"{type(error).__name__}: {error}"}


def with_separate_parts(results: dict[str, Any], directory: Path) -> dict[str, Any]:
    """The results, with each part a separate run measured (ALONE) where the full run has none of it; a part merged
    from a separate run before is taken again from its file, which a later run of that part rewrote."""
    merged = dict(results)
    for part, name in ALONE.items():
        alone = directory / name
        key = RESULT_KEYS[part]
        from_the_full_run = merged.get(key) and key not in merged.get("separate_runs", {})
        if from_the_full_run or not alone.is_file():
            continue
        separate = json.loads(alone.read_text())
        merged[key] = separate[key]
        merged.setdefault("separate_runs", {})[key] = {"provenance": separate["provenance"], "plan": separate["plan"]}
        merged["failures"] = [*merged.get("failures", []), *separate.get("failures", [])]
        if part == "reads":  # the names the report has read since the reads were first rerun alone
            merged["reads_provenance"], merged["reads_plan"] = separate["provenance"], separate["plan"]
    return merged


def run_index_layout(endpoint: Endpoint, smoke: bool) -> dict[str, Any]:
    """The leaderboard-shard measurements (index writes per partition, top-10 latency per N, rank cost)."""
    aws = clients(endpoint)
    return {
        "index_writes": index_layout.index_writes_per_partition(
            endpoint,
            aws,
            downloads=500 if smoke else 5000,
            songs=200 if smoke else 1000,
            shards_values=(1, 4),
            batch_size=100,
        ),
        "top_ten_latency": index_layout.top_ten_latency(
            endpoint,
            aws,
            shards_values=(1, 4) if smoke else (1, 4, 16),
            downloads=500 if smoke else 5000,
            songs=200 if smoke else 1000,
            repeats=5 if smoke else 30,
        ),
        "rank_cost": index_layout.rank_cost(endpoint, aws, song_counts=(100,) if smoke else (1000, 100_000), shards=4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m leaderboard_dev.bench", description=__doc__)
    parser.add_argument("part", nargs="?", default="all", choices=PARTS)
    parser.add_argument("--smoke", action="store_true", help="small sizes, in parallel stacks, into build/bench-smoke/")
    parser.add_argument("--ladder", help="data sizes of the reads ladder, comma-separated (default: the plan's)")
    parser.add_argument("--rate-load", type=int, help="downloads of each freshness-against-rate load")
    parser.add_argument("--board-load", type=int, help="downloads of each load of the boards part")
    arguments = parser.parse_args(argv)
    command = f"python -m leaderboard_dev.bench {shlex.join(sys.argv[1:] if argv is None else argv)}".strip()
    plan = SMOKE if arguments.smoke else FULL
    if arguments.ladder:
        plan = replace(plan, ladder=tuple(int(size) for size in arguments.ladder.split(",")))
    if arguments.rate_load:
        plan = replace(plan, rate_load=arguments.rate_load)
    if arguments.board_load:
        plan = replace(plan, board_downloads=arguments.board_load)
    directory = SMOKE_RESULTS if arguments.smoke else RESULTS
    if arguments.part == "report":
        results = with_separate_parts(json.loads((directory / "results.json").read_text()), directory)
        stale = [] if arguments.smoke else parts_older_than_the_aggregator(results)
        if stale:
            say("refused: the figures would mix code that no longer ships; measure again (make bench, or the part):")
            for part in stale:
                say(f"  {part}")
            return 1
        write_results(results, directory, *((None, None) if arguments.smoke else (DOCUMENT, FIGURES)))
        return 0
    endpoint = endpoint_from_environment()
    emulator = identify(endpoint)
    if arguments.part == "index-layout":
        layout = {**provenance(command, emulator), **run_index_layout(endpoint, arguments.smoke)}
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "index_layout.json").write_text(json.dumps(layout, indent=2) + "\n")
        return 0
    origin = provenance(command, emulator)  # the commit the run starts from, before anyone commits during it
    with tempfile.TemporaryDirectory(prefix="bench-builds-") as scratch:
        measured = run_measurements(endpoint, plan, {arguments.part}, Path(scratch))
    results = {"provenance": origin, "plan": asdict(plan), **measured}
    if arguments.part in ALONE:  # a part rerun alone, beside the full run's results.json
        directory.mkdir(parents=True, exist_ok=True)
        alone = directory / ALONE[arguments.part]
        key = RESULT_KEYS[arguments.part]
        document = {"provenance": origin, "plan": asdict(plan), key: results.get(key)}
        alone.write_text(json.dumps({**document, "failures": results.get("failures", [])}, indent=1) + "\n")
        say(f"{arguments.part} in {alone.relative_to(REPOSITORY)}; `report` merges it")
        return 0
    full = arguments.part == "all" and not arguments.smoke
    write_results(results, directory, DOCUMENT if full else None, None if arguments.smoke else FIGURES)
    say(f"results in {directory.relative_to(REPOSITORY)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
