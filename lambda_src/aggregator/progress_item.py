"""A shard's item in the progress table, read: what its attributes (leaderboard_core.bookkeeping) say of the shard."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from delivery import ShardRef
from leaderboard_core import bookkeeping
from leaderboard_core.bookkeeping import pad_sequence


@dataclass(frozen=True)
class Progress:
    checkpoint: str | None = None
    """40-digit padded sequence number; None when nothing of the shard is counted yet."""
    checkpoint_sequence: str | None = None
    """The same sequence number as the stream spells it."""
    checkpoint_created: int | None = None
    resume_at: str | None = None
    delivered_high: str | None = None
    ended: bool = False
    parent_shard_id: str | None = None
    lineage_counted: bool = False
    lineage_unknown: bool = False
    lost_unread: bool = False
    """Gone from the stream before this deployment read it (its loss reported): its parent is known only if recorded."""
    closed_unread_since: int | None = None
    gap_reported_from: str | None = None
    empty_tail_walked_at: int | None = None
    exists: bool = False

    @property
    def start(self) -> tuple[str | None, str | None]:
        """(read AT this sequence, or AFTER this one): where the next read of the shard begins."""
        if self.resume_at is not None and (self.checkpoint is None or pad_sequence(self.resume_at) > self.checkpoint):
            return self.resume_at, None
        return None, self.checkpoint_sequence

    @property
    def start_token(self) -> str:
        """Where the next read begins, as bookkeeping.GAP_REPORTED_FROM spells it."""
        at, after = self.start
        return f"at:{at}" if at is not None else f"after:{after}"


def shard_key(shard: ShardRef) -> str:
    return f"{shard.stream_arn}|{shard.shard_id}"


def progress_of_item(item: dict[str, Any] | None) -> Progress:
    if not item:
        return Progress()
    checkpoint = item.get(bookkeeping.CHECKPOINT, {}).get("S")
    sequence = item.get(bookkeeping.CHECKPOINT_SEQUENCE, {}).get("S")
    created = item.get(bookkeeping.CHECKPOINT_CREATED, {}).get("N")
    if isinstance(checkpoint, str) and not isinstance(sequence, str):
        sequence = checkpoint.lstrip("0") or "0"
    resume = item.get(bookkeeping.RESUME_AT, {}).get("S")
    delivered = item.get(bookkeeping.DELIVERED_HIGH, {}).get("S")
    since = item.get(bookkeeping.CLOSED_UNREAD_SINCE, {}).get("N")
    gap = item.get(bookkeeping.GAP_REPORTED_FROM, {}).get("S")
    walked = item.get(bookkeeping.EMPTY_TAIL_WALKED_AT, {}).get("N")
    return Progress(
        checkpoint=checkpoint if isinstance(checkpoint, str) else None,
        checkpoint_sequence=sequence if isinstance(checkpoint, str) else None,
        checkpoint_created=int(created) if isinstance(created, str) and created.isdigit() else None,
        resume_at=resume if isinstance(resume, str) else None,
        delivered_high=delivered if isinstance(delivered, str) else None,
        ended=bool(item.get(bookkeeping.SHARD_ENDED, {}).get("BOOL")),
        parent_shard_id=item.get(bookkeeping.PARENT_SHARD, {}).get("S"),
        lineage_counted=bool(item.get(bookkeeping.LINEAGE_COUNTED, {}).get("BOOL")),
        lineage_unknown=bool(item.get(bookkeeping.LINEAGE_UNKNOWN, {}).get("BOOL")),
        lost_unread=bool(item.get(bookkeeping.LOST_UNREAD, {}).get("BOOL")),
        closed_unread_since=int(since) if isinstance(since, str) and since.isdigit() else None,
        gap_reported_from=gap if isinstance(gap, str) else None,
        empty_tail_walked_at=int(walked) if isinstance(walked, str) and walked.isdigit() else None,
        exists=True,
    )


def genesis_of(item: dict[str, Any] | None) -> str | None:
    value = (item or {}).get(bookkeeping.GENESIS, {}).get("S")
    return value if isinstance(value, str) else None
