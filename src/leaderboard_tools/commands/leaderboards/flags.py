"""The board commands' flags, checked as they are parsed, and the request they make of the query function
(docs/query-contract.md): what `top`, `rank`, `all`, `range`, `range-by-count`, `card`, `score` and `among` ask."""

from __future__ import annotations

import argparse
import re
from decimal import Decimal
from typing import Any

from leaderboard_core.buckets import is_key_shaped
from leaderboard_core.periods import ALL_TIME, KEY_FORMATS, PERIOD_NAMES, SEASON, SEASON_KEY_FORMAT
from leaderboard_tools.argument_types import UsageError

ALL_PAGE_SIZE = 1000
MAX_LIMIT = 1000
"""The query function's limits (lambda_src/query: leaderboard_page, rolling_window, entity_rank, rank_range),
checked here before any request: tests/unit/tools/test_query_verbs_cli.py holds them equal."""
MAX_WINDOW_LIMIT = 100
LAST_BUCKETS = (2, 48)
MAX_AROUND = 50
MAX_RANK = 2**53 - 1
MAX_ENTITY_ID_BYTES = 2048
MAX_AMONG = 100
RANK_POLICIES = ("ordinal", "competition", "dense")
"""The query function's rank policies (rank_policies.py): ordinal 1, 2, 3, 4; competition 1, 2, 2, 4; dense 1, 2, 2,
3."""
RANKED_COMMANDS = ("top", "rank", "all", "range", "range-by-count", "among")
"""The commands that take --rank-policy: those whose answer ranks entries."""
LISTED_ID_WIDTH = 24
"""The narrowest a listing's id column is: ids on later pages may be longer than the first page's (they fold)."""
_DECIMAL = re.compile(r"\A-?[0-9]{1,38}(?:\.[0-9]{1,38})?\Z")


# ---------------------------------------------------------------- flags, checked as they are parsed


def key_argument(text: str) -> str:
    """A bucket key of some period (the period it must be of is checked against --period)."""
    key_formats = {**KEY_FORMATS, SEASON: SEASON_KEY_FORMAT}
    if not any(is_key_shaped(period, text) for period in key_formats):
        formats = ", ".join(f"{period} {shape}" for period, shape in key_formats.items())
        raise argparse.ArgumentTypeError(f"{text!r} is not a bucket key: {formats}, of a real date")
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
            if not is_key_shaped(arguments.period, arguments.key):
                key_format = KEY_FORMATS.get(arguments.period, SEASON_KEY_FORMAT)
                raise UsageError(f"--key {arguments.key!r} is not a {arguments.period}: {key_format}")
            request["key"] = arguments.key
    elif arguments.key is not None:
        raise UsageError("--key is a bucket of --period: give --period too")
    else:
        raise UsageError(f"name a board: --month YYYY-MM, or --period {'|'.join(PERIOD_NAMES)} [--key ...]")
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
    elif command == "among":
        if len(arguments.song) > MAX_AMONG:
            raise UsageError(f"--song: at most {MAX_AMONG} entities")
        if len(set(arguments.song)) != len(arguments.song):
            raise UsageError("--song: name each entity once")
        request["among"] = arguments.song
    if getattr(arguments, "rank_policy", None) is not None:
        if command == "top" and arguments.last is not None:
            raise UsageError("--rank-policy ranks a board's entries, not a rolling window's (--last)")
        request["rankPolicy"] = arguments.rank_policy
    return request
