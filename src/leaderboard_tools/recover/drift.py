"""One reader per shard: an aggregate whose count no ledger item explains (written by hand, or left out of its
transaction past DynamoDB's 38 digits, which the aggregator reports as a `refused_record`) set to what the ledger
counts in it, and every aggregate a message names checked against the ledger before the message goes. The rebase
cannot: it moves ledger items, and the aggregates by the same amounts.

Every transaction that moves a key's contribution (the aggregator's, the rebase's, the backfill's) ADDs the same move to
the aggregate, all or nothing ("The actions are completed atomically so that either all of them succeed, or all of
them fail.", D2), split at 100 actions only between keys. So an aggregate's drift, its count less the sum of the ledger
items' contributions to it, changes under none of them, and is measured once, at one instant t:

- two consistent scans of the ledger, the aggregates read between them (GetItem is serializable with transactions,
  *Amazon DynamoDB Transactions: How it works*), a pause before the second scan for any transaction the reads met
  to be applied whole;
- where every ledger item that could count in a measured aggregate reads the same in both (Version, Rebases, Entity,
  Contribution; present or absent), none was written between its two reads, which enclose t: the first scan's sums
  are the ledger's at t. An item's Entity is its download's, which no edit changes where the entity is the table's
  partition key: there only the items of the measured entities (and any naming none) are compared; elsewhere every
  item is. The handler writes Version and the rebase raises Rebases at every move, so an item moved away and back
  reads differently. Where one changed, all is read again, up to ATTEMPTS times; then the aggregates are left, and
  said.

A drifted aggregate is then SET to what the ledger counts, its index partition and order with it as the aggregator's
writes compute them from a count (at or below 0, out of the sparse index), on the condition that its count is still
the one read: what the aggregator added since fails it, and the drift is measured again. The condition holds again
after other writes only if a write that keeps no drift (another recover's, or a hand edit) brought the count back,
so the value set may be stale; every set is therefore measured again, and an aggregate counts as exact only once a
measurement after this run's last write finds no drift: as no transaction moves a drift, it then holds for good,
and whatever a stale set of another run leaves is measured again by that run. An aggregate whose ledger puts it
past 38 digits stays as it is (no such count can be stored). Expiries' items (`expired#...`) keep counted a download
they do not name the aggregates of: with one in the ledger, every aggregate is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_core.claims import BASE_CONTRIBUTION, BASE_ENTITY, CLAIM_KEY, EXPIRY_PREFIX, REBASES, download_key_of
from leaderboard_core.index_layout import leaderboard_partition, order_of
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.recover.ledger_versions import LEDGER_PREFIX, VERSION
from leaderboard_tools.recover.rebase import Aggregate, Rebaser

ATTEMPTS = 3
"""Measurements of the drift, each two scans of the ledger, before the aggregates are left for the next run: a set
aggregate takes one more, to find it exact."""
SETTLE_SECONDS = 1.0
"""The pause between the aggregates' reads and the second scan: longer than a transaction takes to be applied whole."""

LedgerState = tuple[str, str, str, tuple[tuple[str, str], ...]]
"""A ledger item as the drift depends on it: Version, Rebases, Entity, Contribution."""


@dataclass
class LedgerItem:
    """A ledger item read by the drift's scan: its state, and the entity of its download (None where not known)."""

    state: LedgerState
    entity: str | None


@dataclass
class DriftReport:
    """What the measurement found and set, and the aggregates it left."""

    settled: list[dict[str, Any]] = field(default_factory=list)
    """Aggregates set to what the ledger counts in them: entityId, board, stored, ledger."""
    left: list[dict[str, Any]] = field(default_factory=list)
    """Aggregates left as they are: entityId, board, why, and whether a later run may settle them (retry)."""
    measured_again: bool = False
    """Whether an aggregate was measured after a write or a failed condition (the check then runs again)."""

    def left_for(self, entity: str, board: str) -> dict[str, Any] | None:
        return next((entry for entry in self.left if (entry["entityId"], entry["board"]) == (entity, board)), None)

    def as_json(self) -> dict[str, Any]:
        return {"settled": self.settled, "left": self.left}


def settle_drift(
    dynamodb: Any,
    deployment: Deployment,
    aggregates: Collection[Aggregate],
    *,
    boards: Collection[str] = (),
    settle_seconds: float = SETTLE_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> DriftReport:
    """Measure each aggregate (and every aggregate of `boards`: those stored, and those the ledger counts in) against
    the ledger, and set each that differs to what the ledger counts in it (see the module)."""
    settler = DriftSettler(dynamodb, deployment)
    report = DriftReport()
    whole = set(boards)
    pending = set(aggregates) | settler.stored_in(whole)
    exact: set[Aggregate] = set()
    for attempt in range(ATTEMPTS):
        first = settler.ledger()
        if any(claim.startswith(EXPIRY_PREFIX) for claim in first):
            why = (
                "the ledger keeps downloads expired by TTL counted without naming their aggregates (expired#...): "
                "what it counts in an aggregate is not known, so none is checked or set"
            )
            return _left(report, sorted(pending), why, retry=False)
        pending |= {aggregate for aggregate in _counted_in(first) if aggregate[1] in whole} - exact
        stored = {aggregate: settler.stored(aggregate) for aggregate in sorted(pending)}
        sleep(settle_seconds)
        if attempt:
            report.measured_again = True
        if not settler.unchanged(first, settler.ledger(), {entity for entity, _ in pending}):
            continue
        counted = _sums(first, pending)
        for aggregate in sorted(pending):
            if counted[aggregate] == (stored[aggregate] or 0):
                exact.add(aggregate)
            elif settler.settle(report, aggregate, stored[aggregate], counted[aggregate]):
                exact.add(aggregate)  # left for good (past 38 digits), said in report.left
        pending -= exact
        if not pending:
            return report
    why = (
        f"the ledger or the aggregate changed under {ATTEMPTS} measurements of what it counts, or the last found it "
        "set and not yet measured again: run recover again"
    )
    return _left(report, sorted(pending), why, retry=True)


def _left(report: DriftReport, aggregates: list[Aggregate], why: str, retry: bool) -> DriftReport:
    report.left += [{"entityId": entity, "board": board, "why": why, "retry": retry} for entity, board in aggregates]
    return report


def _counted_in(ledger: dict[str, LedgerItem]) -> set[Aggregate]:
    """Every aggregate a ledger item counts in."""
    return {(item.state[2], board) for item in ledger.values() for board, _ in item.state[3]}


def _sums(ledger: dict[str, LedgerItem], aggregates: Collection[Aggregate]) -> dict[Aggregate, Decimal]:
    """What the ledger items count in each aggregate."""
    sums = dict.fromkeys(aggregates, Decimal(0))
    for item in ledger.values():
        _, _, entity, contribution = item.state
        for board, amount in contribution:
            if (entity, board) in sums:
                sums[(entity, board)] += Decimal(amount)
    return sums


class DriftSettler(Rebaser):
    """The ledger's reads and the aggregates' corrections, with the rebase's reads."""

    def ledger(self) -> dict[str, LedgerItem]:
        """Every download's ledger item (and every expiry's, by its key alone), as the drift depends on it."""
        items: dict[str, LedgerItem] = {}
        for item in self._scan(TableName=self.claims, ConsistentRead=True):
            claim = item[CLAIM_KEY]["S"]
            if claim.startswith(EXPIRY_PREFIX):
                items[claim] = LedgerItem(("", "", "", ()), None)
            elif claim.startswith(LEDGER_PREFIX):
                contribution = item.get(BASE_CONTRIBUTION, {}).get("M", {})
                entity = item.get(BASE_ENTITY, {}).get("S", "")
                items[claim] = LedgerItem(
                    (
                        item.get(VERSION, {}).get("S", ""),
                        item.get(REBASES, {}).get("N", ""),
                        entity,
                        tuple(sorted((board, value["N"]) for board, value in contribution.items())),
                    ),
                    self._entity_of(item) or entity or None,
                )
        return items

    def _entity_of(self, item: dict[str, Any]) -> str | None:
        """The download's entity, from the key the ledger item keeps: fixed for good where it is the partition key."""
        key = download_key_of(item)
        value = (key or {}).get(self.deployment.names.entity, {}).get("S")
        return value if isinstance(value, str) else None

    def unchanged(self, first: dict[str, LedgerItem], second: dict[str, LedgerItem], entities: set[str]) -> bool:
        """Whether every ledger item that could count in an aggregate of `entities` reads the same in both scans."""
        if not self.deployment.entity_is_partition:
            return {claim: item.state for claim, item in first.items()} == {
                claim: item.state for claim, item in second.items()
            }
        for claim in first.keys() | second.keys():
            before, after = first.get(claim), second.get(claim)
            named = {item.entity for item in (before, after) if item is not None}
            if (None in named or named & entities) and (before is None or after is None or before.state != after.state):
                return False
        return True

    def stored(self, aggregate: Aggregate) -> Decimal | None:
        """The aggregate's count; None where it has none."""
        entity, board = aggregate
        names = self.deployment.names
        item = self._get(self.deployment.aggregates, {names.entity: {"S": entity}, names.sort_key: {"S": board}})
        count = (item or {}).get(names.count)
        return None if count is None else Decimal(count["N"])

    def stored_in(self, boards: Collection[str]) -> set[Aggregate]:
        """Every aggregate of `boards` with a count."""
        if not boards:
            return set()
        names = self.deployment.names
        aggregates = set()
        for item in self._scan(
            TableName=self.deployment.aggregates,
            ProjectionExpression="#entity, #board, #count",
            ExpressionAttributeNames={"#entity": names.entity, "#board": names.sort_key, "#count": names.count},
        ):
            board = item.get(names.sort_key, {}).get("S")
            entity = item.get(names.entity, {}).get("S")
            if board in boards and entity is not None and names.count in item:
                aggregates.add((entity, board))
        return aggregates

    def settle(self, report: DriftReport, aggregate: Aggregate, stored: Decimal | None, counted: Decimal) -> bool:
        """The aggregate set to what the ledger counts, with its index partition and order as the aggregator computes
        them from a count (out of the index at or below 0), on the condition that it still holds the count read;
        False when that condition failed or the set is to be measured again, True when it is left for good."""
        entity, board = aggregate
        names = self.deployment.names
        attribute_names = {"#count": names.count, "#period": names.period, "#order": names.order}
        values: dict[str, Any] = {":counted": {"N": str(counted)}}
        if counted > 0:
            expression = "SET #count = :counted, #period = :period, #order = :order"
            values[":period"] = {"S": leaderboard_partition(board, entity, self.deployment.shards())}
            values[":order"] = {"N": str(order_of(counted, entity))}
        else:
            expression = "SET #count = :counted REMOVE #period, #order"
        if stored is None:
            condition = "attribute_not_exists(#count)"
        else:
            condition = "#count = :stored"
            values[":stored"] = {"N": str(stored)}
        try:
            self.dynamodb.update_item(
                TableName=self.deployment.aggregates,
                Key={names.entity: {"S": entity}, names.sort_key: {"S": board}},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=attribute_names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            if code == "ConditionalCheckFailedException":
                return False
            if code != "ValidationException":
                raise
            why = f"the ledger counts {counted} in it, which DynamoDB refused ({error}): it stays as it is"
            report.left.append({"entityId": entity, "board": board, "why": why, "retry": False})
            return True
        report.settled.append({"entityId": entity, "board": board, "stored": str(stored or 0), "ledger": str(counted)})
        return False
