"""What two board features cost: the tie-break `first_reached`, and `among` against N rank requests.

- Tie-break: two stacks that differ only in `leaderboard_tie_break` ("entity", the default, and
  "first_reached") take the same generated downloads (the boards part's time-ordered Zipf load). Both
  run the request-counting build of the shipped aggregator (bench/request_counts.py), so each side's
  aggregate writes (its batch summaries, as every part counts them) stand beside the aggregate reads it
  issued (its GetItems of the aggregates, counted in the function). Each board is checked against the
  generator's recount on both sides. Dollars per million downloads from the bench's price table.
- Among: one stack with the request-counting build of the shipped query function; a board of
  realistic size written straight into a month (Zipf-shaped counts, ties at the tail); the same N
  entities asked as one `among` request and as N `rank` requests. Read units are computed from the
  items' sizes by AWS's rule (the emulator's ConsumedCapacity is a constant per request): a
  BatchGetItem charges each key's item rounded up to 4 KB, a Query the entries it evaluated summed and
  rounded up to 4 KB, half a unit per 4 KB when eventually consistent.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from leaderboard_core.index_layout import order_of
from leaderboard_dev.aws import Clients, clients
from leaderboard_dev.bench.all_in import item_bytes
from leaderboard_dev.bench.boards import BY_NAME as BOARD_CONFIGURATIONS
from leaderboard_dev.bench.boards import LOAD_SECONDS, board_truth, measure, realtime_downloads
from leaderboard_dev.bench.index_layout import INDEX_WRITES_PER_AGGREGATE_WRITE, bench_stack
from leaderboard_dev.bench.request_counts import counted_invocations, counting_build, requests_by_kind
from leaderboard_dev.bench.workload import ZIPF_EXPONENT, say, wait_for
from leaderboard_dev.leaderboard import NotSettled, invoke_function
from leaderboard_dev.loadgen import write_items
from leaderboard_dev.observe import aggregator_invocations, log_lines
from leaderboard_dev.settings import DIST, Endpoint
from leaderboard_tools.size.prices import LAMBDA_GB_SECOND, READ_REQUEST_UNIT, WRITE_REQUEST_UNIT
from leaderboard_tools.size.sizing import (
    AGGREGATOR_MEMORY_MB,
    AGGREGATOR_WRITE_CONCURRENCY,
    CALL_LATENCY_SECONDS,
)

TIE_BREAKS = ("entity", "first_reached")
TIE_BREAK_LOAD_START = "2025-09-14T12:00:00"
TIE_BREAK_SEED = 4040
AMONG_MONTH = "2019-05"
AMONG_SEED = 4041
READ_UNIT_BYTES = 4096
WRITE_UNIT_BYTES = 1024


@dataclass(frozen=True)
class Sizes:
    """One run of the part: the tie-break's load and batching, the among board and how often each request is asked."""

    downloads: int
    batch_size: int
    batching_window: int
    tumbling_window_seconds: int
    board_entities: int
    among_sizes: tuple[int, ...]
    repeats: int


FULL_SIZES = Sizes(5_000, 100, 1, 60, 10_000, (10, 100), 5)
SMOKE_SIZES = Sizes(1_000, 100, 1, 5, 1_000, (10, 100), 3)


def sizes_for(smoke: bool) -> Sizes:
    return SMOKE_SIZES if smoke else FULL_SIZES


def merge_into(results: dict[str, Any], outcome: dict[str, Any]) -> None:
    """One job's figures into results["board_features"]: each tie-break side under `tie_break`, `among` beside."""
    features = results.setdefault("board_features", {})
    for key, value in outcome.items():
        if key == "tie_break":
            features.setdefault("tie_break", {}).update(value)
        else:
            features[key] = value


# The tie-break ------------------------------------------------------------------------------------------------


def run_tie_break(endpoint: Endpoint, tie_break: str, sizes: Sizes, scratch: Path) -> dict[str, Any]:
    """One side: its stack, the shared load, its writes and reads counted. Top-level, so a process pool can run it."""
    aws = clients(endpoint)
    package = counting_build(DIST / "aggregator.zip", "aggregator", Path(scratch) / f"counting-{tie_break}.zip")
    variables = {
        "batch_size": sizes.batch_size,
        "maximum_batching_window_in_seconds": sizes.batching_window,
        "tumbling_window_in_seconds": sizes.tumbling_window_seconds,
        "leaderboard_tie_break": tie_break,
        "aggregator_package_path": str(package),
    }
    configuration = BOARD_CONFIGURATIONS["month"]
    say(f"tie-break {tie_break}: deploying")
    with bench_stack(endpoint, f"tb{TIE_BREAKS.index(tie_break)}", **variables) as (_, outputs):
        start = datetime.fromisoformat(TIE_BREAK_LOAD_START).replace(tzinfo=UTC)
        items = realtime_downloads(sizes.downloads, start, LOAD_SECONDS, seed=TIE_BREAK_SEED)
        truth = board_truth(items, configuration)
        since_ms = int(time.time() * 1000) - 1000
        load = measure(aws, outputs, configuration, items, Counter(truth), sizes.tumbling_window_seconds)
        lines = _every_invocation_counted(aws, outputs["aggregator_log_group_name"], since_ms)
        table = outputs.get("aggregates_table_name") or outputs["table_name"]
        aggregates = [_read_item(aws, table, song, board) for song, board in sorted(truth)]
    invocations = aggregator_invocations(lines)
    counted = counted_invocations(lines)
    side = {
        "tie_break": tie_break,
        "downloads": load["downloads"],
        "exact": load["exact"],
        "wrong_aggregates": load["wrong_aggregates"],
        "aggregate_writes": sum(invocation["aggregate_writes"] for invocation in invocations),
        "invocations": len(invocations),
        "invocations_with_records": sum(1 for invocation in invocations if invocation["records"]),
        "mean_batch": load["mean_batch"],
        "requests_to_aggregates": dict(sorted(requests_by_kind(counted, table).items())),
        "counted_invocations": len(counted),
        "handler_seconds_on_the_emulator": round(sum(line["handler_ms"] for line in counted) / 1000, 3),
        "largest_aggregate_bytes": max((item_bytes(item) for item in aggregates), default=0),
    }
    side.update(per_100(side))
    say(f"tie-break {tie_break}: {side['writes_per_100']} writes and {side['reads_per_100']} reads per 100")
    return {"tie_break": {tie_break: side}, "sizes": asdict(sizes)}


def _every_invocation_counted(aws: Clients, log_group: str, since_ms: int) -> list[dict[str, Any]]:
    """The log lines once each batch summary has its count line (printed as the handler returns), within a minute."""
    state: dict[str, Any] = {"lines": []}

    def paired() -> bool:
        state["lines"] = log_lines(aws, log_group, since_ms)
        summaries = {
            line.get("function_request_id") for line in state["lines"] if line.get("message") == "batch summary"
        }
        counts = {line.get("function_request_id") for line in counted_invocations(state["lines"])}
        return summaries <= counts

    try:
        wait_for(paired, 60, 2.0, "every invocation's request count logged")
    except NotSettled:
        say("tie-break: some invocations logged no request count; their reads are missing from the figures")
    return state["lines"]


def _read_item(aws: Clients, table: str, song: str, board: str) -> dict[str, Any]:
    key = {"songID": {"S": song}, "SK": {"S": board}}
    return aws.dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item") or {}


def per_100(side: dict[str, Any]) -> dict[str, Any]:
    """Aggregate writes (the batch summaries), aggregate reads (GetItems counted in the function) per 100 downloads."""
    requests = side["requests_to_aggregates"]
    reads = sum(count for kind, count in requests.items() if kind.startswith(("GetItem", "BatchGetItem")))
    consistent = sum(count for kind, count in requests.items() if kind.startswith("GetItem (consistent)"))
    sdk_writes = sum(count for kind, count in requests.items() if kind in ("UpdateItem", "TransactWriteItems"))
    downloads = side["downloads"]
    return {
        "aggregate_reads": reads,
        "consistent_reads": consistent,
        "writes_counted_in_the_function": sdk_writes,
        "writes_per_100": round(100 * side["aggregate_writes"] / downloads, 2) if downloads else 0.0,
        "reads_per_100": round(100 * reads / downloads, 2) if downloads else 0.0,
    }


def dollars_per_million(side: dict[str, Any]) -> dict[str, float]:
    """Per million downloads: the aggregate writes and their index writes, the aggregate reads, and the Lambda time
    waiting for them (as `size` charges it: rounds of aggregator_write_concurrency, 10 ms a call, 512 MB).

    An aggregate write's units: its item rounded up to 1 KB; a strongly consistent read's: up to 4 KB (the largest
    aggregate measured stands for all, a bound from above). The reads of an invocation wait in rounds of their own."""
    downloads = side["downloads"]
    if not downloads:
        return {}
    scale = 1_000_000 / downloads
    size = side["largest_aggregate_bytes"]
    write_units = max(1, math.ceil(size / WRITE_UNIT_BYTES))
    read_units = max(1, math.ceil(size / READ_UNIT_BYTES))
    writes, reads = side["aggregate_writes"], side["aggregate_reads"]
    invocations = max(1, side["invocations_with_records"])
    rounds = invocations * (
        math.ceil(writes / invocations / AGGREGATOR_WRITE_CONCURRENCY)
        + math.ceil(reads / invocations / AGGREGATOR_WRITE_CONCURRENCY)
    )
    gb_seconds = rounds * CALL_LATENCY_SECONDS * AGGREGATOR_MEMORY_MB / 1024
    figures = {
        "aggregate_writes": scale * writes * write_units * WRITE_REQUEST_UNIT.per_unit,
        "index_writes": scale * INDEX_WRITES_PER_AGGREGATE_WRITE * writes * write_units * WRITE_REQUEST_UNIT.per_unit,
        "aggregate_reads": scale * reads * read_units * READ_REQUEST_UNIT.per_unit,
        "lambda_waits": scale * gb_seconds * LAMBDA_GB_SECOND.per_unit,
    }
    return {key: round(value, 4) for key, value in figures.items()} | {"total": round(sum(figures.values()), 4)}


def tie_break_summary(sides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Both sides with their dollars, and first_reached / entity for writes, reads + writes, and dollars."""
    rows = [
        {**sides[name], "dollars_per_million": dollars_per_million(sides[name])} for name in TIE_BREAKS if name in sides
    ]
    summary: dict[str, Any] = {"sides": rows, "both_exact": all(row["exact"] for row in rows) and len(rows) == 2}
    if len(rows) == 2:
        entity, first = rows
        summary["ratios"] = {
            "aggregate_writes": _ratio(first["writes_per_100"], entity["writes_per_100"]),
            "aggregate_requests": _ratio(
                first["writes_per_100"] + first["reads_per_100"], entity["writes_per_100"] + entity["reads_per_100"]
            ),
            "dollars": _ratio(first["dollars_per_million"].get("total"), entity["dollars_per_million"].get("total")),
        }
    return summary


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return round(numerator / denominator, 3) if numerator is not None and denominator else None


# Among against N rank requests --------------------------------------------------------------------------------


def board_items(entities: int, month: str) -> list[dict[str, Any]]:
    """A month's board of `entities` aggregates, written straight: Zipf-shaped counts (exponent 1.1, the most popular
    at 100 times the catalogue), so the tail ties as a real board's does."""
    items = []
    for rank in range(1, entities + 1):
        entity = f"song{rank:06d}"
        count = max(1, round(100 * entities / rank**ZIPF_EXPONENT))
        items.append(
            {
                "songID": {"S": entity},
                "SK": {"S": month},
                "Month": {"S": month},
                "DownloadCount": {"N": str(count)},
                "LeaderboardOrder": {"N": str(order_of(count, entity))},
            }
        )
    return items


def run_among(endpoint: Endpoint, sizes: Sizes, scratch: Path) -> dict[str, Any]:
    """One stack, one board; each N: `among` asked `repeats` times, then a `rank` request for each of the N."""
    aws = clients(endpoint)
    package = counting_build(DIST / "query.zip", "query", Path(scratch) / "counting-query.zip", log_event=True)
    say("among: deploying")
    with bench_stack(endpoint, "among", query_package_path=str(package)) as (_, outputs):
        table = outputs.get("aggregates_table_name") or outputs["table_name"]
        function = outputs["query_function_name"]
        items = board_items(sizes.board_entities, AMONG_MONTH)
        write_items(aws.dynamodb, table, items, workers=8)
        counts = {item["songID"]["S"]: int(item["DownloadCount"]["N"]) for item in items}
        chosen = random.Random(AMONG_SEED).sample(sorted(counts), max(sizes.among_sizes))
        invoke_function(aws.lambda_, function, {"month": AMONG_MONTH, "among": chosen[:1]})  # a warm function
        invoke_function(aws.lambda_, function, {"month": AMONG_MONTH, "songID": chosen[0]})
        time.sleep(2)  # the warm-up requests' lines stay before `since_ms`
        since_ms = int(time.time() * 1000)
        latencies: dict[str, list[float]] = {}
        correct = True
        for n in sizes.among_sizes:
            request = {"month": AMONG_MONTH, "among": chosen[:n]}
            for _ in range(sizes.repeats):
                began = time.perf_counter()
                answer = invoke_function(aws.lambda_, function, request)
                latencies.setdefault(f"among {n}", []).append(1000 * (time.perf_counter() - began))
                correct &= {item["songID"]: item["downloadCount"] for item in answer["items"]} == {
                    entity: counts[entity] for entity in chosen[:n]
                }
        for entity in chosen:
            began = time.perf_counter()
            answer = invoke_function(aws.lambda_, function, {"month": AMONG_MONTH, "songID": entity})
            latencies.setdefault(f"rank {entity}", []).append(1000 * (time.perf_counter() - began))
            correct &= answer.get("downloadCount") == counts[entity] and answer.get("rank") is not None
        asked = len(sizes.among_sizes) * sizes.repeats + len(chosen)
        lines = _query_lines(aws, f"/aws/lambda/{function}", since_ms, asked)
    board = {
        "entities": len(items),
        "largest_item_bytes": max(item_bytes(item) for item in items),
        "mean_entry_bytes": round(statistics.fmean(item_bytes(item) for item in items), 1),
    }
    cases = [among_case(n, chosen[:n], lines, latencies, board, table) for n in sizes.among_sizes]
    say("among: " + ", ".join(f"N={case['n']} rank/among read units {case['read_units_ratio']}" for case in cases))
    return {
        "among": {
            "month": AMONG_MONTH,
            "board": board,
            "whole_board_read_units": whole_board_read_units(board),
            "answers_correct": correct,
            "repeats": sizes.repeats,
            "cases": cases,
        },
        "sizes": asdict(sizes),
    }


def _query_lines(aws: Clients, log_group: str, since_ms: int, asked: int) -> list[dict[str, Any]]:
    """The count lines of the `asked` requests (bounded wait: the log lands after the answer)."""
    state: dict[str, Any] = {"lines": []}

    def complete() -> bool:
        state["lines"] = counted_invocations(log_lines(aws, log_group, since_ms))
        return len(state["lines"]) >= asked

    try:
        wait_for(complete, 60, 2.0, f"{asked} query request counts logged")
    except NotSettled:
        say(f"among: {len(state['lines'])} of {asked} query request counts logged")
    return state["lines"]


def call_read_units(call: dict[str, Any], board: dict[str, Any]) -> float:
    """One request's read units by AWS's rule: per key its item rounded up to 4 KB (GetItem, BatchGetItem), per Query
    page the entries it evaluated summed and rounded up to 4 KB; half when eventually consistent."""
    share = 1.0 if call["consistent"] else 0.5
    if call["operation"] in ("GetItem", "BatchGetItem"):
        keys = call.get("keys", 1)
        return keys * share * max(1, math.ceil(board["largest_item_bytes"] / READ_UNIT_BYTES))
    if call["operation"] in ("Query", "Scan"):
        return share * max(1, math.ceil(call.get("scanned", 0) * board["mean_entry_bytes"] / READ_UNIT_BYTES))
    return 0.0


def request_figures(line: dict[str, Any], board: dict[str, Any], table: str) -> dict[str, Any]:
    calls = [call for call in line["calls"] if call["table"] == table]
    return {
        "read_units": sum(call_read_units(call, board) for call in calls),
        "calls": len(calls),
        "entries_evaluated": sum(call.get("scanned", 0) for call in calls),
        "handler_ms": line["handler_ms"],
    }


def among_case(
    n: int,
    entities: list[str],
    lines: list[dict[str, Any]],
    latencies: dict[str, list[float]],
    board: dict[str, Any],
    table: str,
) -> dict[str, Any]:
    """`among` of N against N rank requests for the same entities: read units, calls, times, and their ratios."""
    among_lines = [
        line for line in lines if (line.get("event") or {}).get("among") == entities and "songID" not in line["event"]
    ]
    rank_lines = {
        line["event"]["songID"]: line
        for line in lines
        if "songID" in (line.get("event") or {}) and line["event"]["songID"] in entities
    }
    among = [request_figures(line, board, table) for line in among_lines]
    ranks = [request_figures(rank_lines[entity], board, table) for entity in entities if entity in rank_lines]
    among_ms = latencies.get(f"among {n}", [])
    rank_ms = [latencies[f"rank {entity}"][0] for entity in entities if f"rank {entity}" in latencies]
    figures = {
        "n": n,
        "among": {
            "requests_counted": len(among),
            "read_units": statistics.median(f["read_units"] for f in among) if among else None,
            "calls": statistics.median(f["calls"] for f in among) if among else None,
            "handler_ms_median": round(statistics.median(f["handler_ms"] for f in among), 1) if among else None,
            "client_ms_median": round(statistics.median(among_ms), 1) if among_ms else None,
        },
        "ranks": {
            "requests_counted": len(ranks),
            "read_units": sum(f["read_units"] for f in ranks),
            "calls": sum(f["calls"] for f in ranks),
            "entries_evaluated": sum(f["entries_evaluated"] for f in ranks),
            "handler_ms_total": round(sum(f["handler_ms"] for f in ranks), 1),
            "client_ms_total": round(sum(rank_ms), 1),
            "client_ms_median_per_request": round(statistics.median(rank_ms), 1) if rank_ms else None,
        },
    }
    complete = len(ranks) == n and among
    figures["read_units_ratio"] = (
        _ratio(figures["ranks"]["read_units"], figures["among"]["read_units"]) if complete else None
    )
    figures["client_time_ratio"] = (
        _ratio(figures["ranks"]["client_ms_total"], figures["among"]["client_ms_median"]) if complete else None
    )
    figures["handler_time_ratio"] = (
        _ratio(figures["ranks"]["handler_ms_total"], figures["among"]["handler_ms_median"]) if complete else None
    )
    return figures


def whole_board_read_units(board: dict[str, Any]) -> float:
    """Reading every entry of the board by pages, computed (not measured): its entries' bytes in 4 KB units, halved
    (an index read is eventually consistent); the rounding of each page (up to 1 MB) left out."""
    return 0.5 * math.ceil(board["entities"] * board["mean_entry_bytes"] / READ_UNIT_BYTES)


# The report ---------------------------------------------------------------------------------------------------


def summarise(measured: dict[str, Any] | None) -> dict[str, Any] | None:
    if not measured:
        return None
    return {
        "tie_break": tie_break_summary(measured.get("tie_break") or {}),
        "among": measured.get("among"),
        "sizes": measured.get("sizes"),
    }


def report_lines(summary: dict[str, Any]) -> list[str]:
    """The two tables of docs/benchmark.md's Results: first_reached against entity, among against N ranks."""
    features = summary.get("board_features")
    if not features:
        return []
    origin = (summary.get("separate_runs") or {}).get("board_features")
    measured_by = (
        f" Measured by a separate run, `{origin['provenance']['command']}` at commit "
        f"`{origin['provenance']['commit'][:12]}` on {origin['provenance']['date']}."
        if origin
        else ""
    )
    batch_size = (features.get("sizes") or {}).get("batch_size")
    return _tie_break_lines(features["tie_break"], batch_size, measured_by) + _among_lines(features.get("among"))


def _tie_break_lines(tie_break: dict[str, Any], batch_size: int | None, measured_by: str) -> list[str]:
    sides = tie_break["sides"]
    if not sides:
        return []
    ratios = tie_break.get("ratios") or {}
    exact = (
        "every board equals the generator's recount on both sides"
        if tie_break["both_exact"]
        else "NOT exact on both sides: see `exact`"
    )
    delivered = " and ".join(_fmt(side["mean_batch"]) for side in sides)
    lines = [
        "",
        "The tie-break `first_reached` against `entity` (the default): two stacks differing only in "
        f"`leaderboard_tie_break`, the same {sides[0]['downloads']:,} time-ordered downloads at batch size "
        f"{_fmt(batch_size)} ({delivered} delivered on average); writes from the batch summaries, reads counted in "
        f"the function (a request-counting build of the shipped aggregator on both sides); {exact}.{measured_by} "
        "Dollars per million downloads: the "
        "aggregate writes, their index writes (two each), the aggregate reads and the Lambda time waiting for them.",
        "",
        "| tie-break | aggregate writes / 100 | aggregate reads / 100 | consistent reads | invocations | exact "
        "| $ writes | $ index | $ reads | $ Lambda waits | **$ total / million** |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for side in sides:
        dollars = side["dollars_per_million"]
        lines.append(
            f"| `{side['tie_break']}` | {side['writes_per_100']} | {side['reads_per_100']} | "
            f"{side['consistent_reads']:,} of {side['aggregate_reads']:,} | {side['invocations']:,} | "
            f"{'yes' if side['exact'] else 'NO'} | {dollars['aggregate_writes']:.4f} | {dollars['index_writes']:.4f} | "
            f"{dollars['aggregate_reads']:.4f} | {dollars['lambda_waits']:.4f} | **{dollars['total']:.4f}** |"
        )
    if ratios:
        lines += [
            "",
            f"first_reached / entity: aggregate writes {_fmt(ratios['aggregate_writes'])}, aggregate requests (reads "
            f"and writes) {_fmt(ratios['aggregate_requests'])}, **dollars {_fmt(ratios['dollars'])}**.",
        ]
    return lines


def _among_lines(among: dict[str, Any] | None) -> list[str]:
    if not among or not among.get("cases"):
        return []
    board = among["board"]
    lines = [
        "",
        f"`among` against N `rank` requests for the same entities, on a board of {board['entities']:,} aggregates "
        f"(Zipf-shaped counts, ties at the tail; {board['mean_entry_bytes']:g} B an entry): read units computed from "
        "the items' sizes by AWS's rule from the requests counted in the function; times from this client "
        f"(`among`: the median of {among['repeats']}; ranks: the N asked one after another) and in the handler. "
        f"Answers {'match the board' if among['answers_correct'] else 'DO NOT all match the board'}. Reading the "
        f"whole board by pages instead: {among['whole_board_read_units']:g} read units (computed).",
        "",
        "| N | among: read units | calls | client ms | handler ms | N ranks: read units | calls | entries counted "
        "| client ms | handler ms | **read units ranks / among** | client time ranks / among |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in among["cases"]:
        mine, ranks = case["among"], case["ranks"]
        lines.append(
            f"| {case['n']} | {_fmt(mine['read_units'])} | {_fmt(mine['calls'])} | {_fmt(mine['client_ms_median'])} | "
            f"{_fmt(mine['handler_ms_median'])} | {_fmt(ranks['read_units'])} | {ranks['calls']:,} | "
            f"{ranks['entries_evaluated']:,} | {_fmt(ranks['client_ms_total'])} | {_fmt(ranks['handler_ms_total'])} | "
            f"**{_fmt(case['read_units_ratio'])}** | {_fmt(case['client_time_ratio'])} |"
        )
    return lines


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:g}"
    return f"{value:,}" if isinstance(value, int) else str(value)
