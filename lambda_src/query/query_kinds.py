"""The query kinds, one table: how a request is recognised, parsed and answered; the first kind it asks for wins.

A kind is a module of its own (leaderboard_page.py, entity_rank.py, rolling_window.py, rank_range.py,
count_range.py, board_size.py, entity_score.py, among.py) with a `parse` (the request's own fields, after the
board: a request or InvalidRequest) and an `answer` (the response, read from the index).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import among
import board_size
import count_range
import entity_rank
import entity_score
import leaderboard_page
import rank_range
import rolling_window
from among import AmongRequest
from board_size import SizeRequest
from boards import Board, Boards
from count_range import BOUND_FIELDS, CountRangeRequest
from entity_rank import RankRequest
from entity_score import ScoreRequest
from index_reads import IndexSchema, Layout
from leaderboard_page import PageRequest
from rank_policies import POLICY_FIELD
from rank_range import RANK_FIELDS, RankRangeRequest
from read_context import ReadContext
from request_parsing import BOARD_FIELDS, InvalidRequest, parse_board, shown
from rolling_window import WindowRequest

Request = (
    PageRequest
    | RankRequest
    | WindowRequest
    | RankRangeRequest
    | CountRangeRequest
    | SizeRequest
    | ScoreRequest
    | AmongRequest
)
Parse = Callable[[dict[str, Any], Board, str, Layout], Request]
Answer = Callable[[ReadContext, Any], dict[str, Any]]
PAGED = ("limit", "next_token")
"""The fields of a request answered a page at a time."""
RANKED = (POLICY_FIELD,)
"""The field of a request whose items may be ranked under a rank policy (rank_policies.py)."""


def _of(kind: ModuleType) -> tuple[Parse, Answer]:
    """A kind module's parse and answer."""
    return kind.parse, kind.answer


@dataclass(frozen=True)
class QueryKind:
    name: str
    """The kind as logs and metrics name it (`request`)."""
    marks: tuple[str, ...]
    """The fields whose presence asks for this kind; none: the entity field does if the kind takes it, else nothing."""
    fields: tuple[str, ...]
    """The request's fields this kind takes besides the board's (and the entity field, if `entity`)."""
    parse: Parse
    answer: Answer
    """(the read context, the request `parse` made) -> the response."""
    described: str
    """The kind as an error message names it."""
    entity: bool = False
    """Whether the kind takes the entity field (a rank, around-me, a score)."""

    def asked(self, event: Mapping[str, Any], entity_field: str) -> bool:
        """Whether the request asks for this kind (QUERY_KINDS' order decides between several)."""
        if self.marks:
            return any(mark in event for mark in self.marks)
        return entity_field in event or not self.entity


QUERY_KINDS: tuple[QueryKind, ...] = (
    QueryKind("window", ("last",), ("last", "limit"), *_of(rolling_window), "a rolling window (last)"),
    QueryKind(
        "around", ("around",), ("around", *RANKED), *_of(entity_rank), "a rank with its neighbours (around)", True
    ),
    QueryKind(
        "ranks", RANK_FIELDS, (*RANK_FIELDS, *PAGED, *RANKED), *_of(rank_range), "a range by rank (fromRank, toRank)"
    ),
    QueryKind(
        "counts",
        BOUND_FIELDS,
        (*BOUND_FIELDS, *PAGED, *RANKED),
        *_of(count_range),
        "a range by count (minCount, maxCount)",
    ),
    QueryKind("size", ("size",), ("size", "next_token"), *_of(board_size), "a board's size (size)"),
    QueryKind("score", ("score",), ("score",), *_of(entity_score), "a score (score)", True),
    QueryKind("among", ("among",), ("among", *RANKED), *_of(among), "a set's ranks among themselves (among)"),
    QueryKind("rank", (), RANKED, *_of(entity_rank), "a rank", True),
    QueryKind("page", (), (*PAGED, *RANKED), *_of(leaderboard_page), "a page"),
)
"""Every kind, in the order requests are recognised: the first whose `asked` holds parses the request.

`last` makes a window whatever else the request holds; `around` makes an around-me rank even without
an entity (refused: name one); `fromRank` or `toRank` a range by rank, `minCount` or `maxCount` a range
by count, `size` a board's size, `score` a score (refused without an entity), `among` a set's ranks; an
entity alone makes a rank; anything else is a page. `rankPolicy` goes with the kinds that rank.
A field the recognised kind does not take is refused, whichever kind
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


def parse_request(event: Any, *deployment: Any, **named: Any) -> Request:
    """The request alone, whatever its kind (the deployment as parse_kind_and_request takes it)."""
    return parse_kind_and_request(event, *deployment, **named)[1]
