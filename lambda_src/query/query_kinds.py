"""The query kinds, one table: how a request is recognised, parsed and answered; the first kind it asks for wins.

A kind is a module of its own (leaderboard_page.py, entity_rank.py, rolling_window.py) with a
`parse` (the request's own fields, after the board: a request or InvalidRequest) and an `answer`
(the response, read from the index).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import entity_rank
import leaderboard_page
import rolling_window
from boards import Board, Boards
from entity_rank import RankRequest
from index_reads import IndexSchema, Layout
from leaderboard_page import PageRequest
from request_parsing import BOARD_FIELDS, InvalidRequest, parse_board, shown
from rolling_window import WindowRequest

Request = PageRequest | RankRequest | WindowRequest


@dataclass(frozen=True)
class QueryKind:
    name: str
    """The kind as logs and metrics name it (`request`)."""
    asked: Callable[[Mapping[str, Any], str], bool]
    """(event, the entity field) -> whether the request asks for this kind."""
    fields: tuple[str, ...]
    """The request's fields this kind takes besides the board's and the entity field."""
    parse: Callable[[dict[str, Any], Board, str, Layout], Request]
    answer: Callable[..., dict[str, Any]]
    """(client, table_name, schema, layout, request, map_partitions, out_of_time, summed) -> the response."""


QUERY_KINDS: tuple[QueryKind, ...] = (
    QueryKind(
        "window", lambda event, _: "last" in event, ("last", "limit"), rolling_window.parse, rolling_window.answer
    ),
    QueryKind("around", lambda event, _: "around" in event, ("around",), entity_rank.parse, entity_rank.answer),
    QueryKind("rank", lambda event, entity: entity in event, (), entity_rank.parse, entity_rank.answer),
    QueryKind("page", lambda event, _: True, ("limit", "next_token"), leaderboard_page.parse, leaderboard_page.answer),
)
"""Every kind, in the order requests are recognised: the first whose `asked` holds parses the request.

`last` makes a window whatever else the request holds (the window refuses a token, around or an
entity by name); `around` makes an around-me rank even without an entity (refused: name one); an
entity makes a rank; anything else is a page.
"""
FIELDS = tuple(dict.fromkeys([*BOARD_FIELDS, *(field for kind in QUERY_KINDS for field in kind.fields)]))


def parse_kind_and_request(
    event: Any,
    schema: IndexSchema,
    layout: Layout,
    boards: Boards = Boards(),  # noqa: B008 - frozen: the default months-only deployment
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> tuple[QueryKind, Request]:
    """Whatever JSON the caller sent: the kind it asks for and its request, or InvalidRequest saying what is wrong."""
    if not isinstance(event, dict):
        raise InvalidRequest("the request must be a JSON object")
    entity_field = schema.entity
    unknown = set(event) - {*FIELDS, entity_field}
    if unknown:
        raise InvalidRequest(f"unknown fields: {', '.join(sorted(shown(str(name)) for name in unknown))}")
    board = parse_board(event, boards, now)
    kind = next(kind for kind in QUERY_KINDS if kind.asked(event, entity_field))
    return kind, kind.parse(event, board, entity_field, layout)


def parse_request(
    event: Any,
    schema: IndexSchema,
    layout: Layout,
    boards: Boards = Boards(),  # noqa: B008 - frozen: the default months-only deployment
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Request:
    """The request alone, whatever its kind."""
    return parse_kind_and_request(event, schema, layout, boards, now)[1]
