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
from ledger_fold import Fold, Keep
from ledger_records import Boards

FROZEN = EXPIRY_PREFIX
READ_FROM_THE_TABLE = "~"
KEPT_BY_EXPIRY = "KeptByExpiry"
"""On an operator's keep item: whether the removal that took it (`KeptBy`) was an expiry by TTL, which then kept its
old image in place of the keep's."""


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
        fold.add(kept)

    def kept_by_operator(self, fold: Fold, version: str, stream_arn: str) -> Keep | None:
        """The operator's keep (`ExpiryKept`) the removal at `version` takes, if any: its item
        (`expired#<key>|<version>|kept`) names the version L the ledger counted when the rebase found the item gone, and
        what it counted. The removal of L is the first REMOVE of the key after L in the stream (S10: an item's records
        appear in the order of its changes), whatever MODIFYs came between: a REMOVE after L, below every INSERT after L
        (`KeptUntil`), and below the removal that took it so far (`KeptBy`), which a retry out of order may have
        applied first: that one then counts as usual again (`retake`)."""
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
        keep = self.keep_of(fold, f"{FROZEN}{claim_key(fold.key)}|{latest}|kept")
        if keep is None:
            return None
        if keep.until is not None and not self.after(keep.until, version, stream_arn):
            return None
        if keep.by is not None and not self.after(keep.by, version, stream_arn):
            return None
        return keep

    def take(self, fold: Fold, keep: Keep, version: str, expiry: bool, entity: str | None, old: Boards) -> None:
        """The removal at `version` takes the keep. An expiry by TTL keeps its old image, where the item was when it
        expired, in place of what the keep kept (the same, unless a MODIFY came between); any other removal spends the
        keep and counts as usual."""
        self.retake(fold, keep)
        keep.by, keep.expiry = version, expiry
        if not expiry:
            return
        fold.add(old, entity)
        fold.add(keep.contribution, keep.entity, sign=-1)

    @staticmethod
    def retake(fold: Fold, keep: Keep) -> None:
        """The keep is not the removal's that took it (`KeptBy`): an expiry by TTL that did counts as usual again, its
        old image for the keep's."""
        if keep.by is not None and keep.expiry:
            fold.add(keep.contribution, keep.entity)
        keep.by, keep.expiry = None, False

    def bound_keeps(self, fold: Fold, version: str, stream_arn: str) -> None:
        """An INSERT of the key at `version` (a new item under it) proves the removal of every kept version before it
        came before it: each such keep is bounded by it (`KeptUntil`, the lowest such version), and a removal after it
        that took the keep, applied first by a retry out of order, gives it back. A MODIFY proves only that the item
        lived on, maybe the kept version's own item, whose REMOVE then comes after it."""
        if fold.item is None:
            return
        for label in sorted(expiries_kept(fold.item)):
            if READ_FROM_THE_TABLE in label or not self.after(version, label, stream_arn):
                continue
            keep = self.keep_of(fold, f"{FROZEN}{claim_key(fold.key)}|{label}|kept")
            if keep is None:
                continue
            if keep.until is None or self.after(keep.until, version, stream_arn):
                keep.until = version
            if keep.by is not None and self.after(keep.by, version, stream_arn):
                self.retake(fold, keep)

    def keep_of(self, fold: Fold, operators: str) -> Keep | None:
        """An operator's keep as this batch left it, or its item read strongly consistent."""
        if operators in fold.keeps:
            return fold.keeps[operators]
        response = self.client.get_item(
            TableName=self.ledger_table, Key={CLAIM_KEY: {"S": operators}}, ConsistentRead=True
        )
        item = response.get("Item")
        if item is None:
            return None
        by = (item.get(KEPT_BY) or {}).get("S")
        until = (item.get(KEPT_UNTIL) or {}).get("S")
        expiry = bool((item.get(KEPT_BY_EXPIRY) or {}).get("BOOL"))
        contribution = {
            board: Decimal(value["N"]) for board, value in item.get(BASE_CONTRIBUTION, {}).get("M", {}).items()
        }
        keep = Keep((by, until, expiry), by, until, expiry, (item.get(BASE_ENTITY) or {}).get("S", ""), contribution)
        fold.keeps[operators] = keep
        return keep

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
        """One Update per keep the batch changed: who took it (`KeptBy`, and whether an expiry by TTL did) and its bound
        (`KeptUntil`), conditioned on the item as read."""
        writes = []
        for operators, keep in sorted(fold.keeps.items()):
            if (keep.by, keep.until, keep.expiry) == keep.read:
                continue
            read_by, read_until, _ = keep.read
            names = {"#key": CLAIM_KEY, "#by": KEPT_BY, "#until": KEPT_UNTIL, "#expiry": KEPT_BY_EXPIRY}
            values: dict[str, Any] = {":expiry": {"BOOL": keep.expiry}}
            sets = ["#expiry = :expiry"]
            removes = []
            conditions = ["attribute_exists(#key)"]
            for name, now, read in (("by", keep.by, read_by), ("until", keep.until, read_until)):
                if now is None:
                    removes.append(f"#{name}")
                else:
                    sets.append(f"#{name} = :{name}")
                    values[f":{name}"] = {"S": now}
                if read is None:
                    conditions.append(f"attribute_not_exists(#{name})")
                else:
                    conditions.append(f"#{name} = :read_{name}")
                    values[f":read_{name}"] = {"S": read}
            expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
            update = {
                "TableName": self.ledger_table,
                "Key": {CLAIM_KEY: {"S": operators}},
                "UpdateExpression": expression,
                "ConditionExpression": " AND ".join(conditions),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
            writes.append({"Update": update})
        return writes
