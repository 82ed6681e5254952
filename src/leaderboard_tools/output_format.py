"""How a command prints its answer, as the AWS CLI chooses it: `--output json|table|text`.

`table` is for a person (aligned; the default, as it has always been); `json` is the whole answer, one
document, for a program; `text` is tab-separated lines, one record per line, for `cut`, `awk` and shell
loops. `--json` stays as a short form of `--output json`.
"""

from __future__ import annotations

import argparse
from typing import Any, Literal

OutputFormat = Literal["json", "table", "text"]
FORMATS: tuple[OutputFormat, ...] = ("json", "table", "text")


def add_output_argument(command: argparse.ArgumentParser) -> None:
    """`--output` and its short form `--json`, on one destination: the last one given wins."""
    command.add_argument(
        "--output",
        choices=FORMATS,
        default=None,
        help="json, table (the default) or text (tab-separated lines)",
    )
    command.add_argument("--json", dest="output", action="store_const", const="json", help="the same as --output json")


def chosen_format(arguments: argparse.Namespace) -> OutputFormat:
    """The format asked for, else a table."""
    asked = getattr(arguments, "output", None)
    return "table" if asked is None else asked


def text_line(*fields: object) -> str:
    """One record of `--output text`: its fields tab-separated, None empty, a tab or newline inside a field a space."""
    return "\t".join("" if field is None else " ".join(str(field).split("\t")).replace("\n", " ") for field in fields)


def counted(number: int | float | str, noun: str, plural: str | None = None) -> str:
    """`number` and its noun, singular for exactly one: "1 leaderboard shard", "2 leaderboard shards", "0 messages"."""
    return f"{number} {noun if str(number) == '1' else plural or noun + 's'}"


def rich_console(stderr: bool = False) -> Any:
    """rich's Console, but a closed pipe raises BrokenPipeError (cli.main ends the command with 141) where rich's own
    handling exits with 1."""
    from rich.console import Console

    class PipedConsole(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return PipedConsole(stderr=stderr)
