"""The window state: folded downloads per aggregate, redeliveries skipped, and a faithful JSON round trip."""

from __future__ import annotations

import pytest

from delivery import ShardRef
from download_records import AggregateKey, Download, pad_sequence
from tests.streams import SHARD_ID, STREAM_ARN
from window_state import InvalidState, Segment, WindowState, fold, from_lambda_state, merged, to_lambda_state

SHARD = ShardRef(STREAM_ARN, SHARD_ID)
JANUARY = AggregateKey("song1", "2018-01")
FEBRUARY = AggregateKey("song1", "2018-02")


def download(sequence: int, key: AggregateKey = JANUARY, created: int | None = 1000) -> Download:
    return Download(key, pad_sequence(str(sequence)), str(sequence), created)


def test_fold_groups_a_batch_per_aggregate_in_sequence_order() -> None:
    # given a batch whose records arrive out of order, as a retry may deliver them
    state = WindowState(shard=SHARD)
    # when it is folded
    outcome = fold(state, [download(5), download(3, FEBRUARY), download(1), download(4)], now=2000)
    # then each aggregate holds one exact segment, and the state remembers the highest sequence
    assert (outcome.folded, outcome.redelivered) == (4, 0)
    assert [(s.count, s.low[-1], s.high[-1], s.sequences) for s in state.pending[JANUARY]] == [
        (3, "1", "5", tuple(pad_sequence(n) for n in ("1", "4", "5")))
    ]
    assert state.high == pad_sequence("5")


def test_records_at_or_below_the_high_mark_are_redeliveries_and_skipped() -> None:
    state = WindowState(shard=SHARD)
    fold(state, [download(1), download(2)], now=2000)
    outcome = fold(state, [download(2), download(3)], now=2000)
    assert (outcome.folded, outcome.redelivered) == (1, 1)
    assert sum(s.count for s in state.pending[JANUARY]) == 3


def test_unknown_creation_time_is_zero_at_the_low_end_and_now_at_the_high_end() -> None:
    state = WindowState(shard=SHARD)
    fold(state, [download(1, created=None), download(2, created=None)], now=2000)
    segment = state.pending[JANUARY][0]
    assert (segment.low_created, segment.high_created) == (0, 2000)


def test_merging_joins_never_attempted_neighbours_only() -> None:
    a = Segment(2, pad_sequence("1"), pad_sequence("2"), 10, 11)
    b = Segment(1, pad_sequence("4"), pad_sequence("4"), 12, 12)
    attempted = Segment(3, pad_sequence("6"), pad_sequence("9"), 13, 14, attempted=True)
    c = Segment(1, pad_sequence("10"), pad_sequence("10"), 15, 15)
    assert [(s.count, s.low[-1], s.high[-2:]) for s in merged([a, b, attempted, c])] == [
        (3, "1", "04"),
        (3, "6", "09"),
        (1, "0", "10"),
    ]


@pytest.mark.parametrize(("watermark", "above"), [("0", 3), ("3", 2), ("4", 1), ("5", 1), ("7", 0), ("9", 0)])
def test_a_segment_counts_what_lies_above_a_watermark(watermark: str, above: int) -> None:
    exact = Segment(3, pad_sequence("3"), pad_sequence("7"), 1, 1, sequences=tuple(pad_sequence(n) for n in "347"))
    assert exact.above(pad_sequence(watermark)) == above


def test_a_watermark_inside_a_segment_without_its_list_is_unknowable() -> None:
    compressed = Segment(3, pad_sequence("3"), pad_sequence("7"), 1, 1)
    assert compressed.above(pad_sequence("5")) is None
    assert compressed.above(pad_sequence("2")) == 3
    assert compressed.above(pad_sequence("7")) == 0


def test_the_state_survives_its_json_round_trip() -> None:
    # given pending downloads in two aggregates, one of them attempted
    state = WindowState(shard=SHARD)
    fold(state, [download(1), download(2, FEBRUARY), download(3)], now=2000)
    state.pending[FEBRUARY] = [Segment(1, pad_sequence("2"), pad_sequence("2"), 1000, 1000, attempted=True)]
    # when it goes through Lambda as JSON and comes back
    restored = from_lambda_state(to_lambda_state(state), SHARD, SHARD_ID)
    # then it is the same, but for the exact lists that only the current invocation keeps
    assert restored.high == state.high
    assert restored.shard == SHARD
    assert restored.pending[JANUARY] == [Segment(2, pad_sequence("1"), pad_sequence("3"), 1000, 1000)]
    assert restored.pending[FEBRUARY][0].attempted


def test_an_empty_state_starts_the_window() -> None:
    assert from_lambda_state({}, SHARD, SHARD_ID) == WindowState(shard=SHARD)


EMPTY_SEGMENT = [0, "1", "1", 0, 0, 0]


@pytest.mark.parametrize(
    "raw",
    [
        {"v": 2, "stream": STREAM_ARN, "shard": SHARD_ID, "high": None, "pending": []},
        {"v": 1, "stream": STREAM_ARN, "shard": "shardId-other", "high": None, "pending": []},
        {"v": 1, "stream": STREAM_ARN, "shard": SHARD_ID, "high": "12a", "pending": []},
        {"v": 1, "stream": STREAM_ARN, "shard": SHARD_ID, "high": None, "pending": [["s", "m", [EMPTY_SEGMENT]]]},
        {"v": 1, "stream": STREAM_ARN, "shard": SHARD_ID},
        {"1": 282},
    ],
    ids=["version", "other shard", "bad sequence", "empty segment", "missing field", "someone else's"],
)
def test_a_state_this_function_did_not_write_for_this_shard_is_invalid(raw: dict) -> None:
    with pytest.raises(InvalidState):
        from_lambda_state(raw, SHARD, SHARD_ID)
