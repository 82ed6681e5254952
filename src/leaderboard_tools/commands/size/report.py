"""What `size` prints: the verdict, and the figures as a table (rich), one JSON document or tab-separated records."""

from __future__ import annotations

import argparse
from typing import Any

from leaderboard_tools.output_format import counted, rich_console
from leaderboard_tools.size.monthly_cost import Cost, CostLine
from leaderboard_tools.size.prices import LOOKED_UP, PRICES, REGION, price_table
from leaderboard_tools.size.sizing import (
    AGGREGATOR_MEMORY_MB,
    INDEX_TOO_HOT,
    PARTITION_KEY_TOO_HOT,
    PARTITION_WRITE_LIMIT,
    SHARDS_MOST,
    Sizing,
    Workload,
)

QUERY_SIDE = ("index reads", "query ", "among ")
"""The cost lines of the query function's reads: shown in the table when --queries-per-second or --among-per-second
asks for them."""
OPTIONAL_LINES = (*QUERY_SIDE, "downloads edited and deleted", "ledger writes", "aggregate reads")
"""Cost lines shown in the table only when the load has them."""


def settings_named(workload: Workload) -> str:
    """The settings that change the cost, named in the table's title."""
    return ("ledger, " if workload.ledger else "") + ("first_reached, " if workload.first_reached else "")


def verdict(sizing: Sizing) -> list[str]:
    """What to set, or why no number fits and what would."""
    if sizing.fits:
        return [f"leaderboard_shards = {sizing.leaderboard_shards}"]
    pressure = sizing.pressure
    lines = []
    if INDEX_TOO_HOT in sizing.too_hot:
        lines.append(
            f"No number of shards up to {SHARDS_MOST} keeps the busiest index partition under "
            f"{sizing.target_share:.0%} of {PARTITION_WRITE_LIMIT:,} writes/s: the most popular song's aggregate alone "
            "is updated too often. Use larger batches (--batch-size) or aggregate_writes = per_window."
        )
    if PARTITION_KEY_TOO_HOT in sizing.too_hot:
        top = pressure.hottest_entity_downloads_per_second
        remedies = []
        if top < PARTITION_WRITE_LIMIT:
            if not pressure.separate_aggregates_table:
                remedies.append("separate_aggregates_table = true (its aggregates then fill another partition)")
            remedies.append("larger batches or per_window, or fewer boards (fewer aggregate updates)")
        else:
            remedies.append(
                f"its {download_writes(sizing.workload)} alone are {top:,.0f}/s: a table keyed by song cannot take "
                "them on one partition key "
                "(DynamoDB may split a hot partition by sort key, split for heat, but does not promise it; size does "
                "not count on it)"
            )
        lines.append(
            f"No number of shards fits: the most popular song's table partition takes "
            f"{pressure.hottest_entity_writes_per_second:,.0f} writes/s "
            f"({pressure.hottest_entity_share_of_limit:.0%} of {PARTITION_WRITE_LIMIT:,}), and leaderboard_shards "
            f"spreads the index, not the table. Remedy: {'; '.join(remedies)}."
        )
    return lines


def changes(workload: Workload) -> str:
    """The edits and deletions a load models, as a title or a sentence names them ("" without)."""
    parts = [
        f"{share:.0%} {kind}"
        for share, kind in ((workload.edit_share, "edited"), (workload.delete_share, "deleted"))
        if share
    ]
    return f", {' and '.join(parts)} later," if parts else ""


def download_writes(workload: Workload) -> str:
    """What the application writes of its download items, in the load."""
    return "downloads, edits and deletions" if changes(workload) else "downloads"


def hottest_partition(sizing: Sizing) -> str:
    pressure = sizing.pressure
    boards = sizing.boards.per_download
    downloads = f"{pressure.hottest_entity_downloads_per_second:,.0f} {download_writes(sizing.workload)}/s"
    updates = f"{pressure.hottest_entity_aggregate_updates_per_second:,.0f} aggregate updates/s" + (
        f" over its {boards} boards" if boards > 1 else ""
    )
    if pressure.separate_aggregates_table:
        parts = f"the busier of its {downloads} and, in the aggregates' table, its {updates}"
    else:
        parts = f"its {downloads} and {updates}"
    return (
        f"The most popular song's table partition: {pressure.hottest_entity_writes_per_second:,.0f} writes/s, "
        f"{pressure.hottest_entity_share_of_limit:.0%} of {PARTITION_WRITE_LIMIT:,}: {parts}."
    )


def print_size(arguments: argparse.Namespace, sizing: Sizing, bill: Cost) -> None:
    """The load at 1, 2, 4, ... shards and at the number recommended (or the most), then the verdict and the cost."""
    from rich.table import Table

    console = rich_console()
    workload, boards, pressure = sizing.workload, sizing.boards, sizing.pressure
    table = Table(
        title=f"{workload.downloads_per_second:,g} downloads/s{changes(workload)} over {workload.songs:,} songs "
        f"(Zipf {workload.zipf_exponent:g}, {settings_named(workload)}{workload.aggregate_writes}, "
        + (
            f"batch {workload.batch_size:,}"
            if workload.aggregate_writes == "per_batch"
            else f"window {workload.window_seconds:g} s"
        )
        + ")"
    )
    table.add_column("leaderboard_shards", justify="right", no_wrap=True)
    for column in ("aggregate updates/s", "index writes/s", "busiest partition", "of its limit"):
        table.add_column(column, justify="right")
    for row in sizing.rows:
        table.add_row(
            str(row.shards),
            f"{row.aggregate_updates_per_second:,.0f}",
            f"{row.index_writes_per_second:,.0f}",
            f"{row.busiest_partition_index_writes_per_second:,.0f}/s",
            f"{row.busiest_share_of_limit:.0%}",
        )
    console.print(table)
    if boards.per_download > 1:
        console.print(
            f"{boards.per_download} boards per download ({','.join(arguments.periods)}"
            f"{f', {boards.categories} categories' if boards.categories else ''}): each period's overall board "
            f"as above; the table takes {pressure.aggregate_updates_per_second:,.0f} aggregate updates/s"
            + (
                f"; the busiest partition of a category board {category_busiest:,.0f} index writes/s"
                if (category_busiest := pressure.busiest_category_board_index_writes_per_second) is not None
                else ""
            )
            + "."
        )
    console.print(hottest_partition(sizing))
    for line in verdict(sizing):
        console.print(line, style="bold" if sizing.fits else "bold red")

    costs = Table(
        title=f"What it costs a month ({REGION}, on demand, at {counted(sizing.shown, 'leaderboard shard')}"
        + (f", {arguments.queries_per_second:,g} top-10 pages/s" if arguments.queries_per_second else "")
        + (
            f", {arguments.among_per_second:,g} among requests/s of {arguments.among_entities}"
            if arguments.among_per_second
            else ""
        )
        + ")"
    )
    for column, justify in (("item", "left"), ("a second", "right"), ("a month", "right"), ("$ a month", "right")):
        costs.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    shown = [line for line in bill.lines if line.per_second or not line.item.startswith(OPTIONAL_LINES)]
    for line in shown:
        if line.module:
            costs.add_row(*_cost_cells(line))
    costs.add_row("the module", "", "", f"{bill.module_dollars_per_month:,.2f}", style="bold")
    for line in shown:
        if not line.module:
            costs.add_row(*_cost_cells(line))
    costs.add_row("with the downloads", "", "", f"{bill.dollars_per_month:,.2f}", style="bold")
    console.print(costs)
    if not arguments.queries_per_second and not arguments.among_per_second:
        console.print(
            "The read side (the query function's reads of the index) is left out: --queries-per-second adds it"
            " (and --among-per-second, among requests)."
        )
    console.print(
        f"An aggregator invocation ({AGGREGATOR_MEMORY_MB} MB) lasts about "
        f"{bill.aggregator_seconds_per_invocation:.3f} s (the benchmark's CPU per record and per aggregate write, "
        "10 ms per call it waits for); every item under 1 KB; free tiers left out. docs/sizing.md says how each line "
        "is counted."
    )

    prices = Table(title=f"Prices ({REGION}, on demand, looked up {LOOKED_UP}; the sources' words: --output json)")
    for column in ("item", "price", "confirmed", "source"):
        prices.add_column(column, overflow="fold")
    for price in PRICES:
        prices.add_row(price.item, f"{_money(price.usd)} per {price.unit}", CONFIRMATION[price.confirmed], price.source)
    console.print(prices)


CONFIRMATION = {"aws": "on AWS's page", "secondary": "transcribed from AWS's page", "unconfirmed": "NOT CONFIRMED"}


def _money(usd: float) -> str:
    digits = f"{usd:.10f}".rstrip("0")
    whole, _, decimals = digits.partition(".")
    return f"${whole}.{decimals.ljust(2, '0')}"


def _cost_cells(line: CostLine) -> tuple[str, str, str, str]:
    return line.item, f"{line.per_second:,.2f}", _units(line.per_month), f"{line.dollars_per_month:,.2f}"


def _units(value: float) -> str:
    for size, suffix in ((1e9, " billion"), (1e6, " million")):
        if value >= size:
            return f"{value / size:,.2f}{suffix}"
    return f"{value:,.0f}"


def size_json(arguments: argparse.Namespace, sizing: Sizing, bill: Cost) -> dict[str, Any]:
    workload, pressure, load = sizing.workload, sizing.pressure, sizing.load
    return {
        "workload": {
            "downloads_per_second": workload.downloads_per_second,
            "songs": workload.songs,
            "zipf_exponent": workload.zipf_exponent,
            "batch_size": workload.batch_size,
            "aggregate_writes": workload.aggregate_writes,
            "window_seconds": workload.window_seconds,
            "edit_share": workload.edit_share,
            "delete_share": workload.delete_share,
            "ledger": workload.ledger,
            "first_reached": workload.first_reached,
            "records_per_second": workload.records_per_second,
        },
        "target_share": sizing.target_share,
        "leaderboard_shards": sizing.leaderboard_shards,
        "fits": sizing.fits,
        "too_hot": sizing.too_hot,
        "verdict": verdict(sizing),
        "shown_shards": sizing.shown,
        "rows": [
            {
                "leaderboard_shards": row.shards,
                "aggregate_updates_per_second": row.aggregate_updates_per_second,
                "index_writes_per_second": row.index_writes_per_second,
                "busiest_partition_index_writes_per_second": row.busiest_partition_index_writes_per_second,
                "busiest_share_of_limit": row.busiest_share_of_limit,
            }
            for row in sizing.rows
        ],
        "aggregate_updates_per_second": load.aggregate_updates_per_second,
        "index_writes_per_second": load.index_writes_per_second,
        "busiest_partition_index_writes_per_second": load.busiest_partition_index_writes_per_second,
        "periods": list(arguments.periods),
        "categories": sizing.boards.categories,
        "boards_per_download": sizing.boards.per_download,
        "separate_aggregates_table": pressure.separate_aggregates_table,
        "table_aggregate_updates_per_second": pressure.aggregate_updates_per_second,
        "busiest_category_board_index_writes_per_second": pressure.busiest_category_board_index_writes_per_second,
        "hottest_entity_writes_per_second": pressure.hottest_entity_writes_per_second,
        "hottest_entity_share_of_limit": pressure.hottest_entity_share_of_limit,
        "hottest_entity_downloads_per_second": pressure.hottest_entity_downloads_per_second,
        "hottest_entity_aggregate_updates_per_second": pressure.hottest_entity_aggregate_updates_per_second,
        "cost": {
            "queries_per_second": arguments.queries_per_second,
            "among_per_second": arguments.among_per_second,
            "among_entities": arguments.among_entities,
            "lines": [
                {
                    "item": line.item,
                    "per_second": line.per_second,
                    "per_month": line.per_month,
                    "unit": line.price.unit,
                    "dollars_per_month": line.dollars_per_month,
                    "module": line.module,
                }
                for line in bill.lines
            ],
            "module_dollars_per_month": bill.module_dollars_per_month,
            "dollars_per_month": bill.dollars_per_month,
            "aggregator_seconds_per_invocation": bill.aggregator_seconds_per_invocation,
            "query_seconds_per_page": bill.query_seconds_per_page,
        },
        "prices": price_table(),
    }


def size_records(sizing: Sizing, bill: Cost) -> list[tuple[Any, ...]]:
    """`--output text`: one record a line, its kind first, then tab-separated fields."""
    pressure = sizing.pressure
    records: list[tuple[Any, ...]] = [
        (
            "shards",
            row.shards,
            round(row.aggregate_updates_per_second, 3),
            round(row.index_writes_per_second, 3),
            round(row.busiest_partition_index_writes_per_second, 3),
            round(row.busiest_share_of_limit, 4),
        )
        for row in sizing.rows
    ]
    records.append(
        (
            "hottest_partition",
            round(pressure.hottest_entity_writes_per_second, 3),
            round(pressure.hottest_entity_share_of_limit, 4),
        )
    )
    records.append(("leaderboard_shards", sizing.leaderboard_shards if sizing.fits else "none", *sizing.too_hot))
    records += [
        (
            "cost",
            line.item,
            round(line.per_second, 4),
            round(line.per_month),
            round(line.dollars_per_month, 2),
            "module" if line.module else "application",
        )
        for line in bill.lines
    ]
    records.append(("total", "module", round(bill.module_dollars_per_month, 2)))
    records.append(("total", "with_downloads", round(bill.dollars_per_month, 2)))
    records += [("price", price.item, price.usd, price.unit, price.confirmed, price.source) for price in PRICES]
    return records
