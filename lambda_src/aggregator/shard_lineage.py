"""A shard's ancestors, counted to their ends (oldest first) before it, or their loss reported."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from botocore.exceptions import ClientError

from batch_report import BatchReport
from catch_up import GONE, advance, catch_up
from delivery import ShardRef
from dependencies import Dependencies
from described_shard import GONE_FACTS, ShardFacts
from failure_messages import gap_message, lost_ancestor_message
from invocation_context import InvocationContext
from leaderboard_core.bookkeeping import pad_sequence
from progress_item import Progress
from stream_description import described_ending, shard_facts
from telemetry import logger

ANCESTRY_LIMIT = 1000
"""Ancestors one invocation walks up at most before it stops and says so (a lineage of 1,000 rollovers is months)."""
ANCESTORS_SHARE = 4
"""Ancestors are read and written in at most a quarter of the time left (as the lineage sweep beside a shard's
reading): the shard's own read, which follows, always gets its time, whatever an ancestor holds."""
EMPTY_TAIL_SECONDS = 900.0
"""A closed parent whose read gave up after MAX_EMPTY_PAGES in a row short of its EndingSequenceNumber is drained again
only this long after (the lineage sweep's interval), not by every invocation of its child."""


def count_ancestry(
    invocation: InvocationContext,
    shard: ShardRef,
    progress: Progress,
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
    deps = invocation.deps
    chain, lost, unfinished = _ancestry(deps, shard, progress, listing)
    lost_reported = lost is None
    if lost is not None:
        gap = lost_ancestor_message(shard, lost)
        if deps.send_failures([gap]):
            deps.progress.mark_lost(lost)
            report.trimmed, report.ancestor_lost, lost_reported = gap, lost.shard_id, True
        else:
            report.unreported += 1
    within_share, share = _ancestors_budget(invocation, keep_reading)
    for ancestor, _ in reversed(chain):
        if not share(0, 0):
            break
        drain(within_share, ancestor, share, report)
    if unfinished or not lost_reported:
        return False
    for ancestor, walked in reversed(chain):
        if not walked.ended and not deps.progress.read(ancestor).ended:
            return False
        deps.progress.mark_lineage_counted(ancestor)
    deps.progress.mark_lineage_counted(shard)
    return True


def _ancestors_budget(
    invocation: InvocationContext, keep_reading: Callable[[int, int], bool]
) -> tuple[InvocationContext, Callable[[int, int], bool]]:
    """The ancestors' invocation (its `remaining_ms`) and `keep_reading` within ANCESTORS_SHARE of the time left now,
    its first half to read, the rest to write: their writes, which stop at the deadline margin of the time they are
    given, end with the share as their reads do, so they never starve the child (a write cut off holds its checkpoint
    back, rule 10)."""
    settings, remaining_ms = invocation.settings, invocation.remaining_ms
    left_ms = remaining_ms()
    share_ms = max(0, left_ms - settings.deadline_margin_ms) // ANCESTORS_SHARE
    until_ms = left_ms - share_ms
    read_until_ms = until_ms + share_ms // 2

    def within_share_ms() -> int:
        return remaining_ms() - until_ms + settings.deadline_margin_ms

    within_share = invocation.within(within_share_ms)
    return within_share, lambda records, size: keep_reading(records, size) and remaining_ms() > read_until_ms


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
            facts = shard_facts(deps, parent) if listing is None or parent_id in listing else GONE_FACTS
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
            facts = shard_facts(deps, parent) if listing is None or parent.shard_id in listing else GONE_FACTS
            if not facts.listed:
                # first seen unlisted (a direct invocation of a deleted shard): what was above it is not known
                return chain, (parent if facts.described_whole else None), not facts.described_whole
            parent_id = facts.parent_shard_id
    return chain, None, False


def drain(
    invocation: InvocationContext,
    parent: ShardRef,
    keep_reading: Callable[[int, int], bool],
    report: BatchReport,
    facts: ShardFacts | None = None,
) -> bool:
    """Read a parent shard to its end: what the mapping gave up on there is counted before the child moves on.
    Returns whether nothing is left to do there (read to its end, or to the tip of one still open; or reported gone).

    One DescribeStream calls closed (`facts`, or described again) is read to its EndingSequenceNumber's record and
    marked ended there, without the empty pages that may follow it: a run of empty pages is no end, and a child
    counted on before its parent's records may take back a download not yet counted. Where that record is not met
    (trimmed, or none there), the read goes on to the null NextShardIterator, and one that gives up after
    MAX_EMPTY_PAGES in a row is made again only EMPTY_TAIL_SECONDS later (one its budget or throttling stopped sooner
    is not put off). A parent that can no longer be read (DynamoDB deletes shards past the stream's retention) is
    reported like trimmed records and marked ended: it must never block its child.
    """
    deps = invocation.deps
    progress = deps.progress.read(parent)
    if progress.ended:
        return True
    ending = described_ending(deps, parent) if facts is None else facts.ending_sequence
    if ending is not None and progress.checkpoint == pad_sequence(ending):
        deps.progress.mark_ended(parent)  # every record through the last one is counted or reported
        return True
    now = deps.clock()
    walked = progress.empty_tail_walked_at
    if ending is not None and walked is not None and now - walked < EMPTY_TAIL_SECONDS:
        return False
    try:
        catchup = catch_up(invocation, parent, progress, None, keep_reading, report, ending)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") not in GONE:
            logger.warning("parent shard not read", extra={"parent": parent.shard_id, "error": str(error)})
            return False
        gap = gap_message(parent, progress, None, None)
        if not deps.send_failures([gap]):
            report.unreported += 1
            return False
        report.trimmed = gap
        deps.progress.mark_ended(parent)
        return True
    advance(deps, catchup)
    report.parent_drained = parent.shard_id
    read = catchup.read
    if ending is not None and not read.shard_ended and read.at_tip:
        deps.progress.note_empty_tail(parent, now)  # MAX_EMPTY_PAGES walked: not a read its share or throttling cut
    return catchup.held_back_from is None and (read.shard_ended or read.at_tip)
