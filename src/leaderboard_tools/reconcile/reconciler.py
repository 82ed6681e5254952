"""The reconcile flow: snapshot, recount, in-flight check, then each difference settled (see the package)."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from leaderboard_core.index_layout import FIRST_REACHED, latest_counted_text
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.interruption import Interrupted
from leaderboard_tools.reconcile.band import (
    BAND_ID_BUDGET,
    BAND_POLL_SECONDS,
    BAND_SECONDS,
    BAND_SETTLE_SECONDS,
    OpenBand,
    RepairBand,
)
from leaderboard_tools.reconcile.clock import (
    CLOCK_MARGIN_SECONDS,
    ClockDisagrees,
    DateMissing,
    DynamoClock,
    ServerClock,
    interval_clock,
)
from leaderboard_tools.reconcile.in_flight import InFlightCheck
from leaderboard_tools.reconcile.phases import REPAIRING, phase_reporter
from leaderboard_tools.reconcile.recount import TableRecount, board_refusal
from leaderboard_tools.reconcile.refusals import (
    check_repairable,
    check_supported,
)
from leaderboard_tools.reconcile.report import (
    ABSENT,
    OPENED_STATES,
    AggregateId,
    Difference,
    ReconcileReport,
    RunReport,
    Snapshot,
)


class Reconciler(DynamoClock, TableRecount, InFlightCheck, RepairBand):
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
        on_phase: Callable[[int], None] = lambda scanned: None,
    ) -> None:
        """`on_phase(count)` advances the current phase; its `phase(name, total)`, where it has one, is told each
        phase as it starts (reconcile/phases.py)."""
        self._dynamodb = clients.dynamodb
        self._streams = clients.dynamodbstreams
        self._deployment = deployment
        self._names = deployment.names
        self._table = deployment.table
        self._aggregates_table = deployment.aggregates
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
        self._server = ServerClock()
        self._sqs = getattr(clients, "sqs", None)
        self._sleep = sleep
        self._on_phase = on_phase
        self._phase = phase_reporter(on_phase)
        self._stream_phase: str | None = None
        self._repair_point: RepairPoint | None = None
        self._closing: OpenBand | None = None
        """The band `_close_at_once` was closing last: a second Ctrl-C may have come after its write landed."""
        """Where the repair of one aggregate stands, while it is between its band's record and its write's answer."""
        """Set while the stream is read as a phase of its own (`_in_flight_reported`), not for a band's close."""

    def report_phase(
        self,
        name: str,
        total: int | None = None,
        *,
        approximate: bool = False,
        unit: str = "items",
        bound: bool = False,
    ) -> None:
        """A phase of the caller's own (recover's: reading its queues), told as the Reconciler tells its own."""
        self._phase(name, total, approximate=approximate, unit=unit, bound=bound)

    # ------------------------------------------------------------------ the run

    def run_month(
        self, board: str, entity_ids: Collection[str] | None = None, repair: bool = False, dry_run: bool = False
    ) -> ReconcileReport:
        """One board's recount, as `reconcile --month` names it (any board the deployment keeps)."""
        return self.run({board: entity_ids}, repair=repair, dry_run=dry_run).board(board)

    def run(
        self,
        targets: Mapping[str, Collection[str] | None] | None,
        repair: bool = False,
        replace_bands: Collection[AggregateId] = (),
        dry_run: bool = False,
    ) -> RunReport:
        """Recount `targets` (board -> songs, None: every song of the board; None: every board) at once.

        A target that is not a board the deployment keeps (a period it does not keep, a category board
        without a category attribute) is refused, never recounted: its downloads would be recounted as
        none. The aggregates of `replace_bands` (bands left open past their deadline) are repaired even
        when their count is right, so that a new band, closed by this run, replaces the old one.

        `dry_run` (with `repair`): the repair's checks, recount and in-flight check, and what it would repair
        (`would_repair`), with nothing written: no band recorded, no aggregate changed.
        """
        check_supported(self._deployment, self._table)
        if repair:
            check_repairable(self._deployment, self._table, self._dynamodb)
        refused = {
            board: reason for board in sorted(targets or {}) if (reason := board_refusal(board, self._deployment))
        }
        if targets is None or not refused:
            return self._run(targets, repair, replace_bands, dry_run)
        kept = {board: songs for board, songs in targets.items() if board not in refused}
        report = self._run(kept, repair, replace_bands, dry_run) if kept else RunReport()
        report.boards += [ReconcileReport(board, refused=reason) for board, reason in refused.items()]
        return report

    def _run(
        self,
        targets: Mapping[str, Collection[str] | None] | None,
        repair: bool,
        replace_bands: Collection[AggregateId] = (),
        dry_run: bool = False,
    ) -> RunReport:
        snapshots = self._snapshot(targets)
        recount = self._recount(targets)
        boards = (
            set(targets)
            if targets is not None
            else {board for _, board in snapshots} | {board for _, board in recount.counts}
        )
        report = RunReport()
        differing: dict[str, list[Difference]] = {}
        for board in sorted(boards):
            wanted = None if targets is None else targets[board]
            board_report = ReconcileReport(board)
            board_report.aggregates = sum(1 for _, period in snapshots if period == board)
            board_report.downloads = sum(count for (_, period), count in recount.counts.items() if period == board)
            report.boards.append(board_report)
            if board in recount.expired:
                board_report.refused = recount.expired[board]
                continue
            songs = {entity for entity, period in set(snapshots) | set(recount.counts) if period == board}
            if wanted is not None:
                songs &= set(wanted)
            for entity in sorted(songs):
                snapshot = snapshots.get((entity, board), ABSENT)
                stored, recounted = snapshot.count, recount.counts.get((entity, board), 0)
                if stored != recounted or (entity, board) in replace_bands:
                    board_report.differences.append(Difference(entity, stored, recounted))
                elif (
                    self._deployment.tie_break == FIRST_REACHED
                    and recounted
                    and (snapshot.latest != recount.latest.get((entity, board)))
                ):
                    reason = (
                        f"its latest counted download is {latest_counted_text(snapshot.latest)}, the recount's "
                        f"{latest_counted_text(recount.latest.get((entity, board)))} (the tie-break first_reached)"
                    )
                    board_report.differences.append(Difference(entity, stored, recounted, reason=reason))
                elif self._deployment.tie_break != FIRST_REACHED and snapshot.latest is not None:
                    reason = "its order is the tie-break first_reached's; the deployed tie-break is entity"
                    board_report.differences.append(Difference(entity, stored, recounted, reason=reason))
            differing[board] = board_report.differences
        if not repair or not any(differing.values()):
            return report
        if dry_run:
            self._dry_run_all(report, differing)
            return report
        try:
            self._repair_all(report, differing, snapshots)
        except ClockDisagrees as error:
            opened = [
                f"{difference.entity_id} in {board}"
                for board, differences in differing.items()
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
        in_flight, report.stream = self._in_flight_reported(set(differing), recount_end)
        bands: list[OpenBand] = []
        opened: list[OpenBand] = []
        first_opened = 0.0
        self._repair_point = None
        self._closing = None
        left = sum(len(differences) for differences in differing.values())
        self._phase(REPAIRING, left, unit="aggregates")
        try:
            for board, differences in differing.items():
                for difference in differences:
                    snapshot = snapshots.get((difference.entity_id, board), ABSENT)
                    band = self._settle(board, difference, snapshot, in_flight)
                    self._repair_point = None
                    left -= 1
                    self._on_phase(1)
                    if band is None:
                        continue
                    first_opened = first_opened if bands else self._monotonic()
                    bands.append(band)
                    opened.append(band)
                    report.fence = max(report.fence or 0, band.fence)
                    too_long = self._monotonic() - first_opened > self._band_seconds / 2
                    if too_long or sum(len(open_band.seen) for open_band in bands) >= BAND_ID_BUDGET:
                        self._close_bands(bands)
                        bands = []
                        if left:
                            self._phase(REPAIRING, left, unit="aggregates")
            self._close_bands(bands)
        except BaseException as error:
            again = False
            try:
                # Every band of the run, those an earlier close round could not close too.
                self._close_at_once(opened)
            except KeyboardInterrupt:  # a second Ctrl-C: the bands not closed yet stay open until their deadlines
                again = True
            if (isinstance(error, KeyboardInterrupt) and not isinstance(error, Interrupted)) or again:
                raise Interrupted(self._interrupted_outcome(differing, opened, self._repair_point, again)) from error
            raise

    def _interrupted_outcome(
        self,
        differing: dict[str, list[Difference]],
        bands: list[OpenBand],
        point: RepairPoint | None,
        again: bool,
    ) -> str:
        """What an interrupted repair leaves, truthfully: what it repaired, bands it could not close, the write the
        interrupt may have cut, and what to run."""
        repaired = [
            f"{difference.entity_id} in {board}"
            for board, differences in differing.items()
            for difference in differences
            if difference.state in OPENED_STATES
        ]
        left_open = [
            band
            for band in bands
            if not band.closed
            and band.difference.state == "repaired"
            and not (band.difference.reason or "").startswith("another repair")
        ]
        parts = []
        if repaired:
            still_open = {f"{band.difference.entity_id} in {band.board}" for band in left_open}
            closed = [name for name in repaired if name not in still_open]
            parts.append(f"the repair had repaired {_listed(repaired)}")
            if closed:
                parts.append(
                    f"the bands of {_listed(closed)} are closed (a download record they would have held that "
                    "reaches the aggregator later is refused and reported in the failure queue, for "
                    "`leaderboard-tools recover`)"
                )
        else:
            parts.append("the repair had changed no aggregate")
        # A second Ctrl-C may have come after the write of the close it cut landed: that band may be closed.
        uncertain = [band for band in left_open if again and band is self._closing]
        certain = [band for band in left_open if band not in uncertain]
        for group, stay in (
            (certain, "stay open (a second Ctrl-C stopped their close)" if again else "stay open (their close failed)"),
            (uncertain, "may stay open (a second Ctrl-C came while its close was being written)"),
        ):
            if group:
                parts.append(
                    f"the bands of {_listed([f'{b.difference.entity_id} in {b.board}' for b in group])} {stay} "
                    f"until their deadline, {_utc(max(band.deadline for band in group))}: then the aggregator reports "
                    "them to the failure queue and `leaderboard-tools recover` repairs them"
                )
        never_opened = [
            f"{difference.entity_id} in {board}"
            for board, differences in differing.items()
            for difference in differences
            if difference.state == "conflict"
        ]
        if point is not None and point.stage == "recorded":
            never_opened.append(f"{point.entity_id} in {point.board}")
        if point is not None and point.stage == "recording":
            never_opened.append(f"{point.entity_id} in {point.board} (if the interrupt came after its send)")
        if never_opened:
            settled = (
                "the aggregator discards it at its deadline"
                if self._deployment.recount_band_queue_url
                else "it becomes visible at its deadline, and `leaderboard-tools recover` deletes it"
            )
            parts.append(
                f"the {self._band_queue_name} holds the record of a band never opened for {_listed(never_opened)}: "
                f"{settled}"
            )
        if point is not None and point.stage == "writing":
            parts.append(
                f"the interrupt came while the repair of {point.entity_id} in {point.board} was being written: if that "
                f"write landed, its band stays open until its deadline, {_utc(point.deadline)}, then the aggregator "
                "reports it to the failure queue and `leaderboard-tools recover` repairs it"
            )
        parts.append("no other aggregate was changed: run the same command again to repair the rest")
        return "; ".join(parts)

    def _dry_run_all(self, report: RunReport, differing: dict[str, list[Difference]]) -> None:
        """--dry-run: the repair's in-flight check, then what it would do with each difference; nothing written."""
        recount_end = math.ceil(self._dynamodb_latest())  # this machine's clock checked against DynamoDB's
        in_flight, report.stream = self._in_flight_reported(set(differing), recount_end)
        for board, differences in differing.items():
            for difference in differences:
                if self._left_alone(board, difference, in_flight):
                    continue
                difference.state = "would_repair"
                difference.reason = (
                    f"--dry-run: the repair would set it to its recount ({difference.recounted} now) and close its "
                    "band; nothing was written"
                )

    def _left_alone(self, board: str, difference: Difference, in_flight: set[AggregateId] | None) -> bool:
        """Pending (a download in flight, or the stream not read far enough) or left for TTL: said, not repaired."""
        ttl = self._deployment.ttl_attribute
        if in_flight is None or (difference.entity_id, board) in in_flight:
            difference.state = "pending"
            difference.reason = (
                "a download of it is still in the stream, not yet counted: run again once the stream has caught up"
                if in_flight is not None
                else "the stream could not be read far enough to show nothing is in flight: run again"
            )
            return True
        if ttl is not None and difference.recounted < difference.stored:
            difference.state = "ttl"
            difference.reason = f"the table has TTL ({ttl}): a recount below the stored count is not repaired"
            return True
        return False

    def _settle(
        self,
        board: str,
        difference: Difference,
        snapshot: Snapshot,
        in_flight: set[AggregateId] | None,
    ) -> OpenBand | None:
        """Pending, left for TTL, or repaired with its band open (returned, for the close)."""
        ttl = self._deployment.ttl_attribute
        if self._left_alone(board, difference, in_flight):
            return None
        recount = self._recount_songs(
            [difference.entity_id], {board: [difference.entity_id]}, keep_ids=True, counted=False
        )
        recounted = recount.counts.get((difference.entity_id, board), 0)
        if board in recount.expired or (ttl is not None and recounted < difference.stored):
            difference.state = "ttl"
            difference.reason = recount.expired.get(board) or (
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
            self._repair_point = RepairPoint("recording", difference.entity_id, board, deadline)
            self._record_band(board, difference.entity_id, value, deadline)
            self._repair_point = RepairPoint("recorded", difference.entity_id, board, deadline)
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
        self._repair_point = RepairPoint("writing", difference.entity_id, board, deadline)
        latest = recount.latest.get((difference.entity_id, board))
        if not self._repair(board, difference.entity_id, snapshot, recounted, fence, value, latest):
            difference.state = "conflict"
            difference.reason = "the aggregator wrote it meanwhile: run again"
            return None
        difference.state = "repaired"
        difference.recounted = recounted
        return OpenBand(board, difference, value, fence, deadline, recount.ids or set())


@dataclass(frozen=True)
class RepairPoint:
    """One aggregate's repair between its band's record and its write's answer: `recording` (the record being sent),
    `recorded` (the record sent, nothing written), `writing` (its conditional write sent; whether it landed is not
    known)."""

    stage: str
    entity_id: str
    board: str
    deadline: int


def _listed(names: list[str], shown: int = 10) -> str:
    """Names for one line: the first `shown`, then how many more."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _utc(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
