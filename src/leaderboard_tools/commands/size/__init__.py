"""`size`: the leaderboard shards a workload needs, whether any number fits, and what the load costs a month.

The arithmetic and the prices are `leaderboard_tools.size`'s; this module takes the workload from the flags, refuses
at parse time what the module itself would refuse (its variables' validations) or what means nothing (a negative rate,
nan), and shows the answer as a table, JSON or tab-separated text (`--output`).
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from leaderboard_core.buckets import any_periods_from_text
from leaderboard_core.periods import PERIOD_NAMES
from leaderboard_tools.argument_types import number_within, whole_number
from leaderboard_tools.commands import EXIT_ERROR, EXIT_EXACT
from leaderboard_tools.commands.size.report import print_size, size_json, size_records
from leaderboard_tools.output_format import add_output_argument, chosen_format
from leaderboard_tools.size.monthly_cost import cost
from leaderboard_tools.size.prices import LOOKED_UP, REGION
from leaderboard_tools.size.sizing import (
    AMONG_ENTITIES_MOST,
    BATCH_SIZE_DEFAULTS,
    BATCH_SIZE_RANGE,
    PARTITION_WRITE_LIMIT,
    RATE_MOST,
    SHARDS_MOST,
    SONGS_MOST,
    WINDOW_SECONDS_DEFAULT,
    WINDOW_SECONDS_RANGE,
    ZIPF_EXPONENT_MOST,
    Boards,
    Workload,
    recommend,
)

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

With ledger = true (--ledger), each step of the aggregator also writes the ledger once per download
key it holds (one conditional write each, taken as one per stream record): priced beside the others.
With leaderboard_tie_break = "first_reached" (--tie-break first_reached), each aggregate write is
preceded by one strongly consistent read of the aggregate: priced too.

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
    load.add_argument(
        "--among-per-second",
        type=number_within(0, RATE_MOST),
        default=0.0,
        metavar="A",
        help="among requests (a set of entities ranked among themselves) the query function answers a second, each "
        "one BatchGetItem of --among-entities aggregates (default 0)",
    )
    load.add_argument(
        "--among-entities",
        type=whole_number(1, AMONG_ENTITIES_MOST),
        default=AMONG_ENTITIES_MOST,
        metavar="N",
        help=f"entities each among request names, 1-{AMONG_ENTITIES_MOST} (default {AMONG_ENTITIES_MOST})",
    )
    module = size.add_argument_group("the module's settings (terraform/variables.tf)")
    module.add_argument(
        "--ledger",
        action="store_true",
        help="ledger = true (with retractions = true): one conditional write of the ledger per download key and "
        "aggregator step, taken as one per stream record (downloads, edits and deletions)",
    )
    module.add_argument(
        "--tie-break",
        choices=("entity", "first_reached"),
        default="entity",
        help="leaderboard_tie_break: first_reached reads each aggregate (one strongly consistent read) before its "
        "write (default entity)",
    )
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
        help=f"leaderboard_periods, comma-separated, distinct: {', '.join(PERIOD_NAMES)} (default month)",
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
        return any_periods_from_text(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of distinct periods from {', '.join(PERIOD_NAMES)}"
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
        ledger=arguments.ledger,
        first_reached=arguments.tie_break == "first_reached",
    )
    boards = Boards(periods=len(arguments.periods), categories=arguments.categories)
    sizing = recommend(workload, boards, arguments.target_share, arguments.separate_aggregates_table)
    bill = cost(sizing, arguments.queries_per_second, arguments.among_per_second, arguments.among_entities)
    output = chosen_format(arguments)
    if output == "json":
        print(json.dumps(size_json(arguments, sizing, bill)))
    elif output == "text":
        print("\n".join("\t".join(str(field) for field in record) for record in size_records(sizing, bill)))
    else:
        print_size(arguments, sizing, bill)
    return EXIT_EXACT if sizing.fits else EXIT_DOES_NOT_FIT
