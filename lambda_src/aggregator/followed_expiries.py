"""The gone versions' expiries of the versioned ledger: an expiry by TTL applied while its key was at a version the
rebase reported gone says it `Follows` that version, and the operator's `--expired-keys` takes it for that version's
own removal (`Answers`). Only the first REMOVE of the key after a version is its removal (S2, S10), and the mapping
may deliver a record between the two later (a batch given up and read back, L4): this part finds it, and puts right
what the answer took. VersionedLedger holds one and hands it each key's fold (versioned_ledger.py)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from leaderboard_core.claims import (
    ANSWERS,
    BACKFILLED,
    BASE_CONTRIBUTION,
    BASE_ENTITY,
    CLAIM_KEY,
    EXPIRY_KEPT,
    EXPIRY_PREFIX,
    FOLLOWS,
    GONE_AT,
    GONE_PREFIX,
    KEPT_UNTIL,
    REMOVED_BETWEEN,
    claim_key,
    expiries_kept,
)
from ledger_fold import Fold, VersionOrder


class FollowedExpiries:
    """Gone versions' expiries found not to follow them. It reads and writes their items in the ledger table, and
    orders versions as the ledger does (`after`): given all three, it shares nothing else with VersionedLedger but the
    folds."""

    def __init__(self, client: Any, ledger_table: str, after: VersionOrder) -> None:
        self.client = client
        self.ledger_table = ledger_table
        self.after = after

    @staticmethod
    def gone_at_of(item: dict[str, Any] | None) -> dict[str, str]:
        """A ledger item's `GoneAt`: gone label -> the expiry that followed it, or ""."""
        return {label: value.get("S", "") for label, value in ((item or {}).get(GONE_AT) or {}).get("M", {}).items()}

    def unfollow(self, fold: Fold, version: str, insert: bool, stream_arn: str) -> None:
        """An INSERT or a REMOVE of the key at `version`, between a gone version G and the expiry E that said it
        `Follows` G: G's item was removed at or before it (an INSERT needs no item under the key; the stream records
        of an item "appear in the same sequence as the actual modifications to the item", S10), so E was not G's
        removal. E's item stops saying so. If the operator's `--expired-keys` had taken E for G's own expiry
        (`Answers`), G's removal is the first REMOVE after G: a REMOVE R between only records itself on E
        (`RemovedBetween`, the lowest), as R may be G's removal (an expiry then keeps G as it keeps its old image, a
        delete keeps nothing) or a later item's, if an INSERT lies between G and R. An INSERT below every such R
        proves G's removal came before it, unread: G's download, which the operator says expired, is kept now, as the
        answer would have kept it: its count (E kept the same) added back, and a keep of G bounded by this INSERT
        (`KeptUntil`), which G's own removal, read back later, takes. An INSERT above R leaves it to an INSERT below
        R, if any: so the read-backs' order changes nothing."""
        for gone, expiry in sorted(fold.gone_at.items()):
            if not expiry or not self.between(gone, version, expiry, stream_arn):
                continue
            frozen = f"{EXPIRY_PREFIX}{claim_key(fold.key)}|{expiry}"
            if frozen in fold.unfollowed:
                continue
            response = self.client.get_item(
                TableName=self.ledger_table, Key={CLAIM_KEY: {"S": frozen}}, ConsistentRead=True
            )
            item = response.get("Item") or {}
            if (item.get(FOLLOWS) or {}).get("S") != gone:
                continue
            if (item.get(ANSWERS) or {}).get("S") != gone:
                fold.unfollowed[frozen] = item
                if insert:
                    self.bound_gone(fold, gone, version, stream_arn)
                continue
            removed = fold.between[frozen][1] if frozen in fold.between else (item.get(REMOVED_BETWEEN) or {}).get("S")
            if not insert:
                if removed is None or self.after(removed, version, stream_arn):
                    fold.between[frozen] = (item, version)
                continue
            if removed is not None and self.after(version, removed, stream_arn):
                continue
            fold.between.pop(frozen, None)
            fold.unfollowed[frozen] = item
            entity = (item.get(BASE_ENTITY) or {}).get("S", "")
            counts = item.get(BASE_CONTRIBUTION) or {"M": {}}
            fold.kept_now[gone] = {
                BASE_ENTITY: {"S": entity},
                BASE_CONTRIBUTION: counts,
                KEPT_UNTIL: {"S": version},
            }
            fold.add({board: Decimal(value["N"]) for board, value in counts["M"].items()}, entity)

    def bound_gone(self, fold: Fold, gone: str, version: str, stream_arn: str) -> None:
        """The gone report of `gone`, still open, learns the lowest INSERT found after it (`KeptUntil`): the operator's
        `--expired-keys` then keeps that version as a keep bounded by it, since no expiry applied answers it."""
        report = f"{GONE_PREFIX}{claim_key(fold.key)}|{gone}"
        item = self.client.get_item(
            TableName=self.ledger_table, Key={CLAIM_KEY: {"S": report}}, ConsistentRead=True
        ).get("Item")
        if item is None:
            return
        until = (item.get(KEPT_UNTIL) or {}).get("S")
        if until is None or self.after(until, version, stream_arn):
            fold.gone_bounds[report] = (item, version)

    def between(self, gone: str, version: str, expiry: str, stream_arn: str) -> bool:
        """Whether a record at `version` lies after the gone label (every record follows a backfill's) and before
        the expiry."""
        return (gone.startswith(BACKFILLED) or self.after(version, gone, stream_arn)) and self.after(
            expiry, version, stream_arn
        )

    def carried(self, fold: Fold) -> dict[str, Any]:
        """What the key's ledger Put carries beside its move: the keeps (`ExpiryKept`, with those this batch wrote)
        and the gone labels an expiry followed (`GoneAt`; one none followed is past once Version moves)."""
        item: dict[str, Any] = {}
        kept = expiries_kept(fold.item or {}) | set(fold.kept_now)
        if kept:
            item[EXPIRY_KEPT] = {"SS": sorted(kept)}
        unfollowed = {(item.get(FOLLOWS) or {}).get("S", "") for item in fold.unfollowed.values()}
        gone_at = {label: {"S": expiry} for label, expiry in fold.gone_at.items() if expiry and label not in unfollowed}
        if gone_at:
            item[GONE_AT] = {"M": gone_at}
        return item

    def follow_writes(self, fold: Fold) -> list[dict[str, Any]]:
        """The batch's part for expiries found not to follow: each one's item without `Follows` and `Answers`
        (conditioned on both as read, and on `RemovedBetween` as read: a REMOVE between that another invocation
        records after the read may be G's removal, which keeps G itself, so a fold that did not see it must be refused
        and read again, L2), each keep it writes (on its absence), and, where no ledger Put moves the key, the ledger
        item's `ExpiryKept` and `GoneAt`, conditioned on the item as read."""
        writes: list[dict[str, Any]] = []
        for frozen, item in sorted(fold.unfollowed.items()):
            names = {"#follows": FOLLOWS, "#answers": ANSWERS, "#removed": REMOVED_BETWEEN}
            values: dict[str, Any] = {":follows": item[FOLLOWS]}
            condition = "#follows = :follows AND attribute_not_exists(#answers)"
            if ANSWERS in item:
                condition = "#follows = :follows AND #answers = :answers"
                values[":answers"] = item[ANSWERS]
            removed = "attribute_not_exists(#removed)"
            if REMOVED_BETWEEN in item:
                removed = "#removed = :removed"
                values[":removed"] = item[REMOVED_BETWEEN]
            update = {
                "TableName": self.ledger_table,
                "Key": {CLAIM_KEY: {"S": frozen}},
                "UpdateExpression": "REMOVE #follows, #answers",
                "ConditionExpression": f"{condition} AND {removed}",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
            writes.append({"Update": update})
        for frozen, (item, removed) in sorted(fold.between.items()):
            writes.append({"Update": self.removed_between(frozen, item, removed)})
        for report, (item, until) in sorted(fold.gone_bounds.items()):
            names = {"#key": CLAIM_KEY, "#until": KEPT_UNTIL}
            values = {":until": {"S": until}}
            condition = "attribute_exists(#key) AND attribute_not_exists(#until)"
            if KEPT_UNTIL in item:
                condition = "attribute_exists(#key) AND #until = :read"
                values[":read"] = item[KEPT_UNTIL]
            update = {
                "TableName": self.ledger_table,
                "Key": {CLAIM_KEY: {"S": report}},
                "ConditionExpression": condition,
            }
            update |= {"UpdateExpression": "SET #until = :until", "ExpressionAttributeNames": names}
            writes.append({"Update": update | {"ExpressionAttributeValues": values}})
        for gone, keep in sorted(fold.kept_now.items()):
            operators = f"{EXPIRY_PREFIX}{claim_key(fold.key)}|{gone}|kept"
            put = {"TableName": self.ledger_table, "Item": {CLAIM_KEY: {"S": operators}, **keep}}
            put["ConditionExpression"] = "attribute_not_exists(#key)"
            put["ExpressionAttributeNames"] = {"#key": CLAIM_KEY}
            writes.append({"Put": put})
        if fold.unfollowed and not fold.applied and fold.item is not None:
            writes.append({"Update": self.ledger_update(fold)})
        return writes

    def removed_between(self, frozen: str, item: dict[str, Any], removed: str) -> dict[str, Any]:
        """An answered expiry's item learns the lowest REMOVE read back between (`RemovedBetween`), on the item as
        read: `Follows`, `Answers` and the REMOVE it said before (or none)."""
        names = {"#follows": FOLLOWS, "#answers": ANSWERS, "#removed": REMOVED_BETWEEN}
        values = {":follows": item[FOLLOWS], ":answers": item[ANSWERS], ":removed": {"S": removed}}
        condition = "#follows = :follows AND #answers = :answers AND attribute_not_exists(#removed)"
        if REMOVED_BETWEEN in item:
            condition = "#follows = :follows AND #answers = :answers AND #removed = :read"
            values[":read"] = item[REMOVED_BETWEEN]
        return {
            "TableName": self.ledger_table,
            "Key": {CLAIM_KEY: {"S": frozen}},
            "UpdateExpression": "SET #removed = :removed",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def ledger_update(self, fold: Fold) -> dict[str, Any]:
        """The ledger item's `ExpiryKept` and `GoneAt` as `carried` says, its move untouched, on the item as read."""
        condition, names, values = fold.condition()
        carried = self.carried(fold)
        sets, removes = [], []
        for placeholder, name in (("#kept", EXPIRY_KEPT), ("#gone", GONE_AT)):
            names[placeholder] = name
            if name in carried:
                sets.append(f"{placeholder} = :new_{placeholder[1:]}")
                values[f":new_{placeholder[1:]}"] = carried[name]
            else:
                removes.append(placeholder)
        expression = " ".join(
            [*(["SET " + ", ".join(sets)] if sets else []), *(["REMOVE " + ", ".join(removes)] if removes else [])]
        )
        update = {
            "TableName": self.ledger_table,
            "Key": {CLAIM_KEY: {"S": claim_key(fold.key)}},
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
        }
        if values:
            update["ExpressionAttributeValues"] = values
        return update
