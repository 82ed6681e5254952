"""`rekey`: move every aggregate to the index partitions of a new leaderboard layout (the pass is `rekey.py`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from leaderboard_tools.argument_types import leaderboard_shards
from leaderboard_tools.commands import EXIT_ERROR, EXIT_EXACT
from leaderboard_tools.commands.operator_common import add_command, add_operator_arguments, operator_setup, phase_bar
from leaderboard_tools.deployment import check_layout
from leaderboard_tools.output_format import add_output_argument, chosen_format, text_line
from leaderboard_tools.rekey import MAX_ROUNDS, RekeyReport, rekey

DESCRIPTION = """Move every aggregate to the index partition of the leaderboard layout the module is deployed with
(leaderboard_shards = --shards, the old count as leaderboard_shards_previous), each with one conditional write that
cannot undo the aggregator's; a second run finds nothing to move. Refused unless the aggregator writes that layout and
the query function reads it (docs/operations.md, "Changing the number of shards on a live stack"). --dry-run counts
what it would move, writing nothing."""
ON_INTERRUPT = (
    "each aggregate is in its old partition or its new one (one conditional write each; the query function reads both "
    "layouts until leaderboard_shards_previous is removed): run the same command again to move the rest"
)


def register(commands: Any) -> None:
    move = add_command(
        commands, "rekey", "move every aggregate to the index partitions of a leaderboard layout", DESCRIPTION
    )
    add_operator_arguments(move)
    move.add_argument(
        "--shards",
        type=leaderboard_shards,
        required=True,
        help="the new leaderboard_shards, as deployed: a whole number from 1 to 64",
    )
    move.add_argument("--dry-run", action="store_true", help="count what would be moved; write nothing")
    add_output_argument(move)
    move.set_defaults(handler=run, on_interrupt=ON_INTERRUPT)


def run(arguments: argparse.Namespace) -> int:
    """The pass's report; exit code 1 if any aggregate failed to move."""
    if arguments.dry_run:
        arguments.on_interrupt = "nothing was written (--dry-run)"
    aws, deployment = operator_setup(arguments)
    check_layout(deployment, arguments.shards)
    output = chosen_format(arguments)
    with phase_bar("Moving aggregates", shown=sys.stderr.isatty() and output != "json") as on_phase:
        report = rekey(
            aws.dynamodb,
            deployment.aggregates,
            arguments.shards,
            names=deployment.names,
            on_phase=on_phase,
            dry_run=arguments.dry_run,
            tie_break=deployment.tie_break,
        )
    if output == "json":
        print(json.dumps(vars(report)))
    elif output == "text":
        for name in ("aggregates", "moved", "ordered", "unchanged", "conflicts"):
            print(text_line(name, getattr(report, name)))
        for failed in report.failed:
            print(text_line("failed", failed))
    else:
        print(_table(report, deployment.aggregates, arguments.shards))
    return EXIT_EXACT if not report.failed else EXIT_ERROR


def _table(report: RekeyReport, table: str, shards: int) -> str:
    would = "would be " if report.dry_run else ""
    rows = [
        ("aggregates read", report.aggregates, ""),
        (f"{would}moved", report.moved, ""),
        (f"{would}ordered", report.ordered, "given the LeaderboardOrder they lacked, in the new partition"),
        ("unchanged", report.unchanged, "already where the layout wants them"),
        ("conflicts", report.conflicts, f"written meanwhile {MAX_ROUNDS} times over: run again"),
    ]
    width = max(len(name) for name, _, _ in rows)
    lines = [
        f"rekey of {table} to leaderboard_shards = {shards}"
        + (" (dry run: nothing was written)" if report.dry_run else "")
    ]
    lines += [
        f"  {name:<{width}}  {value:>8}" + (f"  ({note})" if note and value else "") for name, value, note in rows
    ]
    lines += [f"  failed: {failed}" for failed in report.failed]
    return "\n".join(lines)
