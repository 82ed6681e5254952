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
    KEPT_BY,
    KEPT_BY_EXPIRY,
    KEPT_UNTIL,
    READ_FROM,
    READ_FROM_THE_TABLE,
    READ_UNTIL,
    REFUSED,
    REMOVED_BETWEEN,
    claim_key,
    expiries_kept,
)
from ledger_fold import Fold, VersionOrder, read_window, report_unsure


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

    def unfollow(
        self, fold: Fold, version: str, insert: bool, created: int | None, stream_arn: str, by_ttl: bool = False
    ) -> None:
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
        R, if any: so the read-backs' order changes nothing.

        A gone version read from the table (`~`) is the item read then: a record after its label's by sequence lies
        after it only if created (`created`) after the read (`ReadUntil` of the report, or of the answer and the keep
        written from it); one created before `ReadFrom` (the read item's own INSERT, an earlier item's removal) does
        not; one between, or of no known creation time, is reported (`keep_taken_unsure`) and left as not between.

        Where the report is still open and bounded (`KeptUntil`), its label stays in `GoneAt`: a later INSERT between
        lowers the bound, and a REMOVE below the bound is G's removal, which takes the keep the answer writes, as it
        takes a keep (`take_on_report`)."""
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
            follows = (item.get(FOLLOWS) or {}).get("S") == gone
            if not follows and FOLLOWS in item:
                continue
            answered = follows and (item.get(ANSWERS) or {}).get("S") == gone
            report = None if answered else self.gone_report(fold, gone)
            if not follows and (report is None or self.bound_of(fold, report) is None):
                continue
            window = read_window(item if answered else report or {})
            if READ_FROM_THE_TABLE in gone and not self.after_the_read(fold, window, version, created, item):
                continue
            if not answered:
                if follows:
                    fold.unfollowed[frozen] = item
                if insert and report is not None:
                    self.bound_gone(fold, report, version, stream_arn)
                elif not follows and report is not None:
                    self.take_on_report(fold, report, version, by_ttl, stream_arn)
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
            entity, counts = kept_of(item)
            fold.kept_now[gone] = {
                BASE_ENTITY: {"S": entity},
                BASE_CONTRIBUTION: item.get(BASE_CONTRIBUTION) or {"M": {}},
                KEPT_UNTIL: {"S": version},
            } | {name: item[name] for name in (READ_FROM, READ_UNTIL) if name in item}
            fold.add(counts, entity)

    def gone_report(self, fold: Fold, gone: str) -> dict[str, Any] | None:
        """The gone report of `gone` (`gone#<key>|<label>`), still open, as this batch leaves it, or None."""
        report = f"{GONE_PREFIX}{claim_key(fold.key)}|{gone}"
        if report in fold.gone_bounds:
            return fold.gone_bounds[report][0]
        return self.client.get_item(
            TableName=self.ledger_table, Key={CLAIM_KEY: {"S": report}}, ConsistentRead=True
        ).get("Item")

    def bound_gone(self, fold: Fold, item: dict[str, Any], version: str, stream_arn: str) -> None:
        """The gone report, still open, learns the lowest INSERT found after it (`KeptUntil`): the operator's
        `--expired-keys` then keeps that version as a keep bounded by it (with the report's read window), since no
        expiry applied answers it."""
        report = item[CLAIM_KEY]["S"]
        until = self.bound_of(fold, item)
        if until is None or self.after(until, version, stream_arn):
            fold.gone_bounds[report] = (item, version)
            by = self.taker_of(fold, item)
            if by is not None and self.after(by[0], version, stream_arn):
                fold.gone_takers[report] = (item, None, False)

    @staticmethod
    def bound_of(fold: Fold, item: dict[str, Any]) -> str | None:
        """A gone report's bound (`KeptUntil`) as this batch leaves it."""
        report = item[CLAIM_KEY]["S"]
        return fold.gone_bounds[report][1] if report in fold.gone_bounds else (item.get(KEPT_UNTIL) or {}).get("S")

    @staticmethod
    def taker_of(fold: Fold, item: dict[str, Any]) -> tuple[str, bool] | None:
        """A gone report's taker (`KeptBy`, `KeptByExpiry`) as this batch leaves it."""
        report = item[CLAIM_KEY]["S"]
        if report in fold.gone_takers:
            _, by, expiry = fold.gone_takers[report]
            return None if by is None else (by, expiry)
        if KEPT_BY not in item:
            return None
        return item[KEPT_BY]["S"], bool((item.get(KEPT_BY_EXPIRY) or {}).get("BOOL"))

    def take_on_report(self, fold: Fold, item: dict[str, Any], version: str, expiry: bool, stream_arn: str) -> None:
        """A REMOVE of the key at `version` after a gone version G, below the INSERT that bounds G's open report: G's
        removal is the lowest such (S10), and the answer 'expired' keeps G by a keep it has already taken (`KeptBy`):
        an expiry counted its old image when applied, a delete nothing, as each does taking a keep. A lower INSERT
        found later gives it back (`bound_gone`)."""
        until = self.bound_of(fold, item)
        by = self.taker_of(fold, item)
        if until is None or not self.after(until, version, stream_arn):
            return
        if by is None or self.after(by[0], version, stream_arn):
            fold.gone_takers[item[CLAIM_KEY]["S"]] = (item, version, expiry)

    @staticmethod
    def after_the_read(
        fold: Fold, window: tuple[int, int] | None, version: str, created: int | None, item: dict[str, Any]
    ) -> bool:
        """Whether a record of the key created at `created` was written after the read of a version read from the
        table, by the read's window; one no window places is reported and taken for one before it. With no window (an
        item written before reads were recorded), by sequence, as before."""
        if window is None:
            return True
        if created is not None and created < window[0]:
            return False
        if created is not None and created > window[1]:
            return True
        entity, counts = kept_of(item)
        report_unsure(
            fold,
            entity,
            {board: str(amount) for board, amount in counts.items()},
            (item.get(CLAIM_KEY) or {}).get("S", "").removeprefix(f"{EXPIRY_PREFIX}{claim_key(fold.key)}|"),
            version,
            "an expiry that followed a gone version read from the table, a record of the key created within the clock "
            "margin of that read: the read item's own or an earlier item's (then this is exact) or written after the "
            "read (then the gone version's removal came before it, and its download may be lost or counted twice: "
            "recount entityId's aggregates by hand); not told apart",
        )
        return False

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
        unfollowed -= {report.removeprefix(f"{GONE_PREFIX}{claim_key(fold.key)}|") for report in fold.gone_bounds}
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
        for report in sorted(set(fold.gone_bounds) | set(fold.gone_takers)):
            writes.append({"Update": self.report_update(fold, report)})
        for gone, keep in sorted(fold.kept_now.items()):
            operators = f"{EXPIRY_PREFIX}{claim_key(fold.key)}|{gone}|kept"
            put = {"TableName": self.ledger_table, "Item": {CLAIM_KEY: {"S": operators}, **keep}}
            put["ConditionExpression"] = "attribute_not_exists(#key)"
            put["ExpressionAttributeNames"] = {"#key": CLAIM_KEY}
            writes.append({"Put": put})
        if fold.unfollowed and not fold.applied and fold.item is not None:
            writes.append({"Update": self.ledger_update(fold)})
        return writes

    def report_update(self, fold: Fold, report: str) -> dict[str, Any]:
        """An open gone report's bound and taker as this batch leaves them, on the report as read (`KeptUntil`,
        `KeptBy`, and recover's `Refused`: a refusal written after the read cancels the write and the key is folded
        again). A `Closed` or `RefusedFor` left by an earlier version of the tool is left as it is: nothing reads it."""
        item = (fold.gone_bounds.get(report) or fold.gone_takers[report])[0]
        names = {"#key": CLAIM_KEY, "#until": KEPT_UNTIL, "#by": KEPT_BY}
        values: dict[str, Any] = {}
        sets, removes, conditions = [], [], ["attribute_exists(#key)"]
        names |= {"#refused": REFUSED}
        for name, attribute in (("until", KEPT_UNTIL), ("by", KEPT_BY), ("refused", REFUSED)):
            if attribute in item:
                conditions.append(f"#{name} = :read_{name}")
                values[f":read_{name}"] = item[attribute]
            else:
                conditions.append(f"attribute_not_exists(#{name})")
        if report in fold.gone_bounds:
            sets.append("#until = :until")
            values[":until"] = {"S": fold.gone_bounds[report][1]}
        if report in fold.gone_takers:
            _, by, expiry = fold.gone_takers[report]
            names["#expiry"] = KEPT_BY_EXPIRY
            if by is None:
                removes += ["#by", "#expiry"]
            else:
                sets += ["#by = :by", "#expiry = :expiry"]
                values |= {":by": {"S": by}, ":expiry": {"BOOL": expiry}}
        expression = " ".join(
            [*(["SET " + ", ".join(sets)] if sets else []), *(["REMOVE " + ", ".join(removes)] if removes else [])]
        )
        update = {"TableName": self.ledger_table, "Key": {CLAIM_KEY: {"S": report}}, "UpdateExpression": expression}
        update |= {"ConditionExpression": " AND ".join(conditions), "ExpressionAttributeNames": names}
        return update | ({"ExpressionAttributeValues": values} if values else {})

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


def kept_of(item: dict[str, Any]) -> tuple[str, dict[str, Decimal]]:
    """The entity and counts an expiry's own item or a gone report kept (`BaseEntity`, `BaseContribution`)."""
    counts = (item.get(BASE_CONTRIBUTION) or {"M": {}})["M"]
    return (item.get(BASE_ENTITY) or {}).get("S", ""), {board: Decimal(value["N"]) for board, value in counts.items()}
