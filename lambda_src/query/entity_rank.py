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
    return RankRequest(board, entity_id, around)


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


def _count_before(queries: PartitionQueries, schema: IndexSchema, me: Entry) -> tuple[int, bool]:
    """How many of a partition's aggregates list before `me`, and whether that count is complete (budget, clock)."""
    count = 0
    for bound, counts in ((">", True), ("=", False)):
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
