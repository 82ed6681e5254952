"""The among kind (friends): a set of entities ranked among themselves on a board, from their aggregates alone.

{"month": "2018-01", "among": ["song1", "song2", "song3"], "rankPolicy": "competition"}
    -> {"month": "2018-01", "items": [{"songID": "song3", "downloadCount": 12, "rank": 1}, ...]}

One BatchGetItem of the entities' aggregates on the board (their count and order, what the query role may read):
no index read, whatever the board's size. An entity the board does not list counts 0. The items are in the
board's order (value descending, equal values as the index's order breaks their tie: by id, or with the
tie-break first_reached by the older latest counted download first; values of 0 by id) and ranked within the
set under the rank policy (ordinal by default).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from boards import Board
from index_reads import Layout, Unavailable, dynamodb_number
from leaderboard_core.attributes import COUNT_FIELD
from leaderboard_core.index_layout import ORDER_SCALE, order_tiebreak
from rank_policies import ORDINAL, RankState, parse_policy
from read_context import ReadContext
from request_parsing import MAX_ENTITY_ID_BYTES, InvalidRequest, utf8_bytes

MAX_AMONG = 100
"""Entities one request may rank: the keys one BatchGetItem reads."""
BATCH_ATTEMPTS = 5
"""BatchGetItems one request makes at most: the first, and retries of the keys DynamoDB left unprocessed."""
RETRY_DELAY_S = 0.05
"""The first retry's wait; each next one waits twice as long (DynamoDB asks for an exponential backoff)."""


@dataclass(frozen=True)
class AmongRequest:
    board: Board
    entity_ids: tuple[str, ...]
    policy: str


def parse(event: dict[str, Any], board: Board, entity_field: str, layout: Layout) -> AmongRequest:
    """1 to MAX_AMONG distinct entities, each an id DynamoDB can hold; the rank policy (ordinal if none)."""
    among = event["among"]
    if not isinstance(among, list) or not 1 <= len(among) <= MAX_AMONG:
        raise InvalidRequest(f"among must be a list of 1 to {MAX_AMONG} {entity_field}s")
    for entity_id in among:
        encoded = utf8_bytes(entity_id) if isinstance(entity_id, str) else None
        if encoded is None or not 1 <= len(encoded) <= MAX_ENTITY_ID_BYTES:
            raise InvalidRequest(
                f"among holds {entity_field}s: non-empty strings of valid Unicode, at most {MAX_ENTITY_ID_BYTES}"
                " UTF-8 bytes"
            )
    if len(set(among)) != len(among):
        raise InvalidRequest(f"among names each {entity_field} once")
    return AmongRequest(board, tuple(among), parse_policy(event) or ORDINAL)


def answer(reads: ReadContext, request: AmongRequest) -> dict[str, Any]:
    """The entities in the board's order, each with its value (0 off the board) and its rank among them."""
    orders: dict[str, int] = {}
    values = read_values(reads, request.board.id, request.entity_ids, orders)

    def place(entity_id: str) -> tuple[int | Decimal, int, bytes]:
        """Value, then the order's tie-breaker as the index holds it (the deployment's tie-break), then the id."""
        value = values.get(entity_id, 0)
        tie = order_tiebreak(entity_id, reads.summed)
        if value and entity_id in orders:
            tie = orders[entity_id] - int(value * ORDER_SCALE)
        return -value, -tie, entity_id.encode()

    listed = sorted(request.entity_ids, key=place)
    state, items = RankState(), []
    for entity_id in listed:
        value = values.get(entity_id, 0)
        state = state.next(request.policy, value)
        items.append({reads.schema.entity: entity_id, COUNT_FIELD: reads.value(value), "rank": state.rank})
    return {**request.board.named(), "items": items}


def read_values(
    reads: ReadContext, board_id: str, entity_ids: tuple[str, ...], orders: dict[str, int] | None = None
) -> dict[str, int | Decimal]:
    """Each listed entity's value on the board, by BatchGetItem; an entity the board does not list is absent. Each
    one's index order goes into `orders` when given.

    The keys DynamoDB leaves unprocessed ("If DynamoDB returns any unprocessed items, you should retry the batch
    operation on those items ... we strongly recommend that you use an exponential backoff algorithm", API
    Reference, BatchGetItem) are asked again, BATCH_ATTEMPTS in all; still left, the answer is Unavailable.
    """
    schema = reads.schema
    names = {"#entity": schema.entity, "#count": schema.count, "#order": schema.order}
    keys: list[dict[str, Any]] = [
        {schema.entity: {"S": entity_id}, schema.sort_key: {"S": board_id}} for entity_id in entity_ids
    ]
    values: dict[str, int | Decimal] = {}
    for attempt in range(BATCH_ATTEMPTS):
        if attempt:
            if reads.out_of_time():
                break
            time.sleep(RETRY_DELAY_S * 2 ** (attempt - 1))
        answered = reads.client.batch_get_item(
            RequestItems={
                reads.table_name: {
                    "Keys": keys,
                    "ProjectionExpression": ", ".join(names),
                    "ExpressionAttributeNames": names,
                }
            }
        )
        for item in answered.get("Responses", {}).get(reads.table_name, []):
            if schema.order in item and schema.count in item:
                values[item[schema.entity]["S"]] = dynamodb_number(item[schema.count]["N"])
                if orders is not None:
                    orders[item[schema.entity]["S"]] = int(item[schema.order]["N"])
        keys = answered.get("UnprocessedKeys", {}).get(reads.table_name, {}).get("Keys", [])
        if not keys:
            return values
    raise Unavailable(f"DynamoDB left {len(keys)} of the entities unread after {BATCH_ATTEMPTS} BatchGetItems")
