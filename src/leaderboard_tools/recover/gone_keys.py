"""The rebase's keys whose item is gone or cannot count: reported (`gone`, `unplaced`, `rejected`), taken back where
the operator names them deleted, kept counted where it names them expired. Rebaser's part for them (rebase.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from leaderboard_core.attributes import MAX_ENTITY_BYTES, fits_partition_key
from leaderboard_core.claims import (
    BASE_CONTRIBUTION,
    BASE_ENTITY,
    CLAIM_KEY,
    EXPIRY_KEPT,
    EXPIRY_PREFIX,
    GONE_PREFIX,
    READ_AT,
    READ_FROM,
    READ_UNTIL,
    download_key_of,
    expiries_kept,
    version_label,
)
from leaderboard_tools.backfill.transactions import item_key
from leaderboard_tools.recover.ledger_versions import ATTEMPTS, REBASED, VERSION, generation, shown_key


class GoneKeys:
    """Reports and the operator's answers to them; mixed into Rebaser, whose reads, moves and report they use."""

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
            if moved_since or claim not in self.deleted | self.expired or (reported and label not in reported):
                self._gone(claim, ledger_item)
                return
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
        read = {}
        if REBASED in label and READ_AT in ledger_item:
            read_at = Decimal(ledger_item[READ_AT]["N"])
            read[READ_FROM] = {"N": str(math.floor(read_at - Decimal(str(self.margin))))}
            read[READ_UNTIL] = {"N": str(math.ceil(read_at + Decimal(str(self.margin))))}
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
            for label in sorted(reports):
                if self.version_counted(reports[label], "") in self.follows.get(claim, set()):
                    continue
                if label not in kept:
                    why = (
                        f"named expired, but a record of the key was applied since its item was reported gone at "
                        f"{label}: the expired download is not kept; recount the aggregates its gone report named"
                    )
                    self._unplaced(claim, why, ledger_item)
                self.dynamodb.delete_item(**self._answered(claim, label)["Delete"])
            if reports or ledger_item is None or EXPIRY_KEPT in ledger_item or not self.state(ledger_item)[1]:
                continue
            why = "named expired, but no gone report of the key is open: nothing kept; run the repair, then answer it"
            self._unplaced(claim, why, ledger_item)

    def _answered(self, claim: str, label: str) -> dict[str, Any]:
        """The delete of a gone report's own item, once the operator's answer to it is done."""
        return {"Delete": {"TableName": self.claims, "Key": {CLAIM_KEY: {"S": f"{GONE_PREFIX}{claim}|{label}"}}}}

    def _gone(self, claim: str, ledger_item: Mapping[str, Any]) -> None:
        """The key reported gone, and the version reported kept in its own item for the operator's answer."""
        entity, contribution = self.state(ledger_item)
        label = version_label(generation(ledger_item)[0], ledger_item)
        counts = {board: {"N": str(amount)} for board, amount in contribution.items()}
        item = {CLAIM_KEY: {"S": f"{GONE_PREFIX}{claim}|{label}"}, BASE_ENTITY: {"S": entity}}
        self.dynamodb.put_item(TableName=self.claims, Item=item | {BASE_CONTRIBUTION: {"M": counts}})
        self.report.gone.append(
            {
                "claimKey": claim,
                "key": shown_key(download_key_of(ledger_item)),
                "entityId": entity,
                "counts": {board: str(amount) for board, amount in sorted(contribution.items())},
                "version": ledger_item.get(VERSION, {}).get("S"),
                "why": "the key counts here but its item is not in the table: deleted (to take back: name it to "
                "--deleted-keys) or expired by TTL (to keep counted: name it to --expired-keys), its record no longer "
                "in the stream; not told apart, left as it is until named",
            }
        )

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
