"""The board commands' runs: each asks the query function and prints its answer (printing.py), a listing page
after page; what every command shares (a closed pipe, Ctrl-C, AWS refusing) is cli.py's."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from leaderboard_core.attributes import COUNT_FIELD
from leaderboard_tools.argument_types import UsageError
from leaderboard_tools.commands import EXIT_ERROR, EXIT_EXACT
from leaderboard_tools.commands.leaderboards.flags import command_request
from leaderboard_tools.commands.leaderboards.printing import (
    Listed,
    ListingPrinter,
    board_title,
    print_rows,
    ranked_columns,
    text_of,
)
from leaderboard_tools.commands.leaderboards.streamed_table import Column
from leaderboard_tools.interruption import Interrupted
from leaderboard_tools.output_format import OutputFormat, chosen_format, counted
from leaderboard_tools.query_client import (
    AnswerError,
    NoSuchFunction,
    invoke,
    lambda_client,
    listing_pages,
    query_function_of,
)

# ---------------------------------------------------------------- the commands


@dataclass(frozen=True)
class Call:
    """One command's invocation: its flags, the client, the function, the request and where it prints."""

    arguments: argparse.Namespace
    client: Any
    function: str
    request: dict[str, Any]
    out: TextIO
    output: OutputFormat
    listed: Listed


def show_top(call: Call) -> None:
    answer = invoke(call.client, call.function, call.request)
    if call.output == "json":
        print(json.dumps(answer), file=call.out)
        return
    entity = _entity_field(answer, call.arguments.entity_attribute)
    rows = [
        [text_of(item.get("rank", place)), text_of(item.get(entity)), text_of(item.get(COUNT_FIELD))]
        for place, item in enumerate(answer.get("items", []), start=1)
    ]
    notes = []
    if "reads" in answer:
        notes.append(
            f"read with {answer['reads'].get('queries')} Queries and {answer['reads'].get('getItems')} GetItems"
        )
    if answer.get("complete") is False:
        notes.append(f"incomplete: {answer.get('message', 'the read budget ran out')}")
    if not rows:
        notes.append("no entries")
    title = f"top {call.arguments.limit} · {board_title(answer)}"
    print_rows(call.out, call.output, title, ranked_columns(entity), rows, notes)


def show_rank(call: Call) -> None:
    answer = invoke(call.client, call.function, call.request)
    if call.output == "json":
        print(json.dumps(answer), file=call.out)
        return
    entity = call.arguments.entity_attribute
    song, rank = str(answer.get(entity)), answer.get("rank")
    if rank is not None:
        place = f"rank {rank}"
    elif "rankAtLeast" in answer:
        place = f"rank at least {answer['rankAtLeast']}: counting stopped at the read budget"
    else:
        place = "not on this board"
    if "items" in answer:
        listed = [(item.get("rank"), item.get(entity), item.get(COUNT_FIELD)) for item in answer["items"]]
    else:
        listed = [(rank, song, answer.get(COUNT_FIELD))] if rank is not None or call.output == "text" else []
    rows = [[text_of(place_), text_of(entity_), text_of(value)] for place_, entity_, value in listed]
    marked = [str(entity_) == song for _, entity_, _ in listed]
    notes = [f"{song}: {answer.get(COUNT_FIELD)} ({place})"]
    print_rows(call.out, call.output, f"rank · {board_title(answer)}", ranked_columns(entity), rows, notes, marked)


def show_score(call: Call) -> None:
    answer = invoke(call.client, call.function, call.request)
    if call.output == "json":
        print(json.dumps(answer), file=call.out)
        return
    entity = call.arguments.entity_attribute
    song, value, listed = str(answer.get(entity)), answer.get(COUNT_FIELD), answer.get("onBoard")
    if call.output == "text":
        print(f"{song}\t{text_of(value)}\t{text_of(listed)}", file=call.out)
        return
    rows = [[song, text_of(value)]] if listed else []
    note = f"{song}: {value}" if listed else f"{song}: not on this board"
    columns = [Column(entity), Column(COUNT_FIELD, numeric=True)]
    print_rows(call.out, call.output, f"score · {board_title(answer)}", columns, rows, [note])


def show_among(call: Call) -> None:
    """The entities asked, in the board's order, each with its count and its rank among them."""
    answer = invoke(call.client, call.function, call.request)
    if call.output == "json":
        print(json.dumps(answer), file=call.out)
        return
    entity = call.arguments.entity_attribute
    rows = [
        [text_of(item.get("rank")), text_of(item.get(entity)), text_of(item.get(COUNT_FIELD))]
        for item in answer.get("items", [])
    ]
    policy = call.request.get("rankPolicy", "ordinal")
    title = f"among {counted(len(rows), 'entity', 'entities')} ({policy} ranks) · {board_title(answer)}"
    print_rows(call.out, call.output, title, ranked_columns(entity), rows, [])


def show_card(call: Call) -> None:
    """The board's size: the function counts a board past its read budget over several invocations."""
    answer = invoke(call.client, call.function, call.request)
    for _ in range(100_000):
        if answer.get("next_token") is None:
            break
        answer = invoke(call.client, call.function, {**call.request, "next_token": answer["next_token"]})
    if call.output == "json":
        print(json.dumps(answer), file=call.out)
    elif call.output == "text":
        print(text_of(answer.get("size")), file=call.out)
    else:
        print(f"card · {board_title(answer)}", file=call.out)
        size = answer.get("size")
        print(counted(size, "entry", "entries"), file=call.out)


def show_listing(call: Call) -> None:
    """Every page of a listing as it arrives, up to --max-items; then the token to resume from, if any is left."""
    arguments = call.arguments
    command = arguments.command
    if command == "range-by-count":
        low, high = call.request.get("minCount"), call.request.get("maxCount")
        title = f"{COUNT_FIELD} {low if low is not None else '…'} to {high if high is not None else '…'}"
    elif command == "range":
        title = f"ranks {arguments.from_rank} to {arguments.to_rank if arguments.to_rank is not None else 'the end'}"
    else:
        title = "all"
    ranked = command != "range-by-count" or "rankPolicy" in call.request
    printer = ListingPrinter(call.out, call.output, title, arguments.entity_attribute, ranked, call.listed)
    pages = listing_pages(
        call.client, call.function, call.request, arguments.page_size, arguments.max_items, arguments.starting_token
    )
    for answer in pages:
        printer.page(answer)
    printer.finish(call.listed.resume)


def _entity_field(answer: dict[str, Any], fallback: str) -> str:
    for item in answer.get("items", []):
        fields = [name for name in item if name not in (COUNT_FIELD, "rank")]
        if fields:
            return str(fields[0])
    return fallback


SHOWN_BY: dict[str, Callable[[Call], None]] = {
    "top": show_top,
    "rank": show_rank,
    "all": show_listing,
    "range": show_listing,
    "range-by-count": show_listing,
    "card": show_card,
    "score": show_score,
    "among": show_among,
}
LISTINGS = ("all", "range", "range-by-count")


def run(arguments: argparse.Namespace, client: Any | None = None, out: TextIO | None = None) -> int:
    """One command: 0 on an answer, 1 when the function answers an error or is not there (said on stderr; with JSON
    output the error answer on stdout), 2 on flags that contradict each other (argparse's usage and line). What
    every command shares is cli.py's: a command error's line (1), AWS refusing or unreachable (5), Ctrl-C (130: a
    listing's line says where to resume), a closed pipe (141)."""
    out = out or sys.stdout
    output = chosen_format(arguments)
    try:
        request = command_request(arguments)
    except UsageError as error:
        usage_error = getattr(arguments, "usage_error", None)
        if usage_error is not None:
            usage_error(str(error))  # argparse's: usage, the message, exit code 2
        raise
    listed = Listed()
    try:
        client = client or lambda_client(arguments.profile, arguments.region, arguments.endpoint_url)
        function = arguments.function or query_function_of(arguments.table, lambda: _clients(arguments))
        SHOWN_BY[arguments.command](Call(arguments, client, function, request, out, output, listed))
        return EXIT_EXACT
    except NoSuchFunction as error:
        if arguments.function:
            print(f"error: {error}: check --function, and --region or --endpoint-url", file=sys.stderr)
        else:
            print(
                f"error: {error}: --table {arguments.table} has no query function beside it there; "
                "check --table, --region or --endpoint-url, or name the function with --function",
                file=sys.stderr,
            )
        return EXIT_ERROR
    except AnswerError as error:
        if output == "json" and not listed.started:
            print(json.dumps(error.answer), file=out)
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt as error:
        if listed.started and not isinstance(error, Interrupted):
            raise Interrupted(_where_it_stopped(listed)) from error
        raise  # before any answer: the command's on_interrupt


def _clients(arguments: argparse.Namespace) -> Any:
    """The operator tools' clients, to read the deployment around a --table not named like the module's."""
    from leaderboard_tools.operator_aws import operator_clients

    return operator_clients(arguments.profile, arguments.region, arguments.endpoint_url)


def _where_it_stopped(listed: Listed) -> str:
    """What cli.py's one line says of an interrupted listing: how far it got, and the token to resume from."""
    where = f"after {counted(listed.entries, 'entry', 'entries')}"
    if listed.resume is None:
        return where
    return f"{where}: resume with --starting-token {listed.resume} (and the same flags)"
