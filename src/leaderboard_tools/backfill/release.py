"""When the claims may go: once no run of the backfill can still claim, and the aggregator has counted past every
stream record created before the last moment any run could count.

The done item says when the scan of the whole table ended, not that every run has: another run started at once may
still be scanning, or killed, or paused, and count a download written after that end. Every run is registered and
fenced (runs.py): a run heard from within the lease may still count, and the claims stay; one not heard from within
it is ended here (its fences deleted: it can count nothing more, and a process still alive stops at its next
transaction). Each ended run's bound is the moment its fences were gone; every download it counted was written before.
The aggregator's checkpoint of every shard must then have passed each record created before the latest bound and the
done item's end (within the clock margin, docs/operations.md). Read from each shard's checkpoint, as `reconcile`'s
in-flight check reads (the progress table, not IteratorAge, which says what the mapping delivered, not what the
aggregator counted).

In ledger mode (the module's `ledger`) the claims table is the ledger and is kept for good: there is nothing to
release, at any time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from leaderboard_core.claims import CLAIM_KEY
from leaderboard_tools.backfill.refusals import claims_table_of
from leaderboard_tools.backfill.report import iso
from leaderboard_tools.backfill.runs import LEASE_SECONDS, RunSeen, end_run, runs_of
from leaderboard_tools.backfill.segments import DONE_ITEM, ENDED_AT, DynamoTime
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.output_format import counted
from leaderboard_tools.reconcile.clock import CLOCK_MARGIN_SECONDS
from leaderboard_tools.reconcile.reconciler import Reconciler
from leaderboard_tools.reconcile.report import StreamCheck


@dataclass
class Release:
    ended_at: float | None
    """The backfill's end (epoch seconds, DynamoDB's clock); None: no backfill has finished."""
    waiting: int | None = None
    """Download records created before the last moment a run could count, plus the margin, that the aggregator has
    not counted past; None: unknown (a shard could not be read that far, or a run may still count)."""
    stream: StreamCheck | None = None
    running: list[RunSeen] = field(default_factory=list)
    """Runs heard from within the lease: they may still claim, and the claims stay."""
    ended_now: list[RunSeen] = field(default_factory=list)
    """Runs not heard from within the lease, ended by this check."""
    counted_until: float | None = None
    """The latest moment any run could count (the done item's end, or a run's later bound)."""
    ledger: bool = False
    """Ledger mode: the ledger is permanent, and nothing is to be released."""

    @property
    def releasable(self) -> bool:
        return not self.ledger and self.ended_at is not None and not self.running and self.waiting == 0

    @property
    def verdict(self) -> str:
        if self.ledger:
            return LEDGER_VERDICT
        if self.ended_at is None:
            return (
                "no backfill has finished: run `leaderboard-tools backfill` to its end first; keep backfill_claims on"
            )
        if self.running:
            runs = "; ".join(
                f"run {run.run_id} ({run.process}), started {iso(run.started_at)}, last heard {iso(run.heard_at)}"
                for run in self.running
            )
            return (
                f"{counted(len(self.running), 'backfill run')} may still count: {runs}. Wait for it to end (or stop "
                f"it), then run this again; a run killed without ending is ended by this check once it has not been "
                f"heard from for {LEASE_SECONDS:g} s. Keep backfill_claims on"
            )
        ended = (
            f"ended {counted(len(self.ended_now), 'run')} not heard from for {LEASE_SECONDS:g} s "
            f"({', '.join(run.run_id for run in self.ended_now)}: a process of one still alive stops at its next "
            "transaction, and a later run goes on); "
            if self.ended_now
            else ""
        )
        until = iso(self.counted_until)
        if self.waiting is None:
            return f"{ended}a shard could not be read far enough to tell: run this again; keep backfill_claims on"
        if self.waiting:
            return (
                f"{ended}{counted(self.waiting, 'download record')} created before {until} (the last moment a "
                "backfill run could count) are not yet counted by the aggregator: run this again later; keep "
                "backfill_claims on"
            )
        return (
            f"{ended}every backfill run has ended and the aggregator has counted past {until}: apply "
            "backfill_claims = false"
        )


LEDGER_VERDICT = "ledger mode: the ledger is permanent, nothing to release"
"""What a release check answers in ledger mode."""


def release_check(
    clients: Any,
    deployment: Deployment,
    margin_seconds: float = CLOCK_MARGIN_SECONDS,
    dynamo_time: Callable[[], float] | None = None,
) -> Release:
    """Whether the claims may go; ends the runs not heard from within the lease on the way. `dynamo_time`: the
    latest DynamoDB's clock can be now. In ledger mode at once, without a read: never (the ledger is permanent)."""
    if deployment.ledger:
        return Release(None, ledger=True)
    claims = claims_table_of(deployment)
    now = dynamo_time or DynamoTime(clients.dynamodb, deployment.table).latest
    done = clients.dynamodb.get_item(TableName=claims, Key={CLAIM_KEY: {"S": DONE_ITEM}}, ConsistentRead=True)
    ended = ((done.get("Item") or {}).get(ENDED_AT) or {}).get("N")
    if ended is None:
        return Release(None)
    release = Release(float(ended), counted_until=float(ended))
    bounds = [float(ended)]
    for run in runs_of(clients.dynamodb, claims):
        if run.fenced and run.heard_at is not None and now() - run.heard_at < LEASE_SECONDS:
            release.running.append(run)
            continue
        if run.fenced or run.ended_at is None:
            bounds.append(end_run(clients.dynamodb, claims, run.run_id, run.segments, now, "backfill --release-check"))
            if run.fenced:
                release.ended_now.append(run)
        else:
            bounds.append(run.ended_at)
    if release.running:
        return release
    release.counted_until = max(bounds)
    found, check = Reconciler(clients, deployment)._in_flight(None, math.ceil(release.counted_until + margin_seconds))
    release.waiting, release.stream = None if found is None else check.in_flight, check
    return release
