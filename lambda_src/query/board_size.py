"""The size kind (Redis's ZCARD): how many entries a board lists.

{"month": "2018-01", "size": true} -> {"month": "2018-01", "size": 36, "next_token": null}

Every partition of the board is counted with Query pages of `Select: COUNT`, in parallel. DynamoDB
counts what it reads: a page covers up to 1 MB of index entries (about 10,000; "the 1 MB limit
applies to the data read, before the count", API Reference, Query), and is charged as read. A board
larger than the request's read budget or time answers `"size": null`, `"sizeAtLeast"` (the entries
counted) and a `next_token`: the same request with it counts on from where each partition stopped
(DynamoDB's own LastEvaluatedKey, which the token holds as a position).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from boards import Board
from index_reads import START, IndexSchema, Layout, Position, partition_budget
from page_tokens import FORGED, Scope, decode_scope, encode_token
from read_context import ReadContext
from request_parsing import InvalidRequest

SCOPE = "size"
COUNT_PAGE_LIMIT: int | None = None
"""Entries one COUNT page reads at most besides DynamoDB's 1 MB: none (tests set one, to count in many pages)."""


@dataclass(frozen=True)
class SizeRequest:
    board: Board
    cursors: dict[str, Position | None]
    """Where each partition's count stands: DynamoDB's last evaluated entry; one counted to its end is absent."""
    counted: int
    """Entries the requests before this one counted."""


def parse(event: dict[str, Any], board: Board, entity_field: str, layout: Layout) -> SizeRequest:
    if event["size"] is not True:
        raise InvalidRequest("size must be true: it asks how many entries the board lists")
    if "next_token" not in event:
        return SizeRequest(board, dict.fromkeys(layout.partitions(board.id), START), 0)
    cursors, (counted,) = decode_scope(event["next_token"], board.id, layout, SCOPE, 1)
    if not counted.isdigit() or len(counted) > 16:
        raise InvalidRequest(FORGED)
    return SizeRequest(board, cursors, int(counted))


def answer(reads: ReadContext, request: SizeRequest) -> dict[str, Any]:
    """The board's size, or the entries counted so far and the token to count on with."""
    board, schema = request.board.id, reads.schema
    budget = partition_budget(len(reads.layout.partitions(board)))

    def count(partition: str) -> tuple[int, Position | None, bool]:
        """The partition's entries after its cursor, as far as its budget and the clock allow; where it stopped."""
        queries = reads.queries(partition, budget)
        after = request.cursors[partition]
        start_key = None if after is None else _start_key(schema, partition, board, after)
        counted = 0
        while queries.may_read():
            extra: dict[str, Any] = {"Select": "COUNT"}
            if start_key is not None:
                extra["ExclusiveStartKey"] = start_key
            if COUNT_PAGE_LIMIT is not None:
                extra["Limit"] = COUNT_PAGE_LIMIT
            page = queries.page(None, **extra)
            counted += page["Count"]
            start_key = page.get("LastEvaluatedKey")
            if start_key is None:
                return counted, None, True
        return counted, Position(int(start_key[schema.order]["N"]), start_key[schema.entity]["S"]), False

    partitions = sorted(request.cursors)
    counts = list(reads.map_partitions(count, partitions))
    total = request.counted + sum(counted for counted, _, _ in counts)
    remaining = {
        partition: position for partition, (_, position, done) in zip(partitions, counts, strict=True) if not done
    }
    if not remaining:
        return {**request.board.named(), "size": total, "next_token": None}
    token = encode_token(board, reads.layout, remaining, Scope(SCOPE, (str(total),)))
    return {**request.board.named(), "size": None, "sizeAtLeast": total, "next_token": token}


def _start_key(schema: IndexSchema, partition: str, board: str, after: Position) -> dict[str, Any]:
    """DynamoDB's LastEvaluatedKey of an index entry: its keys and the table's (an aggregate's SK is its board)."""
    return {
        schema.period: {"S": partition},
        schema.order: {"N": str(after.order)},
        schema.entity: {"S": after.entity_id},
        schema.sort_key: {"S": board},
    }
