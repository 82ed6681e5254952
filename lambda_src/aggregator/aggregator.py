"""Aggregator Lambda: counts new downloads from the table's stream into per-month aggregate items, exactly once.

The event source mapping delivers tumbling-window events that name one shard. What they carry is
a trigger and a bound, never what is counted: the aggregator reads that shard itself, in sequence
order, from its own checkpoint in the progress table, through the highest record delivered, and
writes each aggregate with one conditional UpdateItem guarded by that shard's watermark in the
aggregate. Retries out of order, larger or smaller retries, fresh states, direct invocations
ahead of the mapping and windows given up then change how much one invocation reads, never what
is counted. What cannot be counted is reported to the failure queue, never guessed.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from aggregate_store import AggregateStore, ApplyOutcome, Contribution, WatermarkContention
from band_records import is_band_record_event, settle
from delivery import Delivery, Refused, ShardRef, parse_delivery
from download_records import AggregateKey, Download, Ignored, Rejected, Schema, parse_record
from leaderboard_core.attributes import names_from_environment
from leaderboard_core.bookkeeping import pad_sequence
from leaderboard_core.buckets import periods_from_text
from shard_progress import Progress, ProgressStore
from shard_reader import ShardRead, read_shard
from window_state import delivered_high, window_state

logger = Logger()
metrics = Metrics()

_SDK_CONFIG = Config(retries={"mode": "adaptive", "max_attempts": 8}, connect_timeout=2, read_timeout=5)
GUIDE_SCHEMA = Schema()
"""The guide's attribute names: what the function uses where the module sets none."""
PER_BATCH = "per_batch"
PER_WINDOW = "per_window"
GONE = ("ResourceNotFoundException", "TrimmedDataAccessException")
"""What reading a shard past the stream's 24-hour retention answers: its records can no longer be read."""
DESCRIBE_PAGES = 100
"""DescribeStream pages (100 shards each) searched for a shard's first sequence number and parent, once per shard
and function instance. 1,000 pages made LocalStack's first invocations time out (its DescribeStream pages on past a
shard it lists under another id). A stream of more than 10,000 shards is not searched whole: a shard past them is
read from its trim horizon, its parent unknown, and says so in the log."""
LINEAGE_SWEEP_EVENT = "lineageSweep"
LINEAGE_SWEEP_SECONDS = 900.0
"""How often (per function instance, the first invocation included) an invocation of any shard also walks the
lineage of every listed shard whose parent is no longer listed: a lineage that gets no download is never invoked."""
ANCESTRY_LIMIT = 1000
"""Ancestors one invocation walks up at most before it stops and says so (a lineage of 1,000 rollovers is months)."""


class AggregatesNotWritten(Exception):
    """The shard's checkpoint did not reach what this invocation had to count: Lambda (or the caller) retries."""

    def __init__(self, message: str, report: BatchReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class Settings:
    table_name: str
    table_arn: str
    progress_table_name: str
    schema: Schema
    leaderboard_shards: int
    failure_queue_url: str | None
    aggregate_writes: str
    write_concurrency: int
    deadline_margin_ms: int
    read_budget_records: int = 20_000
    """Records one invocation reads at most (a page more at most); the rest waits for the next invocation."""
    read_budget_bytes: int = 32 * 1024 * 1024
    """Stream record bytes (`SizeBytes`) one invocation reads at most (a page, 1 MB, more at most): with the
    record budget, what bounds the invocation's memory whatever the backlog and the items' size."""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Settings:
        aggregate_writes = environ.get("AGGREGATE_WRITES", PER_BATCH)
        if aggregate_writes not in (PER_BATCH, PER_WINDOW):
            raise ValueError(f"AGGREGATE_WRITES is {aggregate_writes!r}, not {PER_BATCH} or {PER_WINDOW}")
        periods = periods_from_text(environ.get("LEADERBOARD_PERIODS", "month"))
        return cls(
            table_name=environ["TABLE_NAME"],
            table_arn=environ["TABLE_ARN"],
            progress_table_name=environ["PROGRESS_TABLE_NAME"],
            schema=Schema(
                **names_from_environment(environ),
                periods=periods,
                category=environ.get("CATEGORY_ATTRIBUTE") or None,
                amount=environ.get("SUM_ATTRIBUTE") or None,
            ),
            leaderboard_shards=int(environ.get("LEADERBOARD_SHARDS", "1")),
            failure_queue_url=environ.get("FAILURE_QUEUE_URL") or None,
            aggregate_writes=aggregate_writes,
            write_concurrency=int(environ.get("WRITE_CONCURRENCY", "8")),
            deadline_margin_ms=int(environ.get("DEADLINE_MARGIN_MS", "5000")),
        )


@dataclass(frozen=True)
class ShardFacts:
    """What DescribeStream says of a shard: its parent, and the sequence number of its first record."""

    parent_shard_id: str | None
    first_sequence: str | None
    listed: bool = True
    """False: DescribeStream did not list the shard."""
    described_whole: bool = True
    """With `listed` False: every page of the description was read (the shard is gone), or the search gave up."""
    closed: bool = False
    """DescribeStream gave the shard an EndingSequenceNumber: it takes no more records."""


@dataclass
class Dependencies:
    """What process_delivery talks to: clients and the clock, so a test or the stream model can supply its own."""

    store: AggregateStore
    progress: ProgressStore
    streams: Any
    executor: Executor
    send_failures: Callable[[list[dict[str, Any]]], bool]
    """Puts messages into the failure queue; False if they did not all get there."""
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    shards: dict[str, ShardFacts] = field(default_factory=dict)
    """Shard id -> what DescribeStream said of it (per instance: shards never change parents or first records)."""
    lineages_swept_at: float | None = None


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
    distinct_aggregates: int = 0
    """(entity, period) pairs among the downloads read: the fewest writes that could count them."""
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
    rejected: list[Rejected] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    trimmed: dict[str, Any] | None = None
    failed_keys: list[tuple[AggregateKey, str]] = field(default_factory=list)
    deferred_keys: list[AggregateKey] = field(default_factory=list)
    """Not started, or not finished, before the deadline margin."""
    previous_streams: dict[str, tuple[str, ...]] = field(default_factory=dict)
    state_ignored: str | None = None
    unreported: int = 0
    """Rejected or refused records the failure queue did not take: the checkpoint waits before them."""

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
            "distinct_aggregates": self.distinct_aggregates,
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
            "rejected": len(self.rejected),
            "refused": len(self.refused),
            "records_trimmed": self.trimmed is not None,
            "failed_aggregates": len(self.failed_keys),
            "deferred_aggregates": len(self.deferred_keys),
            "state_ignored": self.state_ignored,
            "unreported": self.unreported,
        }


@dataclass
class _Catchup:
    """One shard's records read from its checkpoint, and what became of them."""

    shard: ShardRef
    progress: Progress
    read: ShardRead
    held_back_from: str | None = None
    """The lowest sequence not handled (an aggregate unwritten, a report not sent): the checkpoint stays below."""


def _sequence(record: Any) -> str | None:
    if isinstance(record, dict) and isinstance(record.get("dynamodb"), dict):
        sequence = record["dynamodb"].get("SequenceNumber")
        if isinstance(sequence, str) and sequence.isdigit() and len(sequence) <= 40:
            return pad_sequence(sequence)
    return None


def _bound_of(delivery: Delivery, state_high: str | None) -> str | None:
    """The highest sequence number this invocation must count through: delivered, claimed or remembered."""
    candidates = [sequence for sequence in (_sequence(record) for record in delivery.records) if sequence]
    if delivery.through_sequence:
        candidates.append(delivery.through_sequence)
    if state_high:
        candidates.append(state_high)
    return max(candidates) if candidates else None


def process_delivery(
    delivery: Delivery,
    deps: Dependencies,
    settings: Settings,
    remaining_ms: Callable[[], int],
) -> tuple[dict[str, Any], BatchReport]:
    """Count the delivery's shard from its checkpoint through what the delivery names, and answer Lambda."""
    report = BatchReport(
        shard_id=delivery.shard_id,
        window_start=delivery.window.start if delivery.window else None,
        final=delivery.is_final,
        direct=delivery.is_direct,
        window_terminated_early=delivery.terminated_early,
        received=len(delivery.records) + len(delivery.refused),
        refused=list(delivery.refused),
    )
    for record in delivery.records:
        if _is_new_download(record, settings.schema):
            continue  # parsed once, below, when the shard is read: the whole parse (timestamp, id) is the hot path
        parsed = parse_record(record, settings.schema)
        if isinstance(parsed, Ignored):
            report.ignored_delivered[parsed.reason] = report.ignored_delivered.get(parsed.reason, 0) + 1
    delivered = sorted(sequence for sequence in (_sequence(r) for r in delivery.records) if sequence)
    report.first_sequence, report.last_sequence = (delivered[0], delivered[-1]) if delivered else (None, None)
    shard = delivery.shard
    state_high, report.state_ignored = (None, None) if delivery.is_direct else delivered_high(delivery.state, shard)
    bound = _bound_of(delivery, state_high)
    report.bound = bound
    if delivery.refused and not deps.send_failures([_refused_message(item) for item in delivery.refused]):
        report.unreported += len(delivery.refused)
    if shard is None:
        return _response(delivery, None, None, report), report
    swept = BatchReport()
    _sweep_lineages(deps, settings, shard.stream_arn, remaining_ms, swept)
    report.trimmed = swept.trimmed or report.trimmed
    report.ancestor_lost = swept.ancestor_lost
    report.unreported += swept.unreported
    must_catch_up = delivery.is_final or delivery.is_direct or delivery.terminated_early
    highest_delivered = delivered[-1] if delivered and not delivery.is_direct else None
    if not must_catch_up and (settings.aggregate_writes == PER_WINDOW or bound is None):
        if highest_delivered is not None:
            _progress_of(deps, shard, delivery)
            deps.progress.note_delivered(shard, highest_delivered)
        report.caught_up = True
        return _response(delivery, shard, bound, report), report

    started_ms = remaining_ms()
    write_reserve_ms = max(2000, (started_ms - settings.deadline_margin_ms) // 2)

    keep_reading = _reading_budget(settings, remaining_ms, settings.deadline_margin_ms + write_reserve_ms)

    try:
        progress = _progress_of(deps, shard, delivery)
    except ClientError as error:
        if not delivery.is_direct or error.response.get("Error", {}).get("Code") not in GONE:
            raise
        return _gone(deps, delivery, shard, Progress(), report), report
    report.checkpoint_before = progress.checkpoint
    if not delivery.is_direct and (delivery.is_final or delivery.terminated_early) and progress.delivered_high:
        # A fresh state (a retry, an early end) forgets what the window delivered; the progress table does not.
        bound = max(bound or progress.delivered_high, progress.delivered_high)
        report.bound = bound
    elif delivery.is_direct and bound is not None and progress.delivered_high:
        # A window given up is named by its last batch alone, which a retry out of order may end below records an
        # earlier batch delivered: recover's invocation through that range reads through those too.
        bound = max(bound, progress.delivered_high)
        report.bound = bound
    _count_ancestry(deps, settings, shard, progress, remaining_ms, keep_reading, report)
    if bound is not None and progress.checkpoint is not None and progress.checkpoint >= bound:
        report.checkpoint_after = progress.checkpoint
        report.caught_up = True
        _report_unconfirmed(deps, delivery, progress, None, report)
        return _response(delivery, shard, bound, report), report
    try:
        catchup = _catch_up(deps, settings, shard, progress, bound, remaining_ms, keep_reading, report)
    except ClientError as error:
        if not delivery.is_direct or error.response.get("Error", {}).get("Code") not in GONE:
            raise
        return _gone(deps, delivery, shard, progress, report), report
    _report_unconfirmed(deps, delivery, progress, catchup.read, report)
    report.checkpoint_after = _advance(deps, catchup)
    report.shard_ended = catchup.read.shard_ended
    reached = catchup.read.reached_bound or (
        report.checkpoint_after is not None and bound is not None and report.checkpoint_after >= bound
    )
    report.caught_up = catchup.held_back_from is None and (bound is None or reached)
    if not report.caught_up and highest_delivered is not None:
        deps.progress.note_delivered(shard, highest_delivered)
    claimed_beyond_the_tip = delivery.is_direct and catchup.read.at_tip and catchup.held_back_from is None
    if not report.caught_up and must_catch_up and not claimed_beyond_the_tip:
        raise AggregatesNotWritten(
            f"{shard.shard_id}: checkpoint {report.checkpoint_after} has not reached {bound}, retried",
            report,
        )
    return _response(delivery, shard, bound, report), report


def _reading_budget(settings: Settings, remaining_ms: Callable[[], int], leave_ms: int) -> Callable[[int, int], bool]:
    """Whether a read may take another page: within the record and byte budgets, with `leave_ms` still to spare."""

    def keep_reading(records_so_far: int, bytes_so_far: int) -> bool:
        return (
            records_so_far < settings.read_budget_records
            and bytes_so_far < settings.read_budget_bytes
            and remaining_ms() > leave_ms
        )

    return keep_reading


def _progress_of(deps: Dependencies, shard: ShardRef, delivery: Delivery) -> Progress:
    """The shard's progress; its item created the first time the shard is seen (first sequence, parent, genesis)."""
    progress = deps.progress.read(shard)
    if not progress.exists:
        facts = _shard_facts(deps, shard)
        if not facts.listed:
            logger.error("shard not in its stream's description; read from the trim horizon", extra={"shard": shard})
        root = facts.listed and facts.parent_shard_id is None
        progress = deps.progress.first_seen(
            shard, facts.first_sequence, facts.parent_shard_id, lineage_counted=root, lineage_unknown=not facts.listed
        )
    return progress


def _gone(
    deps: Dependencies, delivery: Delivery, shard: ShardRef, progress: Progress, report: BatchReport
) -> dict[str, Any]:
    """A direct invocation of a shard the stream no longer holds: what it named cannot be read, so it is recounted."""
    gap = _gap_message(shard, progress, None, None)
    gap["throughSequenceNumber"] = delivery.through_sequence
    report.trimmed = gap
    if not deps.send_failures([gap]):
        report.unreported += 1
    report.caught_up = False
    return _response(delivery, shard, None, report)


def _response(delivery: Delivery, shard: ShardRef | None, high: str | None, report: BatchReport) -> dict[str, Any]:
    if delivery.is_direct:
        return {
            "shardId": delivery.shard_id,
            "checkpoint": report.checkpoint_after,
            "reachedBound": report.caught_up,
            "summary": report.summary(),
        }
    state = {} if delivery.is_final else window_state(shard, high)
    return {"state": state, "batchItemFailures": []}


def _shard_facts(deps: Dependencies, shard: ShardRef) -> ShardFacts:
    """From DescribeStream (paginated), once per shard and instance: shards never change parents or first records.

    A shard first seen is read from its first sequence number, not from the trim horizon, so that
    records trimmed before it was ever read are reported instead of silently skipped.
    """
    described_whole = True
    if shard.shard_id not in deps.shards:
        described_whole = False
        start: str | None = None
        for _ in range(DESCRIBE_PAGES):
            parameters: dict[str, Any] = {"StreamArn": shard.stream_arn}
            if start:
                parameters["ExclusiveStartShardId"] = start
            description = deps.streams.describe_stream(**parameters)["StreamDescription"]
            for described in description.get("Shards", []):
                sequence_range = described.get("SequenceNumberRange", {})
                deps.shards[described["ShardId"]] = ShardFacts(
                    described.get("ParentShardId"),
                    sequence_range.get("StartingSequenceNumber"),
                    closed="EndingSequenceNumber" in sequence_range,
                )
            start = description.get("LastEvaluatedShardId")
            if shard.shard_id in deps.shards:
                break
            if not start:
                described_whole = True
                break
    facts = deps.shards.get(shard.shard_id)
    if facts is None:
        return ShardFacts(None, None, listed=False, described_whole=described_whole)
    return facts


def _count_ancestry(
    deps: Dependencies,
    settings: Settings,
    shard: ShardRef,
    progress: Progress,
    remaining_ms: Callable[[], int],
    keep_reading: Callable[[int, int], bool],
    report: BatchReport,
    listing: Mapping[str, ShardFacts] | None = None,
) -> bool:
    """Every ancestor of the shard, at any depth, counted to its end or its loss reported, then marked; whether
    the walk got through (every ancestor read to its end, the loss, if any, in the failure queue).

    The mapping is no witness of what was counted: one disabled longer than the stream's retention
    resumes where the shards it stopped in are gone, and reads on in their descendants. The progress
    table is: an ancestor it has no item for, that DescribeStream no longer lists, was deleted with
    records this deployment never read, so it is reported (`records_trimmed`: recover recounts).
    Ancestors still listed are read to their end, oldest first ("process a parent shard before ...
    a child shard"); records of theirs already trimmed are reported as any trimmed records are.
    """
    if progress.lineage_counted or progress.lineage_unknown:
        return True  # a shard first seen unlisted: its descendants, which know it as their parent, walk on past it
    chain, lost, unfinished = _ancestry(deps, shard, progress, listing)
    lost_reported = lost is None
    if lost is not None:
        gap = _lost_ancestor_message(shard, lost)
        if deps.send_failures([gap]):
            deps.progress.mark_lost(lost)
            report.trimmed, report.ancestor_lost, lost_reported = gap, lost.shard_id, True
        else:
            report.unreported += 1
    for ancestor, _ in reversed(chain):
        _drain(deps, settings, ancestor, remaining_ms, keep_reading, report)
    if unfinished or not lost_reported:
        return False
    for ancestor, walked in reversed(chain):
        if not walked.ended and not deps.progress.read(ancestor).ended:
            return False
        deps.progress.mark_lineage_counted(ancestor)
    deps.progress.mark_lineage_counted(shard)
    return True


def _sweep_lineages(
    deps: Dependencies,
    settings: Settings,
    stream_arn: str,
    remaining_ms: Callable[[], int],
    report: BatchReport,
    scheduled: bool = False,
) -> bool:
    """From whichever shard is invoked, every LINEAGE_SWEEP_SECONDS per instance: every listed shard that is
    closed but not read to its end (and was so LINEAGE_SWEEP_SECONDS before, as the progress table keeps: its own
    reader has had its time, and is not joined by a third) is read to its end now, while the stream still holds
    it, and every listed
    shard whose parent DescribeStream no longer lists has its ancestry walked, as its own first invocation would.

    A lineage that gets no download is never invoked: its closed shards would be deleted unread, and
    reported lost when a download comes at last, although nothing was lost; and a mapping paused past
    the retention leaves deleted shards behind the shards it resumes in, whose loss must be reported
    whether or not their lineage is invoked again: hence `scheduled`, the schedule's own invocation, which
    sweeps whenever it comes and takes the whole invocation. Returns whether the sweep went through every shard.
    """
    now = deps.clock()
    if not scheduled and deps.lineages_swept_at is not None and now - deps.lineages_swept_at < LINEAGE_SWEEP_SECONDS:
        return False
    deps.lineages_swept_at = now
    started_ms = remaining_ms()

    # Beside a shard's own reading, a quarter of the invocation at most: the rest is the invoked shard's.
    leave_ms = settings.deadline_margin_ms if scheduled else max(settings.deadline_margin_ms, started_ms * 3 // 4)
    keep_reading = _reading_budget(settings, remaining_ms, leave_ms)

    after_this: str | None = None
    try:
        listed = _listed_shards(deps, stream_arn)
        if listed is None:
            logger.warning("lineage sweep skipped: DescribeStream's pages did not end", extra={"stream": stream_arn})
            return False
        finished = True
        # A sweep cut short by its budget leaves a cursor: the next begins where it stopped, whichever instance.
        order = list(listed.items())
        cursor = deps.progress.sweep_cursor()
        turn = next((index for index, (shard_id, _) in enumerate(order) if shard_id == cursor), 0)
        ordered = order[turn:] + order[:turn]
        for position, (shard_id, facts) in enumerate(ordered):
            # One that fails is left to the sweep after next: the next begins past it, not at it again.
            after_this = ordered[(position + 1) % len(ordered)][0]
            if not keep_reading(0, 0):
                deps.progress.set_sweep_cursor(shard_id)
                return False
            shard = ShardRef(stream_arn, shard_id)
            known = deps.progress.lower_bound(shard)
            orphaned = facts.parent_shard_id not in (None, *listed) and not known.lineage_counted
            closed_unread = facts.closed and not known.ended
            since = known.closed_unread_since
            due = closed_unread and since is not None and now - since >= LINEAGE_SWEEP_SECONDS
            trimmed = not due and _trimmed_unread(deps, shard, facts, known)
            if not (closed_unread or orphaned or trimmed):
                continue
            if not known.exists:
                root = facts.parent_shard_id is None
                known = deps.progress.first_seen(shard, facts.first_sequence, facts.parent_shard_id, root)
            to_read = due or trimmed
            if closed_unread and since is None:
                deps.progress.note_closed_unread(shard, now)
            if not (to_read or orphaned):
                continue
            walked = _count_ancestry(deps, settings, shard, known, remaining_ms, keep_reading, report, listed)
            finished = walked and finished
            if to_read:
                finished = _drain(deps, settings, shard, remaining_ms, keep_reading, report) and finished
    except (ClientError, BotoCoreError) as error:
        logger.warning("lineage sweep not finished; the next one goes on", extra={"error": str(error)})
        if after_this is not None:
            with contextlib.suppress(ClientError, BotoCoreError):
                deps.progress.set_sweep_cursor(after_this)
        return False
    return finished


def _trimmed_unread(deps: Dependencies, shard: ShardRef, facts: ShardFacts, known: Progress) -> bool:
    """Whether the stream has already trimmed records of a shard after where its counting stands.

    A mapping paused past the retention leaves such shards, open or closed, and with no download
    coming nothing else reads them: they are read now, and the loss reported, rather than when their
    own reader comes (it cannot read those records either). A read from the start tells, a page (or
    three empty ones) at most (S5: a start older than the trim point is refused); what it holds is
    left to the shard's own reader unless the answer is yes. Every shard is asked, however recent its
    checkpoint: nothing documents that creation times follow the order in which the stream trims.
    """
    if known.ended:
        return False
    start = known.start if known.exists else (facts.first_sequence, None)
    if start == (None, None):
        return False  # nothing says where it began: its own first read reports what may be trimmed
    if known.gap_reported_from == known.start_token:
        # Reported, with nothing readable after it: what is new is only what the stream holds now, if anything.
        held = read_shard(deps.streams, shard, (None, None), None, _first_page_only, deps.sleep)
        return bool(held.records)
    read = read_shard(
        deps.streams, shard, start, None, _first_page_only, deps.sleep, nothing_counted=known.checkpoint is None
    )
    return read.trimmed is not None


def _first_page_only(records_so_far: int, _bytes_so_far: int) -> bool:
    """A probe's budget: read until a page holds a record (empty pages at the tip end any read)."""
    return records_so_far == 0


class LineageSweepUnreported(Exception):
    """The schedule's sweep found a loss the failure queue did not take: the invocation fails, Lambda retries it."""

    def __init__(self, message: str, report: BatchReport) -> None:
        super().__init__(message)
        self.report = report


def is_lineage_sweep_event(event: Mapping[str, Any]) -> bool:
    """The schedule's invocation: its input is {"lineageSweep": {"streamArn": ...}} (terraform/schedule.tf)."""
    return isinstance(event, Mapping) and isinstance(event.get(LINEAGE_SWEEP_EVENT), Mapping)


def sweep_lineages_on_schedule(
    event: Mapping[str, Any], deps: Dependencies, settings: Settings, remaining_ms: Callable[[], int]
) -> tuple[dict[str, Any], BatchReport]:
    """The lineage sweep whether or not any download comes: a stream that gets none after a pause past the
    retention is invoked by nothing else, and its loss must still be reported."""
    stream_arn = event[LINEAGE_SWEEP_EVENT].get("streamArn")
    if not isinstance(stream_arn, str) or not stream_arn.startswith(f"{settings.table_arn}/stream/"):
        raise ValueError(f"lineageSweep.streamArn is {stream_arn!r}, not a stream of {settings.table_arn}")
    report = BatchReport()
    finished = _sweep_lineages(deps, settings, stream_arn, remaining_ms, report, scheduled=True)
    response = {"streamArn": stream_arn, "finished": finished, "summary": report.summary()}
    if report.unreported:
        raise LineageSweepUnreported(f"{report.unreported} loss reports the failure queue did not take", report)
    if not finished:
        logger.warning("lineage sweep not finished; the next scheduled one goes on", extra={"stream": stream_arn})
    return response, report


def _listed_shards(deps: Dependencies, stream_arn: str) -> dict[str, ShardFacts] | None:
    """Every shard DescribeStream lists now, or None when its pages did not end within DESCRIBE_PAGES."""
    listed: dict[str, ShardFacts] = {}
    start: str | None = None
    for _ in range(DESCRIBE_PAGES):
        parameters: dict[str, Any] = {"StreamArn": stream_arn}
        if start:
            parameters["ExclusiveStartShardId"] = start
        description = deps.streams.describe_stream(**parameters)["StreamDescription"]
        known = len(listed)
        for described in description.get("Shards", []):
            sequence_range = described.get("SequenceNumberRange", {})
            facts = ShardFacts(
                described.get("ParentShardId"),
                sequence_range.get("StartingSequenceNumber"),
                closed="EndingSequenceNumber" in sequence_range,
            )
            listed[described["ShardId"]] = deps.shards[described["ShardId"]] = facts
        start = description.get("LastEvaluatedShardId")
        if not start:
            return listed
        if len(listed) == known:
            return None  # a page that lists nothing new does not move on: the listing cannot be finished
    return None


def _ancestry(
    deps: Dependencies, shard: ShardRef, progress: Progress, listing: Mapping[str, ShardFacts] | None = None
) -> tuple[list[tuple[ShardRef, Progress]], ShardRef | None, bool]:
    """The ancestors not yet known counted with all of theirs (nearest first), the first one gone unread, if any,
    and whether the walk stopped before it knew (DescribeStream searched in part, or the lineage too long).

    `listing`: a whole DescribeStream listing that holds `shard`: an ancestor missing from it was deleted
    before it was taken (ancestors are older than their descendants), so it is not described again."""
    chain: list[tuple[ShardRef, Progress]] = []
    parent_id = progress.parent_shard_id
    while parent_id is not None:
        if len(chain) >= ANCESTRY_LIMIT:
            logger.error("shard lineage longer than the walk; its oldest ancestors not checked", extra={"shard": shard})
            return chain, None, True
        parent = ShardRef(shard.stream_arn, parent_id)
        known = deps.progress.lower_bound(parent)
        if not known.exists:
            facts = _shard_facts(deps, parent) if listing is None or parent_id in listing else _GONE_FACTS
            if not facts.listed:
                if facts.described_whole:
                    return chain, parent, False
                logger.error("ancestor shard not in the DescribeStream pages searched", extra={"shard": parent})
                return chain, None, True
            known = deps.progress.first_seen(
                parent, facts.first_sequence, facts.parent_shard_id, lineage_counted=facts.parent_shard_id is None
            )
        if known.ended and known.lineage_counted:
            break
        chain.append((parent, known))
        parent_id = known.parent_shard_id
        if known.lineage_unknown:
            facts = _shard_facts(deps, parent) if listing is None or parent.shard_id in listing else _GONE_FACTS
            if not facts.listed:
                # first seen unlisted (a direct invocation of a deleted shard): what was above it is not known
                return chain, (parent if facts.described_whole else None), not facts.described_whole
            parent_id = facts.parent_shard_id
    return chain, None, False


_GONE_FACTS = ShardFacts(None, None, listed=False, described_whole=True)


def _lost_ancestor_message(shard: ShardRef, lost: ShardRef) -> dict[str, Any]:
    """An ancestor deleted from the stream before it was read: its records, and any of its ancestors', are lost."""
    return {
        "kind": "records_trimmed",
        "shardId": lost.shard_id,
        "streamArn": lost.stream_arn,
        "checkpoint": None,
        "checkpointCreated": None,
        "firstReadableSequence": None,
        "firstReadableCreated": None,
        "lostAncestorOf": shard.shard_id,
        "reason": "an ancestor shard was deleted from the stream before it was read to its end",
    }


def _drain(
    deps: Dependencies,
    settings: Settings,
    parent: ShardRef,
    remaining_ms: Callable[[], int],
    keep_reading: Callable[[int, int], bool],
    report: BatchReport,
) -> bool:
    """Read a parent shard to its end: what the mapping gave up on there is counted before the child moves on.
    Returns whether nothing is left to do there (read to its end, or to the tip of one still open; or reported gone).

    A parent that can no longer be read (DynamoDB deletes shards past the stream's retention) is
    reported like trimmed records and marked ended: it must never block its child.
    """
    progress = deps.progress.read(parent)
    if progress.ended:
        return True
    try:
        catchup = _catch_up(deps, settings, parent, progress, None, remaining_ms, keep_reading, report)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") not in GONE:
            logger.warning("parent shard not read", extra={"parent": parent.shard_id, "error": str(error)})
            return False
        gap = _gap_message(parent, progress, None, None)
        if not deps.send_failures([gap]):
            report.unreported += 1
            return False
        report.trimmed = gap
        deps.progress.mark_ended(parent)
        return True
    _advance(deps, catchup)
    report.parent_drained = parent.shard_id
    return catchup.held_back_from is None and (catchup.read.shard_ended or catchup.read.at_tip)


def _catch_up(
    deps: Dependencies,
    settings: Settings,
    shard: ShardRef,
    progress: Progress,
    bound: str | None,
    remaining_ms: Callable[[], int],
    keep_reading: Callable[[int, int], bool],
    report: BatchReport,
) -> _Catchup:
    """Read the shard from its checkpoint, write every aggregate, report what cannot be counted."""
    read = read_shard(
        deps.streams,
        shard,
        progress.start,
        bound,
        keep_reading,
        deps.sleep,
        nothing_counted=progress.checkpoint is None,
    )
    if read.start_contradicted:
        logger.error(
            "the stream called the shard's first sequence number trimmed but granted an iterator at it again; "
            "read from the trim horizon",
            extra={"shard": shard.shard_id, "first_sequence": progress.resume_at},
        )
    catchup = _Catchup(shard, progress, read)
    report.records_read += len(read.records)
    report.read_pages += read.pages
    report.empty_pages += read.empty_pages
    report.throttled_reads += read.throttled
    downloads: list[Download] = []
    rejected: list[Rejected] = []
    for record in read.records:
        parsed = parse_record(record, settings.schema)
        if isinstance(parsed, Download):
            downloads.append(parsed)
        elif isinstance(parsed, Rejected):
            rejected.append(parsed)
        else:
            report.ignored[parsed.reason] = report.ignored.get(parsed.reason, 0) + 1
    report.downloads += len(downloads)
    report.rejected.extend(rejected)
    groups: dict[AggregateKey, list[Contribution]] = {}
    for download in downloads:
        contribution = Contribution(download.sequence, download.created, download.amount, download.download_id)
        for key in download.keys:
            groups.setdefault(key, []).append(contribution)
    report.distinct_aggregates += len(groups)
    unwritten, refused = _write_all(deps, settings, shard, groups, remaining_ms, report)
    report.refused.extend(refused)
    unhandled = [groups[key][0].sequence for key in unwritten]
    messages = [_rejected_message(item, shard) for item in rejected] + [_refused_message(item) for item in refused]
    if read.trimmed is not None:
        report.trimmed = _gap_message(
            shard, progress, read.trimmed.first_readable_sequence, read.trimmed.first_readable_created
        )
        messages.append(report.trimmed)
    if messages and not deps.send_failures(messages):
        # Unreported, they must not be passed: the next reader meets them again and reports them.
        report.unreported += len(messages)
        unhandled += [pad_sequence(item.raw_sequence) for item in [*rejected, *refused] if item.raw_sequence]
        if read.trimmed is not None:
            unhandled.append("")
    elif read.trimmed is not None and read.trimmed.first_readable_sequence is not None:
        deps.progress.resume_after_gap(shard, read.trimmed.first_readable_sequence)
    elif read.trimmed is not None and progress.exists:
        deps.progress.note_gap_reported(shard, progress.start_token)
    catchup.held_back_from = min(unhandled) if unhandled else None
    return catchup


def _gap_message(
    shard: ShardRef, progress: Progress, first_sequence: str | None, first_created: int | None
) -> dict[str, Any]:
    """What recover needs to recount records trimmed before they were read: where counting stopped, and resumed."""
    return {
        "kind": "records_trimmed",
        "shardId": shard.shard_id,
        "streamArn": shard.stream_arn,
        "checkpoint": progress.checkpoint_sequence,
        "checkpointCreated": progress.checkpoint_created,
        "firstReadableSequence": first_sequence,
        "firstReadableCreated": first_created,
    }


def _report_unconfirmed(
    deps: Dependencies, delivery: Delivery, progress: Progress, read: ShardRead | None, report: BatchReport
) -> None:
    """Delivered or claimed records beyond the checkpoint, within what was read, that the shard does not hold."""
    unconfirmed = _unconfirmed(delivery, progress, read) if read is not None else []
    report.refused.extend(unconfirmed)
    if unconfirmed and not deps.send_failures([_refused_message(item) for item in unconfirmed]):
        report.unreported += len(unconfirmed)


def _unconfirmed(delivery: Delivery, progress: Progress, read: ShardRead) -> list[Refused]:
    last_read = read.last_sequence or progress.checkpoint or ""
    held = {pad_sequence(r["dynamodb"]["SequenceNumber"]): r for r in read.records}
    refused = []
    for record in delivery.records:
        sequence = _sequence(record)
        if sequence is None or (progress.checkpoint is not None and sequence <= progress.checkpoint):
            continue
        if sequence > last_read and not (read.shard_ended or read.reached_bound or read.at_tip):
            continue
        original = held.get(sequence)
        claim = record.get("dynamodb", {})
        if original is None:
            reason = f"no record {sequence.lstrip('0')} in {delivery.shard_id} of {_stream_of(delivery)}"
        elif original.get("eventName") != record.get("eventName") or original["dynamodb"].get("Keys") != claim.get(
            "Keys"
        ):
            reason = f"record {sequence.lstrip('0')} differs from the stream's record"
        else:
            continue
        refused.append(Refused(reason, claim.get("SequenceNumber"), record, delivery.shard_id, _stream_of(delivery)))
    return refused


def _stream_of(delivery: Delivery) -> str | None:
    return delivery.shard.stream_arn if delivery.shard else None


def _write_all(
    deps: Dependencies,
    settings: Settings,
    shard: ShardRef,
    groups: dict[AggregateKey, list[Contribution]],
    remaining_ms: Callable[[], int],
    report: BatchReport,
) -> tuple[list[AggregateKey], list[Refused]]:
    """Write every aggregate in parallel, returning before the deadline margin whatever the SDK is doing.

    Updates still running at the deadline are abandoned, not awaited: each is a conditional
    write, so landing late can neither double nor lose a count. Returns the aggregates not
    (known to be) written, below whose lowest record the checkpoint stays, and the records refused.
    """
    if not groups:
        return [], []
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
            report.previous_streams[f"{key.entity_id}|{key.period}"] = outcome.previous_stream_labels
        refused += [_refused_contribution(key, shard, contribution, why) for contribution, why in outcome.refused]
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


def _is_new_download(record: Any, schema: Schema) -> bool:
    """An INSERT without the period attribute: what the mapping's filter lets through, never `Ignored`."""
    stream = record.get("dynamodb") if isinstance(record, dict) else None
    image = stream.get("NewImage") if isinstance(stream, dict) else None
    return record.get("eventName") == "INSERT" and isinstance(image, dict) and schema.period not in image


def _refused_contribution(key: AggregateKey, shard: ShardRef, contribution: Contribution, reason: str) -> Refused:
    return Refused(
        reason,
        contribution.sequence.lstrip("0") or "0",
        {"entityId": key.entity_id, "period": key.period, "created": contribution.created},
        shard.shard_id,
        shard.stream_arn,
    )


def _advance(deps: Dependencies, catchup: _Catchup) -> str | None:
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


def _rejected_message(item: Rejected, shard: ShardRef) -> dict[str, Any]:
    return {
        "kind": "rejected_download",
        "reason": item.reason,
        "sequenceNumber": item.raw_sequence,
        "shardId": shard.shard_id,
        "streamArn": shard.stream_arn,
        "record": item.record,
    }


def _refused_message(item: Refused) -> dict[str, Any]:
    message = {
        "kind": "refused_record",
        "reason": item.reason,
        "sequenceNumber": item.raw_sequence,
        "shardId": item.shard_id,
        "streamArn": item.stream_arn,
        "record": item.record,
    }
    if isinstance(item.record, dict) and "entityId" in item.record:
        message["entityId"], message["period"] = item.record["entityId"], item.record.get("period")
    return message


MESSAGE_BYTES = 200_000
"""Below SQS's per-message limit (256 KiB, or 1 MiB where raised), with room for the JSON around a record."""
BATCH_BYTES = 900_000
"""SendMessageBatch: "the maximum total payload size (the sum of the individual lengths of all of the batched
messages)" is 1 MiB (256 KiB in older text: then one message per batch); kept below it."""


def failure_message_body(message: dict[str, Any]) -> str:
    """The message as JSON that always parses: an oversized record is replaced by what identifies it."""
    body = json.dumps(message, default=str)
    if len(body.encode()) <= MESSAGE_BYTES:
        return body
    record = message.get("record")
    stream = record.get("dynamodb", {}) if isinstance(record, dict) else {}
    summary = {
        "truncated": True,
        "eventName": record.get("eventName") if isinstance(record, dict) else None,
        "keys": stream.get("Keys") if isinstance(stream, dict) else None,
        "sequenceNumber": stream.get("SequenceNumber") if isinstance(stream, dict) else None,
        "bytes": len(body.encode()),
    }
    return json.dumps({**message, "record": summary}, default=str)[:MESSAGE_BYTES]


def send_to_failure_queue(sqs: Any, queue_url: str | None, messages: list[dict[str, Any]]) -> bool:
    """Copy messages to the failure queue in batches of at most ten and 900 KB; False unless every one got there."""
    if not queue_url:
        return True
    bodies = [failure_message_body(message) for message in messages]
    batches: list[list[str]] = [[]]
    for body in bodies:
        batch = batches[-1]
        if len(batch) == 10 or sum(len(b.encode()) for b in batch) + len(body.encode()) > BATCH_BYTES:
            batches.append([body])
        else:
            batch.append(body)
    delivered = True
    for batch in batches:
        if not batch:
            continue
        entries = [{"Id": str(index), "MessageBody": body} for index, body in enumerate(batch)]
        try:
            response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        except (ClientError, BotoCoreError):
            logger.exception("records were not copied to the failure queue; the log lines hold them")
            delivered = False
            continue
        if response.get("Failed"):
            logger.error("some records were not copied to the failure queue", extra={"failed": response["Failed"]})
            delivered = False
    return delivered


def publish(report: BatchReport, started: float, succeeded: bool) -> None:
    for item in report.rejected:
        logger.warning(
            "rejected download record",
            extra={"reason": item.reason, "sequence_number": item.raw_sequence, "record": item.record},
        )
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
            extra={"entity_id": key.entity_id, "period": key.period, "error": reason},
        )
    for aggregate, labels in report.previous_streams.items():
        logger.warning(
            "aggregate carries watermarks of a previous stream",
            extra={"aggregate": aggregate, "stream_labels": labels},
        )
    metrics.add_metric(name="DownloadsCounted", unit=MetricUnit.Count, value=report.added)
    metrics.add_metric(name="DownloadsAlreadyApplied", unit=MetricUnit.Count, value=report.already_applied)
    metrics.add_metric(name="AggregateWrites", unit=MetricUnit.Count, value=report.writes)
    metrics.add_metric(name="RecordsRead", unit=MetricUnit.Count, value=report.records_read)
    metrics.add_metric(name="ThrottledStreamReads", unit=MetricUnit.Count, value=report.throttled_reads)
    metrics.add_metric(name="RejectedRecords", unit=MetricUnit.Count, value=len(report.rejected))
    metrics.add_metric(name="RefusedRecords", unit=MetricUnit.Count, value=len(report.refused))
    metrics.add_metric(name="TrimmedRecords", unit=MetricUnit.Count, value=1 if report.trimmed else 0)
    metrics.add_metric(
        name="FailedAggregates", unit=MetricUnit.Count, value=len(report.failed_keys) + len(report.deferred_keys)
    )
    metrics.add_metric(name="PreviousStreamWatermarks", unit=MetricUnit.Count, value=len(report.previous_streams))
    duration_ms = round((time.monotonic() - started) * 1000)
    logger.info("batch summary", extra={**report.summary(), "succeeded": succeeded, "duration_ms": duration_ms})


SETTINGS = Settings.from_environment(dict(os.environ))
_dynamodb = boto3.client("dynamodb", config=_SDK_CONFIG)
_streams = boto3.client("dynamodbstreams", config=_SDK_CONFIG)
_sqs = boto3.client("sqs", config=_SDK_CONFIG)
_PROGRESS = ProgressStore(_dynamodb, SETTINGS.progress_table_name)
DEPENDENCIES = Dependencies(
    store=AggregateStore(
        _dynamodb, SETTINGS.table_name, SETTINGS.schema, _PROGRESS, leaderboard_shards=SETTINGS.leaderboard_shards
    ),
    progress=_PROGRESS,
    streams=_streams,
    executor=ThreadPoolExecutor(max_workers=max(1, SETTINGS.write_concurrency), thread_name_prefix="aggregate-writer"),
    send_failures=lambda messages: send_to_failure_queue(_sqs, SETTINGS.failure_queue_url, messages),
)


def settle_band_records(event: dict[str, Any]) -> dict[str, Any]:
    """The band queue's records, at their bands' deadlines: a band its repair never closed goes to the failure queue."""
    settled = settle(event, DEPENDENCIES.store.read, DEPENDENCIES.send_failures, time.time)
    for record in settled.expired:
        logger.error(
            "a repair's band outlived its deadline: its repair did not close it; reported for recover",
            extra={"entity_id": record.entity_id, "period": record.period, "band": record.band},
        )
    for message_id, why in settled.malformed:
        logger.error("band record not understood; reported", extra={"message_id": message_id, "reason": why})
    for message_id, why in settled.unsettled:
        logger.error(
            "band record past its deadline not settled; retried", extra={"message_id": message_id, "reason": why}
        )
    metrics.add_metric(name="ExpiredRepairBands", unit=MetricUnit.Count, value=len(settled.expired))
    metrics.add_metric(name="UnsettledBandRecords", unit=MetricUnit.Count, value=len(settled.unsettled))
    logger.info(
        "band records",
        extra={"gone": settled.gone, "open": settled.open, "expired": len(settled.expired), "retried": settled.retry},
    )
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in settled.retry]}


@metrics.log_metrics
@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if is_band_record_event(event):
        return settle_band_records(event)
    started = time.monotonic()
    if is_lineage_sweep_event(event):
        try:
            response, report = sweep_lineages_on_schedule(
                event, DEPENDENCIES, SETTINGS, context.get_remaining_time_in_millis
            )
        except LineageSweepUnreported as failure:
            publish(failure.report, started, succeeded=False)
            raise
        publish(report, started, succeeded=True)
        return response
    delivery = parse_delivery(event, SETTINGS.table_arn)
    try:
        response, report = process_delivery(delivery, DEPENDENCIES, SETTINGS, context.get_remaining_time_in_millis)
    except AggregatesNotWritten as failure:
        publish(failure.report, started, succeeded=False)
        raise
    except Exception:
        logger.exception("invocation failed; Lambda retries it", extra={"shard_id": delivery.shard_id})
        raise
    publish(report, started, succeeded=True)
    return response
