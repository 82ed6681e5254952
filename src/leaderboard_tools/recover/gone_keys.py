"""The rebase's keys whose item is gone or cannot count: reported (`gone`, `unplaced`, `rejected`), taken back where
the operator names them deleted, kept counted where it names them expired. Rebaser's part for them (rebase.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_core.attributes import MAX_ENTITY_BYTES, fits_partition_key
from leaderboard_core.claims import (
    ANSWERS,
    BASE_CONTRIBUTION,
    BASE_ENTITY,
    CLAIM_KEY,
    CLOSED,
    EXPIRY_KEPT,
    EXPIRY_PREFIX,
    FOLLOWS,
    GONE_AT,
    GONE_PREFIX,
    KEPT_BY,
    KEPT_BY_DELETION,
    KEPT_BY_EXPIRY,
    KEPT_UNTIL,
    READ_AT,
    READ_FROM,
    READ_FROM_THE_TABLE,
    READ_UNTIL,
    REFUSED,
    REFUSED_FOR,
    download_key_of,
    expiries_kept,
    read_without_window,
    rebases_condition,
    version_label,
)
from leaderboard_tools.backfill.transactions import item_key
from leaderboard_tools.recover.ledger_versions import ATTEMPTS, VERSION, generation, shown_key
from leaderboard_tools.recover.report_answers import Labels, close_write, resolve, touches
from leaderboard_tools.recover.unordered_expiries import gone_why


def report_key(claim: str, label: str) -> dict[str, Any]:
    """The key of a gone report's own item in the ledger table: `gone#<claim key>|<label>`."""
    return {CLAIM_KEY: {"S": f"{GONE_PREFIX}{claim}|{label}"}}


class GoneKeys:
    """Reports and the operator's answers to them; mixed into Rebaser, whose reads, moves and report they use."""

    answer_labels: Mapping[str, Labels] = {}
    """Claim key answered -> the labels of its reports the answer names (None: the key bare), `resolve_answers`."""

    def resolve_answers(self) -> set[str]:
        """The operator's names read against the open reports (report_answers.py): `deleted` and `expired` become the
        keys they answer; a bare key with more than one open report is reported, nothing written for it. Returns the
        keys named both ways (the run is then refused, nothing written)."""
        deleted, refused = resolve(self.deleted, self.gone_reports)
        expired, refused_expired = resolve(self.expired, self.gone_reports)
        for claim, labels in sorted((refused | refused_expired).items()):
            named = ", ".join(f"{claim}@{label}" for label in labels)
            why = f"named bare, but the key has {len(labels)} open gone reports: nothing written; name one: {named}"
            self.report.unplaced.append({"claimKey": claim, "why": why, "aggregates": []})
        self.deleted, self.expired = frozenset(deleted), frozenset(expired)
        self.answer_labels = deleted | expired
        return set(deleted) & set(expired)

    def answers(self, claim: str, label: str) -> bool:
        """Whether the operator's answer to the key reaches its gone report (or ledger version) of `label`."""
        report = self.gone_reports.get(claim, {}).get(label)
        return claim in self.answer_labels and touches(self.answer_labels[claim], label, report)

    def check_rejected(self, claim: str, item: Mapping[str, Any]) -> None:
        """An item whose entity cannot key an aggregate is reported, as the aggregator reports its records."""
        entity = (item.get(self.deployment.names.entity) or {}).get("S")
        if isinstance(entity, str) and not fits_partition_key(entity):
            self.report.rejected.append(
                {
                    "claimKey": claim,
                    "key": shown_key(item_key(item, self.deployment)),
                    "why": f"{self.deployment.names.entity} is longer than DynamoDB's {MAX_ENTITY_BYTES}-byte "
                    "partition key, the aggregates' key: counted nowhere; fix the item and its next record counts it",
                }
            )

    def check_gone(self, claim: str, found_gone: Mapping[str, Any] | None) -> None:
        """A ledger item whose item the table was then found without (`found_gone`, the ledger item as read before),
        read again: if it still counts something, reported, or taken back when the operator named it deleted.

        Taken back only while no record was applied since `found_gone` (Version, and Rebases, unchanged: both only
        move on), and conditioned on that, so the take-back never undoes a write of the key delivered during the run.
        A ledger item moved since is read against its item (the key it keeps): an item written again is moved to;
        one still missing is reported again, for the operator to judge as it is now. So is one at a version no gone
        report of the key named (`gone#` items), when any is open: the operator's answer is to those versions."""
        for _ in range(ATTEMPTS):
            ledger_item = self._get(self.claims, {CLAIM_KEY: {"S": claim}})
            if ledger_item is None or not any(self.state(ledger_item)[1].values()):
                return
            moved_since = found_gone is None or generation(ledger_item) != generation(found_gone)
            key = download_key_of(ledger_item)
            if moved_since and key is not None and self._get(self.deployment.table, key) is not None:
                self.rebase_key(claim, key, gone_checked=True)
                return
            label = version_label(generation(ledger_item)[0], ledger_item)
            reported = self.gone_reports.get(claim, {})
            if moved_since or not self.answers(claim, label) or (reported and label not in reported):
                if self._gone(claim, ledger_item):
                    return
                self.report.retries += 1
                continue
            if claim in self.expired:
                if self._keep_expired(claim, ledger_item):
                    self.report.kept_expired += 1
                    return
                self.report.retries += 1
                continue
            moves = self._moves(ledger_item, "", {})
            if self._commit(claim, {}, ledger_item, "", {}, moves, (self._answered(claim, label),)):
                self.report.taken_back += 1
                self._leave_index(ledger_item, moves)
                return
            self.report.retries += 1
        self._unplaced(claim, f"its ledger item changed under {ATTEMPTS} rebases: run the repair again", ledger_item)

    def _keep_expired(self, claim: str, ledger_item: dict[str, Any]) -> bool:
        """What the handler does for an expiry by TTL, for one whose record the operator says was trimmed: the key moves
        to nothing while the aggregates keep what it counted (retention), in one transaction with the expiry's own
        item, conditioned on the ledger item as read. That item names what the key counted, and `ExpiryKept` the
        version it counted it by: the expiry of that version, if it comes after all, in any order with the key's later
        records, takes the keep and adds nothing. A version read from the table (`~`) gives the keep the read's time
        less and plus the clock margin (`ReadFrom`, `ReadUntil`), which tell the aggregator the INSERTs written after
        the read (they bound it) from the read item's own. False when the transaction was cancelled."""
        put = self._ledger_put(claim, ledger_item, "", {}, {})
        label = version_label(generation(ledger_item)[0], ledger_item)
        put["Put"]["Item"][EXPIRY_KEPT] = {"SS": sorted(expiries_kept(ledger_item) | {label})}
        entity, contribution = self.state(ledger_item)
        read = self._read_window(ledger_item, label)
        kept = {
            "Put": {
                "TableName": self.claims,
                "Item": {
                    CLAIM_KEY: {"S": f"{EXPIRY_PREFIX}{claim}|{label}|kept"},
                    BASE_ENTITY: {"S": entity},
                    BASE_CONTRIBUTION: {"M": {board: {"N": str(amount)} for board, amount in contribution.items()}},
                    **read,
                },
                "ConditionExpression": "attribute_not_exists(#key)",
                "ExpressionAttributeNames": {"#key": CLAIM_KEY},
            }
        }
        return self._transact([put, kept, self._answered(claim, label)])

    def _read_window(self, ledger_item: Mapping[str, Any], label: str) -> dict[str, Any]:
        """Of a version read from the table (`~`) with its read's time, `ReadFrom` and `ReadUntil`: `ReadAt` less and
        plus the clock margin. Every keep of the version, and every report or answer a keep is written from, carries
        them: the aggregator orders a record of the key against the read by its creation time within them."""
        if READ_FROM_THE_TABLE not in label or READ_AT not in ledger_item:
            return {}
        read_at = Decimal(ledger_item[READ_AT]["N"])
        return {
            READ_FROM: {"N": str(math.floor(read_at - Decimal(str(self.margin))))},
            READ_UNTIL: {"N": str(math.ceil(read_at + Decimal(str(self.margin))))},
        }

    def check_not_kept(self) -> None:
        """Each version of a key named expired that a gone report named (its `gone#` item), neither kept (`ExpiryKept`)
        nor followed by an expiry of the key applied that kept what it counted (`Follows`, the label of the key's last
        record when that expiry was applied: only the version's own expiry, the first REMOVE after it, follows it and
        keeps its image): a record of the key was applied between the report and this run and moved it from what the
        expired download counted, which the ledger no longer says. Reported once, never guessed; so is a key named
        expired with no gone report open that counts something and was never kept."""
        left = {entry["claimKey"] for entry in self.report.gone + self.report.unplaced}
        for claim in sorted(self.expired - left):
            ledger_item = self._get(self.claims, {CLAIM_KEY: {"S": claim}})
            kept = expiries_kept(ledger_item or {})
            reports = self.gone_reports.get(claim, {})
            for label in sorted(label for label in reports if self.answers(claim, label)):
                self._judge_expired(claim, label, reports[label], kept, ledger_item)
            if reports or ledger_item is None or EXPIRY_KEPT in ledger_item or not self.state(ledger_item)[1]:
                continue
            why = "named expired, but no gone report of the key is open: nothing kept; run the repair, then answer it"
            self._unplaced(claim, why, ledger_item)
        self._still_refused(self.expired - left)

    def _judge_expired(
        self, claim: str, label: str, report: Mapping[str, Any], kept: set[str], ledger_item: Mapping[str, Any] | None
    ) -> None:
        """The operator's 'expired' to the gone report of `label`: applied, or refused on the report as read. A refusal
        that meets the report changed (its taker given back or replaced by a record read back meanwhile) judges it
        again as it is now."""
        key = report_key(claim, label)
        for _ in range(ATTEMPTS):
            refused = self._refused_answer(report, label)
            if refused:
                if self._refuse(claim, label, report, refused, ledger_item):
                    return
            else:
                followed = self.follows.get(claim, {}).get(self.version_counted(report, ""))
                if followed is not None and self._transact([self._answers(followed, label, report)]):
                    return
                if label not in kept and KEPT_UNTIL in report and self._keep_bounded(claim, report, label):
                    self.report.kept_expired += 1
                    return
                if label in kept:
                    self.dynamodb.delete_item(**self._answered(claim, label)["Delete"])
                    return
                why = (
                    f"named expired, but a record of the key was applied since its item was reported gone at "
                    f"{label}: the expired download is not kept; recount the aggregates its gone report named"
                )
                if self._refuse(claim, label, report, why, ledger_item):
                    return
            self.report.retries += 1
            report = self._get(self.claims, key) or {}
            if not report:
                return
        self._unplaced(claim, f"its gone report of {label} changed under {ATTEMPTS} answers: run again", ledger_item)

    def _refuse(
        self, claim: str, label: str, report: Mapping[str, Any], why: str, ledger_item: Mapping[str, Any] | None
    ) -> bool:
        """An answer not applied: the gone report stays open, marked with why (`Refused`), on its taker as read
        (`KeptBy`), and is reported. Nothing is deleted, so a run that stops anywhere leaves the report for the next to
        refuse or apply again (DeleteItem applies at the table whatever becomes of its caller). False when the taker
        moved since the read (judge it again); a report already gone (answered) is reported."""
        names = {"#refused": REFUSED, "#key": CLAIM_KEY, "#by": KEPT_BY}
        values: dict[str, Any] = {":why": {"S": why}}
        condition = "attribute_exists(#key) AND attribute_not_exists(#by)"
        if KEPT_BY in report:
            condition = "attribute_exists(#key) AND #by = :by"
            values[":by"] = report[KEPT_BY]
        update = {
            "TableName": self.claims,
            "Key": report_key(claim, label),
            "UpdateExpression": "SET #refused = :why",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        try:
            self.dynamodb.update_item(**update)
            why += f"; its gone report of {label} stays open, listed by every run until an answer to it applies"
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            if self._get(self.claims, update["Key"]) is not None:
                return False
        self._unplaced(claim, why, ledger_item, *self.state(report))
        return True

    def _still_refused(self, answered: set[str]) -> None:
        """Each open gone report refused before (`Refused`) whose key this run neither answered nor reported: listed
        again, so that a refusal a run's lost output never showed is still said. Naming it deleted closes it (the
        operator has judged it), on `Refused` and `KeptBy` as read: deleted. A refusal or close an earlier version
        wrote for a removal with no TTL identity (`RefusedFor`, `Closed`) is listed with what it means now
        (`retired_refusal`)."""
        for claim in sorted(set(self.gone_reports) - answered):
            for label, report in sorted(self.gone_reports[claim].items()):
                if REFUSED not in report:
                    continue
                if claim in self.deleted and self.answers(claim, label) and self._close(claim, label, report):
                    self.report.refusals_closed += 1
                    continue
                why = retired_refusal(claim, label, report)
                why += f"; its gone report of {label} stays open until an answer to it applies"
                self._unplaced(claim, why, None, *self.state(report))

    def _close(self, claim: str, label: str, report: Mapping[str, Any]) -> bool:
        """The operator's close of a refused report, on `Refused` and `KeptBy` as read (`_still_refused`)."""
        return self._transact([close_write(self.claims, report_key(claim, label), report)])

    @staticmethod
    def _refused_answer(report: Mapping[str, Any], label: str) -> str:
        """Why the operator's 'expired' cannot be applied to the gone report of `label` and is reported instead, or "".

        A version read from the table (`~`) whose report has no read window (written before windows existed): the
        aggregator would order the key's records against the read by sequence alone and take the read item's own
        INSERT for a write after it. The window is not derived: the ledger item's `ReadAt` is its latest read's, which
        nothing ties to this label once the item has moved on. Whatever removal took the version's keep (`KeptBy`), the
        answer is exact and applied (`_keep_bounded`)."""
        if read_without_window(label, report):
            return (
                f"named expired, but its gone report of {label}, a version read from the table, has no read window "
                "(written before read windows): applied without it, the read item's own INSERT could be taken for a "
                "write after the read; not applied: read back the key's given-up ranges first (recover), then judge "
                "the aggregates it names and add its counts back by hand where still missing"
            )
        return ""

    def _keep_bounded(self, claim: str, report: Mapping[str, Any], label: str) -> bool:
        """A gone version the operator names expired, whose key an expiry of a later item moved from it (kept as that
        item's, `Follows` undone by the aggregator): an INSERT found after the version (`KeptUntil`) proves its removal
        came before. Kept as `--expired-keys` keeps one: its count added back, its keep bounded by that INSERT, the
        ledger item's `ExpiryKept` naming it (on its version as read), the report deleted as read. A removal below the
        bound already applied (`KeptBy`: the version's own) has taken it: the keep says so, and adds nothing, as a
        taker does taking a keep: an expiry by TTL (`KeptByExpiry`) kept its old image, a deletion keeps nothing. A
        lower INSERT read back later gives the keep back and adds its count (expiry_keeps.py). False when cancelled
        (a record applied meanwhile): reported `unplaced`."""
        ledger_item = self._get(self.claims, {CLAIM_KEY: {"S": claim}})
        if ledger_item is None:
            return False
        entity, counts = self.state(report)
        keep_item = {CLAIM_KEY: {"S": f"{EXPIRY_PREFIX}{claim}|{label}|kept"}, KEPT_UNTIL: report[KEPT_UNTIL]}
        keep_item |= {BASE_ENTITY: {"S": entity}, BASE_CONTRIBUTION: report.get(BASE_CONTRIBUTION, {"M": {}})}
        keep_item |= {name: report[name] for name in (READ_FROM, READ_UNTIL, KEPT_BY, KEPT_BY_EXPIRY) if name in report}
        taken = KEPT_BY in report
        if taken and not (report.get(KEPT_BY_EXPIRY) or {}).get("BOOL"):
            keep_item[KEPT_BY_DELETION] = {"BOOL": True}
        names = {"#key": CLAIM_KEY}
        keep = {"TableName": self.claims, "Item": keep_item, "ExpressionAttributeNames": names}
        keep["ConditionExpression"] = "attribute_not_exists(#key)"
        condition, names, values = self._on_version(ledger_item)
        condition += " AND attribute_not_exists(#kept)"
        if EXPIRY_KEPT in ledger_item:
            condition = condition.replace("attribute_not_exists(#kept)", "#kept = :read_kept")
            values[":read_kept"] = ledger_item[EXPIRY_KEPT]
        mark = {"TableName": self.claims, "Key": {CLAIM_KEY: {"S": claim}}, "UpdateExpression": "SET #kept = :kept"}
        mark |= {"ConditionExpression": condition, "ExpressionAttributeNames": names | {"#kept": EXPIRY_KEPT}}
        mark["ExpressionAttributeValues"] = values | {":kept": {"SS": sorted(expiries_kept(ledger_item) | {label})}}
        delete = self._answered(claim, label)["Delete"]
        delete["ExpressionAttributeNames"] = {"#until": KEPT_UNTIL, "#by": KEPT_BY}
        delete["ExpressionAttributeValues"] = {":until": report[KEPT_UNTIL]}
        delete["ConditionExpression"] = "#until = :until AND attribute_not_exists(#by)"
        if KEPT_BY in report:
            delete["ConditionExpression"] = "#until = :until AND #by = :by"
            delete["ExpressionAttributeValues"][":by"] = report[KEPT_BY]
        adds = [self._aggregate_add((entity, board), amount) for board, amount in sorted(counts.items()) if not taken]
        return self._transact([{"Put": keep}, {"Update": mark}, {"Delete": delete}, *adds])

    def _answers(self, frozen: str, label: str, report: Mapping[str, Any]) -> dict[str, Any]:
        """The expiry that followed a gone version taken for its own removal (`Answers`), while its item still says it
        follows it: the aggregator removes both when a record between the two proves otherwise, and then keeps the
        gone version's download, as this answer would have (lambda_src/aggregator/followed_expiries.py). The read
        window of a version read from the table (the report's `ReadFrom`, `ReadUntil`) goes with it: only a record
        created after that read lies between, and the keep the aggregator then writes carries it."""
        sets, names = ["#answers = :label"], {"#answers": ANSWERS, "#follows": FOLLOWS}
        values = {":label": {"S": label}}
        for placeholder, name in (("from", READ_FROM), ("until", READ_UNTIL)):
            if name in report:
                sets.append(f"#{placeholder} = :{placeholder}")
                names[f"#{placeholder}"], values[f":{placeholder}"] = name, report[name]
        update = {
            "TableName": self.claims,
            "Key": {CLAIM_KEY: {"S": frozen}},
            "UpdateExpression": "SET " + ", ".join(sets),
            "ConditionExpression": "#follows = :label",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        return {"Update": update}

    def _gone_mark(self, claim: str, ledger_item: Mapping[str, Any], label: str) -> dict[str, Any]:
        """The ledger item marked gone at `label` (`GoneAt`), on its version as read: the aggregator then names there
        the expiry applied next, if it follows (lambda_src/aggregator/followed_expiries.py)."""
        gone_at = dict((ledger_item.get(GONE_AT) or {}).get("M", {}))
        gone_at.setdefault(label, {"S": ""})
        condition, names, values = self._on_version(ledger_item)
        update = {
            "TableName": self.claims,
            "Key": {CLAIM_KEY: {"S": claim}},
            "UpdateExpression": "SET #gone = :gone",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#gone": GONE_AT, **names},
            "ExpressionAttributeValues": {":gone": {"M": gone_at}, **values},
        }
        return {"Update": update}

    @staticmethod
    def _on_version(ledger_item: Mapping[str, Any]) -> tuple[str, dict[str, str], dict[str, Any]]:
        """A condition that the ledger item is at its version as read (its Version, or with none its Rebases)."""
        if VERSION in ledger_item:
            return "#version = :version", {"#version": VERSION}, {":version": ledger_item[VERSION]}
        rebased, names, values = rebases_condition(ledger_item)
        return f"attribute_not_exists(#version) AND {rebased}", {"#version": VERSION, **names}, values

    def _answered(self, claim: str, label: str) -> dict[str, Any]:
        """The delete of a gone report's own item, once the operator's answer to it is done."""
        return {"Delete": {"TableName": self.claims, "Key": report_key(claim, label)}}

    def _gone(self, claim: str, ledger_item: Mapping[str, Any]) -> bool:
        """The key reported gone, and the version reported kept in its own item for the operator's answer, with the
        ledger item marked (`GoneAt`) on its version as read; False when a record moved it meanwhile."""
        entity, contribution = self.state(ledger_item)
        label = version_label(generation(ledger_item)[0], ledger_item)
        counts = {board: {"N": str(amount)} for board, amount in contribution.items()}
        item = report_key(claim, label) | {BASE_ENTITY: {"S": entity}}
        item |= self._read_window(ledger_item, label)
        put = {"Put": {"TableName": self.claims, "Item": item | {BASE_CONTRIBUTION: {"M": counts}}}}
        if not self._transact([put, self._gone_mark(claim, ledger_item, label)]):
            return False
        self.report.gone.append(
            {
                "claimKey": claim,
                "key": shown_key(download_key_of(ledger_item)),
                "entityId": entity,
                "counts": {board: str(amount) for board, amount in sorted(contribution.items())},
                "version": ledger_item.get(VERSION, {}).get("S"),
                "why": gone_why(self.unordered.get(claim, {})),
                "unorderedExpiries": dict(sorted(self.unordered.get(claim, {}).items())),
            }
        )
        return True

    def _unplaced(
        self,
        claim: str,
        why: str,
        ledger_item: Mapping[str, Any] | None,
        entity: str = "",
        target: Mapping[str, Decimal] | None = None,
    ) -> None:
        """A key left as it is, with the aggregates it may be wrong in: those its ledger item counts, and those its
        item counts (recover keeps the messages that name them)."""
        counted_entity, contribution = self.state(ledger_item) if ledger_item is not None else ("", {})
        aggregates = {(counted_entity, board) for board in contribution} | {(entity, board) for board in target or {}}
        self.report.unplaced.append(
            {"claimKey": claim, "why": why, "aggregates": [list(aggregate) for aggregate in sorted(aggregates)]}
        )


def retired_refusal(claim: str, label: str, report: Mapping[str, Any]) -> str:
    """Why a refused report is listed again. A refusal (`RefusedFor`) or close (`Closed`) an earlier version wrote for
    a removal with no TTL identity is said as what it means now: that removal, a deletion, keeps nothing."""
    judged = (report.get(REFUSED_FOR) or {}).get("S")
    if judged is None:
        return f"answered expired before, not applied: {report[REFUSED]['S']}"
    if CLOSED in report and judged == (report.get(KEPT_BY) or {}).get("S"):
        return (
            f"closed by an earlier version on a removal with no TTL identity ({judged}), a deletion, which keeps "
            f"nothing: the count is right as it is, less any counts added back by hand on that close (take those "
            f"back); --deleted-keys {claim}@{label} deletes the report"
        )
    return (
        f"answered expired before, refused or closed by an earlier version on a removal with no TTL identity "
        f"({judged}), a deletion, which keeps nothing: answer it again, --expired-keys {claim}@{label} applies it, "
        f"--deleted-keys {claim}@{label} closes it as it is; first take back any counts added by hand on it"
    )
