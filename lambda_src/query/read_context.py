"""The read context: what every query kind reads a board with, one object the handler builds per invocation.

Each kind's `answer(reads, request)` takes it with its own request (query_kinds.py): the client, the
aggregates' table and its index, the deployment's leaderboard shards, the threads partitions are read
on, the function's clock and whether values are sums. The page budgets derive from the board read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from index_reads import (
    MIN_PARTITION_PAGES,
    IndexSchema,
    Layout,
    PartitionQueries,
    PartitionReader,
    partition_budget,
    read_aggregate,
    read_partition,
    value_of,
)


def _never() -> bool:
    return False


@dataclass(frozen=True)
class ReadContext:
    """One request's reads: where, with what, in how many threads and until when."""

    client: Any
    """DynamoDB's client, or one that meters it (a rank range's budget, a rolling window's meter)."""
    table_name: str
    """The aggregates' table, which holds the sparse index."""
    schema: IndexSchema
    layout: Layout
    map_partitions: Callable[..., Any] = map
    """Runs a read on each partition, in parallel in the function (its thread pool's map)."""
    out_of_time: Callable[[], bool] = _never
    """True once no Query may start: the function's timeout is near."""
    summed: bool = False
    """Values are exact sums (`sum_attribute_name`), answered as strings; else counts, answered as integers."""

    def with_client(self, client: Any) -> ReadContext:
        """The same reads through another client (one that counts or meters them)."""
        return replace(self, client=client)

    def budget(self, board_id: str) -> int:
        """Query pages each of the board's partitions may read: its share of the request's budget."""
        return partition_budget(len(self.layout.partitions(board_id)))

    def queries(self, partition: str, budget: int) -> PartitionQueries:
        return PartitionQueries(self.client, self.table_name, self.schema, partition, budget, self.out_of_time)

    def reader(
        self, budget: int = MIN_PARTITION_PAGES, floor: int | None = None, ceiling: int | None = None
    ) -> PartitionReader:
        return read_partition(self.client, self.table_name, self.schema, budget, self.out_of_time, floor, ceiling)

    def aggregate(self, board_id: str, entity_id: str, with_order: bool = False) -> dict[str, Any] | None:
        return read_aggregate(self.client, self.table_name, self.schema, board_id, entity_id, with_order)

    def value(self, value: int | Decimal) -> int | str:
        """A value as the response shows it (value_of)."""
        return value_of(value, self.summed)
