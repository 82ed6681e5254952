"""`reconcile`: recount a board's aggregates from the downloads and, with --repair, fix what nothing in flight
changes. The recount is the reconcile package's Reconciler; this module reads the flags and prints its report."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from leaderboard_core.buckets import MONTH_KEY, period_of_board
from leaderboard_tools.commands import EXIT_DIFFERENCES, EXIT_EXACT, EXIT_PENDING
from leaderboard_tools.commands.operator_common import (
    add_operator_arguments,
    add_reconciler_arguments,
    operator_reconciler,
    operator_setup,
    progress_of,
)


def register(commands: Any) -> None:
    command = commands.add_parser(
        "reconcile",
        help="recount a board's aggregates from the downloads; --repair fixes those nothing in flight changes",
    )
    add_operator_arguments(command)
    add_reconciler_arguments(command)
    board = command.add_mutually_exclusive_group(required=True)
    board.add_argument("--month", type=month_argument, help="a month board: YYYY-MM")
    board.add_argument(
        "--board",
        type=board_argument,
        help="any board the deployment keeps: 2018-01-15T10, 2018-01-15, 2018-W03, 2018-01, 2018, all, "
        "and <bucket>@<category> (the category percent-encoded)",
    )
    command.add_argument("--songs", help="comma-separated song ids (default: every song of the board)")
    command.add_argument("--repair", action="store_true")
    command.add_argument("--json", action="store_true")
    command.set_defaults(handler=run)


def month_argument(text: str) -> str:
    if not MONTH_KEY.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a month YYYY-MM")
    return text


def board_argument(text: str) -> str:
    if period_of_board(text) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a board id: <bucket> or <bucket>@<category>")
    return text


def run(arguments: argparse.Namespace) -> int:
    aws, deployment = operator_setup(arguments, arguments.shards, arguments.queue_url)
    songs = [song for song in (arguments.songs or "").split(",") if song] or None
    board = arguments.board or arguments.month
    with progress_of("Reading items", shown=sys.stderr.isatty() and not arguments.json) as on_progress:
        reconciler = operator_reconciler(arguments, aws, deployment, on_progress)
        recount = reconciler.run({board: songs}, repair=arguments.repair)
    report = recount.month(board)
    if arguments.json:
        print(json.dumps(report.as_json() | ({"stream": recount.stream.as_json()} if recount.stream else {})))
    else:
        print(
            f"{board}: {report.aggregates} aggregates, {report.downloads} downloads recounted "
            f"(count in {deployment.names.count}, {deployment.leaderboard_shards} leaderboard shards)"
        )
        if report.refused:
            print(f"  refused: {report.refused}")
        for difference in report.differences:
            state = difference.state + (f": {difference.reason}" if difference.reason else "")
            if difference.added_at_close:
                state += f"; {difference.added_at_close} more held by its band, added at the close"
            print(f"  {difference.entity_id}: stored {difference.stored}, recounted {difference.recounted} ({state})")
    return reconcile_exit_code(report.differences, report.refused is not None)


def reconcile_exit_code(differences: list[Any], refused: bool) -> int:
    if refused or any(d.state in ("differs", "ttl", "unrecorded", "unclocked") for d in differences):
        return EXIT_DIFFERENCES
    if any(not d.repaired for d in differences):
        return EXIT_PENDING
    return EXIT_EXACT
