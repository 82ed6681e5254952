"""Aggregator Lambda: counts new downloads from the table's stream into per-month aggregate items, exactly once.

The event source mapping delivers tumbling-window events: one shard's records, the shard's id
and the window's state. Downloads are folded into the state per aggregate and written with one
conditional UpdateItem per aggregate (every batch, or once per window), guarded by that shard's
watermark in the aggregate, so no retry, bisection or redelivery counts a record twice and
none is lost. What cannot be counted exactly is refused and reported, never guessed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config

from aggregate_store import AggregateStore, ApplyOutcome, WatermarkInconsistency, WatermarkRetention
from delivery import Delivery, Refused, ShardRef, parse_delivery
from download_records import AggregateKey, Download, Rejected, Schema, parse_record
from stream_verification import verified_records
from window_state import InvalidState, Segment, WindowState, fold, from_lambda_state, state_size, to_lambda_state

logger = Logger()
metrics = Metrics()

_SDK_CONFIG = Config(retries={"mode": "adaptive", "max_attempts": 8}, connect_timeout=2, read_timeout=5)
PER_BATCH = "per_batch"
PER_WINDOW = "per_window"
STATE_FLUSH_BYTES = 256 * 1024
"""Lambda ends a window early above 1 MB of state; pending downloads are written well before that."""


class AggregatesNotWritten(Exception):
    """The window ends, or a direct invocation returns, with aggregates unwritten: Lambda retries the same state."""

    def __init__(self, message: str, report: BatchReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class Settings:
    table_name: str
    table_arn: str
    schema: Schema
    leaderboard_shards: int
    failure_queue_url: str | None
    aggregate_writes: str
    retention: WatermarkRetention
    write_concurrency: int
    deadline_margin_ms: int

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Settings:
        aggregate_writes = environ.get("AGGREGATE_WRITES", PER_BATCH)
        if aggregate_writes not in (PER_BATCH, PER_WINDOW):
            raise ValueError(f"AGGREGATE_WRITES is {aggregate_writes!r}, not {PER_BATCH} or {PER_WINDOW}")
        return cls(
            table_name=environ["TABLE_NAME"],
            table_arn=environ["TABLE_ARN"],
            schema=Schema(
                entity=environ.get("ENTITY_ATTRIBUTE", "songID"),
                sort_key=environ.get("SORT_KEY_ATTRIBUTE", "SK"),
                timestamp=environ.get("TIMESTAMP_ATTRIBUTE", "Timestamp"),
                period=environ.get("PERIOD_ATTRIBUTE", "Month"),
                count=environ.get("COUNT_ATTRIBUTE", "DownloadCount"),
                order=environ.get("ORDER_ATTRIBUTE", "LeaderboardOrder"),
            ),
            leaderboard_shards=int(environ.get("LEADERBOARD_SHARDS", "1")),
            failure_queue_url=environ.get("FAILURE_QUEUE_URL") or None,
            aggregate_writes=aggregate_writes,
            retention=WatermarkRetention(
                maximum_record_age_seconds=int(environ.get("MAXIMUM_RECORD_AGE_SECONDS", "3600")),
                window_seconds=int(environ.get("TUMBLING_WINDOW_SECONDS", "60")),
            ),
            write_concurrency=int(environ.get("WRITE_CONCURRENCY", "8")),
            deadline_margin_ms=int(environ.get("DEADLINE_MARGIN_MS", "5000")),
        )


@dataclass
class BatchReport:
    shard_id: str | None = None
    window_start: str | None = None
    final: bool = False
    direct: bool = False
    received: int = 0
    first_sequence: str | None = None
    last_sequence: str | None = None
    downloads: int = 0
    distinct_aggregates: int = 0
    """(entity, period) pairs among this invocation's downloads: the fewest writes that could count them."""
    redelivered: int = 0
    """Downloads this window had already folded: skipped without a write."""
    added: int = 0
    already_applied: int = 0
    writes: int = 0
    aggregates_written: int = 0
    pruned_watermarks: int = 0
    index_partition_writes: dict[str, int] = field(default_factory=dict)
    """Aggregate writes per index partition: each moves the index sort key, two index writes."""
    pending_aggregates: int = 0
    """Aggregates left in the window state, to be written by a later invocation of the window."""
    ignored: dict[str, int] = field(default_factory=dict)
    rejected: list[Rejected] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    failed_keys: list[tuple[AggregateKey, str]] = field(default_factory=list)
    deferred_keys: list[AggregateKey] = field(default_factory=list)
    """Not started, or not finished, before the deadline margin."""
    inconsistent_keys: list[tuple[AggregateKey, str]] = field(default_factory=list)
    previous_streams: dict[str, tuple[str, ...]] = field(default_factory=dict)
    unwritten: list[dict[str, Any]] = field(default_factory=list)
    """What a failing final (or direct) invocation leaves unwritten: lost if Lambda gives up on the window."""
    window_terminated_early: bool = False

    def summary(self) -> dict[str, Any]:
        return {
            "shard_id": self.shard_id,
            "window_start": self.window_start,
            "final_invocation": self.final,
            "direct_invocation": self.direct,
            "records_received": self.received,
            "first_sequence": self.first_sequence,
            "last_sequence": self.last_sequence,
            "downloads": self.downloads,
            "distinct_aggregates": self.distinct_aggregates,
            "redelivered": self.redelivered,
            "added": self.added,
            "already_applied": self.already_applied,
            "aggregate_writes": self.writes,
            "aggregates_written": self.aggregates_written,
            "pruned_watermarks": self.pruned_watermarks,
            "index_partition_writes": self.index_partition_writes,
            "pending_aggregates": self.pending_aggregates,
            "ignored": self.ignored,
            "rejected": len(self.rejected),
            "refused": len(self.refused),
            "failed_aggregates": len(self.failed_keys),
            "deferred_aggregates": len(self.deferred_keys),
            "inconsistent_aggregates": len(self.inconsistent_keys),
            "window_terminated_early": self.window_terminated_early,
        }


def classify(records: list[dict[str, Any]], schema: Schema, report: BatchReport) -> list[Download]:
    """The batch's downloads; rejected and ignored records are tallied in the report."""
    downloads: list[Download] = []
    for record in records:
        parsed = parse_record(record, schema)
        if parsed.raw_sequence is not None:
            report.first_sequence = report.first_sequence or parsed.raw_sequence
            report.last_sequence = parsed.raw_sequence
        if isinstance(parsed, Download):
            downloads.append(parsed)
        elif isinstance(parsed, Rejected):
            report.rejected.append(parsed)
        else:
            report.ignored[parsed.reason] = report.ignored.get(parsed.reason, 0) + 1
    report.downloads = len(downloads)
    report.distinct_aggregates = len({download.key for download in downloads})
    return downloads


def write_pending(
    state: WindowState,
    store: AggregateStore,
    settings: Settings,
    remaining_ms: Callable[[], int],
    report: BatchReport,
    executor: Executor,
) -> None:
    """Write every pending aggregate in parallel, returning before the deadline margin whatever the SDK is doing.

    Written aggregates leave the state; failed, refused-in-part or unfinished ones stay, marked
    attempted, for a later invocation of the window (or, at the window's end, for Lambda's retry).
    Updates still running at the deadline are abandoned, not awaited: each is a conditional
    write, so landing late can neither double nor lose a count.
    """
    shard = state.shard
    if shard is None or not state.pending:
        return
    keys = sorted(state.pending, key=lambda key: state.pending[key][0].low)
    segments = {key: list(state.pending[key]) for key in keys}

    def apply_unless_late(key: AggregateKey) -> ApplyOutcome | None:
        if remaining_ms() < settings.deadline_margin_ms:
            return None
        return store.apply(key, shard, segments[key])

    budget_seconds = max(0.0, (remaining_ms() - settings.deadline_margin_ms) / 1000)
    futures = {executor.submit(apply_unless_late, key): key for key in keys}
    finished, unfinished = wait(futures, timeout=budget_seconds)
    for future in unfinished:
        future.cancel()
    for future, key in futures.items():
        outcome = _outcome_of(future, key, finished, report)
        if outcome is None:
            _mark_attempted(state, key)
            continue
        report.added += outcome.added
        report.already_applied += outcome.already_applied
        report.writes += outcome.writes
        report.aggregates_written += 1
        report.pruned_watermarks += outcome.pruned_watermarks
        if outcome.index_partition is not None:
            partition = outcome.index_partition
            report.index_partition_writes[partition] = report.index_partition_writes.get(partition, 0) + 1
        if outcome.previous_stream_labels:
            report.previous_streams[f"{key.entity_id}|{key.period}"] = outcome.previous_stream_labels
        for segment in outcome.refused:
            report.refused.append(_refused_segment(key, shard, segment))
        del state.pending[key]


def _outcome_of(
    future: Future[ApplyOutcome | None], key: AggregateKey, finished: set[Future[Any]], report: BatchReport
) -> ApplyOutcome | None:
    """The aggregate's outcome, or None after recording in the report why it stays pending."""
    if future not in finished:
        report.deferred_keys.append(key)
        return None
    error = future.exception()
    if isinstance(error, WatermarkInconsistency):
        report.inconsistent_keys.append((key, str(error)))
        return None
    if error is not None:
        report.failed_keys.append((key, f"{type(error).__name__}: {error}"))
        return None
    outcome = future.result()
    if outcome is None:
        report.deferred_keys.append(key)
    return outcome


def _mark_attempted(state: WindowState, key: AggregateKey) -> None:
    state.pending[key] = [replace(segment, attempted=True) for segment in state.pending[key]]


def _refused_segment(key: AggregateKey, shard: ShardRef, segment: Segment) -> Refused:
    reason = "older than a pruned watermark of its aggregate: it cannot be proven uncounted"
    return Refused(
        reason,
        segment.low,
        {
            "entityId": key.entity_id,
            "period": key.period,
            "streamArn": shard.stream_arn,
            "shardId": shard.shard_id,
            "downloads": segment.count,
            "lowSequence": segment.low,
            "highSequence": segment.high,
        },
    )


def process_delivery(
    delivery: Delivery,
    store: AggregateStore,
    settings: Settings,
    remaining_ms: Callable[[], int],
    executor: Executor,
    streams: Any = None,
    clock: Callable[[], float] = time.time,
) -> tuple[dict[str, Any], BatchReport]:
    """Fold one delivery into its window state, write what is due, and build the response Lambda checkpoints."""
    report = BatchReport(
        shard_id=delivery.shard_id,
        window_start=delivery.window.start if delivery.window else None,
        final=delivery.is_final,
        direct=delivery.is_direct,
        received=len(delivery.records) + len(delivery.refused),
        refused=list(delivery.refused),
        window_terminated_early=delivery.terminated_early,
    )
    records = delivery.records
    if delivery.is_direct and delivery.shard is not None and records:
        records, unverified = verified_records(streams, delivery.shard, records)
        report.refused.extend(unverified)
    if delivery.is_direct or delivery.shard_id is None:
        state = WindowState(shard=delivery.shard)
    else:
        state = from_lambda_state(delivery.state, delivery.shard, delivery.shard_id)
    downloads = classify(records, settings.schema, report)
    if downloads and state.shard is not None:
        folded = fold(state, downloads, int(clock()))
        report.redelivered = folded.redelivered
    write_now = delivery.is_final or settings.aggregate_writes == PER_BATCH or _too_big(state)
    if write_now:
        write_pending(state, store, settings, remaining_ms, report, executor)
    report.pending_aggregates = len(state.pending)
    if state.pending and (delivery.is_final or _too_big(state)):
        report.unwritten = [
            {
                "entity_id": key.entity_id,
                "period": key.period,
                "downloads": sum(segment.count for segment in segments),
                "low_sequence": segments[0].low,
                "high_sequence": segments[-1].high,
            }
            for key, segments in sorted(state.pending.items(), key=lambda item: item[1][0].low)
        ]
        raise AggregatesNotWritten(
            f"{len(state.pending)} aggregates of {report.shard_id} are not written; "
            "Lambda retries this invocation with the same state",
            report,
        )
    return {"state": {} if delivery.is_final else to_lambda_state(state), "batchItemFailures": []}, report


def _too_big(state: WindowState) -> bool:
    return state_size(to_lambda_state(state)) > STATE_FLUSH_BYTES


def report_to_failure_queue(report: BatchReport, queue_url: str | None, sqs: Any) -> None:
    """Log every rejected or refused record in full and copy it to the failure queue, so none vanishes."""
    messages: list[dict[str, Any]] = []
    for item in report.rejected:
        logger.warning(
            "rejected download record",
            extra={"reason": item.reason, "sequence_number": item.raw_sequence, "record": item.record},
        )
        messages.append(
            {
                "kind": "rejected_download",
                "reason": item.reason,
                "sequenceNumber": item.raw_sequence,
                "record": item.record,
            }
        )
    for item in report.refused:
        logger.error(
            "refused record",
            extra={"reason": item.reason, "sequence_number": item.raw_sequence, "record": item.record},
        )
        messages.append(
            {
                "kind": "refused_record",
                "reason": item.reason,
                "sequenceNumber": item.raw_sequence,
                "shardId": report.shard_id,
                "record": item.record,
            }
        )
    if not messages or not queue_url:
        return
    for start in range(0, len(messages), 10):
        entries = [
            {"Id": str(index), "MessageBody": json.dumps(message, default=str)[:250_000]}
            for index, message in enumerate(messages[start : start + 10])
        ]
        try:
            response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
            if response.get("Failed"):
                logger.error("some records were not copied to the failure queue", extra={"failed": response["Failed"]})
        except Exception:
            logger.exception("records were not copied to the failure queue; the log lines above hold them")


def publish(report: BatchReport, started: float, succeeded: bool) -> None:
    if report.unwritten:
        logger.error(
            "aggregates not written at the end of the window",
            extra={"shard_id": report.shard_id, "window_start": report.window_start, "aggregates": report.unwritten},
        )
    if report.window_terminated_early:
        logger.error(
            "window terminated early", extra={"shard_id": report.shard_id, "window_start": report.window_start}
        )
    for key, reason in report.failed_keys:
        logger.warning(
            "aggregate update failed; it stays pending in the window state",
            extra={"entity_id": key.entity_id, "period": key.period, "error": reason},
        )
    for key, reason in report.inconsistent_keys:
        logger.error(
            "watermark inconsistency",
            extra={"entity_id": key.entity_id, "period": key.period, "shard_id": report.shard_id, "error": reason},
        )
    for aggregate, labels in report.previous_streams.items():
        logger.warning(
            "aggregate carries watermarks of a previous stream",
            extra={"aggregate": aggregate, "stream_labels": labels},
        )
    metrics.add_metric(name="DownloadsCounted", unit=MetricUnit.Count, value=report.added)
    metrics.add_metric(
        name="DownloadsAlreadyApplied", unit=MetricUnit.Count, value=report.already_applied + report.redelivered
    )
    metrics.add_metric(name="AggregateWrites", unit=MetricUnit.Count, value=report.writes)
    metrics.add_metric(name="RejectedRecords", unit=MetricUnit.Count, value=len(report.rejected))
    metrics.add_metric(name="RefusedRecords", unit=MetricUnit.Count, value=len(report.refused))
    metrics.add_metric(
        name="FailedAggregates", unit=MetricUnit.Count, value=len(report.failed_keys) + len(report.deferred_keys)
    )
    metrics.add_metric(name="WatermarkInconsistencies", unit=MetricUnit.Count, value=len(report.inconsistent_keys))
    metrics.add_metric(name="PreviousStreamWatermarks", unit=MetricUnit.Count, value=len(report.previous_streams))
    duration_ms = round((time.monotonic() - started) * 1000)
    logger.info("batch summary", extra={**report.summary(), "succeeded": succeeded, "duration_ms": duration_ms})


SETTINGS = Settings.from_environment(dict(os.environ))
_dynamodb = boto3.client("dynamodb", config=_SDK_CONFIG)
_streams = boto3.client("dynamodbstreams", config=_SDK_CONFIG)
_sqs = boto3.client("sqs", config=_SDK_CONFIG)
STORE = AggregateStore(
    _dynamodb,
    SETTINGS.table_name,
    SETTINGS.schema,
    SETTINGS.retention,
    leaderboard_shards=SETTINGS.leaderboard_shards,
)
_WRITERS = ThreadPoolExecutor(max_workers=max(1, SETTINGS.write_concurrency), thread_name_prefix="aggregate-writer")


@metrics.log_metrics
@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    started = time.monotonic()
    delivery = parse_delivery(event, SETTINGS.table_arn)
    try:
        response, report = process_delivery(
            delivery, STORE, SETTINGS, context.get_remaining_time_in_millis, _WRITERS, _streams
        )
    except AggregatesNotWritten as failure:
        report_to_failure_queue(failure.report, SETTINGS.failure_queue_url, _sqs)
        publish(failure.report, started, succeeded=False)
        raise
    except InvalidState as error:
        logger.error("invalid window state", extra={"error": str(error), "shard_id": event.get("shardId")})
        metrics.add_metric(name="WatermarkInconsistencies", unit=MetricUnit.Count, value=1)
        raise
    report_to_failure_queue(report, SETTINGS.failure_queue_url, _sqs)
    publish(report, started, succeeded=True)
    return response
