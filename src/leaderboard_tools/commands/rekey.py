"""`rekey`: move every aggregate to the index partitions of a new leaderboard layout (the pass is `rekey.py`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from leaderboard_tools.commands import EXIT_ERROR, EXIT_EXACT
from leaderboard_tools.commands.operator_common import add_operator_arguments, operator_setup, progress_of
from leaderboard_tools.deployment import check_layout
from leaderboard_tools.rekey import rekey


def register(commands: Any) -> None:
    move = commands.add_parser("rekey", help="move every aggregate to the index partitions of a leaderboard layout")
    add_operator_arguments(move)
    move.add_argument("--shards", type=int, required=True, help="the new leaderboard_shards (as deployed)")
    move.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """The pass's report as JSON; exit code 1 if any aggregate failed to move."""
    aws, deployment = operator_setup(arguments)
    check_layout(deployment, arguments.shards)
    with progress_of("Moving aggregates", shown=sys.stderr.isatty()) as on_progress:
        report = rekey(
            aws.dynamodb, deployment.aggregates, arguments.shards, names=deployment.names, on_progress=on_progress
        )
    print(json.dumps(vars(report)))
    return EXIT_EXACT if not report.failed else EXIT_ERROR
