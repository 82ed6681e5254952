"""Ledger mode with one reader per shard (STREAM_READERS=1): the mapping is the only steady reader of each shard.

The handler applies the records the mapping delivers and nothing else: no GetRecords, no checkpoint of its own. Each
record moves its download key as the key's versioned ledger item says (versioned_ledger.py), so retries in any order,
duplicates and bisected batches change nothing twice. What it never applies: an invocation without a window (a
direct one: nothing can tell its records from the stream's without reading the shard). What it cannot refuse: an
event shaped like the mapping's from another caller, since AWS documents nothing in an event or its context that
proves the caller; whoever may invoke the function is trusted like the mapping. What the mapping may not deliver: a
batch it gives up, named by its on-failure record, which `leaderboard-tools recover` has read back by this function's
`readBack` event (a reader for the moments it runs); and records trimmed during a pause past the retention, which the
trimmed check reports (delivery_notes.py) at each delivery and on the schedule (docs/exactly-once-one-reader.md).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import BotoCoreError, ClientError

from aggregator_settings import Settings
from delivery import ShardRef, parse_delivery
from delivery_notes import DeliveryNotes
from dependencies import Dependencies
from download_records import Rejected
from failure_messages import refused_message, rejected_message
from ledger_records import sequence_of, well_formed
from lineage_sweep import LINEAGE_SWEEP_EVENT, is_lineage_sweep_event
from telemetry import logger, metrics
from versioned_ledger import VersionedLedger

READ_BACK_EVENT = "readBack"
"""`{"readBack": <DDBStreamBatchInfo of an on-failure record>}`: recover's request to apply a given-up range."""
READ_BACK_PAGES = 1000
DIRECT_REFUSED = (
    "one reader per shard: only the mapping's events and recover's readBack are applied; a direct invocation's "
    "records cannot be told from the stream's without reading the shard, so nothing is counted"
)
TRIMMED_CODES = {"TrimmedDataAccessException", "ResourceNotFoundException"}
"""A range the stream no longer holds (S5), or a shard or stream it no longer lists (S8): recover recounts."""


class HeadMissing(Exception):
    """The range's first record was not the first read: it, and any before the first read, may have been trimmed."""


class ReportsNotSent(Exception):
    """Reports did not reach the failure queue: the invocation fails, and the mapping retries it."""


@dataclass
class Summary:
    """What one invocation did, for its log line and metrics."""

    kind: str
    shard_id: str | None = None
    received: int = 0
    keys_applied: int = 0
    expiries_kept: int = 0
    rejected: int = 0
    refused: int = 0
    keeps_unsure: int = 0
    trimmed: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "shard_id": self.shard_id,
            "received": self.received,
            "keys_applied": self.keys_applied,
            "expiries_kept": self.expiries_kept,
            "rejected": self.rejected,
            "refused": self.refused,
            "keeps_unsure": self.keeps_unsure,
            "trimmed_reports": len(self.trimmed),
        }


def is_read_back_event(event: Any) -> bool:
    return isinstance(event, Mapping) and isinstance(event.get(READ_BACK_EVENT), Mapping)


def parts(deps: Dependencies) -> tuple[VersionedLedger, DeliveryNotes]:
    if deps.versioned_ledger is None or deps.delivery_notes is None:
        raise RuntimeError("STREAM_READERS is 1 but the versioned ledger is not wired")
    return deps.versioned_ledger, deps.delivery_notes


def process_event(event: Any, deps: Dependencies, settings: Settings) -> tuple[dict[str, Any], Summary]:
    """One invocation in one-reader mode: the schedule's trimmed check, recover's readBack, or the mapping's event. It
    needs no deadline of its own: a batch cut short by the timeout is retried, and applies nothing twice."""
    if is_lineage_sweep_event(event):
        return sweep(event, deps, settings)
    if is_read_back_event(event):
        return read_back(event[READ_BACK_EVENT], deps, settings)
    return deliver(event, deps, settings)


# ---------------------------------------------------------------------------------------------- the mapping's events


def deliver(event: Any, deps: Dependencies, settings: Settings) -> tuple[dict[str, Any], Summary]:
    """Apply the records the mapping delivered, after checking what may have been trimmed before them."""
    delivery = parse_delivery(event, settings.table_arn)
    summary = Summary("delivery", delivery.shard_id, received=len(delivery.records) + len(delivery.refused))
    if delivery.is_direct:
        logger.warning("direct invocation refused", extra={"reason": DIRECT_REFUSED, "shard_id": delivery.shard_id})
        return {"refused": DIRECT_REFUSED, "counted": 0}, Summary("refused", delivery.shard_id)
    messages = [refused_message(item) for item in delivery.refused]
    summary.refused = len(messages)
    shard = delivery.shard
    records, malformed = well_formed(delivery.records)
    if shard is not None:
        messages += [rejected_message(item, shard) for item in malformed]
        summary.rejected = len(malformed)
    if shard is None or not records:
        _send(deps, messages)
        return {"state": {}, "batchItemFailures": []}, summary
    ledger, notes = parts(deps)
    deps.progress.genesis()
    note = notes.note_of(shard.shard_id)
    trimmed = notes.check_delivery(shard.stream_arn, shard.shard_id, note, sequence_of(min(records, key=sequence_of)))
    rejected = _rejected(ledger, shard, records)
    summary.trimmed, summary.rejected = trimmed, summary.rejected + len(rejected)
    _send(deps, messages + trimmed + rejected)
    notes.note_delivered(shard.stream_arn, shard.shard_id, note, records, vouched=bool(trimmed))
    _apply(ledger, deps, shard, records, summary)
    notes.note_finished(shard.shard_id, records)
    return {"state": {}, "batchItemFailures": []}, summary


def _rejected(ledger: VersionedLedger, shard: ShardRef, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A `rejected_download` for every download whose new image cannot count, reported on every delivery."""
    found = []
    for record in records:
        reason = ledger.rejection(record)
        if reason is not None:
            found.append(rejected_message(Rejected(reason, record["dynamodb"]["SequenceNumber"], record), shard))
    return found


def _apply(
    ledger: VersionedLedger, deps: Dependencies, shard: ShardRef, records: list[dict[str, Any]], summary: Summary
) -> None:
    applied = ledger.apply(shard, records, lambda reports: _send(deps, reports))
    summary.keys_applied += applied.keys
    summary.expiries_kept += applied.expiries
    summary.refused += applied.refused
    summary.keeps_unsure += applied.unsure


def _send(deps: Dependencies, messages: list[dict[str, Any]]) -> None:
    """Every report reaches the failure queue, or the invocation fails and is retried: none is ever dropped."""
    if messages and not deps.send_failures(messages):
        raise ReportsNotSent(f"{len(messages)} reports did not reach the failure queue; the invocation is retried")


# ---------------------------------------------------------------------------------------------- recover's readBack


def read_back(info: Mapping[str, Any], deps: Dependencies, settings: Settings) -> tuple[dict[str, Any], Summary]:
    """Read a range the mapping gave up (its on-failure record's DDBStreamBatchInfo) and apply it like a delivery.

    Answers `{"readBack": "applied", ...}` with what was applied, or `"trimmed"` / `"unreadable"` with `"recount":
    true` when the range cannot be read whole: recover then recounts."""
    shard_id, start, end = info.get("shardId"), info.get("startSequenceNumber"), info.get("endSequenceNumber")
    stream_arn = info.get("streamArn")
    answer: dict[str, Any] = {"shardId": shard_id, "startSequenceNumber": start, "endSequenceNumber": end}
    summary = Summary("readBack", shard_id if isinstance(shard_id, str) else None)
    problem = _invalid_range(info, settings)
    if problem is not None:
        return {**answer, "readBack": "unreadable", "recount": True, "reason": problem}, summary
    shard = ShardRef(str(stream_arn), str(shard_id))
    try:
        records = read_range(deps.streams, shard, str(start), int(str(end)))
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        outcome = "trimmed" if code in TRIMMED_CODES else "unreadable"
        return {**answer, "readBack": outcome, "recount": True, "reason": f"{code}: {error}"}, summary
    except HeadMissing as missing:
        return {**answer, "readBack": "trimmed", "recount": True, "reason": str(missing)}, summary
    except (BotoCoreError, RuntimeError) as error:
        return {**answer, "readBack": "unreadable", "recount": True, "reason": str(error)}, summary
    ledger, _ = parts(deps)
    deps.progress.genesis()
    summary.received = len(records)
    rejected = _rejected(ledger, shard, records)
    summary.rejected = len(rejected)
    _send(deps, rejected)
    _apply(ledger, deps, shard, records, summary)
    return {
        **answer,
        "readBack": "applied",
        "recount": False,
        "records": len(records),
        "keysApplied": summary.keys_applied,
        "expiriesKept": summary.expiries_kept,
        "refused": summary.refused,
        "rejected": summary.rejected,
    }, summary


def _invalid_range(info: Mapping[str, Any], settings: Settings) -> str | None:
    """Why a readBack names no range of this table's stream, or None."""
    stream_arn = info.get("streamArn")
    if not isinstance(stream_arn, str) or not stream_arn.startswith(f"{settings.table_arn}/stream/"):
        return f"streamArn {stream_arn!r} is not a stream of {settings.table_arn}"
    if not isinstance(info.get("shardId"), str) or not info["shardId"]:
        return "shardId is missing"
    for name in ("startSequenceNumber", "endSequenceNumber"):
        value = info.get(name)
        if not (isinstance(value, str) and value.isdigit() and len(value) <= 40):
            return f"{name} {value!r} is not a sequence number"
    return None


def read_range(streams: Any, shard: ShardRef, start: str, end: int) -> list[dict[str, Any]]:
    """The range from its first record through its last, by GetRecords: a reader for the moments it runs. It ends at
    the range's last record (`endSequenceNumber`, a record the mapping delivered): on an open shard whose last record
    it is, GetRecords answers empty pages from there on, with an iterator ("If there are no stream records available
    in the portion of the shard that the iterator points to, GetRecords returns an empty list"). It begins at the
    range's first record (`startSequenceNumber`, also delivered) or not at all: AWS says only that a read whose records
    were trimmed meanwhile "might" receive TrimmedDataAccessException, so a first record numbered otherwise, or none,
    raises HeadMissing."""
    iterator = streams.get_shard_iterator(
        StreamArn=shard.stream_arn,
        ShardId=shard.shard_id,
        ShardIteratorType="AT_SEQUENCE_NUMBER",
        SequenceNumber=start,
    )["ShardIterator"]
    records: list[dict[str, Any]] = []
    for _ in range(READ_BACK_PAGES):
        if iterator is None and not records:
            raise HeadMissing(f"the shard ended before {start} was read: it may have been trimmed")
        if iterator is None:
            return records
        page = streams.get_records(ShardIterator=iterator, Limit=1000)
        for record in page.get("Records", []):
            if not records and sequence_of(record) != int(start):
                raise HeadMissing(
                    f"the first record read is {sequence_of(record)}, not {start}: it may have been trimmed"
                )
            if sequence_of(record) > end:
                return records
            records.append(record)
            if sequence_of(record) == end:
                return records
        iterator = page.get("NextShardIterator")
    raise RuntimeError("the given-up range was not read to its end")


# ---------------------------------------------------------------------------------------------- the schedule


def sweep(event: Mapping[str, Any], deps: Dependencies, settings: Settings) -> tuple[dict[str, Any], Summary]:
    """The schedule's trimmed check: every listed shard, for the lineages nothing delivers to. It reads no shard."""
    stream_arn = event[LINEAGE_SWEEP_EVENT].get("streamArn")
    if not isinstance(stream_arn, str) or not stream_arn.startswith(f"{settings.table_arn}/stream/"):
        raise ValueError(f"lineageSweep.streamArn is {stream_arn!r}, not a stream of {settings.table_arn}")
    _, notes = parts(deps)
    messages = notes.sweep(stream_arn)
    _send(deps, messages)
    notes.vouch(messages)
    return {"streamArn": stream_arn, "trimmedReports": len(messages)}, Summary("sweep", trimmed=messages)


# ---------------------------------------------------------------------------------------------- the Lambda's entry


def handle_one_reader(
    event: dict[str, Any], context: LambdaContext, settings: Settings, deps: Dependencies
) -> dict[str, Any]:
    """aggregator.handle's path when STREAM_READERS is 1: the invocation, its log line and its metrics."""
    started = time.monotonic()
    try:
        response, summary = process_event(event, deps, settings)
    except Exception:
        logger.exception(
            "invocation failed; it is retried",
            extra={"shard_id": event.get("shardId") if isinstance(event, dict) else None},
        )
        raise
    publish(summary, started)
    return response


def publish(summary: Summary, started: float) -> None:
    for message in summary.trimmed:
        logger.error("records may have been trimmed before the mapping delivered them", extra=message)
    metrics.add_metric(name="DownloadKeysApplied", unit=MetricUnit.Count, value=summary.keys_applied)
    metrics.add_metric(name="ExpiriesKept", unit=MetricUnit.Count, value=summary.expiries_kept)
    metrics.add_metric(name="RejectedRecords", unit=MetricUnit.Count, value=summary.rejected)
    metrics.add_metric(name="RefusedRecords", unit=MetricUnit.Count, value=summary.refused)
    metrics.add_metric(name="TrimmedRecords", unit=MetricUnit.Count, value=1 if summary.trimmed else 0)
    duration_ms = round((time.monotonic() - started) * 1000)
    logger.info("one-reader summary", extra={**summary.as_dict(), "duration_ms": duration_ms})
