"""`recover`: make exact what the failure queue's messages name, then delete them (the work is `recover.py`'s)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from leaderboard_tools.commands import EXIT_DIFFERENCES, EXIT_EXACT, EXIT_PENDING
from leaderboard_tools.commands.operator_common import (
    add_operator_arguments,
    add_reconciler_arguments,
    operator_reconciler,
    operator_setup,
    progress_of,
)
from leaderboard_tools.deployment import DeploymentError


def register(commands: Any) -> None:
    command = commands.add_parser("recover", help="make exact what the failure queue's messages name, then delete them")
    add_operator_arguments(command)
    add_reconciler_arguments(command)
    command.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """The report as JSON; 0 when no message is kept, else 4 if waiting will settle them, 3 if it will not."""
    from leaderboard_tools.recover import recover

    aws, deployment = operator_setup(arguments, arguments.shards, arguments.queue_url)
    if not deployment.failure_queue_url:
        raise DeploymentError("the deployment names no failure queue (FAILURE_QUEUE_URL): pass --queue-url")
    with progress_of("Reading items", shown=sys.stderr.isatty()) as on_progress:
        reconciler = operator_reconciler(arguments, aws, deployment, on_progress)
        report = recover(aws, deployment, reconciler, deployment.failure_queue_url)
    print(json.dumps(report.as_json()))
    if not report.kept:
        return EXIT_EXACT
    return EXIT_PENDING if report.pending else EXIT_DIFFERENCES
