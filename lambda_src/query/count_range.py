"""The count range kind (Redis's ZREVRANGEBYSCORE): a board's entries whose count (or sum) is within bounds, a page at
a time, in listing order (highest first, equal values by id).

{"month": "2018-01", "minCount": 10, "maxCount": 20, "limit": 100}
    -> {"month": "2018-01", "minCount": 10, "maxCount": 20, "items": [{"songID": "song4", "downloadCount": 20}, ...],
        "next_token": "..." | null}

Both bounds are inclusive and either may be left out (no bound). The index's order is the value scaled
and a tie-breaker below one step of the value (index_layout.py), so the values within bounds are exactly
the orders between two numbers: each partition is read from the upper one down to the lower one, as a
page is read (leaderboard_page.py), and reads nothing outside them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from typing import Any

from boards import Board
from index_reads import START, Layout, Position, Unavailable
from leaderboard_core.index_layout import MAX_DECIMALS, ORDER_SCALE
from leaderboard_page import PageRequest, items_of, merge_page, parse_limit
from page_tokens import FORGED, Scope, decode_scope, encode_token
from rank_policies import DENSE, RankState, count_above, parse_policy, ranked
from read_context import ReadContext
from request_parsing import InvalidRequest

SCOPE = "counts"
BOUND_FIELDS = ("minCount", "maxCount")
_DECIMAL = re.compile(r"\A-?[0-9]{1,38}(?:\.[0-9]{1,38})?\Z")
HIGHEST_ORDER = 10**38 - 1
"""The largest order DynamoDB's 38 digits hold: bounds are clamped to the orders an entry can have."""
LOWEST_ORDER = -HIGHEST_ORDER


@dataclass(frozen=True)
class CountRangeRequest:
    board: Board
    bounds: dict[str, Decimal]
    """minCount and maxCount as asked (a missing one is no bound)."""
    asked: dict[str, int | str]
    """The bounds as the request gave them: the answer repeats them."""
    limit: int
    cursors: dict[str, Position | None]
    """START for a partition: from the upper bound."""
    policy: str | None = None
    """The rank policy asked: each item then carries its rank under it on the whole board."""
    state: RankState | None = None
    """With a policy, from a token: the walk up to the cursors (None: counted from the board above maxCount)."""

    def orders(self, summed: bool) -> tuple[int, int]:
        """The lowest and highest order of an entry whose value is within the bounds (lowest > highest: none)."""
        decimals = MAX_DECIMALS if summed else 0
        step = ORDER_SCALE // 10**decimals
        """The order's distance between two neighbouring values: the tie-breaker stays below it."""
        with localcontext() as context:
            context.prec = 100
            low, high = LOWEST_ORDER, HIGHEST_ORDER
            if "minCount" in self.bounds:
                low = int(self.bounds["minCount"].scaleb(decimals).to_integral_value(ROUND_CEILING)) * step
            if "maxCount" in self.bounds:
                high = (int(self.bounds["maxCount"].scaleb(decimals).to_integral_value(ROUND_FLOOR)) + 1) * step - 1
        return max(low, LOWEST_ORDER), min(high, HIGHEST_ORDER)


def parse(event: dict[str, Any], board: Board, entity_field: str, layout: Layout) -> CountRangeRequest:
    """The bounds (an integer, or a decimal as a string), the page's limit, and where the token stands."""
    bounds: dict[str, Decimal] = {}
    for field in BOUND_FIELDS:
        if field in event:
            bounds[field] = _bound(field, event[field])
    if len(bounds) == 2 and bounds["minCount"] > bounds["maxCount"]:
        raise InvalidRequest("minCount must be at most maxCount")
    asked = {field: event[field] for field in bounds}
    limit = parse_limit(event)
    policy = parse_policy(event)
    scope = tuple(_canonical(bounds[field]) if field in bounds else "" for field in BOUND_FIELDS)
    state = None
    if "next_token" not in event:
        cursors: dict[str, Position | None] = dict.fromkeys(layout.partitions(board.id), START)
    else:
        kind, values = (SCOPE, 2) if policy is None else (f"{SCOPE}.{policy}", 5)
        cursors, token_scope = decode_scope(event["next_token"], board.id, layout, kind, values)
        if token_scope[:2] != scope:
            raise InvalidRequest("next_token belongs to another range: give the minCount and maxCount of its request")
        state = None if policy is None else RankState.of_scope(token_scope[2:], FORGED)
    return CountRangeRequest(board, bounds, asked, limit, cursors, policy, state)


def _bound(field: str, value: Any) -> Decimal:
    """An integer, or a string holding a decimal (a JSON number with a fraction may be read as a binary float)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= HIGHEST_ORDER:
        return Decimal(value)
    if isinstance(value, str) and _DECIMAL.match(value):
        return Decimal(value)
    raise InvalidRequest(
        f'{field} must be an integer, or a decimal in a string ("12.5"), of at most 38 digits before its point'
    )


def _canonical(value: Decimal) -> str:
    """The bound as a token's scope holds it: one text per value ("12.50" and "12.5" are one bound)."""
    with localcontext() as context:
        context.prec = 100
        text = format(value.normalize(), "f")
    return "0" if text in ("-0", "0") else text


def answer(reads: ReadContext, request: CountRangeRequest) -> dict[str, Any]:
    """The next `limit` entries within the bounds, and the token of the page after them (null: the range is done)."""
    board = request.board.id
    low, high = request.orders(reads.summed)
    response: dict[str, Any] = {**request.board.named(), **request.asked}
    if low > high:
        return response | {"items": [], "next_token": None}
    reader = reads.reader(reads.budget(board), floor=low, ceiling=high)
    page = PageRequest(request.board, request.limit, request.cursors)
    entries, cursors = merge_page(page, reader, reads.map_partitions)
    bounds = tuple(_canonical(request.bounds[f]) if f in request.bounds else "" for f in BOUND_FIELDS)
    if request.policy is None:
        return response | {
            "items": items_of(reads, entries),
            "next_token": encode_token(board, reads.layout, cursors, Scope(SCOPE, bounds)) if cursors else None,
        }
    state = request.state or _state_above(reads, request, high)
    walked = ranked(request.policy, state, entries, reads.summed)
    state = walked[-1][2] if walked else state
    scope = Scope(f"{SCOPE}.{request.policy}", (*bounds, *state.scope()))
    return response | {
        "items": [item | {"rank": rank} for item, (_, rank, _) in zip(items_of(reads, entries), walked, strict=True)],
        "next_token": encode_token(board, reads.layout, cursors, scope) if cursors else None,
    }


def _state_above(reads: ReadContext, request: CountRangeRequest, high: int) -> RankState:
    """The walk's state above the range's first entry: the board's entries above maxCount (for `dense`, their
    distinct values), counted as a rank counts them; the range starts a new value, whatever the policy."""
    if "maxCount" not in request.bounds:
        return RankState()
    above = count_above(reads, request.board.id, high, distinct=request.policy == DENSE)
    if not above.complete:
        raise Unavailable("counting the entries above maxCount, for their ranks, outgrew the read budget or time")
    return RankState(above.entries, None, above.values if request.policy == DENSE else above.entries)
