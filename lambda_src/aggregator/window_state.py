"""The tumbling window's state: downloads folded but not yet written, per aggregate, for one shard.

Lambda passes the state from one invocation of a window to the next and checkpoints it with
the batch, so what sits here is exactly what the checkpoint covers and no aggregate holds yet.
Pure functions only: the state travels as JSON between invocations.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from delivery import ShardRef
from download_records import AggregateKey, Download, pad_sequence

STATE_VERSION = 1


class InvalidState(Exception):
    """The window state is not one this function returned for this shard: counting on would guess."""


@dataclass(frozen=True)
class Segment:
    """Consecutive downloads of one aggregate from one shard, written together or not at all.

    `sequences` lists them exactly, but only for the current invocation's downloads; older
    segments travel in the state as counts and bounds. `attempted` marks a segment whose write
    may have landed: it is never merged with newer downloads, so a watermark can only fall on
    its bounds.
    """

    count: int
    low: str
    high: str
    low_created: int
    """Creation second of the lowest download, 0 when unknown."""
    high_created: int
    attempted: bool = False
    sequences: tuple[str, ...] | None = None

    def above(self, watermark: str) -> int | None:
        """How many downloads lie above `watermark`; None when the watermark splits a segment without its list."""
        if watermark < self.low:
            return self.count
        if watermark >= self.high:
            return 0
        if self.sequences is None:
            return None
        return sum(1 for sequence in self.sequences if sequence > watermark)


@dataclass
class WindowState:
    shard: ShardRef | None = None
    high: str | None = None
    """The highest sequence number folded in this window: anything at or below it is a redelivery."""
    pending: dict[AggregateKey, list[Segment]] = field(default_factory=dict)

    def pending_downloads(self) -> int:
        return sum(segment.count for segments in self.pending.values() for segment in segments)


@dataclass(frozen=True)
class FoldOutcome:
    folded: int
    redelivered: int
    """Downloads at or below the state's high mark: already folded (and maybe written) in this window."""


def fold(state: WindowState, downloads: list[Download], now: int) -> FoldOutcome:
    """Add a batch's downloads to the pending segments, in sequence order, skipping redeliveries."""
    fresh = sorted((d for d in downloads if state.high is None or d.sequence > state.high), key=lambda d: d.sequence)
    unique = {download.sequence: download for download in fresh}
    by_key: dict[AggregateKey, list[Download]] = {}
    for download in unique.values():
        by_key.setdefault(download.key, []).append(download)
    for key, group in by_key.items():
        sequences = tuple(download.sequence for download in group)
        state.pending.setdefault(key, []).append(
            Segment(
                count=len(group),
                low=sequences[0],
                high=sequences[-1],
                low_created=group[0].created or 0,
                high_created=group[-1].created if group[-1].created is not None else now,
                sequences=sequences,
            )
        )
    if unique:
        state.high = max(unique)
    return FoldOutcome(folded=len(unique), redelivered=len(downloads) - len(fresh))


def merged(segments: list[Segment]) -> list[Segment]:
    """Adjacent segments that were never attempted become one; attempted ones keep their bounds."""
    result: list[Segment] = []
    for segment in segments:
        previous = result[-1] if result else None
        if previous is not None and not previous.attempted and not segment.attempted:
            result[-1] = Segment(
                count=previous.count + segment.count,
                low=previous.low,
                high=segment.high,
                low_created=previous.low_created,
                high_created=segment.high_created,
            )
        else:
            result.append(replace(segment, sequences=None))
    return result


def to_lambda_state(state: WindowState) -> dict[str, Any]:
    """The JSON Lambda checkpoints with the batch; sequence numbers unpadded, to stay small."""
    if state.shard is None:
        return {}
    pending = [
        [key.entity_id, key.period, [_segment_row(segment) for segment in merged(segments)]]
        for key, segments in sorted(state.pending.items(), key=lambda item: (item[0].entity_id, item[0].period))
    ]
    return {
        "v": STATE_VERSION,
        "stream": state.shard.stream_arn,
        "shard": state.shard.shard_id,
        "high": _unpadded(state.high) if state.high else None,
        "pending": pending,
    }


def state_size(lambda_state: dict[str, Any]) -> int:
    return len(json.dumps(lambda_state, separators=(",", ":")).encode())


def from_lambda_state(raw: dict[str, Any], shard: ShardRef | None, shard_id: str | None) -> WindowState:
    """Read back what to_lambda_state wrote for this shard; an empty state starts a window."""
    if not raw:
        return WindowState(shard=shard)
    try:
        if raw["v"] != STATE_VERSION:
            raise InvalidState(f"state version {raw['v']!r} is not {STATE_VERSION}")
        stored = ShardRef(str(raw["stream"]), str(raw["shard"]))
        if stored.shard_id != shard_id or (shard is not None and stored != shard):
            raise InvalidState(f"state of {stored} delivered for shard {shard_id} of {shard}")
        high = raw["high"]
        state = WindowState(shard=stored, high=pad_sequence(_digits(high)) if high is not None else None)
        for entity_id, period, rows in raw["pending"]:
            state.pending[AggregateKey(str(entity_id), str(period))] = [_segment_from_row(row) for row in rows]
        return state
    except InvalidState:
        raise
    except (KeyError, TypeError, ValueError) as error:
        raise InvalidState(f"state is malformed: {type(error).__name__}: {error}") from None


def _segment_row(segment: Segment) -> list[Any]:
    return [
        segment.count,
        _unpadded(segment.low),
        _unpadded(segment.high),
        segment.low_created,
        segment.high_created,
        1 if segment.attempted else 0,
    ]


def _segment_from_row(row: list[Any]) -> Segment:
    count, low, high, low_created, high_created, attempted = row
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"segment count {count!r}")
    return Segment(
        count=count,
        low=pad_sequence(_digits(low)),
        high=pad_sequence(_digits(high)),
        low_created=int(low_created),
        high_created=int(high_created),
        attempted=bool(attempted),
    )


def _digits(value: Any) -> str:
    if not isinstance(value, str) or not value.isdigit() or len(value) > 40:
        raise ValueError(f"sequence number {value!r}")
    return value


def _unpadded(sequence: str) -> str:
    return sequence.lstrip("0") or "0"
