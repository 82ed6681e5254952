"""From one run's raw results to what a reader sees: summary.json, Markdown tables, PNG plots, docs/benchmark.md.

`python -m leaderboard_dev.bench report` redraws all of it from results.json without an
emulator. Every figure is a count or a ratio of one run; absolute times stand beside the
machine they were measured on (provenance).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from leaderboard_dev.bench import board_features, ledger_cost
from leaderboard_dev.bench.pressure_cost import (
    PRICES,
    cost_per_million,
    guide_index_pressure,
    index_pressure,
    sizing_check,
)
from leaderboard_dev.settings import REPOSITORY
from leaderboard_tools.size.sizing import PARTITION_WRITE_LIMIT

DOCUMENT = REPOSITORY / "docs" / "benchmark.md"
"""Where a full run's tables and plots go: its Results section, replaced on every run."""
SECTION = "## Results"
NEXT_SECTION = "## Contenders and workload"
SUMMARY_FIELDS = ("writes_per_100", "bound_per_100", "count_error", "records_per_second", "freshness_seconds")
TABLE_SHARDS = (1, 2, 4, 8, 16, 32, 64)


def provenance(command: str, emulator: str | None) -> dict[str, Any]:
    """Which commit, command, machine and emulator produced the figures, and when."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPOSITORY, capture_output=True, text=True, check=False)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=False,
    )
    return {
        "commit": commit.stdout.strip(),
        "work_tree_clean": not dirty.stdout.strip(),
        "command": command,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {_memory_gib()} GiB, {_cpu_model()}",
        "python": platform.python_version(),
        "emulator": emulator,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


MEASURED_CODE = ("lambda_src",)
"""What the figures describe: a part measured before a later change to it describes code that no longer ships."""


def parts_older_than_the_aggregator(results: dict[str, Any], repository: Path = REPOSITORY) -> list[str]:
    """Each part of the results (the full run, and every part merged from a run of its own) measured on a work tree
    with uncommitted changes, or at a commit the aggregator has changed since: what `report` refuses to publish."""
    measured = [("the full run", results.get("provenance") or {})]
    measured += [(part, run["provenance"]) for part, run in sorted(results.get("separate_runs", {}).items())]
    stale = []
    for part, origin in measured:
        commit = origin.get("commit") or ""
        at = commit[:12] or "an unknown commit"
        if not origin.get("work_tree_clean", False):
            stale.append(f"{part}: measured with uncommitted changes at {at}")
        elif not _unchanged_since(commit, repository):
            stale.append(f"{part}: measured at {at}, before the aggregator's last change")
    return stale


def _unchanged_since(commit: str, repository: Path) -> bool:
    """Whether the measured code is the same at `commit` as at HEAD; an unknown commit proves nothing."""
    if not commit:
        return False
    diff = subprocess.run(
        ["git", "diff", "--quiet", commit, "HEAD", "--", *MEASURED_CODE],
        cwd=repository,
        capture_output=True,
        check=False,
    )
    return diff.returncode == 0


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def _memory_gib() -> int:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError):
        return 0


def summarise(results: dict[str, Any]) -> dict[str, Any]:
    """summary.json: per aggregator and batch size the five figures, per data size the read ratio, the headline."""
    runs = results["side_by_side"]
    aggregators: dict[str, dict[str, Any]] = {}
    for run in runs:
        clean, faults = run["clean"], run["faults"]
        aggregators.setdefault(run["aggregator"], {})[str(run["batch_size"])] = {
            "writes_per_100": clean["writes_per_100"],
            "bound_per_100": clean["bound_per_100"],
            "count_error": {
                "absolute": faults["count_error"]["absolute"],
                "relative": round(faults["count_error"]["relative"], 5),
                "over_counted": faults["count_error"]["over_counted"],
                "missing": faults["count_error"]["missing"],
                "fault_rate": faults["fault_rate"],
                "settled": faults["settled"],
                "failed_invocations": faults["failed_invocations"],
                "invocations": faults["invocations"],
            },
            "records_per_second": clean["records_per_second"],
            "freshness_seconds": clean["freshness_seconds"],
            "mean_batch": clean["mean_batch"],
            "ingest_rate": clean["ingest_rate"],
            "count_error_without_faults": clean["count_error"]["absolute"],
            "stream_records_read_per_100": clean.get("stream_records_read_per_100"),
        }
    reads = results.get("reads_freshness") or {"ladder": [], "rates": []}
    latency = latency_floor(reads["rates"])
    summary = {
        "provenance": results["provenance"],
        "plan": results["plan"],
        "aggregators": aggregators,
        "headline": headline(aggregators),
        "reads": {
            str(step["data_size"]): {
                "read_ratio_index_vs_scan": step["read_ratio_index_vs_scan"],
                "index_query_ms": step["index_query_ms"],
                "query_lambda_ms": step["query_lambda_ms"],
                "scan_and_count_ms": step["scan_and_count_ms"],
            }
            for step in reads["ladder"]
        },
        "freshness": {
            "by_load": [
                {
                    **{key: step[key] for key in ("load", "data_size", "ingest_rate", "freshness_seconds")},
                    "pipeline_rate": pipeline_rate(step, latency),
                }
                for step in reads["ladder"]
            ],
            "by_rate": reads["rates"],
            "latency_floor_seconds": latency,
            "highest_ingest_rate": reads["ladder"][-1]["ingest_rate"] if reads["ladder"] else None,
            "over_downloads": reads["ladder"][-1]["load"] if reads["ladder"] else None,
        },
    }
    if "reads_provenance" in results:
        summary["reads_provenance"] = results["reads_provenance"]
        summary["reads_plan"] = results["reads_plan"]
    summary["failures"] = results.get("failures", [])
    summary["separate_runs"] = results.get("separate_runs", {})
    ours = [run for run in runs if run["aggregator"] == "ours_per_batch"]
    guides = [run for run in runs if run["aggregator"] == "guide"]
    summary["sizing_check"] = [sizing_check(run) for run in ours]
    summary["index_pressure"] = {
        "partition_write_limit": PARTITION_WRITE_LIMIT,
        "ours_per_batch": [row for run in ours for row in index_pressure(run)],
        "guide": guide_index_pressure(),
    }
    handler_cpu = results.get("handler_cpu")
    boards = boards_rows(results.get("boards") or [])
    summary["boards"] = boards
    summary["handler_cpu"] = handler_cpu_rows(handler_cpu)
    summary["catch_up_memory"] = results.get("catch_up_memory")
    summary["all_in"] = results.get("all_in")
    summary["backfill"] = results.get("backfill")
    summary["board_features"] = board_features.summarise(results.get("board_features"))
    summary["ledger"] = results.get("ledger")
    summary["cost_per_million_downloads"] = {
        "prices": PRICES,
        "lambda_duration": (
            {"derived_from": "handler CPU per download without the emulator, plus latency per call", **handler_cpu}
            if handler_cpu
            else {"derived_from": "the aggregator's duration_ms as measured on the emulator"}
        ),
        "rows": [cost_per_million(run, guide=False, handler_cpu=handler_cpu) for run in ours]
        + [cost_per_million(run, guide=True, handler_cpu=handler_cpu) for run in guides]
        + [
            cost_per_million(
                {"aggregator": "ours_per_batch", "batch_size": row["batch_size"], "clean": row},
                guide=False,
                handler_cpu=handler_cpu,
                configuration=row["configuration"],
            )
            for row in boards
            if row["configuration"] != "month"
        ],
    }
    return summary


def boards_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The boards part per configuration and batch size, with its writes against the month's at that batch size."""
    month = {run["batch_size"]: run["writes_per_100"] for run in runs if run["configuration"] == "month"}
    rows = []
    for run in sorted(runs, key=lambda run: (run["batch_size"], run["boards_per_download"], run["configuration"])):
        over_month = month.get(run["batch_size"])
        rows.append({**run, "over_month": round(run["writes_per_100"] / over_month, 2) if over_month else None})
    return rows


def handler_cpu_rows(measured: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The handler's CPU per download and calls per invocation, per case measured."""
    if not measured:
        return []
    keys = (
        "aggregator",
        "configuration",
        "batch_size",
        "downloads",
        "cpu_ms_per_download",
        "cpu_ms_per_download_spread",
        "sequential_calls_per_invocation",
        "aggregate_writes_per_invocation",
    )
    return [{key: case[key] for key in keys} for case in measured["cases"]]


def headline(aggregators: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per batch size: ours/bound (goal 1.00), guide/ours, throughput ours/guide, and both count errors."""
    rows = []
    ours, guide, window = (aggregators.get(name, {}) for name in ("ours_per_batch", "guide", "ours_per_window"))
    for batch in sorted(ours, key=int):
        mine, theirs = ours[batch], guide.get(batch)
        rows.append(
            {
                "batch_size": int(batch),
                "ours_writes_per_100": mine["writes_per_100"],
                "bound_per_100": mine["bound_per_100"],
                "ours_over_bound": _ratio(mine["writes_per_100"], mine["bound_per_100"]),
                "per_window_writes_per_100": window.get(batch, {}).get("writes_per_100"),
                "guide_writes_per_100": theirs and theirs["writes_per_100"],
                "guide_over_ours": theirs and _ratio(theirs["writes_per_100"], mine["writes_per_100"]),
                "throughput_ours_over_guide": theirs
                and _ratio(mine["records_per_second"], theirs["records_per_second"]),
                "ours_count_error": mine["count_error"]["absolute"],
                "ours_settled": mine["count_error"].get("settled", True),
                "guide_settled": theirs and theirs["count_error"].get("settled", True),
                "guide_count_error": theirs and theirs["count_error"]["absolute"],
                "guide_relative_error": theirs and theirs["count_error"]["relative"],
                "ours_freshness_seconds": mine["freshness_seconds"],
                "guide_freshness_seconds": theirs and theirs["freshness_seconds"],
            }
        )
    return rows


def one_table_against_two_lines(summary: dict[str, Any]) -> list[str]:
    """`ours_per_batch` (aggregates in the downloads' table, so their writes come back on its stream) beside
    `ours_separate_table` (a table of their own), at the batch sizes both ran: the same clean load."""
    aggregators = summary["aggregators"]
    one, two = aggregators.get("ours_per_batch", {}), aggregators.get("ours_separate_table", {})
    batches = sorted(set(one) & set(two), key=int)
    if not batches:
        return []
    lines = [
        "",
        "One table against two (`separate_aggregates_table`), the same clean load: stream records the aggregator "
        "read itself per 100 downloads (its bound is 100: each download once), aggregate writes per 100, its "
        "throughput and freshness.",
        "",
        "| batch size | layout | stream records read / 100 | aggregate writes / 100 | records / s | freshness (s) |",
        "|---|---|---|---|---|---|",
    ]
    for batch in batches:
        for layout, figures in (("one table", one[batch]), ("two tables", two[batch])):
            lines.append(
                f"| {int(batch):,} | {layout} | {_fmt(figures.get('stream_records_read_per_100'))} | "
                f"{figures['writes_per_100']} | {_fmt(figures['records_per_second'])} | "
                f"{_fmt(figures['freshness_seconds'])} |"
            )
    return lines


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return round(numerator / denominator, 2) if numerator and denominator else None


def markdown(summary: dict[str, Any], plots: dict[str, str]) -> str:
    """The headline table, the reads, freshness, pressure and cost, and the plots: summary.md, docs/benchmark.md."""
    origin = summary["provenance"]
    lines = [
        f"Measured by `{origin['command']}` at commit `{origin['commit'][:12]}` on {origin['date']}: "
        f"{origin['emulator']} on {origin['machine']}. Workload: Zipf 1.1 over 1,000 songs, fixed seeds; "
        f"fault rate {summary['plan']['fault_rate']:.0%} of the invocations with records, for every aggregator. "
        "Every figure is a count or a ratio of that one run; absolute times are this machine's.",
        "",
        "| batch size | ours writes / 100 | bound / 100 | **ours / bound** | per_window / 100 | guide / 100 "
        "| **guide / ours** | throughput ours / guide | count error under faults: ours | guide (relative) "
        "| freshness ours / guide (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in summary["headline"]:
        lines.append(
            f"| {row['batch_size']:,} | {row['ours_writes_per_100']} | {row['bound_per_100']} | "
            f"**{_fmt(row['ours_over_bound'])}** | {_fmt(row['per_window_writes_per_100'])} | "
            f"{_fmt(row['guide_writes_per_100'])} | **{_fmt(row['guide_over_ours'])}** | "
            f"{_fmt(row['throughput_ours_over_guide'])} | {row['ours_count_error']}{_unsettled(row['ours_settled'])} | "
            f"{_fmt(row['guide_count_error'])} ({_percent(row['guide_relative_error'])})"
            f"{_unsettled(row['guide_settled'])} | "
            f"{_fmt(row['ours_freshness_seconds'])} / {_fmt(row['guide_freshness_seconds'])} |"
        )
    lines += one_table_against_two_lines(summary)
    lines += [
        "",
        "Reads: top 10 of a month, median of repeated reads from this client" + _reads_origin(summary) + ".",
        "",
    ]
    lines += [
        "| downloads in the month | index query (ms) | query Lambda (ms) | scan and count (ms) | **scan / index** |"
    ]
    lines += ["|---|---|---|---|---|"]
    for size, read in sorted(summary["reads"].items(), key=lambda entry: int(entry[0])):
        lines.append(
            f"| {int(size):,} | {read['index_query_ms']} | {read['query_lambda_ms']} | "
            f"{read['scan_and_count_ms']} | **{read['read_ratio_index_vs_scan']}** |"
        )
    freshness = summary["freshness"]
    lines += [
        "",
        f"Freshness (ours, batch size 100, batching window 1 s): last write acknowledged → the index holds every "
        f"download. Highest ingest rate this client sustained: {_fmt(freshness['highest_ingest_rate'])} downloads/s "
        f"(over the largest load, {_fmt(freshness['over_downloads'])} downloads). {pipeline_sentence(freshness)}",
        "",
        "| load | written / s (the load generator) | freshness (s) | counted / s (the pipeline, first write to the "
        "index complete) |",
        "|---|---|---|---|",
    ]
    for step in freshness["by_load"]:
        lines.append(
            f"| {step['load']:,} downloads | {step['ingest_rate']} | {step['freshness_seconds']} "
            f"| {_fmt(step.get('pipeline_rate'))} |"
        )
    for step in freshness["by_rate"]:
        lines.append(
            f"| {step['load']:,} at {step['share_of_highest']:.0%} of the highest rate | {step['ingest_rate']} "
            f"| {step['freshness_seconds']} | {_fmt(pipeline_rate(step, freshness.get('latency_floor_seconds')))} |"
        )
    lines += _pressure_lines(summary) + _boards_lines(summary) + _cost_lines(summary) + _all_in_lines(summary)
    ledger_origin = summary.get("separate_runs", {}).get("ledger", {}).get("provenance")
    lines += ledger_cost.markdown_lines(summary.get("ledger"), ledger_origin)
    lines += _catch_up_lines(summary) + _backfill_lines(summary)
    lines += board_features.report_lines(summary)
    lines += _failure_lines(summary)
    lines += [""] + [f"![{title}]({path})" for title, path in plots.items()]
    return "\n".join(lines) + "\n"


def latency_floor(rates: list[dict[str, Any]]) -> float:
    """The pipeline's latency where it keeps up: the least freshness of the paced loads (0 without them)."""
    return min((rate["freshness_seconds"] for rate in rates if rate.get("freshness_seconds") is not None), default=0.0)


def pipeline_rate(step: dict[str, Any], latency_seconds: float | None = 0.0) -> float | None:
    """Downloads counted a second by the pipeline (stream, mapping, aggregator, index), from the first write of a load
    to the index holding all of it less the latency it has even when it keeps up: the load over its writing time plus
    what its freshness exceeds that latency by."""
    if not step.get("ingest_rate") or step.get("freshness_seconds") is None:
        return None
    backlog_seconds = max(0.0, step["freshness_seconds"] - (latency_seconds or 0.0))
    return round(step["load"] / (step["load"] / step["ingest_rate"] + backlog_seconds), 1)


PIPELINE_SET_THE_PACE = 0.8
"""Below this share of the load generator's rate, the pipeline (not the generator) bounded the load's rate."""


def pipeline_sentence(freshness: dict[str, Any]) -> str:
    """The pipeline's sustained rate, apart from the load generator's: measured on the largest load, and said to be
    the pipeline's own only where the generator outran it."""
    if not freshness["by_load"]:
        return ""
    largest = freshness["by_load"][-1]
    counted, written = largest.get("pipeline_rate"), largest["ingest_rate"]
    if counted is None:
        return ""
    latency = freshness.get("latency_floor_seconds") or 0.0
    if counted < PIPELINE_SET_THE_PACE * written:
        return (
            f"The pipeline sustained {_fmt(counted)} downloads/s on that load, its own limit on this emulator: the "
            f"load generator wrote at {_fmt(written)}/s, so a backlog grew while it wrote (the pipeline's latency "
            f"when it keeps up, {_fmt(latency)} s, the least freshness of the paced loads, is not counted as backlog)."
        )
    return (
        f"The pipeline kept pace with the load generator ({_fmt(counted)} counted against {_fmt(written)} written a "
        f"second): its own limit is above what this client can write, and not measured here."
    )


def _reads_origin(summary: dict[str, Any]) -> str:
    """Where the reads and freshness figures come from when a separate `reads` run measured them."""
    origin = summary.get("reads_provenance")
    if not origin:
        return ""
    return (
        f" (measured by a separate run, `{origin['command']}` at commit `{origin['commit'][:12]}` on {origin['date']})"
    )


def _failure_lines(summary: dict[str, Any]) -> list[str]:
    failures = summary.get("failures") or []
    if not failures:
        return []
    return ["", "Not measured in this run:"] + [f"- {failure['part']}: {failure['error']}" for failure in failures]


def _pressure_lines(summary: dict[str, Any]) -> list[str]:
    pressure = summary["index_pressure"]
    rows = pressure["ours_per_batch"]
    if not rows:
        return []
    batches = sorted({row["batch_size"] for row in rows})
    rates = sorted({row["downloads_per_second"] for row in rows})
    lines = [
        "",
        f"Index writes per second on the busiest partition (limit {pressure['partition_write_limit']:,}), from the "
        "measured writes per song; in brackets `leaderboard_tools/size/sizing.py`'s prediction for the batches "
        "delivered. All 64 values of `leaderboard_shards` are in summary.json.",
        "",
        "| batch size | downloads/s | " + " | ".join(f"N={shards}" for shards in TABLE_SHARDS) + " |",
        "|---|---|" + "---|" * len(TABLE_SHARDS),
    ]
    for batch in batches:
        for rate in rates:
            cells = []
            for shards in TABLE_SHARDS:
                row = next(
                    r
                    for r in rows
                    if (r["batch_size"], r["downloads_per_second"], r["leaderboard_shards"]) == (batch, rate, shards)
                )
                over = (
                    " ⚠" if row["busiest_partition_index_writes_per_second"] > pressure["partition_write_limit"] else ""
                )
                cells.append(
                    f"{row['busiest_partition_index_writes_per_second']:,.0f} ({row['sizing_prediction']:,.0f}){over}"
                )
            lines.append(f"| {batch:,} | {rate:,} | " + " | ".join(cells) + " |")
    guide = ", ".join(
        f"{row['busiest_partition_index_writes_per_second']:,} at {row['downloads_per_second']:,}/s"
        for row in pressure["guide"]
    )
    lines += ["", f"The guide's handler, one partition a month: {guide} index writes per second."]
    checks = summary["sizing_check"]
    if checks:
        lines += [
            "",
            "Sizing arithmetic against the measured bound: "
            + "; ".join(
                f"batch {check['batch_size']:,} (mean delivered {check['mean_batch']}): measured "
                f"{check['measured_bound_per_100']} vs predicted {check['sizing_updates_per_100']} per 100 "
                f"({_fmt(check['measured_over_predicted'])})"
                for check in checks
            )
            + ".",
        ]
    return lines


ALL_IN_COMPONENTS = (
    ("aggregate_writes", "aggregates"),
    ("index_writes", "index"),
    ("progress_reads", "progress reads"),
    ("progress_writes", "progress writes"),
    ("stream_reads", "stream reads"),
    ("lambda_requests", "Lambda requests"),
    ("lambda_duration", "Lambda duration"),
    ("sqs", "SQS"),
)


def _all_in_lines(summary: dict[str, Any]) -> list[str]:
    """Every request counted at the SDK, per 100 downloads, and dollars per million by component."""
    measured = summary.get("all_in")
    if not measured:
        return []
    origin = summary.get("separate_runs", {}).get("all_in", {}).get("provenance")
    measured_at = f" (measured alone at commit `{origin['commit'][:12]}` on {origin['date']})" if origin else ""
    lines = [
        "",
        f"All in{measured_at}: the shipped handler and the guide's on moto, in process, every request counted where "
        f"moto answers it, its units from the items' images (bench/all_in.py). {measured['downloads_per_second']:,} "
        f"downloads/s, {measured['window_seconds']} s windows ({measured['window_downloads']:,} downloads); per_batch "
        f"measures {measured['measured_downloads']:,} downloads of a window and its final invocation for their share, "
        f"per_window the whole window. Lambda at {measured['memory_gb']:g} GB: the handler's CPU plus "
        f"{measured['latency']['milliseconds_per_call']:g} ms per call waited for. Prices: "
        + ", ".join(
            f"{p['item']} ${p['usd']:g} per {p['unit']} ({p['confirmed']})" for p in measured["prices"]["prices"]
        )
        + ".",
        "",
        "| configuration | aggregate writes / 100 | bound / 100 | index writes / 100 | index writes per changed count "
        "| progress reads / writes per 100 | GetRecords / 100 | stream records read / 100 | invocations / 100 "
        "| GB-s / 100 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in measured["cases"]:
        per_100 = case["per_100_downloads"]
        progress = [
            sum(v for k, v in per_100["requests"].items() if k.startswith(f"dynamodb {op} ") and "progress" in k)
            for op in ("GetItem", "UpdateItem")
        ]
        changed = ", ".join(f"{v:g}" for v in per_100["index_writes_per_changed_count"].values()) or "-"
        lines.append(
            f"| {case['name']} | {per_100['aggregate_writes']} | {_fmt(per_100['aggregate_write_bound'])} | "
            f"{sum(per_100['index_writes'].values()):.2f} | {changed} | {progress[0]:.3f} / {progress[1]:.3f} | "
            f"{per_100['stream_read_request_units']} | {per_100['stream_records_read']} | "
            f"{per_100['lambda_invocations']} | {per_100['lambda_gb_seconds']} |"
        )
    lines += [
        "",
        "Dollars per million downloads, by component; the total without the ingest write of the download, then "
        "with it.",
        "",
        "| configuration | " + " | ".join(label for _, label in ALL_IN_COMPONENTS) + " | **total** | ingest "
        "| total with ingest | progress table's share |",
        "|---|" + "---|" * (len(ALL_IN_COMPONENTS) + 4),
    ]
    for case in measured["cases"]:
        dollars = case["dollars_per_million"]
        lines.append(
            f"| {case['name']} | "
            + " | ".join(f"{dollars[key]:.4f}" for key, _ in ALL_IN_COMPONENTS)
            + f" | **{case['dollars_per_million_total']:.4f}** | {case['dollars_per_million_ingest']:.4f} | "
            f"{case['dollars_per_million_total_with_ingest']:.4f} | {_percent(progress_share(case))} |"
        )
    return lines


def progress_share(case: dict[str, Any]) -> float | None:
    """The progress table's reads and writes as a share of the configuration's total without the ingest write."""
    dollars, total = case["dollars_per_million"], case["dollars_per_million_total"]
    if not total:
        return None
    return (dollars["progress_reads"] + dollars["progress_writes"]) / total


def _catch_up_lines(summary: dict[str, Any]) -> list[str]:
    """Peak memory of one catch-up invocation per backlog and item size: bounded, whatever the backlog."""
    measured = summary.get("catch_up_memory")
    if not measured:
        return []
    budget = measured["budget"]
    origin = summary.get("separate_runs", {}).get("catch_up_memory", {}).get("provenance")
    measured_at = f", measured alone at commit `{origin['commit'][:12]}` on {origin['date']}" if origin else ""
    lines = [
        "",
        f"Catching up a lagging checkpoint (the shipped handler in process, tracemalloc{measured_at}; the first "
        f"{measured['measured_invocations']} invocations of each backlog measured, each through the backlog's end). "
        f"Read budget per step: {budget['records']:,} records or {budget['bytes'] / 2**20:.0f} MiB of "
        "stream records, a page more at most, each step written and released before the next; an invocation "
        f"reads steps while its time lasts (here {_fmt(measured.get('pages_per_invocation'))} GetRecords pages). "
        "Invocations to drain: counted where the measured invocations drained the backlog, else the backlog over "
        "the records one invocation read.",
        "",
        "| backlog (records) | item size (B) | peak per invocation (MiB) | records per invocation "
        "| invocations to drain |",
        "|---|---|---|---|---|",
    ]
    for row in measured["runs"]:
        drained = "" if row["drained_in_measurement"] else " (projected)"
        lines.append(
            f"| {row['backlog_records']:,} | {row['item_bytes']:,} | {row['peak_mib']} | "
            f"{row['records_per_invocation']:,} | {_fmt(row['invocations_to_drain'])}{drained} |"
        )
    return lines


BACKFILL_COMPONENTS = (
    ("scan_reads", "Scan reads"),
    ("claims_table_reads", "claims table reads"),
    ("claims_table_writes", "claims table writes"),
    ("aggregate_writes", "aggregate writes"),
    ("index_writes", "index writes"),
)


def _backfill_lines(summary: dict[str, Any]) -> list[str]:
    """What `leaderboard-tools backfill` asks of DynamoDB per item of history, and what that costs."""
    measured = summary.get("backfill")
    if not measured:
        return []
    origin = summary.get("separate_runs", {}).get("backfill", {}).get("provenance")
    measured_at = f" (measured alone at commit `{origin['commit'][:12]}` on {origin['date']})" if origin else ""
    count = measured["downloads"]
    exact = (
        "every aggregate equals the recount of the generated downloads"
        if measured["exact"]
        else (f"NOT exact: {measured['wrong_aggregates']} aggregates differ from the recount")
    )
    lines = [
        "",
        f"The backfill{measured_at}: `leaderboard_tools.backfill.Backfill` itself on moto, in process, over a table of "
        f"{count:,} downloads (Zipf 1.1 over {measured['songs']:,} songs, {len(measured['months'])} months, "
        f"{measured['mean_item_bytes']:g} B an item; aggregates in a table of their own, as with `source_table_name`), "
        f"{measured['segments']} segments, pages of {measured['page_size']}, unpaced; every request counted where moto "
        f"answers it (bench/backfill_cost.py); {exact}. Read units: the strongly consistent Scan charged for the full "
        "size of the items each page evaluated, rounded up to 4 KB (moto's ConsumedCapacity is a constant per "
        "request, not used); write units from the items' images, a transactional write twice. A transaction is listed "
        "under its first action's table (a claim); it also updates the aggregates, whose units are below.",
        "",
        "| request | count | per 1,000 items |",
        "|---|---|---|",
    ]
    for key, requests in measured["requests"].items():
        lines.append(f"| {key} | {requests:,} | {1000 * requests / count:.2f} |")
    scan = measured["scan"]
    lines += [
        "",
        "| figure | value |",
        "|---|---|",
        f"| Scan pages, items read, bytes read | {scan['pages']:,}, {scan['items_evaluated']:,}, "
        f"{scan['bytes_evaluated']:,} |",
        f"| read units (Scan; the claims table's own items) | {scan['read_units']:g}; "
        f"{sum(measured['read_units'].values()) - scan['read_units']:g} |",
        f"| read units per item (Scan) | {measured['read_units_per_item']:g} |",
        "| write units ("
        + ", ".join(f"{t} {u:,}" for t, u in measured["write_units"].items())
        + "; index "
        + ", ".join(f"{u:,}" for u in measured["index_write_units"].values())
        + ") | "
        f"{measured['write_units_per_item']:g} per item |",
        f"| downloads per transaction | {_fmt(measured['downloads_per_transaction'])} |",
        f"| items per second, this machine (moto answering, meter included) | "
        f"{measured['items_per_second_this_machine']:,} |",
        f"| CPU ms per item, this machine (moto's share) | {measured['cpu_ms_per_item_this_machine']} "
        f"({measured['moto_cpu_ms_per_item_this_machine']}) |",
        f"| items per second the default pace allows on AWS ({measured['max_read_units_per_second']:g} read units/s) "
        f"| {_fmt(measured['items_per_second_at_default_pace'])} |",
        "",
        "Dollars per million items of history, by component:",
        "",
        "| " + " | ".join(label for _, label in BACKFILL_COMPONENTS) + " | **total** |",
        "|" + "---|" * (len(BACKFILL_COMPONENTS) + 1),
        "| "
        + " | ".join(f"{measured['dollars_per_million_items'][key]:.4f}" for key, _ in BACKFILL_COMPONENTS)
        + f" | **{measured['dollars_per_million_items_total']:.4f}** |",
    ]
    return lines


def _boards_lines(summary: dict[str, Any]) -> list[str]:
    rows = summary.get("boards") or []
    if not rows:
        return []
    origin = (summary.get("separate_runs") or {}).get("boards")
    measured_by = (
        f" Measured by a separate run, `{origin['provenance']['command']}` at commit "
        f"`{origin['provenance']['commit'][:12]}` on {origin['provenance']['date']}."
        if origin
        else ""
    )
    lines = [
        "",
        f"Aggregate writes per 100 downloads by the boards a download is counted in: one stack per configuration, "
        f"a clean load of {rows[0]['downloads']:,} downloads at each batch size, written in time order (a batch holds "
        "seconds of downloads; a load spans one UTC midnight), Zipf 1.1 over 1,000 songs in 8 genres; `exact`: every "
        "board equals the generator's recount. Predicted: the sizing arithmetic, the month's distinct songs per batch "
        "times the boards per download." + measured_by,
        "",
        "| boards kept | boards per download | batch size | writes / 100 | bound / 100 | **/ month** "
        "| predicted / 100 | exact |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        exact = "yes" if row["exact"] else f"no ({row['wrong_aggregates']} wrong)"
        lines.append(
            f"| `{row['label']}` | {row['boards_per_download']} | {row['batch_size']:,} | {row['writes_per_100']} | "
            f"{row['bound_per_100']} | **{_fmt(row['over_month'])}** | {row['predicted_per_100']} | {exact} |"
        )
    return lines


def _cost_lines(summary: dict[str, Any]) -> list[str]:
    cost = summary["cost_per_million_downloads"]
    prices = cost["prices"]
    derived = [row for row in cost["rows"] if row.get("lambda_duration") == "derived"]
    lines = [
        "",
        f"Cost per million downloads on AWS ({prices['region']}, on-demand; prices looked up {prices['looked_up']}: "
        f"write request unit ${prices['dynamodb_write_request_unit_per_million']}/million, Lambda "
        f"${prices['lambda_gb_second_x86']}/GB-s and ${prices['lambda_request_per_million']}/million requests; "
        "sources in summary.json), at 512 MB. " + _duration_sentence(summary, bool(derived)),
        "",
        "| aggregator | boards | batch size | table writes | index writes | Lambda GB-s | on the emulator GB-s "
        "| total $ |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in cost["rows"]:
        marker = "" if row.get("lambda_duration", "emulator") == "derived" else " (emulator)"
        lines.append(
            f"| {row['aggregator']} | {row.get('configuration', 'month')} | {row['batch_size']:,} | "
            f"{row['table_writes']:,} | {row['index_writes']:,} | {row['lambda_gb_seconds']}{marker} | "
            f"{row.get('emulator_lambda_gb_seconds', row['lambda_gb_seconds'])} | {row['dollars_total']:.3f} |"
        )
    cpu = summary.get("handler_cpu") or []
    if cpu:
        lines += [
            "",
            "The handler's CPU per download, DynamoDB and DynamoDB Streams answering at once (moto in process, the "
            "time its backend takes out; thread CPU time of this machine), and the calls of an invocation:",
            "",
            "| aggregator | boards | batch size | CPU ms / download (min, median, max per batch) | calls in line "
            "/ invocation | aggregate writes / invocation |",
            "|---|---|---|---|---|---|",
        ]
        for case in cpu:
            low, middle, high = case["cpu_ms_per_download_spread"]
            lines.append(
                f"| {case['aggregator']} | {case['configuration']} | {case['batch_size']:,} | "
                f"{case['cpu_ms_per_download']} ({low}, {middle}, {high}) | {case['sequential_calls_per_invocation']} "
                f"| {case['aggregate_writes_per_invocation']} |"
            )
    return lines


def _duration_sentence(summary: dict[str, Any], derived: bool) -> str:
    if not derived:
        return "Lambda duration as measured on the emulator."
    latency = summary["cost_per_million_downloads"]["lambda_duration"]["latency"]
    source = latency["sources"][0]
    return (
        "Lambda duration derived, not measured on the emulator (whose DynamoDB calls are far slower than "
        "DynamoDB's): the handler's CPU per download measured without the emulator (below), plus "
        f"{latency['milliseconds_per_call']:g} ms for each DynamoDB call it waits for: the calls other than "
        "aggregate writes one after another, the aggregate writes in rounds of `aggregator_write_concurrency` (8); "
        f'the guide\'s ADDs one after another. AWS: "{source["quote"]}" ({source["title"]}, {source["url"]}); '
        "10 ms is the upper end, leaving room for the network. Writes and invocations per million as measured "
        "on the emulator; the emulator's own durations beside them."
    )


def _unsettled(settled: bool | None) -> str:
    """A count error read after the wait ran out: records still in retries count as missing, not as wrong."""
    return " (not settled: read at the timeout)" if settled is False else ""


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.2f} %"


def plot(summary: dict[str, Any], results: dict[str, Any], directory: Path) -> dict[str, str]:
    """Three PNGs (matplotlib, Agg): writes per 100 against batch size, read time against size, freshness."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths: dict[str, str] = {}
    aggregators = summary["aggregators"]
    figure, axes = plt.subplots(figsize=(7, 4.5))
    styles = {"ours_per_batch": "o-", "ours_per_window": "s-", "guide": "^-", "ours_separate_table": "d:"}
    for name, by_batch in aggregators.items():
        batches = sorted(by_batch, key=int)
        axes.plot([int(b) for b in batches], [by_batch[b]["writes_per_100"] for b in batches], styles[name], label=name)
    ours = aggregators.get("ours_per_batch", {})
    batches = sorted(ours, key=int)
    axes.plot(
        [int(b) for b in batches],
        [ours[b]["bound_per_100"] for b in batches],
        "kx--",
        label="bound (distinct per batch)",
    )
    checks = summary["sizing_check"]
    if checks:
        axes.plot(
            [c["batch_size"] for c in checks], [c["sizing_updates_per_100"] for c in checks], "k+:", label="sizing.py"
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("batch size (records)")
    axes.set_ylabel("aggregate writes per 100 downloads")
    axes.set_title("Aggregate writes per 100 downloads")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    paths["writes per 100 downloads against batch size"] = _save(figure, directory / "writes_per_100.png", plt)
    paths |= _cost_plot(summary, directory, plt) | _memory_plot(summary, directory, plt)

    if not summary["reads"]:  # the reads were not measured: no read or freshness plot
        return {title: Path(path).name for title, path in paths.items()}
    figure, axes = plt.subplots(figsize=(7, 4.5))
    reads = sorted(summary["reads"].items(), key=lambda entry: int(entry[0]))
    sizes = [int(size) for size, _ in reads]
    for key, label in (
        ("index_query_ms", "index query, Limit 10"),
        ("query_lambda_ms", "query Lambda"),
        ("scan_and_count_ms", "scan and count the downloads"),
    ):
        axes.plot(sizes, [read[key] for _, read in reads], "o-", label=label)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("downloads in the month")
    axes.set_ylabel("top 10, median (ms)")
    axes.set_title(f"Top 10: read time against data size ({summary['provenance']['emulator']})")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    paths["top-10 read time against data size"] = _save(figure, directory / "read_time.png", plt)

    figure, (by_load, by_rate) = plt.subplots(1, 2, figsize=(10, 4.2))
    freshness = summary["freshness"]
    by_load.plot(
        [s["load"] for s in freshness["by_load"]], [s["freshness_seconds"] for s in freshness["by_load"]], "o-"
    )
    by_load.set_xscale("log")
    by_load.set_xlabel("downloads in the load (as fast as the client writes)")
    by_load.set_ylabel("seconds from last write to final counts")
    by_load.grid(True, which="both", alpha=0.3)
    by_rate.plot(
        [s["ingest_rate"] for s in freshness["by_rate"]], [s["freshness_seconds"] for s in freshness["by_rate"]], "o-"
    )
    by_rate.set_xlabel("ingest rate (downloads/s)")
    by_rate.grid(True, alpha=0.3)
    figure.suptitle("Freshness of the leaderboard against load (ours, batch size 100)")
    paths["freshness against load"] = _save(figure, directory / "freshness.png", plt)
    return {title: path.name for title, path in ((t, Path(p)) for t, p in paths.items())}


def _cost_plot(summary: dict[str, Any], directory: Path, plt: Any) -> dict[str, str]:
    """Dollars per million downloads by component, stacked, per all-in configuration: without the ingest write of
    the download, and with it."""
    measured = summary.get("all_in")
    if not measured:
        return {}
    cases = measured["cases"]
    names = [case["name"].replace("_", " ") for case in cases]
    figure, panels = plt.subplots(1, 2, figsize=(13, 5))
    colours = plt.get_cmap("tab10").colors
    for panel, with_ingest in zip(panels, (False, True), strict=True):
        bottoms = [0.0] * len(cases)
        components = [*ALL_IN_COMPONENTS, *((("ingest", "ingest write"),) if with_ingest else ())]
        for number, (key, label) in enumerate(components):
            values = [
                case["dollars_per_million_ingest"] if key == "ingest" else case["dollars_per_million"][key]
                for case in cases
            ]
            panel.bar(names, values, bottom=bottoms, label=label, color=colours[number % len(colours)])
            bottoms = [bottom + value for bottom, value in zip(bottoms, values, strict=True)]
        for x, total in enumerate(bottoms):
            panel.annotate(f"{total:.2f}", (x, total), ha="center", va="bottom", fontsize=8)
        panel.set_ylim(0, 1.12 * max(bottoms))
        panel.set_title("with the ingest write" if with_ingest else "without the ingest write")
        panel.set_ylabel("$ per million downloads")
        panel.tick_params(axis="x", labelrotation=35)
        for tick in panel.get_xticklabels():
            tick.set_horizontalalignment("right")
        panel.grid(True, axis="y", alpha=0.3)
    handles, labels = panels[1].get_legend_handles_labels()
    panels[1].legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    figure.suptitle(f"Cost per million downloads by component (all in, {measured['downloads_per_second']:,}/s)")
    return {"cost per million downloads by component": _save(figure, directory / "cost_by_component.png", plt)}


def _memory_plot(summary: dict[str, Any], directory: Path, plt: Any) -> dict[str, str]:
    """Peak memory of one catch-up invocation against the backlog, one line per item size."""
    measured = summary.get("catch_up_memory")
    if not measured or not measured.get("runs"):
        return {}
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for size in sorted({run["item_bytes"] for run in measured["runs"]}):
        runs = sorted(
            (run for run in measured["runs"] if run["item_bytes"] == size), key=lambda r: r["backlog_records"]
        )
        axes.plot([r["backlog_records"] for r in runs], [r["peak_mib"] for r in runs], "o-", label=f"{size:,} B items")
    axes.set_xscale("log")
    axes.set_ylim(bottom=0)
    axes.set_xlabel("backlog (stream records behind the checkpoint)")
    axes.set_ylabel("peak per invocation (MiB, tracemalloc)")
    budget = measured["budget"]
    axes.set_title(
        f"Catch-up memory against backlog (budget {budget['records']:,} records or {budget['bytes'] / 2**20:.0f} MiB)"
    )
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    return {"peak memory against backlog": _save(figure, directory / "catch_up_memory.png", plt)}


def _save(figure: Any, path: Path, plt: Any) -> str:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return str(path)


def write_results(
    results: dict[str, Any], directory: Path, document: Path | None, figures: Path | None = None
) -> dict[str, Any]:
    """results.json and summary.json into `directory`; summary.md and the plots into `figures` (default: the same
    folder), where a reader looks; `document`'s Results when given."""
    figures = directory if figures is None else figures
    directory.mkdir(parents=True, exist_ok=True)
    figures.mkdir(parents=True, exist_ok=True)
    (directory / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    summary = summarise(results)
    (directory / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    plots = plot(summary, results, figures)
    table = markdown(summary, plots)
    (figures / "summary.md").write_text("# Benchmark results\n\n" + table)
    if document is not None:
        relative = Path(os.path.relpath(figures, document.parent)).as_posix()  # links from the document's folder
        document_plots = {title: f"{relative}/{name}" for title, name in plots.items()}
        replace_section(document, results_section(markdown(summary, document_plots)))
    return summary


def results_section(table: str) -> str:
    return (
        f"{SECTION}\n\n"
        "The last full run's figures, written here by `make bench` (`python -m leaderboard_dev.bench`) and "
        "redrawn by its `report` part; how each is computed: [The figures](benchmark-figures.md).\n\n" + table + "\n"
    )


def replace_section(document: Path, section: str) -> None:
    """Put `section` just before `## Contenders and workload`, replacing an earlier `## Results`."""
    text = document.read_text()
    end = text.index(f"\n{NEXT_SECTION}\n") + 1
    start = text.find(f"\n{SECTION}\n")
    start = end if start < 0 or start > end else start + 1
    document.write_text(text[:start] + section + "\n" + text[end:])
