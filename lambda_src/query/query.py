"""Query Lambda: a period's leaderboard from the sparse index, paginated and exact, and the rank of one entity.

The index's partition key is the period attribute: with one leaderboard shard a month's aggregates
sit under "<month>" (the guide's layout); with N they are spread over "<month>#0" .. "<month>#N-1".
Its sort key, LeaderboardOrder, sorts by count and then by entity id. A page reads the head of
every partition in parallel and merges them; the page token records, per partition, how far it
has been consumed, so every page size and every N give the same listing as one sorted list.

Requests
  {"month": "2018-01", "limit": 10, "next_token": "..."}
      -> {"month": "2018-01", "items": [{"songID": "song3", "downloadCount": 12}, ...], "next_token": "..." | null}
  {"month": "2018-01", "songID": "song3"}
      -> {"month": "2018-01", "songID": "song3", "downloadCount": 12, "rank": 4}
A bad request gets {"error": {"code": "InvalidRequest", "message": "..."}}, never a stack trace.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import json
import os
import re
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config

logger = Logger()

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_ENTITY_ID_BYTES = 1024
RANK_PAGE_BUDGET = 200
"""Query pages (up to 1 MB each) a rank may read before it answers with a lower bound instead."""
RANK_TIME_MARGIN_MS = 2000
"""Time before the function's timeout at which a rank stops counting and answers with its lower bound."""
_MONTH = re.compile(r"^[0-9]{4}-(0[1-9]|1[0-2])$")
_ORDER = re.compile(r"^[0-9]{1,38}$")
_MAX_TOKEN_LENGTH = 64 * 1024
TOKEN_VERSION = 1


class InvalidRequest(Exception):
    pass


@dataclass(frozen=True)
class IndexSchema:
    index_name: str = "MonthDownloadsIndex"
    entity: str = "songID"
    sort_key: str = "SK"
    period: str = "Month"
    count: str = "DownloadCount"
    order: str = "LeaderboardOrder"


@dataclass(frozen=True)
class Layout:
    """How a period's aggregates are spread over index partitions; during a change, the previous spread too."""

    shards: int = 1
    previous_shards: int | None = None

    def partitions(self, period: str) -> list[str]:
        names = _partitions(period, self.shards)
        if self.previous_shards is not None:
            names += [name for name in _partitions(period, self.previous_shards) if name not in names]
        return names


def _partitions(period: str, shards: int) -> list[str]:
    return [period] if shards == 1 else [f"{period}#{shard}" for shard in range(shards)]


@dataclass(frozen=True, order=True)
class Entry:
    """One aggregate as the index lists it; sorts as the leaderboard does: higher order first, then by id."""

    sort_key: tuple[int, bytes]
    entity_id: str
    count: int

    @classmethod
    def of(cls, order: int, entity_id: str, count: int) -> Entry:
        return cls((-order, entity_id.encode()), entity_id, count)

    @property
    def order(self) -> int:
        return -self.sort_key[0]


@dataclass(frozen=True)
class Position:
    """Everything of a partition above `order`, and at `order` up to `entity_id` (by bytes), is consumed."""

    order: int
    entity_id: str

    def precedes(self, entry: Entry) -> bool:
        return entry.sort_key > (-self.order, self.entity_id.encode())


START: Position | None = None
PartitionReader = Callable[[str, Position | None, int], tuple[list[Entry], bool]]
"""(partition, after, wanted) -> (at least `wanted` entries after `after`, sorted, whole order groups; exhausted?)."""


@dataclass(frozen=True)
class PageRequest:
    month: str
    limit: int
    cursors: dict[str, Position | None]
    """The partitions still to read and where each stands; an exhausted partition is absent."""


@dataclass(frozen=True)
class RankRequest:
    month: str
    entity_id: str


def parse_request(event: Any, schema: IndexSchema, layout: Layout) -> PageRequest | RankRequest:
    if not isinstance(event, dict):
        raise InvalidRequest("the request must be a JSON object")
    entity_field = schema.entity
    unknown = set(event) - {"month", "limit", "next_token", entity_field}
    if unknown:
        raise InvalidRequest(f"unknown fields: {', '.join(sorted(unknown))}")
    month = event.get("month")
    if not isinstance(month, str) or not _MONTH.match(month):
        raise InvalidRequest("month is required, formatted YYYY-MM")
    if entity_field in event:
        if "limit" in event or "next_token" in event:
            raise InvalidRequest(f"a rank request takes month and {entity_field} only")
        entity_id = event[entity_field]
        if not isinstance(entity_id, str) or not entity_id or len(entity_id.encode()) > MAX_ENTITY_ID_BYTES:
            raise InvalidRequest(f"{entity_field} must be a non-empty string of at most {MAX_ENTITY_ID_BYTES} bytes")
        return RankRequest(month, entity_id)
    limit = event.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be an integer from 1 to {MAX_LIMIT}")
    token = event.get("next_token")
    partitions = layout.partitions(month)
    cursors = {partition: START for partition in partitions} if token is None else decode_token(token, month, layout)
    return PageRequest(month, limit, cursors)


def encode_token(month: str, layout: Layout, cursors: Mapping[str, Position | None]) -> str:
    payload = {
        "v": TOKEN_VERSION,
        "m": month,
        "l": [layout.shards, layout.previous_shards],
        "c": {p: [] if c is None else [str(c.order), c.entity_id] for p, c in sorted(cursors.items())},
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_token(token: Any, month: str, layout: Layout) -> dict[str, Position | None]:
    """Accept only a token of the exact shape this function issues, for this month and this partition layout.

    A token holds positions and nothing else, so a well-formed but invented one can at most
    start the listing at another place of the same month.
    """
    forged = InvalidRequest("next_token is not a token issued by this function")
    if not isinstance(token, str) or not token or len(token) > _MAX_TOKEN_LENGTH:
        raise forged
    try:
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise forged from None
    if not isinstance(payload, dict) or set(payload) != {"v", "m", "l", "c"} or payload["v"] != TOKEN_VERSION:
        raise forged
    if payload["m"] != month:
        raise InvalidRequest("next_token belongs to another month")
    if payload["l"] != [layout.shards, layout.previous_shards]:
        raise InvalidRequest("next_token was issued for another leaderboard layout; start the listing again")
    cursors = payload["c"]
    if not isinstance(cursors, dict) or not cursors or not set(cursors) <= set(layout.partitions(month)):
        raise forged
    result: dict[str, Position | None] = {}
    for partition, cursor in cursors.items():
        if cursor == []:
            result[partition] = START
            continue
        if (
            not isinstance(cursor, list)
            or len(cursor) != 2
            or not all(isinstance(part, str) for part in cursor)
            or not _ORDER.match(cursor[0])
            or not cursor[1]
            or len(cursor[1].encode()) > MAX_ENTITY_ID_BYTES
        ):
            raise forged
        result[partition] = Position(int(cursor[0]), cursor[1])
    return result


def merge_page(
    request: PageRequest, read: PartitionReader, map_partitions: Callable[..., Any] = map
) -> tuple[list[Entry], dict[str, Position | None]]:
    """The next `limit` entries of the union of the partitions, and each partition's cursor after them.

    Each partition contributes its next `limit` entries at least: the page's entries are among
    them, whatever the spread. A partition whose every entry is consumed and which has no more
    leaves the cursors; an empty result means the listing is complete.
    """
    partitions = sorted(request.cursors)
    reads = list(map_partitions(lambda p: read(p, request.cursors[p], request.limit), partitions))
    heads = {partition: entries for partition, (entries, _) in zip(partitions, reads, strict=True)}
    exhausted = {partition for partition, (_, done) in zip(partitions, reads, strict=True) if done}
    tagged = heapq.merge(*([(entry, partition) for entry in entries] for partition, entries in heads.items()))
    page: list[Entry] = []
    seen: set[str] = set()
    cursors = dict(request.cursors)
    consumed = dict.fromkeys(partitions, 0)
    for entry, partition in tagged:
        if len(page) == request.limit:
            break
        consumed[partition] += 1
        cursors[partition] = Position(entry.order, entry.entity_id)
        if entry.entity_id in seen:
            continue  # moving between layouts, an aggregate can show in two partitions for a moment
        seen.add(entry.entity_id)
        page.append(entry)
    for partition in partitions:
        if partition in exhausted and consumed[partition] == len(heads[partition]):
            del cursors[partition]
    return page, cursors


def read_partition(client: Any, table_name: str, schema: IndexSchema) -> PartitionReader:
    """Read a partition from its cursor on, highest order first, always ending on a whole order group.

    Entries with equal orders (equal counts whose ids share their first bytes) come back from
    DynamoDB in no documented order; ending on a whole group lets them be sorted by full id.
    """

    def read(partition: str, after: Position | None, wanted: int) -> tuple[list[Entry], bool]:
        names = {"#period": schema.period}
        values: dict[str, Any] = {":partition": {"S": partition}}
        condition = "#period = :partition"
        if after is not None:
            condition += " AND #order <= :after"
            names["#order"] = schema.order
            values[":after"] = {"N": str(after.order)}
        entries: list[Entry] = []
        start_key = None
        while True:
            parameters: dict[str, Any] = {
                "TableName": table_name,
                "IndexName": schema.index_name,
                "KeyConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ScanIndexForward": False,
                "Limit": wanted + 1 - len(entries) if len(entries) <= wanted else 1,
            }
            if start_key is not None:
                parameters["ExclusiveStartKey"] = start_key
            page = client.query(**parameters)
            for item in page.get("Items", []):
                entry = _entry(item, schema)
                if after is None or after.precedes(entry):
                    entries.append(entry)
            start_key = page.get("LastEvaluatedKey")
            if start_key is None:
                return sorted(entries), True
            if len(entries) > wanted and entries[-1].order != entries[-2].order:
                return sorted(entries[:-1]), False

    return read


def _entry(item: dict[str, Any], schema: IndexSchema) -> Entry:
    return Entry.of(int(item[schema.order]["N"]), item[schema.entity]["S"], int(item[schema.count]["N"]))


def rank_of(
    client: Any,
    table_name: str,
    schema: IndexSchema,
    layout: Layout,
    request: RankRequest,
    map_partitions: Callable[..., Any] = map,
    out_of_time: Callable[[], bool] = lambda: False,
) -> dict[str, Any]:
    """1 + the aggregates listed before this one: higher orders, and equal orders with smaller ids.

    Counting stops at the page budget or when `out_of_time()`, whichever comes first: the answer
    is then a lower bound (`rankAtLeast`), never a timeout.
    """
    item = client.get_item(
        TableName=table_name,
        Key={schema.entity: {"S": request.entity_id}, schema.sort_key: {"S": request.month}},
        ProjectionExpression="#count, #order",
        ExpressionAttributeNames={"#count": schema.count, "#order": schema.order},
    ).get("Item")
    response: dict[str, Any] = {"month": request.month, schema.entity: request.entity_id}
    if not item or schema.order not in item:
        return {**response, "downloadCount": 0, "rank": None}
    order = int(item[schema.order]["N"])
    me = Entry.of(order, request.entity_id, int(item[schema.count]["N"]))
    budget = max(1, RANK_PAGE_BUDGET // len(layout.partitions(request.month)))

    def before(partition: str) -> tuple[int, bool]:
        return _count_before(client, table_name, schema, partition, me, budget, out_of_time)

    counted = list(map_partitions(before, layout.partitions(request.month)))
    ahead = sum(count for count, _ in counted)
    if all(complete for _, complete in counted):
        return {**response, "downloadCount": me.count, "rank": ahead + 1}
    return {**response, "downloadCount": me.count, "rank": None, "rankAtLeast": ahead + 1}


def _count_before(
    client: Any,
    table_name: str,
    schema: IndexSchema,
    partition: str,
    me: Entry,
    budget: int,
    out_of_time: Callable[[], bool],
) -> tuple[int, bool]:
    """How many of a partition's aggregates list before `me`, and whether the count is complete within budget."""
    names = {"#period": schema.period, "#order": schema.order}
    base = {"TableName": table_name, "IndexName": schema.index_name, "ExpressionAttributeNames": names}
    values = {":partition": {"S": partition}, ":order": {"N": str(me.order)}}
    count, pages, start_key = 0, 0, None
    while pages < budget and not (pages and out_of_time()):
        parameters = {
            **base,
            "KeyConditionExpression": "#period = :partition AND #order > :order",
            "ExpressionAttributeValues": values,
            "Select": "COUNT",
        }
        if start_key is not None:
            parameters["ExclusiveStartKey"] = start_key
        page = client.query(**parameters)
        count += page["Count"]
        pages += 1
        start_key = page.get("LastEvaluatedKey")
        if start_key is None:
            break
    else:
        return count, False
    ties, start_key = 0, None
    while True:
        parameters = {
            **base,
            "KeyConditionExpression": "#period = :partition AND #order = :order",
            "ExpressionAttributeValues": values,
            "ProjectionExpression": "#entity",
            "ExpressionAttributeNames": {**names, "#entity": schema.entity},
        }
        if start_key is not None:
            parameters["ExclusiveStartKey"] = start_key
        page = client.query(**parameters)
        ties += sum(1 for item in page["Items"] if item[schema.entity]["S"].encode() < me.entity_id.encode())
        start_key = page.get("LastEvaluatedKey")
        if start_key is None:
            return count + ties, True


def leaderboard_page(
    client: Any,
    table_name: str,
    schema: IndexSchema,
    layout: Layout,
    request: PageRequest,
    map_partitions: Callable[..., Any] = map,
) -> dict[str, Any]:
    entries, cursors = merge_page(request, read_partition(client, table_name, schema), map_partitions)
    return {
        "month": request.month,
        "items": [{schema.entity: entry.entity_id, "downloadCount": entry.count} for entry in entries],
        "next_token": encode_token(request.month, layout, cursors) if cursors else None,
    }


def error_response(message: str) -> dict[str, Any]:
    return {"error": {"code": "InvalidRequest", "message": message}}


def schema_from_environment(environ: Mapping[str, str]) -> IndexSchema:
    """The module sets these from its attribute-name variables; the defaults are the guide's names."""
    return IndexSchema(
        index_name=environ.get("INDEX_NAME", "MonthDownloadsIndex"),
        entity=environ.get("ENTITY_ATTRIBUTE", "songID"),
        sort_key=environ.get("SORT_KEY_ATTRIBUTE", "SK"),
        period=environ.get("PERIOD_ATTRIBUTE", "Month"),
        count=environ.get("COUNT_ATTRIBUTE", "DownloadCount"),
        order=environ.get("ORDER_ATTRIBUTE", "LeaderboardOrder"),
    )


def layout_from_environment(environ: Mapping[str, str]) -> Layout:
    previous = environ.get("LEADERBOARD_SHARDS_PREVIOUS") or None
    return Layout(int(environ.get("LEADERBOARD_SHARDS", "1")), int(previous) if previous else None)


SCHEMA = schema_from_environment(os.environ)
LAYOUT = layout_from_environment(os.environ)
TABLE_NAME = os.environ.get("TABLE_NAME", "")
_dynamodb = boto3.client("dynamodb", config=Config(retries={"mode": "standard", "max_attempts": 3}))
_READERS = ThreadPoolExecutor(max_workers=min(32, len(LAYOUT.partitions("0000-01"))), thread_name_prefix="partition")


@logger.inject_lambda_context
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    try:
        request = parse_request(event, SCHEMA, LAYOUT)
    except InvalidRequest as error:
        logger.info("invalid request", extra={"reason": str(error)})
        return error_response(str(error))
    if isinstance(request, RankRequest):
        return rank_of(
            _dynamodb,
            TABLE_NAME,
            SCHEMA,
            LAYOUT,
            request,
            _READERS.map,
            out_of_time=lambda: context.get_remaining_time_in_millis() < RANK_TIME_MARGIN_MS,
        )
    return leaderboard_page(_dynamodb, TABLE_NAME, SCHEMA, LAYOUT, request, _READERS.map)
