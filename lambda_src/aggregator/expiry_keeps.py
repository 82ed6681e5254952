"""The expiries of the versioned ledger: a TTL removal's own item, written once so that its download stays counted
(S12), and the keeps the operator's `reconcile --repair --expired-keys` writes for expiries the stream lost, taken
once by the removal of the version kept. VersionedLedger's part for them (versioned_ledger.py)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from leaderboard_core.claims import (
    BACKFILLED,
    BASE_CONTRIBUTION,
    BASE_ENTITY,
    CLAIM_KEY,
    EXPIRY_PREFIX,
    FOLLOWS,
    KEPT_BY,
    KEPT_UNTIL,
    claim_key,
    expiries_kept,
)
from ledger_fold import Fold
from ledger_records import Boards

FROZEN = EXPIRY_PREFIX
READ_FROM_THE_TABLE = "~"


class ExpiryKeeps:
    """Expiries' own items and the operator's keeps; mixed into VersionedLedger, whose client, ledger table and
    version order (`after`) they use."""

    client: Any
    ledger_table: str

    def after(self, version: str, current: str | None, stream_arn: str) -> bool:
        raise NotImplementedError

    def frozen(self, fold: Fold, version: str) -> bool:
        """Whether the expiry at `version` is kept already, by this batch or by its own item."""
        frozen = f"{FROZEN}{claim_key(fold.key)}|{version}"
        if frozen in fold.freezes:
            return True
        response = self.client.get_item(
            TableName=self.ledger_table, Key={CLAIM_KEY: {"S": frozen}}, ConsistentRead=True
        )
        return "Item" in response

    def freeze(self, fold: Fold, version: str, kept: Boards, follows: str | None = None, entity: str = "") -> None:
        """An expiry is retention (S12): the download it ends stays counted as its old image says. It is no state of
        the key, so it is applied by its own identity, not by Version: a rewrite under the key applied first (a retry
        out of order, a child read before a given-up parent) must not hide it. `follows`: the label of the key's
        Version as applied, when the expiry follows it; its item then says so, with what it kept (`entity`, `kept`):
        the rebase tells a gone version's own expiry by both."""
        frozen = f"{FROZEN}{claim_key(fold.key)}|{version}"
        fold.freezes.append(frozen)
        if follows is not None:
            fold.follows[frozen] = {
                FOLLOWS: {"S": follows},
                BASE_ENTITY: {"S": entity},
                BASE_CONTRIBUTION: {"M": {board: {"N": str(amount)} for board, amount in kept.items()}},
            }
        for board, amount in kept.items():
            fold.moves[board] = fold.moves.get(board, Decimal(0)) + amount

    def kept_by_operator(
        self, fold: Fold, version: str, entity: str | None, kept: Boards, stream_arn: str
    ) -> str | None:
        """The operator's keep (`ExpiryKept`) this removal is, if any: its item (`expired#<key>|<version>|kept`) names
        the version L the ledger counted when the rebase found the item gone, and what it counted. The removal of L is
        the first REMOVE after L: one after L, below every INSERT or MODIFY of the key after L (`KeptUntil`), whose old
        image counts what was kept. The first such removal applied takes the keep (`KeptBy`, set once): an expiry by
        TTL then adds nothing, wherever it stands against Version, and a REMOVE without the service's identity (the
        application's, or a replicated expiry) leaves the keep to no later expiry; any other removal counts as usual."""
        if fold.item is None:
            return None
        before = [
            label
            for label in sorted(expiries_kept(fold.item))
            if label.startswith(BACKFILLED) or self.after(version, label, stream_arn)
        ]
        if not before:
            return None
        latest = before[0]
        for label in before[1:]:
            if latest.startswith(BACKFILLED) or (
                not label.startswith(BACKFILLED) and self.after(label, latest, stream_arn)
            ):
                latest = label
        operators = f"{FROZEN}{claim_key(fold.key)}|{latest}|kept"
        if any(taken == operators for taken, _ in fold.keeps):
            return None
        item = self.keep_item(operators)
        if item is None or KEPT_BY in item:
            return None
        read = (item.get(KEPT_UNTIL) or {}).get("S")
        _, until = fold.bounds.get(operators, (read, read))
        if until is not None and not self.after(until, version, stream_arn):
            return None
        if BASE_CONTRIBUTION in item and (
            (item.get(BASE_ENTITY) or {}).get("S", "") != (entity or "")
            or {board: Decimal(value["N"]) for board, value in item[BASE_CONTRIBUTION]["M"].items()} != kept
        ):
            return None
        fold.bounds.setdefault(operators, (read, read))
        return operators

    def bound_keeps(self, fold: Fold, version: str, stream_arn: str) -> None:
        """An INSERT or MODIFY of the key at `version` proves the removal of every kept version before it came before
        it: each such keep not yet taken is bounded by it (`KeptUntil`, the lowest such version)."""
        if fold.item is None:
            return
        for label in sorted(expiries_kept(fold.item)):
            if READ_FROM_THE_TABLE in label or not self.after(version, label, stream_arn):
                continue
            operators = f"{FROZEN}{claim_key(fold.key)}|{label}|kept"
            item = self.keep_item(operators)
            if item is None or KEPT_BY in item:
                continue
            read = (item.get(KEPT_UNTIL) or {}).get("S")
            until = fold.bounds.get(operators, (read, read))[1]
            if until is None or self.after(until, version, stream_arn):
                fold.bounds[operators] = (read, version)

    def keep_item(self, operators: str) -> dict[str, Any] | None:
        """An operator's keep item, read strongly consistent."""
        response = self.client.get_item(
            TableName=self.ledger_table, Key={CLAIM_KEY: {"S": operators}}, ConsistentRead=True
        )
        return response.get("Item")

    def freeze_put(self, frozen: str, follows: dict[str, Any] | None = None) -> dict[str, Any]:
        """An expiry's part, kept once: a Put of its own item (with what `freeze` says it follows), conditioned on its
        absence."""
        item = {CLAIM_KEY: {"S": frozen}} | (follows or {})
        return {
            "Put": {
                "TableName": self.ledger_table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(#key)",
                "ExpressionAttributeNames": {"#key": CLAIM_KEY},
            }
        }

    def keep_writes(self, fold: Fold) -> list[dict[str, Any]]:
        """One Update per keep item the batch touched: taken by a removal (`KeptBy`, once: a later expiry of the key
        counts as usual) and bounded by a write (`KeptUntil`), each conditioned on the item as read."""
        taken = dict(fold.keeps)
        writes = []
        for operators in sorted(taken.keys() | fold.bounds.keys()):
            sets: list[str] = []
            names = {"#key": CLAIM_KEY, "#by": KEPT_BY}
            values: dict[str, Any] = {}
            condition = "attribute_exists(#key) AND attribute_not_exists(#by)"
            if operators in taken:
                sets.append("#by = :version")
                values[":version"] = {"S": taken[operators]}
            if operators in fold.bounds:
                read, until = fold.bounds[operators]
                names["#until"] = KEPT_UNTIL
                if until != read and until is not None:
                    sets.append("#until = :until")
                    values[":until"] = {"S": until}
                if read is None:
                    condition += " AND attribute_not_exists(#until)"
                else:
                    condition += " AND #until = :read"
                    values[":read"] = {"S": read}
            if not sets:
                continue
            update = {
                "TableName": self.ledger_table,
                "Key": {CLAIM_KEY: {"S": operators}},
                "UpdateExpression": "SET " + ", ".join(sets),
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
            writes.append({"Update": update})
        return writes
