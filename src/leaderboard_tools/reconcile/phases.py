"""How a long run says what it is doing: the phases of a recount, a repair and a backfill, and how they are reported.

A run is given `on_phase`, a callable taking a count (items scanned, aggregates read, seconds waited...) that
advances the current phase. `on_phase` may also have a method `phase(name, total=None, *, approximate=False,
unit="items", bound=False)` that starts the next phase (`bound`: the total is the most it can take, such as a wait
that ends as soon as the stream has caught up): `commands.operator_common.phase_bar` yields such an object (the
phase bar: one terminal line naming the phase, with its rate and, when a total is known, its ETA); a plain callable
gets the counts only. A total from DescribeTable's ItemCount is approximate (DynamoDB updates it about every six hours),
and said so. "Progress" names the aggregator's progress table alone (docs/design.md), so none of this is called so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

READING_AGGREGATES = "Reading the aggregates"
RECOUNTING = "Recounting the downloads"
READING_STREAM = "Reading the stream for downloads in flight"
REPAIRING = "Repairing the differences"
WAITING_FOR_FENCE = "Waiting out the clock margin past the bands' fence"
WAITING_FOR_STREAM = "Waiting for the stream to deliver what was written before the fence"
CLOSING_BANDS = "Closing the bands"
READING_QUEUE = "Reading the failure queue"
ANSWERING_MESSAGES = "Answering the messages"
BEGINNING_BACKFILL = "Reading where the backfill's segments stand"
SCANNING_HISTORY = "Scanning the table's history"
ENDING_BACKFILL = "Recording the backfill's end"


class PhaseReporter(Protocol):
    def __call__(
        self,
        name: str,
        total: int | None = None,
        *,
        approximate: bool = False,
        unit: str = "items",
        bound: bool = False,
    ) -> None: ...


def _no_phase(
    name: str, total: int | None = None, *, approximate: bool = False, unit: str = "items", bound: bool = False
) -> None:
    return None


def phase_reporter(on_phase: Callable[[int], None]) -> PhaseReporter:
    """`on_phase.phase` where it has one, else a reporter that ignores phases."""
    phase = getattr(on_phase, "phase", None)
    return phase if callable(phase) else _no_phase


def item_count(dynamodb: Any, table: str) -> int | None:
    """DescribeTable's ItemCount of `table` (approximate: updated about every six hours); None when it cannot be read
    or is 0 (a total of 0 would show a finished bar over a scan that has just begun)."""
    try:
        count = int(dynamodb.describe_table(TableName=table)["Table"].get("ItemCount") or 0)
    except Exception:  # a phase's estimated total never stops the run it describes
        return None
    return count or None


class SecondsWaited:
    """Advances a phase counted in seconds ("s") by the whole seconds passed since `start`, on any clock."""

    def __init__(self, on_phase: Callable[[int], None], start: float) -> None:
        self._on_phase = on_phase
        self._start = start
        self._told = 0

    def to(self, now: float) -> None:
        whole = int(max(0.0, now - self._start))
        if whole > self._told:
            self._on_phase(whole - self._told)
            self._told = whole
