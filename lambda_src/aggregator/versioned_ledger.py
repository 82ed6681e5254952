"""Ledger mode with one reader per shard (STREAM_READERS=1): each download key's ledger item says which record last
moved it, so the mapping's deliveries are applied as they come, in any order, any number of times.

Per download key K, the ledger item (the claims table's, keyed by `leaderboard_core.claims.claim_key`) holds

- `Version`: `<shard id>|<padded sequence number>` of the last record of K applied (absent where the backfill counted
  K and no record of it was applied since),
- `Contribution`: board -> amount, what K counts now; `Entity` the entity it counts for (the image's attribute, never
  the record's Keys: a single-table design keys the item by anything),
- `Decreased`: the aggregates K's last move took something from, which may have reached 0 and must leave the index:
  a board of `Entity`, or `[entity, board]` of an entity K counted for before. It holds them only until that step is
  done: it is then removed on the condition that Version is unchanged, so a retry after a crash still finds them.

A record r of K is applied iff it is after Version: same shard and a higher sequence number (S2), or Version's shard
an ancestor of r's (S7); the backfill's item, or none, is before every record. Applying moves K from Contribution to
what r's new image counts (a REMOVE: nothing), in one TransactWriteItems per entity with the aggregates' ADDs (D2),
each ledger Put conditioned on the item as it was read. Each move ends where a record's image says, so the latest
record of K applied decides K's count. An expiry by TTL is retention (S12): its old image stays counted, once, by its
own item (`expired#<key>|<version>`), wherever it stands against Version (docs/exactly-once-ledger.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from aggregate_store import refused_outright as overflows
from delivery import ShardRef
from download_records import Schema, creation_second
from expiry_keeps import ExpiryKeeps, carrier
from followed_expiries import FollowedExpiries
from leaderboard_core.bookkeeping import pad_sequence
from leaderboard_core.claims import (
    BASE_CONTRIBUTION,
    BASE_ENTITY,
    CLAIM_KEY,
    DECREASED,
    DOWNLOAD_KEY,
    STREAM_FROM,
    UNORDERED,
    claim_key,
    decreased_of,
    decreased_value,
    stored_key,
    version_label,
)
from leaderboard_core.index_layout import ORDER_SCALE, leaderboard_partition, order_tiebreak
from leaderboard_core.source_items import expired_by_ttl
from ledger_fold import VERSION, Aggregate, Fold
from ledger_records import Boards, counted, is_download_record, refused_report, rejection, sequence_of
from stream_shards import StreamShards
from telemetry import logger

TRANSACTION_ITEMS = 100
"""TransactWriteItems "groups up to 100 action requests"."""
ATTEMPTS = 5
"""Reads and folds of a key whose transaction was cancelled, before the invocation fails (the mapping retries it)."""
Report = Callable[[list[dict[str, Any]]], None]
"""Sends reports to the failure queue, or raises: the invocation then fails, and the mapping retries it."""


class Unrelated(Exception):
    """A record of a key in a shard unrelated by lineage to the shard of the key's Version: no order places it."""


class StillInConflict(Exception):
    """Keys whose transactions were cancelled ATTEMPTS times: the invocation fails, and its retry changes nothing
    already applied."""


@dataclass
class Applied:
    """What one apply did: keys moved, expiries kept, and the `refused_record` and `keep_taken_unsure` reports it
    sent."""

    keys: int = 0
    expiries: int = 0
    refused: int = 0
    unsure: int = 0


class VersionedLedger:
    """The fold of a batch's records into their keys' ledger items, and the transactions that write them. The expiries'
    items are its collaborators' (`expiry_keeps`, `followed_expiries`): each is handed the fold of the key at hand."""

    def __init__(
        self,
        client: Any,
        ledger_table: str,
        aggregates_table: str,
        schema: Schema,
        leaderboard_shards: int,
        shards: StreamShards,
    ) -> None:
        self.client = client
        self.ledger_table = ledger_table
        self.aggregates_table = aggregates_table
        self.schema = schema
        self.leaderboard_shards = leaderboard_shards
        self.shards = shards
        self.expiry_keeps = ExpiryKeeps(client, ledger_table, self.after)
        self.followed_expiries = FollowedExpiries(client, ledger_table, self.after)

    # ------------------------------------------------------------------ applying records

    def apply(self, shard: ShardRef, records: list[dict[str, Any]], report: Report) -> Applied:
        """Every record of one shard moved by its key's ledger item, one transaction per entity, retried on conflict.
        Each `refused_record` is sent by `report` before anything that would make it unneeded to a retry commits; so is
        each `keep_taken_unsure`, once per apply: a key folded again after a conflict reports the same fact again, not
        sent twice. A retry of the batch after a crash may still send it again, as SQS may deliver any message twice
        ("at least once"): recover reads identical reports as one (failure_messages.py)."""
        by_key: dict[str, list[dict[str, Any]]] = {}
        for record in sorted(records, key=sequence_of):
            if self.is_download_record(record):
                by_key.setdefault(claim_key(record["dynamodb"]["Keys"]), []).append(record)
        applied = Applied()
        pending = dict(by_key)
        sent: list[dict[str, Any]] = []
        for _ in range(ATTEMPTS):
            if not pending:
                return applied
            folds, refused = self.folds(shard, pending)
            unsure = [message for fold in folds.values() for message in fold.unsure if message not in sent]
            sent += unsure
            report(refused + unsure)
            applied.refused += len(refused)
            applied.unsure += len(unsure)
            self.leave_index(set().union(*(fold.decreased() for fold in folds.values())))
            failed: set[str] = set()
            for group in self.transactions(folds):
                conflicted, reported = self.commit(group, shard, by_key, report)
                failed |= conflicted
                applied.refused += reported
            done = [fold for claim, fold in folds.items() if claim not in failed]
            self.leave_index(set().union(*(fold.decreases() for fold in done)))
            self.forget_decreased(done)
            applied.keys += sum(1 for fold in done if fold.applied)
            applied.expiries += sum(len(fold.freezes) for fold in done)
            pending = {claim: by_key[claim] for claim in failed}
        raise StillInConflict(f"{len(pending)} download keys still in conflict: the mapping retries the batch")

    def folds(
        self, shard: ShardRef, by_key: dict[str, list[dict[str, Any]]]
    ) -> tuple[dict[str, Fold], list[dict[str, Any]]]:
        """Each key's item read strongly consistent, and its records after Version folded into it."""
        folds: dict[str, Fold] = {}
        refused: list[dict[str, Any]] = []
        for claim, records in by_key.items():
            response = self.client.get_item(
                TableName=self.ledger_table, Key={CLAIM_KEY: {"S": claim}}, ConsistentRead=True
            )
            fold = self.read_fold(records[0]["dynamodb"]["Keys"], response.get("Item"))
            try:
                if fold.item is not None and STREAM_FROM in fold.item and VERSION not in fold.item:
                    raise Unrelated("the key's ledger item was written with two readers per shard (StreamFrom)")
                for record in records:
                    self.fold(fold, shard, record)
            except Unrelated as unrelated:
                refused += self.refused(shard, records, fold, str(unrelated))
                kept = self.refused_expiries(shard, records, response.get("Item"))
                if kept.freezes:
                    folds[claim] = kept
                continue
            folds[claim] = fold
        return folds, refused

    def refused_expiries(self, shard: ShardRef, records: list[dict[str, Any]], item: dict[str, Any] | None) -> Fold:
        """The expiries by TTL among a key's refused records, each kept counted as its old image says (`freeze`): an
        expiry is retention, no state of the key (S12), so no order is needed to keep it, and the rebase, which reads
        only the tables, could not give it back. The key's move stays refused (a rebase moves it to its item); the
        item says which Version it was refused against (`Unordered`), for a rebase that finds the key gone."""
        fold = self.read_fold(records[0]["dynamodb"]["Keys"], item)
        for record in records:
            version = f"{shard.shard_id}|{pad_sequence(record['dynamodb']['SequenceNumber'])}"
            if expired_by_ttl(record) and not self.expiry_keeps.frozen(fold, version):
                entity, old = counted(record["dynamodb"].get("OldImage"), self.schema)
                with fold.counting_for(entity):
                    self.expiry_keeps.freeze(fold, version, old, None, entity or "")
                fold.follows[fold.freezes[-1]] = {UNORDERED: {"S": version_label(fold.version, fold.item)}}
        return fold

    def read_fold(self, keys: dict[str, Any], item: dict[str, Any] | None) -> Fold:
        """The key as its ledger item says; with no Entity yet, the first image that counts names it."""
        fold = Fold(keys, item, entity=((item or {}).get(BASE_ENTITY) or {}).get("S", ""))
        fold.gone_at = self.followed_expiries.gone_at_of(item)
        if item is not None:
            fold.version = (item.get(VERSION) or {}).get("S")
            fold.contribution = {
                board: Decimal(value["N"]) for board, value in item.get(BASE_CONTRIBUTION, {}).get("M", {}).items()
            }
        return fold

    def fold(self, fold: Fold, shard: ShardRef, record: dict[str, Any]) -> None:
        """Move the key to what the record's image says, if the record is after the key's Version. An expiry by TTL
        also keeps its old image counted for good, once, wherever it stands (`freeze`)."""
        version = f"{shard.shard_id}|{pad_sequence(record['dynamodb']['SequenceNumber'])}"
        stream = record["dynamodb"]
        removal = record.get("eventName") == "REMOVE"
        created = creation_second(stream)
        if record.get("eventName") == "INSERT":
            self.expiry_keeps.bound_keeps(fold, version, created, shard.stream_arn)
        if record.get("eventName") in ("INSERT", "REMOVE"):
            insert = record.get("eventName") == "INSERT"
            self.followed_expiries.unfollow(fold, version, insert, created, shard.stream_arn, expired_by_ttl(record))
        if removal and not (expired_by_ttl(record) and self.expiry_keeps.frozen(fold, version)):
            entity, old = counted(stream.get("OldImage"), self.schema)
            self.expiry_keeps.removal(fold, version, created, expired_by_ttl(record), entity, old, shard.stream_arn)
        if not self.after(version, fold.version, shard.stream_arn):
            return
        if removal and fold.item is None and not fold.contribution:
            logger.debug("a REMOVE of a key that counts nothing: nothing to take", extra={"keys": fold.key})
        entity, target = (
            (None, {}) if record.get("eventName") == "REMOVE" else counted(stream.get("NewImage"), self.schema)
        )
        if entity is not None and entity != fold.entity:
            fold.move({})
            fold.enter(entity)
        fold.move(target)
        fold.version, fold.applied = version, True

    def after(self, version: str, current: str | None, stream_arn: str) -> bool:
        """Whether a record at `version` follows the key's Version: within a shard by sequence, across shards by
        lineage only (a child's sequence numbers may be lower than its parent's, S2)."""
        if current is None:
            return True
        shard, sequence = version.split("|")
        current_shard, current_sequence = current.split("|")
        if shard == current_shard:
            return sequence > current_sequence
        if current_shard in self.shards.ancestors(stream_arn, shard):
            return True
        if shard in self.shards.ancestors(stream_arn, current_shard):
            return False
        raise Unrelated(f"records of one key in {current_shard} and {shard}, neither descending from the other")

    # ------------------------------------------------------------------ transactions

    def transactions(self, folds: dict[str, Fold]) -> Iterable[list[Fold]]:
        """The applied keys, one entity's together, as few transactions as 100 items allow."""
        by_entity: dict[str, list[Fold]] = {}
        for fold in folds.values():
            if fold.applied or fold.freezes or self.keep_and_follow_writes(fold):
                by_entity.setdefault(fold.entity, []).append(fold)
        for group in by_entity.values():
            chunk: list[Fold] = []
            for fold in group:
                aggregates = {aggregate for other in [*chunk, fold] for aggregate in other.aggregate_moves()}
                items = sum(
                    1 + len(other.freezes) + len(self.keep_and_follow_writes(other)) for other in [*chunk, fold]
                )
                if chunk and items + len(aggregates) > TRANSACTION_ITEMS:
                    yield chunk
                    chunk = []
                chunk.append(fold)
            if chunk:
                yield chunk

    def commit(
        self, group: list[Fold], shard: ShardRef, by_key: dict[str, list[dict[str, Any]]], report: Report
    ) -> tuple[set[str], int]:
        """One transaction: each key's ledger Put on its condition, each aggregate's summed ADD. Returns the keys to
        read and fold again when it was cancelled for a condition or a conflict (all or nothing), and how many reports
        it sent: an aggregate whose number would pass DynamoDB's 38 digits is reported (`overflowed`) as aggregate_store
        reports it in the other modes, and only then is the transaction made without it. The keys' ledger items then
        move, so a retry meets the overflow no more: the report must be out before."""
        summed: dict[Aggregate, Decimal] = {}
        for fold in group:
            for aggregate, amount in fold.aggregate_moves().items():
                summed[aggregate] = summed.get(aggregate, Decimal(0)) + amount
        writes = [self.ledger_put(fold) for fold in group if fold.applied]
        writes += [put for fold in group for put in self.expiry_keeps.freeze_puts(fold)]
        writes += [write for fold in group for write in self.keep_and_follow_writes(fold)]
        overflowing: set[Aggregate] = set()
        reported = 0
        while True:
            adds = [
                aggregate for aggregate, amount in sorted(summed.items()) if amount and aggregate not in overflowing
            ]
            try:
                self.client.transact_write_items(
                    TransactItems=writes + [self.aggregate_add(*aggregate, summed[aggregate]) for aggregate in adds]
                )
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                    raise
                reasons = error.response.get("CancellationReasons") or []
                if overflows(error):
                    named = {adds[index - len(writes)] for index in overflowing_actions(reasons, len(writes))}
                    refused = (named or set(adds)) - overflowing
                    if not refused:
                        raise
                    reports = self.overflowed(shard, group, refused, by_key)
                    report(reports)
                    reported += len(reports)
                    overflowing |= refused
                    continue
                if not any(
                    reason.get("Code") in ("ConditionalCheckFailed", "TransactionConflict") for reason in reasons
                ):
                    raise
                return {claim_key(fold.key) for fold in group}, reported
            return set(), reported

    def ledger_put(self, fold: Fold) -> dict[str, Any]:
        """The key's new item. Its `Decreased` is this batch's alone: those it was read with left the index first."""
        condition, names, values = fold.condition()
        decreased = fold.decreases()
        item = {
            CLAIM_KEY: {"S": claim_key(fold.key)},
            VERSION: {"S": fold.version},
            BASE_CONTRIBUTION: {"M": {board: {"N": str(amount)} for board, amount in fold.contribution.items()}},
            DECREASED: decreased_value(decreased, fold.entity),
            DOWNLOAD_KEY: stored_key(fold.key),
        }
        if fold.entity:
            item[BASE_ENTITY] = {"S": fold.entity}
        item |= self.followed_expiries.carried(fold)
        put: dict[str, Any] = {"TableName": self.ledger_table, "Item": item, "ConditionExpression": condition}
        put["ExpressionAttributeNames"] = names
        if values:
            put["ExpressionAttributeValues"] = values
        return {"Put": put}

    def keep_and_follow_writes(self, fold: Fold) -> list[dict[str, Any]]:
        """The key's writes beside its ledger Put and its expiries' own items: the operator's keeps it changed, and
        what it found of expiries that do not follow a gone version."""
        return self.expiry_keeps.keep_writes(fold) + self.followed_expiries.follow_writes(fold)

    def aggregate_add(self, entity: str, board: str, amount: Decimal) -> dict[str, Any]:
        """An aggregate's ADD; an addition puts it in the index under its board, with its order moved by the amount."""
        schema = self.schema
        names = {"#count": schema.count, "#order": schema.order}
        values: dict[str, Any] = {":amount": {"N": str(amount)}, ":scaled": {"N": str(int(amount * ORDER_SCALE))}}
        if amount < 0:
            expression = "ADD #count :amount, #order :scaled"
        else:
            expression = "ADD #count :amount SET #period = :period, #order = if_not_exists(#order, :tie) + :scaled"
            names["#period"] = schema.period
            values[":period"] = {"S": leaderboard_partition(board, entity, self.leaderboard_shards)}
            values[":tie"] = {"N": str(order_tiebreak(entity, schema.amount is not None))}
        key = {schema.entity: {"S": entity}, schema.sort_key: {"S": board}}
        update = {"TableName": self.aggregates_table, "Key": key, "UpdateExpression": expression}
        return {"Update": {**update, "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}}

    def leave_index(self, aggregates: set[Aggregate]) -> None:
        """Each aggregate a move took from leaves the index if it is at 0 (a conditional REMOVE): those a key's item
        names (a crash before its `Decreased` was removed), before the transaction, and this batch's after it."""
        schema = self.schema
        for entity, board in sorted(aggregates):
            try:
                self.client.update_item(
                    TableName=self.aggregates_table,
                    Key={schema.entity: {"S": entity}, schema.sort_key: {"S": board}},
                    UpdateExpression="REMOVE #period, #order",
                    ConditionExpression="#count <= :zero AND attribute_exists(#period)",
                    ExpressionAttributeNames={"#count": schema.count, "#period": schema.period, "#order": schema.order},
                    ExpressionAttributeValues={":zero": {"N": "0"}},
                )
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise

    def forget_decreased(self, folds: list[Fold]) -> None:
        """Once their aggregates' step is done, a key's `Decreased` is removed, if its Version is still the one this
        batch read or wrote: a newer move's entries are its own. It stays one move's aggregates, never a history."""
        for fold in folds:
            for frozen in sorted((set(fold.frozen_decreased) | {carrier(fold)}) - {""}):
                self.client.update_item(
                    TableName=self.ledger_table,
                    Key={CLAIM_KEY: {"S": frozen}},
                    UpdateExpression="REMOVE #decreased",
                    ExpressionAttributeNames={"#decreased": DECREASED},
                )
            if not (fold.decreases() if fold.applied else decreased_of(fold.item)):
                continue
            condition, names, values = fold.unchanged()
            update: dict[str, Any] = {
                "TableName": self.ledger_table,
                "Key": {CLAIM_KEY: {"S": claim_key(fold.key)}},
                "UpdateExpression": "REMOVE #decreased",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {**names, "#decreased": DECREASED},
            }
            if values:
                update["ExpressionAttributeValues"] = values
            try:
                self.client.update_item(**update)
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise

    # ------------------------------------------------------------------ what a record is, and its reports

    def is_download_record(self, record: dict[str, Any]) -> bool:
        return is_download_record(record, self.schema)

    def counts(self, image: dict[str, Any] | None) -> Boards:
        """What an image counts, board -> amount: nothing for a malformed download or another type of item."""
        return counted(image, self.schema)[1]

    def rejection(self, record: dict[str, Any]) -> str | None:
        return rejection(record, self.schema)

    def refused(self, shard: ShardRef, records: list[dict[str, Any]], fold: Fold, reason: str) -> list[dict[str, Any]]:
        """A `refused_record` per aggregate the key's records or ledger item touch: recover recounts them."""
        aggregates = {(fold.entity, board) for board in fold.contribution}
        for record in records:
            for image in ("NewImage", "OldImage"):
                entity, boards = counted(record["dynamodb"].get(image), self.schema)
                aggregates |= {(entity, board) for board in boards if entity is not None}
        reason = f"ledger: {reason}: no documented order places them; not applied, recount it"
        reason += " (an expiry by TTL among them stays counted by its own item)"
        return [refused_report(shard, fold.key, records, entity, board, reason) for entity, board in sorted(aggregates)]

    def overflowed(
        self, shard: ShardRef, group: list[Fold], overflowing: set[Aggregate], by_key: dict[str, list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """A `refused_record` per aggregate left out of its transaction, naming the keys that moved it: their ledger
        items moved, the aggregate did not; recover recounts it."""
        reason = (
            "ledger: the aggregate's value or order would pass DynamoDB's 38 digits; the keys' ledger items moved "
            "without it: recount it"
        )
        reports = []
        for entity, board in sorted(overflowing):
            for fold in group:
                if fold.aggregate_moves().get((entity, board)):
                    records = by_key[claim_key(fold.key)]
                    reports.append(refused_report(shard, fold.key, records, entity, board, reason))
        return reports


def overflowing_actions(reasons: list[Any], first: int) -> list[int]:
    """The indexes, from `first` on, of a cancelled transaction's actions refused as past 38 digits."""
    return [
        index
        for index, reason in enumerate(reasons)
        if index >= first
        and isinstance(reason, dict)
        and reason.get("Code") == "ValidationError"
        and "overflow" in str(reason.get("Message", "")).lower()
    ]
