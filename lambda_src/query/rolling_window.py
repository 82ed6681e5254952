"""The window kind: the exact top `limit` of the sums over the last N buckets of a period (rolling.py).

{"period": "day", "key": "2018-01-15", "last": 7, "limit": 10}
    -> {"period": "day", "key": "2018-01-15", "last": 7, "items": [...], "complete": true, "reads": {...}}
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from boards import Board
from index_reads import START, Entry, Layout, Position, Unavailable, dynamodb_number
from leaderboard_core.attributes import COUNT_FIELD
from leaderboard_core.periods import ALL_TIME, KEY_FORMATS
from read_context import ReadContext
from request_parsing import InvalidRequest
from rolling import top_of_window

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


@dataclass(frozen=True)
class WindowRequest:
    board: Board
    """The newest bucket of the window."""
    last: int
    limit: int

    def boards(self) -> list[Board]:
        keys = self.board.calendar.window_keys(self.board.period, self.board.key, self.last)
        return [self.board.at(key) for key in keys]

    def span(self) -> dict[str, str | None]:
        """The window's start (its oldest bucket's) and end (its newest's): where the next window begins."""
        return {"boardStart": self.boards()[-1].span()["boardStart"], "boardEnd": self.board.span()["boardEnd"]}


def parse(event: dict[str, Any], board: Board, entity_field: str, layout: Layout) -> WindowRequest:
    """The `last` buckets ending with the board's and the limit: a window its read budget can cover, or refused."""
    last = event["last"]
    if isinstance(last, bool) or not isinstance(last, int) or not 2 <= last <= MAX_LAST:
        raise InvalidRequest(f"last must be an integer from 2 to {MAX_LAST}")
    if board.period == ALL_TIME:
        *bucketed, final = KEY_FORMATS
        raise InvalidRequest(f"period all has no buckets to sum: last takes {', '.join(bucketed)} or {final}")
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


def answer(reads: ReadContext, request: WindowRequest) -> dict[str, Any]:
    """The exact top `limit` of the sum over the window's buckets (rolling.py), and the reads it took.

    Sorted access is read_partition over each bucket's partitions from a cursor kept here; point
    reads are GetItems of one aggregate's count (what the query role may read). Past
    WINDOW_QUERY_BUDGET Queries, WINDOW_GET_ITEM_BUDGET GetItems or the clock, the answer is
    the certain prefix of the top k with "complete": false, never a guess.
    """
    meter = ReadMeter(WINDOW_QUERY_BUDGET, WINDOW_GET_ITEM_BUDGET, reads.out_of_time)
    metered = reads.with_client(MeteredClient(reads.client, meter))
    reader = metered.reader(WINDOW_QUERY_BUDGET)
    layout, schema, map_partitions = reads.layout, reads.schema, reads.map_partitions
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
                item = metered.aggregate(bucket, entity)
            except Unavailable:
                return pair, None
            return pair, dynamodb_number(item[schema.count]["N"]) if item and schema.count in item else 0

        return {pair: value for pair, value in map_partitions(one, pairs) if value is not None}

    @functools.cache
    def partitions_of(bucket: str, entity: str) -> list[str]:
        return layout.entity_partitions(bucket, entity)

    answer = top_of_window(buckets, request.limit, read_pages, read_points, partitions_of)
    response: dict[str, Any] = {
        **request.board.named(),
        **request.span(),
        "last": request.last,
        "items": [{schema.entity: item.entity_id, COUNT_FIELD: reads.value(item.total)} for item in answer.items],
        "complete": answer.complete,
        "reads": dict(meter.made),
    }
    if not answer.complete:
        response["message"] = (
            f"the read budget ({WINDOW_QUERY_BUDGET} Queries, {WINDOW_GET_ITEM_BUDGET} GetItems) or the function's"
            f" time ran out: items are the first {len(answer.items)} places of the top {request.limit}, exact"
        )
    return response
