"""Write cost of the boards a download is counted in: `["month"]`, `["day", "month", "all"]`, and with a category.

Each extra period, and a category, adds a board per download: its aggregate is written once per
batch that touches the song, like the month's. One stack per configuration of the module
(`leaderboard_periods`, `category_attribute_name`), each taking a clean load at every batch size
of the plan (the stack is applied again with the next batch size, the load in a month of its
own). The loads arrive as downloads do, in time order: a batch holds downloads of a few seconds,
so that a day board is touched by a batch as the month's is (a load spans noon to noon, so one
batch in each load straddles midnight). Every song has a genre (song i in genre i mod 8).

Measured: the aggregate writes the aggregator logged per 100 downloads, the bound (distinct
aggregates of each batch that succeeded, as the aggregator records them), and every board's
count against the generator's own recount. Beside them, `leaderboard_tools.size.sizing`'s prediction:
the month's updates per batch times the boards a download is counted in (`Boards.per_download`).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from leaderboard_dev.aws import Clients, clients
from leaderboard_dev.bench.index_layout import bench_stack
from leaderboard_dev.bench.workload import SONGS, ZIPF_EXPONENT, phase_lines, read_aggregates, say, wait_for
from leaderboard_dev.leaderboard import NotSettled
from leaderboard_dev.loadgen import BATCH_WRITE_LIMIT
from leaderboard_dev.observe import aggregator_invocations, log_lines
from leaderboard_dev.settings import Endpoint
from leaderboard_tools.size.sizing import Boards, Workload

CATEGORY_ATTRIBUTE = "Genre"
GENRES = ("rock", "pop", "jazz", "classical", "hip-hop", "electronic", "folk", "r&b/soul")
LOAD_SECONDS = 86_400
"""Each load's downloads spread, in write order, over a day from noon UTC: one midnight inside."""
LOAD_STARTS = ("2024-03-14T12:00:00", "2024-09-14T12:00:00", "2025-03-14T12:00:00")
"""Where the load of each batch size starts (the first, second, third batch size of the plan)."""


@dataclass(frozen=True)
class BoardConfiguration:
    """The boards the module keeps: its `leaderboard_periods`, and a category board beside each, or not."""

    name: str
    periods: tuple[str, ...]
    category: bool = False

    @property
    def boards(self) -> Boards:
        return Boards(periods=len(self.periods), categories=len(GENRES) if self.category else 0)

    @property
    def label(self) -> str:
        periods = "[" + ", ".join(f'"{period}"' for period in self.periods) + "]"
        return periods + (f", category ({len(GENRES)} genres)" if self.category else "")

    def variables(self) -> dict[str, Any]:
        return {
            "leaderboard_periods": list(self.periods),
            "category_attribute_name": CATEGORY_ATTRIBUTE if self.category else None,
        }


CONFIGURATIONS = (
    BoardConfiguration("month", ("month",)),
    BoardConfiguration("day_month_all", ("day", "month", "all")),
    BoardConfiguration("day_month_all_category", ("day", "month", "all"), category=True),
)
BY_NAME = {configuration.name: configuration for configuration in CONFIGURATIONS}


def genre_of(song: str) -> str:
    """song001 is genre 0, song002 genre 1, ...: song i in genre i mod 8 (sizing.Boards' assumption)."""
    return GENRES[(int(song.removeprefix("song")) - 1) % len(GENRES)]


def realtime_downloads(count: int, start: datetime, seconds: float, seed: int) -> list[dict[str, Any]]:
    """`count` download items of a Zipf catalogue, with genres, their timestamps rising over `seconds` from `start`."""
    chance = random.Random(seed)
    songs = [f"song{rank:03d}" for rank in range(1, SONGS + 1)]
    weights = [1 / rank**ZIPF_EXPONENT for rank in range(1, SONGS + 1)]
    items = []
    for number, song in enumerate(chance.choices(songs, weights=weights, k=count)):
        moment = start + timedelta(seconds=seconds * number / max(1, count))
        items.append(
            {
                "songID": {"S": song},
                "SK": {"S": f"download-{seed}-{number:06d}"},
                "UserID": {"S": f"user{chance.randint(1, 5000):05d}"},
                "Timestamp": {"S": moment.strftime("%Y-%m-%dT%H:%M:%SZ")},
                CATEGORY_ATTRIBUTE: {"S": genre_of(song)},
            }
        )
    return items


def bucket(moment: datetime, period: str) -> str:
    """The oracle's own UTC buckets (ISO 8601 weeks; never the aggregator's code), for the benchmark and the tests."""
    year, week, _ = moment.isocalendar()
    return {
        "hour": moment.strftime("%Y-%m-%dT%H"),
        "day": moment.strftime("%Y-%m-%d"),
        "week": f"{year:04d}-W{week:02d}",
        "month": moment.strftime("%Y-%m"),
        "year": moment.strftime("%Y"),
        "all": "all",
    }[period]


def board_truth(items: list[dict[str, Any]], configuration: BoardConfiguration) -> Counter[tuple[str, str]]:
    """(song, board id) -> downloads, for every board each download is counted in."""
    truth: Counter[tuple[str, str]] = Counter()
    for item in items:
        moment = datetime.strptime(item["Timestamp"]["S"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        song = item["songID"]["S"]
        for period in configuration.periods:
            key = bucket(moment, period)
            truth[(song, key)] += 1
            if configuration.category:
                truth[(song, f"{key}@{quote(item[CATEGORY_ATTRIBUTE]['S'], safe='')}")] += 1
    return truth


def predicted_per_100(configuration: BoardConfiguration, mean_batch: float) -> float:
    """The sizing arithmetic: a batch of B writes the month's expected distinct songs, once per board kept."""
    batch = max(1, round(mean_batch))
    month = Workload(downloads_per_second=batch, songs=SONGS, batch_size=batch)
    return 100 * sum(month.updates_per_second()) * configuration.boards.per_download / batch


def write_figures(invocations: list[dict[str, Any]], downloads: int) -> dict[str, Any]:
    """Aggregate writes and their bound per 100 downloads, from the aggregator's batch summaries."""
    succeeded = [invocation for invocation in invocations if invocation["succeeded"] and invocation["records"]]
    writes = sum(invocation["aggregate_writes"] for invocation in invocations)
    bound = sum(invocation["distinct_aggregates"] for invocation in succeeded)
    return {
        "aggregate_writes": writes,
        "bound": bound,
        "writes_per_100": round(100 * writes / downloads, 2) if downloads else 0.0,
        "bound_per_100": round(100 * bound / downloads, 2) if downloads else 0.0,
        "batches": len(succeeded),
        "mean_batch": round(downloads / len(succeeded), 1) if succeeded else 0.0,
        "invocations": len(invocations),
        "processing_seconds": round(sum(invocation["duration_ms"] for invocation in invocations) / 1000, 3),
    }


def read_boards(aws: Clients, table: str, keys: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """The count of each (song, board id) aggregate that exists: the side-by-side's consistent reader."""
    return read_aggregates(aws, table, keys)


def write_all(aws: Clients, table: str, items: list[dict[str, Any]], label: str) -> None:
    """BatchWriteItem in chunks of 25, in order (one writer): the stream holds them in time order."""
    advance = phase_lines(label, len(items))
    for start in range(0, len(items), BATCH_WRITE_LIMIT):
        requests = {table: [{"PutRequest": {"Item": item}} for item in items[start : start + BATCH_WRITE_LIMIT]]}
        for _ in range(20):
            requests = aws.dynamodb.batch_write_item(RequestItems=requests).get("UnprocessedItems") or {}
            if not requests:
                break
        else:
            raise RuntimeError(f"{label}: items stayed unprocessed after 20 attempts")
        advance(min(BATCH_WRITE_LIMIT, len(items) - start))


def run_configuration(
    endpoint: Endpoint,
    name: str,
    batch_sizes: tuple[int, ...],
    batching_windows: tuple[int, ...],
    downloads: int,
    tumbling_window_seconds: int,
) -> dict[str, Any]:
    """One stack of the configuration; a clean load at each batch size. Top-level, so a process pool can run it."""
    configuration = BY_NAME[name]
    aws = clients(endpoint)
    variables = {
        "batch_size": batch_sizes[0],
        "maximum_batching_window_in_seconds": batching_windows[0],
        "tumbling_window_in_seconds": tumbling_window_seconds,
        **configuration.variables(),
    }
    say(f"boards {name}: deploying")
    runs = []
    truth: Counter[tuple[str, str]] = Counter()
    with bench_stack(endpoint, f"bd{CONFIGURATIONS.index(configuration)}", **variables) as (deployment, outputs):
        for step, (batch_size, window) in enumerate(zip(batch_sizes, batching_windows, strict=True)):
            if step:
                deployment.variables.update(batch_size=batch_size, maximum_batching_window_in_seconds=window)
                outputs = deployment.apply()
            start = datetime.fromisoformat(LOAD_STARTS[step]).replace(tzinfo=UTC)
            items = realtime_downloads(downloads, start, LOAD_SECONDS, seed=700 + step)
            truth.update(board_truth(items, configuration))
            load = measure(aws, outputs, configuration, items, truth, tumbling_window_seconds)
            say(f"boards {name}, batch size {batch_size}: {load['writes_per_100']} writes per 100")
            runs.append({"configuration": name, "label": configuration.label, "batch_size": batch_size, **load})
    return {"configuration": name, "runs": runs}


def measure(
    aws: Clients,
    outputs: dict[str, Any],
    configuration: BoardConfiguration,
    items: list[dict[str, Any]],
    truth: Counter[tuple[str, str]],
    tumbling_window_seconds: int,
) -> dict[str, Any]:
    """Write one load, wait until every record is delivered and every board holds the recount; take its figures."""
    table, log_group = outputs["table_name"], outputs["aggregator_log_group_name"]
    since_ms = int(time.time() * 1000) - 1000
    write_all(aws, table, items, f"boards {configuration.name}")
    state: dict[str, Any] = {"invocations": [], "observed": {}}

    def settled() -> bool:
        state["invocations"] = aggregator_invocations(log_lines(aws, log_group, since_ms))
        if sum(i["records"] for i in state["invocations"] if i["succeeded"]) < len(items):
            return False
        state["observed"] = read_boards(aws, table, set(truth))
        return state["observed"] == dict(truth)

    exact = True
    try:
        wait_for(settled, 300 + tumbling_window_seconds + len(items) / 5, 3.0, f"boards {configuration.name}")
    except NotSettled:
        exact = False
    wrong = sum(1 for key, count in truth.items() if state["observed"].get(key) != count)
    figures = write_figures(state["invocations"], len(items))
    return {
        "downloads": len(items),
        "boards_per_download": configuration.boards.per_download,
        "exact": exact,
        "wrong_aggregates": wrong,
        "predicted_per_100": round(predicted_per_100(configuration, figures["mean_batch"]), 2),
        **figures,
    }
