"""Rank policies: how equal values rank. `ordinal` numbers the listing 1, 2, 3, 4 (ties by id, the default);
`competition` gives equal values the rank of the first of them (1, 2, 2, 4); `dense` numbers the distinct values
(1, 2, 2, 3).

A listing is walked in order with a RankState: the entries passed, the last one's value and its rank. The next entry's
rank follows from it alone, so a page's token carries the state and every page after the first ranks exactly without
reading what lies above it. Where a listing starts below the top (a rank, a range by count), the state is counted from
the index: the entries above a value (Select COUNT), or for `dense` their distinct values (their orders read).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from index_reads import Bound, Entry, PartitionQueries
from leaderboard_core.index_layout import ORDER_SCALE, SUMMED_TIEBREAK_SCALE
from read_context import ReadContext
from request_parsing import InvalidRequest

ORDINAL, COMPETITION, DENSE = "ordinal", "competition", "dense"
POLICIES = (ORDINAL, COMPETITION, DENSE)
POLICY_FIELD = "rankPolicy"


def parse_policy(event: dict[str, Any]) -> str | None:
    """The request's rank policy, None when it asks for none (the answer then has today's shape)."""
    if POLICY_FIELD not in event:
        return None
    policy = event[POLICY_FIELD]
    if not isinstance(policy, str) or policy not in POLICIES:
        raise InvalidRequest(f"rankPolicy must be one of {', '.join(POLICIES)}")
    return policy


def value_step(summed: bool) -> int:
    """The order's distance between two neighbouring values: every order of one value lies in one step."""
    return SUMMED_TIEBREAK_SCALE if summed else ORDER_SCALE


def value_key(order: int, summed: bool) -> int:
    """The value an order holds, as an integer: equal for equal values, larger for larger ones (exact: no float)."""
    return order // value_step(summed)


def highest_order(key: int, summed: bool) -> int:
    """The highest order an entry of this value can have: every entry above it holds a larger value."""
    return (key + 1) * value_step(summed) - 1


@dataclass(frozen=True)
class RankState:
    """Where a walk of the listing stands: entries passed, the last one's value (None: none yet) and its rank."""

    listed: int = 0
    value: int | Decimal | None = None
    """The last entry's value: its value_key, or (ranking a set, among.py) the value itself: compared exactly."""
    rank: int = 0
    """The last entry's rank; before the first entry of a listing that starts below the top, the rank the entries
    above it end on (for `dense`, their distinct values)."""

    def next(self, policy: str, value: int | Decimal) -> RankState:
        """The state after one more entry of this value (its rank is the new state's)."""
        listed = self.listed + 1
        if value == self.value:
            return RankState(listed, value, listed if policy == ORDINAL else self.rank)
        return RankState(listed, value, self.rank + 1 if policy == DENSE else listed)

    def scope(self) -> tuple[str, str, str]:
        """The state as a token's scope holds it."""
        return str(self.listed), "" if self.value is None else str(self.value), str(self.rank)

    @classmethod
    def of_scope(cls, values: tuple[str, ...], forged: str) -> RankState:
        """A state a token carries, if it is one a walk can reach (a forged one only misnumbers its own board)."""
        listed, value, rank = values
        try:
            state = cls(int(listed), int(value) if value else None, int(rank))
        except ValueError:
            raise InvalidRequest(forged) from None
        if not 0 <= state.rank <= state.listed:
            raise InvalidRequest(forged)
        return state


TOP = RankState()
"""The state at the top of a listing: nothing passed."""


def ranked(policy: str, state: RankState, entries: Iterable[Entry], summed: bool) -> list[tuple[Entry, int, RankState]]:
    """Each entry with its rank, and the state after it, walking on from `state`."""
    out = []
    for entry in entries:
        state = state.next(policy, value_key(entry.order, summed))
        out.append((entry, state.rank, state))
    return out


@dataclass(frozen=True)
class Above:
    """What a board holds above an order: its entries, their distinct values (if counted), and whether in full."""

    entries: int
    values: int
    complete: bool


def count_above(reads: ReadContext, board_id: str, order: int, distinct: bool) -> Above:
    """The entries of every partition above `order`, and with `distinct` their distinct values (read, not counted).

    A COUNT reads and charges every entry it counts; reading their orders instead charges the same read units (a
    Query's reads are the entries' size, whatever it returns) and gives their values. Stops at the budget or clock.
    """
    budget = reads.budget(board_id)

    def one(partition: str) -> tuple[int, set[int], bool]:
        return _read_above(reads.queries(partition, budget), reads, (">", order), distinct)

    counted = list(reads.map_partitions(one, reads.layout.partitions(board_id)))
    values: set[int] = set().union(*(keys for _, keys, _ in counted))
    return Above(sum(count for count, _, _ in counted), len(values), all(done for _, _, done in counted))


def count_between(reads: ReadContext, board_id: str, low: int, high: int) -> Above:
    """The entries of every partition whose order is from `low` to `high` (one value's orders): COUNT only."""
    budget = reads.budget(board_id)

    def one(partition: str) -> tuple[int, set[int], bool]:
        queries = PartitionQueries(
            reads.client, reads.table_name, reads.schema, partition, budget, reads.out_of_time, floor=low
        )
        return _read_above(queries, reads, ("<=", high), False)

    counted = list(reads.map_partitions(one, reads.layout.partitions(board_id)))
    return Above(sum(count for count, _, _ in counted), 0, all(done for _, _, done in counted))


def _read_above(
    queries: PartitionQueries, reads: ReadContext, bound: Bound, distinct: bool
) -> tuple[int, set[int], bool]:
    count, keys = 0, set()
    start_key = None
    while True:
        if not queries.may_read():
            return count, keys, False
        extra: dict[str, Any] = (
            {"ProjectionExpression": "#order", "ExpressionAttributeNames": {"#order": reads.schema.order}}
            if distinct
            else {"Select": "COUNT"}
        )
        if start_key is not None:
            extra["ExclusiveStartKey"] = start_key
        page = queries.page(bound, **extra)
        if distinct:
            orders = [int(item[reads.schema.order]["N"]) for item in page.get("Items", [])]
            count += len(orders)
            keys |= {value_key(order, reads.summed) for order in orders}
        else:
            count += page["Count"]
        start_key = page.get("LastEvaluatedKey")
        if start_key is None:
            return count, keys, True
