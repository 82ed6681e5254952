"""`top`, `rank`, `all`, `range`, `range-by-count`, `card` and `score`: leaderboards for people, asked of the deployed
query function and printed.

The commands are one family: they name the function the same way (`--table` or `--function`), the board the same way
(`--month`, or `--period` with `--key`, and `--category`), reach AWS the same way, and print the same way
(`--output json|table|text`, output_format.py). Each adds the flags of its request (docs/query-contract.md):

| command          | Redis              | request                                  |
|------------------|--------------------|------------------------------------------|
| `top`            | ZREVRANGE 0 n-1    | `limit` (with `last`: a rolling window)  |
| `rank`           | ZREVRANK           | the entity, `around`                     |
| `all`            | ZREVRANGE 0 -1     | `fromRank` 1, page after page            |
| `range`          | ZREVRANGE          | `fromRank`, `toRank`                     |
| `range-by-count` | ZREVRANGEBYSCORE   | `minCount`, `maxCount`                   |
| `card`           | ZCARD              | `size`                                   |
| `score`          | ZSCORE             | the entity, `score`                      |

Names: Redis's where they are free. `size` is the capacity sizing command, so a board's size is `card` (ZCARD: the
board's cardinality; `count` would be read as an entity's count); `score` is ZSCORE's (an entity's value, cheaper
than `rank`: one read); the ranges are `range` (by rank, as ZRANGE) and `range-by-count` (ZRANGEBYSCORE: the score
here is the count, or the sum, as the contract's `downloadCount`).

Listings (`all`, `range`, `range-by-count`) page as the AWS CLI does: `--page-size` entries an invocation,
`--max-items` in all, then a NextToken that `--starting-token` resumes from (with the same flags). They print each
page as it arrives: JSON as one document written item by item, text a line per entry, and tables too, their column
widths fixed by the first page (streamed_table.py). Flags are checked before anything is asked: a malformed month or
key, a number outside the function's limits, or flags that contradict each other exit 2, as argparse does.

The rest is every command's (cli.py, the exit codes of commands/__init__.py): AWS refusing or unreachable is exit 5 in
operator_aws's words, a closed pipe 141, Ctrl-C one line and 130, a listing's line naming the token to resume from.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TextIO

from leaderboard_core.attributes import COUNT_FIELD
from leaderboard_core.buckets import ALL_TIME, KEY_FORMATS, PERIODS, is_bucket_key
from leaderboard_tools.argument_types import UsageError, whole_number
from leaderboard_tools.commands import EXIT_ERROR, EXIT_EXACT
from leaderboard_tools.commands.operator_common import add_command
from leaderboard_tools.commands.reconcile import month_argument
from leaderboard_tools.interruption import Interrupted
from leaderboard_tools.output_format import OutputFormat, add_output_argument, chosen_format, counted
from leaderboard_tools.query_client import (
    AnswerError,
    NoSuchFunction,
    invoke,
    lambda_client,
    listing_pages,
    query_function_of,
)
from leaderboard_tools.streamed_table import Column, StreamedTable

ALL_PAGE_SIZE = 1000
MAX_LIMIT = 1000
"""The query function's limits (lambda_src/query: leaderboard_page, rolling_window, entity_rank, rank_range),
checked here before any request: tests/unit/tools/test_query_verbs_cli.py holds them equal."""
MAX_WINDOW_LIMIT = 100
LAST_BUCKETS = (2, 48)
MAX_AROUND = 50
MAX_RANK = 2**53 - 1
MAX_ENTITY_ID_BYTES = 2048
LISTED_ID_WIDTH = 24
"""The narrowest a listing's id column is: ids on later pages may be longer than the first page's (they fold)."""
_DECIMAL = re.compile(r"\A-?[0-9]{1,38}(?:\.[0-9]{1,38})?\Z")


# ---------------------------------------------------------------- flags, checked as they are parsed


def key_argument(text: str) -> str:
    """A bucket key of some period (the period it must be of is checked against --period)."""
    if not any(is_bucket_key(period, text) for period in KEY_FORMATS):
        formats = ", ".join(f"{period} {shape}" for period, shape in KEY_FORMATS.items())
        raise argparse.ArgumentTypeError(f"{text!r} is not a bucket key (UTC): {formats}, of a real date")
    return text


def entity_argument(text: str) -> str:
    if not 1 <= len(text.encode(errors="surrogateescape")) <= MAX_ENTITY_ID_BYTES:
        raise argparse.ArgumentTypeError(f"an id is 1 to {MAX_ENTITY_ID_BYTES} UTF-8 bytes")
    return text


def count_argument(text: str) -> int | str:
    """A count or a sum: an integer, or a decimal the request carries as a string (exact, not a binary float)."""
    if not _DECIMAL.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number: an integer, or a decimal such as 12.5")
    return int(text) if "." not in text else text


def board_request(arguments: argparse.Namespace) -> dict[str, Any]:
    """The board fields of the request: {"month": ...} or {"period": ..., "key": ...}, and the category."""
    request: dict[str, Any] = {}
    if arguments.month is not None:
        if arguments.period not in (None, "month") or arguments.key is not None:
            raise UsageError("--month names a month's board: give --month, or --period with --key, not both")
        request["month"] = arguments.month
    elif arguments.period is not None:
        request["period"] = arguments.period
        if arguments.key is not None:
            if arguments.period == ALL_TIME:
                raise UsageError("--period all is one board: it takes no --key")
            if not is_bucket_key(arguments.period, arguments.key):
                raise UsageError(
                    f"--key {arguments.key!r} is not a {arguments.period}: {KEY_FORMATS[arguments.period]} (UTC)"
                )
            request["key"] = arguments.key
    elif arguments.key is not None:
        raise UsageError("--key is a bucket of --period: give --period too")
    else:
        raise UsageError(f"name a board: --month YYYY-MM, or --period {'|'.join(PERIODS)} [--key ...]")
    if arguments.category is not None:
        request["category"] = arguments.category
    return request


def command_request(arguments: argparse.Namespace) -> dict[str, Any]:
    """The whole request but its paging: the board's fields and the command's own."""
    request = board_request(arguments)
    command = arguments.command
    if command == "top":
        request["limit"] = arguments.limit
        if arguments.last is not None:
            if arguments.limit > MAX_WINDOW_LIMIT:
                raise UsageError(f"--limit of a rolling window (--last) is 1-{MAX_WINDOW_LIMIT}")
            request["last"] = arguments.last
    elif command in ("rank", "score"):
        request[arguments.entity_attribute] = arguments.song
        if command == "score":
            request["score"] = True
        elif arguments.around is not None:
            request["around"] = arguments.around
    elif command == "range":
        if arguments.to_rank is not None and arguments.to_rank < arguments.from_rank:
            raise UsageError("--to-rank must be at least --from-rank")
        request["fromRank"] = arguments.from_rank
        if arguments.to_rank is not None:
            request["toRank"] = arguments.to_rank
    elif command == "all":
        request["fromRank"] = 1
    elif command == "range-by-count":
        bounds = {"minCount": arguments.min_count, "maxCount": arguments.max_count}
        if bounds["minCount"] is None and bounds["maxCount"] is None:
            raise UsageError("give --min-count, --max-count or both")
        if None not in bounds.values() and Decimal(bounds["minCount"]) > Decimal(bounds["maxCount"]):
            raise UsageError("--min-count must be at most --max-count")
        request |= {name: value for name, value in bounds.items() if value is not None}
    elif command == "card":
        request["size"] = True
    return request


# ---------------------------------------------------------------- what is printed


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


def text_of(value: Any) -> str:
    """A value as the AWS CLI's text output prints it: None for null, True/False, numbers and strings as they are."""
    return str(value)


@dataclass
class Listed:
    """What a listing printed so far: entries, and the token to resume it from (None once it is complete)."""

    entries: int = 0
    resume: str | None = None
    started: bool = False


class ListingPrinter:
    """A listing printed page by page in the chosen format; `finish` closes it with the token to resume from."""

    def __init__(
        self, out: TextIO, output: OutputFormat, title: str, entity_field: str, ranked: bool, listed: Listed
    ) -> None:
        self.out, self.output, self.title, self.entity_field, self.ranked = out, output, title, entity_field, ranked
        self.listed = listed
        self._table: StreamedTable | None = None
        self._first: dict[str, Any] | None = None

    def row(self, item: dict[str, Any]) -> list[str]:
        cells = [text_of(item.get(self.entity_field)), text_of(item.get(COUNT_FIELD))]
        return [text_of(item.get("rank")), *cells] if self.ranked else cells

    def columns(self) -> list[Column]:
        entity = [Column(self.entity_field, minimum=LISTED_ID_WIDTH), Column(COUNT_FIELD, numeric=True)]
        return [Column("#", numeric=True, spare=1), *entity] if self.ranked else entity

    def page(self, answer: dict[str, Any]) -> None:
        items = answer.get("items", [])
        if self._first is None:
            self._first = answer
            self._start(answer)
        if self.output == "json":
            for place, item in enumerate(items, start=self.listed.entries):
                print(("\n" if not place else ",\n") + json.dumps(item), end="", file=self.out)
        elif self.output == "text":
            for item in items:
                print("\t".join(self.row(item)), file=self.out)
        elif items:
            rows = [self.row(item) for item in items]
            if self._table is None:
                self._table = StreamedTable(self.out, self.columns(), rows)
            self._table.rows(rows)
        self.listed.entries += len(items)
        self.listed.resume = answer.get("next_token")
        self.out.flush()

    def _start(self, answer: dict[str, Any]) -> None:
        if self.output == "json":
            named = {name: value for name, value in answer.items() if name not in ("items", "next_token")}
            print(json.dumps(named)[:-1] + (", " if named else "") + '"items": [', end="", file=self.out)
        elif self.output == "table":
            print(f"{self.title} · {board_title(answer)}", file=self.out)
        self.listed.started = True

    def finish(self, resume: str | None) -> None:
        """The listing's end: what follows its last entry, and the token to resume from if it stopped before its end."""
        if self.output == "json":
            if self._first is None:
                print('{"items": [', end="", file=self.out)
            print(("\n" if self.listed.entries else "") + '], "next_token": ' + json.dumps(resume) + "}", file=self.out)
        elif self.output == "text":
            if resume is not None:
                print(f"NEXTTOKEN\t{resume}", file=self.out)
        else:
            if self._table is not None:
                self._table.close()
            else:
                print("no entries", file=self.out)
            if resume is not None:
                print(f"NextToken: {resume}", file=self.out)
                print("(give it to --starting-token, with the same flags, for the entries after these)", file=self.out)
        self.out.flush()


def print_rows(
    out: TextIO,
    output: OutputFormat,
    title: str,
    columns: list[Column],
    rows: list[list[str]],
    notes: list[str],
    marked: list[bool] | None = None,
) -> None:
    """A whole answer at once: a table with its title and notes, or its rows as tab-separated lines."""
    if output == "text":
        for cells in rows:
            print("\t".join(cells), file=out)
        return
    print(title, file=out)
    if rows:
        table = StreamedTable(out, columns, rows)
        table.rows(rows, marked or [])
        table.close()
    for note in notes:
        print(note, file=out)


def ranked_columns(entity_field: str) -> list[Column]:
    return [Column("#", numeric=True), Column(entity_field), Column(COUNT_FIELD, numeric=True)]


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
        [str(place), text_of(item.get(entity)), text_of(item.get(COUNT_FIELD))]
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
    printer = ListingPrinter(
        call.out, call.output, title, arguments.entity_attribute, command != "range-by-count", call.listed
    )
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


# ---------------------------------------------------------------- the parsers


SUMMARIES = {
    "top": "the top entries of a board, or of a rolling window (--last)",
    "rank": "the rank of one entity in a board, and its neighbours (--around)",
    "all": "every entry of a board with its rank, page after page (--max-items, --starting-token)",
    "range": "the entries at ranks --from-rank to --to-rank of a board, each with its rank (Redis ZREVRANGE)",
    "range-by-count": "the entries of a board whose count (or sum) is within --min-count and --max-count, highest "
    "first (Redis ZREVRANGEBYSCORE)",
    "card": "how many entries a board lists (Redis ZCARD)",
    "score": "one entity's count (or sum) on a board, or that it is not on it (Redis ZSCORE)",
}


def register(commands: Any) -> None:
    """`top`, `rank`, `all`, `range`, `range-by-count`, `card` and `score`, with the flags they share."""
    for name, summary in SUMMARIES.items():
        command = add_command(commands, name, summary)
        target = command.add_mutually_exclusive_group(required=True)
        target.add_argument(
            "--table",
            help="either table of a deployment: the downloads' (<name>-downloads, or source_table_name) or "
            "<name>-aggregates; its query function is <name>-query beside it",
        )
        target.add_argument("--function", help="the query function's name or ARN")
        board = command.add_argument_group("board")
        board.add_argument(
            "--month", type=month_argument, help='YYYY-MM: the guide\'s monthly board, asked as {"month": ...}'
        )
        board.add_argument("--period", choices=PERIODS, help="a period the deployment keeps (leaderboard_periods)")
        board.add_argument(
            "--key",
            type=key_argument,
            help="the period's UTC bucket: 2018-01-15T10, 2018-01-15, 2018-W03, 2018-01, 2018 (default: now)",
        )
        board.add_argument("--category", help="a category's board (category_attribute_name)")
        _add_own_arguments(command, name)
        command.add_argument(
            "--entity-attribute", default="songID", help="the module's entity_attribute_name (default songID)"
        )
        add_output_argument(command)
        aws = command.add_argument_group("AWS (default: boto3's standard configuration)")
        aws.add_argument("--profile", help="a profile of the shared AWS config files (default: AWS_PROFILE)")
        aws.add_argument("--region", help="default: AWS_REGION, else AWS_DEFAULT_REGION, else the profile's")
        aws.add_argument("--endpoint-url", help="default: AWS_ENDPOINT_URL if set, else AWS")
        command.set_defaults(
            handler=run, usage_error=command.error, on_interrupt=f"nothing was written ({name} only reads)"
        )


def _add_own_arguments(command: argparse.ArgumentParser, name: str) -> None:
    if name == "top":
        command.add_argument(
            "--limit",
            type=whole_number(1, MAX_LIMIT),
            default=10,
            help=f"entries (default 10; 1-{MAX_LIMIT}, with --last 1-{MAX_WINDOW_LIMIT})",
        )
        command.add_argument(
            "--last",
            type=whole_number(*LAST_BUCKETS),
            help="a rolling window: the sum of the last N buckets to --key (2-48)",
        )
    elif name in ("rank", "score"):
        command.add_argument("--song", "--id", dest="song", required=True, type=entity_argument, help="the entity id")
        if name == "rank":
            command.add_argument(
                "--around",
                type=whole_number(0, MAX_AROUND),
                help=f"also list N entries above and N below it (0-{MAX_AROUND})",
            )
    if name == "range":
        command.add_argument(
            "--from-rank",
            "--from",
            dest="from_rank",
            type=whole_number(1, MAX_RANK),
            default=1,
            help="the first rank, 1-based",
        )
        command.add_argument(
            "--to-rank", "--to", dest="to_rank", type=whole_number(1, MAX_RANK), help="the last rank (default: the end)"
        )
    elif name == "range-by-count":
        command.add_argument(
            "--min-count", "--min", dest="min_count", type=count_argument, help="the lowest count (or sum), included"
        )
        command.add_argument(
            "--max-count", "--max", dest="max_count", type=count_argument, help="the highest count (or sum), included"
        )
    if name in LISTINGS:
        paging = command.add_argument_group("paging (as the AWS CLI's)")
        paging.add_argument(
            "--page-size",
            type=whole_number(1, MAX_LIMIT),
            default=ALL_PAGE_SIZE,
            help=f"entries per invocation of the function (1-{MAX_LIMIT}, default {ALL_PAGE_SIZE})",
        )
        paging.add_argument(
            "--max-items",
            type=whole_number(1, 10**12),
            help="entries to print in all; then the NextToken to resume from",
        )
        paging.add_argument("--starting-token", help="a NextToken printed before: resume the listing there")
