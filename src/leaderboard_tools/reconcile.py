"""Recount aggregates from the raw downloads, report the differences, and repair those no record in flight can change.

The truth is the download items in the table, counted in their UTC month (the aggregator's own
month parser, `leaderboard_core.buckets.month_of`). A stored count can differ from it when someone
edited an aggregate, when records were trimmed from the stream before the aggregator read them,
or while downloads are still on their way through the stream (a lagging mapping: up to the
stream's 24-hour retention). The repair therefore proves, aggregate by aggregate, that nothing is
in flight before it writes:

1. *Snapshot*: every aggregate of the months (count, watermarks, recount fence), read before the
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
   the months found there is in flight; so is everything, if a shard could not be read to such a
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
   set being what it read.

A download the recount saw is never counted again: its record is created at or before F, so the
aggregator holds it (and the close knows it was seen) or, once the band is closed, refuses it.
A download the recount missed is counted once: after F by the aggregator, within F by the close.
Only a record of it that reaches the aggregator after the band closed (delivered later than the
wait allowed) is refused, and reported: an under-count `recover` repairs, never an over-count.

With time-to-live on the downloads, expired downloads leave the table but stay counted: a month
holding a download whose expiry has passed is refused, and no count is lowered while the table
has TTL.
"""

from __future__ import annotations

import json
import math
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

from botocore.exceptions import BotoCoreError, ClientError

from leaderboard_core.bookkeeping import (
    APPLIED_SEQUENCE,
    RECOUNT_BAND,
    RECOUNT_HELD,
    RECOUNTED_THROUGH,
    WATERMARK_PREFIX,
    WATERMARKS_PRUNED,
    WATERMARKS_PRUNED_UNDER,
    download_id,
)
from leaderboard_core.buckets import BUCKET_KEY_LENGTH, CATEGORY_SEPARATOR, MAX_SORT_KEY_BYTES, MONTH_KEY, month_of
from leaderboard_core.index_layout import ORDER_SCALE, leaderboard_partition, order_of
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.stream_reading import (
    ShardRead,
    ShardReader,
    created_of,
    is_open,
    shard_progress,
    starting_sequence,
    stream_shards,
)

CLOSED_ATTRIBUTE = "RecountClosed"
"""The last band a close removed and what it added ("<token>|<deadline>|<added>"): the repair's own, written by its
close, tells a close whose response was lost from a band another repair replaced. The aggregator never reads it."""
BAND_MESSAGE_KIND = "recount_band"
"""The band queue's record of a band (the failure queue's, in a deployment without one), sent before the band
opens: `recover` recounts an aggregate whose band outlived its deadline (its repair was killed) and deletes the record
of a band that is gone."""
BAND_RECORD_MARGIN_SECONDS = 60
"""How long past a band's deadline the aggregator waits before it calls the band expired (band_records.py): its
record is delayed that much more, so that it is met once, past both."""
MAX_DELAY_SECONDS = 900
"""SQS's longest DelaySeconds: a band's record stays out of sight (and out of the queue's alarm) until then."""
CLOCK_MARGIN_SECONDS = 60
"""How far DynamoDB's clock (its Date header, which the repair takes its time from) may be from the stream's creation
times; this machine's clock must agree with DynamoDB's within it, or the repair refuses."""
BAND_SECONDS = 300.0
"""How long a band waits after F for the records created before it to reach the aggregator (the iterator-age alarm
fires at 300 s of lag): a record later than that is refused and reported."""
BAND_SETTLE_SECONDS = 5.0
"""After F, before the first look at the stream: a record is written to the stream after its item."""
BAND_POLL_SECONDS = 5.0
BAND_ID_BUDGET = 2_000_000
"""Download ids kept in memory for open bands (about 100 bytes each): past it, bands are closed before more open."""
CLOSE_ROUNDS = 8
"""A close is retried when the aggregator held one more record between its read and its write."""
RETRIED_CONFLICTS = ("TransactionConflictException",)
"""An UpdateItem meeting the aggregator's proof transaction on the same item ("conflicts with an ongoing
TransactWriteItems request that includes the same item", DynamoDB Developer Guide, *Transaction conflict handling*):
botocore's standard retries do not retry it, so the repair and the close do."""

OPENED_STATES = ("repaired", "unknown")
"""The states of an aggregate whose band this run opened (written)."""

AggregateId = tuple[str, str]
"""(entity id, month)"""


class RepairUnavailable(RuntimeError):
    """The deployment gives the repair nothing to prove settlement with (no stream, no progress table)."""


class ClockDisagrees(RuntimeError):
    """This machine's clock is off DynamoDB's by more than the clock margin, its interval clock stopped or jumped, or
    DynamoDB's time cannot be read: the repair stops. `repaired` names the aggregates whose bands it had opened
    before (their bands closed at once on the way out); none: nothing was written."""

    def __init__(self, reason: str, repaired: Collection[str] = (), outcome: str | None = None) -> None:
        self.reason = reason
        self.repaired = list(repaired)
        if outcome is None:
            outcome = (
                f"the repair stopped after repairing {', '.join(self.repaired)} (their bands closed at once: a "
                "record they would have held is refused and reported), and repaired nothing else: run again once "
                "this is fixed"
                if self.repaired
                else "nothing was written"
            )
        self.outcome = outcome
        super().__init__(f"{reason}; {outcome}")


class DateMissing(ClockDisagrees):
    """A DynamoDB response without its Date header: before the first band, the repair refuses; later, only the
    aggregate whose band needed it is left unrepaired."""


class RecountUnsupported(RuntimeError):
    """The deployment keeps aggregates this recount does not compute (sums, no month boards): nothing is read."""


@dataclass(frozen=True)
class Snapshot:
    """One aggregate as read before the recount: its count, every watermark and its recount fence."""

    count: int
    watermarks: tuple[tuple[str, str], ...]
    fence: int | None
    exists: bool
    band: str | None = None
    """Another repair's band, open or left: its held set changes no count, so the repair is conditioned on both."""
    held: int = 0


ABSENT = Snapshot(0, (), None, exists=False)


@dataclass
class Difference:
    entity_id: str
    stored: int
    recounted: int
    state: str = "differs"
    """differs (no repair asked), repaired, pending (a download in flight), conflict (written meanwhile),
    ttl (a lower count while the table has TTL), unrecorded (its band's record could not be sent: not repaired),
    unclocked (DynamoDB's time could not be read for its band: not repaired), unknown (its band was closed, or replaced
    by another repair's, and which is not known: recount)."""
    reason: str | None = None
    added_at_close: int = 0
    """Downloads the repair's recount missed that the aggregator held in its band: added when the band closed."""

    @property
    def repaired(self) -> bool:
        return self.state == "repaired"

    def as_json(self) -> dict[str, Any]:
        entry = {
            "songID": self.entity_id,
            "stored": self.stored,
            "recounted": self.recounted,
            "repaired": self.repaired,
            "state": self.state,
        }
        if self.repaired:
            entry["addedAtClose"] = self.added_at_close
        return entry | ({"reason": self.reason} if self.reason else {})


@dataclass
class ReconcileReport:
    month: str
    aggregates: int = 0
    downloads: int = 0
    differences: list[Difference] = field(default_factory=list)
    refused: str | None = None
    """Why the month was not recounted (TTL: a download of it expired)."""

    @property
    def repaired(self) -> bool:
        return self.refused is None and bool(self.differences) and all(d.repaired for d in self.differences)

    @property
    def exact(self) -> bool:
        """Every aggregate of the month equals its recount now."""
        return self.refused is None and all(d.repaired for d in self.differences)

    def as_json(self) -> dict[str, Any]:
        return {
            "month": self.month,
            "differences": [difference.as_json() for difference in self.differences],
            "repaired": self.repaired,
            "pending": sorted(d.entity_id for d in self.differences if d.state == "pending"),
        } | ({"refused": self.refused} if self.refused else {})


@dataclass
class StreamCheck:
    """What the in-flight check read: shards, records, and the shards it could not read far enough."""

    shards: int = 0
    skipped_ended: int = 0
    records: int = 0
    in_flight: int = 0
    incomplete: list[str] = field(default_factory=list)
    trimmed: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "shards": self.shards,
            "shardsEnded": self.skipped_ended,
            "records": self.records,
            "downloadsInFlight": self.in_flight,
            "incompleteShards": self.incomplete,
            "trimmedShards": self.trimmed,
        }


@dataclass
class RunReport:
    months: list[ReconcileReport] = field(default_factory=list)
    fence: int | None = None
    stream: StreamCheck | None = None
    boards_not_recounted: list[str] = field(default_factory=list)
    """The deployment's boards beyond months (other periods, categories): this recount never touches them."""

    @property
    def exact(self) -> bool:
        return all(month.exact for month in self.months)

    def month(self, month: str) -> ReconcileReport:
        return next(report for report in self.months if report.month == month)


@dataclass
class _Recount:
    counts: Counter[AggregateId] = field(default_factory=Counter)
    expired: dict[str, str] = field(default_factory=dict)
    ids: set[str] | None = None
    """The ids of the downloads counted, when a repair needs them (one aggregate's)."""


@dataclass
class _Band:
    """A repaired aggregate whose band is open: what its close needs."""

    month: str
    difference: Difference
    value: str
    """"<token>|<deadline>", as written: the close is conditioned on it."""
    fence: int
    deadline: int
    seen: set[str]
    closed: bool = False
    close_sent: bool = False
    """A close's write was sent without its success coming back: it may have landed."""


@dataclass
class _ServerClock:
    """DynamoDB's clock as bounds on its offset from this machine's interval clock, narrowed by each Date header.

    A Date is whole seconds, stamped at some moment between the request's send and its response's receipt: at that
    receipt DynamoDB's time lay in [Date - (receipt - send), Date + 1), and it advances with the interval clock. The
    bounds of every response must overlap: bounds that contradict (low above high) mean the interval clock stopped or
    jumped between two responses, and then no time derived from them can be trusted.
    """

    low: float = -math.inf
    high: float = math.inf

    def observe(self, date: float, sent: float, received: float) -> tuple[float, float]:
        """Narrow the bounds by one response; that response's own bounds."""
        low, high = date - received, date + 1 - sent
        self.low = max(self.low, low)
        self.high = min(self.high, high)
        return low, high

    @property
    def contradicts(self) -> bool:
        return self.low > self.high


_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


def interval_clock() -> float:
    """This machine's clock for intervals: CLOCK_BOOTTIME where there is one (Linux), else time.monotonic.

    CLOCK_MONOTONIC stops while the machine is suspended (PEP 418); CLOCK_BOOTTIME counts the time suspended, so a
    laptop's sleep or a paused VM between two of the repair's requests does not make DynamoDB's Date headers
    contradict it (which stops the repair). Every fence is taken from a fresh response whatever the clock.
    """
    return time.monotonic() if _BOOTTIME is None else time.clock_gettime(_BOOTTIME)


def _server_time(response: Mapping[str, Any]) -> float:
    """DynamoDB's clock at the response (HTTP Date header), 0 when absent."""
    date = (response.get("ResponseMetadata") or {}).get("HTTPHeaders", {}).get("date")
    try:
        return parsedate_to_datetime(date).timestamp() if date else 0.0
    except (TypeError, ValueError):
        return 0.0


class Reconciler:
    def __init__(
        self,
        clients: Any,
        deployment: Deployment,
        *,
        segments: int = 4,
        stream_budget_seconds: float = 300.0,
        empty_pages_at_tip: int = 5,
        empty_page_pause: float = 0.5,
        clock_margin_seconds: float = CLOCK_MARGIN_SECONDS,
        band_seconds: float = BAND_SECONDS,
        band_settle_seconds: float = BAND_SETTLE_SECONDS,
        band_poll_seconds: float = BAND_POLL_SECONDS,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = interval_clock,
        sleep: Callable[[float], None] = time.sleep,
        on_progress: Callable[[int], None] = lambda scanned: None,
    ) -> None:
        self._dynamodb = clients.dynamodb
        self._streams = clients.dynamodbstreams
        self._deployment = deployment
        self._names = deployment.names
        self._table = deployment.table
        self._segments = segments
        self._stream_budget = stream_budget_seconds
        self._empty_pages_at_tip = empty_pages_at_tip
        self._empty_page_pause = empty_page_pause
        self._margin = clock_margin_seconds
        self._band_seconds = band_seconds
        self._band_settle = band_settle_seconds
        self._band_poll = band_poll_seconds
        self._clock = clock
        self._monotonic = monotonic
        self._server = _ServerClock()
        self._sqs = getattr(clients, "sqs", None)
        self._sleep = sleep
        self._on_progress = on_progress

    # ------------------------------------------------------------------ the run

    def run_month(self, month: str, entity_ids: Collection[str] | None = None, repair: bool = False) -> ReconcileReport:
        return self.run({month: entity_ids}, repair=repair).month(month)

    def boards_not_recounted(self) -> list[str]:
        """What the aggregator keeps beyond month boards: a recount of months leaves these as they are."""
        deployment = self._deployment
        boards = [f"{period} boards" for period in deployment.periods if period != "month"]
        if deployment.category_attribute:
            boards.append(f"category boards ({deployment.category_attribute})")
        return boards

    def run(
        self,
        targets: Mapping[str, Collection[str] | None] | None,
        repair: bool = False,
        replace_bands: Collection[AggregateId] = (),
    ) -> RunReport:
        """Recount `targets` (month -> songs, None: every song of the month; None: every month) at once.

        A target that is not a month board (a day, `all` or category board a refused record names) is
        refused, never recounted as a month: its downloads would be recounted as none. The aggregates of
        `replace_bands` (bands left open past their deadline) are repaired even when their count is right,
        so that a new band, closed by this run, replaces the old one.
        """
        self._check_supported()
        if repair:
            self._check_repairable()
        not_months = sorted(key for key in targets or {} if not MONTH_KEY.match(key))
        if targets is not None and not_months:
            targets = {key: songs for key, songs in targets.items() if key not in not_months}
            report = self._run(targets, repair, replace_bands) if targets else RunReport()
            for key in not_months:
                report.months.append(
                    ReconcileReport(key, refused=f"{key} is not a month board: this recount covers month boards only")
                )
        else:
            report = self._run(targets, repair, replace_bands)
        report.boards_not_recounted = self.boards_not_recounted()
        return report

    def _run(
        self,
        targets: Mapping[str, Collection[str] | None] | None,
        repair: bool,
        replace_bands: Collection[AggregateId] = (),
    ) -> RunReport:
        snapshots = self._snapshot(targets)
        recount = self._recount(targets)
        months = (
            set(targets)
            if targets is not None
            else {month for _, month in snapshots} | {month for _, month in recount.counts}
        )
        report = RunReport()
        differing: dict[str, list[Difference]] = {}
        for month in sorted(months):
            wanted = None if targets is None else targets[month]
            month_report = ReconcileReport(month)
            month_report.aggregates = sum(1 for _, period in snapshots if period == month)
            month_report.downloads = sum(count for (_, period), count in recount.counts.items() if period == month)
            report.months.append(month_report)
            if month in recount.expired:
                month_report.refused = recount.expired[month]
                continue
            songs = {entity for entity, period in set(snapshots) | set(recount.counts) if period == month}
            if wanted is not None:
                songs &= set(wanted)
            for entity in sorted(songs):
                stored = snapshots.get((entity, month), ABSENT).count
                recounted = recount.counts.get((entity, month), 0)
                if stored != recounted or (entity, month) in replace_bands:
                    month_report.differences.append(Difference(entity, stored, recounted))
            differing[month] = month_report.differences
        if not repair or not any(differing.values()):
            return report
        try:
            self._repair_all(report, differing, snapshots)
        except ClockDisagrees as error:
            opened = [
                f"{difference.entity_id} in {month}"
                for month, differences in differing.items()
                for difference in differences
                if difference.state in OPENED_STATES
            ]
            if opened:
                raise type(error)(error.reason, opened) from error
            if any(difference.state == "conflict" for differences in differing.values() for difference in differences):
                raise type(error)(
                    error.reason,
                    outcome=f"no aggregate was changed (the {self._band_queue_name} holds the record of a band never "
                    "opened, which recover deletes)",
                ) from error
            raise
        return report

    def _repair_all(
        self, report: RunReport, differing: dict[str, list[Difference]], snapshots: dict[AggregateId, Snapshot]
    ) -> None:
        """Settle every difference, opening and closing bands; a clock refusal stops it (bands closed at once)."""
        recount_end = math.ceil(self._dynamodb_latest())  # this machine's clock checked against DynamoDB's
        in_flight, report.stream = self._in_flight(set(differing), recount_end)
        bands: list[_Band] = []
        first_opened = 0.0
        try:
            for month, differences in differing.items():
                for difference in differences:
                    snapshot = snapshots.get((difference.entity_id, month), ABSENT)
                    band = self._settle(month, difference, snapshot, in_flight)
                    if band is None:
                        continue
                    first_opened = first_opened if bands else self._monotonic()
                    bands.append(band)
                    report.fence = max(report.fence or 0, band.fence)
                    too_long = self._monotonic() - first_opened > self._band_seconds / 2
                    if too_long or sum(len(open_band.seen) for open_band in bands) >= BAND_ID_BUDGET:
                        self._close_bands(bands)
                        bands = []
            self._close_bands(bands)
        except BaseException:
            self._close_at_once(bands)
            raise

    def _check_supported(self) -> None:
        deployment = self._deployment
        if deployment.sum_attribute:
            raise RecountUnsupported(
                f"the aggregator sums {deployment.sum_attribute} (SUM_ATTRIBUTE): this recount counts downloads "
                "and would replace every sum by a count; nothing was read or written"
            )
        if "month" not in deployment.periods:
            raise RecountUnsupported(
                f"the aggregator keeps {', '.join(deployment.periods)} boards, no month boards (LEADERBOARD_PERIODS): "
                "this recount covers month boards only"
            )

    def check_clock(self) -> None:
        """Read DynamoDB's clock, and refuse when this machine's is off it by more than the clock margin for sure."""
        self._dynamodb_latest()

    def dynamodb_time(self) -> float:
        """The earliest DynamoDB's clock can be now, from a fresh Date header: what a deadline has surely passed by."""
        self._observe()
        return self._monotonic() + self._server.low

    def _dynamodb_latest(self) -> float:
        """The latest DynamoDB's clock can be now, from a fresh response alone (its Date + 1 + the time since it was
        sent): what a fence must lie past. This machine's clock is checked against DynamoDB's on the way."""
        _, high = self._observe()
        monotonic, local = self._monotonic(), self._clock()
        ahead = local - (monotonic + self._server.high)
        behind = (monotonic + self._server.low) - local
        if ahead > self._margin or behind > self._margin:
            offset = local - (monotonic + (self._server.low + self._server.high) / 2)
            raise ClockDisagrees(
                f"this machine's clock is about {abs(offset):.0f} s {'ahead of' if offset > 0 else 'behind'} "
                f"DynamoDB's (its Date header), more than the clock margin of {self._margin:g} s "
                "(--clock-margin-seconds): set this machine's clock right (NTP) and run again"
            )
        return monotonic + high

    def _observe(self) -> tuple[float, float]:
        """One DescribeTable's Date header: narrows the bounds, which must still agree; that response's own bounds."""
        sent = self._monotonic()
        response = self._dynamodb.describe_table(TableName=self._table)
        received = self._monotonic()
        date = _server_time(response)
        if not date:
            raise DateMissing(
                "DynamoDB's response carried no Date header: the repair takes its time from DynamoDB's clock and "
                "cannot read it (a proxy dropping the header?)"
            )
        fresh = self._server.observe(date, sent, received)
        if self._server.contradicts:
            raise ClockDisagrees(
                "this machine's interval clock stopped or jumped between two of the repair's requests (the machine "
                "suspended, a VM paused?): DynamoDB's Date headers contradict it by "
                f"{self._server.low - self._server.high:.1f} s or more, so no time measured with it can be trusted; "
                "run again"
            )
        return fresh

    def _check_repairable(self) -> None:
        if not self._deployment.stream_arn:
            raise RepairUnavailable(f"{self._table} has no stream: nothing can show that no download is in flight")
        if not self._deployment.progress_table:
            raise RepairUnavailable(
                "the deployed aggregator keeps no progress table (PROGRESS_TABLE_NAME): this release cannot show "
                "which downloads are still in flight, so --repair would race the stream; deploy the current "
                "aggregator, or pass --progress-table"
            )
        if not self._deployment.recount_band_queue_url and not self._deployment.failure_queue_url:
            raise RepairUnavailable(
                "the deployment names no queue for the bands' records (RECOUNT_BAND_QUEUE_URL, or FAILURE_QUEUE_URL): "
                "a repair records each band before opening it, so that recover finds a band its repair never closed; "
                "pass --queue-url"
            )
        self._deployment.shards()

    @property
    def _band_queue_name(self) -> str:
        return "band queue" if self._deployment.recount_band_queue_url else "failure queue"

    def _record_band(self, month: str, entity_id: str, value: str, deadline: int) -> None:
        """The band's record, delayed toward its deadline (as far as SQS delays), in the band queue, where the
        aggregator meets it at the deadline and reports the band if it is still open; where a deployment has no
        band queue, in the failure queue itself."""
        body = {"kind": BAND_MESSAGE_KIND, "entityId": entity_id, "period": month, "band": value, "deadline": deadline}
        band_queue = self._deployment.recount_band_queue_url
        due = deadline + 1 + (BAND_RECORD_MARGIN_SECONDS if band_queue else 0)
        delay = min(MAX_DELAY_SECONDS, max(0, math.ceil(due - self.dynamodb_time())))
        queue = band_queue or self._deployment.failure_queue_url
        self._sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(body), DelaySeconds=delay)

    def _settle(
        self,
        month: str,
        difference: Difference,
        snapshot: Snapshot,
        in_flight: set[AggregateId] | None,
    ) -> _Band | None:
        """Pending, left for TTL, or repaired with its band open (returned, for the close)."""
        ttl = self._deployment.ttl_attribute
        if in_flight is None or (difference.entity_id, month) in in_flight:
            difference.state = "pending"
            difference.reason = (
                "a download of it is still in the stream, not yet counted: run again once the stream has caught up"
                if in_flight is not None
                else "the stream could not be read far enough to show nothing is in flight: run again"
            )
            return None
        if ttl is not None and difference.recounted < difference.stored:
            difference.state = "ttl"
            difference.reason = f"the table has TTL ({ttl}): a recount below the stored count is not repaired"
            return None
        recount = self._recount_songs([difference.entity_id], {month: [difference.entity_id]}, keep_ids=True)
        recounted = recount.counts.get((difference.entity_id, month), 0)
        if month in recount.expired or (ttl is not None and recounted < difference.stored):
            difference.state = "ttl"
            difference.reason = recount.expired.get(month) or (
                f"the table has TTL ({ttl}): a recount below the stored count is not repaired"
            )
            return None
        try:
            # A fresh Date header for each fence (a bound kept from an earlier response is as old as it), and this
            # machine's clock checked again before the band's opening write.
            fence = max(math.ceil(self._dynamodb_latest() + self._margin), snapshot.fence or 0)
            # Twice the wait: bands of one run open over up to half of it, and the run waits for the last one's fence.
            deadline = math.ceil(
                fence + 1 + 2 * self._band_seconds + self._margin + self._band_settle + self._band_poll
            )
            value = f"{uuid.uuid4().hex}|{deadline}"
            self._record_band(month, difference.entity_id, value, deadline)
        except DateMissing as error:
            difference.state = "unclocked"
            difference.reason = f"{error.reason}: its band was not opened, not repaired; run again"
            return None
        except (ClientError, BotoCoreError) as error:
            difference.state = "unrecorded"
            difference.reason = (
                f"its band could not be recorded in the {self._band_queue_name} ({error}): not repaired, run again"
            )
            return None
        if not self._repair(month, difference.entity_id, snapshot, recounted, fence, value):
            difference.state = "conflict"
            difference.reason = "the aggregator wrote it meanwhile: run again"
            return None
        difference.state = "repaired"
        difference.recounted = recounted
        return _Band(month, difference, value, fence, deadline, recount.ids or set())

    # ------------------------------------------------------------------ reading the table

    def _paginate(self, operation: str, **parameters: Any) -> Iterator[dict[str, Any]]:
        yield from self._dynamodb.get_paginator(operation).paginate(**parameters)

    def _snapshot(self, targets: Mapping[str, Collection[str] | None] | None) -> dict[AggregateId, Snapshot]:
        names = self._names
        snapshots: dict[AggregateId, Snapshot] = {}
        whole_months = (
            None if targets is None else sorted(month for month, songs in (targets or {}).items() if songs is None)
        )
        if targets is None or whole_months:
            for item in self._scan_aggregates(whole_months):
                if MONTH_KEY.match(item[names.sort_key]["S"]):
                    snapshots[(item[names.entity]["S"], item[names.sort_key]["S"])] = self._snapshot_of(item)
        for month, songs in (targets or {}).items():
            for entity_id in songs or ():
                item = self._dynamodb.get_item(
                    TableName=self._table,
                    Key={names.entity: {"S": entity_id}, names.sort_key: {"S": month}},
                    ConsistentRead=True,
                ).get("Item")
                if item and names.period in item:
                    snapshots[(entity_id, month)] = self._snapshot_of(item)
        return snapshots

    def _scan_aggregates(self, months: list[str] | None) -> Iterator[dict[str, Any]]:
        names = self._names
        parameters: dict[str, Any] = {
            "FilterExpression": "attribute_exists(#period)",
            "ExpressionAttributeNames": {"#period": names.period},
        }
        if months:
            values = {f":m{index}": {"S": month} for index, month in enumerate(months)}
            parameters["FilterExpression"] += f" AND #sk IN ({', '.join(values)})"
            parameters["ExpressionAttributeNames"]["#sk"] = names.sort_key
            parameters["ExpressionAttributeValues"] = values
        for items in self._parallel_scan(parameters):
            yield from items

    def _parallel_scan(self, parameters: dict[str, Any]) -> list[list[dict[str, Any]]]:
        """Aggregates only (few, one per song and month): each segment's items, read with consistent reads."""

        def segment(number: int) -> list[dict[str, Any]]:
            items: list[dict[str, Any]] = []
            for page in self._paginate(
                "scan",
                TableName=self._table,
                Segment=number,
                TotalSegments=self._segments,
                ConsistentRead=True,
                **parameters,
            ):
                items.extend(page.get("Items", []))
                self._on_progress(page.get("ScannedCount", 0))
            return items

        with ThreadPoolExecutor(max_workers=self._segments) as pool:
            return list(pool.map(segment, range(self._segments)))

    def _snapshot_of(self, item: dict[str, Any]) -> Snapshot:
        watermarks = tuple(
            sorted((name, value["S"]) for name, value in item.items() if name.startswith(WATERMARK_PREFIX))
        )
        count = int(item[self._names.count]["N"]) if self._names.count in item else 0
        fence = int(item[RECOUNTED_THROUGH]["N"]) if RECOUNTED_THROUGH in item else None
        band = (item.get(RECOUNT_BAND) or {}).get("S")
        held = len((item.get(RECOUNT_HELD) or {}).get("SS") or [])
        return Snapshot(count, watermarks, fence, exists=True, band=band, held=held)

    def _recount(self, targets: Mapping[str, Collection[str] | None] | None) -> _Recount:
        """Downloads per (song, month) of the targets; a scan when a whole month is wanted, else a Query per song."""
        whole = targets is None or any(songs is None for songs in targets.values())
        if whole:
            parts = self._recount_scan(targets)
        else:
            songs = sorted({song for entities in (targets or {}).values() for song in entities or ()})
            parts = [self._recount_songs(songs, targets)]
        merged = _Recount()
        for part in parts:
            merged.counts.update(part.counts)
            for month, reason in part.expired.items():
                merged.expired.setdefault(month, reason)
        return merged

    def _count_pages(
        self,
        pages: Iterator[dict[str, Any]],
        targets: Mapping[str, Collection[str] | None] | None,
        keep_ids: bool = False,
    ) -> _Recount:
        names, ttl, now = self._names, self._deployment.ttl_attribute, self._clock()
        part = _Recount(ids=set() if keep_ids else None)
        for page in pages:
            self._on_progress(page.get("ScannedCount", 0))
            for item in page.get("Items", []):
                entity = (item.get(names.entity) or {}).get("S")
                timestamp = (item.get(names.timestamp) or {}).get("S")
                if not entity or not timestamp or not countable_category(item, self._deployment):
                    continue
                try:
                    month = month_of(timestamp)
                except ValueError:
                    continue
                if targets is not None and (month not in targets or not _wanted(targets[month], entity)):
                    continue
                if ttl is not None and _expired(item.get(ttl), now):
                    part.expired.setdefault(
                        month,
                        f"a download of {entity} in {month} expired at {item[ttl]['N']} (TTL attribute {ttl}): "
                        "expired downloads may already be deleted, so a recount of this month would understate",
                    )
                part.counts[(entity, month)] += 1
                if part.ids is not None:
                    part.ids.add(download_id(item[names.sort_key]["S"]))
        return part

    def _download_parameters(self, keep_ids: bool = False) -> dict[str, Any]:
        names, ttl = self._names, self._deployment.ttl_attribute
        attribute_names = {"#entity": names.entity, "#timestamp": names.timestamp, "#period": names.period}
        projection = "#entity, #timestamp"
        if keep_ids:
            attribute_names["#sk"] = names.sort_key
            projection += ", #sk"
        if ttl:
            attribute_names["#ttl"] = ttl
            projection += ", #ttl"
        if self._deployment.category_attribute:
            attribute_names["#category"] = self._deployment.category_attribute
            projection += ", #category"
        return {
            "FilterExpression": "attribute_not_exists(#period)",
            "ProjectionExpression": projection,
            "ExpressionAttributeNames": attribute_names,
            "ConsistentRead": True,
        }

    def _recount_scan(self, targets: Mapping[str, Collection[str] | None] | None) -> list[_Recount]:
        """One counter per scan segment, merged by the caller: memory bounded by (song, month) pairs."""

        def segment(number: int) -> _Recount:
            pages = self._paginate(
                "scan",
                TableName=self._table,
                Segment=number,
                TotalSegments=self._segments,
                **self._download_parameters(),
            )
            return self._count_pages(pages, targets)

        with ThreadPoolExecutor(max_workers=self._segments) as pool:
            return list(pool.map(segment, range(self._segments)))

    def _recount_songs(
        self, songs: list[str], targets: Mapping[str, Collection[str] | None], keep_ids: bool = False
    ) -> _Recount:
        """The cheaper path for a few songs: their partitions, not the table."""
        parameters = self._download_parameters(keep_ids)
        merged = _Recount(ids=set() if keep_ids else None)
        for song in songs:
            pages = self._paginate(
                "query",
                TableName=self._table,
                KeyConditionExpression="#entity = :entity",
                ExpressionAttributeValues={":entity": {"S": song}},
                **parameters,
            )
            part = self._count_pages(pages, targets, keep_ids)
            merged.counts.update(part.counts)
            for month, reason in part.expired.items():
                merged.expired.setdefault(month, reason)
            if merged.ids is not None and part.ids is not None:
                merged.ids |= part.ids
        return merged

    # ------------------------------------------------------------------ the stream

    def _in_flight(
        self, months: set[str], recount_end: int, budget: float | None = None
    ) -> tuple[set[AggregateId] | None, StreamCheck]:
        """Aggregates of `months` with a download in the stream above its shard's checkpoint; None: unknown."""
        deployment, names = self._deployment, self._names
        assert deployment.stream_arn is not None
        assert deployment.progress_table is not None
        check = StreamCheck()
        found: set[AggregateId] = set()
        lock = threading.Lock()
        shards = stream_shards(self._streams, deployment.stream_arn)
        check.shards = len(shards)

        def on_record(record: dict[str, Any]) -> None:
            aggregate = download_aggregate(record, names)
            if aggregate and aggregate[1] in months:
                with lock:
                    found.add(aggregate)
                    check.in_flight += 1

        def read(shard: dict[str, Any]) -> ShardRead | None:
            progress = shard_progress(
                self._dynamodb, deployment.progress_table or "", deployment.stream_arn or "", shard["ShardId"]
            )
            if progress.ended:
                return None
            reader = ShardReader(
                self._streams,
                deployment.stream_arn or "",
                budget_seconds=self._stream_budget if budget is None else min(budget, self._stream_budget),
                empty_pages_at_tip=self._empty_pages_at_tip,
                empty_page_pause=self._empty_page_pause,
                sleep=self._sleep,
            )
            at, after = progress.start
            return reader.read(
                shard["ShardId"],
                on_record,
                at=at,
                after=after,
                past_bound=lambda record: (created_of(record) or 0) > recount_end,
                open_shard=is_open(shard),
                shard_start=starting_sequence(shard),
            )

        with ThreadPoolExecutor(max_workers=max(1, min(4, len(shards)))) as pool:
            outcomes = list(pool.map(read, shards))
        for outcome in outcomes:
            if outcome is None:
                check.skipped_ended += 1
                continue
            check.records += outcome.records
            if outcome.trimmed:
                check.trimmed.append(outcome.shard_id)
            if not outcome.complete:
                check.incomplete.append(outcome.shard_id)
        return (None if check.incomplete else found), check

    # ------------------------------------------------------------------ the repair

    def _repair(self, month: str, entity_id: str, snapshot: Snapshot, recounted: int, fence: int, band: str) -> bool:
        """One conditional UpdateItem: count, order, partition, fence and band, if the aggregate is still as read."""
        names = self._names
        attribute_names = {
            "#count": names.count,
            "#order": names.order,
            "#period": names.period,
            "#fence": RECOUNTED_THROUGH,
            "#band": RECOUNT_BAND,
            "#held": RECOUNT_HELD,
            "#pruned": WATERMARKS_PRUNED,
            "#pruned_under": WATERMARKS_PRUNED_UNDER,
            "#applied": APPLIED_SEQUENCE,
        }
        values: dict[str, Any] = {
            ":recounted": {"N": str(recounted)},
            ":order": {"N": str(order_of(recounted, entity_id))},
            ":partition": {"S": leaderboard_partition(month, entity_id, self._deployment.shards())},
            ":fence": {"N": str(max(fence, snapshot.fence or 0))},
            ":band": {"S": band},
        }
        if snapshot.exists:
            conditions = ["attribute_exists(#period)", "#count = :stored"]
            values[":stored"] = {"N": str(snapshot.count)}
        else:
            conditions = ["attribute_not_exists(#count)"]
        if snapshot.fence is None:
            conditions.append("attribute_not_exists(#fence)")
        else:
            conditions.append("#fence = :fence_read")
            values[":fence_read"] = {"N": str(snapshot.fence)}
        for index, (name, value) in enumerate(snapshot.watermarks):
            attribute_names[f"#w{index}"] = name
            values[f":w{index}"] = {"S": value}
            conditions.append(f"#w{index} = :w{index}")
        # A download another band held since the snapshot changes no count and may add no watermark seen here (a
        # shard new to the aggregate): the band and its held set are part of what must be as read.
        if snapshot.band is None:
            conditions.append("attribute_not_exists(#band)")
        else:
            conditions.append("#band = :band_read")
            values[":band_read"] = {"S": snapshot.band}
        if snapshot.held:
            conditions.append("size(#held) = :held_read")
            values[":held_read"] = {"N": str(snapshot.held)}
        else:
            conditions.append("attribute_not_exists(#held)")
        for _ in range(CLOSE_ROUNDS):
            try:
                return self._repair_write(month, entity_id, conditions, attribute_names, values, band)
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") not in RETRIED_CONFLICTS:
                    raise
                self._sleep(self._band_poll)
        return False

    def _repair_write(
        self,
        month: str,
        entity_id: str,
        conditions: list[str],
        attribute_names: dict[str, str],
        values: dict[str, Any],
        band: str,
    ) -> bool:
        """The repair's UpdateItem; a failed condition that finds this repair's own band means its response was lost."""
        names = self._names
        try:
            self._dynamodb.update_item(
                TableName=self._table,
                Key={names.entity: {"S": entity_id}, names.sort_key: {"S": month}},
                # The fence now guards every shard without a watermark: what a pruning or release 0.1.0 left
                # (a progress table that can no longer vouch for it) stops refusing new records.
                # A band or held set another repair left is superseded: this recount counts what it held.
                UpdateExpression=(
                    "SET #count = :recounted, #order = :order, #period = :partition, #fence = :fence, #band = :band"
                    " REMOVE #pruned, #pruned_under, #applied, #held"
                ),
                ConditionExpression=" AND ".join(conditions),
                ExpressionAttributeNames=attribute_names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            # botocore retries a request whose response was lost: the band, unique to this repair, says it landed.
            item = self._dynamodb.get_item(
                TableName=self._table,
                Key={names.entity: {"S": entity_id}, names.sort_key: {"S": month}},
                ConsistentRead=True,
            ).get("Item")
            return ((item or {}).get(RECOUNT_BAND) or {}).get("S") == band
        return True

    def _close_bands(self, bands: list[_Band]) -> None:
        """Wait until F has passed and no record created by then is left for the aggregator, then close each band."""
        if not bands:
            return
        keys = {(band.difference.entity_id, band.month) for band in bands}
        months = {band.month for band in bands}
        fence = max(band.fence for band in bands)
        give_up = fence + 1 + self._band_settle + self._band_seconds
        caught_up = False
        while not caught_up:
            now = self.dynamodb_time()
            if now >= give_up:
                break
            # Creation times are whole seconds, rounded down: a record of the fence's own second is at the fence.
            if now < fence + 1 + self._band_settle:
                self._sleep(min(self._band_poll, fence + 1 + self._band_settle - now))
                continue
            in_flight, _ = self._in_flight(months, fence, budget=max(1.0, give_up - now))
            caught_up = in_flight is not None and not (in_flight & keys)
            if not caught_up:
                self._sleep(self._band_poll)
        for band in bands:
            self._close(band, caught_up)

    def _close_at_once(self, bands: list[_Band]) -> None:
        """A run stopped by an error (or an interrupt) closes its open bands without waiting, as far as it can: what
        they held is settled now, and a record arriving later is refused and reported rather than held for nobody."""
        for band in bands:
            if band.closed:
                continue
            try:
                self._close(band, caught_up=False)
            except Exception as error:  # the original error is what the operator must see: this one is noted
                band.difference.reason = f"its band could not be closed ({error}): it expires and is reported"

    def _close(self, band: _Band, caught_up: bool) -> None:
        """Add what the band held that the recount did not see, and remove the band, as one conditional write."""
        names, difference = self._names, band.difference
        key = {names.entity: {"S": difference.entity_id}, names.sort_key: {"S": band.month}}
        for _ in range(CLOSE_ROUNDS):
            item = self._dynamodb.get_item(TableName=self._table, Key=key, ConsistentRead=True).get("Item") or {}
            closed = (item.get(CLOSED_ATTRIBUTE) or {}).get("S") or ""
            if closed.rpartition("|")[0] == band.value:
                # This close's own write, whose response was lost and whose retry found the band gone.
                self._closed(band, int(closed.rpartition("|")[2]), caught_up)
                return
            if (item.get(RECOUNT_BAND) or {}).get("S") != band.value:
                if band.close_sent:
                    # The close's write may have landed (its response lost) and another repair closed its own band
                    # since, overwriting RecountClosed; or another repair replaced the band first.
                    difference.state = "unknown"
                    difference.reason = (
                        "its band was closed or replaced by another repair's, not known which (its close's response "
                        "was lost, and RecountClosed now names another band): recount to be sure"
                    )
                    return
                difference.reason = "another repair replaced its band: that repair's report counts what it held"
                return
            held = set((item.get(RECOUNT_HELD) or {}).get("SS") or [])
            missed = len(held - band.seen)
            attribute_names = {
                "#count": names.count,
                "#order": names.order,
                "#band": RECOUNT_BAND,
                "#held": RECOUNT_HELD,
                "#closed": CLOSED_ATTRIBUTE,
            }
            values: dict[str, Any] = {
                ":band": {"S": band.value},
                ":closed": {"S": f"{band.value}|{missed}"},
                ":missed": {"N": str(missed)},
                ":scaled": {"N": str(missed * ORDER_SCALE)},
            }
            if held:
                values[":size"] = {"N": str(len(held))}
                unchanged = "size(#held) = :size"
            else:
                unchanged = "attribute_not_exists(#held)"
            band.close_sent = True
            try:
                self._dynamodb.update_item(
                    TableName=self._table,
                    Key=key,
                    # The held set only grows while the band is open: the same size is the same set.
                    UpdateExpression=(
                        "ADD #count :missed SET #order = #order + :scaled, #closed = :closed REMOVE #band, #held"
                    ),
                    ConditionExpression=f"#band = :band AND {unchanged}",
                    ExpressionAttributeNames=attribute_names,
                    ExpressionAttributeValues=values,
                )
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code")
                if code == "ConditionalCheckFailedException":
                    continue
                if code in RETRIED_CONFLICTS:
                    self._sleep(self._band_poll)
                    continue
                raise
            self._closed(band, missed, caught_up)
            return
        difference.reason = f"its band kept changing for {CLOSE_ROUNDS} reads: left open, it expires and is reported"

    def _closed(self, band: _Band, missed: int, caught_up: bool) -> None:
        band.difference.added_at_close = missed
        band.closed = True
        if not caught_up:
            band.difference.reason = (
                "its band closed before the stream showed every record created by its fence delivered: such a "
                "record is refused and reported (recover repairs it)"
            )


def _wanted(songs: Collection[str] | None, entity: str) -> bool:
    return songs is None or entity in songs


def _expired(value: Any, now: float) -> bool:
    """TTL compares an epoch time in seconds with the current time: any other value never expires the item."""
    if not isinstance(value, dict) or not isinstance(value.get("N"), str):
        return False
    try:
        return float(value["N"]) <= now
    except ValueError:
        return False


def countable_category(item: Mapping[str, Any], deployment: Deployment) -> bool:
    """As the aggregator parses a download: a category it carries must be a non-empty string whose board ids
    (`<bucket>@<percent-encoded category>`) fit DynamoDB's sort key; else the download is rejected, never counted."""
    name = deployment.category_attribute
    if name is None or name not in item:
        return True
    value = item[name].get("S") if isinstance(item[name], dict) else None
    if not isinstance(value, str) or value == "":
        return False
    longest = max(BUCKET_KEY_LENGTH.get(period, max(BUCKET_KEY_LENGTH.values())) for period in deployment.periods)
    return longest + len(CATEGORY_SEPARATOR) + len(quote(value, safe="").encode()) <= MAX_SORT_KEY_BYTES


def download_aggregate(record: Any, names: Any) -> AggregateId | None:
    """The (song, month) a stream record counts in, as the aggregator parses it; None for anything else."""
    if not isinstance(record, dict) or record.get("eventName") != "INSERT":
        return None
    image = (record.get("dynamodb") or {}).get("NewImage") or {}
    if names.period in image:
        return None
    entity = (image.get(names.entity) or {}).get("S")
    timestamp = (image.get(names.timestamp) or {}).get("S")
    if not entity or not timestamp:
        return None
    try:
        return entity, month_of(timestamp)
    except ValueError:
        return None
