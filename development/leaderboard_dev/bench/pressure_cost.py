"""On paper, from measured write counts: index writes on the busiest partition, and a cost per million downloads.

Index pressure. A clean load of ours at batch size B wrote w aggregate updates per download,
spread over songs as the stream shows (each successful update of an aggregate moves its index
sort key: a delete and a put in the index, two index writes). At D downloads a second that is
2·w·D index writes a second, of which the busiest of N leaderboard shards takes the share its
songs had in the measured writes (songs placed as the module places them). Beside each figure:
`leaderboard_tools.size.sizing`'s prediction for the same D, N and batch size (the mean batch the
load delivered), and the documented limit of 1,000 writes a second per partition. The guide's
handler updates its aggregate once per download: 2·D index writes, one partition a month.

Cost. Table writes (the downloads themselves and every aggregate write, failed conditional
writes included: each consumes a write unit), index writes, and Lambda at the module's default
memory, one request per invocation. Lambda's duration is derived, not taken from the emulator
(whose DynamoDB calls are Python, far slower than DynamoDB's): the handler's CPU per download,
measured with DynamoDB answering at once (`handler_cpu`), plus a stated, cited latency per call
times the calls that wait one after another (`lambda_seconds_per_million`). Without that
measurement (a smoke run) the emulator's durations stand in, and the report says so. Prices: PRICES.
"""

from __future__ import annotations

import math
from typing import Any

from leaderboard_core.index_layout import leaderboard_shard
from leaderboard_dev.bench.workload import SONGS
from leaderboard_tools.size.prices import LAMBDA_GB_SECOND, LAMBDA_REQUEST, WRITE_REQUEST_UNIT
from leaderboard_tools.size.sizing import (
    AGGREGATOR_MEMORY_MB,
    INDEX_WRITES_PER_UPDATE,
    PARTITION_WRITE_LIMIT,
    Workload,
    partition_load,
)

DOWNLOAD_RATES = (1000, 5000, 10_000)
SHARDS_SUPPORTED = tuple(range(1, 65))
AGGREGATOR_MEMORY_GB = AGGREGATOR_MEMORY_MB / 1024
"""The module's default aggregator_memory_size; the guide's handler deployed through it gets the same."""

PRICES: dict[str, Any] = {
    "region": "us-east-1",
    "looked_up": "2026-11-30",
    # The figures are `size`'s (leaderboard_tools.size.prices, with their sources and how far each is confirmed).
    "dynamodb_write_request_unit_per_million": WRITE_REQUEST_UNIT.usd,
    "lambda_request_per_million": LAMBDA_REQUEST.usd,
    "lambda_gb_second_x86": LAMBDA_GB_SECOND.usd,
    "sources": [
        {
            "item": "DynamoDB on-demand write request unit: $0.625 per million (US East, after the November 2024 cut)",
            "url": "https://airbyte.com/data-engineering-resources/dynamodb-pricing",
            "dated": "2025-07-21",
        },
        {
            "item": "DynamoDB on-demand billing: writes in write request units, one per KB of item",
            "url": "https://aws.amazon.com/dynamodb/pricing/on-demand/",
            "dated": "undated page, read through the search index 2026-11-30",
        },
        {
            "item": "Lambda requests: $0.20 per million",
            "url": "https://raw.githubusercontent.com/api-evangelist/aws-lambda/refs/heads/main/plans/aws-lambda-plans-pricing.yml",
            "dated": "2026-09-20 (transcribed from https://aws.amazon.com/lambda/pricing/)",
        },
        {
            "item": "Lambda duration, x86: $0.0000166667 per GB-second (base regions)",
            "url": "https://app.unpkg.com/artillery@2.0.28/files/lib/platform/aws-lambda/prices.js",
            "dated": "artillery 2.0.28 (cites https://aws.amazon.com/lambda/pricing/)",
        },
    ],
    "assumptions": [
        "every item written is under 1 KB: one write request unit per write, table or index",
        "an index write is billed like a table write (one write request unit per KB)",
        "stream reads by Lambda's event source mapping are not billed",
        "free tiers ignored",
    ],
}


def busiest_share(writes_by_song: dict[str, int], shards: int) -> float:
    """The share of the measured aggregate writes that the busiest of `shards` index partitions takes."""
    per_partition = [0] * shards
    for song, writes in writes_by_song.items():
        per_partition[leaderboard_shard(song, shards)] += writes
    total = sum(per_partition)
    return max(per_partition) / total if total else 0.0


def index_pressure(run: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per download rate and number of leaderboard shards, for one clean load of ours (per_batch)."""
    clean = run["clean"]
    by_song: dict[str, int] = clean["aggregate_writes_by_song"]
    updates_per_download = sum(by_song.values()) / clean["downloads"]
    batch = max(1, round(clean["mean_batch"]))
    rows = []
    for shards in SHARDS_SUPPORTED:
        share = busiest_share(by_song, shards)
        for rate in DOWNLOAD_RATES:
            measured = INDEX_WRITES_PER_UPDATE * updates_per_download * rate * share
            predicted = partition_load(
                Workload(downloads_per_second=rate, songs=SONGS, batch_size=batch), shards
            ).busiest_partition_index_writes_per_second
            rows.append(
                {
                    "batch_size": run["batch_size"],
                    "mean_batch": clean["mean_batch"],
                    "leaderboard_shards": shards,
                    "downloads_per_second": rate,
                    "busiest_partition_index_writes_per_second": round(measured, 1),
                    "sizing_prediction": round(predicted, 1),
                    "measured_over_predicted": round(measured / predicted, 3) if predicted else None,
                    "share_of_partition_limit": round(measured / PARTITION_WRITE_LIMIT, 3),
                }
            )
    return rows


def guide_index_pressure() -> list[dict[str, Any]]:
    """The guide's handler: one aggregate update per download, every aggregate of a month in one index partition."""
    return [
        {
            "downloads_per_second": rate,
            "leaderboard_shards": 1,
            "busiest_partition_index_writes_per_second": INDEX_WRITES_PER_UPDATE * rate,
            "share_of_partition_limit": INDEX_WRITES_PER_UPDATE * rate / PARTITION_WRITE_LIMIT,
        }
        for rate in DOWNLOAD_RATES
    ]


def sizing_check(run: dict[str, Any]) -> dict[str, Any]:
    """Measured aggregate updates per 100 downloads against the sizing arithmetic for the batches delivered."""
    clean = run["clean"]
    batch = max(1, round(clean["mean_batch"]))
    workload = Workload(downloads_per_second=batch, songs=SONGS, batch_size=batch)
    predicted = 100 * sum(workload.updates_per_second()) / batch
    return {
        "batch_size": run["batch_size"],
        "mean_batch": clean["mean_batch"],
        "measured_bound_per_100": clean["bound_per_100"],
        "sizing_updates_per_100": round(predicted, 2),
        "measured_over_predicted": round(clean["bound_per_100"] / predicted, 3) if predicted else None,
    }


def lambda_seconds_per_million(
    cpu_ms_per_download: float,
    invocations_per_million: float,
    sequential_calls_per_invocation: float,
    parallel_writes_per_invocation: float,
    latency_ms: float,
    write_concurrency: int,
) -> float:
    """Lambda seconds per million downloads: the handler's CPU, and every call's latency it waits for.

    The calls that are not aggregate writes wait one after another; the aggregate writes run
    `write_concurrency` at a time, so an invocation waits for ceil(writes / concurrency) rounds.
    """
    rounds = math.ceil(parallel_writes_per_invocation / write_concurrency) if parallel_writes_per_invocation else 0
    waits = sequential_calls_per_invocation + rounds
    return 1_000_000 * cpu_ms_per_download / 1000 + invocations_per_million * waits * latency_ms / 1000


def cpu_case(handler_cpu: dict[str, Any] | None, aggregator: str, configuration: str, batch_size: int) -> Any:
    """The CPU measurement of this aggregator, boards and batch size, if the run made one."""
    for case in (handler_cpu or {}).get("cases", []):
        if (case["aggregator"], case["configuration"], case["batch_size"]) == (aggregator, configuration, batch_size):
            return case
    return None


def cost_per_million(
    run: dict[str, Any],
    guide: bool,
    handler_cpu: dict[str, Any] | None = None,
    configuration: str = "month",
) -> dict[str, Any]:
    """Dollars per million downloads on AWS, from the clean load's measured writes and invocations.

    Lambda's duration: derived from `handler_cpu` (CPU per download at this batch size, and the
    calls of an invocation) when it measured this case, else the emulator's durations."""
    clean = run["clean"]
    scale = 1_000_000 / clean["downloads"]
    table_writes = 1_000_000 + clean["aggregate_writes"] * scale
    if guide:
        index_writes = INDEX_WRITES_PER_UPDATE * 1_000_000.0
    elif clean.get("aggregate_writes_by_song") is not None:
        index_writes = INDEX_WRITES_PER_UPDATE * sum(clean["aggregate_writes_by_song"].values()) * scale
    else:
        index_writes = INDEX_WRITES_PER_UPDATE * clean["aggregate_writes"] * scale
    requests = clean["invocations"] * scale
    emulator_gb_seconds = clean["processing_seconds"] * scale * AGGREGATOR_MEMORY_GB
    case = cpu_case(handler_cpu, "guide" if guide else "ours_per_batch", configuration, run["batch_size"])
    if case is not None and handler_cpu is not None:
        writes_per_invocation = clean["aggregate_writes"] / clean["invocations"] if clean["invocations"] else 0.0
        seconds = lambda_seconds_per_million(
            cpu_ms_per_download=case["cpu_ms_per_download"],
            invocations_per_million=requests,
            sequential_calls_per_invocation=writes_per_invocation if guide else case["sequential_calls_per_invocation"],
            parallel_writes_per_invocation=0.0 if guide else writes_per_invocation,
            latency_ms=handler_cpu["latency"]["milliseconds_per_call"],
            write_concurrency=handler_cpu["write_concurrency"],
        )
        gb_seconds, duration = seconds * AGGREGATOR_MEMORY_GB, "derived"
    else:
        gb_seconds, duration = emulator_gb_seconds, "emulator"
    dollars = {
        "table_writes": table_writes / 1e6 * PRICES["dynamodb_write_request_unit_per_million"],
        "index_writes": index_writes / 1e6 * PRICES["dynamodb_write_request_unit_per_million"],
        "lambda_duration": gb_seconds * PRICES["lambda_gb_second_x86"],
        "lambda_requests": requests / 1e6 * PRICES["lambda_request_per_million"],
    }
    return {
        "aggregator": run["aggregator"],
        "configuration": configuration,
        "batch_size": run["batch_size"],
        "table_writes": round(table_writes),
        "index_writes": round(index_writes),
        "lambda_gb_seconds": round(gb_seconds, 1),
        "lambda_duration": duration,
        "emulator_lambda_gb_seconds": round(emulator_gb_seconds, 1),
        "lambda_requests": round(requests),
        "dollars": {item: round(value, 4) for item, value in dollars.items()},
        "dollars_total": round(sum(dollars.values()), 4),
    }
