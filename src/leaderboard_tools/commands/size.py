"""`size`: the leaderboard shards a workload needs, as a table per shard count or as JSON.

The arithmetic is `sizing.py`'s; this module takes the workload from the flags and shows the answer.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from leaderboard_tools.sizing import (
    PARTITION_WRITE_LIMIT,
    BoardPressure,
    Boards,
    PartitionLoad,
    Workload,
    board_pressure,
    partition_load,
    shards_needed,
)


def register(commands: Any) -> None:
    size = commands.add_parser(
        "size", help="leaderboard shards a workload needs: aggregate updates and index writes per partition"
    )
    size.add_argument("--downloads-per-second", type=float, required=True)
    size.add_argument("--songs", type=int, required=True)
    size.add_argument("--zipf-exponent", type=float, default=1.1)
    size.add_argument("--batch-size", type=int, default=100)
    size.add_argument("--aggregate-writes", choices=("per_batch", "per_window"), default="per_batch")
    size.add_argument("--window", type=float, default=60, help="tumbling window (s), for per_window")
    size.add_argument("--target-share", type=float, default=0.5, help="of a partition's write limit (default 0.5)")
    size.add_argument(
        "--periods", default="month", help="the module's leaderboard_periods, comma-separated (default month)"
    )
    size.add_argument(
        "--categories", type=int, default=0, help="categories the catalogue is spread over (0: no category boards)"
    )
    size.add_argument("--json", action="store_true")
    size.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """0 when some number of shards keeps the busiest partition under the target share, else 1."""
    workload = Workload(
        downloads_per_second=arguments.downloads_per_second,
        songs=arguments.songs,
        zipf_exponent=arguments.zipf_exponent,
        batch_size=arguments.batch_size,
        aggregate_writes=arguments.aggregate_writes,
        window_seconds=arguments.window,
    )
    needed, load = shards_needed(workload, target_share=arguments.target_share)
    boards = Boards(periods=len(arguments.periods.split(",")), categories=arguments.categories)
    pressure = board_pressure(workload, boards, needed or 64)
    if arguments.json:
        print(json.dumps(size_json(arguments, workload, needed, load, boards, pressure)))
    else:
        print_size(arguments, workload, needed, boards, pressure)
    return 0 if needed is not None else 1


def size_json(
    arguments: argparse.Namespace,
    workload: Workload,
    needed: int | None,
    load: PartitionLoad,
    boards: Boards,
    pressure: BoardPressure,
) -> dict[str, Any]:
    return {
        "workload": dataclasses.asdict(workload),
        "target_share": arguments.target_share,
        "aggregate_updates_per_second": load.aggregate_updates_per_second,
        "index_writes_per_second": load.index_writes_per_second,
        "leaderboard_shards": needed,
        "busiest_partition_index_writes_per_second": load.busiest_partition_index_writes_per_second,
        "periods": arguments.periods.split(","),
        "categories": arguments.categories,
        "boards_per_download": boards.per_download,
        "table_aggregate_updates_per_second": pressure.aggregate_updates_per_second,
        "busiest_category_board_index_writes_per_second": pressure.busiest_category_board_index_writes_per_second,
        "hottest_entity_writes_per_second": pressure.hottest_entity_writes_per_second,
    }


def print_size(
    arguments: argparse.Namespace, workload: Workload, needed: int | None, boards: Boards, pressure: BoardPressure
) -> None:
    """The load at 1, 2, 4, ... shards up to the number needed, then that number or why there is none."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{arguments.downloads_per_second:g} downloads/s over {arguments.songs} songs")
    for column in ("leaderboard_shards", "aggregate updates/s", "index writes/s", "busiest partition", "of its limit"):
        table.add_column(column, justify="right")
    shards = 1
    while shards <= max(needed or 64, 1):
        row = partition_load(workload, shards)
        table.add_row(
            str(shards),
            f"{row.aggregate_updates_per_second:,.0f}",
            f"{row.index_writes_per_second:,.0f}",
            f"{row.busiest_partition_index_writes_per_second:,.0f}/s",
            f"{row.busiest_share_of_limit:.0%}",
        )
        shards *= 2
    console = Console()
    console.print(table)
    if needed is None:
        console.print(
            f"No number of shards keeps the busiest partition under {arguments.target_share:.0%} of "
            f"{PARTITION_WRITE_LIMIT} writes/s: the most popular song alone writes too often. "
            "Use larger batches or aggregate_writes = per_window."
        )
        return
    console.print(f"leaderboard_shards = {needed}")
    if boards.per_download > 1:
        console.print(
            f"{boards.per_download} boards per download ({arguments.periods}"
            f"{f', {arguments.categories} categories' if arguments.categories else ''}): each period's overall board "
            f"as above; the table takes {pressure.aggregate_updates_per_second:,.0f} aggregate updates/s"
            + (
                f"; the busiest category board {pressure.busiest_category_board_index_writes_per_second:,.0f} "
                "index writes/s"
                if pressure.busiest_category_board_index_writes_per_second is not None
                else ""
            )
            + f"; the most popular song's table partition {pressure.hottest_entity_writes_per_second:,.0f} writes/s "
            f"({pressure.hottest_entity_share_of_limit:.0%} of {PARTITION_WRITE_LIMIT})."
        )
