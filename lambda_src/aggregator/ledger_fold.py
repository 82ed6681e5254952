"""One download key's versioned ledger item as read, and what a batch's records make of it (versioned_ledger.py).

The item: `Version` (the last record of the key applied), `Contribution` (board -> amount, what the key counts now),
`Entity` (the entity it counts for: an attribute of the download's image, never the record's Keys, since a
single-table design keys the item by anything), and `Decreased` (the aggregates the key's last move took from, until
they have left the index if at 0: a board of `Entity`, or `[entity, board]` of an entity it counted for before, when
an edit moved the download to another entity).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from leaderboard_core.claims import (
    BASE_CONTRIBUTION,
    CLAIM_KEY,
    GONE_AT,
    READ_FROM,
    READ_UNTIL,
    claim_key,
    decreased_of,
    rebases_condition,
)
from ledger_records import Boards

Aggregate = tuple[str, str]
"""(entity, board)."""
VERSION = "Version"
UNSURE_KIND = "keep_taken_unsure"
"""The report of a record of a key that a version read from the table cannot place against its read: a keep taken by an
expiry above an INSERT that may be the kept item's own or a new item's, or a record between a gone version and its
expiry created within the clock margin of the gone version's read."""
VersionOrder = Callable[[str, str | None, str], bool]
"""Whether a record at `version` follows `current` (a key's Version; None: none yet) in the stream `stream_arn`
(VersionedLedger.after, which raises where no documented order places the two): what the expiries' parts are handed."""


@dataclass
class Keep:
    """An operator's keep of an expired version: what it kept (`entity`, `contribution`), the removal that took it
    (`by`, and whether an expiry by TTL: `expiry`), the lowest INSERT after the kept version that bounds it (`until`)
    and the lowest that may or may not (`maybe`, of a version read from the table: created within the clock margin of
    its read, `read_window`). `read`: (by, until, expiry, maybe) as read."""

    read: tuple[str | None, str | None, bool, str | None]
    by: str | None
    until: str | None
    expiry: bool
    entity: str
    contribution: Boards
    read_window: tuple[int, int] | None = None
    maybe: str | None = None
    spent: bool = False
    """Taken by a removal with no TTL identity under an earlier version, which left the kept count in place."""

    def state(self) -> tuple[str | None, str | None, bool, str | None]:
        return self.by, self.until, self.expiry, self.maybe


@dataclass
class Fold:
    """One key's ledger item as read, and what the batch's records after its Version make of it."""

    key: dict[str, Any]
    item: dict[str, Any] | None
    entity: str = ""
    version: str | None = None
    contribution: Boards = field(default_factory=dict)
    moves: Boards = field(default_factory=dict)
    """The moves of `entity`'s aggregates; `by_entity` holds them and those of entities the key counted for before."""
    applied: bool = False
    freezes: list[str] = field(default_factory=list)
    """Expiries by TTL of the key whose part this batch keeps for good: one item each."""
    follows: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Of those, each that follows the key's Version as then applied: its item's `Follows` (that version's label),
    `Entity` and `Contribution` (what it kept)."""
    keeps: dict[str, Keep] = field(default_factory=dict)
    """The operator's keeps (`expired#<key>|<version>|kept`) this batch read to take or bound, as it leaves them."""
    unsure: list[dict[str, Any]] = field(default_factory=list)
    """Reports of keeps taken by an expiry above an INSERT that may be the kept item's own or a new item's."""
    gone_at: dict[str, str] = field(default_factory=dict)
    """The item's `GoneAt` as this batch leaves it: gone label -> the expiry that followed it, or ""."""
    unfollowed: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Expiries' own items, as read, that a record of this batch proves followed no gone version (followed_expiries)."""
    between: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    """Answered expiries' own items, as read, and the lowest REMOVE between (`RemovedBetween`) this batch read back."""
    kept_now: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Keeps of gone versions this batch writes (the operator's answer, taken by an expiry that did not follow)."""
    gone_bounds: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    """Open gone reports (`gone#<key>|<label>`, as read) whose version's removal this batch proves came before an INSERT
    (the lowest, `KeptUntil`): the operator's answer keeps that version bounded by it."""
    gone_takers: dict[str, tuple[dict[str, Any], str | None, bool]] = field(default_factory=dict)
    """Open gone reports (as read), bounded (`KeptUntil`), and the lowest removal below the bound that takes the keep
    the answer writes from them (`KeptBy`, and whether an expiry by TTL; None gives it back): as a keep's taker."""
    frozen_decreased: dict[str, set[Aggregate]] = field(default_factory=dict)
    """Expiries' own items naming the aggregates their batch took from without moving the key (`Decreased`)."""
    by_entity: dict[str, Boards] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_entity[self.entity] = self.moves

    @contextmanager
    def counting_for(self, entity: str | None) -> Iterator[None]:
        """Moves made inside go to `entity`'s aggregates (None: the key's), whatever the key counts for."""
        current = self.moves
        if entity is not None:
            self.moves = self.by_entity.setdefault(entity, {})
        try:
            yield
        finally:
            self.moves = current

    def add(self, boards: Boards, entity: str | None = None, sign: int = 1) -> None:
        """`boards` added (sign 1) or taken back (sign -1) in `entity`'s aggregates (None: the key's now)."""
        with self.counting_for(entity):
            for board, amount in boards.items():
                self.moves[board] = self.moves.get(board, Decimal(0)) + sign * amount

    def move(self, target: Boards) -> None:
        """The aggregates go from what the key counts to `target`, which the key then counts."""
        for board in self.contribution.keys() | target.keys():
            self.moves[board] = self.moves.get(board, Decimal(0)) + target.get(board, Decimal(0))
            self.moves[board] -= self.contribution.get(board, Decimal(0))
        self.contribution = dict(target)

    def enter(self, entity: str) -> None:
        """The key now counts for `entity`: later moves go to its aggregates."""
        self.entity = entity
        self.moves = self.by_entity.setdefault(entity, {})

    def aggregate_moves(self) -> dict[Aggregate, Decimal]:
        return {(entity, board): amount for entity, moves in self.by_entity.items() for board, amount in moves.items()}

    def decreased(self) -> set[Aggregate]:
        """The aggregates the key's earlier moves took from (its item's `Decreased`, with the item's entity), and those
        an expiry's own item names (a move of a batch that wrote no ledger Put)."""
        return decreased_of(self.item).union(*self.frozen_decreased.values())

    def decreases(self) -> set[Aggregate]:
        """The aggregates this batch's moves take from: its ledger Put's `Decreased`."""
        return {aggregate for aggregate, amount in self.aggregate_moves().items() if amount < 0}

    def unchanged(self) -> tuple[str, dict[str, str], dict[str, Any]]:
        """A condition that the item's Version is still the one the batch read, or wrote if it applied a record."""
        if self.version is None:
            rebased, names, values = rebases_condition(self.item or {})
            return (
                f"attribute_exists(#key) AND attribute_not_exists(#version) AND {rebased}",
                {"#key": CLAIM_KEY, "#version": VERSION, **names},
                values,
            )
        return "#version = :version", {"#version": VERSION}, {":version": {"S": self.version}}

    def condition(self) -> tuple[str, dict[str, str], dict[str, Any]]:
        """The ledger Put's condition: the item as it was read (Version unchanged, or the backfill's as it was, or
        none). The backfill's item is held by its Rebases too: the repair's rebase moves it without a Version, and
        raises Rebases on every move, so a move back to a Contribution and Entity equal by value still fails it. And
        `GoneAt` as read: the rebase marks a gone version without moving the item (followed_expiries.py)."""
        if self.item is None:
            return "attribute_not_exists(#key)", {"#key": CLAIM_KEY}, {}
        if VERSION not in self.item:
            rebased, names, values = rebases_condition(self.item)
            condition = f"attribute_not_exists(#version) AND {rebased}"
            if BASE_CONTRIBUTION in self.item:
                condition += " AND #contribution = :contribution"
                names["#contribution"] = BASE_CONTRIBUTION
                values[":contribution"] = self.item[BASE_CONTRIBUTION]
            names["#version"] = VERSION
        else:
            condition, names, values = "#version = :version", {"#version": VERSION}, {":version": self.item[VERSION]}
        names["#gone"] = GONE_AT
        if GONE_AT not in self.item:
            return f"{condition} AND attribute_not_exists(#gone)", names, values
        return f"{condition} AND #gone = :gone", names, values | {":gone": self.item[GONE_AT]}


def read_window(item: dict[str, Any]) -> tuple[int, int] | None:
    """An item's read window (`ReadFrom`, `ReadUntil`: a read's time less and plus the clock margin), or None."""
    if READ_FROM not in item or READ_UNTIL not in item:
        return None
    return int(Decimal(item[READ_FROM]["N"])), int(Decimal(item[READ_UNTIL]["N"]))


def report_unsure(
    fold: Fold, entity: str, counts: dict[str, str], taken_by: str | None, insert: str | None, reason: str
) -> None:
    """A `keep_taken_unsure` report, once per fold: the entity and counts the operator judges, the records that could
    not be placed (`takenBy`, `insert`), and why."""
    report = {
        "kind": UNSURE_KIND,
        "claimKey": claim_key(fold.key),
        "entityId": entity,
        "counts": dict(sorted(counts.items())),
        "takenBy": taken_by,
        "insert": insert,
        "reason": reason,
    }
    if report not in fold.unsure:
        fold.unsure.append(report)
