"""Exactly-once increments of one aggregate item from one shard, at one conditional write per aggregate.

Each aggregate keeps one watermark per stream shard that fed it: the attribute
`Watermark_<hash of stream and shard>` holds "<sequence>|<creation second>|<stream label>|<shard id>",
the highest sequence number of that shard already added to the count. The aggregator reads each
shard itself, from its checkpoint in the progress table, so every write carries the complete,
exact list of the aggregate's records in a contiguous range of the shard: after a failed
condition it adds exactly those above the watermark it read. Watermarks are pruned only once the
shard's checkpoint has passed them; a write that then finds none proves its records uncounted
against that checkpoint in a transaction. See docs/exactly-once.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from aggregate_writes import AggregateWrites, Contribution, number
from delivery import ShardRef
from download_records import AggregateKey, Schema
from fenced_records import band_open, hold, refuse_again, report_orphaned_band
from leaderboard_core.bookkeeping import (
    APPLIED_SEQUENCE,
    RECOUNTED_THROUGH,
    SEQUENCE_WIDTH,
    WATERMARK_PREFIX,
    WATERMARKS_PRUNED,
    WATERMARKS_PRUNED_UNDER,
)
from leaderboard_core.index_layout import leaderboard_partition
from progress_item import genesis_of, progress_of_item
from shard_progress import ProgressStore

MAX_CONDITION_ROUNDS = 8
"""A round is lost only when another writer moved the watermark in between; more than a few means something is wrong."""
PRUNE_IDLE_SECONDS = 3600
"""A watermark of a shard still open is pruned only when this old: pruning active ones would cost transactions."""
PRUNE_ABOVE_WATERMARKS = 4
"""Watermarks are pruned only from an aggregate carrying more than this many (about 140 bytes each): an item
stays under 1 KB, and an aggregate fed by few shards never pays the proof a pruned one needs."""


class WatermarkContention(Exception):
    """The watermark kept moving under us; the aggregate stays unwritten and the checkpoint waits for it."""


class CorruptWatermark(Exception):
    """A watermark attribute is not "<40 digits>|<second>|<label>|<shard>": counting on would guess."""


@dataclass(frozen=True)
class Watermark:
    sequence: str
    created: int
    stream_label: str
    shard_id: str | None
    raw: str

    @classmethod
    def parse(cls, name: str, value: Any) -> Watermark:
        text = value.get("S") if isinstance(value, dict) else None
        parts = text.split("|") if isinstance(text, str) else []
        if (
            len(parts) not in (3, 4)
            or len(parts[0]) != SEQUENCE_WIDTH
            or not parts[0].isdigit()
            or not parts[1].isdigit()
            or not parts[2]
        ):
            raise CorruptWatermark(f"{name} is {value!r}, not '<40 digits>|<second>|<stream label>|<shard id>'")
        return cls(parts[0], int(parts[1]), parts[2], parts[3] if len(parts) == 4 and parts[3] else None, text)


@dataclass
class ApplyOutcome:
    added: int = 0
    """Downloads added (each once, whatever its amount)."""
    already_applied: int = 0
    writes: int = 0
    """UpdateItem and TransactWriteItems calls made, conditional failures and prunes included."""
    refused: list[tuple[Contribution, str]] = field(default_factory=list)
    """Records that must not be counted here: created before a recount fence, or held by a corrupt item."""
    held: int = 0
    """Records created before a recount fence, held for the repair that set it: it counts those its recount missed."""
    written: list[Contribution] = field(default_factory=list)
    """The contributions the successful write added or held."""
    pruned_watermarks: int = 0
    previous_stream_labels: tuple[str, ...] = ()
    """Labels of other streams whose watermarks the aggregate carries: a re-enabled stream or a restored table."""
    index_partition: str | None = None
    """The index partition the count moved in (each such write is two index writes): where the index is hot."""
    transactions: int = 0


@dataclass
class _Known:
    """What the last failed attempt returned of the aggregate and of the shard's progress."""

    item: dict[str, Any]
    progress: dict[str, Any] | None = None
    """The shard's progress item, once a proof needed it: its checkpoint and when it was first seen."""


class AggregateStore:
    def __init__(
        self,
        client: Any,
        table_name: str,
        schema: Schema,
        progress: ProgressStore,
        clock: Callable[[], float] = time.time,
        leaderboard_shards: int = 1,
    ) -> None:
        self._client = client
        self._table = table_name
        self._progress = progress
        self._clock = clock
        self._shards = leaderboard_shards
        self._schema = schema
        self._writes = AggregateWrites(table_name, schema, leaderboard_shards, clock)

    def _read(self, key: AggregateKey) -> dict[str, Any]:
        item_key = self._writes.item_key(key)
        return self._client.get_item(TableName=self._table, Key=item_key, ConsistentRead=True).get("Item") or {}

    def read(self, key: AggregateKey) -> dict[str, Any]:
        """The aggregate as it is now (a strongly consistent read); empty when there is none."""
        return self._read(key)

    def apply(self, key: AggregateKey, shard: ShardRef, contributions: list[Contribution]) -> ApplyOutcome:
        """Add the contributions not yet added: one shard's, ascending, all of the aggregate's in a contiguous range.

        The first attempt assumes the common case, that none were added, and costs one write (and, with the
        tie-break `first_reached`, one strongly consistent read before it).
        When its condition fails, DynamoDB returns the item, and the next attempt adds exactly
        those above the watermark it read (or above the shard's checkpoint, once the watermark
        was pruned), conditioned on what it read still holding.
        """
        outcome = ApplyOutcome()
        remaining = list(contributions)
        held: list[Contribution] = []
        # first_reached sets the order from the count and latest instant read (aggregate_writes): one read first.
        known: _Known | None = _Known(self._read(key)) if self._writes.first_reached else None
        for _ in range(MAX_CONDITION_ROUNDS):
            if known is not None:
                try:
                    remaining, held = self._not_yet_counted(
                        known, shard, sorted([*remaining, *held], key=lambda c: c.sequence), outcome
                    )
                except CorruptWatermark as error:
                    outcome.refused.extend((contribution, str(error)) for contribution in [*remaining, *held])
                    return outcome
                if not remaining and not held:
                    # A retry of records already written: a report its first send lost is made again here, and so is
                    # what a retraction's first attempt left undone after its write (killed, or its response lost).
                    report_orphaned_band(known.item, contributions[-1], self._clock(), outcome.refused)
                    if self._schema.retractions:
                        self._after_retraction(key, known.item, contributions[-1], outcome, _takes_back(contributions))
                    return outcome
            try:
                if known is not None and self._needs_proof(known, shard):
                    self._write_with_proof(key, shard, remaining, known, held)
                    outcome.transactions += 1
                    written: dict[str, Any] | None = None
                    report_orphaned_band(
                        known.item, max([*remaining, *held], key=lambda c: c.sequence), self._clock(), outcome.refused
                    )
                else:
                    written = self._write(key, shard, remaining, known, held)
            except ClientError as error:
                outcome.writes += 1
                if refused_outright(error):
                    reason = f"the aggregate's value or order would pass DynamoDB's 38 digits: {error}"
                    outcome.refused.extend((contribution, reason) for contribution in [*remaining, *held])
                    return outcome
                known = self._known_after(error, key, shard)
                continue
            outcome.writes += 1
            outcome.added += len(remaining)
            outcome.held += len(held)
            outcome.written = sorted([*remaining, *held], key=lambda c: c.sequence)
            outcome.index_partition = leaderboard_partition(key.board, key.entity_id, self._shards)
            if self._schema.retractions:
                # A transaction returns no item: the count it left is read back (transactions are rare).
                after = written if written is not None else self._read(key)
                self._after_retraction(key, after, outcome.written[-1], outcome, _takes_back(remaining))
            if written is not None:
                self._after_write(key, shard, written, outcome)
            return outcome
        raise WatermarkContention(f"{shard.watermark_name} of {key} kept moving for {MAX_CONDITION_ROUNDS} rounds")

    def _known_after(self, error: ClientError, key: AggregateKey, shard: ShardRef) -> _Known:
        code = error.response.get("Error", {}).get("Code")
        if code == "ConditionalCheckFailedException":
            item = error.response.get("Item")
            return _Known(item if item is not None else self._read(key))
        if code == "TransactionCanceledException":
            reasons = error.response.get("CancellationReasons") or []
            aggregate_item = reasons[1].get("Item") if len(reasons) > 1 and isinstance(reasons[1], dict) else None
            return _Known(aggregate_item if aggregate_item is not None else self._read(key))
        if code == "TransactionConflictException":
            # A backfill's (or a repair's) transaction held the item: the write was refused, not applied, so it is
            # tried again as after a failed condition, from the item as it is now.
            return _Known(self._read(key))
        raise error

    def _needs_proof(self, known: _Known, shard: ShardRef) -> bool:
        return shard.watermark_name not in known.item and WATERMARKS_PRUNED in known.item

    def _not_yet_counted(
        self, known: _Known, shard: ShardRef, remaining: list[Contribution], outcome: ApplyOutcome
    ) -> tuple[list[Contribution], list[Contribution]]:
        """The contributions still to add and those to hold: above the watermark (or the vouching checkpoint),
        and split at the recount fence."""
        name = shard.watermark_name
        floor: str | None = None
        if name in known.item:
            floor = Watermark.parse(name, known.item[name]).sequence
        elif self._needs_proof(known, shard):
            if known.progress is None:
                known.progress = self._progress_item(shard)
            pruned_under = known.item.get(WATERMARKS_PRUNED_UNDER, {}).get("S")
            if pruned_under is None or genesis_of(known.progress) != pruned_under:
                reason = (
                    "its aggregate's watermarks were pruned under another progress table (recreated or restored "
                    "since): it cannot be proven uncounted; recount"
                )
                outcome.refused.extend((contribution, reason) for contribution in remaining)
                return [], []
            floor = progress_of_item(known.progress).checkpoint
        elif APPLIED_SEQUENCE in known.item:
            floor = known.item[APPLIED_SEQUENCE].get("S")
        passed: list[Contribution] = []
        if floor is not None:
            above = [c for c in remaining if c.sequence > floor]
            passed = [c for c in remaining if c.sequence <= floor]
            outcome.already_applied += len(passed)
            remaining = above
        fence = number(known.item.get(RECOUNTED_THROUGH))
        if fence is None:
            return remaining, []
        counted = f"created at or before {RECOUNTED_THROUGH} {fence}: counted by a recount"
        now, retractions = self._clock(), self._schema.retractions
        met_again = refuse_again(known.item, fence, shard, passed, now, retractions)
        if met_again is not None:
            outcome.already_applied -= 1
            outcome.refused.append((met_again, f"{counted}, and its repair's band does not hold it (met again)"))
        fenced = [c for c in remaining if c.created is None or c.created <= fence]
        after = [c for c in remaining if c.created is not None and c.created > fence]
        return after, hold(known.item, fenced, counted, now, retractions, self._writes.held_limit, outcome.refused)

    def _progress_item(self, shard: ShardRef) -> dict[str, Any]:
        return (
            self._client.get_item(
                TableName=self._progress.table_name, Key=self._progress.key(shard), ConsistentRead=True
            ).get("Item")
            or {}
        )

    def _write(
        self,
        key: AggregateKey,
        shard: ShardRef,
        contributions: list[Contribution],
        known: _Known | None,
        held: list[Contribution] | None = None,
    ) -> dict[str, Any]:
        item = known.item if known is not None else None
        proof_needed = known is not None and self._needs_proof(known, shard)
        parameters = self._writes.update(key, shard, contributions, item, proof_needed, held)
        response = self._client.update_item(
            **parameters, ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD"
        )
        return response.get("Attributes") or {}

    def _write_with_proof(
        self,
        key: AggregateKey,
        shard: ShardRef,
        contributions: list[Contribution],
        known: _Known,
        held: list[Contribution] | None = None,
    ) -> None:
        """The watermark was pruned: add only if the shard's checkpoint is still below these records, atomically.

        Pruning happens only once the checkpoint has passed a watermark, and every count sets one;
        so with no watermark, what is counted of this shard is exactly what the checkpoint covers.
        """
        update = self._writes.update(key, shard, contributions, known.item, self._needs_proof(known, shard), held)
        update["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        check = self._progress.condition_check(
            shard,
            min(c.sequence for c in [*contributions, *(held or [])]),
            known.item.get(WATERMARKS_PRUNED_UNDER, {}).get("S", ""),
        )
        known.progress = None
        self._client.transact_write_items(TransactItems=[check, {"Update": update}])

    def _after_write(self, key: AggregateKey, shard: ShardRef, item: dict[str, Any], outcome: ApplyOutcome) -> None:
        """Prune watermarks whose shard's checkpoint has passed them, and notice those of other streams and a band
        left open by a repair that never closed it."""
        now = int(self._clock())
        if outcome.written:
            report_orphaned_band(item, outcome.written[-1], self._clock(), outcome.refused)
        stale: dict[str, Watermark] = {}
        labels: set[str] = set()
        carried = sum(1 for name in item if name.startswith(WATERMARK_PREFIX))
        for name, value in item.items():
            if not name.startswith(WATERMARK_PREFIX) or name == shard.watermark_name:
                continue
            try:
                watermark = Watermark.parse(name, value)
            except CorruptWatermark:
                continue
            if watermark.stream_label != shard.stream_label:
                labels.add(watermark.stream_label)
            if watermark.shard_id is None or carried <= PRUNE_ABOVE_WATERMARKS:
                continue
            other = ShardRef(f"{shard.table_arn}/stream/{watermark.stream_label}", watermark.shard_id)
            progress = self._progress.lower_bound(other)
            passed = progress.checkpoint is not None and progress.checkpoint >= watermark.sequence
            if passed and (progress.ended or watermark.created < now - PRUNE_IDLE_SECONDS):
                stale[name] = watermark
        outcome.previous_stream_labels = tuple(sorted(labels))
        if stale:
            outcome.writes += 1
            if self._prune(key, stale):
                outcome.pruned_watermarks += len(stale)

    def _after_retraction(
        self, key: AggregateKey, item: dict[str, Any], record: Contribution, outcome: ApplyOutcome, took_back: bool
    ) -> None:
        """With retractions, after a write: a count at 0 leaves the index (whichever write brought it there: a
        download's records may be counted from a child shard before its parent's); a count a retraction took below 0
        took back a download never counted here (older than the stream and any backfill, or not yet counted from a
        parent shard): reported against the aggregate (naming `record`), for `recover` to recount."""
        count = number(item.get(self._schema.count))
        if count is None:
            return
        if count == 0 and self._schema.period in item:
            outcome.writes += 1
            try:
                self._client.update_item(**self._writes.leave_index(key))
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
        elif count < 0 and took_back and self._schema.amount is None and not band_open(item, self._clock()):
            reason = (
                f"counted; but the count is {count}: a retraction took back a download never counted here (older "
                "than the stream and any backfill), recount"
            )
            outcome.refused.append((record, reason))

    def _prune(self, key: AggregateKey, stale: dict[str, Watermark]) -> bool:
        """Remove watermarks the checkpoint has passed, only if they are still what was read."""
        raws = {name: watermark.raw for name, watermark in stale.items()}
        try:
            self._client.update_item(**self._writes.prune(key, raws, self._progress.genesis()))
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return False
        return True


def _takes_back(contributions: list[Contribution]) -> bool:
    return any(contribution.amount < 0 for contribution in contributions)


def refused_outright(error: ClientError) -> bool:
    """DynamoDB refuses a number past 38 digits ("Number overflow"), in an UpdateItem or, as a cancellation reason
    `ValidationError`, in a transaction ("a similar validation error occurs because of changes made by the
    transaction", *TransactionCanceledException*): retrying cannot help, so the records are reported, never left
    to block the shard. Any other refused write holds the checkpoint and fails loudly until it is fixed."""
    details = error.response.get("Error", {})
    if details.get("Code") == "ValidationException":
        return "overflow" in str(details.get("Message", "")).lower()
    reasons = error.response.get("CancellationReasons") or []
    return details.get("Code") == "TransactionCanceledException" and any(
        isinstance(reason, dict)
        and reason.get("Code") == "ValidationError"
        and "overflow" in str(reason.get("Message", "")).lower()
        for reason in reasons
    )
