"""What one invocation did, as its log summary and metrics say it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from delivery import Refused
from download_records import AggregateKey, Rejected
from telemetry import logger, metrics


@dataclass
class BatchReport:
    shard_id: str | None = None
    window_start: str | None = None
    final: bool = False
    direct: bool = False
    window_terminated_early: bool = False
    received: int = 0
    first_sequence: str | None = None
    last_sequence: str | None = None
    bound: str | None = None
    checkpoint_before: str | None = None
    checkpoint_after: str | None = None
    records_read: int = 0
    read_pages: int = 0
    empty_pages: int = 0
    throttled_reads: int = 0
    shard_ended: bool = False
    caught_up: bool = False
    parent_drained: str | None = None
    ancestor_lost: str | None = None
    """An ancestor shard deleted from the stream before it was read: reported as trimmed records."""
    downloads: int = 0
    counted_by_backfill: int = 0
    """Downloads a backfill claimed first (CLAIMS_TABLE_NAME): it counted them, the aggregator did not."""
    unclaimed: int = 0
    """Downloads whose claim failed: not counted now, the checkpoint stays below the first of them."""
    distinct_aggregates: int = 0
    """(entity, board) pairs among each read's downloads (a step's, an ancestor's), summed over the invocation's
    reads: the fewest writes that could count them read by read. One read (a batch within one step) is distinct."""
    read_ranges: list[tuple[str, str]] = field(default_factory=list)
    """The first and last sequence number of each read with records: the ranges `distinct_aggregates` is taken over,
    so that its writes can be checked against the stream's own records."""
    added: int = 0
    already_applied: int = 0
    held: int = 0
    """Records created before a recount fence, held on the aggregate for the repair that set it."""
    writes: int = 0
    transactions: int = 0
    aggregates_written: int = 0
    pruned_watermarks: int = 0
    index_partition_writes: dict[str, int] = field(default_factory=dict)
    """Aggregate writes per index partition: each moves the index sort key, two index writes."""
    ignored: dict[str, int] = field(default_factory=dict)
    """Records read from the shard and skipped, by reason: the aggregator reads its own aggregate writes too."""
    ignored_delivered: dict[str, int] = field(default_factory=dict)
    """Records the event carried and that are no download, by reason: the mapping's filter leaves none."""
    rejected: int = 0
    """Records that are no countable download: each logged as it is met (`note_rejected`), only counted here."""
    refused: list[Refused] = field(default_factory=list)
    trimmed: dict[str, Any] | None = None
    failed_keys: list[tuple[AggregateKey, str]] = field(default_factory=list)
    deferred_keys: list[AggregateKey] = field(default_factory=list)
    """Not started, or not finished, before the deadline margin."""
    previous_streams: dict[str, tuple[str, ...]] = field(default_factory=dict)
    state_ignored: str | None = None
    unreported: int = 0
    """Rejected or refused records the failure queue did not take: the checkpoint waits before them."""

    def note_rejected(self, rejected: list[Rejected]) -> None:
        """Log a step's rejected records now, keeping only their number: an invocation of many steps holds one step's
        records at a time (docs/exactly-once.md rule 9), whatever its steps reject."""
        for item in rejected:
            logger.warning(
                "rejected download record",
                extra={"reason": item.reason, "sequence_number": item.raw_sequence, "record": item.record},
            )
        self.rejected += len(rejected)

    def summary(self) -> dict[str, Any]:
        return {
            "shard_id": self.shard_id,
            "window_start": self.window_start,
            "final_invocation": self.final,
            "direct_invocation": self.direct,
            "window_terminated_early": self.window_terminated_early,
            "records_received": self.received,
            "first_sequence": self.first_sequence,
            "last_sequence": self.last_sequence,
            "bound": self.bound,
            "checkpoint_before": self.checkpoint_before,
            "checkpoint_after": self.checkpoint_after,
            "records_read": self.records_read,
            "read_pages": self.read_pages,
            "empty_pages": self.empty_pages,
            "throttled_reads": self.throttled_reads,
            "shard_ended": self.shard_ended,
            "caught_up": self.caught_up,
            "parent_drained": self.parent_drained,
            "ancestor_lost": self.ancestor_lost,
            "downloads": self.downloads,
            "counted_by_backfill": self.counted_by_backfill,
            "unclaimed": self.unclaimed,
            "distinct_aggregates": self.distinct_aggregates,
            "read_ranges": [list(read_range) for read_range in self.read_ranges],
            "added": self.added,
            "already_applied": self.already_applied,
            "held_for_repair": self.held,
            "aggregate_writes": self.writes,
            "transactions": self.transactions,
            "aggregates_written": self.aggregates_written,
            "pruned_watermarks": self.pruned_watermarks,
            "index_partition_writes": self.index_partition_writes,
            "ignored": self.ignored,
            "ignored_delivered": self.ignored_delivered,
            "rejected": self.rejected,
            "refused": len(self.refused),
            "records_trimmed": self.trimmed is not None,
            "failed_aggregates": len(self.failed_keys),
            "deferred_aggregates": len(self.deferred_keys),
            "state_ignored": self.state_ignored,
            "unreported": self.unreported,
        }


def publish(report: BatchReport, started: float, succeeded: bool) -> None:
    for item in report.refused:
        logger.error(
            "refused record",
            extra={"reason": item.reason, "sequence_number": item.raw_sequence, "record": item.record},
        )
    if report.trimmed is not None:
        logger.error("records trimmed from the stream before they were counted", extra=report.trimmed)
    if report.state_ignored:
        logger.warning("window state ignored", extra={"shard_id": report.shard_id, "reason": report.state_ignored})
    if report.window_terminated_early:
        logger.warning("window terminated early", extra={"shard_id": report.shard_id})
    for key, reason in report.failed_keys:
        logger.warning(
            "aggregate update failed; the checkpoint waits for it",
            extra={"entity_id": key.entity_id, "board": key.board, "error": reason},
        )
    for aggregate, labels in report.previous_streams.items():
        logger.warning(
            "aggregate carries watermarks of a previous stream",
            extra={"aggregate": aggregate, "stream_labels": labels},
        )
    metrics.add_metric(name="DownloadsCounted", unit=MetricUnit.Count, value=report.added)
    metrics.add_metric(name="DownloadsCountedByBackfill", unit=MetricUnit.Count, value=report.counted_by_backfill)
    metrics.add_metric(name="UnclaimedDownloads", unit=MetricUnit.Count, value=report.unclaimed)
    metrics.add_metric(name="DownloadsAlreadyApplied", unit=MetricUnit.Count, value=report.already_applied)
    metrics.add_metric(name="AggregateWrites", unit=MetricUnit.Count, value=report.writes)
    metrics.add_metric(name="RecordsRead", unit=MetricUnit.Count, value=report.records_read)
    metrics.add_metric(name="ThrottledStreamReads", unit=MetricUnit.Count, value=report.throttled_reads)
    metrics.add_metric(name="RejectedRecords", unit=MetricUnit.Count, value=report.rejected)
    metrics.add_metric(name="RefusedRecords", unit=MetricUnit.Count, value=len(report.refused))
    metrics.add_metric(name="TrimmedRecords", unit=MetricUnit.Count, value=1 if report.trimmed else 0)
    metrics.add_metric(
        name="FailedAggregates", unit=MetricUnit.Count, value=len(report.failed_keys) + len(report.deferred_keys)
    )
    metrics.add_metric(name="PreviousStreamWatermarks", unit=MetricUnit.Count, value=len(report.previous_streams))
    duration_ms = round((time.monotonic() - started) * 1000)
    logger.info("batch summary", extra={**report.summary(), "succeeded": succeeded, "duration_ms": duration_ms})
