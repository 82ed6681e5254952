"""The rank range kind (Redis's ZREVRANGE): the entries at ranks fromRank to toRank of a board, a page at a time.

{"month": "2018-01", "fromRank": 50, "toRank": 60}
    -> {"month": "2018-01", "fromRank": 50, "toRank": 60,
        "items": [{"songID": "song8", "downloadCount": 12, "rank": 50}, ...], "next_token": "..." | null}

A rank is a place in the board's listing (leaderboard_page.py): 1-based, equal values by id. To reach
fromRank the function skips the entries listed above it without a read per partition of every one of
them: it reads each partition from the top in chunks of its expected share of them (the leaderboard
shard of an id is a hash: a partition holds about 1/N of any part of the listing) and merges what is
certain (every entry up to the lowest of the partitions' last entries read), reading on only where a
partition's last entry read is still above the place sought. A skip the request's read budget or time
cannot finish answers a page without items whose token continues from where it stopped.

Under a rank policy (`competition`, `dense`: rank_policies.py) the range is of the entries whose rank under it
is from fromRank to toRank: the skip walks the listing and ranks each entry it passes (walk_to).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from boards import Board
from index_reads import (
    START,
    BudgetedClient,
    Entry,
    Layout,
    PartitionReader,
    Position,
    Unavailable,
    request_budget,
)
from leaderboard_page import PageRequest, items_of, merge_page, parse_limit
from page_tokens import FORGED, Scope, decode_scope, encode_token
from rank_policies import COMPETITION, DENSE, TOP, RankState, parse_policy, value_key
from read_context import ReadContext
from request_parsing import InvalidRequest

MAX_RANK = 2**53 - 1
"""The largest rank a request may name: the largest integer every JSON parser reads exactly."""
SKIP_STEP = 20_000
"""Entries one round of the skip passes over at most (about 2 MB of index entries read, a few MB of memory)."""
SCOPE = "ranks"
RANK_FIELDS = ("fromRank", "toRank")


@dataclass(frozen=True)
class RankRangeRequest:
    board: Board
    first: int
    """fromRank: 1 if not given."""
    last: int | None
    """toRank: None for the end of the board."""
    limit: int
    cursors: dict[str, Position | None]
    next_rank: int
    """The rank of the entry after the cursors; below `first` while the skip to it is not done."""
    policy: str | None = None
    """`competition` or `dense`: the range is of the entries whose rank under it is from `first` to `last`
    (None: of places in the listing, as `ordinal`)."""
    state: RankState = TOP
    """Under a policy: the listing's walk up to the cursors."""
    reached: bool = False
    """Under a policy: the walk is at `first` (the next entry is in the range, or past it)."""
    scope: str = SCOPE
    """The kind its tokens name: `ranks`, or `ranks.ordinal` when `ordinal` was asked (a token continues only the
    request it was issued for, as a page's does)."""


def parse(event: dict[str, Any], board: Board, entity_field: str, layout: Layout) -> RankRangeRequest:
    """The ranks (fromRank default 1, toRank default the end), the page's limit, and where the token stands."""
    for field in RANK_FIELDS:
        value = event.get(field, 1)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RANK:
            raise InvalidRequest(f"{field} must be an integer from 1 to {MAX_RANK}: a 1-based rank")
    first, last = event.get("fromRank", 1), event.get("toRank")
    if last is not None and last < first:
        raise InvalidRequest("toRank must be at least fromRank")
    limit = parse_limit(event)
    policy = parse_policy(event)
    if policy in (COMPETITION, DENSE):
        return _parse_policy_range(event, board, layout, first, last, limit, policy)
    scope = SCOPE if policy is None else f"{SCOPE}.{policy}"
    if "next_token" not in event:
        start = dict.fromkeys(layout.partitions(board.id), START)
        return RankRangeRequest(board, first, last, limit, start, 1, scope=scope)
    cursors, (token_first, token_last, token_next) = decode_scope(event["next_token"], board.id, layout, scope, 3)
    if (token_first, token_last) != _range_text(first, last):
        raise InvalidRequest("next_token belongs to another range: give the fromRank and toRank it was issued for")
    next_rank = int(token_next) if token_next.isdigit() else 0
    if not 1 <= next_rank <= (MAX_RANK if last is None else last) or not cursors:
        raise InvalidRequest(FORGED)
    return RankRangeRequest(board, first, last, limit, cursors, next_rank, scope=scope)


def _parse_policy_range(
    event: dict[str, Any], board: Board, layout: Layout, first: int, last: int | None, limit: int, policy: str
) -> RankRangeRequest:
    """A range by rank under `competition` or `dense`: its token carries the range and the walk's state."""
    if "next_token" not in event:
        cursors: dict[str, Position | None] = dict.fromkeys(layout.partitions(board.id), START)
        return RankRangeRequest(board, first, last, limit, cursors, 1, policy)
    cursors, values = decode_scope(event["next_token"], board.id, layout, f"{SCOPE}.{policy}", 6)
    if values[:2] != _range_text(first, last):
        raise InvalidRequest("next_token belongs to another range: give the fromRank and toRank it was issued for")
    state = RankState.of_scope(values[2:5], FORGED)
    if not cursors or values[5] not in ("0", "1"):
        raise InvalidRequest(FORGED)
    return RankRangeRequest(board, first, last, limit, cursors, state.listed + 1, policy, state, values[5] == "1")


def _range_text(first: int, last: int | None) -> tuple[str, str]:
    return str(first), "" if last is None else str(last)


def answer(reads: ReadContext, request: RankRangeRequest) -> dict[str, Any]:
    """The next `limit` entries of the range, each with its rank, and the token of the page after them (null: done).

    Every Query counts against one budget for the request (request_budget) and the function's clock. A
    request that cannot skip a single entry, nor list one, is Unavailable; one that skipped some and ran
    out answers the entries it could list (none while skipping) and a token that continues from there.
    """
    partitions = reads.layout.partitions(request.board.id)
    budgeted = reads.with_client(BudgetedClient(reads.client, request_budget(len(partitions)), reads.out_of_time))
    read, map_partitions = budgeted.reader(reads.budget(request.board.id)), reads.map_partitions
    if request.policy is not None:
        return _policy_answer(reads, request, read)
    cursors, rank = dict(request.cursors), request.next_rank

    def response(entries: list[Entry], cursors: dict[str, Position | None], rank: int) -> dict[str, Any]:
        listed = rank + len(entries)
        done = not cursors or (request.last is not None and listed > request.last)
        items = [item | {"rank": rank + place} for place, item in enumerate(items_of(reads, entries))]
        scope = Scope(request.scope, (*_range_text(request.first, request.last), str(listed)))
        return {
            **request.board.named(),
            "fromRank": request.first,
            "toRank": request.last,
            "items": items,
            "next_token": None if done else encode_token(request.board.id, reads.layout, cursors, scope),
        }

    skipped = 0
    if rank < request.first:
        cursors, skipped = skip(cursors, request.first - rank, read, map_partitions)
        rank += skipped
        if rank < request.first and cursors:
            if not skipped:
                raise Unavailable(f"skipping to rank {request.first} could not pass one entry within the read budget")
            return response([], cursors, rank)
    if not cursors:
        return response([], cursors, rank)
    wanted = request.limit if request.last is None else min(request.limit, request.last - rank + 1)
    try:
        entries, after = merge_page(PageRequest(request.board, wanted, cursors), read, map_partitions)
    except Unavailable:
        if not skipped:
            raise
        return response([], cursors, rank)
    return response(entries, after, rank)


def _policy_answer(reads: ReadContext, request: RankRangeRequest, read: PartitionReader) -> dict[str, Any]:
    """The next `limit` entries whose rank under the policy is from `first` to `last`, each with it, and the token.

    The skip walks the listing from the top (or the token's state) to the first entry ranked `first` or more: it
    reads what the skip of places reads, every entry above, but ranks each as it passes (ranks are not places).
    The range ends before the first entry ranked above `last`: a value's entries are all in it, or none.
    """
    policy, summed, map_partitions = request.policy or "", reads.summed, reads.map_partitions
    state, cursors = request.state, dict(request.cursors)

    def response(
        entries: list[Entry], cursors: dict[str, Position | None], state: RankState, reached: bool = True
    ) -> dict[str, Any]:
        items, done = [], not cursors
        for item, entry in zip(items_of(reads, entries), entries, strict=True):
            state_after = state.next(policy, value_key(entry.order, summed))
            if request.last is not None and state_after.rank > request.last:
                done = True
                break
            state = state_after
            items.append(item | {"rank": state.rank})
        walk = (*state.scope(), "1" if reached else "0")
        scope = Scope(f"{SCOPE}.{policy}", (*_range_text(request.first, request.last), *walk))
        return {
            **request.board.named(),
            "fromRank": request.first,
            "toRank": request.last,
            "items": items,
            "next_token": None if done else encode_token(request.board.id, reads.layout, cursors, scope),
        }

    walked = False
    if request.first > 1 and state.rank < request.first and not request.reached:
        cursors, state, outcome = walk_to(policy, request.first, state, cursors, read, map_partitions, summed)
        if outcome == ENDED:
            return response([], {}, state)
        if outcome == RAN_OUT:
            if state == request.state:
                raise Unavailable(f"skipping to rank {request.first} could not pass one entry within the read budget")
            return response([], cursors, state, reached=False)
        walked = True
    try:
        entries, after = merge_page(PageRequest(request.board, request.limit, cursors), read, map_partitions)
    except Unavailable:
        if not walked:
            raise
        return response([], cursors, state)
    return response(entries, after, state)


WALK_START = 16
"""Entries a walk's first round passes at least, doubling each round: the rest of a tie group."""
REACHED, ENDED, RAN_OUT = "reached", "ended", "ran out"
"""How a walk to a rank ends: before an entry of that rank, at the board's end, or out of reads (budget, clock)."""


def walk_to(
    policy: str,
    first: int,
    state: RankState,
    cursors: dict[str, Position | None],
    read: PartitionReader,
    map_partitions: Callable[..., Any],
    summed: bool,
) -> tuple[dict[str, Position | None], RankState, str]:
    """Pass the entries ranked below `first` under the policy: the cursors and state after them, and how it ended
    (REACHED: the next entry is ranked `first` or more; ENDED; RAN_OUT: what the rounds before passed stays passed).

    A round passes the entries still expected below `first`: under `competition` its places below `first` (all
    ranked below it), under `dense` its ranks below `first` times the entries a rank held so far (one at least); at
    least WALK_START entries, twice as many each time that is more than expected (what is left of a tie group), at
    most SKIP_STEP.
    """
    growth, last_id = WALK_START, None
    while cursors:
        if policy == COMPETITION:
            expected = first - 1 - state.listed
        else:
            expected = math.ceil((first - 1 - state.rank) * max(state.listed / max(state.rank, 1), 1))
        chunk = min(SKIP_STEP, max(expected, growth))
        if expected <= growth:
            growth *= 2
        try:
            taken, after = pass_round(cursors, chunk, read, map_partitions)
        except Unavailable:
            return cursors, state, RAN_OUT
        if not taken:
            return after, state, ENDED
        passed = dict(cursors)
        for entry, partition in taken:
            if entry.entity_id != last_id:
                next_state = state.next(policy, value_key(entry.order, summed))
                if next_state.rank >= first:
                    return passed, state, REACHED
                state, last_id = next_state, entry.entity_id
            passed[partition] = Position(entry.order, entry.entity_id)
        cursors = after
    return cursors, state, ENDED


def skip(
    cursors: dict[str, Position | None], count: int, read: PartitionReader, map_partitions: Callable[..., Any] = map
) -> tuple[dict[str, Position | None], int]:
    """Pass over `count` entries of the listing from the cursors: the cursors after them, and how many were passed.

    Fewer than `count` when the board ends (its cursors are then empty) or a round ran out of reads (Unavailable):
    what the rounds before it passed stays passed.
    """
    skipped = 0
    while skipped < count and cursors:
        try:
            passed, cursors = skip_round(cursors, min(count - skipped, SKIP_STEP), read, map_partitions)
        except Unavailable:
            break
        skipped += passed
    return cursors, skipped


def skip_round(
    cursors: dict[str, Position | None], count: int, read: PartitionReader, map_partitions: Callable[..., Any] = map
) -> tuple[int, dict[str, Position | None]]:
    """Pass over `count` entries (fewer only where the board ends): how many, and the cursors after them."""
    taken, after = pass_round(cursors, count, read, map_partitions)
    return len({entry.entity_id for entry, _ in taken}), after


def pass_round(
    cursors: dict[str, Position | None], count: int, read: PartitionReader, map_partitions: Callable[..., Any] = map
) -> tuple[list[tuple[Entry, str]], dict[str, Position | None]]:
    """Pass over `count` entries (fewer only where the board ends): each passed with its partition, in listing
    order, and the cursors after them.

    Every partition is read from its cursor for its expected share of `count` and a margin of three
    standard deviations (the share of a hash is binomial), whole order groups only. The entries up to
    the lowest last entry of the partitions not read to their end are certain: no unread entry lists
    before them. Until `count` of them are certain, the partitions whose last entry read lists before
    the count-th entry read are read on, twice as much each time.
    """
    partitions = sorted(cursors)
    share = count / len(partitions)
    chunk = dict.fromkeys(partitions, math.ceil(share + 3 * math.sqrt(share)) + 1)
    buffers: dict[str, list[Entry]] = {partition: [] for partition in partitions}
    exhausted: set[str] = set()
    pending = partitions

    def read_on(partition: str) -> tuple[list[Entry], bool]:
        read_so_far = buffers[partition]
        after = Position(read_so_far[-1].order, read_so_far[-1].entity_id) if read_so_far else cursors[partition]
        return read(partition, after, chunk[partition])

    while True:
        for partition, (entries, done) in zip(pending, list(map_partitions(read_on, pending)), strict=True):
            buffers[partition] += entries
            chunk[partition] *= 2
            if done:
                exhausted.add(partition)
        open_ends = [buffers[partition][-1] for partition in partitions if partition not in exhausted]
        certain = min(open_ends) if open_ends else None
        taken, last_taken = _take(_merged(buffers), count, certain)
        if len({entry.entity_id for entry, _ in taken}) == count or certain is None:
            after = dict(cursors)
            for partition in partitions:
                if partition in last_taken:
                    after[partition] = Position(last_taken[partition].order, last_taken[partition].entity_id)
                    if partition in exhausted and last_taken[partition] == buffers[partition][-1]:
                        del after[partition]
                elif partition in exhausted and not buffers[partition]:
                    del after[partition]
            return taken, after
        counted, sought = _take(_merged(buffers), count, None)
        if len({entry.entity_id for entry, _ in counted}) < count:
            pending = [partition for partition in partitions if partition not in exhausted]
        else:
            place = max(sought.values())
            pending = [p for p in partitions if p not in exhausted and buffers[p][-1] < place]


def _merged(buffers: dict[str, list[Entry]]) -> Iterator[tuple[Entry, str]]:
    return heapq.merge(*([(entry, partition) for entry in entries] for partition, entries in buffers.items()))


def _take(
    merged: Iterator[tuple[Entry, str]], count: int, certain: Entry | None
) -> tuple[list[tuple[Entry, str]], dict[str, Entry]]:
    """The first `count` distinct entities of the merge, up to `certain`: each with its partition, and each
    partition's last taken.

    Moving between layouts an aggregate can show in two partitions for a moment: it is passed once, and
    both partitions' cursors move past it.
    """
    seen: set[str] = set()
    taken: list[tuple[Entry, str]] = []
    last_taken: dict[str, Entry] = {}
    for entry, partition in merged:
        if (len(seen) == count and entry.entity_id not in seen) or (certain is not None and certain < entry):
            break
        last_taken[partition] = entry
        taken.append((entry, partition))
        seen.add(entry.entity_id)
    return taken, last_taken
