"""The query kinds, one table: how a request is recognised, parsed and answered; the first kind it asks for wins.

A kind is a module of its own (leaderboard_page.py, entity_rank.py, rolling_window.py, rank_range.py,
count_range.py, board_size.py, entity_score.py) with a `parse` (the request's own fields, after the
board: a request or InvalidRequest) and an `answer` (the response, read from the index).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import board_size
import count_range
import entity_rank
import entity_score
import leaderboard_page
import rank_range
import rolling_window
from board_size import SizeRequest
from boards import Board, Boards
from count_range import CountRangeRequest
from entity_rank import RankRequest
from entity_score import ScoreRequest
from index_reads import IndexSchema, Layout
from leaderboard_page import PageRequest
from rank_range import RankRangeRequest
from request_parsing import BOARD_FIELDS, InvalidRequest, parse_board, shown
from rolling_window import WindowRequest

Request = PageRequest | RankRequest | WindowRequest | RankRangeRequest | CountRangeRequest | SizeRequest | ScoreRequest


@dataclass(frozen=True)
class QueryKind:
    name: str
    """The kind as logs and metrics name it (`request`)."""
    asked: Callable[[Mapping[str, Any], str], bool]
    """(event, the entity field) -> whether the request asks for this kind."""
    fields: tuple[str, ...]
    """The request's fields this kind takes besides the board's (and the entity field, if `entity`)."""
    parse: Callable[[dict[str, Any], Board, str, Layout], Request]
    answer: Callable[..., dict[str, Any]]
    """(client, table_name, schema, layout, request, map_partitions, out_of_time, summed) -> the response."""
    entity: bool = False
    """Whether the kind takes the entity field (a rank, around-me, a score)."""
    described: str = ""
    """The kind as an error message names it."""


QUERY_KINDS: tuple[QueryKind, ...] = (
    QueryKind(
        "window",
        lambda event, _: "last" in event,
        ("last", "limit"),
        rolling_window.parse,
        rolling_window.answer,
        described="a rolling window (last)",
    ),
    QueryKind(
        "around",
        lambda event, _: "around" in event,
        ("around",),
        entity_rank.parse,
        entity_rank.answer,
        entity=True,
        described="a rank with its neighbours (around)",
    ),
    QueryKind(
        "ranks",
        lambda event, _: any(field in event for field in rank_range.RANK_FIELDS),
        ("fromRank", "toRank", "limit", "next_token"),
        rank_range.parse,
        rank_range.answer,
        described="a range by rank (fromRank, toRank)",
    ),
    QueryKind(
        "counts",
        lambda event, _: any(field in event for field in count_range.BOUND_FIELDS),
        ("minCount", "maxCount", "limit", "next_token"),
        count_range.parse,
        count_range.answer,
        described="a range by count (minCount, maxCount)",
    ),
    QueryKind(
        "size",
        lambda event, _: "size" in event,
        ("size", "next_token"),
        board_size.parse,
        board_size.answer,
        described="a board's size (size)",
    ),
    QueryKind(
        "score",
        lambda event, _: "score" in event,
        ("score",),
        entity_score.parse,
        entity_score.answer,
        entity=True,
        described="a score (score)",
    ),
    QueryKind(
        "rank",
        lambda event, entity: entity in event,
        (),
        entity_rank.parse,
        entity_rank.answer,
        entity=True,
        described="a rank",
    ),
    QueryKind(
        "page",
        lambda event, _: True,
        ("limit", "next_token"),
        leaderboard_page.parse,
        leaderboard_page.answer,
        described="a page",
    ),
)
"""Every kind, in the order requests are recognised: the first whose `asked` holds parses the request.

`last` makes a window whatever else the request holds; `around` makes an around-me rank even without
an entity (refused: name one); `fromRank` or `toRank` a range by rank, `minCount` or `maxCount` a range
by count, `size` a board's size, `score` a score (refused without an entity); an entity alone makes a
rank; anything else is a page. A field the recognised kind does not take is refused, whichever kind
it belongs to: a request asks for one thing.
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
    request = kind.parse(event, board, entity_field, layout)
    takes = [*kind.fields, *([entity_field] if kind.entity else [])]
    foreign = sorted(set(event) - {*BOARD_FIELDS, *takes})
    if foreign:
        raise InvalidRequest(
            f"{kind.described} takes {', '.join(takes)} besides its board, not {', '.join(shown(f) for f in foreign)}"
        )
    return kind, request


def parse_request(
    event: Any,
    schema: IndexSchema,
    layout: Layout,
    boards: Boards = Boards(),  # noqa: B008 - frozen: the default months-only deployment
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Request:
    """The request alone, whatever its kind."""
    return parse_kind_and_request(event, schema, layout, boards, now)[1]
