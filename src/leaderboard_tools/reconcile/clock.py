"""DynamoDB's clock, read from its Date headers, and this machine's checked against it: what fences are taken from."""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

CLOCK_MARGIN_SECONDS = 60
"""How far DynamoDB's clock (its Date header, which the repair takes its time from) may be from the stream's creation
times; this machine's clock must agree with DynamoDB's within it, or the repair refuses."""


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


@dataclass
class ServerClock:
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


def server_time(response: Mapping[str, Any]) -> float:
    """DynamoDB's clock at the response (HTTP Date header), 0 when absent."""
    date = (response.get("ResponseMetadata") or {}).get("HTTPHeaders", {}).get("date")
    try:
        return parsedate_to_datetime(date).timestamp() if date else 0.0
    except (TypeError, ValueError):
        return 0.0


class DynamoClock:
    """The Reconciler's reading of DynamoDB's clock."""

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
        date = server_time(response)
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
