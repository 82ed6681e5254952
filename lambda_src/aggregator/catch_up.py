"""Reading a shard from its checkpoint, writing every aggregate its downloads touch, and moving the checkpoint."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any

from aggregate_store import ApplyOutcome, WatermarkContention
from aggregate_writes import Contribution
from aggregator_settings import Settings
from batch_report import BatchReport
from delivery import Refused, ShardRef
from dependencies import Dependencies
from download_records import AggregateKey, Download, Ignored, Rejected, parse_expiry, parse_record
from failure_messages import gap_message, refused_contribution, refused_message, rejected_message
from invocation_context import InvocationContext
from leaderboard_core.bookkeeping import pad_sequence
from progress_item import Progress
from shard_reader import ShardRead, read_shard
from stream_claims import Removal, claimed_step, removal_of
from telemetry import logger

GONE = ("ResourceNotFoundException", "TrimmedDataAccessException")
"""What reading a shard past the stream's 24-hour retention answers: its records can no longer be read."""


@dataclass
class Catchup:
    """One shard's records read from its checkpoint, and what became of them."""

    shard: ShardRef
    progress: Progress
    read: ShardRead
    held_back_from: str | None = None
    """The lowest sequence not handled (an aggregate unwritten, a report not sent): the checkpoint stays below."""


def reading_budget(settings: Settings, remaining_ms: Callable[[], int], leave_ms: int) -> Callable[[int, int], bool]:
    """Whether a read may take another page: within the record and byte budgets, with `leave_ms` still to spare, and
    (after its first page, so that every step moves on) with the process's resident memory under the ceiling."""

    def keep_reading(records_so_far: int, bytes_so_far: int) -> bool:
        return (
            records_so_far < settings.read_budget_records
            and bytes_so_far < settings.read_budget_bytes
            and remaining_ms() > leave_ms
            and (records_so_far == 0 or not _at_ceiling(settings.memory_ceiling_bytes))
        )

    return keep_reading


def resident_bytes() -> int | None:
    """The process's resident memory (Linux's /proc/self/statm, as in Lambda's execution environment); None where it
    cannot be read, and then no step is held back by it."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _at_ceiling(ceiling: int | None) -> bool:
    if ceiling is None:
        return False
    resident = resident_bytes()
    return resident is not None and resident >= ceiling


def catch_up(
    invocation: InvocationContext,
    shard: ShardRef,
    progress: Progress,
    bound: str | None,
    keep_reading: Callable[[int, int], bool],
    report: BatchReport,
    ending: str | None = None,
) -> Catchup:
    """Read the shard from its checkpoint, write every aggregate, report what cannot be counted; a closed shard to
    its `ending` record or null iterator, not to a few empty pages."""
    deps, settings, remaining_ms = invocation.deps, invocation.settings, invocation.remaining_ms
    read = read_shard(
        deps.streams,
        shard,
        progress.start,
        bound,
        keep_reading,
        deps.sleep,
        nothing_counted=progress.checkpoint is None,
        ending=ending,
    )
    if read.start_contradicted:
        logger.error(
            "the stream called the shard's first sequence number trimmed but granted an iterator at it again; "
            "read from the trim horizon",
            extra={"shard": shard.shard_id, "first_sequence": progress.resume_at},
        )
    catchup = Catchup(shard, progress, read)
    report.records_read += len(read.records)
    if read.records:
        report.read_ranges.append((read.records[0]["dynamodb"]["SequenceNumber"], read.last_raw_sequence or ""))
    report.read_pages += read.pages
    report.empty_pages += read.empty_pages
    report.throttled_reads += read.throttled
    downloads: list[Download] = []
    rejected: list[Rejected] = []
    removals: list[Removal] = []
    for record in read.records:
        parsed = parse_record(record, settings.schema)
        if deps.ledger is not None and isinstance(parsed, Ignored):
            parsed = parse_expiry(record, settings.schema) or parsed
        elif deps.claims is not None and isinstance(parsed, Ignored) and (removal := removal_of(record)) is not None:
            removals.append(removal)  # claimed: an INSERT of its key after it is the key written again
        if isinstance(parsed, Download):
            downloads.append(parsed)
            if parsed.rejection is not None:
                rejected.append(parsed.rejection)
        elif isinstance(parsed, Rejected):
            rejected.append(parsed)
        else:
            report.ignored[parsed.reason] = report.ignored.get(parsed.reason, 0) + 1
    unclaimed: list[str] = []
    refused_by_owner: list[Refused] = []

    def late() -> bool:
        return remaining_ms() < 2 * settings.deadline_margin_ms

    if deps.ledger is not None and downloads:
        downloads, unclaimed, refused_by_owner = deps.ledger.step(shard, downloads, late, report)
    elif deps.claims is not None and (downloads or removals):
        downloads, unclaimed, refused_by_owner = claimed_step(deps.claims, shard, downloads, late, report, removals)
    report.downloads += len(downloads)
    report.note_rejected(rejected)
    groups: dict[AggregateKey, list[Contribution]] = {}
    # Each aggregate's list in the shard's order (S2), whatever order the claims left the downloads in (by key): its
    # write is conditioned on the watermark being below the list's first record, and the checkpoint held below it.
    for download in sorted(downloads, key=lambda download: download.sequence):
        for change in download.changes:
            contribution = Contribution(
                download.sequence,
                download.created,
                change.amount,
                download.download_id,
                change.value_after,
                download.instant,
            )
            groups.setdefault(change.key, []).append(contribution)
    report.distinct_aggregates += len(groups)
    unwritten, refused = _write_all(invocation, shard, groups, report)
    refused = refused_by_owner + refused
    report.refused.extend(refused)
    unhandled = [groups[key][0].sequence for key in unwritten] + unclaimed
    reports: list[tuple[str | None, dict[str, Any]]] = [
        (_held_from(item.raw_sequence), rejected_message(item, shard)) for item in rejected
    ] + [(_held_from(item.raw_sequence), refused_message(item)) for item in refused]
    if read.trimmed is not None:
        report.trimmed = gap_message(
            shard, progress, read.trimmed.first_readable_sequence, read.trimmed.first_readable_created
        )
        reports.append(("", report.trimmed))  # unsent, it holds the checkpoint before the whole read
    reports.sort(key=lambda held_message: held_message[0] or "")
    sent = _send_before_deadline(invocation, [message for _, message in reports])
    # Unreported, they must not be passed: the next reader meets them again and reports them.
    report.unreported += len(reports) - sent
    unhandled += [held for held, _ in reports[sent:] if held is not None]
    gap_sent = any(message is report.trimmed for _, message in reports[:sent])
    if read.trimmed is not None and gap_sent and read.trimmed.first_readable_sequence is not None:
        deps.progress.resume_after_gap(shard, read.trimmed.first_readable_sequence)
    elif read.trimmed is not None and gap_sent and progress.exists:
        deps.progress.note_gap_reported(shard, progress.start_token)
    catchup.held_back_from = min(unhandled) if unhandled else None
    return catchup


def _held_from(raw_sequence: str | None) -> str | None:
    return pad_sequence(raw_sequence) if raw_sequence else None


REPORTS_PER_SEND = 10
"""One SendMessageBatch's worth: the deadline is asked before each."""


def _send_before_deadline(invocation: InvocationContext, messages: list[dict[str, Any]]) -> int:
    """How many of the messages, from the first, the failure queue took: ten at a time until the deadline margin or a
    refused send, so that a step's reports, however many, end by the deadline (rule 10) and hold what they leave."""
    sent = 0
    while sent < len(messages) and invocation.remaining_ms() >= invocation.settings.deadline_margin_ms:
        batch = messages[sent : sent + REPORTS_PER_SEND]
        if not invocation.deps.send_failures(batch):
            break
        sent += len(batch)
    return sent


def _write_all(
    invocation: InvocationContext,
    shard: ShardRef,
    groups: dict[AggregateKey, list[Contribution]],
    report: BatchReport,
) -> tuple[list[AggregateKey], list[Refused]]:
    """Write every aggregate in parallel, returning before the deadline margin whatever the SDK is doing.

    Updates still running at the deadline are abandoned, not awaited: each is a conditional
    write, so landing late can neither double nor lose a count. Returns the aggregates not
    (known to be) written, below whose lowest record the checkpoint stays, and the records refused.
    """
    if not groups:
        return [], []
    deps, settings, remaining_ms = invocation.deps, invocation.settings, invocation.remaining_ms
    keys = sorted(groups, key=lambda key: groups[key][0].sequence)

    def apply_unless_late(key: AggregateKey) -> ApplyOutcome | None:
        if remaining_ms() < settings.deadline_margin_ms:
            return None
        return deps.store.apply(key, shard, groups[key])

    budget_seconds = max(0.0, (remaining_ms() - settings.deadline_margin_ms) / 1000)
    futures = {deps.executor.submit(apply_unless_late, key): key for key in keys}
    finished, unfinished = wait(futures, timeout=budget_seconds)
    for future in unfinished:
        future.cancel()
    unwritten: list[AggregateKey] = []
    refused: list[Refused] = []
    for future, key in futures.items():
        outcome = _outcome_of(future, key, finished, report)
        if outcome is None:
            unwritten.append(key)
            continue
        report.added += outcome.added
        report.already_applied += outcome.already_applied
        report.held += outcome.held
        report.writes += outcome.writes
        report.transactions += outcome.transactions
        report.aggregates_written += 1
        report.pruned_watermarks += outcome.pruned_watermarks
        if outcome.index_partition is not None:
            partition = outcome.index_partition
            report.index_partition_writes[partition] = report.index_partition_writes.get(partition, 0) + 1
        if outcome.previous_stream_labels:
            report.previous_streams[f"{key.entity_id}|{key.board}"] = outcome.previous_stream_labels
        refused += [refused_contribution(key, shard, contribution, why) for contribution, why in outcome.refused]
    return unwritten, refused


def _outcome_of(
    future: Future[ApplyOutcome | None], key: AggregateKey, finished: set[Future[Any]], report: BatchReport
) -> ApplyOutcome | None:
    """The aggregate's outcome, or None after recording in the report why it is not written."""
    if future not in finished:
        report.deferred_keys.append(key)
        return None
    error = future.exception()
    if error is not None:
        kind = "contention" if isinstance(error, WatermarkContention) else type(error).__name__
        report.failed_keys.append((key, f"{kind}: {error}"))
        return None
    outcome = future.result()
    if outcome is None:
        report.deferred_keys.append(key)
    return outcome


def advance(deps: Dependencies, catchup: Catchup) -> str | None:
    """Raise the shard's checkpoint over every record read and handled; None if nothing is counted yet."""
    read, before = catchup.read, catchup.progress.checkpoint
    handled = [
        record
        for record in read.records
        if catchup.held_back_from is None or pad_sequence(record["dynamodb"]["SequenceNumber"]) < catchup.held_back_from
    ]
    whole = catchup.held_back_from is None  # a report the failure queue did not take holds the shard open too
    if not handled:
        if whole and read.shard_ended and not catchup.progress.ended:
            deps.progress.mark_ended(catchup.shard)
        return before
    last = handled[-1]
    sequence = last["dynamodb"]["SequenceNumber"]
    checkpoint = pad_sequence(sequence)
    created = last["dynamodb"].get("ApproximateCreationDateTime")
    created_second = int(created) if isinstance(created, int | float) and not isinstance(created, bool) else None
    if before is None or checkpoint > before or (whole and read.shard_ended):
        ended = whole and read.shard_ended
        deps.progress.advance(catchup.shard, checkpoint, sequence, created_second, ended)
    return max(checkpoint, before) if before else checkpoint
