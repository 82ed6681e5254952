"""Why the pattern exists, and how fresh it stays: top 10 from the sparse index against a scan, freshness under load.

One stack of ours in the module's defaults (per_batch, batch size 100, 1-second batching window).

- Reads: one month grows through the data sizes of the plan (each step's downloads added to the
  previous ones). At each size the top 10 is read three ways, each `read_repeats` times (median):
  the guide's index query (Query on the month, descending, Limit 10), the query Lambda, and the
  alternative the pattern avoids: a Scan of the table counting the download records per song in
  their UTC month. The scan's top 10 must equal the index's.
- Freshness against load size: each step of that ladder is written as fast as this client can;
  from its last acknowledged write until the index holds every download of the month.
- Freshness against ingest rate: loads of the same size, each in a month of its own, paced at
  shares of the highest rate the client reached on the largest step.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from leaderboard_dev.aws import Clients, clients
from leaderboard_dev.bench.index_layout import bench_stack
from leaderboard_dev.bench.side_by_side import Plan
from leaderboard_dev.bench.workload import downloads_for, phase_lines, say, wait_for, write_paced
from leaderboard_dev.leaderboard import index_ranking, invoke_function
from leaderboard_dev.loadgen import utc_month
from leaderboard_dev.settings import Endpoint

LADDER_MONTH = "2025-01"
RATE_MONTHS = ("2025-04", "2025-07", "2025-10", "2026-01")


def run_reads_and_freshness(endpoint: Endpoint, plan: Plan) -> dict[str, Any]:
    """Top-level, so that a process pool can run it beside the side-by-side stacks."""
    aws = clients(endpoint)
    say("reads and freshness: deploying")
    with bench_stack(endpoint, "reads", batch_size=100, maximum_batching_window_in_seconds=1) as (_, outputs):
        table, index, function = (
            outputs["table_name"],
            outputs["leaderboard_index_name"],
            outputs["query_function_name"],
        )
        ladder: list[dict[str, Any]] = []
        written = 0
        for step, size in enumerate(plan.ladder):
            load = downloads_for(size - written, LADDER_MONTH, seed=300 + step)
            timing = write_paced(aws, table, load, on_phase=phase_lines(f"reads {size:,}", len(load)))
            written = size
            settled_at = wait_for_index_total(aws, table, index, LADDER_MONTH, written, plan)
            reads = time_top_ten(aws, table, index, function, LADDER_MONTH, plan.read_repeats)
            ladder.append(
                {
                    "data_size": written,
                    "load": len(load),
                    "ingest_rate": round(timing.rate, 1),
                    "freshness_seconds": round(settled_at - timing.finished_at, 2),
                    **reads,
                }
            )
            say(f"reads: {written} downloads, scan/index {reads['read_ratio_index_vs_scan']:.0f}x")
        highest_rate = ladder[-1]["ingest_rate"]  # sustained over the largest load, not a small load's burst
        rates = []
        for share, month in zip(plan.rate_shares, RATE_MONTHS, strict=False):
            load = downloads_for(plan.rate_load, month, seed=400 + len(rates))
            timing = write_paced(aws, table, load, rate=share * highest_rate)
            settled_at = wait_for_index_total(aws, table, index, month, len(load), plan)
            rates.append(
                {
                    "share_of_highest": share,
                    "target_rate": round(share * highest_rate, 1),
                    "ingest_rate": round(timing.rate, 1),
                    "load": len(load),
                    "freshness_seconds": round(settled_at - timing.finished_at, 2),
                }
            )
            say(f"freshness: {timing.rate:.0f} downloads/s, {settled_at - timing.finished_at:.1f} s")
    return {"highest_ingest_rate": highest_rate, "ladder": ladder, "rates": rates}


def wait_for_index_total(aws: Clients, table: str, index: str, month: str, expected: int, plan: Plan) -> float:
    """Until the leaderboard of the month (the index, read whole) adds up to every download written to it."""

    def complete() -> bool:
        return sum(count for _, count in index_ranking(aws.dynamodb, table, index, month)) >= expected

    return wait_for(complete, plan.settle_timeout(expected), 0.5, f"the index holds {expected} downloads of {month}")


def time_top_ten(aws: Clients, table: str, index: str, function: str, month: str, repeats: int) -> dict[str, Any]:
    through_index, index_seconds = timed(lambda: index_top_ten(aws, table, index, month), repeats)
    _, lambda_seconds = timed(lambda: invoke_function(aws.lambda_, function, {"month": month, "limit": 10}), repeats)
    by_scan, scan_seconds = timed(lambda: scan_top_ten(aws, table, month), repeats)
    if [count for _, count in by_scan] != [count for _, count in through_index]:
        raise AssertionError(f"the scan's top 10 {by_scan} differs from the index's {through_index}")
    return {
        "index_query_ms": round(1000 * index_seconds, 2),
        "query_lambda_ms": round(1000 * lambda_seconds, 2),
        "scan_and_count_ms": round(1000 * scan_seconds, 2),
        "read_ratio_index_vs_scan": round(scan_seconds / index_seconds, 1),
        "top_ten": through_index,
    }


def timed(read: Callable[[], Any], repeats: int) -> tuple[Any, float]:
    """The answer and the median of `repeats` timed reads, after one untimed read (warm connections, warm function)."""
    answer = read()
    seconds = []
    for _ in range(repeats):
        began = time.perf_counter()
        read()
        seconds.append(time.perf_counter() - began)
    return answer, statistics.median(seconds)


def index_top_ten(aws: Clients, table: str, index: str, month: str) -> list[tuple[str, int]]:
    """The guide's query: the month's index partition, descending, the first 10."""
    page = aws.dynamodb.query(
        TableName=table,
        IndexName=index,
        KeyConditionExpression="#month = :month",
        ExpressionAttributeNames={"#month": "Month"},
        ExpressionAttributeValues={":month": {"S": month}},
        ScanIndexForward=False,
        Limit=10,
    )
    return [(item["songID"]["S"], int(item["DownloadCount"]["N"])) for item in page.get("Items", [])]


def scan_top_ten(aws: Clients, table: str, month: str) -> list[tuple[str, int]]:
    """Without the pattern: read every download record, count the month's per song, sort."""
    counts: Counter[str] = Counter()
    parameters: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "attribute_not_exists(#month)",
        "ProjectionExpression": "songID, #ts",
        "ExpressionAttributeNames": {"#month": "Month", "#ts": "Timestamp"},
    }
    for page in aws.dynamodb.get_paginator("scan").paginate(**parameters):
        for item in page.get("Items", []):
            if utc_month(item["Timestamp"]["S"]) == month:
                counts[item["songID"]["S"]] += 1
    return sorted(counts.items(), key=lambda entry: (-entry[1], entry[0]))[:10]
