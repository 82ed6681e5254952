"""Deliberately naive designs: each trusts something AWS does not promise, and some history breaks it.

The suite asserts that each of them fails, which shows that the model really produces the hazard
named in its docstring. `GuideDesign`, `PreviousDesign` (0.1) and `HighMarkDesign` are earlier
designs of this project; the rest are the reference checkpoint reader with one guard removed, the shipped
aggregator with one way of following retractions changed, or a ledger design (the model's or the shipped one) with
one rule changed (the shipped one-reader ledger's too, versioned_ledger.py, as one_reader_design.py drives it).
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from delivery_notes import DeliveryNotes, Message, Note
from download_records import Download, parse_record
from expiry_keeps import ExpiryKeeps
from leaderboard_core.index_layout import ORDER_SCALE, order_tiebreak
from leaderboard_core.source_items import expired_by_ttl
from ledger import StreamLedger
from tests.stream_model.designs import ShardWatermarkDesign, ShippedLedgerDesign, schema_of
from tests.stream_model.environment import FAILURE_QUEUE_URL, TABLE, Design, Environment
from tests.stream_model.histories import utc_month
from tests.stream_model.ledger_backfill import LEDGER_TABLE
from tests.stream_model.ledger_design import LedgerDesign, Moves
from tests.stream_model.one_reader_design import OneReaderDesign
from tests.stream_model.reference_design import CheckpointReader, Guards
from versioned_ledger import Fold, VersionedLedger


class NotWritten(Exception):
    """The invocation ends with work left: its caller retries."""


def _aggregate_of(record: dict[str, Any]) -> tuple[str, str] | str | None:
    """(song, UTC month) of a download, None for anything else, "malformed" for a download that cannot count."""
    if record.get("eventName") != "INSERT":
        return None
    image = (record.get("dynamodb") or {}).get("NewImage") or {}
    if "Month" in image:
        return None
    song = image.get("songID", {}).get("S")
    timestamp = image.get("Timestamp", {}).get("S")
    try:
        if not song or not timestamp:
            raise ValueError("songID or Timestamp missing")
        return song, utc_month(timestamp)
    except ValueError:
        return "malformed"


def _sequence(record: dict[str, Any]) -> str:
    return str((record.get("dynamodb") or {}).get("SequenceNumber", ""))


def _pad(sequence: str) -> str:
    return sequence.zfill(40)


def recount_range(env: Environment, info: dict[str, Any], recount: Callable[[Any], None]) -> None:
    """The recover of the versions before checkpoints: read the given-up range back, recount what it touches."""
    try:
        iterator = env.streams.get_shard_iterator(
            StreamArn=info["streamArn"],
            ShardId=info["shardId"],
            ShardIteratorType="AT_SEQUENCE_NUMBER",
            SequenceNumber=info["startSequenceNumber"],
        )["ShardIterator"]
        keys: set[tuple[str, str]] = set()
        for _ in range(200):
            if iterator is None:
                break
            page = env.streams.get_records(ShardIterator=iterator, Limit=1000)
            for record in page.get("Records", []):
                if int(_sequence(record)) > int(info["endSequenceNumber"]):
                    iterator = None
                    break
                aggregate = _aggregate_of(record)
                if isinstance(aggregate, tuple):
                    keys.add(aggregate)
            else:
                iterator = page.get("NextShardIterator")
        recount(keys)
    except (ClientError, BotoCoreError):
        recount(None)  # no longer readable: every aggregate of the months


# ---------------------------------------------------------------------------------------------- the guide


class GuideDesign(Design):
    """The guide's handler: one ADD per INSERT. Over-counts whenever a batch is delivered twice (any retry)."""

    name = "guide"
    uses_windows = False

    def __init__(self, env: Environment) -> None:
        self.env = env

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        for record in event.get("Records") or []:
            aggregate = _aggregate_of(record)
            if not isinstance(aggregate, tuple):
                continue
            self.env.dynamodb.update_item(
                TableName=TABLE,
                Key={"songID": {"S": aggregate[0]}, "SK": {"S": aggregate[1]}},
                UpdateExpression="ADD DownloadCount :one SET #month = :month",
                ExpressionAttributeNames={"#month": "Month"},
                ExpressionAttributeValues={":one": {"N": "1"}, ":month": {"S": aggregate[1]}},
            )
        return None


# ---------------------------------------------------------------------------------------------- version 0.1


class PreviousDesign(Design):
    """Version 0.1: one watermark per aggregate for the whole stream, partial batch responses.

    It assumed that every download of a song arrives in one ordered sequence; broken by a song
    split for heat over two shards, by children with lower sequence numbers, and by any retry
    out of order.
    """

    name = "single watermark (0.1)"
    uses_windows = False
    reports_batch_item_failures = True

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.client = env.dynamodb

    def _apply(self, key: tuple[str, str], sequences: list[str]) -> None:
        item_key = {"songID": {"S": key[0]}, "SK": {"S": key[1]}}
        known: str | None = None
        watermark_known = False
        for _ in range(8):
            values: dict[str, Any] = {":period": {"S": key[1]}, ":highest": {"S": sequences[-1]}}
            if not watermark_known:
                addition = len(sequences)
                condition = "attribute_not_exists(#wm) OR #wm < :lowest"
                values[":lowest"] = {"S": sequences[0]}
            else:
                addition = len(sequences) - (bisect.bisect_right(sequences, known) if known else 0)
                if addition == 0:
                    return
                condition = "attribute_not_exists(#wm)" if known is None else "#wm = :expected"
                if known is not None:
                    values[":expected"] = {"S": known}
            values[":addition"] = {"N": str(addition)}
            try:
                self.client.update_item(
                    TableName=TABLE,
                    Key=item_key,
                    UpdateExpression="ADD #count :addition SET #period = :period, #wm = :highest",
                    ConditionExpression=condition,
                    ExpressionAttributeNames={"#count": "DownloadCount", "#period": "Month", "#wm": "AppliedSequence"},
                    ExpressionAttributeValues=values,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return
            except ClientError as error:
                if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                item = error.response.get("Item") or {}
                known = item["AppliedSequence"]["S"] if "AppliedSequence" in item else None
                watermark_known = True
        raise RuntimeError("watermark contention")

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for record in event.get("Records") or []:
            aggregate = _aggregate_of(record)
            if isinstance(aggregate, tuple):
                groups.setdefault(aggregate, []).append((_pad(_sequence(record)), _sequence(record)))
        failures = []
        for key in sorted(groups, key=lambda key: min(groups[key])):
            ordered = sorted(set(groups[key]))
            if remaining_ms() < 1000:
                failures.append(ordered[0][1])
                continue
            try:
                self._apply(key, [padded for padded, _raw in ordered])
            except (ClientError, BotoCoreError, RuntimeError):
                failures.append(ordered[0][1])
        return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failures]}

    def recover(self, message: dict[str, Any], invoke: Callable[[dict[str, Any]], Any], recount: Any) -> None:
        if "DDBStreamBatchInfo" in message:
            recount_range(self.env, message["DDBStreamBatchInfo"], recount)


# ------------------------------------------------------------------------------ delivered-record watermarks (a55b1ff)


@dataclass(frozen=True)
class Segment:
    count: int
    low: str
    high: str
    attempted: bool = False
    sequences: tuple[str, ...] | None = None

    def above(self, watermark: str) -> int | None:
        if watermark < self.low:
            return self.count
        if watermark >= self.high:
            return 0
        if self.sequences is None:
            return None
        return sum(1 for sequence in self.sequences if sequence > watermark)


class WatermarkInconsistency(Exception):
    pass


class HighMarkDesign(Design):
    """The delivered-record watermarks' counting rule (lambda_src/aggregator at a55b1ff), frozen and compact.

    Delivered records are folded into the window state (a high mark skips redeliveries) and
    counted with one watermark per aggregate and shard. Broken by: a retry out of order (the
    state's high mark skips the earlier half), a larger retry whose write fails (a segment
    without its list spans the watermark: inconsistency until the window is given up), a direct
    invocation ahead of the mapping (the watermark jumps), and a window given up (its pending
    aggregates are only logged; the failure record names the last batch). Left out of the
    freeze: watermark pruning and the deadline margin, which none of those needs.
    """

    uses_windows = True
    reports_rejected = True

    def __init__(self, env: Environment, aggregate_writes: str = "per_batch") -> None:
        self.env = env
        self.aggregate_writes = aggregate_writes
        self.name = f"delivered-record watermarks (a55b1ff), {aggregate_writes}"

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        direct = "window" not in event
        shard_id = str(event.get("shardId"))
        stream_arn = str(event.get("eventSourceARN"))
        records = list(event.get("Records") or [])
        if direct:
            records = self._verified(stream_arn, shard_id, records)
        state = {} if direct else dict(event.get("state") or {})
        high: str | None = state.get("high")
        pending: dict[tuple[str, str], list[Segment]] = {
            (song, month): [Segment(c, lo, hi, bool(a)) for c, lo, hi, a in rows]
            for song, month, rows in state.get("pending", [])
        }
        fresh: dict[str, tuple[str, str]] = {}
        for record in records:
            aggregate = _aggregate_of(record)
            if aggregate == "malformed":
                self._report("rejected_download", "malformed download", record, shard_id, stream_arn)
            elif isinstance(aggregate, tuple) and (high is None or _pad(_sequence(record)) > high):
                fresh[_pad(_sequence(record))] = aggregate  # at or below the high mark: a redelivery, skipped
        by_key: dict[tuple[str, str], list[str]] = {}
        for sequence in sorted(fresh):
            by_key.setdefault(fresh[sequence], []).append(sequence)
        for key, sequences in by_key.items():
            pending.setdefault(key, []).append(
                Segment(len(sequences), sequences[0], sequences[-1], False, tuple(sequences))
            )
        if fresh:
            high = max(fresh)
        final = direct or bool(event.get("isFinalInvokeForWindow"))
        if final or self.aggregate_writes == "per_batch":
            for key in sorted(pending, key=lambda key: pending[key][0].low):
                try:
                    self._apply(key, stream_arn, shard_id, pending[key])
                    del pending[key]
                except (ClientError, BotoCoreError, WatermarkInconsistency, RuntimeError):
                    pending[key] = [replace(segment, attempted=True) for segment in pending[key]]
        if final and pending:
            raise NotWritten(f"{len(pending)} aggregates not written at the end of the window")
        if direct:
            return {"state": {}, "batchItemFailures": []}
        rows = [[song, month, _merged(segments)] for (song, month), segments in sorted(pending.items())]
        new_state = {} if event.get("isFinalInvokeForWindow") else {"high": high, "pending": rows}
        return {"state": new_state, "batchItemFailures": []}

    def _apply(self, key: tuple[str, str], stream_arn: str, shard_id: str, segments: list[Segment]) -> None:
        name = "Watermark_" + hashlib.sha256(f"{stream_arn}\n{shard_id}".encode()).hexdigest()[:16]
        item_key = {"songID": {"S": key[0]}, "SK": {"S": key[1]}}
        expected: str | None = None
        known = False
        for _ in range(8):
            if known:
                above = [segment.above(expected) if expected is not None else segment.count for segment in segments]
                if any(value is None for value in above):
                    raise WatermarkInconsistency(f"{name} of {key} at {expected}, inside a segment without its list")
                addition = sum(value or 0 for value in above)
                if addition == 0:
                    return
            else:
                addition = sum(segment.count for segment in segments)
            values: dict[str, Any] = {
                ":n": {"N": str(addition)},
                ":month": {"S": key[1]},
                ":high": {"S": segments[-1].high},
            }
            if not known:
                condition = "attribute_not_exists(#w) OR #w < :low"
                values[":low"] = {"S": segments[0].low}
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
                    ConditionExpression=condition,
                    ExpressionAttributeNames={"#w": name, "#month": "Month"},
                    ExpressionAttributeValues=values,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return
            except ClientError as error:
                if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                expected = (error.response.get("Item") or {}).get(name, {}).get("S")
                known = True
        raise RuntimeError("watermark contention")

    def _verified(self, stream_arn: str, shard_id: str, named_records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Direct invocations: the stream's own copies of the named records, the rest refused."""
        named_records = sorted((c for c in named_records if _sequence(c).isdigit()), key=lambda c: int(_sequence(c)))
        if not named_records:
            return []
        found: dict[str, dict[str, Any]] = {}
        try:
            iterator = self.env.streams.get_shard_iterator(
                StreamArn=stream_arn,
                ShardId=shard_id,
                ShardIteratorType="AT_SEQUENCE_NUMBER",
                SequenceNumber=_sequence(named_records[0]),
            )["ShardIterator"]
            empty = 0
            for _ in range(50):
                if not iterator or empty >= 5:
                    break
                page = self.env.streams.get_records(ShardIterator=iterator, Limit=1000)
                for record in page.get("Records", []):
                    found[_sequence(record)] = record
                if found and max(int(s) for s in found) >= int(_sequence(named_records[-1])):
                    break
                empty = 0 if page.get("Records") else empty + 1
                iterator = page.get("NextShardIterator")
        except (ClientError, BotoCoreError):
            found = {}
        accepted = []
        for named in named_records:
            original = found.get(_sequence(named))
            if original is None or original["dynamodb"].get("Keys") != named["dynamodb"].get("Keys"):
                self._report("refused_record", "not in the stream", named, shard_id, stream_arn)
            else:
                accepted.append({**original, "eventSourceARN": stream_arn})
        return accepted

    def _report(self, kind: str, reason: str, record: dict[str, Any], shard_id: str, stream_arn: str) -> None:
        self.env.queue.send_message(
            QueueUrl=FAILURE_QUEUE_URL,
            MessageBody=json.dumps(
                {
                    "kind": kind,
                    "reason": reason,
                    "sequenceNumber": _sequence(record),
                    "shardId": shard_id,
                    "streamArn": stream_arn,
                    "record": record,
                },
                default=str,
            ),
        )

    def recover(self, message: dict[str, Any], invoke: Callable[[dict[str, Any]], Any], recount: Any) -> None:
        """The high-mark design's recover: the given-up range read back and recounted; refused records' too."""
        if "DDBStreamBatchInfo" in message:
            recount_range(self.env, message["DDBStreamBatchInfo"], recount)
        elif message.get("kind") == "refused_record":
            aggregate = _aggregate_of(message.get("record") or {})
            if isinstance(aggregate, tuple):
                recount({aggregate})


def _merged(segments: list[Segment]) -> list[list[Any]]:
    """As the state carries them: adjacent segments never attempted become one, and no segment keeps its list."""
    rows: list[list[Any]] = []
    for segment in segments:
        if rows and not rows[-1][3] and not segment.attempted:
            rows[-1] = [rows[-1][0] + segment.count, rows[-1][1], segment.high, 0]
        else:
            rows.append([segment.count, segment.low, segment.high, 1 if segment.attempted else 0])
    return rows


# ---------------------------------------------------------------------------------------------- the reference, naively


class CountsDeliveredRecords(CheckpointReader):
    """Counts the records the event delivered (exact lists, watermarks) instead of the stream after a checkpoint.

    Broken by a retry out of order (the later half moves the watermark past the earlier one) and
    by a direct invocation ahead of the mapping.
    """

    name = "counts delivered records"

    def __init__(self, env: Environment, aggregate_writes: str = "per_batch") -> None:
        super().__init__(env, aggregate_writes, Guards(read_from_checkpoint=False))


class StopsAtFirstEmptyPage(CheckpointReader):
    """Takes an empty GetRecords page for the end of the shard (an earlier recover did): marks it ended, stops."""

    name = "stops at the first empty page"

    def __init__(self, env: Environment, aggregate_writes: str = "per_batch") -> None:
        super().__init__(env, aggregate_writes, Guards(empty_page_is_not_the_end=False))


class TrustsCreationOrder(CheckpointReader):
    """Skips records created at or before the checkpoint's creation second: creation times are not monotonic."""

    name = "trusts creation-time order"

    def __init__(self, env: Environment, aggregate_writes: str = "per_batch") -> None:
        super().__init__(env, aggregate_writes, Guards(sequence_order=False))


class AdvancesPastFailedAggregate(CheckpointReader):
    """Advances the checkpoint past an aggregate whose write failed (throttled, killed): those downloads are lost."""

    name = "advances the checkpoint past a failed aggregate"

    def __init__(self, env: Environment, aggregate_writes: str = "per_batch") -> None:
        super().__init__(env, aggregate_writes, Guards(hold_checkpoint_on_failure=False))


class BlindIncrement(CheckpointReader):
    """Reads from its checkpoint but adds without the watermark condition: a re-read counts again."""

    name = "adds without a watermark"

    def __init__(self, env: Environment, aggregate_writes: str = "per_batch") -> None:
        super().__init__(env, aggregate_writes, Guards(watermark_condition=False))


class OneLevelOfAncestry(ShardWatermarkDesign):
    """The shipped aggregator before pauses across rollovers: it drains a shard's parent only, and only one it has
    read before.

    A parent it never saw, it takes for one that predates it. Broken by a mapping paused past the
    retention across two rollovers: the shard it stopped in (read in part) and the next one are
    deleted, the third is read from its start, and nobody reports the first one's tail or the second.
    """

    def __init__(self, env: Environment, aggregate_writes: str = "per_batch") -> None:
        super().__init__(env, aggregate_writes)
        self.name = "drains one level of parent"

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        import lineage_sweep
        import two_readers

        walk = two_readers.count_ancestry
        callers = (two_readers, lineage_sweep)
        for caller in callers:
            caller.count_ancestry = _parent_only
        try:
            return super().invoke(event, remaining_ms)
        finally:
            for caller in callers:
                caller.count_ancestry = walk


class TrustsTheWindowState(ShardWatermarkDesign):
    """per_window whose invocations inside a window note nothing outside the window's state: a final reads through
    its own records and what the state it is handed says, nothing else (no delivered high in the progress table).

    Broken by a final retried with a fresh state ("the state handed to a retry is not documented"): what
    the window's earlier batches delivered is read only as far as a few empty pages take it.
    """

    def __init__(self, env: Environment, aggregate_writes: str = "per_window") -> None:
        super().__init__(env, "per_window")
        self.name = "per_window trusting the window's state"

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        import shard_progress

        note = shard_progress.ProgressStore.note_delivered
        shard_progress.ProgressStore.note_delivered = lambda self, shard, high: None  # type: ignore[method-assign]
        try:
            return super().invoke(event, remaining_ms)
        finally:
            shard_progress.ProgressStore.note_delivered = note  # type: ignore[method-assign]


def _parent_only(invocation: Any, shard: Any, progress: Any, keep: Any, report: Any) -> None:
    from delivery import ShardRef
    from shard_lineage import drain

    if progress.parent_shard_id is None:
        return
    parent = ShardRef(shard.stream_arn, progress.parent_shard_id)
    known = invocation.deps.progress.lower_bound(parent)
    if known.exists and not known.ended:
        drain(invocation, parent, keep, report)


# ---------------------------------------------------------------------------------------------- retractions, naively


class SubtractsEveryDeliveredRetraction(ShardWatermarkDesign):
    """Counts downloads as the shipped aggregator does, but moves what each delivered MODIFY or REMOVE moves with a
    plain ADD (a leaderboard's ZINCRBY with a negative increment): no watermark, no idempotence for retractions.

    Broken by a retraction delivered twice (a retry after a lost response or a failure, a retry out of order, a direct
    invocation behind the mapping): it takes the download back twice.
    """

    takes_config = True
    keeps_index = False

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config.aggregate_writes, schema=schema_of(config, retractions=False))
        self.moves = schema_of(config, retractions=True)
        self.name = f"subtracts every delivered retraction, {config.aggregate_writes}"

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        for record in event.get("Records") or []:
            if record.get("eventName") in ("MODIFY", "REMOVE"):
                parsed = parse_record(record, self.moves)
                for change in parsed.changes if isinstance(parsed, Download) else ():
                    self._add(change.key.entity_id, change.key.board, change.amount)
        return super().invoke(event, remaining_ms)

    def _add(self, entity: str, board: str, amount: Any) -> None:
        summed = self.moves.amount is not None
        self.env.dynamodb.update_item(
            TableName=TABLE,
            Key={"songID": {"S": entity}, "SK": {"S": board}},
            UpdateExpression="ADD #count :amount SET #period = :board, #order = if_not_exists(#order, :tie) + :scaled",
            ExpressionAttributeNames={"#count": "DownloadCount", "#period": "Month", "#order": "LeaderboardOrder"},
            ExpressionAttributeValues={
                ":amount": {"N": str(amount)},
                ":board": {"S": board},
                ":tie": {"N": str(order_tiebreak(entity, summed))},
                ":scaled": {"N": str(int(amount * ORDER_SCALE))},
            },
        )


class CountsAnEditAsANewDownload(ShardWatermarkDesign):
    """Follows REMOVEs exactly once, as the shipped aggregator does, but takes a MODIFY of a download for a new
    download: it counts the new image again and never takes the old image's part back. Broken by any edit of a
    counted download, hazards or not."""

    takes_config = True

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config.aggregate_writes, schema=schema_of(config))
        self.name = f"counts an edit as a new download, {config.aggregate_writes}"

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        import catch_up

        parse = catch_up.parse_record
        schema = self.schema

        def as_insert(record: Any, settings_schema: Any) -> Any:
            stream = record.get("dynamodb") if isinstance(record, dict) else None
            images = [stream.get(name) or {} for name in ("OldImage", "NewImage")] if isinstance(stream, dict) else []
            if record.get("eventName") == "MODIFY" and images and not any(map(schema.is_aggregate, images)):
                record = {**record, "eventName": "INSERT"}
            return parse(record, settings_schema)

        catch_up.parse_record = as_insert
        try:
            return super().invoke(event, remaining_ms)
        finally:
            catch_up.parse_record = parse


class FollowsInsertsOnly(ShardWatermarkDesign):
    """The shipped aggregator with retractions off (downloads taken for immutable) on a table whose downloads are
    deleted and edited: a deletion is never taken back, an edit never moves. Broken by any of them."""

    takes_config = True

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config.aggregate_writes, schema=schema_of(config, retractions=False))
        self.name = f"follows inserts only, {config.aggregate_writes}"


class LedgerAppliesModifyAsNewDownload(LedgerDesign):
    """Ledger mode that applies a MODIFY as a new download: it adds the new image and never takes the old one back.
    Broken by any edit of a download the ledger counts (a move across months or categories counts it in both)."""

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config)
        self.name = f"ledger applying a MODIFY as a new download, {config.aggregate_writes}"

    def moves(self, record: dict[str, Any], schema: Any, ledger: dict[str, Any], sequence: str) -> Moves:
        if record.get("eventName") == "MODIFY":
            return self.contribution((record.get("dynamodb") or {}).get("NewImage"), schema)
        return super().moves(record, schema, ledger, sequence)


class LedgerSubtractsEveryRemove(LedgerDesign):
    """Ledger mode that takes the old image back on every REMOVE, whatever the ledger says: a download from before
    the stream deleted before the backfill counts it, or one whose first record the stream applied is its REMOVE
    after the backfill counted it, is taken back though nothing (or the backfill's image) was counted. Lost."""

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config)
        self.name = f"ledger subtracting every REMOVE, {config.aggregate_writes}"

    def moves(self, record: dict[str, Any], schema: Any, ledger: dict[str, Any], sequence: str) -> Moves:
        if record.get("eventName") == "REMOVE":
            taken = self.contribution((record.get("dynamodb") or {}).get("OldImage"), schema)
            return {key: -amount for key, amount in taken.items()}
        return super().moves(record, schema, ledger, sequence)


class LedgerComparesSequencesAcrossShards(LedgerDesign):
    """Ledger mode that orders a record against StreamFrom by sequence number alone, across shards too: a child
    numbered below its parent (child-lower-sequence) holds edits it takes for older than the parent's first record,
    and moves nothing for them. Lost (or over-counted, for an edit that took a download back)."""

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config)
        self.name = f"ledger comparing sequence numbers across shards, {config.aggregate_writes}"

    def order(self, record: tuple[str, str], first: tuple[str, str]) -> int:
        return (record[1] > first[1]) - (record[1] < first[1])


class LedgerExpiryClaimsNothing(LedgerDesign):
    """Ledger mode whose expiries by Time to Live neither move nor claim anything: a download the backfill counted,
    expired, then written again under its key, meets the stream first at its new INSERT, which moves new - Base and
    takes back the expired download's count (an expiry never changes a count). Lost."""

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config)
        self.name = f"ledger whose expiries claim nothing, {config.aggregate_writes}"

    def parse(self, record: dict[str, Any], schema: Any) -> Any:
        if expired_by_ttl(record):
            return parse_record(record, schema)
        return super().parse(record, schema)


class _ModifyAsNewLedger(StreamLedger):
    def _apply(self, shard: Any, download: Download, entry: Any, outcome: Any) -> None:
        if download.moves is not None and download.image_after:
            download = replace(download, moves=download.image_after)
        super()._apply(shard, download, entry, outcome)


class _SubtractingLedger(StreamLedger):
    def _apply(self, shard: Any, download: Download, entry: Any, outcome: Any) -> None:
        if download.moves is not None and not download.image_after:
            outcome.ours.append(download)
            return
        super()._apply(shard, download, entry, outcome)


class ShippedLedgerAppliesModifyAsNewDownload(ShippedLedgerDesign):
    """The shipped ledger mode with LedgerAppliesModifyAsNewDownload's rule: a MODIFY after StreamFrom adds its new
    image (StreamLedger._apply swapped). Over-counted."""

    ledger_class: type[StreamLedger] = _ModifyAsNewLedger

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config)
        self.name = f"shipped ledger applying a MODIFY as a new download, {config.aggregate_writes}"

    def restart(self) -> None:
        super().restart()
        deps = self.dependencies
        deps.ledger = self.ledger_class(self.env.dynamodb, LEDGER_TABLE, deps.executor, deps.progress)


class ShippedLedgerSubtractsEveryRemove(ShippedLedgerAppliesModifyAsNewDownload):
    """The shipped ledger mode with LedgerSubtractsEveryRemove's rule: a REMOVE takes its old image back wherever it
    stands against StreamFrom (StreamLedger._apply swapped). Lost."""

    ledger_class = _SubtractingLedger

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config)
        self.name = f"shipped ledger subtracting every REMOVE, {config.aggregate_writes}"


class _SequenceComparingLedger(StreamLedger):
    def _apply(self, shard: Any, download: Download, entry: Any, outcome: Any) -> None:
        if entry.shard_id is not None:
            entry = replace(entry, shard_id=shard.shard_id)  # any shard taken for StreamFrom's own
        super()._apply(shard, download, entry, outcome)


class ShippedLedgerComparesSequencesAcrossShards(ShippedLedgerAppliesModifyAsNewDownload):
    """The shipped ledger mode with LedgerComparesSequencesAcrossShards's rule: a record of another shard is placed
    against StreamFrom as if it were of StreamFrom's shard, by sequence number (StreamLedger._apply swapped). Lost."""

    ledger_class = _SequenceComparingLedger

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config)
        self.name = f"shipped ledger comparing sequence numbers across shards, {config.aggregate_writes}"


class _SequenceComparingFold(VersionedLedger):
    def after(self, version: str, current: str | None, stream_arn: str) -> bool:
        return current is None or version.split("|")[1] > current.split("|")[1]


class OneReaderComparesSequencesAcrossShards(OneReaderDesign):
    """One reader per shard that orders a record against its key's Version by sequence number alone, across shards
    too (the shipped VersionedLedger.after swapped): an edit in a child numbered below its parent
    (child-lower-sequence) is taken for older than the parent's record the key was last moved by, and changes nothing.
    The download stays where its first image put it: lost in its new month, over-counted in its old one."""

    ledger_class = _SequenceComparingFold

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config)
        self.name = f"one reader comparing sequence numbers across shards, {config.aggregate_writes}"


class _ModifyAsNewFold(VersionedLedger):
    def fold(self, fold: Fold, shard: Any, record: dict[str, Any]) -> None:
        if record.get("eventName") == "MODIFY":
            fold.contribution = {}  # what the key counted is left where it is: the new image is added beside it
        super().fold(fold, shard, record)


class OneReaderAppliesModifyAsNewDownload(OneReaderDesign):
    """One reader per shard that applies a MODIFY as a new download (the shipped VersionedLedger.fold swapped): it adds
    what the new image counts and never takes the ledger's Contribution back. Any edit of a counted download counts
    it twice (in both months, across one)."""

    ledger_class = _ModifyAsNewFold

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config)
        self.name = f"one reader applying a MODIFY as a new download, {config.aggregate_writes}"


class _SubtractingFold(VersionedLedger):
    def fold(self, fold: Fold, shard: Any, record: dict[str, Any]) -> None:
        if record.get("eventName") != "REMOVE" or expired_by_ttl(record):
            super().fold(fold, shard, record)
            return
        for board, amount in self.counts(record["dynamodb"].get("OldImage")).items():
            fold.moves[board] = fold.moves.get(board, 0) - amount
        fold.contribution, fold.applied = {}, True
        fold.version = max(fold.version or "", f"{shard.shard_id}|{record['dynamodb']['SequenceNumber'].zfill(40)}")


class OneReaderSubtractsEveryRemove(OneReaderDesign):
    """One reader per shard that takes a REMOVE's old image back each time the REMOVE is delivered, whatever the key's
    Version and Contribution say (the shipped VersionedLedger.fold swapped): a deletion retried after a lost response
    is taken back twice, and a download from before the stream deleted before any backfill is taken back though it
    was never counted. Lost."""

    ledger_class = _SubtractingFold

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config)
        self.name = f"one reader subtracting every REMOVE, {config.aggregate_writes}"


class _VersionExpiringKeeps(ExpiryKeeps):
    stream_arn = ""

    def freeze(self, fold: Fold, version: str, kept: Any, follows: str | None = None, entity: str = "") -> None:
        if self.after(version, fold.version, self.stream_arn):
            for board, amount in kept.items():
                fold.moves[board] = fold.moves.get(board, 0) + amount


class _VersionExpiringFold(VersionedLedger):
    def __init__(self, *parts: Any) -> None:
        super().__init__(*parts)
        self.expiring = _VersionExpiringKeeps(self.client, self.ledger_table, self.after)
        self.expiry_keeps = self.expiring

    def fold(self, fold: Fold, shard: Any, record: dict[str, Any]) -> None:
        self.expiring.stream_arn = shard.stream_arn
        super().fold(fold, shard, record)


class OneReaderExpiresByVersion(OneReaderDesign):
    """One reader per shard that takes an expiry by TTL for one more state of its key, applied by Version like the
    rest (the shipped ExpiryKeeps.freeze swapped): moved to its old image, the key then counting nothing. A
    rewrite under the key applied before the expiry (a child read before its parent's given-up batch, which recover
    reads back; a smaller retry of the later records) puts the key's Version past the expiry, which then changes
    nothing: the expired download, counted by no record yet, is never counted. Lost."""

    ledger_class = _VersionExpiringFold

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config)
        self.name = f"one reader expiring by Version, {config.aggregate_writes}"


class _SilentNotes(DeliveryNotes):
    def check_delivery(self, stream_arn: str, shard: str, note: Note | None, lowest: int) -> list[Message]:
        return []

    def sweep(self, stream_arn: str) -> list[Message]:
        return []


class OneReaderReportsNoTrim(OneReaderDesign):
    """One reader per shard that never reports records the mapping skipped, trimmed, during a pause past the retention
    (the shipped delivery notes' checks, at each delivery and on the schedule, swapped for none): nothing says that
    records were trimmed, so recover repairs nothing. The downloads written before the pause are lost silently, and
    so is a download written and expired within the trimmed range, which only a report could account for."""

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config)
        self.name = f"one reader reporting no trimmed records, {config.aggregate_writes}"

    def restart(self) -> None:
        super().restart()
        notes = self.dependencies.delivery_notes
        assert notes is not None
        self.dependencies.delivery_notes = _SilentNotes(notes.client, notes.progress_table, notes.shards, notes.clock)


def factory(design: type[Design]) -> Callable[[Environment, Any], Design]:
    """The model's factory for a design class: with the history's write mode when the design has modes, with the
    whole configuration when it takes it."""

    def make(env: Environment, config: Any) -> Design:
        if design in (GuideDesign, PreviousDesign):
            return design(env)  # type: ignore[call-arg]
        if getattr(design, "takes_config", False):
            return design(env, config)  # type: ignore[call-arg]
        return design(env, config.aggregate_writes)  # type: ignore[call-arg]

    make.__name__ = design.__name__
    return make


NAIVE = (
    GuideDesign,
    PreviousDesign,
    HighMarkDesign,
    CountsDeliveredRecords,
    StopsAtFirstEmptyPage,
    TrustsCreationOrder,
    AdvancesPastFailedAggregate,
    BlindIncrement,
    OneLevelOfAncestry,
)
"""Naive designs that random histories break too (`TrustsTheWindowState` only by its story: 300 random histories,
seed 14, never play a fresh-state final whose window lies past a run of empty pages)."""
NAIVE_RETRACTIONS = {
    SubtractsEveryDeliveredRetraction: "lost",
    CountsAnEditAsANewDownload: "over-counted",
    FollowsInsertsOnly: "over-counted",
}
"""Naive designs of retractions, each with what it gets wrong: the suite breaks them on histories with retractions."""
NAIVE_LEDGERS = {
    LedgerAppliesModifyAsNewDownload: "over-counted",
    LedgerSubtractsEveryRemove: "lost",
    LedgerComparesSequencesAcrossShards: "lost",
    ShippedLedgerAppliesModifyAsNewDownload: "over-counted",
    ShippedLedgerSubtractsEveryRemove: "lost",
    ShippedLedgerComparesSequencesAcrossShards: "lost",
    OneReaderComparesSequencesAcrossShards: "lost",
    OneReaderAppliesModifyAsNewDownload: "over-counted",
    OneReaderSubtractsEveryRemove: "lost",
    OneReaderReportsNoTrim: "lost without a durable failure record",
}
"""Naive ledger designs, each with what it gets wrong: the suite breaks them on random ledger histories
(`LedgerExpiryClaimsNothing` only by its story: 300 random histories, seed 38, never expire a download the backfill
counted and write it again under its key before the stream reads it; the ledger property found it, at seed 52; nor
`OneReaderExpiresByVersion`, whose break needs a rewrite applied before the expiry it follows: the one-reader design's
own random histories found it, seed 152 of 1,500)."""
