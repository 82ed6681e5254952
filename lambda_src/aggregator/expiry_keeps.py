"""The expiries of the versioned ledger: a TTL removal's own item, written once so that its download stays counted
(S12), and the keeps the operator's `reconcile --repair --expired-keys` writes for expiries the stream lost, taken
once by the removal of the version kept. VersionedLedger holds one, and hands it each key's fold
(versioned_ledger.py)."""

from __future__ import annotations

from decimal import Decimal
from functools import cmp_to_key
from typing import Any

from leaderboard_core.claims import (
    BACKFILLED,
    BASE_CONTRIBUTION,
    BASE_ENTITY,
    CLAIM_KEY,
    DECREASED,
    EXPIRY_PREFIX,
    FOLLOWS,
    KEPT_BY,
    KEPT_BY_DELETION,
    KEPT_BY_EXPIRY,
    KEPT_MAYBE_UNTIL,
    KEPT_UNTIL,
    READ_FROM_THE_TABLE,
    claim_key,
    decreased_of,
    decreased_value,
    expiries_kept,
    version_label,
)
from ledger_fold import Aggregate, Fold, Keep, VersionOrder, read_window, report_unsure
from ledger_records import Boards

FROZEN = EXPIRY_PREFIX


class ExpiryKeeps:
    """Expiries' own items and the operator's keeps. It reads and writes them in the ledger table, and orders versions
    as the ledger does (`after`): given all three, it shares nothing else with VersionedLedger but the folds."""

    def __init__(self, client: Any, ledger_table: str, after: VersionOrder) -> None:
        self.client = client
        self.ledger_table = ledger_table
        self.after = after

    def removal(
        self,
        fold: Fold,
        version: str,
        created: int | None,
        expiry: bool,
        entity: str | None,
        old: Boards,
        stream_arn: str,
    ) -> None:
        """A REMOVE of the key at `version` (an `expiry` by TTL, or a delete) whose old image counts `old` for `entity`,
        wherever it stands against Version: it takes the operator's keep it is the removal of, if any, and an expiry
        keeps its old image counted for good (`freeze`; `take` counted it where it took a keep). An expiry that follows
        the key's Version as applied names it (`Follows`); where the rebase reported that version gone, the ledger
        item's `GoneAt` names the expiry (followed_expiries.py)."""
        keep = self.kept_by_operator(fold, version, created, expiry, stream_arn)
        if keep is not None:
            self.take(fold, keep, version, expiry, entity, old, stream_arn)
        if not expiry:
            return
        follows = fold.item is not None or fold.version is not None
        follows = follows and self.after(version, fold.version, stream_arn)
        label = version_label(fold.version, fold.item) if follows else None
        if label is not None and fold.gone_at.get(label) == "":
            fold.gone_at[label] = version
        with fold.counting_for(entity):
            self.freeze(fold, version, {} if keep is not None else old, label, entity or "")

    def frozen(self, fold: Fold, version: str) -> bool:
        """Whether the expiry at `version` is kept already, by this batch or by its own item."""
        frozen = f"{FROZEN}{claim_key(fold.key)}|{version}"
        if frozen in fold.freezes:
            return True
        item = self.client.get_item(
            TableName=self.ledger_table, Key={CLAIM_KEY: {"S": frozen}}, ConsistentRead=True
        ).get("Item")
        if item is not None and DECREASED in item:
            fold.frozen_decreased[frozen] = decreased_of({DECREASED: item[DECREASED]})
        return item is not None

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

    def kept_by_operator(
        self, fold: Fold, version: str, created: int | None, expiry: bool, stream_arn: str
    ) -> Keep | None:
        """The operator's keep (`ExpiryKept`) the removal at `version` takes, if any: its item
        (`expired#<key>|<version>|kept`) names the version L the ledger counted when the rebase found the item gone, and
        what it counted. The removal of L is the first REMOVE of the key after L in the stream (S10: an item's records
        appear in the order of its changes), whatever MODIFYs came between: a REMOVE after L, below every INSERT after L
        (`KeptUntil`), and below the removal that took it so far (`KeptBy`), which a retry out of order may have
        applied first: that one then counts as usual again (`retake`). Of a version read from the table, a REMOVE
        created (`created`) before the read (`ReadFrom`) is an earlier item's: the item read existed then. A deletion
        created by `ReadUntil` may be an earlier item's too: not taken. A removal created before a keep's read is
        looked for in the keep before it, whose item it may have removed."""
        if fold.item is None:
            return None
        before = [
            label
            for label in expiries_kept(fold.item)
            if label.startswith(BACKFILLED) or self.after(version, label, stream_arn)
        ]
        latest_first = sorted(before, key=cmp_to_key(lambda one, other: self.kept_order(other, one, stream_arn)))
        for label in latest_first:
            keep = self.keep_of(fold, f"{FROZEN}{claim_key(fold.key)}|{label}|kept")
            if keep is None:
                return None
            if keep.until is not None and not self.after(keep.until, version, stream_arn):
                return None
            if keep.by is not None and not self.after(keep.by, version, stream_arn):
                return None
            if keep.read_window is None or created is None:
                return keep
            read_from, read_until = keep.read_window
            if created < read_from:
                continue
            if not expiry and created <= read_until:
                return None
            return keep
        return None

    def kept_order(self, one: str, other: str, stream_arn: str) -> int:
        """-1, 0 or 1 as kept version `one` comes before, with or after `other`: the backfill's (`backfill~<n>`, by its
        rebases) before every record's, records' by `after`."""
        one_read, other_read = one.startswith(BACKFILLED), other.startswith(BACKFILLED)
        if one_read and other_read:
            ones, others = int(one[len(BACKFILLED) :]), int(other[len(BACKFILLED) :])
            return (ones > others) - (ones < others)
        if one_read != other_read:
            return -1 if one_read else 1
        if one == other:
            return 0
        return 1 if self.after(one, other, stream_arn) else -1

    def take(
        self, fold: Fold, keep: Keep, version: str, expiry: bool, entity: str | None, old: Boards, stream_arn: str
    ) -> None:
        """The removal at `version` takes the keep. An expiry by TTL keeps its old image, where the item was when it
        expired, in place of what the keep kept (the same, unless a MODIFY came between). Any other removal is a
        deletion: only a replicated expiry carries no TTL identity (S12, S13), and a replicated table is refused (the
        replica guard), so the operator's 'expired' was not true of the kept item, and its count goes back."""
        self.retake(fold, keep)
        keep.by, keep.expiry = version, expiry
        self.report_unsure(fold, keep, stream_arn)
        if expiry:
            fold.add(old, entity)
        fold.add(keep.contribution, keep.entity, sign=-1)

    @staticmethod
    def retake(fold: Fold, keep: Keep) -> None:
        """The keep is not the removal's that took it (`KeptBy`): it counts what it kept again, and the removal counts
        as usual (an expiry by TTL its old image, a deletion nothing). A taking an earlier version left the count in
        place for (`spent`) adds nothing."""
        if keep.by is not None and not keep.spent:
            fold.add(keep.contribution, keep.entity)
        keep.by, keep.expiry, keep.spent = None, False, False

    def bound_keeps(self, fold: Fold, version: str, created: int | None, stream_arn: str) -> None:
        """An INSERT of the key at `version` (a new item under it) proves the removal of every kept version before it
        came before it: each such keep is bounded by it (`KeptUntil`, the lowest such version), and a removal after it
        that took the keep, applied first by a retry out of order, gives it back. A MODIFY proves only that the item
        lived on, maybe the kept version's own item, whose REMOVE then comes after it.

        A version read from the table (`~`) was the item read then, whose own INSERT may still be behind: only an
        INSERT created (`created`) after the read (`ReadUntil`) bounds its keep; one created before it (`ReadFrom`)
        does not; one between, or of no known creation time, marks it (`KeptMaybeUntil`). A keep written without the
        read's time is bounded by none."""
        if fold.item is None:
            return
        for label in sorted(expiries_kept(fold.item)):
            if not (label.startswith(BACKFILLED) or self.after(version, label, stream_arn)):
                continue
            keep = self.keep_of(fold, f"{FROZEN}{claim_key(fold.key)}|{label}|kept")
            if keep is None:
                continue
            if READ_FROM_THE_TABLE in label:
                if keep.read_window is None or (created is not None and created < keep.read_window[0]):
                    continue
                if created is None or created <= keep.read_window[1]:
                    if keep.maybe is None or self.after(keep.maybe, version, stream_arn):
                        keep.maybe = version
                    self.report_unsure(fold, keep, stream_arn)
                    continue
            if keep.until is None or self.after(keep.until, version, stream_arn):
                keep.until = version
            if keep.by is not None and self.after(keep.by, version, stream_arn):
                self.retake(fold, keep)

    def report_unsure(self, fold: Fold, keep: Keep, stream_arn: str) -> None:
        """An expiry by TTL that took a keep above an INSERT that may be the kept item's own (then it is the kept item's
        removal) or a new item's (then the kept item's removal came before it, trimmed, and the kept download is lost
        to its aggregates): reported, never guessed. Once: a keep as read that already says so (the same taker) was
        reported when written so (a report is sent before the write that needs it commits), and a lower INSERT found
        later changes the report's `insert`, not the fact the operator acts on."""
        if not self.taken_unsure(keep.expiry, keep.by, keep.maybe, stream_arn):
            return
        read_by, _, read_expiry, read_maybe = keep.read
        if read_by == keep.by and self.taken_unsure(read_expiry, read_by, read_maybe, stream_arn):
            return
        unsure(
            fold,
            keep,
            keep.maybe,
            "an expiry by TTL took the operator's keep of a version read from the table, after an INSERT of the key "
            "created within the clock margin of that read: the read item's own INSERT (then this is exact) or a new "
            "item's, written after the kept item expired with its removal's record trimmed (then the kept download is "
            "lost: add counts back to entityId's aggregates by hand); not told apart",
        )

    def taken_unsure(self, expiry: bool, by: str | None, maybe: str | None, stream_arn: str) -> bool:
        """Whether an expiry by TTL (`by`) took a keep above an INSERT it may be the kept item's own (`maybe`)."""
        return bool(expiry and by and maybe and self.after(by, maybe, stream_arn))

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
        maybe = (item.get(KEPT_MAYBE_UNTIL) or {}).get("S")
        expiry = bool((item.get(KEPT_BY_EXPIRY) or {}).get("BOOL"))
        contribution = {
            board: Decimal(value["N"]) for board, value in item.get(BASE_CONTRIBUTION, {}).get("M", {}).items()
        }
        window = read_window(item)
        entity = (item.get(BASE_ENTITY) or {}).get("S", "")
        spent = by is not None and not expiry and KEPT_BY_DELETION not in item
        keep = Keep((by, until, expiry, maybe), by, until, expiry, entity, contribution, window, maybe, spent)
        fold.keeps[operators] = keep
        return keep

    def freeze_puts(self, fold: Fold) -> list[dict[str, Any]]:
        """Each expiry's part the batch keeps, once: a Put of its own item (with what `freeze` says it follows),
        conditioned on its absence. The carrier's also names the aggregates the batch took from with no ledger Put to
        name them (`carrier`)."""
        puts = []
        for frozen in fold.freezes:
            item = {CLAIM_KEY: {"S": frozen}} | (fold.follows.get(frozen) or {})
            decreased: set[Aggregate] | None = fold.decreases() if frozen == carrier(fold) else None
            if decreased:
                item[DECREASED] = decreased_value(decreased, "")
            put = {
                "TableName": self.ledger_table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(#key)",
                "ExpressionAttributeNames": {"#key": CLAIM_KEY},
            }
            puts.append({"Put": put})
        return puts

    def keep_writes(self, fold: Fold) -> list[dict[str, Any]]:
        """One Update per keep the batch changed: who took it (`KeptBy`, and whether an expiry by TTL did) and its
        bounds (`KeptUntil`, `KeptMaybeUntil`), conditioned on the item as read."""
        writes = []
        for operators, keep in sorted(fold.keeps.items()):
            if keep.state() == keep.read:
                continue
            read_by, read_until, _, read_maybe = keep.read
            names = {"#key": CLAIM_KEY, "#by": KEPT_BY, "#until": KEPT_UNTIL, "#expiry": KEPT_BY_EXPIRY}
            names |= {"#maybe": KEPT_MAYBE_UNTIL, "#deletion": KEPT_BY_DELETION}
            values: dict[str, Any] = {":expiry": {"BOOL": keep.expiry}}
            sets = ["#expiry = :expiry"]
            removes = []
            if keep.by is not None and not keep.expiry and not keep.spent:
                sets.append("#deletion = :deletion")
                values[":deletion"] = {"BOOL": True}
            else:
                removes.append("#deletion")
            conditions = ["attribute_exists(#key)"]
            changed = (("by", keep.by, read_by), ("until", keep.until, read_until), ("maybe", keep.maybe, read_maybe))
            for name, now, read in changed:
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


def carrier(fold: Fold) -> str:
    """The expiry's own item that names the aggregates a batch took from without moving the key (a keep taken below
    Version: no ledger Put carries its `Decreased`), so that a retry after a crash before their step still does it;
    "" for none."""
    return fold.freezes[-1] if fold.freezes and not fold.applied and fold.decreases() else ""


def unsure(fold: Fold, keep: Keep, insert: str | None, reason: str) -> None:
    """A `keep_taken_unsure` report of `keep`'s taking."""
    counts = {board: str(amount) for board, amount in keep.contribution.items()}
    report_unsure(fold, keep.entity, counts, keep.by, insert, reason)
