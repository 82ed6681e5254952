"""`size`: the leaderboard shards a workload needs, whether any number fits, and what the load costs a month.

The arithmetic is `sizing.py`'s and the prices `prices.py`'s; this module takes the workload from the flags, refuses
at parse time what the module itself would refuse (its variables' validations) or what means nothing (a negative rate,
nan), and shows the answer as a table, JSON or tab-separated text (`--output`).
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from leaderboard_core.buckets import PERIODS, periods_from_text
from leaderboard_tools.argument_types import number_within, whole_number
from leaderboard_tools.commands import EXIT_ERROR, EXIT_EXACT
from leaderboard_tools.output_format import add_output_argument, chosen_format, counted, rich_console
from leaderboard_tools.prices import LOOKED_UP, PRICES, REGION, price_table
from leaderboard_tools.sizing import (
    AGGREGATOR_MEMORY_MB,
    BATCH_SIZE_DEFAULTS,
    BATCH_SIZE_RANGE,
    INDEX_TOO_HOT,
    PARTITION_KEY_TOO_HOT,
    PARTITION_WRITE_LIMIT,
    RATE_MOST,
    SHARDS_MOST,
    SONGS_MOST,
    WINDOW_SECONDS_DEFAULT,
    WINDOW_SECONDS_RANGE,
    ZIPF_EXPONENT_MOST,
    Boards,
    Cost,
    CostLine,
    Sizing,
    Workload,
    cost,
    recommend,
)

QUERY_SIDE = ("index reads", "query ")
"""The cost lines of the query function's reads: shown in the table when --queries-per-second asks for them."""
OPTIONAL_LINES = (*QUERY_SIDE, "downloads edited and deleted")
"""Cost lines shown in the table only when the load has them."""
EXIT_DOES_NOT_FIT = EXIT_ERROR
"""No number of shards keeps every partition under its limit (the figures and the cost are printed all the same)."""

DESCRIPTION = f"""\
How many leaderboard shards (the module's leaderboard_shards, 1-{SHARDS_MOST}) a load needs, and what it costs.

From the downloads a second over a Zipf catalogue of songs: the aggregate updates a batch (or a
window) makes, the index writes they cost (two per update), and the busiest index partition at
1, 2, 4, ... shards up to the fewest that keep it under --target-share of DynamoDB's {PARTITION_WRITE_LIMIT:,}
writes a second per partition. The most popular song's table partition (its downloads and every
aggregate of it) must stay under the limit too: no number of shards spreads it, so when it is over,
no number fits. Then the cost a month in {REGION}, on demand (DynamoDB writes and reads, stream reads,
Lambda), from a price table printed with its sources (looked up {LOOKED_UP}; `--output json` has it in full).

With retractions = true, --edit-share and --delete-share model downloads edited or deleted later:
each is one more stream record (more invocations, stream reads and progress writes); an edit writes
the aggregate it leaves and the one it enters, a deletion the one it leaves, in every board, taken
as other aggregates than the batch's new downloads write.

Exit codes: 0 a number of shards fits; 1 none does (the reasons and the cost are printed); 2 a
flag outside what the module accepts. The arithmetic: docs/sizing.md."""


def register(commands: Any) -> None:
    size = commands.add_parser(
        "size",
        help="leaderboard shards a load needs, whether any number fits, and its cost a month",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    load = size.add_argument_group("the load")
    load.add_argument(
        "--downloads-per-second",
        type=positive_number,
        required=True,
        metavar="D",
        help=f"downloads written a second, at the peak to size for (above 0, at most {RATE_MOST:,})",
    )
    load.add_argument(
        "--songs",
        type=whole_number(1, SONGS_MOST),
        required=True,
        metavar="M",
        help=f"songs downloaded in a month (1-{SONGS_MOST:,}); song i has popularity 1 / i^s",
    )
    load.add_argument(
        "--zipf-exponent",
        type=number_within(0, ZIPF_EXPONENT_MOST),
        default=1.1,
        metavar="S",
        help=f"the catalogue's Zipf exponent s (0-{ZIPF_EXPONENT_MOST:g}; 0: every song alike; default 1.1)",
    )
    load.add_argument(
        "--edit-share",
        type=number_within(0, 1),
        default=0.0,
        metavar="SHARE",
        help="with retractions = true: the share of downloads later edited in what they count (song, time, category, "
        "sum), 0-1 (default 0). Each edit is one more stream record and writes two aggregates per board: the one it "
        "leaves and the one it enters",
    )
    load.add_argument(
        "--delete-share",
        type=number_within(0, 1),
        default=0.0,
        metavar="SHARE",
        help="with retractions = true: the share of downloads later deleted (TTL's expiries aside), 0-1 (default 0). "
        "Each deletion is one more stream record and writes one aggregate per board, the one it leaves",
    )
    load.add_argument(
        "--queries-per-second",
        type=number_within(0, RATE_MOST),
        default=0.0,
        metavar="Q",
        help="top-10 pages the query function answers a second, for the read side of the cost (default 0)",
    )
    module = size.add_argument_group("the module's settings (terraform/variables.tf)")
    module.add_argument(
        "--batch-size",
        type=whole_number(*BATCH_SIZE_RANGE),
        default=None,
        metavar="B",
        help=f"batch_size: records per aggregator invocation ({BATCH_SIZE_RANGE[0]}-{BATCH_SIZE_RANGE[1]}; "
        f"default {BATCH_SIZE_DEFAULTS['per_batch']} with per_batch, {BATCH_SIZE_DEFAULTS['per_window']} with "
        "per_window, as the module's)",
    )
    module.add_argument(
        "--aggregate-writes",
        choices=("per_batch", "per_window"),
        default="per_batch",
        help="aggregate_writes: one write per aggregate and batch, or per aggregate and tumbling window "
        "(default per_batch)",
    )
    module.add_argument(
        "--window",
        type=whole_number(*WINDOW_SECONDS_RANGE),
        default=WINDOW_SECONDS_DEFAULT,
        metavar="SECONDS",
        help=f"tumbling_window_in_seconds, which per_window writes each aggregate once in "
        f"({WINDOW_SECONDS_RANGE[0]}-{WINDOW_SECONDS_RANGE[1]}; default {WINDOW_SECONDS_DEFAULT})",
    )
    module.add_argument(
        "--periods",
        type=periods_argument,
        default=("month",),
        metavar="PERIOD,...",
        help=f"leaderboard_periods, comma-separated, distinct: {', '.join(PERIODS)} (default month)",
    )
    module.add_argument(
        "--categories",
        type=whole_number(0, SONGS_MOST),
        default=0,
        metavar="K",
        help="categories the catalogue is spread over, with category_attribute_name set (a board per category "
        "beside each overall one); 0: no category boards (default)",
    )
    module.add_argument(
        "--separate-aggregates-table",
        action="store_true",
        help="the aggregates in <name>-aggregates (separate_aggregates_table = true, or source_table_name): a song's "
        "downloads and its aggregates then fill two partitions, not one",
    )
    size.add_argument(
        "--target-share",
        type=share_argument,
        default=0.5,
        metavar="SHARE",
        help="the share of a partition's write limit the busiest index partition may reach (above 0, at most 1; "
        "default 0.5: room for bursts and for the hash's unevenness)",
    )
    add_output_argument(size)
    size.set_defaults(handler=run)


# ------------------------------------------------------------------------------------------- parse-time validation


def positive_number(text: str) -> float:
    value = number_within(-math.inf, math.inf)(text)
    if not 0 < value <= RATE_MOST:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number above 0 and at most {RATE_MOST:,}")
    return value


def share_argument(text: str) -> float:
    value = number_within(-math.inf, math.inf)(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share above 0 and at most 1 (0.5 is half the limit)")
    return value


def periods_argument(text: str) -> tuple[str, ...]:
    try:
        return periods_from_text(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of distinct periods from {', '.join(PERIODS)}"
        ) from None


# ------------------------------------------------------------------------------------------------------- the run


def run(arguments: argparse.Namespace) -> int:
    """0 when some number of shards keeps every partition under its limit, else 1 (EXIT_DOES_NOT_FIT)."""
    workload = Workload(
        downloads_per_second=arguments.downloads_per_second,
        songs=arguments.songs,
        zipf_exponent=arguments.zipf_exponent,
        batch_size=arguments.batch_size or BATCH_SIZE_DEFAULTS[arguments.aggregate_writes],
        aggregate_writes=arguments.aggregate_writes,
        window_seconds=arguments.window,
        edit_share=arguments.edit_share,
        delete_share=arguments.delete_share,
    )
    boards = Boards(periods=len(arguments.periods), categories=arguments.categories)
    sizing = recommend(workload, boards, arguments.target_share, arguments.separate_aggregates_table)
    bill = cost(sizing, arguments.queries_per_second)
    output = chosen_format(arguments)
    if output == "json":
        print(json.dumps(size_json(arguments, sizing, bill)))
    elif output == "text":
        print("\n".join("\t".join(str(field) for field in record) for record in size_records(sizing, bill)))
    else:
        print_size(arguments, sizing, bill)
    return EXIT_EXACT if sizing.fits else EXIT_DOES_NOT_FIT


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
        f"(Zipf {workload.zipf_exponent:g}, {workload.aggregate_writes}, "
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
    if not arguments.queries_per_second:
        console.print(
            "The read side (the query function's reads of the index) is left out: --queries-per-second adds it."
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
