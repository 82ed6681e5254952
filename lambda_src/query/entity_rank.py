"""The rank kind: one entity's place on a board, and with `around` its neighbours (around-me).

{"month": "2018-01", "songID": "song3"}
    -> {"month": "2018-01", "songID": "song3", "downloadCount": 12, "rank": 4}
{..., "songID": "song3", "around": 2}: the same, and `items`: the song with two entries above and below it
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from boards import Board
from index_reads import Entry, IndexSchema, Layout, PartitionQueries, Position, dynamodb_number, read_above
from leaderboard_core.attributes import COUNT_FIELD
from leaderboard_page import PageRequest, merge_page
from rank_policies import (
    COMPETITION,
    DENSE,
    RankState,
    count_above,
    count_between,
    highest_order,
    parse_policy,
    value_key,
)
from read_context import ReadContext
from request_parsing import MAX_ENTITY_ID_BYTES, InvalidRequest, utf8_bytes

MAX_AROUND = 50
"""Entries above and below a song that a rank request may ask for."""


@dataclass(frozen=True)
class RankRequest:
    board: Board
    entity_id: str
    around: int | None = None
    """Also list this many entries above and below the entity."""
    policy: str | None = None
    """The rank policy (rank_policies.py); None and `ordinal` rank by place in the listing."""


def parse(event: dict[str, Any], board: Board, entity_field: str, layout: Layout) -> RankRequest:
    """The entity a request names, and how many neighbours it asks for (`around` names none without one)."""
    if entity_field not in event:
        raise InvalidRequest(f"around lists the neighbours of one {entity_field}: name it")
    if "limit" in event or "next_token" in event:
        raise InvalidRequest(f"a rank request takes month (or period and key), {entity_field} and around only")
    entity_id = entity_of(event, entity_field)
    around = event.get("around")
    wrong = isinstance(around, bool) or not isinstance(around, int) or not 0 <= around <= MAX_AROUND
    if "around" in event and wrong:
        raise InvalidRequest(f"around must be an integer from 0 to {MAX_AROUND}")
    return RankRequest(board, entity_id, around, parse_policy(event))


def entity_of(event: dict[str, Any], entity_field: str) -> str:
    """The entity a request names: any id DynamoDB can hold (a non-empty string, valid Unicode, 2,048 UTF-8 bytes)."""
    entity_id = event[entity_field]
    encoded = utf8_bytes(entity_id) if isinstance(entity_id, str) else None
    if encoded is None or not 1 <= len(encoded) <= MAX_ENTITY_ID_BYTES:
        raise InvalidRequest(
            f"{entity_field} must be a non-empty string of valid Unicode, at most {MAX_ENTITY_ID_BYTES} UTF-8 bytes"
        )
    return entity_id


def answer(reads: ReadContext, request: RankRequest) -> dict[str, Any]:
    """1 + the aggregates listed before this one: higher orders, and equal orders with smaller ids.

    Counting stops at the page budget or when `out_of_time()`, whichever comes first, in the count
    of higher orders and in the tie group alike: the answer is then a lower bound (`rankAtLeast`),
    never a timeout. With `around`, the answer also lists the entity's neighbours (`items`).
    """
    board, schema = request.board.id, reads.schema
    item = reads.aggregate(board, request.entity_id, with_order=True)
    response: dict[str, Any] = {**request.board.named(), schema.entity: request.entity_id}
    if not item or schema.order not in item or schema.count not in item:
        response |= {COUNT_FIELD: reads.value(0), "rank": None}
        return response if request.around is None else {**response, "items": []}
    me = Entry.of(int(item[schema.order]["N"]), request.entity_id, dynamodb_number(item[schema.count]["N"]))
    if request.policy in (COMPETITION, DENSE):
        return response | _policy_rank(reads, request, me)
    budget = reads.budget(board)

    def before(partition: str) -> tuple[int, bool]:
        return _count_before(reads.queries(partition, budget), schema, me)

    counted = list(reads.map_partitions(before, reads.layout.partitions(board)))
    ahead = sum(count for count, _ in counted)
    if all(complete for _, complete in counted):
        response |= {COUNT_FIELD: reads.value(me.count), "rank": ahead + 1}
    else:
        response |= {COUNT_FIELD: reads.value(me.count), "rank": None, "rankAtLeast": ahead + 1}
    if request.around is None:
        return response
    above, below = neighbours(reads, request.board, me, request.around)
    first = None if response["rank"] is None else response["rank"] - len(above)
    response["items"] = [
        {
            schema.entity: entry.entity_id,
            COUNT_FIELD: reads.value(entry.count),
            "rank": None if first is None else first + place,
        }
        for place, entry in enumerate([*above, me, *below])
    ]
    return response


def _policy_rank(reads: ReadContext, request: RankRequest, me: Entry) -> dict[str, Any]:
    """The entity's competition rank (1 + the entries of higher values) or dense rank (1 + the higher values), and
    with `around` its neighbours, each ranked under the policy (None while the entity's own rank is a lower bound).

    Around-me under `competition` also needs the entity's place: the entries of its own value listed before it
    (a COUNT of the orders between its own and its value's highest, and its tie group), and where the window starts
    below place 1 with another value than the entity's, that value's entries (a COUNT of its orders).
    """
    board, policy, summed = request.board.id, request.policy, reads.summed
    key = value_key(me.order, summed)
    above = count_above(reads, board, highest_order(key, summed), distinct=policy == DENSE)
    rank = (above.values if policy == DENSE else above.entries) + 1
    answer: dict[str, Any] = {COUNT_FIELD: reads.value(me.count), "rank": rank if above.complete else None}
    if not above.complete:
        answer["rankAtLeast"] = rank
    if request.around is None:
        return answer
    upper, lower = neighbours(reads, request.board, me, request.around)
    window = [*upper, me, *lower]
    if not above.complete:
        return answer | {"items": _items(reads, window, [None] * len(window))}
    keys = [value_key(entry.order, summed) for entry in window]
    if policy == DENSE:
        ranks_above: list[int | None] = []
        current, dense = key, rank
        for entry_key in reversed(keys[: len(upper)]):
            if entry_key != current:
                current, dense = entry_key, dense - 1
            ranks_above.append(dense)
        ranks_above.reverse()
        state = RankState(0, key, rank)
    else:
        place = _place(reads, board, me, above.entries)
        if place is None:
            return answer | {"items": _items(reads, window, [None] * len(window))}
        ranks_above = _competition_above(reads, board, upper, keys, place, rank)
        state = RankState(place, key, rank)
    ranks_below: list[int | None] = []
    for entry_key in keys[len(upper) + 1 :]:
        state = state.next(policy, entry_key)
        ranks_below.append(state.rank)
    return answer | {"items": _items(reads, window, [*ranks_above, rank, *ranks_below])}


def _place(reads: ReadContext, board: str, me: Entry, higher_values: int) -> int | None:
    """The entity's place in the listing, from the entries of higher values: None past the budget or clock."""
    summed = reads.summed
    same_value = count_between(reads, board, me.order + 1, highest_order(value_key(me.order, summed), summed))
    budget = reads.budget(board)
    tied = list(
        reads.map_partitions(
            lambda partition: _count_before(reads.queries(partition, budget), reads.schema, me, (("=", False),)),
            reads.layout.partitions(board),
        )
    )
    if not same_value.complete or not all(done for _, done in tied):
        return None
    return higher_values + same_value.entries + sum(count for count, _ in tied) + 1


def _competition_above(
    reads: ReadContext, board: str, upper: list[Entry], keys: list[int], place: int, rank: int
) -> list[int | None]:
    """The competition ranks of the entries listed just above the entity (at places place - len(upper) on).

    A value's rank is the place of its first entry: known within the window, except for the highest value shown
    when the window starts below place 1, which may continue above it (then: its entries counted).
    """
    top = place - len(upper)
    ranks: list[int | None] = []
    for index, entry_key in enumerate(keys[: len(upper)]):
        if entry_key == keys[len(upper)]:
            ranks.append(rank)
        elif index and keys[index - 1] == entry_key:
            ranks.append(ranks[-1])
        elif index or top == 1:
            ranks.append(top + index)
        else:
            step_low = highest_order(entry_key - 1, reads.summed) + 1
            group = count_between(reads, board, step_low, highest_order(entry_key, reads.summed))
            shown = sum(1 for other in keys[: len(upper)] if other == entry_key)
            ranks.append(top + shown - group.entries if group.complete else None)
    return ranks


def _items(reads: ReadContext, entries: list[Entry], ranks: list[int | None]) -> list[dict[str, Any]]:
    return [
        {reads.schema.entity: entry.entity_id, COUNT_FIELD: reads.value(entry.count), "rank": rank}
        for entry, rank in zip(entries, ranks, strict=True)
    ]


def neighbours(reads: ReadContext, board: Board, me: Entry, around: int) -> tuple[list[Entry], list[Entry]]:
    """Up to `around` entries listed just before `me` and just after it, over every partition, ties in listing order.

    Below: a page from me's position in every partition (merge_page). Above: the nearest entries
    of every partition read upwards, merged, the last `around` of them.
    """
    if around == 0:
        return [], []
    partitions = reads.layout.partitions(board.id)
    budget = reads.budget(board.id)
    upwards = read_above(reads.client, reads.table_name, reads.schema, budget, reads.out_of_time)
    nearest = list(reads.map_partitions(lambda partition: upwards(partition, me, around), partitions))
    above = _distinct(sorted(entry for entries in nearest for entry in entries), me)[-around:]
    after = Position(me.order, me.entity_id)
    page = PageRequest(board, around, dict.fromkeys(partitions, after))
    entries, _ = merge_page(page, reads.reader(budget), reads.map_partitions)
    return above, [entry for entry in entries if entry.entity_id != me.entity_id]


def _distinct(entries: list[Entry], me: Entry) -> list[Entry]:
    """Each entity once, me excluded: moving between layouts, an aggregate can show in two partitions for a moment."""
    seen = {me.entity_id}
    kept = []
    for entry in entries:
        if entry.entity_id not in seen:
            seen.add(entry.entity_id)
            kept.append(entry)
    return kept


def _count_before(
    queries: PartitionQueries,
    schema: IndexSchema,
    me: Entry,
    phases: tuple[tuple[str, bool], ...] = ((">", True), ("=", False)),
) -> tuple[int, bool]:
    """How many of a partition's aggregates list before `me`, and whether that count is complete (budget, clock).

    The phases: those of higher orders (counted), then those of its own order with smaller ids (read)."""
    count = 0
    for bound, counts in phases:
        start_key = None
        while True:
            if not queries.may_read():
                return count, False
            extra: dict[str, Any] = (
                {"Select": "COUNT"}
                if counts
                else {"ProjectionExpression": "#entity", "ExpressionAttributeNames": {"#entity": schema.entity}}
            )
            if start_key is not None:
                extra["ExclusiveStartKey"] = start_key
            page = queries.page((bound, me.order), **extra)
            if counts:
                count += page["Count"]
            else:
                count += sum(1 for item in page["Items"] if item[schema.entity]["S"].encode() < me.entity_id.encode())
            start_key = page.get("LastEvaluatedKey")
            if start_key is None:
                break
    return count, True
