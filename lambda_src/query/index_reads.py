"""Index reads: a board's partitions of the sparse index, read in listing order; and one aggregate by its key.

The index's partition key is the period attribute: with one leaderboard shard a board's aggregates
sit under its id ("2018-01", "2018-01-15@rock"; the guide's layout); with N they are spread over
"<board>#0" .. "<board>#N-1". Its sort key, LeaderboardOrder, sorts by value and then by entity
id. Each read is counted against the request's budget and the function's clock.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from leaderboard_core.attributes import AttributeNames
from leaderboard_core.index_layout import leaderboard_partition, leaderboard_partitions

READ_BUDGET_PAGES = 200
"""Query pages (up to 1 MB each) one request may read over all its partitions, shared out among them."""
MIN_PARTITION_PAGES = 4
"""Pages each partition may read whatever the share: enough for a page whose ties fit in 1 MB, and for a rank."""
_INTEGER = re.compile(r"\A-?[0-9]+\Z")


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


def partition_budget(partitions: int) -> int:
    """Query pages a partition may read in one request: its share of READ_BUDGET_PAGES, at least MIN_PARTITION_PAGES."""
    return max(MIN_PARTITION_PAGES, READ_BUDGET_PAGES // partitions)


Bound = tuple[str, int] | None
"""A key condition on the order: ("<=", o), ("<", o), (">", o) or ("=", o); None for the whole partition."""


def request_budget(partitions: int) -> int:
    """Query pages one request that reads its partitions several times (a rank range's skip) may make over all of
    them: READ_BUDGET_PAGES, or MIN_PARTITION_PAGES for each partition if that is more."""
    return max(READ_BUDGET_PAGES, MIN_PARTITION_PAGES * partitions)


class BudgetedClient:
    """The DynamoDB client, each Query counted against one request's budget and the function's clock (thread-safe).

    The per-partition budget of PartitionQueries bounds one read of a partition; a request that reads its
    partitions again and again (a range by rank skipping to its first rank) is bounded here as a whole: past
    `pages` Queries, or once `out_of_time()` after the first, a Query is Unavailable.
    """

    def __init__(self, client: Any, pages: int, out_of_time: Callable[[], bool]) -> None:
        self._client, self._budget, self._out_of_time = client, pages, out_of_time
        self.pages = 0
        self._lock = threading.Lock()

    def query(self, **parameters: Any) -> Any:
        with self._lock:
            if self.pages >= self._budget:
                raise Unavailable(f"the request's read budget ({self._budget} Query pages) ran out")
            if self.pages and self._out_of_time():
                raise Unavailable("the function's time ran out")
            self.pages += 1
        return self._client.query(**parameters)

    def get_item(self, **parameters: Any) -> Any:
        return self._client.get_item(**parameters)


NOTHING = ("", {})
"""order_condition's answer for a bound wholly below the floor: nothing to read."""


def order_condition(bound: Bound, floor: int | None) -> tuple[str, dict[str, Any]] | None:
    """The key condition on the order for a bound and a floor: (expression, values); None for the whole partition."""
    if floor is None or (bound is not None and bound[0] not in ("<=", "<")):
        return None if bound is None else (f"#order {bound[0]} :order", {":order": {"N": str(bound[1])}})
    if bound is None:
        return "#order >= :low", {":low": {"N": str(floor)}}
    high = bound[1] - 1 if bound[0] == "<" else bound[1]
    if high < floor:
        return NOTHING
    return "#order BETWEEN :low AND :high", {":low": {"N": str(floor)}, ":high": {"N": str(high)}}


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
        floor: int | None = None,
    ) -> None:
        self._client, self._table, self._schema, self._partition = client, table_name, schema, partition
        self._budget, self._out_of_time, self.pages = budget, out_of_time, 0
        self._floor = floor
        """The lowest order read (a range by count): a bound reading downwards stops there."""

    def may_read(self) -> bool:
        """True while the budget lasts and, after the first page, while there is time for another."""
        return self.pages < self._budget and not (self.pages and self._out_of_time())

    def page(self, bound: Bound, **extra: Any) -> dict[str, Any]:
        """One Query page of the partition, highest order first; Unavailable past the budget or the clock.

        With a floor, a bound reading downwards ("<=", "<" or none) reads down to the floor only (BETWEEN: orders
        are integers, so "< o" is "<= o - 1"); a bound wholly below it reads nothing, and costs no Query.
        """
        condition_on_order = order_condition(bound, self._floor)
        if condition_on_order is NOTHING:
            return {"Items": [], "Count": 0}
        if not self.may_read():
            raise Unavailable(
                f"reading leaderboard partition {self._partition} needed more than {self.pages} Query pages"
                " within the request's budget and the function's time (a very large group of tied songs?)"
            )
        names = {"#period": self._schema.period}
        values: dict[str, Any] = {":partition": {"S": self._partition}}
        condition = "#period = :partition"
        if condition_on_order is not None:
            condition += f" AND {condition_on_order[0]}"
            names["#order"] = self._schema.order
            values |= condition_on_order[1]
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
    floor: int | None = None,
    ceiling: int | None = None,
) -> PartitionReader:
    """Read a partition from its cursor on, highest order first, always ending on a whole order group.

    Entries with equal orders (equal counts whose ids share their first 10 bytes) come back from
    DynamoDB in no documented order; ending on a whole group lets them be sorted by full id. A
    group cut by the page's Limit is read whole with one Query on its order (not one per song), so
    a page costs at most two limited Queries and two group reads per partition while groups fit
    in DynamoDB's 1 MB pages; past `budget` pages or the clock it is Unavailable.

    With a `ceiling` and a `floor` (a range by count) only the orders between them are read: a partition
    not read yet starts at the ceiling, and is exhausted at the floor.
    """

    def read(partition: str, after: Position | None, wanted: int) -> tuple[list[Entry], bool]:
        queries = PartitionQueries(client, table_name, schema, partition, budget, out_of_time, floor)
        entries: list[Entry] = []
        top: Bound = None if ceiling is None else ("<=", ceiling)
        bound: Bound = top if after is None else ("<=", after.order if ceiling is None else min(after.order, ceiling))
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


def dynamodb_number(text: str) -> int | Decimal:
    """A DynamoDB number: an int when it is whole (counts), else the exact Decimal (sums)."""
    return int(text) if _INTEGER.match(text) else Decimal(text)


def value_of(value: int | Decimal, summed: bool) -> int | str:
    """A count is a JSON integer; a sum is a string holding the exact decimal (a JSON float would not be exact)."""
    if not summed:
        return int(value)
    number = Decimal(value)
    return str(int(number)) if number == number.to_integral_value() else format(number.normalize(), "f")


def _entry(item: dict[str, Any], schema: IndexSchema) -> Entry:
    return Entry.of(int(item[schema.order]["N"]), item[schema.entity]["S"], dynamodb_number(item[schema.count]["N"]))


def read_aggregate(
    client: Any, table_name: str, schema: IndexSchema, board: str, entity_id: str, with_order: bool = False
) -> dict[str, Any] | None:
    """One aggregate's count (and order) on a board, or None: a GetItem naming only what the query role may read."""
    names = {"#count": schema.count, **({"#order": schema.order} if with_order else {})}
    item: dict[str, Any] | None = client.get_item(
        TableName=table_name,
        Key={schema.entity: {"S": entity_id}, schema.sort_key: {"S": board}},
        ProjectionExpression=", ".join(names),
        ExpressionAttributeNames=names,
    ).get("Item")
    return item
