"""One run of the backfill: begun (or found done), its segments scanned in parallel, its end recorded once all are
done, and a failure told apart: unfinished (run again) or stopped."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from leaderboard_tools.backfill.refusals import claims_table_of
from leaderboard_tools.backfill.report import (
    ALREADY_DONE,
    DONE,
    INTERRUPTED,
    STOPPED,
    UNFINISHED,
    BackfillReport,
    _number,
    tally_of_item,
)
from leaderboard_tools.backfill.runs import RunLease, fence_check
from leaderboard_tools.backfill.scan import MAX_READ_UNITS, PAGE_SIZE, SEGMENTS, ReadPacer, SegmentScan
from leaderboard_tools.backfill.segments import ENDED_AT, SEGMENTS_ATTRIBUTE, DynamoTime, SegmentPlaces
from leaderboard_tools.backfill.transactions import BackfillStopped, BackfillUnfinished, PageTransactions
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.interruption import WorkerStopped
from leaderboard_tools.reconcile.clock import interval_clock
from leaderboard_tools.reconcile.phases import (
    BEGINNING_BACKFILL,
    ENDING_BACKFILL,
    SCANNING_HISTORY,
    item_count,
    phase_reporter,
)

UNFINISHED_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TransactionInProgressException",
        "InternalServerError",
        "ServiceUnavailable",
    }
)
"""Errors botocore retried until it gave up: the run stops unfinished, and a later run goes on."""


class Backfill(SegmentPlaces, SegmentScan, PageTransactions):
    """One run of the backfill over `deployment`'s table; the clients, the clock and the pauses are injected."""

    def __init__(
        self,
        dynamodb: Any,
        deployment: Deployment,
        *,
        segments: int = SEGMENTS,
        max_read_units: float = MAX_READ_UNITS,
        page_size: int = PAGE_SIZE,
        clock: Callable[[], float] = interval_clock,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
        on_phase: Callable[[int], None] = lambda scanned: None,
        dynamo_time: Callable[[], float] | None = None,
    ) -> None:
        if segments < 1 or page_size < 1:
            raise ValueError("segments and page size must be at least 1")
        self._dynamodb = dynamodb
        self._deployment = deployment
        self._segments = segments
        self._page_size = page_size
        self._sleep = sleep
        self._jitter = jitter
        self._on_phase = on_phase
        self._phase = phase_reporter(on_phase)
        self._pacer = ReadPacer(max_read_units, clock, sleep)
        self._dynamo_time = dynamo_time or DynamoTime(dynamodb, deployment.table).latest
        self._claims = ""
        self._fences: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._report = BackfillReport(
            deployment.table, segments, aggregator_function=deployment.aggregator_function, ledger=deployment.ledger
        )

    def run(self) -> BackfillReport:
        """Scan every unfinished segment, or say the backfill is done. Refusals raise before anything is written;
        a run stopped by an error reports what it did, with the error. A run that may count is registered before it
        reads the done item a last time, and ended last (runs.py); a killed process ends nothing, and
        `--release-check` ends it once its lease has run out."""
        self._claims = claims_table_of(self._deployment)
        self._phase(BEGINNING_BACKFILL)
        lease = RunLease(self._dynamodb, self._claims, self._segments, self._dynamo_time)
        try:
            report = self._run(lease)
        except (Exception, KeyboardInterrupt):
            # The run's own error is the one to report; a run left unended is ended once its lease runs out.
            with contextlib.suppress(Exception):
                lease.end()
            raise
        except BaseException:
            lease.silence()
            raise
        lease.end()
        return report

    def _run(self, lease: RunLease) -> BackfillReport:
        report = self._report

        def register() -> None:
            lease.register()
            self._fences = [fence_check(self._claims, lease.run_id, index) for index in range(self._segments)]

        done = self._begin(register)
        if done is not None:
            report.status, report.segments = ALREADY_DONE, int(_number(done, SEGMENTS_ATTRIBUTE))
            report.segments_done = report.segments
            report.ended_at, report.total = _number(done, ENDED_AT), tally_of_item(done)
            return report
        failure: BaseException | None = None
        # ItemCount counts the whole table; a resumed run scans only what its unfinished segments have left.
        self._phase(SCANNING_HISTORY, item_count(self._dynamodb, self._deployment.table), approximate=True)
        with ThreadPoolExecutor(max_workers=self._segments, thread_name_prefix="backfill-segment") as pool:
            futures = [pool.submit(self._segment, index) for index in range(self._segments)]
            try:
                while True:
                    finished, pending = wait(futures, timeout=0.5, return_when=FIRST_EXCEPTION)
                    failure = next((f.exception() for f in finished if f.exception() is not None), None)
                    if failure is not None or not pending:
                        break
            except KeyboardInterrupt:
                report.status = INTERRUPTED
            self._stop.set()
            wait(futures)
        failure = failure or next((f.exception() for f in futures if f.exception() is not None), None)
        if report.status == INTERRUPTED and isinstance(failure, WorkerStopped):
            failure = None  # Ctrl-C stopped the segments at their next request (interruption.py): resumed, as a kill
        report.segments_done = sum(self._segment_state(index)[0] for index in range(self._segments))
        if failure is not None:
            self._classify(failure)
        elif report.status != INTERRUPTED and report.segments_done == self._segments:
            self._phase(ENDING_BACKFILL)
            self._finish()
            report.status = DONE
        return report

    def _classify(self, failure: BaseException) -> None:
        report = self._report
        if not isinstance(failure, Exception):
            raise failure  # the process is going down (a test's kill): nothing more is written
        report.error = str(failure)
        code = failure.response.get("Error", {}).get("Code") if isinstance(failure, ClientError) else None
        if isinstance(failure, BackfillUnfinished | BotoCoreError) or code in UNFINISHED_CODES:
            report.status = UNFINISHED
        elif isinstance(failure, BackfillStopped | ClientError):
            report.status = STOPPED
        else:
            raise failure
