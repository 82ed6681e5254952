"""The operator tools' command line: `leaderboard-tools top|rank|all|size|rekey|reconcile|recover|backfill|readers`."""

from __future__ import annotations

import argparse
import sys

from botocore.exceptions import BotoCoreError, ClientError

from leaderboard_tools.commands import (
    EXIT_ERROR,
    backfill,
    completion,
    leaderboards,
    readers,
    reconcile,
    recover,
    rekey,
    size,
)

COMMANDS = (leaderboards, size, rekey, reconcile, recover, backfill, readers, completion)
"""Each module registers its parser and binds its `run`; in this order `--help` lists them (`leaderboards`: top,
rank and all)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="leaderboard-tools", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(commands)
    return run_command(parser.parse_args(argv))


def run_command(arguments: argparse.Namespace, errors: tuple[type[Exception], ...] = ()) -> int:
    """The parsed command's handler; what it raises for a person to read is printed, with exit code 1."""
    try:
        return arguments.handler(arguments)
    except (RuntimeError, *errors) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except (BotoCoreError, ClientError) as error:
        print(f"error: AWS: {error}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
