"""Recount aggregates from the raw downloads, report the differences, and repair those no record in flight can change.

The truth is the download items in the table, each counted in every board the aggregator counts it
in (its UTC bucket of each period the deployment keeps, and its category's board of each: the same
`leaderboard_core.buckets.download_boards` the aggregator calls). A stored count can differ from it when someone
edited an aggregate, when records were trimmed from the stream before the aggregator read them,
or while downloads are still on their way through the stream (a lagging mapping: up to the
stream's 24-hour retention). The repair therefore proves, aggregate by aggregate, that nothing is
in flight before it writes:

1. *Snapshot*: every aggregate of the boards (count, watermarks, recount fence), read before the
   recount starts, so whatever it counts was in the table when the recount began.
2. *Recount* with consistent reads (parallel scan segments, or a Query per song), one counter per
   segment, merged: memory grows with songs, not downloads. Its end T is taken from DynamoDB's clock
   (the `Date` header of a fresh response; this machine's clock only measures the time since that
   request, and a repair refuses when the two disagree by more than the margin, or when the headers
   contradict the time measured between them: the machine suspended or paused); the fence F is T
   plus a 60-second clock margin.
3. *In flight*: every shard of the table's current stream not marked `ShardEnded` in the progress
   table is read from where the aggregator resumes (after its `Checkpoint`: everything at or below
   it is counted, the aggregator's invariant; or at its `ResumeAt`) through empty pages to the
   shard's end, or, for an open shard, to a record created after T or its tip. Every download of
   the boards found there is in flight; so is everything, if a shard could not be read to such a
   point within the budget.
4. *Repair*: an aggregate with a download in flight is **pending**: reported, untouched. A settled
   one whose count differs is recounted once more on its own (a Query of its song), this time
   keeping the ids of the downloads counted, and gets one conditional UpdateItem: count and order
   set to that recount, index partition set by the deployed layout, `RecountedThrough` raised to
   F (that recount's end, from its own fresh `Date` header, plus the clock margin) and a **band**
   opened (`RecountBand`; recorded first in the band queue, delayed toward its deadline, where the
   aggregator meets it then and reports the band to the failure queue if it is still open),
   conditioned on the count, every watermark and the fence being what the snapshot read (the
   aggregator only ever adds, so any write of its in between fails the
   condition: reported as a conflict).
5. *Band*: while it is open, the aggregator holds every record of the aggregate created at or
   before F on the aggregate itself (`RecountHeld`, a bounded set of download ids, written with its
   watermark) instead of counting it. The repair waits until F has passed and no record of the
   aggregate created at or before F is left above the aggregator's checkpoints, then closes the
   band: it adds the held downloads its recount did not see, conditioned on the band and the held
   set being what it read. With retractions a held record may take a download back or move it:
   the close moves each held download from what the recount counted of it to what its last held
   record leaves (leaderboard_core.band_holds).

A download the recount saw is never counted again: its record is created at or before F, so the
aggregator holds it (and the close knows it was seen) or, once the band is closed, refuses it.
A download the recount missed is counted once: after F by the aggregator, within F by the close.
Only a record of it that reaches the aggregator after the band closed (delivered later than the
wait allowed) is refused, and reported: an under-count `recover` repairs, never an over-count.

With time-to-live on the downloads, expired downloads leave the table but stay counted: a board
holding a download whose expiry has passed is refused, and no count is lowered while the table
has TTL.
"""

from leaderboard_tools.reconcile.band import BAND_MESSAGE_KIND, CLOSED_ATTRIBUTE
from leaderboard_tools.reconcile.clock import CLOCK_MARGIN_SECONDS, ClockDisagrees, DateMissing, interval_clock
from leaderboard_tools.reconcile.in_flight import download_aggregates
from leaderboard_tools.reconcile.reconciler import Reconciler
from leaderboard_tools.reconcile.recount import board_refusal, boards_of_download
from leaderboard_tools.reconcile.refusals import RecountUnsupported, RepairUnavailable
from leaderboard_tools.reconcile.report import (
    AggregateId,
    Difference,
    ReconcileReport,
    RunReport,
    Snapshot,
    StreamCheck,
)

__all__ = [
    "BAND_MESSAGE_KIND",
    "CLOCK_MARGIN_SECONDS",
    "CLOSED_ATTRIBUTE",
    "AggregateId",
    "ClockDisagrees",
    "DateMissing",
    "Difference",
    "ReconcileReport",
    "Reconciler",
    "RecountUnsupported",
    "RepairUnavailable",
    "RunReport",
    "Snapshot",
    "StreamCheck",
    "board_refusal",
    "boards_of_download",
    "download_aggregates",
    "interval_clock",
]
