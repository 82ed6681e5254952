"""Query Lambda: any board's leaderboard from the sparse index, exact and paginated; ranks, neighbours, rolling windows.

A board is one period bucket (hour, day, ISO week, month, year, all), overall or of one category
(boards.py). The index's partition key is the period attribute: with one leaderboard shard a
board's aggregates sit under its id ("2018-01", "2018-01-15@rock"; the guide's layout); with N
they are spread over "<board>#0" .. "<board>#N-1". Its sort key, LeaderboardOrder, sorts by value
and then by entity id. A page reads the head of every partition in parallel and merges them; the
page token records, per partition, how far it has been consumed, so every page size and every N
give the same listing as one sorted list.

Requests (docs/query-contract.md)
  {"month": "2018-01", "limit": 10, "next_token": "..."}
      -> {"month": "2018-01", "items": [{"songID": "song3", "downloadCount": 12}, ...], "next_token": "..." | null}
  {"month": "2018-01", "songID": "song3"}
      -> {"month": "2018-01", "songID": "song3", "downloadCount": 12, "rank": 4}
  {"period": "day", "key": "2018-01-15", "category": "rock", ...}: the same for any maintained board
  {..., "songID": "song3", "around": 2}: the rank, and the song with two entries above and below
  {"period": "day", "key": "2018-01-15", "last": 7, "limit": 10}: the exact top 10 of seven days (rolling.py)
A bad request gets {"error": {"code": "InvalidRequest", "message": "..."}}; a leaderboard that cannot be
read (DynamoDB failed, or the read outgrew its budget or the function's time) gets
{"error": {"code": "Unavailable", "message": "..."}}, logged at error level. Never a stack trace.
"""

from __future__ import annotations

import base64
import functools
import heapq
import os
import re
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from boards import Board, Boards, boards_from_environment
from leaderboard_core.attributes import COUNT_FIELD, NAME_VARIABLES, AttributeNames
from leaderboard_core.buckets import (
    ALL_TIME,
    KEY_FORMATS,
    MAX_SORT_KEY_BYTES,
    PERIODS,
    board_id,
    bucket_key,
    is_bucket_key,
    window_keys,
)
from leaderboard_core.index_layout import leaderboard_partition, leaderboard_partitions
from rolling import Total, top_of_window

logger = Logger()

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_ENTITY_ID_BYTES = 2048
"""DynamoDB's limit for a partition key value (Developer Guide, Constraints): every id it stores can be asked for."""
READ_BUDGET_PAGES = 200
"""Query pages (up to 1 MB each) one request may read over all its partitions, shared out among them."""
MIN_PARTITION_PAGES = 4
"""Pages each partition may read whatever the share: enough for a page whose ties fit in 1 MB, and for a rank."""
DEADLINE_MARGIN_MS = 2000
"""Time before the timeout after which no Query starts: a rank answers its lower bound, a page Unavailable."""
MAX_READER_THREADS = 32
MAX_AROUND = 50
"""Entries above and below a song that a rank request may ask for."""
MAX_LAST = 48
"""Buckets a rolling window may sum: two days of hours, seven weeks of days; longer windows take a longer period."""
DEFAULT_WINDOW_LIMIT = 10
MAX_WINDOW_LIMIT = 100
WINDOW_QUERY_BUDGET = 1000
"""Query pages one rolling window may read over all its buckets' partitions."""
WINDOW_GET_ITEM_BUDGET = 2000
"""GetItems (point reads of candidates) one rolling window may make."""
MAX_WINDOW_PARTITIONS = WINDOW_QUERY_BUDGET // 2
"""Buckets x leaderboard partitions a window may span: the first reads take one Query per partition."""
_TOKEN = re.compile(r"\A[A-Za-z0-9_-]+\Z")
_CURSOR = re.compile(r"\A(?P<partition>[^=|]+)=(?:(?P<order>-?[0-9]{1,38}):(?P<entity>[A-Za-z0-9_-]+))?\Z")
_ORDER_DIGITS = 38
"""Digits of the longest order DynamoDB holds; a negative sum's order has a sign too."""
_INTEGER = re.compile(r"\A-?[0-9]+\Z")
TOKEN_VERSION = 2
NO_PREVIOUS_LAYOUT = "-"


class InvalidRequest(Exception):
    pass


class Unavailable(Exception):
    """The leaderboard could not be read within the request's budget or time; the message says which."""


@dataclass(frozen=True)
class IndexSchema(AttributeNames):
    index_name: str = "MonthDownloadsIndex"


@dataclass(frozen=True)
class Layout:
    """How a period's aggregates are spread over index partitions; during a change, the previous spread too."""

    shards: int = 1
    previous_shards: int | None = None

    def partitions(self, period: str) -> list[str]:
        names = leaderboard_partitions(period, self.shards)
        if self.previous_shards is not None:
            names += [name for name in leaderboard_partitions(period, self.previous_shards) if name not in names]
        return names

    def entity_partitions(self, period: str, entity_id: str) -> list[str]:
        """The partitions of a board that can hold this entity: its shard's, in each layout read."""
        names = [leaderboard_partition(period, entity_id, self.shards)]
        if self.previous_shards is not None:
            previous = leaderboard_partition(period, entity_id, self.previous_shards)
            names += [previous] if previous not in names else []
        return names


@dataclass(frozen=True, order=True)
class Entry:
    """One aggregate as the index lists it; sorts as the leaderboard does: higher order first, then by id."""

    sort_key: tuple[int, bytes]
    entity_id: str
    count: int | Decimal
    """The count, or the exact sum when the module sums an attribute."""

    @classmethod
    def of(cls, order: int, entity_id: str, count: int | Decimal) -> Entry:
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
    board: Board
    limit: int
    cursors: dict[str, Position | None]
    """The partitions still to read and where each stands; an exhausted partition is absent."""


@dataclass(frozen=True)
class RankRequest:
    board: Board
    entity_id: str
    around: int | None = None
    """Also list this many entries above and below the entity."""


@dataclass(frozen=True)
class WindowRequest:
    board: Board
    """The newest bucket of the window."""
    last: int
    limit: int

    def boards(self) -> list[Board]:
        return [self.board.at(key) for key in window_keys(self.board.period, self.board.key, self.last)]


Request = PageRequest | RankRequest | WindowRequest
FIELDS = ("month", "period", "key", "category", "limit", "next_token", "around", "last")


def parse_request(
    event: Any,
    schema: IndexSchema,
    layout: Layout,
    boards: Boards = Boards(),  # noqa: B008 - frozen: the default months-only deployment
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Request:
    """Whatever JSON the caller sent: a request, or InvalidRequest saying what is wrong with it."""
    if not isinstance(event, dict):
        raise InvalidRequest("the request must be a JSON object")
    entity_field = schema.entity
    unknown = set(event) - {*FIELDS, entity_field}
    if unknown:
        raise InvalidRequest(f"unknown fields: {', '.join(sorted(_shown(str(name)) for name in unknown))}")
    board = parse_board(event, boards, now)
    if "last" in event:
        return _window_request(event, board, layout, entity_field)
    if entity_field in event:
        if "limit" in event or "next_token" in event:
            raise InvalidRequest(f"a rank request takes month (or period and key), {entity_field} and around only")
        entity_id = event[entity_field]
        encoded = _utf8(entity_id) if isinstance(entity_id, str) else None
        if encoded is None or not 1 <= len(encoded) <= MAX_ENTITY_ID_BYTES:
            raise InvalidRequest(
                f"{entity_field} must be a non-empty string of valid Unicode, at most {MAX_ENTITY_ID_BYTES} UTF-8 bytes"
            )
        around = event.get("around")
        wrong = isinstance(around, bool) or not isinstance(around, int) or not 0 <= around <= MAX_AROUND
        if "around" in event and wrong:
            raise InvalidRequest(f"around must be an integer from 0 to {MAX_AROUND}")
        return RankRequest(board, entity_id, around)
    if "around" in event:
        raise InvalidRequest(f"around lists the neighbours of one {entity_field}: name it")
    limit = event.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be an integer from 1 to {MAX_LIMIT}")
    token = event.get("next_token")
    partitions = layout.partitions(board.id)
    cursors = {partition: START for partition in partitions} if token is None else decode_token(token, board.id, layout)
    return PageRequest(board, limit, cursors)


def parse_board(event: dict[str, Any], boards: Boards, now: Callable[[], datetime]) -> Board:
    """The board a request names: {"month": ...}, or {"period": ..., "key": ...} (key default: the current bucket)."""
    if "month" in event:
        if "period" in event or "key" in event:
            raise InvalidRequest("name a board by month, or by period and key, not both")
        month = event["month"]
        if not isinstance(month, str) or not is_bucket_key("month", month):
            raise InvalidRequest("month is required, formatted YYYY-MM")
        period, key, month_form = "month", month, True
    elif "period" in event:
        period = event["period"]
        if not isinstance(period, str) or period not in PERIODS:
            raise InvalidRequest(f"period must be one of {', '.join(PERIODS)}")
        month_form = False
        if period == ALL_TIME:
            if "key" in event:
                raise InvalidRequest("period all has no key")
            key = ALL_TIME
        elif "key" in event:
            key = event["key"]
            if not isinstance(key, str) or not is_bucket_key(period, key):
                raise InvalidRequest(f"key of a {period} is formatted {KEY_FORMATS[period]} (UTC)")
        else:
            key = bucket_key(now(), period)
    else:
        raise InvalidRequest("month is required, formatted YYYY-MM; or period (hour, day, week, month, year, all)")
    if period not in boards.periods:
        raise InvalidRequest(
            f"this deployment keeps no {period} leaderboards (leaderboard_periods: {', '.join(boards.periods)})"
        )
    category = None
    if "category" in event:
        if not boards.categories:
            raise InvalidRequest("this deployment keeps no category leaderboards (category_attribute_name is not set)")
        category = event["category"]
        if not isinstance(category, str) or not category or _utf8(category) is None:
            raise InvalidRequest("category must be a non-empty string of valid Unicode")
        if len(board_id(key, category).encode()) > MAX_SORT_KEY_BYTES:
            raise InvalidRequest(
                f"category is too long: its board id would pass DynamoDB's {MAX_SORT_KEY_BYTES} bytes for a sort key"
            )
    return Board(period, key, category, month_form)


def _window_request(event: dict[str, Any], board: Board, layout: Layout, entity_field: str) -> WindowRequest:
    last = event["last"]
    if isinstance(last, bool) or not isinstance(last, int) or not 2 <= last <= MAX_LAST:
        raise InvalidRequest(f"last must be an integer from 2 to {MAX_LAST}")
    if board.period == ALL_TIME:
        raise InvalidRequest("period all has no buckets to sum: last takes hour, day, week, month or year")
    extra = sorted({"next_token", "around", entity_field} & set(event))
    if extra:
        raise InvalidRequest(f"a rolling window takes limit only, not {', '.join(extra)}")
    limit = event.get("limit", DEFAULT_WINDOW_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_WINDOW_LIMIT:
        raise InvalidRequest(f"limit of a rolling window must be an integer from 1 to {MAX_WINDOW_LIMIT}")
    request = WindowRequest(board, last, limit)
    spanned = len(request.boards()) * len(layout.partitions(board.id))
    if spanned > MAX_WINDOW_PARTITIONS:
        raise InvalidRequest(
            f"a window of {last} buckets spans {spanned} leaderboard partitions, more than the {MAX_WINDOW_PARTITIONS}"
            " its read budget allows: use fewer buckets of a longer period"
        )
    return request


def _utf8(text: str) -> bytes | None:
    """The text's UTF-8 bytes; None for text DynamoDB cannot hold (a lone surrogate, which JSON's \\u escapes allow)."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return None


def _shown(text: str) -> str:
    """A caller's string as an error message may quote it: escaped, and short."""
    return ascii(text[:40]) + ("..." if len(text) > 40 else "")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _b64_length(size: int) -> int:
    return -(-size * 4 // 3)


def encode_token(board: str, layout: Layout, cursors: Mapping[str, Position | None]) -> str:
    """Flat text, base64url: version, board, layout, then per partition `partition=` or `partition=order:base64url(id)`.

    Ids travel as base64url of their UTF-8 bytes, so any id DynamoDB holds fits the same alphabet and
    a bounded length, and reading a token back needs no recursive parser.
    """
    fields = [str(TOKEN_VERSION), board, str(layout.shards), _layout_field(layout.previous_shards)]
    for partition, cursor in sorted(cursors.items()):
        position = "" if cursor is None else f"{cursor.order}:{_b64(cursor.entity_id.encode())}"
        fields.append(f"{partition}={position}")
    return _b64("|".join(fields).encode())


def _layout_field(previous_shards: int | None) -> str:
    return NO_PREVIOUS_LAYOUT if previous_shards is None else str(previous_shards)


def max_token_length(layout: Layout, board: str) -> int:
    """The longest token encode_token can issue for this board and layout: every partition at a 2,048-byte id."""
    partitions = layout.partitions(board)
    header = len(f"{TOKEN_VERSION}|{board}|{layout.shards}|{_layout_field(layout.previous_shards)}")
    cursor = len("|=:-") + _ORDER_DIGITS + _b64_length(MAX_ENTITY_ID_BYTES)
    return _b64_length(header + sum(len(partition) + cursor for partition in partitions))


def decode_token(token: Any, board: str, layout: Layout) -> dict[str, Position | None]:
    """Accept only a token of the exact shape this function issues, for this board and this partition layout.

    A token holds positions and nothing else, so a well-formed but invented one can at most
    start the listing at another place of the same board. Parsed by splitting and anchored
    patterns, in time and memory linear in its bounded length.
    """
    forged = InvalidRequest("next_token is not a token issued by this function")
    if not isinstance(token, str) or len(token) > max_token_length(layout, board) or not _TOKEN.match(token):
        raise forged
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise forged from None
    parts = text.split("|")
    if len(parts) < 5 or parts[0] != str(TOKEN_VERSION):
        raise forged
    _, token_board, shards, previous, *fields = parts
    if token_board != board:
        kind = "month" if is_bucket_key("month", board) else "leaderboard"
        raise InvalidRequest(f"next_token belongs to another {kind}")
    if [shards, previous] != [str(layout.shards), _layout_field(layout.previous_shards)]:
        raise InvalidRequest("next_token was issued for another leaderboard layout; start the listing again")
    partitions = set(layout.partitions(board))
    result: dict[str, Position | None] = {}
    for field in fields:
        match = _CURSOR.match(field)
        if match is None or match["partition"] not in partitions or match["partition"] in result:
            raise forged
        if match["order"] is None:
            result[match["partition"]] = START
            continue
        entity_id = _entity_of(match["entity"])
        if entity_id is None:
            raise forged
        result[match["partition"]] = Position(int(match["order"]), entity_id)
    return result


def _entity_of(encoded: str) -> str | None:
    """The id a cursor names, if it is one DynamoDB could hold: valid UTF-8 of 1 to MAX_ENTITY_ID_BYTES bytes."""
    if len(encoded) > _b64_length(MAX_ENTITY_ID_BYTES):
        return None
    try:
        raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        return raw.decode() if 1 <= len(raw) <= MAX_ENTITY_ID_BYTES else None
    except ValueError:
        return None


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


def partition_budget(partitions: int) -> int:
    """Query pages a partition may read in one request: its share of READ_BUDGET_PAGES, at least MIN_PARTITION_PAGES."""
    return max(MIN_PARTITION_PAGES, READ_BUDGET_PAGES // partitions)


Bound = tuple[str, int] | None
"""A key condition on the order: ("<=", o), ("<", o), (">", o) or ("=", o); None for the whole partition."""


class PartitionQueries:
    """The Query pages of one partition for one request, counted against its budget and the function's clock."""

    def __init__(
        self,
        client: Any,
        table_name: str,
        schema: IndexSchema,
        partition: str,
        budget: int,
        out_of_time: Callable[[], bool],
    ) -> None:
        self._client, self._table, self._schema, self._partition = client, table_name, schema, partition
        self._budget, self._out_of_time, self.pages = budget, out_of_time, 0

    def may_read(self) -> bool:
        """True while the budget lasts and, after the first page, while there is time for another."""
        return self.pages < self._budget and not (self.pages and self._out_of_time())

    def page(self, bound: Bound, **extra: Any) -> dict[str, Any]:
        """One Query page of the partition, highest order first; Unavailable past the budget or the clock."""
        if not self.may_read():
            raise Unavailable(
                f"reading leaderboard partition {self._partition} needed more than {self.pages} Query pages"
                " within the request's budget and the function's time (a very large group of tied songs?)"
            )
        names = {"#period": self._schema.period}
        values: dict[str, Any] = {":partition": {"S": self._partition}}
        condition = "#period = :partition"
        if bound is not None:
            condition += f" AND #order {bound[0]} :order"
            names["#order"] = self._schema.order
            values[":order"] = {"N": str(bound[1])}
        parameters = {
            "TableName": self._table,
            "IndexName": self._schema.index_name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": {**names, **extra.pop("ExpressionAttributeNames", {})},
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
            **extra,
        }
        self.pages += 1
        return dict(self._client.query(**parameters))

    def entries(self, bound: Bound, limit: int, ascending: bool = False) -> tuple[list[Entry], bool]:
        """Up to `limit` entries within the bound, in DynamoDB's order, and whether more may follow.

        Highest order first, or lowest first when `ascending` ("If ScanIndexForward is true, DynamoDB
        returns the results in the order in which they are stored (by sort key value)", API
        Reference, Query). An empty page with a LastEvaluatedKey (DynamoDB documents it for
        filtered reads; none is filtered here) is read past rather than taken for the end.
        """
        start_key: dict[str, Any] | None = None
        while True:
            extra: dict[str, Any] = {"Limit": limit, "ScanIndexForward": ascending}
            if start_key is not None:
                extra["ExclusiveStartKey"] = start_key
            page = self.page(bound, **extra)
            got = [_entry(item, self._schema) for item in page.get("Items", [])]
            start_key = page.get("LastEvaluatedKey")
            if got or start_key is None:
                return got, start_key is not None

    def group(self, order: int) -> list[Entry]:
        """Every entry of the partition with exactly this order: one Query, paged by DynamoDB's 1 MB only."""
        entries: list[Entry] = []
        start_key: dict[str, Any] | None = None
        while True:
            extra: dict[str, Any] = {} if start_key is None else {"ExclusiveStartKey": start_key}
            page = self.page(("=", order), **extra)
            entries += [_entry(item, self._schema) for item in page.get("Items", [])]
            start_key = page.get("LastEvaluatedKey")
            if start_key is None:
                return entries


def read_partition(
    client: Any,
    table_name: str,
    schema: IndexSchema,
    budget: int = MIN_PARTITION_PAGES,
    out_of_time: Callable[[], bool] = lambda: False,
) -> PartitionReader:
    """Read a partition from its cursor on, highest order first, always ending on a whole order group.

    Entries with equal orders (equal counts whose ids share their first 10 bytes) come back from
    DynamoDB in no documented order; ending on a whole group lets them be sorted by full id. A
    group cut by the page's Limit is read whole with one Query on its order (not one per song), so
    a page costs at most two limited Queries and two group reads per partition while groups fit
    in DynamoDB's 1 MB pages; past `budget` pages or the clock it is Unavailable.
    """

    def read(partition: str, after: Position | None, wanted: int) -> tuple[list[Entry], bool]:
        queries = PartitionQueries(client, table_name, schema, partition, budget, out_of_time)
        entries: list[Entry] = []
        bound: Bound = None if after is None else ("<=", after.order)
        while True:
            got, more = queries.entries(bound, wanted - len(entries) + 1)
            if not more:
                entries += [entry for entry in got if after is None or after.precedes(entry)]
                return sorted(entries), True
            last = got[-1].order
            if len(got) >= 2 and got[-2].order != last:
                # got[-1] may begin a group that continues: leave it to the next read, which starts at its order
                whole, bound = got[:-1], ("<=", last)
            else:
                whole, bound = [entry for entry in got if entry.order != last] + queries.group(last), ("<", last)
            entries += [entry for entry in whole if after is None or after.precedes(entry)]
            if len(entries) >= wanted:
                return sorted(entries), False

    return read


def read_above(
    client: Any,
    table_name: str,
    schema: IndexSchema,
    budget: int = MIN_PARTITION_PAGES,
    out_of_time: Callable[[], bool] = lambda: False,
) -> Callable[[str, Entry, int], list[Entry]]:
    """The `wanted` entries of a partition listed nearest before `me`, in listing order (fewer if there are not).

    The mirror of read_partition: read upwards from me's order (ascending), whole order groups
    only, so that every entry between me and the highest order read is known.
    """

    def read(partition: str, me: Entry, wanted: int) -> list[Entry]:
        queries = PartitionQueries(client, table_name, schema, partition, budget, out_of_time)
        entries: list[Entry] = []
        bound: Bound = (">=", me.order)
        while True:
            got, more = queries.entries(bound, wanted - len(entries) + 1, ascending=True)
            if not more:
                entries += [entry for entry in got if entry < me]
                return sorted(entries)[-wanted:]
            last = got[-1].order
            if len(got) >= 2 and got[-2].order != last:
                whole, bound = got[:-1], (">=", last)
            else:
                whole, bound = [entry for entry in got if entry.order != last] + queries.group(last), (">", last)
            entries += [entry for entry in whole if entry < me]
            if len(entries) >= wanted:
                return sorted(entries)[-wanted:]

    return read


def _number(text: str) -> int | Decimal:
    """A DynamoDB number: an int when it is whole (counts), else the exact Decimal (sums)."""
    return int(text) if _INTEGER.match(text) else Decimal(text)


def value_of(value: int | Decimal, summed: bool) -> int | str:
    """A count is a JSON integer; a sum is a string holding the exact decimal (a JSON float would not be exact)."""
    if not summed:
        return int(value)
    number = Decimal(value)
    return str(int(number)) if number == number.to_integral_value() else format(number.normalize(), "f")


def _entry(item: dict[str, Any], schema: IndexSchema) -> Entry:
    return Entry.of(int(item[schema.order]["N"]), item[schema.entity]["S"], _number(item[schema.count]["N"]))


def rank_of(
    client: Any,
    table_name: str,
    schema: IndexSchema,
    layout: Layout,
    request: RankRequest,
    map_partitions: Callable[..., Any] = map,
    out_of_time: Callable[[], bool] = lambda: False,
    summed: bool = False,
) -> dict[str, Any]:
    """1 + the aggregates listed before this one: higher orders, and equal orders with smaller ids.

    Counting stops at the page budget or when `out_of_time()`, whichever comes first, in the count
    of higher orders and in the tie group alike: the answer is then a lower bound (`rankAtLeast`),
    never a timeout. With `around`, the answer also lists the entity's neighbours (`items`).
    """
    board = request.board.id
    item = client.get_item(
        TableName=table_name,
        Key={schema.entity: {"S": request.entity_id}, schema.sort_key: {"S": board}},
        ProjectionExpression="#count, #order",
        ExpressionAttributeNames={"#count": schema.count, "#order": schema.order},
    ).get("Item")
    response: dict[str, Any] = {**request.board.named(), schema.entity: request.entity_id}
    if not item or schema.order not in item or schema.count not in item:
        response |= {COUNT_FIELD: value_of(0, summed), "rank": None}
        return response if request.around is None else {**response, "items": []}
    me = Entry.of(int(item[schema.order]["N"]), request.entity_id, _number(item[schema.count]["N"]))
    partitions = layout.partitions(board)
    budget = partition_budget(len(partitions))

    def before(partition: str) -> tuple[int, bool]:
        queries = PartitionQueries(client, table_name, schema, partition, budget, out_of_time)
        return _count_before(queries, schema, me)

    counted = list(map_partitions(before, partitions))
    ahead = sum(count for count, _ in counted)
    if all(complete for _, complete in counted):
        response |= {COUNT_FIELD: value_of(me.count, summed), "rank": ahead + 1}
    else:
        response |= {COUNT_FIELD: value_of(me.count, summed), "rank": None, "rankAtLeast": ahead + 1}
    if request.around is None:
        return response
    above, below = neighbours(
        client, table_name, schema, layout, request.board, me, request.around, map_partitions, out_of_time
    )
    first = None if response["rank"] is None else response["rank"] - len(above)
    listed = [*above, me, *below]
    response["items"] = [
        {
            schema.entity: entry.entity_id,
            COUNT_FIELD: value_of(entry.count, summed),
            "rank": None if first is None else first + place,
        }
        for place, entry in enumerate(listed)
    ]
    return response


def neighbours(
    client: Any,
    table_name: str,
    schema: IndexSchema,
    layout: Layout,
    board: Board,
    me: Entry,
    around: int,
    map_partitions: Callable[..., Any] = map,
    out_of_time: Callable[[], bool] = lambda: False,
) -> tuple[list[Entry], list[Entry]]:
    """Up to `around` entries listed just before `me` and just after it, over every partition, ties in listing order.

    Below: a page from me's position in every partition (merge_page). Above: the nearest entries
    of every partition read upwards, merged, the last `around` of them.
    """
    if around == 0:
        return [], []
    partitions = layout.partitions(board.id)
    budget = partition_budget(len(partitions))
    upwards = read_above(client, table_name, schema, budget, out_of_time)
    nearest = list(map_partitions(lambda partition: upwards(partition, me, around), partitions))
    above = _distinct(sorted(entry for entries in nearest for entry in entries), me)[-around:]
    after = Position(me.order, me.entity_id)
    page = PageRequest(board, around, dict.fromkeys(partitions, after))
    entries, _ = merge_page(page, read_partition(client, table_name, schema, budget, out_of_time), map_partitions)
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


def leaderboard_page(
    client: Any,
    table_name: str,
    schema: IndexSchema,
    layout: Layout,
    request: PageRequest,
    map_partitions: Callable[..., Any] = map,
    out_of_time: Callable[[], bool] = lambda: False,
    summed: bool = False,
) -> dict[str, Any]:
    board = request.board.id
    budget = partition_budget(len(layout.partitions(board)))
    reader = read_partition(client, table_name, schema, budget, out_of_time)
    entries, cursors = merge_page(request, reader, map_partitions)
    items = [{schema.entity: entry.entity_id, COUNT_FIELD: value_of(entry.count, summed)} for entry in entries]
    return {
        **request.board.named(),
        "items": items,
        "next_token": encode_token(board, layout, cursors) if cursors else None,
    }


class ReadMeter:
    """Queries and GetItems one request made, refused past their budgets or the function's clock (thread-safe)."""

    def __init__(self, queries: int, get_items: int, out_of_time: Callable[[], bool]) -> None:
        self.budget = {"queries": queries, "getItems": get_items}
        self.made = {"queries": 0, "getItems": 0, "entriesRead": 0}
        """entriesRead: index entries the Queries returned (about 100 bytes each; 40 fill a 4 KB read unit)."""
        self._out_of_time = out_of_time
        self._lock = threading.Lock()

    def charge(self, kind: str) -> None:
        with self._lock:
            if self.made[kind] >= self.budget[kind]:
                raise Unavailable(f"a rolling window may make {self.budget[kind]} {kind}")
            if self._out_of_time():
                raise Unavailable("the function's time ran out")
            self.made[kind] += 1

    def read(self, entries: int) -> None:
        with self._lock:
            self.made["entriesRead"] += entries


class MeteredClient:
    """The DynamoDB client, each Query and GetItem charged to the meter first."""

    def __init__(self, client: Any, meter: ReadMeter) -> None:
        self._client, self._meter = client, meter

    def query(self, **parameters: Any) -> Any:
        self._meter.charge("queries")
        page = self._client.query(**parameters)
        self._meter.read(len(page.get("Items", [])))
        return page

    def get_item(self, **parameters: Any) -> Any:
        self._meter.charge("getItems")
        return self._client.get_item(**parameters)


def rolling_window(
    client: Any,
    table_name: str,
    schema: IndexSchema,
    layout: Layout,
    request: WindowRequest,
    map_partitions: Callable[..., Any] = map,
    out_of_time: Callable[[], bool] = lambda: False,
    summed: bool = False,
) -> dict[str, Any]:
    """The exact top `limit` of the sum over the window's buckets (rolling.py), and the reads it took.

    Sorted access is read_partition over each bucket's partitions from a cursor kept here; point
    reads are GetItems of one aggregate's count (what the query role may read). Past
    WINDOW_QUERY_BUDGET Queries, WINDOW_GET_ITEM_BUDGET GetItems or the clock, the answer is
    the certain prefix of the top k with "complete": false, never a guess.
    """
    meter = ReadMeter(WINDOW_QUERY_BUDGET, WINDOW_GET_ITEM_BUDGET, out_of_time)
    metered = MeteredClient(client, meter)
    reader = read_partition(metered, table_name, schema, WINDOW_QUERY_BUDGET, out_of_time)
    buckets = {board.id: layout.partitions(board.id) for board in request.boards()}
    cursors: dict[str, Position | None] = dict.fromkeys((p for ps in buckets.values() for p in ps), START)

    def read_pages(wanted: list[tuple[str, int]]) -> dict[str, tuple[list[Entry], bool]]:
        def one(job: tuple[str, int]) -> tuple[str, tuple[list[Entry], bool] | None]:
            partition, count = job
            try:
                return partition, reader(partition, cursors[partition], count)
            except Unavailable:
                return partition, None

        pages = {}
        for partition, page in map_partitions(one, wanted):
            if page is not None:
                entries, _ = pages[partition] = page
                if entries:
                    cursors[partition] = Position(entries[-1].order, entries[-1].entity_id)
        return pages

    def read_points(pairs: list[tuple[str, str]]) -> dict[tuple[str, str], int | Decimal]:
        def one(pair: tuple[str, str]) -> tuple[tuple[str, str], int | Decimal | None]:
            bucket, entity = pair
            try:
                item = metered.get_item(
                    TableName=table_name,
                    Key={schema.entity: {"S": entity}, schema.sort_key: {"S": bucket}},
                    ProjectionExpression="#count",
                    ExpressionAttributeNames={"#count": schema.count},
                ).get("Item")
            except Unavailable:
                return pair, None
            return pair, _number(item[schema.count]["N"]) if item and schema.count in item else 0

        return {pair: value for pair, value in map_partitions(one, pairs) if value is not None}

    @functools.cache
    def partitions_of(bucket: str, entity: str) -> list[str]:
        return layout.entity_partitions(bucket, entity)

    answer = top_of_window(buckets, request.limit, read_pages, read_points, partitions_of)
    response: dict[str, Any] = {
        **request.board.named(),
        "last": request.last,
        "items": [_total(item, schema, summed) for item in answer.items],
        "complete": answer.complete,
        "reads": dict(meter.made),
    }
    if not answer.complete:
        response["message"] = (
            f"the read budget ({WINDOW_QUERY_BUDGET} Queries, {WINDOW_GET_ITEM_BUDGET} GetItems) or the function's"
            f" time ran out: items are the first {len(answer.items)} places of the top {request.limit}, exact"
        )
    return response


def _total(item: Total, schema: IndexSchema, summed: bool) -> dict[str, Any]:
    return {schema.entity: item.entity_id, COUNT_FIELD: value_of(item.total, summed)}


def error_response(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


GUIDE_SCHEMA = IndexSchema()
"""The guide's index and attribute names: what the function uses where the module sets none."""


READ_NAMES = tuple(name for name in NAME_VARIABLES if name != "timestamp")
"""The attribute names the query function reads: a download's timestamp is none of its business."""


def schema_from_environment(environ: Mapping[str, str]) -> IndexSchema:
    """The module sets these from its attribute-name variables; the defaults are the guide's names."""
    return IndexSchema(
        **{name: environ.get(NAME_VARIABLES[name], getattr(GUIDE_SCHEMA, name)) for name in READ_NAMES},
        index_name=environ.get("INDEX_NAME", GUIDE_SCHEMA.index_name),
    )


def layout_from_environment(environ: Mapping[str, str]) -> Layout:
    previous = environ.get("LEADERBOARD_SHARDS_PREVIOUS") or None
    return Layout(int(environ.get("LEADERBOARD_SHARDS", "1")), int(previous) if previous else None)


def reader_threads(layout: Layout) -> int:
    """One thread per partition a request reads at once, up to MAX_READER_THREADS.

    A rolling window reads the partitions of all its buckets, and its point reads, at once, so any
    deployment may use them all; the pool starts a thread only when no idle one is free.
    """
    return MAX_READER_THREADS


def client_config(threads: int) -> Config:
    """botocore keeps 10 connections by default; every reader thread, and the handler's own, may hold one at once."""
    return Config(retries={"mode": "standard", "max_attempts": 3}, max_pool_connections=threads + 1)


SCHEMA = schema_from_environment(os.environ)
LAYOUT = layout_from_environment(os.environ)
BOARDS = boards_from_environment(os.environ)
TABLE_NAME = os.environ.get("TABLE_NAME", "")
_THREADS = reader_threads(LAYOUT)
_dynamodb = boto3.client("dynamodb", config=client_config(_THREADS))
_READERS = ThreadPoolExecutor(max_workers=_THREADS, thread_name_prefix="partition")


@logger.inject_lambda_context
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    try:
        request = parse_request(event, SCHEMA, LAYOUT, BOARDS)
    except InvalidRequest as error:
        logger.info("invalid request", extra={"reason": str(error)})
        return error_response("InvalidRequest", str(error))
    where = {"request": _kind(request), "board": request.board.id, "period": request.board.period}
    try:
        return answer(request, lambda: context.get_remaining_time_in_millis() < DEADLINE_MARGIN_MS)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "Unknown")
        logger.exception("leaderboard unavailable", extra={**where, "error_code": code})
        return error_response("Unavailable", f"DynamoDB refused the read ({code}); try again later")
    except BotoCoreError as error:
        logger.exception("leaderboard unavailable", extra=where)
        return error_response("Unavailable", f"DynamoDB could not be reached ({type(error).__name__}); try again later")
    except Unavailable as error:
        logger.error("leaderboard unavailable", extra={**where, "reason": str(error)})
        return error_response("Unavailable", str(error))


def _kind(request: Request) -> str:
    if isinstance(request, RankRequest):
        return "rank" if request.around is None else "around"
    return "window" if isinstance(request, WindowRequest) else "page"


def answer(request: Request, out_of_time: Callable[[], bool]) -> dict[str, Any]:
    summed = BOARDS.summed
    if isinstance(request, RankRequest):
        return rank_of(_dynamodb, TABLE_NAME, SCHEMA, LAYOUT, request, _READERS.map, out_of_time, summed)
    if isinstance(request, WindowRequest):
        return rolling_window(_dynamodb, TABLE_NAME, SCHEMA, LAYOUT, request, _READERS.map, out_of_time, summed)
    return leaderboard_page(_dynamodb, TABLE_NAME, SCHEMA, LAYOUT, request, _READERS.map, out_of_time, summed)
