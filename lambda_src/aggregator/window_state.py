"""The tumbling window's state: only a hint of how far the mapping has delivered the window.

Nothing counted travels here. AWS may hand a retry a fresh state, end a window early and go on
"with a fresh state", or give a window up; a state that held counts would lose them. It carries
the highest sequence number delivered in the window so far, so that a final invocation without
records knows how far to read. A state that is unreadable, or of another shard, is ignored:
it can only make an invocation read less, never count wrongly.
"""

from __future__ import annotations

from typing import Any

from delivery import ShardRef
from leaderboard_core.bookkeeping import pad_sequence

STATE_VERSION = 2


def delivered_high(raw: Any, shard: ShardRef | None) -> tuple[str | None, str | None]:
    """(the padded high mark of this shard's window, or None; why the state was ignored, or None)."""
    if not raw:
        return None, None
    if not isinstance(raw, dict):
        return None, f"state is {type(raw).__name__}, not an object"
    if raw.get("v") != STATE_VERSION:
        return None, f"state version {raw.get('v')!r} is not {STATE_VERSION}"
    if shard is None or raw.get("stream") != shard.stream_arn or raw.get("shard") != shard.shard_id:
        return None, f"state of {raw.get('stream')!r} {raw.get('shard')!r} delivered for {shard}"
    high = raw.get("high")
    if high is None:
        return None, None
    if not isinstance(high, str) or not high.isdigit() or len(high) > 40:
        return None, f"state high mark {high!r} is not a sequence number"
    return pad_sequence(high), None


def window_state(shard: ShardRef | None, high: str | None) -> dict[str, Any]:
    """The JSON Lambda passes to the window's next invocation; sequence numbers unpadded, to stay small."""
    if shard is None:
        return {}
    return {
        "v": STATE_VERSION,
        "stream": shard.stream_arn,
        "shard": shard.shard_id,
        "high": (high.lstrip("0") or "0") if high else None,
    }
