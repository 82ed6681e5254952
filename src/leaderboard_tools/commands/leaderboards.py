"""`top`, `rank` and `all`: leaderboards for people, asked of the deployed query function and printed.

The three are one command family: they name the function the same way (`--table` or `--function`),
the board the same way (`--month`, or `--period` with `--key`, and `--category`), reach AWS the
same way, and print the same way. Each adds one or two flags and the request those make. The
function (`query_client.py`) checks every request; this module builds it from the flags and shows
what comes back: on a terminal an aligned table, with `--json` the query contract's response
unchanged (`all` prints each page's response, one per line).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from leaderboard_core.attributes import COUNT_FIELD
from leaderboard_core.buckets import PERIODS
from leaderboard_tools.query_client import (
    AnswerError,
    CommandError,
    invoke,
    lambda_client,
    pages,
    query_function_of,
)

ALL_PAGE_SIZE = 1000


def board_request(arguments: argparse.Namespace) -> dict[str, Any]:
    """The board fields of the request: {"month": ...} or {"period": ..., "key": ...}, and the category."""
    request: dict[str, Any] = {}
    if arguments.month is not None:
        if arguments.period not in (None, "month") or arguments.key is not None:
            raise CommandError("--month names a month's board: give --month, or --period with --key, not both")
        request["month"] = arguments.month
    elif arguments.period is not None:
        request["period"] = arguments.period
        if arguments.key is not None:
            request["key"] = arguments.key
    else:
        raise CommandError(f"name a board: --month YYYY-MM, or --period {'|'.join(PERIODS)} [--key ...]")
    if arguments.category is not None:
        request["category"] = arguments.category
    return request


@dataclass(frozen=True)
class Shown:
    """Rows to print: (place or None, entity, value, marked), a title, and notes under the table."""

    title: str
    entity_field: str
    rows: list[tuple[int | None, str, Any, bool]]
    notes: list[str]


def board_title(answer: dict[str, Any]) -> str:
    if "month" in answer:
        where = f"month {answer['month']}"
    elif answer.get("period") == "all":
        where = "all time"
    else:
        where = f"{answer.get('period')} {answer.get('key')}"
    if "last" in answer:
        where = f"last {answer['last']} {answer.get('period', 'month')}s to {answer.get('key', answer.get('month'))}"
    return where + (f", category {answer['category']}" if "category" in answer else "")


def _entity_field(answer: dict[str, Any], fallback: str) -> str:
    for item in answer.get("items", []):
        fields = [field for field in item if field not in (COUNT_FIELD, "rank")]
        if fields:
            return str(fields[0])
    return fallback


def shown_page(answers: list[dict[str, Any]], entity_field: str, what: str) -> Shown:
    """Pages (one for `top`, every page for `all`), numbered by place in the listing."""
    field = _entity_field(answers[0], entity_field) if answers else entity_field
    items = [item for answer in answers for item in answer.get("items", [])]
    rows = [(place, str(item.get(field)), item.get(COUNT_FIELD), False) for place, item in enumerate(items, start=1)]
    notes = []
    first = answers[0] if answers else {}
    if "reads" in first:
        reads = first["reads"]
        notes.append(f"read with {reads.get('queries')} Queries and {reads.get('getItems')} GetItems")
    if first.get("complete") is False:
        notes.append(f"incomplete: {first.get('message', 'the read budget ran out')}")
    if not rows:
        notes.append("no entries")
    return Shown(f"{what} · {board_title(first)}", field, rows, notes)


def shown_rank(answer: dict[str, Any], entity_field: str) -> Shown:
    song = str(answer.get(entity_field))
    rank = answer.get("rank")
    if rank is not None:
        place = f"rank {rank}"
    elif "rankAtLeast" in answer:
        place = f"rank at least {answer['rankAtLeast']}: counting stopped at the read budget"
    else:
        place = "no rank"
    notes = [f"{song}: {answer.get(COUNT_FIELD)} ({place})"]
    if "items" in answer:
        rows = [
            (item.get("rank"), str(item.get(entity_field)), item.get(COUNT_FIELD), item.get(entity_field) == song)
            for item in answer["items"]
        ]
    else:
        rows = [] if rank is None else [(rank, song, answer.get(COUNT_FIELD), True)]
    return Shown(f"rank · {board_title(answer)}", entity_field, rows, notes)


def print_table(shown: Shown, out: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, highlight=False)
    console.print(shown.title, markup=False, soft_wrap=True)
    table = Table()
    table.add_column("#", justify="right")
    table.add_column(shown.entity_field, overflow="fold")
    table.add_column(COUNT_FIELD, justify="right")
    for place, entity, value, marked in shown.rows:
        table.add_row("" if place is None else str(place), entity, str(value), style="bold" if marked else None)
    if shown.rows:
        console.print(table)
    for note in shown.notes:
        console.print(note, markup=False, soft_wrap=True)


def show_rank(arguments: argparse.Namespace, client: Any, function: str, request: dict[str, Any], out: TextIO) -> None:
    request[arguments.entity_attribute] = arguments.song
    if arguments.around is not None:
        request["around"] = arguments.around
    answer = invoke(client, function, request)
    if arguments.json:
        print(json.dumps(answer), file=out)
    else:
        print_table(shown_rank(answer, arguments.entity_attribute), out)


def show_top(arguments: argparse.Namespace, client: Any, function: str, request: dict[str, Any], out: TextIO) -> None:
    request["limit"] = arguments.limit
    if arguments.last is not None:
        request["last"] = arguments.last
    answer = invoke(client, function, request)
    if arguments.json:
        print(json.dumps(answer), file=out)
    else:
        print_table(shown_page([answer], arguments.entity_attribute, f"top {arguments.limit}"), out)


def show_all(arguments: argparse.Namespace, client: Any, function: str, request: dict[str, Any], out: TextIO) -> None:
    """Each page as it comes with --json; the table only once the last page is in."""
    request["limit"] = arguments.page_size
    answers = []
    for answer in pages(client, function, request):
        if arguments.json:
            print(json.dumps(answer), file=out)
        answers.append(answer)
    if not arguments.json:
        print_table(shown_page(answers, arguments.entity_attribute, "all"), out)


SHOWN_BY: dict[str, Callable[[argparse.Namespace, Any, str, dict[str, Any], TextIO], None]] = {
    "top": show_top,
    "rank": show_rank,
    "all": show_all,
}


def run(arguments: argparse.Namespace, client: Any | None = None, out: TextIO | None = None) -> int:
    """One command: 0 on an answer, 1 on an error (said on stderr; with --json the error answer on stdout)."""
    out = out or sys.stdout
    try:
        function = arguments.function or query_function_of(arguments.table)
        request = board_request(arguments)
        client = client or lambda_client(arguments.profile, arguments.region, arguments.endpoint_url)
        SHOWN_BY[arguments.command](arguments, client, function, request, out)
        return 0
    except AnswerError as error:
        if arguments.json:
            print(json.dumps(error.answer), file=out)
        print(f"error: {error}", file=sys.stderr)
        return 1
    except CommandError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def register(commands: Any) -> None:
    """`top`, `rank` and `all`, with the board and target flags they share."""
    for name, summary in (
        ("top", "the top entries of a board, or of a rolling window (--last)"),
        ("rank", "the rank of one song in a board, and its neighbours (--around)"),
        ("all", "every entry of a board, page after page"),
    ):
        command = commands.add_parser(name, help=summary, description=summary)
        target = command.add_mutually_exclusive_group(required=True)
        target.add_argument("--table", help="the module's table, <name>-downloads: its query function is <name>-query")
        target.add_argument("--function", help="the query function's name or ARN")
        board = command.add_argument_group("board")
        board.add_argument("--month", help='YYYY-MM: the guide\'s monthly board, asked as {"month": ...}')
        board.add_argument("--period", choices=PERIODS, help="a period the deployment keeps (leaderboard_periods)")
        board.add_argument(
            "--key", help="the period's UTC bucket: 2018-01-15T10, 2018-01-15, 2018-W03, 2018-01, 2018 (default: now)"
        )
        board.add_argument("--category", help="a category's board (category_attribute_name)")
        if name == "top":
            command.add_argument("--limit", type=int, default=10, help="entries (default 10)")
            command.add_argument("--last", type=int, help="a rolling window: the sum of the last N buckets to --key")
        elif name == "rank":
            command.add_argument("--song", "--id", dest="song", required=True, help="the entity id")
            command.add_argument("--around", type=int, help="also list N entries above and N below it")
        else:
            command.add_argument("--page-size", type=int, default=ALL_PAGE_SIZE, help="entries per invocation")
        command.add_argument(
            "--entity-attribute", default="songID", help="the module's entity_attribute_name (default songID)"
        )
        command.add_argument("--json", action="store_true", help="print the query function's response unchanged")
        aws = command.add_argument_group("AWS (default: boto3's standard configuration)")
        aws.add_argument("--profile")
        aws.add_argument("--region")
        aws.add_argument("--endpoint-url", help="default: AWS_ENDPOINT_URL if set, else AWS")
        command.set_defaults(handler=run)
