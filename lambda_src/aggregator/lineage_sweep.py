"""The lineage sweep: closed shards read to their end, and orphaned lineages walked, whether or not a download comes."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from batch_report import BatchReport
from catch_up import reading_budget
from delivery import ShardRef
from dependencies import Dependencies
from described_shard import ShardFacts
from invocation_context import InvocationContext
from progress_item import Progress
from shard_lineage import count_ancestry, drain
from shard_reader import read_shard
from stream_description import listed_shards
from telemetry import logger

LINEAGE_SWEEP_EVENT = "lineageSweep"
LINEAGE_SWEEP_SECONDS = 900.0
"""How often (per function instance, the first invocation included) an invocation of any shard also walks the
lineage of every listed shard whose parent is no longer listed: a lineage that gets no download is never invoked."""


def sweep_lineages(
    invocation: InvocationContext,
    stream_arn: str,
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
    deps, settings, remaining_ms = invocation.deps, invocation.settings, invocation.remaining_ms
    now = deps.clock()
    if not scheduled and deps.lineages_swept_at is not None and now - deps.lineages_swept_at < LINEAGE_SWEEP_SECONDS:
        return False
    deps.lineages_swept_at = now
    started_ms = remaining_ms()

    # Beside a shard's own reading, a quarter of the invocation at most: the rest is the invoked shard's.
    leave_ms = settings.deadline_margin_ms if scheduled else max(settings.deadline_margin_ms, started_ms * 3 // 4)
    keep_reading = reading_budget(settings, remaining_ms, leave_ms)

    after_this: str | None = None
    try:
        listed = listed_shards(deps, stream_arn)
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
            walked = count_ancestry(invocation, shard, known, keep_reading, report, listed)
            finished = walked and finished
            if to_read:
                finished = drain(invocation, shard, keep_reading, report, facts) and finished
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
    event: Mapping[str, Any], invocation: InvocationContext
) -> tuple[dict[str, Any], BatchReport]:
    """The lineage sweep whether or not any download comes: a stream that gets none after a pause past the
    retention is invoked by nothing else, and its loss must still be reported."""
    stream_arn = event[LINEAGE_SWEEP_EVENT].get("streamArn")
    table_arn = invocation.settings.table_arn
    if not isinstance(stream_arn, str) or not stream_arn.startswith(f"{table_arn}/stream/"):
        raise ValueError(f"lineageSweep.streamArn is {stream_arn!r}, not a stream of {table_arn}")
    report = BatchReport()
    finished = sweep_lineages(invocation, stream_arn, report, scheduled=True)
    response = {"streamArn": stream_arn, "finished": finished, "summary": report.summary()}
    if report.unreported:
        raise LineageSweepUnreported(f"{report.unreported} loss reports the failure queue did not take", report)
    if not finished:
        logger.warning("lineage sweep not finished; the next scheduled one goes on", extra={"stream": stream_arn})
    return response, report
