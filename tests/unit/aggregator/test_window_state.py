"""The window state is a hint of how far the window was delivered; nothing counted travels in it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from delivery import ShardRef
from leaderboard_core.bookkeeping import pad_sequence
from tests.streams import SHARD_ID, STREAM_ARN
from window_state import delivered_high, window_state

SHARD = ShardRef(STREAM_ARN, SHARD_ID)


@given(st.integers(0, 10**40 - 1))
def test_the_high_mark_round_trips_unpadded(sequence: int) -> None:
    state = window_state(SHARD, pad_sequence(str(sequence)))
    assert state["high"] == str(sequence)
    assert delivered_high(state, SHARD) == (pad_sequence(str(sequence)), None)


def test_an_empty_state_starts_a_window() -> None:
    assert delivered_high({}, SHARD) == (None, None)
    assert window_state(SHARD, None)["high"] is None


def test_a_state_of_another_shard_an_older_version_or_garbage_is_ignored_with_a_reason() -> None:
    other = ShardRef(STREAM_ARN, "shardId-other")
    for state, reason in [
        (window_state(other, pad_sequence("5")), "delivered for"),
        ({"v": 1, "pending": []}, "state version 1"),
        ({**window_state(SHARD, None), "high": "12x"}, "not a sequence number"),
        (["not", "an", "object"], "not an object"),
    ]:
        high, why = delivered_high(state, SHARD)
        assert high is None
        assert why is not None
        assert reason in why
