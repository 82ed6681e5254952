"""What a recount found: each aggregate's difference, each board's report, the run's, and the state read before."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OPENED_STATES = ("repaired", "unknown", "unsettled")
"""The states of an aggregate whose band this run opened (written)."""

AggregateId = tuple[str, str]
"""(entity id, board id): a song on one board (`2018-01`, `2018-01-15`, `2018-01@rock`, `all`)."""


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
    latest: int | None = None
    """LatestCounted (the tie-break `first_reached`): its latest counted download's instant."""


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
    by another repair's, and which is not known: recount), would_repair (--dry-run: the repair would set it; nothing
    was written), unsettled (repaired, but its band held records of a download whose last one its close could not tell:
    that download's part is left as recounted; repair again)."""
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
        if self.repaired or self.state == "unsettled":
            entry["addedAtClose"] = self.added_at_close
        return entry | ({"reason": self.reason} if self.reason else {})


@dataclass
class ReconcileReport:
    board: str
    aggregates: int = 0
    downloads: int = 0
    differences: list[Difference] = field(default_factory=list)
    refused: str | None = None
    """Why the board was not recounted (TTL: a download of it expired)."""

    @property
    def repaired(self) -> bool:
        return self.refused is None and bool(self.differences) and all(d.repaired for d in self.differences)

    @property
    def exact(self) -> bool:
        """Every aggregate of the board equals its recount now."""
        return self.refused is None and all(d.repaired for d in self.differences)

    def as_json(self) -> dict[str, Any]:
        """`reconcile --json`'s report: "board" names the board; "month", the key it has always had, too."""
        return {
            "board": self.board,
            "month": self.board,
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
    boards: list[ReconcileReport] = field(default_factory=list)
    fence: int | None = None
    stream: StreamCheck | None = None

    @property
    def exact(self) -> bool:
        return all(board.exact for board in self.boards)

    def board(self, board: str) -> ReconcileReport:
        return next(report for report in self.boards if report.board == board)

    def month(self, month: str) -> ReconcileReport:
        """The report of the board `reconcile --month` names."""
        return self.board(month)
