"""The issue-14 design in the model's own words: a reader of its own shard from a checkpoint of its own.

It is here for three reasons: it shows that the model asks nothing impossible (this design must
pass every history); switching off one of its `Guards` gives the naive designs that show a
hazard is really produced; and it is the stub target of the guard-mutation harness until the
shipped aggregator implements the design. It keeps the design file's rules and leaves out its
costs: no watermark pruning, no recount fence, a fixed reading budget.

Per invocation on shard S: read the checkpoint C_S from the progress table; read S after C_S
(TRIM_HORIZON when absent) in sequence order through the bound B (the highest sequence number the
event names or its state remembers; with none, to the shard's end or a record created after the
window); group the downloads read per aggregate with their exact sequence lists; write each with
one conditional UpdateItem on that aggregate's watermark for S; advance C_S (monotonically) to
the last record before the first aggregate that could not be written.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from tests.stream_model.environment import FAILURE_QUEUE_URL, PROGRESS_TABLE, TABLE, Design, Environment
from tests.stream_model.histories import utc_month

WIDTH = 40
_DIGITS = re.compile(r"^[0-9]{1,40}$")


def pad(sequence: int | str) -> str:
    return str(sequence).zfill(WIDTH)


class NotReached(Exception):
    """The invocation could not bring the checkpoint up to its bound: Lambda (or the operator) retries it."""


def _guard(protects: str) -> Any:
    return field(default=True, metadata={"protects": protects})


@dataclass(frozen=True)
class Guards:
    """The design's guards; each naive variant, and each mutation, switches one off."""

    watermark_condition: bool = _guard("each aggregate write is conditional on its watermark for the shard")
    monotonic_checkpoint: bool = _guard("the checkpoint only ever moves forward (conditional write)")
    read_from_checkpoint: bool = _guard("count what the stream holds after the checkpoint, not what was delivered")
    hold_checkpoint_on_failure: bool = _guard("a failed aggregate write holds the checkpoint before its lowest record")
    empty_page_is_not_the_end: bool = _guard("only a null NextShardIterator ends a shard, not an empty page")
    sequence_order: bool = _guard("progress is a sequence number, never a creation time")
    parent_first: bool = _guard("a new shard's parent is read to its end first")


DEFAULT_GUARDS = Guards()


@dataclass
class Read:
    records: list[dict[str, Any]]
    ended: bool
    """NextShardIterator was null: the shard is closed and read to its end."""
    trimmed_from: str | None = None
    """The checkpoint the stream no longer holds records after (records_trimmed)."""
    gone: bool = False
    """The stream no longer holds the shard at all (ResourceNotFoundException)."""


class CheckpointReader(Design):
    name = "reference checkpoint reader"
    uses_windows = True
    reports_rejected = True
    sweeps_on_schedule = True
    budget_pages = 40

    def __init__(self, env: Environment, aggregate_writes: str = "per_batch", guards: Guards | None = None) -> None:
        self.env = env
        self.aggregate_writes = aggregate_writes
        self.guards = guards or DEFAULT_GUARDS
        self.parents: dict[str, str | None] = {}

    # ------------------------------------------------------------------ the handler

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        if isinstance(event.get("lineageSweep"), dict):
            # The schedule's invocation: every listed shard's lineage settled, as its own first invocation would.
            stream_arn = str(event["lineageSweep"]["streamArn"])
            if self.guards.parent_first:
                for listed in self._listed(stream_arn):
                    self._parent_first(stream_arn, listed, remaining_ms)
            return {"finished": True}
        shard_id = str(event.get("shardId"))
        stream_arn = str(event.get("eventSourceARN"))
        direct = "window" not in event
        given = [r for r in event.get("Records") or [] if _sequence(r) is not None]
        state = {} if direct else dict(event.get("state") or {})
        final = bool(event.get("isFinalInvokeForWindow")) or bool(event.get("isWindowTerminatedEarly"))
        bounds = [int(_sequence(r) or 0) for r in given]
        if direct and _DIGITS.match(str(event.get("throughSequenceNumber") or "")):
            bounds.append(int(event["throughSequenceNumber"]))
        if state.get("high"):
            bounds.append(int(state["high"]))
        bound = max(bounds) if bounds else None
        hint = {"high": str(bound)} if bound is not None else {}
        if not direct and given:
            self._note_delivered(stream_arn, shard_id, max(int(_sequence(r) or 0) for r in given))
        if not direct and self.aggregate_writes == "per_window" and not final:
            return {"state": hint}
        if not self.guards.read_from_checkpoint:
            self._count_delivered(stream_arn, shard_id, given)
            return self._respond(direct, event, hint, shard_id, None, True)
        if self.guards.parent_first:
            self._parent_first(stream_arn, shard_id, remaining_ms)
        # A direct invocation (recover's) reads through what the mapping delivered too, as a final one does: a
        # given-up window's failure record names its last batch, which may end below an earlier one.
        checkpoint, reached = self._catch_up(stream_arn, shard_id, bound, remaining_ms, given, final=final or direct)
        if (direct or final) and not reached:
            raise NotReached(f"{shard_id}: checkpoint {checkpoint} short of {bound}")
        return self._respond(direct, event, hint, shard_id, checkpoint, reached)

    def _respond(
        self, direct: bool, event: dict[str, Any], hint: dict[str, Any], shard_id: str, checkpoint: Any, reached: bool
    ) -> dict[str, Any]:
        if direct:
            return {"shardId": shard_id, "checkpoint": checkpoint, "reachedBound": reached, "summary": {}}
        return {"state": {} if event.get("isFinalInvokeForWindow") else hint}

    def recover(self, message: dict[str, Any], invoke: Callable[[dict[str, Any]], Any], recount: Any) -> None:
        """The design file's recover: invoke through the range's end until reached; recount for trimmed records."""
        info = message.get("DDBStreamBatchInfo")
        if info is not None:
            if not self._still_held(info):
                recount(None)  # the stream no longer holds the range (trimmed): only a recount repairs it
                return
            for _ in range(5):
                event = {
                    "shardId": info["shardId"],
                    "eventSourceARN": info["streamArn"],
                    "Records": [],
                    "throughSequenceNumber": info["endSequenceNumber"],
                }
                succeeded, response = invoke(event)
                if succeeded and isinstance(response, dict) and response.get("reachedBound"):
                    return
            recount(None)  # the range cannot be read to its end any more (trimmed): only a recount repairs it
        elif message.get("kind") == "records_trimmed":
            recount(None)

    def _still_held(self, info: dict[str, Any]) -> bool:
        """Whether the stream still holds the first record of a given-up range."""
        try:
            self.env.streams.get_shard_iterator(
                StreamArn=info["streamArn"],
                ShardId=info["shardId"],
                ShardIteratorType="AT_SEQUENCE_NUMBER",
                SequenceNumber=info["startSequenceNumber"],
            )
        except ClientError as error:
            if error.response["Error"]["Code"] in ("TrimmedDataAccessException", "ResourceNotFoundException"):
                return False
            raise
        return True

    # ------------------------------------------------------------------ progress

    def _progress_key(self, stream_arn: str, shard_id: str) -> dict[str, Any]:
        return {"ShardKey": {"S": f"{stream_arn}|{shard_id}"}}

    def _progress(self, stream_arn: str, shard_id: str) -> dict[str, Any] | None:
        return (
            self.env.dynamodb.get_item(
                TableName=PROGRESS_TABLE, Key=self._progress_key(stream_arn, shard_id), ConsistentRead=True
            ).get("Item")
            or None
        )

    def _note_delivered(self, stream_arn: str, shard_id: str, sequence: int) -> None:
        """The highest sequence number the mapping delivered: a final invocation with a fresh state reads through it."""
        try:
            self.env.dynamodb.update_item(
                TableName=PROGRESS_TABLE,
                Key=self._progress_key(stream_arn, shard_id),
                UpdateExpression="SET Delivered = :d",
                ConditionExpression="attribute_not_exists(Delivered) OR Delivered < :d",
                ExpressionAttributeValues={":d": {"S": pad(sequence)}},
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    def _mark_ended(self, stream_arn: str, shard_id: str) -> None:
        self.env.dynamodb.update_item(
            TableName=PROGRESS_TABLE,
            Key=self._progress_key(stream_arn, shard_id),
            UpdateExpression="SET ShardEnded = :true",
            ExpressionAttributeValues={":true": {"BOOL": True}},
        )

    def _advance(self, stream_arn: str, shard_id: str, sequence: str, created: int, ended: bool) -> None:
        values: dict[str, Any] = {":new": {"S": pad(sequence)}, ":created": {"N": str(created)}}
        expression = "SET Checkpoint = :new, CheckpointCreated = :created"
        if ended:
            expression += ", ShardEnded = :true"
            values[":true"] = {"BOOL": True}
        condition = "attribute_not_exists(Checkpoint) OR Checkpoint < :new"
        try:
            self.env.dynamodb.update_item(
                TableName=PROGRESS_TABLE,
                Key=self._progress_key(stream_arn, shard_id),
                UpdateExpression=expression,
                ExpressionAttributeValues=values,
                **({"ConditionExpression": condition} if self.guards.monotonic_checkpoint else {}),
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    # ------------------------------------------------------------------ parents

    def _parent_of(self, stream_arn: str, shard_id: str) -> str | None:
        if shard_id not in self.parents:
            self._listed(stream_arn)
        return self.parents.get(shard_id)

    def _listed(self, stream_arn: str) -> dict[str, tuple[str | None, str | None]]:
        """Every shard DescribeStream lists now: its parent and first sequence number."""
        listed: dict[str, tuple[str | None, str | None]] = {}
        start: str | None = None
        for _ in range(100):
            page = self.env.streams.describe_stream(
                StreamArn=stream_arn, **({"ExclusiveStartShardId": start} if start else {})
            )["StreamDescription"]
            for shard in page["Shards"]:
                first = shard.get("SequenceNumberRange", {}).get("StartingSequenceNumber")
                listed[shard["ShardId"]] = (shard.get("ParentShardId"), first)
                self.parents[shard["ShardId"]] = shard.get("ParentShardId")
            start = page.get("LastEvaluatedShardId")
            if not start:
                break
        return listed

    def _parent_first(self, stream_arn: str, shard_id: str, remaining_ms: Callable[[], int]) -> None:
        """Every ancestor read to its end first, oldest first; one never read here whose records the stream no longer
        holds whole (deleted, or trimmed before its first record was read) is reported: records_trimmed."""
        own = self._progress(stream_arn, shard_id) or {}
        if "Checkpoint" in own or own.get("ShardEnded", {}).get("BOOL"):
            return  # counted from before: its ancestors were settled first
        listed: dict[str, tuple[str | None, str | None]] | None = self._listed(stream_arn)
        first = listed.get(shard_id, (None, None))[1]
        if first is not None and not self._began_at(stream_arn, shard_id, first):
            self._report_lost(stream_arn, shard_id, shard_id)  # its first records were trimmed before it was read
        ancestor = self._parent_of(stream_arn, shard_id)
        if ancestor is None:
            return
        chain: list[str] = []
        while ancestor is not None:
            progress = self._progress(stream_arn, ancestor) or {}
            if "Checkpoint" in progress or progress.get("ShardEnded", {}).get("BOOL"):
                if not progress.get("ShardEnded", {}).get("BOOL"):
                    chain.append(ancestor)
                break  # counted here before: its own ancestors were settled then
            listed = listed if listed is not None else self._listed(stream_arn)
            if ancestor not in listed:
                self._report_lost(stream_arn, ancestor, shard_id)
                break
            chain.append(ancestor)
            ancestor = listed[ancestor][0]
        for parent in reversed(chain):
            first = (listed or {}).get(parent, (None, None))[1]
            unread = "Checkpoint" not in (self._progress(stream_arn, parent) or {})
            _, reached = self._catch_up(stream_arn, parent, None, remaining_ms, [], to_end=True)
            if unread and first is not None and not self._began_at(stream_arn, parent, first):
                self._report_lost(stream_arn, parent, shard_id)
            if not reached:
                raise NotReached(f"ancestor {parent} of {shard_id} is not read to its end yet")

    def _began_at(self, stream_arn: str, shard_id: str, first: str) -> bool:
        """Whether the stream still holds the shard's first record."""
        try:
            self.env.streams.get_shard_iterator(
                StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="AT_SEQUENCE_NUMBER", SequenceNumber=first
            )
        except ClientError:
            return False
        return True

    def _report_lost(self, stream_arn: str, shard_id: str, descendant: str) -> None:
        self.env.queue.send_message(
            QueueUrl=FAILURE_QUEUE_URL,
            MessageBody=_json(
                {
                    "kind": "records_trimmed",
                    "shardId": shard_id,
                    "streamArn": stream_arn,
                    "checkpoint": None,
                    "firstReadableSequence": None,
                    "lostAncestorOf": descendant,
                }
            ),
        )

    # ------------------------------------------------------------------ reading and writing

    def _catch_up(
        self,
        stream_arn: str,
        shard_id: str,
        bound: int | None,
        remaining_ms: Callable[[], int],
        given: list[dict[str, Any]],
        to_end: bool = False,
        final: bool = False,
    ) -> tuple[str | None, bool]:
        """Read and count the shard after its checkpoint through the bound (or its end); whether it got there."""
        progress = self._progress(stream_arn, shard_id) or {}
        checkpoint = progress.get("Checkpoint", {}).get("S")
        checkpoint_created = int(progress.get("CheckpointCreated", {}).get("N", "0"))
        if progress.get("ShardEnded", {}).get("BOOL"):
            return checkpoint, True
        if not to_end:
            delivered = progress.get("Delivered", {}).get("S")
            if delivered is not None and (bound is None or (final and int(delivered) > bound)):
                bound = int(delivered)  # a fresh state forgets what earlier batches of the window delivered
            if bound is None or (checkpoint is not None and int(checkpoint) >= bound):
                return checkpoint, True
        read = self._read(stream_arn, shard_id, checkpoint, None if to_end else bound, remaining_ms)
        records = read.records
        if not self.guards.sequence_order and checkpoint is not None:
            records = [r for r in records if _created(r) > checkpoint_created]
        if read.trimmed_from is not None:
            # A shard gone before anything of it was read here: whether its ancestors were is unknown too.
            lineage_lost = read.gone and checkpoint is None
            self._report_trimmed(stream_arn, shard_id, read.trimmed_from, checkpoint_created, records, lineage_lost)
        groups: dict[tuple[str, str], list[int]] = {}
        for record in records:
            parsed = self._parse(record, stream_arn, shard_id)
            if parsed is not None:
                groups.setdefault(parsed, []).append(int(_sequence(record) or 0))
        failed_lowest = [min(seqs) for key, seqs in groups.items() if not self._write(key, stream_arn, shard_id, seqs)]
        read_sequences = [int(_sequence(r) or 0) for r in read.records]
        self._refuse_unheld(stream_arn, shard_id, given, checkpoint, read_sequences)
        upto = len(read.records)
        if failed_lowest and self.guards.hold_checkpoint_on_failure:
            lowest = min(failed_lowest)
            upto = next(i for i, sequence in enumerate(read_sequences) if sequence >= lowest)
        complete = upto == len(read.records)
        if upto > 0:
            last = read.records[upto - 1]
            self._advance(stream_arn, shard_id, str(_sequence(last)), _created(last), read.ended and complete)
            checkpoint = pad(str(_sequence(last)))
        elif read.ended and complete:
            self._mark_ended(stream_arn, shard_id)
        if to_end or bound is None:
            return checkpoint, read.ended and complete
        reached = checkpoint is not None and int(checkpoint) >= bound
        return checkpoint, reached or (read.ended and complete)

    def _report_trimmed(
        self,
        stream_arn: str,
        shard_id: str,
        trimmed_from: str,
        created: int,
        records: list[dict[str, Any]],
        lineage_lost: bool = False,
    ) -> None:
        first = records[0] if records else None
        self.env.queue.send_message(
            QueueUrl=FAILURE_QUEUE_URL,
            MessageBody=_json(
                {
                    "kind": "records_trimmed",
                    "shardId": shard_id,
                    "streamArn": stream_arn,
                    "checkpoint": trimmed_from.lstrip("0") or "0",
                    "checkpointCreated": created,
                    "firstReadableSequence": _sequence(first) if first else None,
                    "firstReadableCreated": _created(first) if first else None,
                    **({"lostAncestorOf": shard_id} if lineage_lost else {}),
                }
            ),
        )

    def _read(
        self,
        stream_arn: str,
        shard_id: str,
        checkpoint: str | None,
        bound: int | None,
        remaining_ms: Callable[[], int],
    ) -> Read:
        streams = self.env.streams
        trimmed_from = None
        gone = False

        def iterator_after(sequence: str | None) -> str | None:
            nonlocal trimmed_from, gone
            try:
                if sequence is None:
                    kind = {"ShardIteratorType": "TRIM_HORIZON"}
                else:
                    kind = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": sequence.lstrip("0") or "0"}
                return streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard_id, **kind)["ShardIterator"]
            except ClientError as error:
                code = error.response["Error"]["Code"]
                if code == "ResourceNotFoundException":
                    trimmed_from, gone = sequence or "0", True
                    return None  # the shard is gone (closed over 24 hours ago): what was not read is trimmed
                if code != "TrimmedDataAccessException":
                    raise
                trimmed_from = sequence
                return streams.get_shard_iterator(
                    StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]

        iterator = iterator_after(checkpoint)
        records: list[dict[str, Any]] = []
        for _ in range(self.budget_pages):
            if iterator is None:
                return Read(records, True, trimmed_from, gone)
            if remaining_ms() < 2000:
                break
            try:
                page = streams.get_records(ShardIterator=iterator, Limit=1000)
            except ClientError as error:
                code = error.response["Error"]["Code"]
                if code == "ExpiredIteratorException":
                    iterator = iterator_after(pad(str(_sequence(records[-1]))) if records else checkpoint)
                    continue
                if code == "TrimmedDataAccessException" and not records:
                    iterator = iterator_after(checkpoint)
                    continue
                break  # LimitExceeded and the rest: stop here, a contiguous prefix is still exact
            except BotoCoreError:
                break
            page_records = page.get("Records", [])
            records.extend(page_records)
            iterator = page.get("NextShardIterator")
            if not page_records and iterator is not None and not self.guards.empty_page_is_not_the_end:
                return Read(records, True, trimmed_from)  # naive: an empty page taken for the shard's end
            if bound is not None and records and int(_sequence(records[-1]) or 0) >= bound:
                break
        return Read(records, iterator is None, trimmed_from)

    def _parse(self, record: dict[str, Any], stream_arn: str, shard_id: str) -> tuple[str, str] | None:
        """The record's aggregate if it is a download; own writes and other changes are skipped, malformed reported."""
        stream = record.get("dynamodb") or {}
        image = stream.get("NewImage") or {}
        if record.get("eventName") != "INSERT" or "Month" in image:
            return None
        song = image.get("songID", {}).get("S")
        timestamp = image.get("Timestamp", {}).get("S")
        try:
            if not song or not timestamp:
                raise ValueError("songID or Timestamp missing")
            return song, utc_month(timestamp)
        except ValueError as error:
            self.env.queue.send_message(
                QueueUrl=FAILURE_QUEUE_URL,
                MessageBody=_json(
                    {
                        "kind": "rejected_download",
                        "reason": str(error),
                        "sequenceNumber": _sequence(record),
                        "shardId": shard_id,
                        "streamArn": stream_arn,
                        "record": record,
                    }
                ),
            )
            return None

    def _refuse_unheld(
        self,
        stream_arn: str,
        shard_id: str,
        given: list[dict[str, Any]],
        checkpoint: str | None,
        read_sequences: list[int],
    ) -> None:
        held = set(read_sequences)
        last = read_sequences[-1] if read_sequences else -1
        for record in given:
            sequence = int(_sequence(record) or 0)
            if (checkpoint is not None and sequence <= int(checkpoint)) or sequence in held or sequence > last:
                continue
            self.env.queue.send_message(
                QueueUrl=FAILURE_QUEUE_URL,
                MessageBody=_json(
                    {
                        "kind": "refused_record",
                        "reason": "not in the stream",
                        "sequenceNumber": _sequence(record),
                        "shardId": shard_id,
                        "streamArn": stream_arn,
                        "record": record,
                    }
                ),
            )

    def _write(self, key: tuple[str, str], stream_arn: str, shard_id: str, sequences: list[int]) -> bool:
        """One conditional write per aggregate: exactly the listed downloads above its watermark for the shard."""
        name = "Watermark_" + hashlib.sha256(f"{stream_arn}\n{shard_id}".encode()).hexdigest()[:16]
        item_key = {"songID": {"S": key[0]}, "SK": {"S": key[1]}}
        remaining, expected = sorted(sequences), None
        try:
            for attempt in range(6):
                values: dict[str, Any] = {
                    ":n": {"N": str(len(remaining))},
                    ":month": {"S": key[1]},
                    ":high": {"S": pad(remaining[-1])},
                }
                if not self.guards.watermark_condition:
                    condition = None
                elif attempt == 0:
                    condition = "attribute_not_exists(#w) OR #w < :low"
                    values[":low"] = {"S": pad(remaining[0])}
                elif expected is None:
                    condition = "attribute_not_exists(#w)"
                else:
                    condition = "#w = :expected"
                    values[":expected"] = {"S": expected}
                try:
                    self.env.dynamodb.update_item(
                        TableName=TABLE,
                        Key=item_key,
                        UpdateExpression="ADD DownloadCount :n SET #month = :month, #w = :high",
                        ExpressionAttributeNames={"#w": name, "#month": "Month"},
                        ExpressionAttributeValues=values,
                        ReturnValuesOnConditionCheckFailure="ALL_OLD",
                        **({"ConditionExpression": condition} if condition else {}),
                    )
                    return True
                except ClientError as error:
                    if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                        return False
                    item = error.response.get("Item") or self.env.dynamodb.get_item(
                        TableName=TABLE, Key=item_key, ConsistentRead=True
                    ).get("Item", {})
                    expected = item.get(name, {}).get("S")
                    remaining = [s for s in sorted(sequences) if expected is None or pad(s) > expected]
                    if not remaining:
                        return True
            return False
        except (ClientError, BotoCoreError):
            return False

    def _count_delivered(self, stream_arn: str, shard_id: str, records: list[dict[str, Any]]) -> None:
        """Naive: what the event delivered, not what the stream holds after the checkpoint."""
        groups: dict[tuple[str, str], list[int]] = {}
        for record in records:
            parsed = self._parse(record, stream_arn, shard_id)
            if parsed is not None:
                groups.setdefault(parsed, []).append(int(_sequence(record) or 0))
        failed = [key for key, sequences in groups.items() if not self._write(key, stream_arn, shard_id, sequences)]
        if failed:
            raise NotReached(f"{len(failed)} aggregates not written")


def _sequence(record: Any) -> str | None:
    if isinstance(record, dict) and isinstance(record.get("dynamodb"), dict):
        value = record["dynamodb"].get("SequenceNumber")
        if isinstance(value, str) and _DIGITS.match(value):
            return value
    return None


def _created(record: dict[str, Any] | None) -> int:
    value = (record or {}).get("dynamodb", {}).get("ApproximateCreationDateTime")
    if isinstance(value, datetime):
        return int(value.timestamp())
    return int(value or 0)


def _json(body: dict[str, Any]) -> str:
    import json

    return json.dumps(body, default=str)
