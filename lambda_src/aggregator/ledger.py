"""Ledger mode (LEDGER): the aggregator's side of the ledger (leaderboard_core.claims).

Each download key's ledger item holds two facts, each written once: which stream record of the download the stream
applied first (StreamFrom) and what the download counted before it (Base: what the backfill counted, or nothing).
Every record's changes then follow from the record and those two facts alone, so any reader, retry or re-read of it
computes the same changes, which the aggregates' watermarks apply once (docs/exactly-once-ledger.md):

- a record that precedes StreamFrom moves nothing (its effect is inside what StreamFrom's record moves from);
- StreamFrom's record moves the download from Base to its new image;
- a record that follows it moves the download from its old image to its new one (the retractions parse);
- a record in a shard neither before nor after StreamFrom's (or in another stream) has no documented order: it is
  counted nowhere and reported, never guessed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from batch_report import BatchReport
from delivery import Refused, ShardRef
from download_records import AggregateKey, Change, Download
from leaderboard_core.bookkeeping import pad_sequence
from leaderboard_core.claims import BACKFILL, STREAM, LedgerEntry, claim_key, ledger_claim, ledger_entry, stream_from
from shard_progress import ProgressStore
from telemetry import logger

ANCESTRY_LIMIT = 1000
"""Ancestors walked up at most to relate two shards (as shard_lineage walks them): past it, no order is proven."""


class Place(Enum):
    """Where a record stands against its download's StreamFrom."""

    PRECEDES = "precedes"
    IS = "is"
    FOLLOWS = "follows"


@dataclass
class LedgerOutcome:
    ours: list[Download] = field(default_factory=list)
    """Records whose changes the ledger's rule gives (those that move nothing left out): the aggregator counts these."""
    unclaimed: list[Download] = field(default_factory=list)
    """Records of downloads whose ledger claim failed (throttled, an error, too late, an owner nobody writes): not
    counted now, the checkpoint stays below the first of them."""
    refused: list[Refused] = field(default_factory=list)
    """Records no documented order places against StreamFrom, one per aggregate they would move: reported."""
    counted_by_backfill: int = 0
    """StreamFrom records of downloads the backfill counted first: moved from its Base, not added to it."""


class Lineage:
    """Which shard comes before which: a shard's ancestors (ParentShardId, in the progress table) precede it (S7); two
    shards neither of which descends from the other have no documented order. Parents never change: cached."""

    def __init__(self, progress: ProgressStore) -> None:
        self._progress = progress
        self._parents: dict[tuple[str, str], str | None] = {}

    def _parent(self, stream_arn: str, shard_id: str) -> tuple[bool, str | None]:
        """(known, parent id): unknown where the progress table holds no item, the shard's lineage is unknown, or the
        shard was gone before its parent was recorded (its item then says only that it was lost)."""
        cached = (stream_arn, shard_id)
        if cached in self._parents:
            return True, self._parents[cached]
        shard = ShardRef(stream_arn, shard_id)
        progress = self._progress.lower_bound(shard)
        if not progress.exists:
            progress = self._progress.read(shard)  # a cached absence may be stale: another reader may have created it
        lost_above = progress.lost_unread and progress.parent_shard_id is None
        if not progress.exists or progress.lineage_unknown or lost_above:
            return False, None
        self._parents[cached] = progress.parent_shard_id
        return True, progress.parent_shard_id

    def _ancestry(self, stream_arn: str, shard_id: str) -> Iterator[tuple[str, bool, str | None]]:
        """Each shard of the lineage from `shard_id` up (at most ANCESTRY_LIMIT): (shard, its parent known, parent);
        it stops at a shard whose parent is unknown or which has none."""
        current = shard_id
        for _ in range(ANCESTRY_LIMIT):
            known, parent = self._parent(stream_arn, current)
            yield current, known, parent
            if not known or parent is None:
                return
            current = parent

    def unknown_above(self, stream_arn: str, shard_id: str) -> str | None:
        """The nearest shard of `shard_id`'s lineage (itself included) whose parent is not known, if any."""
        top = shard_id
        for current, known, parent in self._ancestry(stream_arn, shard_id):
            if not known:
                return current
            if parent is None:
                return None
            top = parent
        return top

    def descends(self, stream_arn: str, shard_id: str, ancestor_id: str) -> bool | None:
        """Whether `ancestor_id` is an ancestor of `shard_id`; None where the walk cannot tell."""
        for _, known, parent in self._ancestry(stream_arn, shard_id):
            if not known:
                return None
            if parent is None:
                return False
            if parent == ancestor_id:
                return True
        return None


def place_of(entry: LedgerEntry, shard: ShardRef, sequence: str, lineage: Lineage) -> Place | str:
    """Where one record (of `shard`, padded `sequence`) stands against the download's StreamFrom, or why no order
    places it. Sequence numbers are compared only within one shard: a child's may be lower than its parent's."""
    if entry.stream_label is None or entry.shard_id is None or entry.sequence is None:
        return "ledger: the download's ledger item holds no readable StreamFrom"
    if entry.stream_label != shard.stream_label:
        return (
            f"ledger: the download's first counted record is in stream {entry.stream_label}, this one in "
            f"{shard.stream_label}: no order between two streams is documented; counted nowhere, recount it"
        )
    if entry.shard_id == shard.shard_id:
        if sequence < entry.sequence:
            return Place.PRECEDES
        return Place.IS if sequence == entry.sequence else Place.FOLLOWS
    follows = lineage.descends(shard.stream_arn, shard.shard_id, entry.shard_id)
    if follows:
        return Place.FOLLOWS
    precedes = lineage.descends(shard.stream_arn, entry.shard_id, shard.shard_id)
    if precedes:
        return Place.PRECEDES
    if follows is None or precedes is None:
        unknown = lineage.unknown_above(shard.stream_arn, shard.shard_id if follows is None else entry.shard_id)
        return (
            f"ledger: whether shard {shard.shard_id} descends from shard {entry.shard_id} (the download's first "
            f"counted record) is unknown: the parent of shard {unknown} is not in the progress table (a shard the "
            "stream deleted before it was read is reported as records_trimmed), so no documented order places this "
            "record; counted nowhere, recount it, and later records of the download in this lineage alike. Keep "
            "lineage_sweep_schedule on: it records each closed shard's parent while the stream lists it"
        )
    return (
        f"ledger: shards {entry.shard_id} (the download's first counted record) and {shard.shard_id} are not parent "
        "and descendant: no order between their records is documented; counted nowhere, recount it"
    )


def moved_from_base(download: Download, entry: LedgerEntry) -> tuple[Change, ...]:
    """StreamFrom's changes: the new image's part in each aggregate less what Base counted there."""
    parts: dict[AggregateKey, list[int | Decimal]] = {}
    if entry.owner == BACKFILL and entry.base_entity is not None:
        for board, amount in entry.base.items():
            parts.setdefault(AggregateKey(entry.base_entity, board), [0, 0])[0] = amount
    for change in download.counted_after:
        parts.setdefault(change.key, [0, 0])[1] = change.value_after
    return tuple(Change(key, new - base, new) for key, (base, new) in parts.items() if new != base)


def base_unknown(entry: LedgerEntry) -> bool:
    """A backfill's claim recording nothing of what it counted (written outside ledger mode): no Base to move from."""
    return entry.owner == BACKFILL and (entry.base_entity is None or not entry.base)


class StreamLedger:
    def __init__(self, client: Any, table: str, executor: Executor, progress: ProgressStore) -> None:
        self._client = client
        self._table = table
        self._executor = executor
        self._progress = progress
        self._lineage = Lineage(progress)

    def _claim(self, shard: ShardRef, first: Download, late: Callable[[], bool]) -> LedgerEntry | None:
        if not first.item_key or late():
            return None
        request = ledger_claim(
            self._table, first.item_key, stream_from(shard.stream_label, shard.shard_id, first.sequence)
        )
        try:
            return ledger_entry(self._client.update_item(**request))
        except (ClientError, BotoCoreError):
            return None

    def sort(
        self, shard: ShardRef, downloads: list[Download], late: Callable[[], bool] = lambda: False
    ) -> LedgerOutcome:
        """Claim each download key of one step once (its first record in the step as StreamFrom, if none is set), then
        give each of its records the ledger's changes. Once `late` says the time is nearly up, no claim starts. A
        progress table begun without ledger mode raises LedgerTurnedOnLate before any claim."""
        self._progress.genesis()
        by_key: dict[str, list[Download]] = {}
        for download in downloads:
            by_key.setdefault(claim_key(download.item_key) if download.item_key else "", []).append(download)
        groups = [sorted(records, key=lambda download: download.sequence) for records in by_key.values()]
        entries = self._executor.map(lambda records: self._claim(shard, records[0], late), groups)
        outcome = LedgerOutcome()
        for records, entry in zip(groups, entries, strict=True):
            if entry is None or entry.owner not in (STREAM, BACKFILL):
                outcome.unclaimed += records
                continue
            for download in records:
                self._apply(shard, download, entry, outcome)
        return outcome

    def step(
        self, shard: ShardRef, downloads: list[Download], late: Callable[[], bool], report: BatchReport
    ) -> tuple[list[Download], list[str], list[Refused]]:
        """One step's records through the ledger: those to count, the sequence below which the checkpoint stays (a
        claim failed: nothing above it may be counted, or an aggregate's watermark would pass it) and the refused.
        Records above that hold are left for the read that meets them again, reports included."""
        outcome = self.sort(shard, downloads, late)
        report.counted_by_backfill += outcome.counted_by_backfill
        report.unclaimed += len(outcome.unclaimed)
        if not outcome.unclaimed:
            return outcome.ours, [], outcome.refused
        held = min(download.sequence for download in outcome.unclaimed)
        ours = [download for download in outcome.ours if download.sequence < held]
        refused = [item for item in outcome.refused if pad_sequence(item.raw_sequence or "0") < held]
        return ours, [held], refused

    def _apply(self, shard: ShardRef, download: Download, entry: LedgerEntry, outcome: LedgerOutcome) -> None:
        place = place_of(entry, shard, download.sequence, self._lineage)
        if place is Place.IS and base_unknown(entry):
            place = "ledger: the backfill's claim of this download records no Contribution: what it counted is unknown"
        if isinstance(place, str):
            outcome.refused += _refusals(download, shard, place)
            return
        if place is Place.PRECEDES and not download.expiry:
            return
        changes = download.changes
        if place is Place.PRECEDES:
            # StreamFrom's record moved its download from Base to its own image, taking out with Base every image
            # before it, this expired one too: an expiry keeps its count, so it adds its old image back.
            changes = download.counted_after
        if place is Place.IS:
            changes = moved_from_base(download, entry)
            outcome.counted_by_backfill += 1 if entry.owner == BACKFILL else 0
            if not changes and entry.owner == STREAM and not download.counted_after:
                logger.debug(
                    "a retraction of a download never counted here changes nothing",
                    extra={"sequence_number": download.raw_sequence, "shard_id": shard.shard_id},
                )
        if changes:
            outcome.ours.append(
                dataclasses.replace(download, key=changes[0].key, also=tuple(c.key for c in changes[1:]), moves=changes)
            )


def _refusals(download: Download, shard: ShardRef, reason: str) -> list[Refused]:
    """One report per aggregate the record would move (old image and new), so that recover recounts each."""
    keys = dict.fromkeys([change.key for change in download.changes] + [c.key for c in download.counted_after])
    return [
        Refused(
            reason,
            download.raw_sequence,
            {"entityId": key.entity_id, "board": key.board, "created": download.created, "keys": download.item_key},
            shard.shard_id,
            shard.stream_arn,
        )
        for key in keys
    ]
