"""Leaderboard shards on the emulator: index writes per partition, top-10 latency per N, the cost of a rank.

- Index writes per partition: one stack per N, the same Zipf downloads, and the aggregator's own
  count of aggregate writes per index partition (`index_partition_writes` in its batch summaries;
  each such write is two index writes). Beside it, the sizing arithmetic's prediction for the
  same batches.
- Top-10 latency: one stack moved from N to N (apply with the previous N, rekey, apply), the same
  data, the query function invoked repeatedly for each N.
- Rank cost: aggregates written straight into a month (no downloads), the rank of the last song
  asked, and how many index entries it counted.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from leaderboard_core.index_layout import leaderboard_partition, order_of
from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import invoke_function, poll_until
from leaderboard_dev.loadgen import true_counts, write_items, zipf_downloads
from leaderboard_dev.observe import log_lines
from leaderboard_dev.settings import Endpoint
from leaderboard_dev.terraform_stack import Stack, deployed
from leaderboard_tools.rekey import rekey

INDEX_WRITES_PER_AGGREGATE_WRITE = 2


@contextmanager
def bench_stack(endpoint: Endpoint, purpose: str, **variables: Any) -> Iterator[tuple[Stack, dict[str, Any]]]:
    deployment = Stack(f"bench-{purpose}-{uuid.uuid4().hex[:6]}", endpoint, variables)
    with deployed(deployment) as outputs:
        yield deployment, outputs


def wait_for_counts(aws: Clients, outputs: dict[str, Any], expected: dict[str, Counter[str]], timeout: float) -> None:
    """Until the leaderboard of every month, read through the query function, holds every download."""
    function = outputs["query_function_name"]

    def complete() -> bool:
        for month, counts in expected.items():
            page = invoke_function(aws.lambda_, function, {"month": month, "limit": 1000})
            if sum(item["downloadCount"] for item in page["items"]) != sum(counts.values()):
                return False
        return True

    poll_until(complete, timeout=timeout, interval=3, describe="every download counted")


def partition_writes(aws: Clients, log_group: str) -> Counter[str]:
    writes: Counter[str] = Counter()
    for line in log_lines(aws, log_group):
        if line.get("message") == "batch summary" and line.get("succeeded"):
            writes.update(line.get("index_partition_writes") or {})
    return writes


def index_writes_per_partition(
    endpoint: Endpoint, aws: Clients, downloads: int, songs: int, shards_values: tuple[int, ...], batch_size: int
) -> list[dict[str, Any]]:
    generated = zipf_downloads(downloads, songs=songs, months=("2018-06",), seed=9)
    expected = true_counts(generated)
    results = []
    for shards in shards_values:
        with bench_stack(endpoint, f"layout{shards}", batch_size=batch_size, leaderboard_shards=shards) as (_, outputs):
            write_items(aws.dynamodb, outputs["table_name"], [d.as_item() for d in generated])
            wait_for_counts(aws, outputs, expected, timeout=600)
            writes = partition_writes(aws, outputs["aggregator_log_group_name"])
        total = sum(writes.values())
        results.append(
            {
                "leaderboard_shards": shards,
                "downloads": downloads,
                "aggregate_writes": total,
                "index_writes": INDEX_WRITES_PER_AGGREGATE_WRITE * total,
                "index_writes_per_partition": {
                    partition: INDEX_WRITES_PER_AGGREGATE_WRITE * count for partition, count in sorted(writes.items())
                },
                "busiest_partition_share": max(writes.values()) / total if total else 0.0,
            }
        )
    return results


def top_ten_latency(
    endpoint: Endpoint, aws: Clients, shards_values: tuple[int, ...], downloads: int, songs: int, repeats: int
) -> list[dict[str, Any]]:
    """One stack moved through each N (with the rekey pass), the top 10 asked `repeats` times at each."""
    generated = zipf_downloads(downloads, songs=songs, months=("2018-07",), seed=10)
    expected = true_counts(generated)
    results = []
    with bench_stack(endpoint, "latency", batch_size=500, leaderboard_shards=shards_values[0]) as (deployment, outputs):
        write_items(aws.dynamodb, outputs["table_name"], [d.as_item() for d in generated])
        wait_for_counts(aws, outputs, expected, timeout=600)
        previous = shards_values[0]
        for shards in shards_values:
            if shards != previous:
                deployment.variables.update(leaderboard_shards=shards, leaderboard_shards_previous=previous)
                deployment.apply()
                rekey(aws.dynamodb, outputs["table_name"], shards)
                deployment.variables.update(leaderboard_shards_previous=None)
                outputs = deployment.apply()
                previous = shards
            request = {"month": "2018-07", "limit": 10}
            invoke_function(aws.lambda_, outputs["query_function_name"], request)  # a warm function
            seconds = []
            for _ in range(repeats):
                began = time.perf_counter()
                invoke_function(aws.lambda_, outputs["query_function_name"], request)
                seconds.append(time.perf_counter() - began)
            results.append(
                {
                    "leaderboard_shards": shards,
                    "songs": songs,
                    "median_ms": round(1000 * statistics.median(seconds), 1),
                    "p90_ms": round(1000 * statistics.quantiles(seconds, n=10)[-1], 1),
                    "repeats": repeats,
                }
            )
    return results


def rank_cost(endpoint: Endpoint, aws: Clients, song_counts: tuple[int, ...], shards: int) -> list[dict[str, Any]]:
    """Aggregates written straight into a month; the rank of the least downloaded song (it counts every other)."""
    results = []
    with bench_stack(endpoint, "rank", leaderboard_shards=shards) as (_, outputs):
        table, function = outputs["table_name"], outputs["query_function_name"]
        for month_number, songs in enumerate(song_counts, start=1):
            month = f"2019-{month_number:02d}"
            items = [
                {
                    "songID": {"S": f"song{rank:06d}"},
                    "SK": {"S": month},
                    "Month": {"S": leaderboard_partition(month, f"song{rank:06d}", shards)},
                    "DownloadCount": {"N": str(songs - rank + 1)},
                    "LeaderboardOrder": {"N": str(order_of(songs - rank + 1, f"song{rank:06d}"))},
                }
                for rank in range(1, songs + 1)
            ]
            write_items(aws.dynamodb, table, items, workers=8)
            last = f"song{songs:06d}"
            invoke_function(aws.lambda_, function, {"month": month, "songID": last})
            began = time.perf_counter()
            answer = invoke_function(aws.lambda_, function, {"month": month, "songID": last})
            elapsed = time.perf_counter() - began
            results.append(
                {
                    "songs": songs,
                    "leaderboard_shards": shards,
                    "rank": answer.get("rank"),
                    "rank_at_least": answer.get("rankAtLeast"),
                    "entries_counted": songs - 1,
                    "latency_ms": round(1000 * elapsed, 1),
                    "index_bytes_read_estimate": (songs - 1) * 100,
                }
            )
    return results
