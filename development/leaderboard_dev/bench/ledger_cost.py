"""Ledger mode's cost, all in: the same downloads through ledger mode (two readers per shard and one), watermark mode
(per_batch) and the guide.

The all-in part's method (bench/all_in.py): the shipped handler and the guide's on moto, in process, every request
counted where moto answers it and priced by DynamoDB's rules and the bench's price table. The configurations differ
only in the aggregator's: `ledger` (LEDGER with its claims table as the ledger, retractions implied, the aggregator
reading each shard beside the mapping), `ledger_one_reader` (LEDGER and STREAM_READERS=1: the mapping's deliveries
applied through versioned ledger items, one TransactWriteItems per entity, each item of it charged
all_in.TRANSACTIONAL_WRITE_FACTOR times; no stream read but the mapping's, which are free), `per_batch`
(the default: watermarks, INSERTs only), the guide's one ADD per download and, on the edits load, `retractions`
(watermarks following edits and deletions of what they counted). Each at batch size 100 and 1,000 on two loads:

- clean: new downloads only;
- edits: of each batch's downloads, all_in.EDITED moved a month on and all_in.DELETED deleted, in the next batch
  (a batch then holds fewer new downloads, so that it still fits). Only ledger and retractions follow edits: the
  mapping passes per_batch's and the guide's INSERTs only, so their boards keep what was first written.

Every run ends by scanning the table and recounting the items' last images: a configuration that claims exactness
(ours, with edits only where it follows them) fails the part if any board differs; the others' count error is
recorded. The ledger's claims are priced as aggregate writes are (`ledger_writes`), and waited for in rounds of
WRITE_CONCURRENCY, as the aggregator sends them (one per download key and step, through its executor); the one reader's
transactions, its strongly consistent reads of ledger items (`ledger_reads`) and its notes in the progress table are
sent one after another, and waited for so.

Steady state (`preload`): before the warm-up, every song gets a download of the month and PRELOAD_ZIPF more are
counted, so every aggregate the measured downloads touch exists already (an aggregate's first write is one index
write, a moved key two). Each configuration is measured twice, on two seeds, and the figures say how far they agree.
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from typing import Any

from leaderboard_dev.backlog_stream import InlineExecutor
from leaderboard_dev.bench.all_in import (
    RATE,
    START,
    WINDOW_SECONDS,
    AllInCase,
    Batch,
    Run,
    SdkMeter,
    Table,
    batches,
    create_tables,
    passes_filter,
    summarise,
    tables_of,
)
from leaderboard_dev.bench.boards import realtime_downloads
from leaderboard_dev.bench.handler_cpu import (
    AGGREGATOR_SOURCE,
    LATENCY,
    REGION,
    TABLE,
    WARM_UP,
    WRITE_CONCURRENCY,
    CpuCase,
    LambdaContext,
    StreamTail,
    function_environment,
    guide,
    invoker,
    load_module,
    quiet_stdout,
    streams_as_aws,
)
from leaderboard_dev.bench.pressure_cost import AGGREGATOR_MEMORY_GB
from leaderboard_dev.bench.prices import READ_REQUEST_UNIT, WRITE_REQUEST_UNIT, price_table
from leaderboard_dev.bench.workload import SONGS, count_error, say

LEDGER_TABLE = "cpu-ledger"
LEDGER_WRITES = f"dynamodb UpdateItem {LEDGER_TABLE}"
LEDGER_READS = f"dynamodb GetItem {LEDGER_TABLE}"
LEDGER_TRANSACTIONS = f"dynamodb TransactWriteItems {LEDGER_TABLE}"
"""The one reader's transactions: the meter names one by its first action's table, always a ledger item's."""
ONE_READER = "ledger_one_reader"
BATCH_SIZES = (100, 1000)
LOADS = ("clean", "edits")
PRELOAD_ZIPF = 2_000
"""Downloads counted before a steady-state measurement, beside one of every song: the month's aggregates exist."""
PRELOAD_BATCH = 1000
SEEDS = (1000, 5000)
"""The measured downloads' seeds: at steady state each configuration runs on both, and the figures compare them."""
AGREEMENT = 0.02
"""Two runs of one configuration agree when their totals differ by at most this share."""


class NotExact(AssertionError):
    """A configuration that claims exactness left a board that differs from the recount of the items."""


class TransactionNotRolledBack(RuntimeError):
    """A transaction failed where moto keeps no backup to roll it back (transactions_without_backups)."""


@dataclass(frozen=True)
class LedgerCase(AllInCase):
    configuration: str = "per_batch"
    """ledger, ledger_one_reader, per_batch, retractions or guide."""
    ledger: bool = False
    load: str = "clean"
    stream_readers: int = 2
    """STREAM_READERS: 1 for ledger_one_reader (the mapping's deliveries only), else the default."""

    @property
    def claims_exact(self) -> bool:
        """The shipped handler claims exact boards; under edits only where it follows them."""
        return self.aggregator == "ours" and (self.load == "clean" or self.retractions)

    @property
    def workload(self) -> AllInCase:
        """What all_in.batches generates from: with edits, its retraction workload, whoever counts it."""
        return AllInCase(self.name, self.aggregator, self.batch_size, retractions=self.load == "edits")


def configurations(load: str) -> tuple[str, ...]:
    """The configurations measured on a load: retractions on the edits load only (on the clean one it is per_batch)."""
    return ("ledger", ONE_READER, "per_batch", *(("retractions",) if load == "edits" else ()), "guide")


def case_of(configuration: str, batch_size: int, load: str) -> LedgerCase:
    aggregator = "guide" if configuration == "guide" else "ours"
    ledger = configuration in ("ledger", ONE_READER)
    return LedgerCase(
        f"{configuration}_{load}_{batch_size}",
        aggregator,
        batch_size,
        retractions=ledger or configuration == "retractions",
        configuration=configuration,
        ledger=ledger,
        load=load,
        stream_readers=1 if configuration == ONE_READER else 2,
    )


def cases(batch_sizes: tuple[int, ...] = BATCH_SIZES, loads: tuple[str, ...] = LOADS) -> tuple[LedgerCase, ...]:
    """ledger (two readers and one), per_batch and the guide on each load and batch size; retractions beside them on
    the edits load."""
    return tuple(
        case_of(configuration, batch_size, load)
        for batch_size in batch_sizes
        for load in loads
        for configuration in configurations(load)
    )


class LedgerMeter(SdkMeter):
    """all_in's meter; the ledger's claims run through the aggregator's executor, so they wait in rounds."""

    def account(self, request: Any, respond: Any) -> Any:
        claims = self.usage.requests[LEDGER_WRITES]
        response = super().account(request, respond)
        self.usage.parallel_writes += self.usage.requests[LEDGER_WRITES] - claims
        return response


@contextlib.contextmanager
def transactions_without_backups() -> Iterator[None]:
    """moto's TransactWriteItems deep-copies every table an action names, once per action, to roll the transaction
    back if it is cancelled: at a few thousand items each of the one reader's transactions took seconds. None is
    cancelled here (one invocation at a time, each ledger Put conditioned on the item it has just read), so they are
    served without the copies; one that fails all the same fails the run, since what it wrote before it failed stays."""
    from types import SimpleNamespace

    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table as MotoTable

    transact = models.DynamoDBBackend.transact_write_items

    def without_backups(backend: Any, transact_items: list[dict[str, Any]]) -> None:
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, MotoTable) else copy.deepcopy(value, memo)

        models.copy = SimpleNamespace(deepcopy=deepcopy)  # type: ignore[assignment]
        try:
            return transact(backend, transact_items)
        except Exception as error:
            raise TransactionNotRolledBack(f"a transaction failed and was not rolled back: {error!r}") from error
        finally:
            models.copy = copy  # type: ignore[assignment]

    models.DynamoDBBackend.transact_write_items = without_backups  # type: ignore[method-assign]
    try:
        yield
    finally:
        models.DynamoDBBackend.transact_write_items = transact  # type: ignore[method-assign]


def shipped(environment: dict[str, str]) -> Any:
    """The shipped handler's steps on the function's own wiring (wiring.dependencies_for), its writes inline; with one
    reader per shard, the function's own entry (aggregator.handle), which routes every event to one_reader.py."""
    import boto3

    from aggregator_settings import Settings
    from wiring import dependencies_for

    aggregator = sys.modules.get("aggregator") or load_module("aggregator", AGGREGATOR_SOURCE / "aggregator.py")
    settings = replace(Settings.from_environment(environment), memory_ceiling_bytes=None)
    dynamodb = boto3.client("dynamodb", region_name=REGION, config=aggregator._SDK_CONFIG)
    streams = boto3.client("dynamodbstreams", region_name=REGION, config=aggregator._SDK_CONFIG)
    dependencies = dependencies_for(settings, dynamodb, streams, None, InlineExecutor())
    dependencies.send_failures = lambda messages: True
    if settings.stream_readers == 1:
        return one_reader_invoker(aggregator, settings, dependencies)
    return invoker(aggregator, settings, dependencies)


def one_reader_invoker(aggregator: Any, settings: Any, dependencies: Any) -> Any:
    """One invocation as lambda_handler runs it, its log line and metrics flushed: the window's state it answers."""

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        return dict(aggregator.handle(event, LambdaContext(), settings, dependencies)["state"])

    return invoke


def preload_downloads(zipf: int) -> list[Batch]:
    """One download of every song of the catalogue, then `zipf` more, in the month before the warm-up's window."""
    start = START - timedelta(hours=1)
    items = realtime_downloads(zipf, start, 1800, seed=7)
    for number in range(SONGS):
        first = dict(items[number % len(items)]) if items else {}
        song = f"song{number + 1:03d}"
        items.append({**first, "songID": {"S": song}, "SK": {"S": f"download-preload-{number:06d}"}})
    return [Batch(items[first : first + PRELOAD_BATCH]) for first in range(0, len(items), PRELOAD_BATCH)]


def recount(dynamodb: Any) -> dict[str, Any]:
    """Every board against a recount of the items' last images: the whole table scanned."""
    truth: Counter[tuple[str, str]] = Counter()
    observed: dict[tuple[str, str], int] = {}
    for page in dynamodb.get_paginator("scan").paginate(TableName=TABLE):
        for item in page["Items"]:
            if "DownloadCount" in item:  # an aggregate (one at 0 has left the index: no Month), its SK the month
                observed[(item["songID"]["S"], item["SK"]["S"])] = int(item["DownloadCount"]["N"])
            else:
                truth[(item["songID"]["S"], item["Timestamp"]["S"][:7])] += 1
    return count_error(observed, dict(truth))


def measure(
    case: LedgerCase, measured_downloads: int, window_downloads: int, preload: int, seed: int
) -> dict[str, Any]:
    """all_in.measure's warm-up and measured window, after the preload (steady state); the recount after it all."""
    import boto3
    from moto import mock_aws

    extra = {"AGGREGATE_WRITES": case.aggregate_writes, "RETRACTIONS": str(case.retractions).lower()}
    if case.ledger:
        extra |= {"LEDGER": "true", "CLAIMS_TABLE_NAME": LEDGER_TABLE, "STREAM_READERS": str(case.stream_readers)}
    function = CpuCase("ours_per_batch", "month", case.batch_size, 1)
    served = transactions_without_backups() if case.stream_readers == 1 else contextlib.nullcontext()
    with function_environment(function) as environment, mock_aws(), streams_as_aws(), quiet_stdout(), served:
        os.environ.update(extra)
        environment.update(extra)
        sys.path.insert(0, str(AGGREGATOR_SOURCE))
        try:
            dynamodb = boto3.client("dynamodb", region_name=REGION)
            streams = boto3.client("dynamodbstreams", region_name=REGION)
            tables = tables_of(case)
            stream_arn = create_tables(dynamodb, tables)
            if case.ledger:
                tables[LEDGER_TABLE] = Table(LEDGER_TABLE, ("ClaimKey",))
                dynamodb.create_table(
                    TableName=LEDGER_TABLE,
                    BillingMode="PAY_PER_REQUEST",
                    AttributeDefinitions=[{"AttributeName": "ClaimKey", "AttributeType": "S"}],
                    KeySchema=[{"AttributeName": "ClaimKey", "KeyType": "HASH"}],
                )
            meter = LedgerMeter(tables, TABLE, parallel=case.aggregator == "ours" and case.stream_readers == 2)
            invoke = shipped(environment) if case.aggregator == "ours" else guide()
            tail = StreamTail(streams, stream_arn)
            run = Run(case, meter, tail, invoke, dynamodb, passes_filter(case))
            workload = case.workload
            warm_up = batches(workload, 1, 0, 100, None)[0] if case.batch_size <= WARM_UP else None
            warm_up = warm_up or Batch(realtime_downloads(WARM_UP, START, WARM_UP / RATE, seed=100))
            run.warm_up = warm_up
            if preload:  # outside the meter: nothing of it is kept, and reading every image would slow it
                loader = Run(replace(case, batch_size=PRELOAD_BATCH), meter, tail, invoke, dynamodb, run.passes)
                loader.window(-1, preload_downloads(preload), weight=None)
            with meter.metered():
                run.window(0, [warm_up], weight=None)
                count = max(1, measured_downloads // case.batch_size)
                measured = batches(workload, count, 1, seed, warm_up)
                run.window(1, measured, weight=min(1.0, sum(len(b.items) for b in measured) / window_downloads))
            recounted = recount(dynamodb)
        finally:
            sys.path.remove(str(AGGREGATOR_SOURCE))
    if case.claims_exact and recounted["absolute"]:
        raise NotExact(f"{case.name}: the boards differ from a recount of the items: {recounted}")
    return with_ledger(case, summarise(case, run, window_downloads), run, recounted)


@dataclass(frozen=True)
class LedgerUse:
    """What the measured invocations asked of the ledger table, each weighted as all_in weighs it."""

    writes: float
    """Ledger items written: the two readers' claims (UpdateItem), the one reader's Puts in its transactions."""
    write_units: float
    reads: float
    read_units: float
    transactions: float
    """The one reader's TransactWriteItems; its items (ledger Puts and aggregate ADDs) are each charged twice."""
    transaction_items: float


def weighted_ledger(run: Run) -> LedgerUse:
    """The ledger's claims, reads and transactions over the measured invocations, weighted as all_in weighs them."""

    def total(pick: Any) -> float:
        return sum(invocation["weight"] * pick(invocation["usage"]) for invocation in run.invocations)

    return LedgerUse(
        writes=total(lambda usage: usage.requests[LEDGER_WRITES] + usage.transaction_items[LEDGER_TABLE]),
        write_units=total(lambda usage: usage.write_units[LEDGER_TABLE]),
        reads=total(lambda usage: usage.requests[LEDGER_READS]),
        read_units=total(lambda usage: usage.read_units[LEDGER_TABLE]),
        transactions=total(lambda usage: usage.requests[LEDGER_TRANSACTIONS]),
        transaction_items=total(lambda usage: sum(usage.transaction_items.values())),
    )


def with_ledger(case: LedgerCase, summary: dict[str, Any], run: Run, recounted: dict[str, Any]) -> dict[str, Any]:
    """all_in's summary of the run, with the ledger's writes and reads priced beside the aggregates' and in the
    totals (all_in prices the aggregates' and the progress table's units only)."""
    use = weighted_ledger(run)
    downloads = summary["downloads"]
    write_dollars = use.write_units * 1e6 / downloads * WRITE_REQUEST_UNIT.per_unit
    read_dollars = use.read_units * 1e6 / downloads * READ_REQUEST_UNIT.per_unit
    ledger_dollars = write_dollars + read_dollars
    per_100 = dict(summary["per_100_downloads"])
    per_100["ledger_writes"] = round(use.writes * 100 / downloads, 3)
    per_100["ledger_write_units"] = round(use.write_units * 100 / downloads, 3)
    per_100["ledger_reads"] = round(use.reads * 100 / downloads, 3)
    per_100["ledger_read_units"] = round(use.read_units * 100 / downloads, 3)
    per_100["transactions"] = round(use.transactions * 100 / downloads, 3)
    per_100["transaction_items"] = round(use.transaction_items * 100 / downloads, 3)
    return {
        **summary,
        "configuration": case.configuration,
        "load": case.load,
        "ledger": case.ledger,
        "claims_exact": case.claims_exact,
        "count_error": recounted,
        "per_100_downloads": per_100,
        "dollars_per_million": {
            **summary["dollars_per_million"],
            "ledger_writes": round(write_dollars, 4),
            "ledger_reads": round(read_dollars, 4),
        },
        "dollars_per_million_total": round(summary["dollars_per_million_total"] + ledger_dollars, 4),
        "dollars_per_million_total_with_ingest": round(
            summary["dollars_per_million_total_with_ingest"] + ledger_dollars, 4
        ),
    }


def reads_per_100(case: dict[str, Any]) -> float:
    """Read units per 100 downloads, every table (the aggregates', the progress table's)."""
    return round(sum(case["per_100_downloads"]["read_units"].values()), 3)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 3)


def ratios(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per batch size and load: ledger's all-in total against per_batch's and the guide's; ledger_one_reader's against
    theirs and ledger's."""
    totals = {(r["configuration"], r["batch_size"], r["load"]): r["dollars_per_million_total"] for r in results}
    rows = []
    for batch_size, load in sorted({(r["batch_size"], r["load"]) for r in results}, key=lambda k: (k[1], k[0])):
        ledger = totals.get(("ledger", batch_size, load))
        one_reader = totals.get((ONE_READER, batch_size, load))
        rows.append(
            {
                "batch_size": batch_size,
                "load": load,
                "ledger": ledger,
                "ledger_per_batch": ratio(ledger, totals.get(("per_batch", batch_size, load))),
                "ledger_guide": ratio(ledger, totals.get(("guide", batch_size, load))),
                ONE_READER: one_reader,
                f"{ONE_READER}_per_batch": ratio(one_reader, totals.get(("per_batch", batch_size, load))),
                f"{ONE_READER}_guide": ratio(one_reader, totals.get(("guide", batch_size, load))),
                f"{ONE_READER}_ledger": ratio(one_reader, ledger),
            }
        )
    return rows


def goal(results: list[dict[str, Any]], batch_size: int = 100, configuration: str = "ledger") -> dict[str, Any]:
    """The issue's goal: ledger mode (`configuration`) at or below the guide's all-in cost at batch size 100, on the
    clean load."""
    clean = {
        r["configuration"]: r["dollars_per_million_total"]
        for r in results
        if r["load"] == "clean" and r["batch_size"] == batch_size
    }
    ours, guide_total = clean.get(configuration), clean.get("guide")
    met = None if ours is None or guide_total is None else ours <= guide_total
    return {"batch_size": batch_size, configuration: ours, "guide": guide_total, "met": met}


def agreement(first: float, second: float) -> float:
    """How far two runs' totals differ, as a share of their mean."""
    mean = (first + second) / 2
    return round(abs(first - second) / mean, 4) if mean else 0.0


def run_ledger_cost(
    measured_downloads: int,
    window_downloads: int,
    steady_downloads: int | None = None,
    measured: tuple[LedgerCase, ...] | None = None,
) -> dict[str, Any]:
    """Every case into an empty month; then, at steady state, the clean load's cases twice (two seeds)."""
    chosen = measured or cases()
    results = [_measured(case, measured_downloads, window_downloads, 0, SEEDS[0]) for case in chosen]
    steady: list[dict[str, Any]] = []
    if steady_downloads:
        for case in (case for case in chosen if case.load == "clean"):
            runs = [_measured(case, steady_downloads, window_downloads, PRELOAD_ZIPF, seed) for seed in SEEDS]
            steady.append({**runs[0], "second_run_total": runs[1]["dollars_per_million_total"]})
            steady[-1]["agreement"] = agreement(
                runs[0]["dollars_per_million_total"], runs[1]["dollars_per_million_total"]
            )
    return {
        "method": "moto in process (bench/all_in.py's meter and prices); the ledger's claims priced as writes",
        "plan": {
            "measured_downloads": measured_downloads,
            "steady_downloads": steady_downloads,
            "preload": {"every_song": SONGS, "zipf": PRELOAD_ZIPF} if steady_downloads else None,
            "seeds": list(SEEDS),
            "agreement_wanted": AGREEMENT,
            "sized_for": "2 shared cores: moto in process, one configuration after another, no emulator",
        },
        "downloads_per_second": RATE,
        "window_seconds": WINDOW_SECONDS,
        "window_downloads": window_downloads,
        "memory_gb": AGGREGATOR_MEMORY_GB,
        "latency": LATENCY,
        "write_concurrency": WRITE_CONCURRENCY,
        "prices": price_table(),
        "cases": results,
        "ratios": ratios(results),
        "goal": goal(results),
        "goal_one_reader": goal(results, configuration=ONE_READER),
        "steady_state": steady,
        "steady_ratios": ratios(steady) if steady else [],
    }


def _measured(case: LedgerCase, downloads: int, window_downloads: int, preload: int, seed: int) -> dict[str, Any]:
    started = time.monotonic()
    result = measure(case, downloads, window_downloads, preload, seed)
    state = "steady state" if preload else "empty month"
    say(
        f"ledger cost, {case.name} ({state}): ${result['dollars_per_million_total']} per million downloads, "
        f"count error {result['count_error']['absolute']} ({time.monotonic() - started:.0f} s)"
    )
    return {**result, "preload": preload, "seed": seed, "case": asdict(case)}


def _dollars(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _error(case: dict[str, Any]) -> str:
    error = case["count_error"]
    exact = "exact" if not error["absolute"] else f"{error['absolute']:,} off ({100 * error['relative']:.1f} %)"
    return exact + ("" if case["claims_exact"] else ", not claimed")


def other_dollars(case: dict[str, Any]) -> float:
    """Everything but the aggregates', the index's, the ledger's and Lambda's duration: requests, progress, streams."""
    dollars = case["dollars_per_million"]
    shown = ("aggregate_writes", "index_writes", "ledger_writes", "ledger_reads", "lambda_duration")
    return round(sum(value for key, value in dollars.items() if key not in shown), 4)


def ledger_dollars(case: dict[str, Any]) -> float:
    """The ledger table's writes and reads (a two-reader run's records no reads)."""
    dollars = case["dollars_per_million"]
    return round(dollars["ledger_writes"] + dollars.get("ledger_reads", 0.0), 4)


def markdown_lines(measured: dict[str, Any] | None, origin: dict[str, Any] | None = None) -> list[str]:
    """The ledger part's tables for docs/benchmark.md's Results: per 100 downloads, dollars, ratios, steady state."""
    if not measured:
        return []
    at = f" (measured alone at commit `{origin['commit'][:12]}` on {origin['date']})" if origin else ""
    plan = measured["plan"]
    lines = [
        "",
        f"Ledger mode against per_batch and the guide, all in{at}: the all-in part's method and prices "
        f"(bench/ledger_cost.py), {plan['measured_downloads']:,} downloads measured per configuration into an empty "
        "month; the edits load changes 10 % of each batch's downloads (a month on) and deletes 5 % in the next batch. "
        f"`ledger` reads each shard beside the mapping; `{ONE_READER}` (STREAM_READERS = 1) applies the mapping's "
        "deliveries only, each through its download key's ledger item in a TransactWriteItems, every item of which "
        "is charged two write units per KB. Ledger writes: ledger items written (claims, or a transaction's Puts); "
        "read units: every table's, the ledger items' strongly consistent reads among them. Per 100 downloads:",
        "",
        "| configuration | load | batch size | aggregate writes | ledger writes | read units | stream records read "
        "| index writes | Lambda GB-s | $ / million, all in | boards against a recount |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in measured["cases"]:
        per_100 = case["per_100_downloads"]
        lines.append(
            f"| {case['configuration']} | {case['load']} | {case['batch_size']:,} | {per_100['aggregate_writes']} | "
            f"{per_100['ledger_writes']} | {reads_per_100(case)} | {per_100['stream_records_read']} | "
            f"{sum(per_100['index_writes'].values()):.2f} | {per_100['lambda_gb_seconds']} | "
            f"**{_dollars(case['dollars_per_million_total'])}** | {_error(case)} |"
        )
    lines += [
        "",
        "Dollars per million downloads by component (ledger: the ledger table's writes and reads; other: Lambda "
        "requests, the progress table, GetRecords, SQS):",
        "",
        "| configuration | load | batch size | aggregates | index | ledger | Lambda duration | other | total |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for case in measured["cases"]:
        dollars = case["dollars_per_million"]
        lines.append(
            f"| {case['configuration']} | {case['load']} | {case['batch_size']:,} | "
            f"{_dollars(dollars['aggregate_writes'])} | {_dollars(dollars['index_writes'])} | "
            f"{_dollars(ledger_dollars(case))} | {_dollars(dollars['lambda_duration'])} | "
            f"{_dollars(other_dollars(case))} | {_dollars(case['dollars_per_million_total'])} |"
        )
    lines += ["", *ratio_lines(measured["ratios"]), "", goal_sentence(measured["goal"])]
    if measured.get("goal_one_reader"):
        lines += ["", goal_sentence(measured["goal_one_reader"])]
    if measured.get("steady_state"):
        preload = plan["preload"]
        lines += [
            "",
            f"At steady state: before the warm-up, one download of each of the {preload['every_song']:,} songs and "
            f"{preload['zipf']:,} more are counted, so every aggregate the measured downloads touch exists; "
            f"{plan['steady_downloads']:,} downloads measured, each configuration run twice on two seeds (agreement: "
            "the totals' difference over their mean).",
            "",
            "| configuration | batch size | aggregate writes / 100 | index writes / 100 | $ / million, all in "
            "| second run | agreement |",
            "|---|---|---|---|---|---|---|",
        ]
        for case in measured["steady_state"]:
            per_100 = case["per_100_downloads"]
            lines.append(
                f"| {case['configuration']} | {case['batch_size']:,} | {per_100['aggregate_writes']} | "
                f"{sum(per_100['index_writes'].values()):.2f} | **{_dollars(case['dollars_per_million_total'])}** | "
                f"{_dollars(case['second_run_total'])} | {100 * case['agreement']:.2f} % |"
            )
        lines += ["", *ratio_lines(measured["steady_ratios"])]
    return lines


def ratio_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| load | batch size | ledger, $ / million | ledger / per_batch | ledger / guide "
        f"| {ONE_READER}, $ / million | {ONE_READER} / per_batch | {ONE_READER} / guide | {ONE_READER} / ledger |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['load']} | {row['batch_size']:,} | {_dollars(row['ledger'])} | "
            f"**{_ratio(row['ledger_per_batch'])}** | **{_ratio(row['ledger_guide'])}** | "
            f"{_dollars(row.get(ONE_READER))} | **{_ratio(row.get(f'{ONE_READER}_per_batch'))}** | "
            f"**{_ratio(row.get(f'{ONE_READER}_guide'))}** | **{_ratio(row.get(f'{ONE_READER}_ledger'))}** |"
        )
    return lines


def goal_sentence(goal: dict[str, Any]) -> str:
    configuration = next(key for key in goal if key not in ("batch_size", "guide", "met"))
    mode = "ledger mode" if configuration == "ledger" else f"ledger mode with one reader per shard (`{configuration}`)"
    if goal["met"] is None:
        return f"The goal ({mode} at or below the guide at batch size {goal['batch_size']:,}) was not measured."
    verdict = "met" if goal["met"] else "not met"
    return (
        f"Goal, {mode} at or below the guide's cost at batch size {goal['batch_size']:,} (clean load): "
        f"**{verdict}**, ${goal[configuration]:.4f} against ${goal['guide']:.4f} per million downloads."
    )
