"""Ledger mode with one reader per shard (docs/exactly-once-ledger.md, "Two readers per shard today, one next"):
the design the product would ship next, in the model's words, held to the ledger histories beside ledger_design.py's.

The handler applies only the records the mapping delivers: no GetRecords, no checkpoint of its own. Per download key
K, a versioned ledger item (the claims table's, keyed by `leaderboard_core.claims.claim_key`) holds

- `Version`: `<shard id>|<padded sequence number>` of the last record of K applied (absent where the backfill counted
  K and no record of it was applied since),
- `Contribution`: board -> amount, what K counts now; `Entity` its entity,
- `Decreased`: the boards K's moves took something from, which may have reached 0 and must leave the index.

A record r of K is applied iff it is after Version: same shard and a higher sequence number, or Version's shard an
ancestor of r's (lineage from each shard's ParentShardId); the backfill's item, or none, is before every record. A
record not after Version changes nothing (a duplicate, or an older record retried after a newer one); a record whose
shard and Version's are unrelated by lineage is reported (`refused_record`) and never guessed. Applying moves K from
Contribution to what r's new image counts (a REMOVE: nothing), in one TransactWriteItems per entity: each key's ledger
Put conditioned on the Version read, and one ADD per aggregate of the summed moves. A condition that fails re-reads
and retries. Because each move ends where a record's image says, whatever came before, the latest record of K applied
decides K's count: order, duplicates and bisection do not matter, and every record need only be delivered once at
least. An expiry by Time to Live is no state but retention: its old image stays counted, once, by the expiry's own
item (`expired#<key>|<version>`), wherever the expiry stands against Version.

What the mapping may not deliver: a batch it gives up names its range on the failure queue, and recover reads that
range back (GetShardIterator, GetRecords: a momentary reader) and applies it like any delivery; read too late, the
range is trimmed and recover recounts. A mapping paused past the retention skips trimmed records without a word
(L6): the handler keeps per shard the highest record delivered and its creation time, and the records of invocations
not yet finished, and reports `records_trimmed` wherever a record that old may have been skipped (at the next delivery
of the shard or its first child, and on the schedule): a conservative test that reads nothing from the stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from failure_messages import send_to_failure_queue
from leaderboard_core.bookkeeping import pad_sequence
from leaderboard_core.claims import BASE_CONTRIBUTION, CLAIM_KEY, claim_key
from leaderboard_core.index_layout import ORDER_SCALE, leaderboard_partition, order_tiebreak
from leaderboard_core.source_items import expired_by_ttl
from tests.stream_model.aws_delivery import RETENTION_SECONDS
from tests.stream_model.designs import ShardWatermarkDesign, schema_of
from tests.stream_model.environment import FAILURE_QUEUE_URL, PROGRESS_TABLE, STREAM_ARN, TABLE, Design, Environment
from tests.stream_model.histories import History
from tests.stream_model.ledger_backfill import LEDGER_TABLE, backfill_item, image_counts

Boards = dict[str, Decimal]
VERSION = "Version"
CONTRIBUTION = BASE_CONTRIBUTION
ENTITY = "Entity"
DECREASED = "Decreased"
FROZEN = "expired#"
NOTE = "one-reader|"
"""The progress table's items of this design: `one-reader|<shard id>`, what the handler noted of a shard."""
LINEAGE = "one-reader-parent|"
"""`one-reader-parent|<shard id>`: the shard's ParentShardId as DescribeStream gave it ("" for none)."""
TRANSACTION_ITEMS = 100
ATTEMPTS = 5


class Unrelated(Exception):
    """A record of a key in a shard unrelated by lineage to the shard of the key's Version: no order places it."""


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
    """Expiries by TTL of the key whose part this batch keeps for good: one item each, `expired#<key>|<version>`."""

    def condition(self) -> tuple[str, dict[str, str], dict[str, Any]]:
        """The ledger Put's condition: the item as it was read (Version unchanged, or the backfill's, or none)."""
        if self.item is None:
            return "attribute_not_exists(#key)", {"#key": CLAIM_KEY}, {}
        if VERSION not in self.item:
            return "attribute_not_exists(#version)", {"#version": VERSION}, {}
        return "#version = :version", {"#version": VERSION}, {":version": self.item[VERSION]}


class OneReaderDesign(Design):
    """Ledger mode whose only reader of a shard is the mapping: a versioned ledger item per download key."""

    uses_windows = True
    """The window event names its shard (L1); the state is not used."""
    reports_rejected = True
    sweeps_on_schedule = True
    keeps_index = True
    takes_config = True
    expiry_moves_its_key = True
    recount = ShardWatermarkDesign.recount

    def __init__(self, env: Environment, config: Any) -> None:
        self.env = env
        self.schema = schema_of(config, retractions=True)
        self.leaderboard_shards = 1
        self.stream_created = env.clock()
        """When the stream began (its label): before the first invocation, the retention may already have trimmed."""
        self.open_shards: set[str] = set()
        """The shards the last DescribeStream listed open."""
        self.name = f"one reader (the model's), {config.aggregate_writes}"

    # ------------------------------------------------------------------ the handler

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        if "lineageSweep" in event:
            self.sweep()
            return {"swept": True}
        if "window" not in event:
            return {"refused": "one reader per shard: only the mapping's events are applied"}
        records = list(event.get("Records") or [])
        if not records:
            return {"state": {}, "batchItemFailures": []}
        shard = str(event["shardId"])
        note = self.note_of(shard)
        messages = self.check_trimmed(shard, note, min(records, key=_sequence_of))
        messages += [self.rejected(shard, record) for record in records if self.is_rejected(record)]
        self.send(messages)
        self.note_delivered(shard, note, records, vouched=any(m["kind"] == "records_trimmed" for m in messages))
        self.apply(shard, records)
        self.note_finished(shard, records)
        return {"state": {}, "batchItemFailures": []}

    def backfill(self, image: dict[str, Any]) -> None:
        backfill_item(self.env.dynamodb, self.schema, image, self.leaderboard_shards)

    # ------------------------------------------------------------------ applying records

    def apply(self, shard: str, records: list[dict[str, Any]]) -> None:
        """Every record of the batch moved by its key's ledger item, one transaction per entity, retried on conflict."""
        by_key: dict[str, list[dict[str, Any]]] = {}
        for record in sorted(records, key=_sequence_of):
            if self.is_download_record(record):
                by_key.setdefault(claim_key(record["dynamodb"]["Keys"]), []).append(record)
        pending = dict(by_key)
        for _ in range(ATTEMPTS):
            if not pending:
                return
            folds, refused = self.folds(shard, pending)
            self.send(refused)
            failed: set[str] = set()
            for group in self.transactions(folds):
                failed |= self.commit(group)
            self.leave_index(folds, failed)
            pending = {claim: by_key[claim] for claim in failed}
        raise RuntimeError(f"{len(pending)} download keys still in conflict: the mapping retries the batch")

    def folds(
        self, shard: str, by_key: dict[str, list[dict[str, Any]]]
    ) -> tuple[dict[str, Fold], list[dict[str, Any]]]:
        """Each key's item read strongly consistent, and its records after Version folded into it."""
        folds: dict[str, Fold] = {}
        refused: list[dict[str, Any]] = []
        for claim, records in by_key.items():
            response = self.env.dynamodb.get_item(
                TableName=LEDGER_TABLE, Key={CLAIM_KEY: {"S": claim}}, ConsistentRead=True
            )
            fold = self.read_fold(records[0]["dynamodb"]["Keys"], response.get("Item"))
            try:
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
                board: Decimal(value["N"]) for board, value in item.get(CONTRIBUTION, {}).get("M", {}).items()
            }
        return fold

    def fold(self, fold: Fold, shard: str, record: dict[str, Any]) -> None:
        """Move the key to what the record's image says, if the record is after the key's Version. An expiry by TTL
        also keeps its old image counted for good, once, wherever it stands (`freeze`)."""
        version = f"{shard}|{pad_sequence(record['dynamodb']['SequenceNumber'])}"
        stream = record["dynamodb"]
        if expired_by_ttl(record):
            self.freeze(fold, version, self.counts(stream.get("OldImage")))
        if not self.after(version, fold.version):
            return
        target = {} if record.get("eventName") == "REMOVE" else self.counts(stream.get("NewImage"))
        self.move(fold, target, target)
        fold.version, fold.applied = version, True

    def freeze(self, fold: Fold, version: str, kept: Boards) -> None:
        """An expiry is retention (S12): the download it ends stays counted as its old image says, beside whatever the
        key counts later. It is no state of the key, so it is applied by its own identity, not by Version: a rewrite
        under the key applied first (a retry out of order, a child read before a given-up parent) must not hide it."""
        frozen = f"{FROZEN}{claim_key(fold.key)}|{version}"
        if frozen in fold.freezes:
            return
        response = self.env.dynamodb.get_item(
            TableName=LEDGER_TABLE, Key={CLAIM_KEY: {"S": frozen}}, ConsistentRead=True
        )
        if "Item" in response:
            return
        fold.freezes.append(frozen)
        for board, amount in kept.items():
            fold.moves[board] = fold.moves.get(board, Decimal(0)) + amount

    def move(self, fold: Fold, target: Boards, kept: Boards) -> None:
        """The aggregates go from what the key counts to `target`; the key then counts `kept` (an expiry keeps none)."""
        for board in fold.contribution.keys() | target.keys():
            fold.moves[board] = fold.moves.get(board, Decimal(0)) + target.get(board, Decimal(0))
            fold.moves[board] -= fold.contribution.get(board, Decimal(0))
        fold.contribution = dict(kept)

    def after(self, version: str, current: str | None) -> bool:
        """Whether a record at `version` follows the key's Version: within a shard by sequence, across shards by
        lineage only (a child's sequence numbers may be lower than its parent's, S2)."""
        if current is None:
            return True
        shard, sequence = version.split("|")
        current_shard, current_sequence = current.split("|")
        if shard == current_shard:
            return sequence > current_sequence
        if current_shard in self.ancestors(shard):
            return True
        if shard in self.ancestors(current_shard):
            return False
        raise Unrelated(f"records of one key in {current_shard} and {shard}, neither descending from the other")

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
        """One transaction: each key's ledger Put on its condition, each aggregate's summed ADD; the keys whose
        condition failed (re-read and folded again), or none."""
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
            self.env.dynamodb.transact_write_items(TransactItems=actions)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = error.response.get("CancellationReasons") or []
            if not any(reason.get("Code") in ("ConditionalCheckFailed", "TransactionConflict") for reason in reasons):
                raise
            return {claim_key(fold.key) for fold in group}  # all or nothing: every key of it is read and folded again
        return set()

    def ledger_put(self, fold: Fold) -> dict[str, Any]:
        condition, names, values = fold.condition()
        before = {value["S"] for value in (fold.item or {}).get(DECREASED, {}).get("L", [])}
        decreased = sorted(before | {board for board, amount in fold.moves.items() if amount < 0})
        item = {
            CLAIM_KEY: {"S": claim_key(fold.key)},
            VERSION: {"S": fold.version},
            ENTITY: {"S": fold.entity},
            CONTRIBUTION: {"M": {board: {"N": str(amount)} for board, amount in fold.contribution.items()}},
            DECREASED: {"L": [{"S": board} for board in decreased]},
        }
        put: dict[str, Any] = {"TableName": LEDGER_TABLE, "Item": item, "ConditionExpression": condition}
        put["ExpressionAttributeNames"] = names
        if values:
            put["ExpressionAttributeValues"] = values
        return {"Put": put}

    @staticmethod
    def freeze_put(frozen: str) -> dict[str, Any]:
        """An expiry's part, kept once: a Put of its own item, conditioned on its absence."""
        return {
            "Put": {
                "TableName": LEDGER_TABLE,
                "Item": {CLAIM_KEY: {"S": frozen}},
                "ConditionExpression": "attribute_not_exists(#key)",
                "ExpressionAttributeNames": {"#key": CLAIM_KEY},
            }
        }

    def aggregate_add(self, entity: str, board: str, amount: Decimal) -> dict[str, Any]:
        """An aggregate's ADD; an addition puts it in the index under its board, with its order moved by the amount."""
        names = {"#count": self.schema.count, "#order": self.schema.order}
        values: dict[str, Any] = {":amount": {"N": str(amount)}, ":scaled": {"N": str(int(amount * ORDER_SCALE))}}
        if amount < 0:
            expression = "ADD #count :amount, #order :scaled"
        else:
            expression = "ADD #count :amount SET #period = :period, #order = if_not_exists(#order, :tie) + :scaled"
            names["#period"] = self.schema.period
            values[":period"] = {"S": leaderboard_partition(board, entity, self.leaderboard_shards)}
            values[":tie"] = {"N": str(order_tiebreak(entity, self.schema.amount is not None))}
        key = {self.schema.entity: {"S": entity}, self.schema.sort_key: {"S": board}}
        update = {"TableName": TABLE, "Key": key, "UpdateExpression": expression}
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
        for entity, board in sorted(boards):
            try:
                self.env.dynamodb.update_item(
                    TableName=TABLE,
                    Key={self.schema.entity: {"S": entity}, self.schema.sort_key: {"S": board}},
                    UpdateExpression="REMOVE #period, #order",
                    ConditionExpression="#count <= :zero AND attribute_exists(#period)",
                    ExpressionAttributeNames={
                        "#count": self.schema.count,
                        "#period": self.schema.period,
                        "#order": self.schema.order,
                    },
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

    def is_rejected(self, record: dict[str, Any]) -> bool:
        """A download whose new image the parser rejects: reported on every delivery, applied or not."""
        image = (record.get("dynamodb") or {}).get("NewImage")
        return self.is_download_record(record) and isinstance(image, dict) and image_counts(image, self.schema) == {}

    # ------------------------------------------------------------------ lineage

    def ancestors(self, shard: str) -> list[str]:
        """The shard's ancestors, nearest first, as far as lineage is known (at most 1,000)."""
        found: list[str] = []
        parent = self.parent_of(shard)
        while parent and parent not in found and len(found) < 1000:
            found.append(parent)
            parent = self.parent_of(parent)
        return found

    def parent_of(self, shard: str) -> str | None:
        """The shard's parent ("" for none), recorded once from DescribeStream; None while unknown (a shard deleted
        before any reader described it)."""
        item = self.env.dynamodb.get_item(TableName=PROGRESS_TABLE, Key={"ShardKey": {"S": LINEAGE + shard}})
        if "Item" in item:
            return str(item["Item"]["Parent"]["S"])
        listed = self.describe()
        for shard_id, parent in listed.items():
            self.env.dynamodb.put_item(
                TableName=PROGRESS_TABLE, Item={"ShardKey": {"S": LINEAGE + shard_id}, "Parent": {"S": parent}}
            )
        return listed.get(shard)

    def describe(self) -> dict[str, str]:
        """Every shard DescribeStream lists, and its parent ("" for none), over all its pages (S8)."""
        listed: dict[str, str] = {}
        start: str | None = None
        for _ in range(1000):
            parameters: dict[str, Any] = {"StreamArn": STREAM_ARN, "Limit": 100}
            if start is not None:
                parameters["ExclusiveStartShardId"] = start
            description = self.env.streams.describe_stream(**parameters)["StreamDescription"]
            for shard in description.get("Shards", []):
                listed[shard["ShardId"]] = shard.get("ParentShardId", "")
                self.open_shards.discard(shard["ShardId"])
                if "EndingSequenceNumber" not in shard.get("SequenceNumberRange", {}):
                    self.open_shards.add(shard["ShardId"])
            start = description.get("LastEvaluatedShardId")
            if not start:
                return listed
        raise RuntimeError("DescribeStream did not end")

    # ------------------------------------------------------------------ records trimmed before delivery

    def note_of(self, shard: str) -> dict[str, Any] | None:
        item = self.env.dynamodb.get_item(TableName=PROGRESS_TABLE, Key={"ShardKey": {"S": NOTE + shard}})
        return item.get("Item")

    def check_trimmed(self, shard: str, note: dict[str, Any] | None, lowest: dict[str, Any]) -> list[dict[str, Any]]:
        """Reports of records the mapping may have skipped, trimmed, before this delivery of `lowest` and on."""
        sequence = int(lowest["dynamodb"]["SequenceNumber"])
        if note is not None:
            messages = self.unfinished_trimmed(shard, note)
            high = int(note["High"]["N"]) if "High" in note else None
            if (high is None or sequence > high) and self.aged(note):
                messages.append(_trimmed(shard, high or 0, sequence))
            return messages
        messages, aged = self.lineage_aged(shard)
        if aged:
            messages.append(_trimmed(shard, 0, sequence, lost_ancestors=True))
        return messages

    def aged(self, note: dict[str, Any]) -> bool:
        """Whether a record of the shard after what its note vouches for (its highest record delivered, or its last
        report) may be past the retention."""
        return float(note["Vouched"]["N"]) <= self.env.clock() - RETENTION_SECONDS

    def unfinished_trimmed(self, shard: str, note: dict[str, Any]) -> list[dict[str, Any]]:
        """Records delivered to invocations that never finished, past the retention: the mapping will not hand them
        again (it discards them, or skipped them at a resume)."""
        old = [int(s) for s, created in note.get("Unfinished", {}).get("M", {}).items() if self.expired(created)]
        return [_trimmed(shard, min(old) - 1, max(old))] if old else []

    def expired(self, created: dict[str, str]) -> bool:
        return float(created["N"]) <= self.env.clock() - RETENTION_SECONDS

    def lineage_aged(self, shard: str) -> tuple[list[dict[str, Any]], bool]:
        """For a shard nothing was delivered from: the unfinished records of its ancestors, and whether a record of its
        lineage never delivered may be past the retention. Every such record was written after the highest record
        delivered from the nearest ancestor anything was delivered from (or after the stream began): that record's
        creation time bounds them all. A report about an ancestor bounds nothing below it."""
        messages: list[dict[str, Any]] = []
        for ancestor in self.ancestors(shard):
            note = self.note_of(ancestor)
            if note is None:
                continue
            messages += self.unfinished_trimmed(ancestor, note)
            if "HighCreated" in note:
                return messages, float(note["HighCreated"]["N"]) <= self.env.clock() - RETENTION_SECONDS
        return messages, self.stream_created <= self.env.clock() - RETENTION_SECONDS

    def note_delivered(
        self, shard: str, note: dict[str, Any] | None, records: list[dict[str, Any]], vouched: bool
    ) -> None:
        """Before applying: the highest record delivered and the records of this invocation, until it finishes."""
        highest = max(records, key=_sequence_of)
        item = dict(note or {"ShardKey": {"S": NOTE + shard}, "Vouched": {"N": str(self.stream_created)}})
        if "High" not in item or int(highest["dynamodb"]["SequenceNumber"]) > int(item["High"]["N"]):
            item["High"] = {"N": highest["dynamodb"]["SequenceNumber"]}
            created = float(highest["dynamodb"]["ApproximateCreationDateTime"])
            item["HighCreated"] = {"N": str(created)}
            item["Vouched"] = {"N": str(max(created, float(item["Vouched"]["N"])))}
        if vouched:
            item["Vouched"] = {"N": str(self.env.clock())}
        unfinished = {
            s: created
            for s, created in item.get("Unfinished", {}).get("M", {}).items()
            if not (vouched and self.expired(created))
        }
        for record in records:
            stream = record["dynamodb"]
            unfinished[stream["SequenceNumber"]] = {"N": str(float(stream["ApproximateCreationDateTime"]))}
        item["Unfinished"] = {"M": unfinished}
        self.env.dynamodb.put_item(TableName=PROGRESS_TABLE, Item=item)

    def note_finished(self, shard: str, records: list[dict[str, Any]]) -> None:
        note = self.note_of(shard)
        if note is None:
            return
        done = {record["dynamodb"]["SequenceNumber"] for record in records}
        left = {s: created for s, created in note.get("Unfinished", {}).get("M", {}).items() if s not in done}
        self.env.dynamodb.put_item(TableName=PROGRESS_TABLE, Item={**note, "Unfinished": {"M": left}})

    def sweep(self) -> None:
        """On the schedule: every listed shard checked as a delivery would, for the lineages nothing delivers to."""
        messages: list[dict[str, Any]] = []
        vouch: list[str] = []
        for shard in sorted(self.describe()):
            note = self.note_of(shard)
            if note is not None:
                found = self.unfinished_trimmed(shard, note)
                if shard in self.open_shards and self.aged(note):
                    high = int(note["High"]["N"]) if "High" in note else 0
                    found.append({**_trimmed(shard, high, None)})
            else:
                found, aged = self.lineage_aged(shard)
                if aged:
                    found.append(_trimmed(shard, 0, None, lost_ancestors=True))
            messages += found
            vouch += [shard] if found else []
        self.send(messages)
        for shard in vouch:
            note = self.note_of(shard) or {"ShardKey": {"S": NOTE + shard}}
            unfinished = {s: c for s, c in note.get("Unfinished", {}).get("M", {}).items() if not self.expired(c)}
            item = {**note, "Vouched": {"N": str(self.env.clock())}, "Unfinished": {"M": unfinished}}
            self.env.dynamodb.put_item(TableName=PROGRESS_TABLE, Item=item)

    # ------------------------------------------------------------------ reports and recover

    def rejected(self, shard: str, record: dict[str, Any]) -> dict[str, Any]:
        return {
            "kind": "rejected_download",
            "reason": "the new image is no countable download",
            "shardId": shard,
            "sequenceNumber": record["dynamodb"]["SequenceNumber"],
        }

    def refused(self, shard: str, records: list[dict[str, Any]], fold: Fold, reason: str) -> list[dict[str, Any]]:
        """A `refused_record` per aggregate the key's records or ledger item touch: recover recounts them."""
        boards = set(fold.contribution)
        for record in records:
            for image in ("NewImage", "OldImage"):
                boards |= set(self.counts(record["dynamodb"].get(image)))
        return [
            {"kind": "refused_record", "entityId": fold.entity, "board": board, "reason": reason, "shardId": shard}
            for board in sorted(boards)
        ]

    def send(self, messages: list[dict[str, Any]]) -> None:
        """Every report reaches the failure queue, or the invocation fails and the mapping retries it."""
        if messages and not send_to_failure_queue(self.env.queue, FAILURE_QUEUE_URL, messages):
            raise RuntimeError("reports did not reach the failure queue")

    def recover(self, message: dict[str, Any], invoke: Callable[[dict[str, Any]], Any], recount: Any) -> None:
        """The operator's recover: a range the mapping gave up is read back and applied; trimmed, recounted."""
        info = message.get("DDBStreamBatchInfo")
        if info is not None:
            try:
                self.apply(info["shardId"], self.read_range(info))
            except (ClientError, BotoCoreError, RuntimeError):
                recount(None)
        elif message.get("kind") == "records_trimmed":
            recount(None)
        elif message.get("kind") == "refused_record" and message.get("entityId") and message.get("board"):
            recount({(message["entityId"], message["board"])})

    def read_range(self, info: dict[str, Any]) -> list[dict[str, Any]]:
        """The given-up range, from its first record through its last, by GetRecords (a momentary reader)."""
        streams, end = self.env.streams, int(info["endSequenceNumber"])
        iterator = streams.get_shard_iterator(
            StreamArn=info["streamArn"],
            ShardId=info["shardId"],
            ShardIteratorType="AT_SEQUENCE_NUMBER",
            SequenceNumber=info["startSequenceNumber"],
        )["ShardIterator"]
        records: list[dict[str, Any]] = []
        for _ in range(1000):
            if iterator is None:
                return records
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            for record in page.get("Records", []):
                if int(record["dynamodb"]["SequenceNumber"]) > end:
                    return records
                records.append(record)
            iterator = page.get("NextShardIterator")
        raise RuntimeError("the given-up range was not read to its end")


def _sequence_of(record: dict[str, Any]) -> int:
    return int(record["dynamodb"]["SequenceNumber"])


def _trimmed(shard: str, after: int, through: int | None, lost_ancestors: bool = False) -> dict[str, Any]:
    """records_trimmed: records of the shard after `after` (through `through`, or on), and with `lost_ancestors` every
    record of its ancestors, may have been skipped, trimmed, by the mapping: recover recounts."""
    message: dict[str, Any] = {
        "kind": "records_trimmed",
        "shardId": shard,
        "checkpoint": str(after),
        "firstReadableSequence": None if through is None else str(through),
    }
    if lost_ancestors:
        message["lostAncestorOf"] = shard
    return message


HAZARDS_IT_NEVER_MEETS = frozenset(
    {
        "pruning",
        "empty GetRecords page",
        "throttled GetRecords",
        "trimmed records",
        "expired iterator",
        "direct paused while the mapping goes on",
        "fresh state on retry",
    }
)
"""Hazards this design meets seldom or never: those of a design that reads shards itself or keeps watermarks (it reads
a shard only when recover reads a given-up range back), a direct invocation paused midway (it refuses one before any
call) and a retry's fresh state (it keeps none)."""


def with_its_mapping(history: History) -> History:
    """The history with the mapping this design asks for: MaximumRetryAttempts and MaximumRecordAgeInSeconds -1 (None
    in the model), failed batches retried, and bisected, until their records expire."""
    config = replace(history.config, maximum_retry_attempts=None, maximum_record_age=None)
    return History(config, history.steps)


def one_reader(env: Environment, config: Any) -> OneReaderDesign:
    """The model's factory for ledger histories on the one-reader design."""
    return OneReaderDesign(env, config)
