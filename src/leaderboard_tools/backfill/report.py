"""What a run did (page, segment, run, every run), and what the operator does next: the claims stay on until the
stream is read past the scan's end."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from leaderboard_core.claims import BACKFILL

REJECTED_EXAMPLES = 10


@dataclass
class Tally:
    """What a page, a segment or a run did; the counters are kept in each segment's item across runs."""

    items_scanned: int = 0
    downloads_read: int = 0
    counted: int = 0
    claimed_by_stream: int = 0
    claimed_by_backfill: int = 0
    claimed_unknown: int = 0
    rejected: int = 0
    read_units: float = 0.0
    transactions: int = 0
    retries: int = 0
    boards: Counter[str] = field(default_factory=Counter)
    rejected_examples: list[dict[str, Any]] = field(default_factory=list)

    COUNTERS = {
        "items_scanned": "ItemsScanned",
        "downloads_read": "DownloadsRead",
        "counted": "Counted",
        "claimed_by_stream": "ClaimedByStream",
        "claimed_by_backfill": "ClaimedByBackfill",
        "claimed_unknown": "ClaimedUnknown",
        "rejected": "Rejected",
        "read_units": "ReadUnits",
    }
    """Kept in each segment's item (the rest is this run's only)."""

    def claimed(self, owner: str) -> None:
        if owner == BACKFILL:
            self.claimed_by_backfill += 1
        elif owner == "stream":
            self.claimed_by_stream += 1
        else:
            self.claimed_unknown += 1

    def add(self, other: Tally) -> None:
        for item in fields(self):
            mine, theirs = getattr(self, item.name), getattr(other, item.name)
            if isinstance(mine, Counter):
                mine.update(theirs)
            elif isinstance(mine, list):
                mine.extend(theirs[: max(0, REJECTED_EXAMPLES - len(mine))])
            else:
                setattr(self, item.name, mine + theirs)

    def counters_json(self) -> dict[str, Any]:
        return {
            "readUnits": round(self.read_units, 1),
            "itemsScanned": self.items_scanned,
            "downloadsRead": self.downloads_read,
            "counted": self.counted,
            "alreadyClaimed": {
                "stream": self.claimed_by_stream,
                "backfill": self.claimed_by_backfill,
                "unknown": self.claimed_unknown,
            },
            "rejected": self.rejected,
        }


def _number(item: Mapping[str, Any], name: str) -> float:
    value = (item.get(name) or {}).get("N")
    return float(value) if value is not None else 0.0


def tally_of_item(item: Mapping[str, Any]) -> Tally:
    tally = Tally()
    for name, attribute in Tally.COUNTERS.items():
        value = _number(item, attribute)
        setattr(tally, name, value if name == "read_units" else int(value))
    return tally


DONE, ALREADY_DONE, UNFINISHED, INTERRUPTED, STOPPED = "done", "already_done", "unfinished", "interrupted", "stopped"


@dataclass
class BackfillReport:
    table: str
    segments: int
    status: str = UNFINISHED
    run: Tally = field(default_factory=Tally)
    """This run's work."""
    total: Tally | None = None
    """Every run's, once the backfill is done."""
    segments_done: int = 0
    started_at: float | None = None
    ended_at: float | None = None
    """The scan's end on DynamoDB's clock (epoch seconds): the stream's records created before it must be read while
    the claims are on."""
    error: str | None = None
    aggregator_function: str | None = None
    ledger: bool = False
    """Ledger mode: the claims table is the ledger, kept for good; nothing is released after the backfill."""

    @property
    def finished(self) -> bool:
        return self.status in (DONE, ALREADY_DONE)

    def next_step(self) -> str:
        if not self.finished:
            return (
                "run `leaderboard-tools backfill` again (same --segments): it goes on from each segment's saved place; "
                + ("keep ledger = true" if self.ledger else "keep backfill_claims = true")
            )
        if self.ledger:
            return (
                "nothing: ledger mode keeps the ledger for good, so there is nothing to release (keep ledger = true); "
                "the stream moves each download the backfill counted from what the ledger says it counted"
            )
        end = iso(self.ended_at)
        return (
            f"keep backfill_claims = true until every run of the backfill has ended and the aggregator has counted "
            f"past every stream record created before {end} (DynamoDB's clock), or a later run's end, plus a minute: "
            f"`leaderboard-tools backfill --table {self.table} --release-check` exits 0 then; apply "
            "backfill_claims = false only after that. Turned off sooner, the aggregator would count again a download "
            "the backfill counted whose record it had not counted yet"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "status": self.status,
            "segments": self.segments,
            "segmentsDone": self.segments_done,
            **self.run.counters_json(),
            "countedPerBoard": dict(sorted(self.run.boards.items())),
            "rejectedExamples": self.run.rejected_examples,
            "transactions": self.run.transactions,
            "retries": self.run.retries,
            "total": self.total.counters_json() if self.total is not None else None,
            "startedAt": iso(self.started_at),
            "endedAt": iso(self.ended_at),
            "error": self.error,
            "next": self.next_step(),
        }


def iso(moment: float | None) -> str | None:
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
