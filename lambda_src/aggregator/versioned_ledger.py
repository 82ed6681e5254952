"""Ledger mode with one reader per shard (STREAM_READERS=1): each download key's ledger item says which record last
moved it, so the mapping's deliveries are applied as they come, in any order, any number of times.

Per download key K, the ledger item (the claims table's, keyed by `leaderboard_core.claims.claim_key`) holds

- `Version`: `<shard id>|<padded sequence number>` of the last record of K applied (absent where the backfill counted
  K and no record of it was applied since),
- `Contribution`: board -> amount, what K counts now; `Entity` its entity,
- `Decreased`: the boards K's moves took something from, which may have reached 0 and must leave the index.

A record r of K is applied iff it is after Version: same shard and a higher sequence number (S2), or Version's shard
an ancestor of r's (S7); the backfill's item, or none, is before every record. Applying moves K from Contribution to
what r's new image counts (a REMOVE: nothing), in one TransactWriteItems per entity with the aggregates' ADDs (D2),
each ledger Put conditioned on the item as it was read. Each move ends where a record's image says, so the latest
record of K applied decides K's count. An expiry by TTL is retention (S12): its old image stays counted, once, by its
own item (`expired#<key>|<version>`), wherever it stands against Version (docs/exactly-once-ledger.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from delivery import ShardRef
from download_records import Download, Ignored, Schema, parse_record
from leaderboard_core.bookkeeping import pad_sequence
from leaderboard_core.claims import BASE_CONTRIBUTION, BASE_ENTITY, CLAIM_KEY, STREAM_FROM, claim_key
from leaderboard_core.index_layout import ORDER_SCALE, leaderboard_partition, order_tiebreak
from leaderboard_core.source_items import expired_by_ttl
from stream_shards import StreamShards

Boards = dict[str, Decimal]
VERSION = "Version"
DECREASED = "Decreased"
FROZEN = "expired#"
"""An expiry's own ledger item: `expired#<claim key>|<version>`, written once, so its old image is kept once."""
TRANSACTION_ITEMS = 100
"""TransactWriteItems "groups up to 100 action requests"."""
ATTEMPTS = 5
"""Reads and folds of a key whose transaction was cancelled, before the invocation fails (the mapping retries it)."""


class Unrelated(Exception):
    """A record of a key in a shard unrelated by lineage to the shard of the key's Version: no order places it."""


class StillInConflict(Exception):
    """Keys whose transactions were cancelled ATTEMPTS times: the invocation fails, and its retry changes nothing
    already applied."""


@dataclass
class Fold:
    """One key's ledger item as read, and what the batch's records after its Version make of it."""

    key: dict[str, Any]
    item: dict[str, Any] | None
    entity: str = ""
    version: str | None = None
    contribution: Boards = field(default_factory=dict)
    moves: Boards = field(default_factory=dict)
    applied: bool = False
    freezes: list[str] = field(default_factory=list)
    """Expiries by TTL of the key whose part this batch keeps for good: one item each."""

    def condition(self) -> tuple[str, dict[str, str], dict[str, Any]]:
        """The ledger Put's condition: the item as it was read (Version unchanged, or the backfill's, or none)."""
        if self.item is None:
            return "attribute_not_exists(#key)", {"#key": CLAIM_KEY}, {}
        if VERSION not in self.item:
            return "attribute_not_exists(#version)", {"#version": VERSION}, {}
        return "#version = :version", {"#version": VERSION}, {":version": self.item[VERSION]}


@dataclass
class Applied:
    """What one apply did: keys moved, expiries kept, and the reports of records no order places."""

    keys: int = 0
    expiries: int = 0
    refused: list[dict[str, Any]] = field(default_factory=list)


def image_counts(image: dict[str, Any] | None, schema: Schema) -> dict[tuple[str, str], Decimal] | None:
    """What one image counts by the aggregator's parser, (entity, board) -> amount; None if it is no download at all."""
    if not isinstance(image, dict):
        return {}
    parsed = parse_record({"eventName": "INSERT", "dynamodb": {"NewImage": image, "SequenceNumber": "1"}}, schema)
    if isinstance(parsed, Ignored):
        return None
    if not isinstance(parsed, Download):
        return {}
    return {(change.key.entity_id, change.key.board): Decimal(change.amount) for change in parsed.changes}


def sequence_of(record: dict[str, Any]) -> int:
    return int(record["dynamodb"]["SequenceNumber"])


class VersionedLedger:
    """The fold of a batch's records into their keys' ledger items, and the transactions that write them."""

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

    # ------------------------------------------------------------------ applying records

    def apply(self, shard: ShardRef, records: list[dict[str, Any]]) -> Applied:
        """Every record of one shard moved by its key's ledger item, one transaction per entity, retried on conflict."""
        by_key: dict[str, list[dict[str, Any]]] = {}
        for record in sorted(records, key=sequence_of):
            if self.is_download_record(record):
                by_key.setdefault(claim_key(record["dynamodb"]["Keys"]), []).append(record)
        applied = Applied()
        pending = dict(by_key)
        for _ in range(ATTEMPTS):
            if not pending:
                return applied
            folds, refused = self.folds(shard, pending)
            applied.refused += refused
            failed: set[str] = set()
            for group in self.transactions(folds):
                failed |= self.commit(group)
            self.leave_index(folds, failed)
            done = [fold for claim, fold in folds.items() if claim not in failed]
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
                continue
            folds[claim] = fold
        return folds, refused

    def read_fold(self, keys: dict[str, Any], item: dict[str, Any] | None) -> Fold:
        fold = Fold(keys, item, entity=(keys.get(self.schema.entity) or {}).get("S", ""))
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
        if expired_by_ttl(record):
            self.freeze(fold, version, self.counts(stream.get("OldImage")))
        if not self.after(version, fold.version, shard.stream_arn):
            return
        target = {} if record.get("eventName") == "REMOVE" else self.counts(stream.get("NewImage"))
        self.move(fold, target)
        fold.version, fold.applied = version, True

    def freeze(self, fold: Fold, version: str, kept: Boards) -> None:
        """An expiry is retention (S12): the download it ends stays counted as its old image says. It is no state of
        the key, so it is applied by its own identity, not by Version: a rewrite under the key applied first (a retry
        out of order, a child read before a given-up parent) must not hide it."""
        frozen = f"{FROZEN}{claim_key(fold.key)}|{version}"
        if frozen in fold.freezes:
            return
        response = self.client.get_item(
            TableName=self.ledger_table, Key={CLAIM_KEY: {"S": frozen}}, ConsistentRead=True
        )
        if "Item" in response:
            return
        fold.freezes.append(frozen)
        for board, amount in kept.items():
            fold.moves[board] = fold.moves.get(board, Decimal(0)) + amount

    @staticmethod
    def move(fold: Fold, target: Boards) -> None:
        """The aggregates go from what the key counts to `target`, which the key then counts."""
        for board in fold.contribution.keys() | target.keys():
            fold.moves[board] = fold.moves.get(board, Decimal(0)) + target.get(board, Decimal(0))
            fold.moves[board] -= fold.contribution.get(board, Decimal(0))
        fold.contribution = dict(target)

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
            if fold.applied or fold.freezes:
                by_entity.setdefault(fold.entity, []).append(fold)
        for group in by_entity.values():
            chunk: list[Fold] = []
            for fold in group:
                boards = {board for other in [*chunk, fold] for board in other.moves}
                items = sum(1 + len(other.freezes) for other in [*chunk, fold])
                if chunk and items + len(boards) > TRANSACTION_ITEMS:
                    yield chunk
                    chunk = []
                chunk.append(fold)
            if chunk:
                yield chunk

    def commit(self, group: list[Fold]) -> set[str]:
        """One transaction: each key's ledger Put on its condition, each aggregate's summed ADD; the keys to read and
        fold again when it was cancelled (all or nothing), or none."""
        summed: Boards = {}
        for fold in group:
            for board, amount in fold.moves.items():
                summed[board] = summed.get(board, Decimal(0)) + amount
        actions = [self.ledger_put(fold) for fold in group if fold.applied]
        actions += [self.freeze_put(frozen) for fold in group for frozen in fold.freezes]
        actions += [
            self.aggregate_add(group[0].entity, board, amount) for board, amount in sorted(summed.items()) if amount
        ]
        try:
            self.client.transact_write_items(TransactItems=actions)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = error.response.get("CancellationReasons") or []
            if not any(reason.get("Code") in ("ConditionalCheckFailed", "TransactionConflict") for reason in reasons):
                raise
            return {claim_key(fold.key) for fold in group}
        return set()

    def ledger_put(self, fold: Fold) -> dict[str, Any]:
        condition, names, values = fold.condition()
        before = {value["S"] for value in (fold.item or {}).get(DECREASED, {}).get("L", [])}
        decreased = sorted(before | {board for board, amount in fold.moves.items() if amount < 0})
        item = {
            CLAIM_KEY: {"S": claim_key(fold.key)},
            VERSION: {"S": fold.version},
            BASE_ENTITY: {"S": fold.entity},
            BASE_CONTRIBUTION: {"M": {board: {"N": str(amount)} for board, amount in fold.contribution.items()}},
            DECREASED: {"L": [{"S": board} for board in decreased]},
        }
        put: dict[str, Any] = {"TableName": self.ledger_table, "Item": item, "ConditionExpression": condition}
        put["ExpressionAttributeNames"] = names
        if values:
            put["ExpressionAttributeValues"] = values
        return {"Put": put}

    def freeze_put(self, frozen: str) -> dict[str, Any]:
        """An expiry's part, kept once: a Put of its own item, conditioned on its absence."""
        return {
            "Put": {
                "TableName": self.ledger_table,
                "Item": {CLAIM_KEY: {"S": frozen}},
                "ConditionExpression": "attribute_not_exists(#key)",
                "ExpressionAttributeNames": {"#key": CLAIM_KEY},
            }
        }

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

    def leave_index(self, folds: dict[str, Fold], failed: set[str]) -> None:
        """Every aggregate a move took from, at 0, leaves the index: those of this batch's moves, and those the key's
        last move took from (a crash between that move's transaction and this step: the retry finds them)."""
        boards: set[tuple[str, str]] = set()
        for claim, fold in folds.items():
            if fold.item is not None:
                boards |= {(fold.entity, value["S"]) for value in fold.item.get(DECREASED, {}).get("L", [])}
            if (fold.applied or fold.freezes) and claim not in failed:
                boards |= {(fold.entity, board) for board, amount in fold.moves.items() if amount < 0}
        schema = self.schema
        for entity, board in sorted(boards):
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

    # ------------------------------------------------------------------ what a record is

    def is_download_record(self, record: dict[str, Any]) -> bool:
        """An INSERT, MODIFY or REMOVE of an item that is no aggregate (an expiry by TTL too)."""
        if record.get("eventName") not in ("INSERT", "MODIFY", "REMOVE"):
            return False
        stream = record.get("dynamodb") or {}
        images = [stream.get(name) for name in ("NewImage", "OldImage") if isinstance(stream.get(name), dict)]
        return bool(images) and bool(stream.get("Keys")) and not any(map(self.schema.is_aggregate, images))

    def counts(self, image: dict[str, Any] | None) -> Boards:
        """What an image counts, board -> amount: nothing for a malformed download or another type of item."""
        counted = image_counts(image, self.schema) or {}
        return {board: amount for (_, board), amount in counted.items()}

    def rejection(self, record: dict[str, Any]) -> str | None:
        """Why a download's new image cannot count (reported on every delivery, applied or not); None if it can."""
        image = (record.get("dynamodb") or {}).get("NewImage")
        if not self.is_download_record(record) or not isinstance(image, dict):
            return None
        if image_counts(image, self.schema) != {}:
            return None
        parsed = parse_record(
            {"eventName": "INSERT", "dynamodb": {"NewImage": image, "SequenceNumber": "1"}}, self.schema
        )
        return getattr(parsed, "reason", "the new image is no countable download")

    def refused(self, shard: ShardRef, records: list[dict[str, Any]], fold: Fold, reason: str) -> list[dict[str, Any]]:
        """A `refused_record` per aggregate the key's records or ledger item touch: recover recounts them."""
        boards = set(fold.contribution)
        for record in records:
            for image in ("NewImage", "OldImage"):
                boards |= set(self.counts(record["dynamodb"].get(image)))
        sequences = [record["dynamodb"]["SequenceNumber"] for record in records]
        return [
            {
                "kind": "refused_record",
                "entityId": fold.entity,
                "board": board,
                "reason": f"ledger: {reason}: no documented order places them; counted nowhere, recount it",
                "shardId": shard.shard_id,
                "streamArn": shard.stream_arn,
                "sequenceNumber": sequences[0],
                "record": {"keys": fold.key, "sequenceNumbers": sequences},
            }
            for board in sorted(boards)
        ]
