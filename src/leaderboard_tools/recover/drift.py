"""One reader per shard: an aggregate whose count no ledger item explains (written by hand, or left out of its
transaction past DynamoDB's 38 digits, which the aggregator reports as a `refused_record`) set to what the ledger
counts in it. The rebase cannot: it moves ledger items, and the aggregates by the same amounts.

Every transaction that moves a key's contribution (the aggregator's, the rebase's, the backfill's) ADDs the same move to
the aggregate, all or nothing ("The actions are completed atomically so that either all of them succeed, or all of
them fail.", D2), split at 100 actions only between keys. So an aggregate's drift, its count less the sum of the ledger
items' contributions to it, changes under none of them, and is measured once, at one instant t:

- two consistent scans of the ledger, the aggregates read between them (GetItem is serializable with transactions,
  *Amazon DynamoDB Transactions: How it works*), a pause before the second scan for any transaction the reads met
  to be applied whole;
- where every ledger item reads the same in both (Version, Entity, Contribution; present or absent), none was written
  between its two reads, which enclose t: the first scan's sums are the ledger's at t. Where one changed, both are read
  again, up to ATTEMPTS times; then the aggregates are left, and said.

The drift is then taken away by an ADD, which commutes with whatever the aggregator added since, conditioned on the
count read (another recover may have set it since: then measured again). An aggregate whose ledger puts it past 38
digits stays as it is (no such count can be stored). Expiries' items (`expired#...`)
keep counted a download they do not name the aggregates of: with one in the ledger, every aggregate is left.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_core.claims import BASE_CONTRIBUTION, BASE_ENTITY, CLAIM_KEY
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.recover.rebase import LEDGER_PREFIX, VERSION, Aggregate, Rebaser

EXPIRED_PREFIX = "expired#"
ATTEMPTS = 3
"""Measurements of the drift, each two scans of the ledger, before the aggregates are left for the next run."""
SETTLE_SECONDS = 1.0
"""The pause between the aggregates' reads and the second scan: longer than a transaction takes to be applied whole."""

LedgerState = tuple[str, str, tuple[tuple[str, str], ...]]
"""A ledger item as the drift depends on it: Version, Entity, Contribution."""


@dataclass
class DriftReport:
    """What the measurement found and set, and the aggregates it left."""

    settled: list[dict[str, Any]] = field(default_factory=list)
    """Aggregates set to what the ledger counts in them: entityId, board, stored, ledger."""
    left: list[dict[str, Any]] = field(default_factory=list)
    """Aggregates left as they are: entityId, board, why, and whether a later run may settle them (retry)."""

    def left_for(self, entity: str, board: str) -> dict[str, Any] | None:
        return next((entry for entry in self.left if (entry["entityId"], entry["board"]) == (entity, board)), None)

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def settle_drift(
    dynamodb: Any,
    deployment: Deployment,
    aggregates: Collection[Aggregate],
    *,
    settle_seconds: float = SETTLE_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> DriftReport:
    """Set each aggregate whose count differs from what the ledger counts in it to that (see the module)."""
    settler = DriftSettler(dynamodb, deployment)
    report = DriftReport()
    pending = sorted(set(aggregates))
    for _ in range(ATTEMPTS):
        first = settler.ledger()
        if any(claim.startswith(EXPIRED_PREFIX) for claim in first):
            why = (
                "the ledger keeps downloads expired by TTL counted without naming their aggregates (expired#...): "
                "what it counts in an aggregate is not known, so none is set"
            )
            return _left(report, pending, why, retry=False)
        stored = {aggregate: settler.stored(aggregate) for aggregate in pending}
        sleep(settle_seconds)
        if settler.ledger() != first:
            continue
        counted = _sums(first, pending)
        pending = [
            aggregate
            for aggregate in pending
            if not settler.settle(report, aggregate, stored[aggregate], counted[aggregate])
        ]
        if not pending:
            return report
    why = f"the ledger or the aggregate changed under {ATTEMPTS} measurements of what it counts: run recover again"
    return _left(report, pending, why, retry=True)


def _left(report: DriftReport, aggregates: list[Aggregate], why: str, retry: bool) -> DriftReport:
    report.left += [{"entityId": entity, "board": board, "why": why, "retry": retry} for entity, board in aggregates]
    return report


def _sums(ledger: dict[str, LedgerState], aggregates: list[Aggregate]) -> dict[Aggregate, Decimal]:
    """What the ledger items count in each aggregate."""
    sums = dict.fromkeys(aggregates, Decimal(0))
    for _, entity, contribution in ledger.values():
        for board, amount in contribution:
            if (entity, board) in sums:
                sums[(entity, board)] += Decimal(amount)
    return sums


class DriftSettler(Rebaser):
    """The ledger's reads and the aggregates' corrections, with the rebase's own ADD and index step."""

    def ledger(self) -> dict[str, LedgerState]:
        """Every download's ledger item (and every expiry's, by its key alone), as the drift depends on it."""
        items: dict[str, LedgerState] = {}
        for item in self._scan(TableName=self.claims, ConsistentRead=True):
            claim = item[CLAIM_KEY]["S"]
            if claim.startswith(EXPIRED_PREFIX):
                items[claim] = ("", "", ())
            elif claim.startswith(LEDGER_PREFIX):
                contribution = item.get(BASE_CONTRIBUTION, {}).get("M", {})
                items[claim] = (
                    item.get(VERSION, {}).get("S", ""),
                    item.get(BASE_ENTITY, {}).get("S", ""),
                    tuple(sorted((board, value["N"]) for board, value in contribution.items())),
                )
        return items

    def stored(self, aggregate: Aggregate) -> Decimal | None:
        """The aggregate's count; None where it has none."""
        entity, board = aggregate
        names = self.deployment.names
        item = self._get(self.deployment.aggregates, {names.entity: {"S": entity}, names.sort_key: {"S": board}})
        count = (item or {}).get(names.count)
        return None if count is None else Decimal(count["N"])

    def settle(self, report: DriftReport, aggregate: Aggregate, stored: Decimal | None, counted: Decimal) -> bool:
        """The aggregate moved by what the ledger counts less what it held at the measurement, on the condition that it
        still holds that (another recover may have set it since); False when that condition failed."""
        entity, board = aggregate
        drift = counted - (stored or 0)
        if not drift:
            return True
        update = self._aggregate_add(aggregate, drift)["Update"]
        if stored is None:
            update["ConditionExpression"] = "attribute_not_exists(#count)"
        else:
            update["ConditionExpression"] = "#count = :stored"
            update["ExpressionAttributeValues"] = update["ExpressionAttributeValues"] | {":stored": {"N": str(stored)}}
        try:
            self.dynamodb.update_item(**update)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            if code == "ConditionalCheckFailedException":
                return False
            if code != "ValidationException":
                raise
            why = f"the ledger counts {counted} in it, which DynamoDB refused ({error}): it stays as it is"
            report.left.append({"entityId": entity, "board": board, "why": why, "retry": False})
            return True
        self._leave_index(None, {aggregate: drift})
        report.settled.append({"entityId": entity, "board": board, "stored": str(stored or 0), "ledger": str(counted)})
        return True
