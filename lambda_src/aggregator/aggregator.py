"""Aggregator Lambda: counts new downloads from the table's stream into per-month aggregate items.

One batch becomes one conditional write per distinct (entity, month); the watermark in
`aggregate_store` makes every delivery pattern (retry, bisection, overlap) count each
stream record exactly once. Keys that fail are named in a partial-batch response.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config

from aggregate_store import AggregateStore, ApplyOutcome
from download_records import AggregateKey, Download, Rejected, Schema, coalesce, parse_record

logger = Logger()
metrics = Metrics()

_SDK_CONFIG = Config(retries={"mode": "adaptive", "max_attempts": 8}, connect_timeout=2, read_timeout=5)
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


class InjectedFault(Exception):
    """Raised by test-only fault injection after part of a batch was applied."""

    def __init__(self, message: str, report: BatchReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class Settings:
    table_name: str
    schema: Schema
    quarantine_queue_url: str | None
    write_concurrency: int
    deadline_margin_ms: int
    fault_injection_rate: float

    @classmethod
    def from_environment(cls, environ: dict[str, str]) -> Settings:
        return cls(
            table_name=environ["TABLE_NAME"],
            schema=Schema(
                entity=environ.get("ENTITY_ATTRIBUTE", "songID"),
                sort_key=environ.get("SORT_KEY_ATTRIBUTE", "SK"),
                timestamp=environ.get("TIMESTAMP_ATTRIBUTE", "Timestamp"),
                period=environ.get("PERIOD_ATTRIBUTE", "Month"),
                count=environ.get("COUNT_ATTRIBUTE", "DownloadCount"),
            ),
            quarantine_queue_url=environ.get("QUARANTINE_QUEUE_URL") or None,
            write_concurrency=int(environ.get("WRITE_CONCURRENCY", "8")),
            deadline_margin_ms=int(environ.get("DEADLINE_MARGIN_MS", "3000")),
            fault_injection_rate=fault_injection_rate(environ),
        )


def fault_injection_rate(environ: dict[str, str]) -> float:
    """The test-only fault rate, honoured only when the SDK endpoint is a loopback emulator.

    Real Lambda never sets AWS_ENDPOINT_URL to a loopback address, so a rate that leaks into
    a real deployment stays inert; the module also defaults the rate to zero.
    """
    rate = float(environ.get("TEST_FAULT_INJECTION_RATE", "0") or "0")
    if rate <= 0:
        return 0.0
    endpoint_host = urlparse(environ.get("AWS_ENDPOINT_URL", "")).hostname
    if endpoint_host not in _LOOPBACK_HOSTS:
        logger.warning("fault injection requested but ignored: not running against a loopback emulator")
        return 0.0
    return min(rate, 1.0)


@dataclass
class BatchReport:
    received: int = 0
    first_sequence: str | None = None
    last_sequence: str | None = None
    retry_from: str | None = None
    """The lowest record named in the partial-batch response: where the mapping's retry starts."""
    downloads: int = 0
    added: int = 0
    already_applied: int = 0
    writes: int = 0
    ignored: dict[str, int] = field(default_factory=dict)
    rejected: list[Rejected] = field(default_factory=list)
    failed_keys: list[tuple[AggregateKey, str]] = field(default_factory=list)
    deferred_keys: list[AggregateKey] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "records_received": self.received,
            "first_sequence": self.first_sequence,
            "last_sequence": self.last_sequence,
            "retry_from": self.retry_from,
            "downloads": self.downloads,
            "added": self.added,
            "already_applied": self.already_applied,
            "aggregate_writes": self.writes,
            "ignored": self.ignored,
            "rejected": len(self.rejected),
            "failed_keys": len(self.failed_keys),
            "deferred_keys": len(self.deferred_keys),
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
    return downloads


def process_batch(
    records: list[dict[str, Any]],
    store: AggregateStore,
    settings: Settings,
    remaining_ms: Callable[[], int],
    inject_fault: bool = False,
) -> tuple[dict[str, Any], BatchReport]:
    """Apply a batch and build the partial-batch response; pure but for the store."""
    report = BatchReport(received=len(records))
    groups = coalesce(classify(records, settings.schema, report))
    keys = sorted(groups, key=lambda key: groups[key][0].sequence)
    if inject_fault:
        keys = keys[: max(1, len(keys) // 2)]

    def apply_one(key: AggregateKey) -> ApplyOutcome | None:
        if remaining_ms() < settings.deadline_margin_ms:
            return None
        return store.apply(key, [download.sequence for download in groups[key]])

    with ThreadPoolExecutor(max_workers=max(1, settings.write_concurrency)) as pool:
        futures = {key: pool.submit(apply_one, key) for key in keys}
    for key, future in futures.items():
        error = future.exception()
        if error is not None:
            report.failed_keys.append((key, f"{type(error).__name__}: {error}"))
            continue
        outcome = future.result()
        if outcome is None:
            report.deferred_keys.append(key)
            continue
        report.added += outcome.added
        report.already_applied += outcome.already_applied
        report.writes += outcome.writes

    if inject_fault:
        raise InjectedFault(f"test-only fault after applying {len(keys)} of {len(groups)} aggregates", report)

    unfinished = [key for key, _ in report.failed_keys] + report.deferred_keys
    failures = [{"itemIdentifier": groups[key][0].raw_sequence} for key in unfinished]
    if unfinished:
        report.retry_from = min(
            (groups[key][0] for key in unfinished), key=lambda download: download.sequence
        ).raw_sequence
    return {"batchItemFailures": failures}, report


def quarantine(rejected: list[Rejected], queue_url: str | None, sqs: Any) -> None:
    """Log every rejected record in full and copy it to the failure queue, so none vanishes."""
    for item in rejected:
        logger.warning(
            "rejected download record",
            extra={"reason": item.reason, "sequence_number": item.raw_sequence, "record": item.record},
        )
    if not rejected or not queue_url:
        return
    for start in range(0, len(rejected), 10):
        chunk = rejected[start : start + 10]
        entries = [
            {
                "Id": str(index),
                "MessageBody": json.dumps(
                    {
                        "kind": "rejected_download",
                        "reason": item.reason,
                        "sequenceNumber": item.raw_sequence,
                        "record": item.record,
                    },
                    default=str,
                )[:250_000],
            }
            for index, item in enumerate(chunk)
        ]
        try:
            response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
            if response.get("Failed"):
                logger.error(
                    "some rejected records were not copied to the failure queue", extra={"failed": response["Failed"]}
                )
        except Exception:
            logger.exception("rejected records were not copied to the failure queue; the log lines above hold them")


SETTINGS = Settings.from_environment(dict(os.environ))
_dynamodb = boto3.client("dynamodb", config=_SDK_CONFIG)
_sqs = boto3.client("sqs", config=_SDK_CONFIG)
STORE = AggregateStore(_dynamodb, SETTINGS.table_name, SETTINGS.schema)
if SETTINGS.fault_injection_rate:
    logger.warning("TEST-ONLY fault injection is active", extra={"rate": SETTINGS.fault_injection_rate})


@metrics.log_metrics
@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    started = time.monotonic()
    inject = SETTINGS.fault_injection_rate > 0 and random.random() < SETTINGS.fault_injection_rate
    records = event.get("Records") or []
    try:
        response, report = process_batch(records, STORE, SETTINGS, context.get_remaining_time_in_millis, inject)
    except InjectedFault as fault:
        metrics.add_metric(name="InjectedFaults", unit=MetricUnit.Count, value=1)
        logger.warning("test-only fault injected", extra=fault.report.summary())
        raise
    quarantine(report.rejected, SETTINGS.quarantine_queue_url, _sqs)
    for key, reason in report.failed_keys:
        logger.error(
            "aggregate update failed", extra={"entity_id": key.entity_id, "period": key.period, "error": reason}
        )
    metrics.add_metric(name="DownloadsCounted", unit=MetricUnit.Count, value=report.added)
    metrics.add_metric(name="DownloadsAlreadyApplied", unit=MetricUnit.Count, value=report.already_applied)
    metrics.add_metric(name="AggregateWrites", unit=MetricUnit.Count, value=report.writes)
    metrics.add_metric(name="RejectedRecords", unit=MetricUnit.Count, value=len(report.rejected))
    metrics.add_metric(
        name="FailedAggregates", unit=MetricUnit.Count, value=len(report.failed_keys) + len(report.deferred_keys)
    )
    logger.info("batch summary", extra={**report.summary(), "duration_ms": round((time.monotonic() - started) * 1000)})
    return response
