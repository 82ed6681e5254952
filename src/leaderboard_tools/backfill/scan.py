"""The paced scan of a segment (Backfill.run scans them in parallel): each pages by hand, so that its place is saved
after every page it counted and every request waits its turn on the read units the scan may consume."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from leaderboard_tools.backfill.report import Tally
from leaderboard_tools.backfill.transactions import BackfillStopped
from leaderboard_tools.reconcile.clock import interval_clock, server_time
from leaderboard_tools.reconcile.recount import download_scan_parameters

PAGE_SIZE = 100
SEGMENTS = 4
MAX_READ_UNITS = 100.0


class ReadPacer:
    """A token bucket on read units, shared by the segments: `rate` units a second, one second's worth at most in
    the bucket, empty at the start.

    A Scan's cost is known only from its answer (ConsumedCapacity), so each request first takes what the last page
    cost (`acquire`) and then settles the difference (`settle`): the bucket may go into debt, which the next requests
    wait off. Over any interval of T seconds the scan consumes at most rate x (T + 1) units, plus what the pages in
    flight cost beyond their estimates.
    """

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = interval_clock,
        sleep: Callable[[float], None] = time.sleep,
        first_estimate: float = 1.0,
    ) -> None:
        if rate <= 0:
            raise ValueError("the read rate must be positive")
        self._rate = rate
        self._capacity = rate
        self._clock = clock
        self._sleep = sleep
        self._tokens = 0.0
        self._updated = clock()
        self._estimate = first_estimate
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self._capacity, self._tokens + (now - self._updated) * self._rate)
        self._updated = now

    def acquire(self) -> float:
        """Wait until the next page's estimated cost may be spent; returns the estimate to settle with. The lock is
        held while waiting: segments are served one after another."""
        with self._lock:
            estimate = self._estimate
            needed = min(estimate, self._capacity)
            self._refill()
            while needed - self._tokens > 1e-9:  # a float short of it, not worth a pause (nor able to end one)
                self._sleep(max((needed - self._tokens) / self._rate, 0.001))
                self._refill()
            self._tokens -= estimate
            return estimate

    def settle(self, estimate: float, consumed: float) -> None:
        with self._lock:
            self._tokens += estimate - consumed
            self._estimate = max(consumed, 0.5)


def consumed_units(page: Mapping[str, Any]) -> float:
    capacity = page.get("ConsumedCapacity") or {}
    if isinstance(capacity, list):
        return sum(float(entry.get("CapacityUnits") or 0) for entry in capacity)
    return float(capacity.get("CapacityUnits") or 0)


class SegmentScan:
    """The Backfill's scan of one segment, from its saved place to its end or the run's stop."""

    def _read_at(self, page: Mapping[str, Any]) -> int | None:
        """In ledger mode, when the page's items were read: DynamoDB's clock at its answer (the Date header, whole
        seconds), which each ledger item keeps (`ReadAt`): a keep of the version it writes is bounded by it."""
        if not self._deployment.ledger:
            return None
        date = server_time(page)
        if not date:
            raise BackfillStopped(
                "DynamoDB's Scan answer carried no Date header (a proxy dropping it?): in ledger mode each ledger "
                "item records when its item was read; what was counted before stays counted, run the backfill again"
            )
        return math.floor(date)

    def _segment(self, index: int) -> None:
        done, last_key = self._segment_state(index)
        parameters = {
            "TableName": self._deployment.table,
            "Segment": index,
            "TotalSegments": self._segments,
            "Limit": self._page_size,
            "ReturnConsumedCapacity": "TOTAL",
            **download_scan_parameters(self._deployment, with_key=True),
        }
        while not done and not self._stop.is_set():
            estimate = self._pacer.acquire()
            page = self._dynamodb.scan(**parameters, **({"ExclusiveStartKey": last_key} if last_key else {}))
            tally = Tally(
                items_scanned=int(page.get("ScannedCount", 0)),
                downloads_read=int(page.get("Count", 0)),
                read_units=consumed_units(page),
            )
            self._pacer.settle(estimate, tally.read_units)
            self._page(page.get("Items", []), tally, index, self._read_at(page))
            last_key = page.get("LastEvaluatedKey") or None
            self._save(index, last_key, tally)
            done = last_key is None
            with self._lock:
                self._report.run.add(tally)
            self._on_phase(tally.items_scanned)
