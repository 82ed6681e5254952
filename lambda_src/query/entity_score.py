"""The score kind (Redis's ZSCORE): one entity's value on a board, or that the board does not list it.

{"month": "2018-01", "songID": "song3", "score": true}
    -> {"month": "2018-01", "songID": "song3", "downloadCount": 12, "onBoard": true}
{"month": "2018-01", "songID": "silence", "score": true}
    -> {"month": "2018-01", "songID": "silence", "downloadCount": 0, "onBoard": false}

One GetItem of the aggregate's count and order (what the query role may read): the board lists an
aggregate that has both, as the sparse index does. A rank (entity_rank.py) answers the same value and
counts the entries above it; this reads nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from boards import Board
from entity_rank import entity_of
from index_reads import Layout, dynamodb_number
from leaderboard_core.attributes import COUNT_FIELD
from read_context import ReadContext
from request_parsing import InvalidRequest


@dataclass(frozen=True)
class ScoreRequest:
    board: Board
    entity_id: str


def parse(event: dict[str, Any], board: Board, entity_field: str, layout: Layout) -> ScoreRequest:
    if event["score"] is not True:
        raise InvalidRequest(f"score must be true: it asks for one {entity_field}'s value on the board")
    if entity_field not in event:
        raise InvalidRequest(f"score reads the value of one {entity_field}: name it")
    return ScoreRequest(board, entity_of(event, entity_field))


def answer(reads: ReadContext, request: ScoreRequest) -> dict[str, Any]:
    schema = reads.schema
    item = reads.aggregate(request.board.id, request.entity_id, with_order=True) or {}
    listed = schema.order in item and schema.count in item
    value = dynamodb_number(item[schema.count]["N"]) if listed else 0
    return {
        **request.board.named(),
        schema.entity: request.entity_id,
        COUNT_FIELD: reads.value(value),
        "onBoard": listed,
    }
