"""A review of S4's fix (90aad0e, f566fc5): a shard whose start is unknown is read from the trim horizon.

Each test is a history AWS's documentation allows, played on moto's table and stream, marked strict
`xfail` while it shows the bug; docs/review-issue14-second.md ("S4's fix, reviewed") ranks them.
"""

from __future__ import annotations

from typing import Any

import pytest

import aggregator
from shard_reader import EMPTY_PAGES_AT_THE_TIP
from tests.unit.conftest import count_of
from tests.unit.test_aggregator_handler import Deployed
from tests.unit.test_review_exactly_once import TrimmedStream, use_streams
from tests.unit.test_review_exactly_once_second import ManyShards, stack  # noqa: F401  (the fixture)


class EmptyPagesFirst:
    """A stream whose trim horizon is followed by `empty` empty pages before its first record.

    AWS, *GetRecords* (DynamoDB Streams): "If there are no stream records available in the portion
    of the shard that the iterator points to, GetRecords returns an empty list. Note that it might
    take multiple calls to get to a portion of the shard that contains stream records."
    """

    def __init__(self, streams: Any, empty: int) -> None:
        self._streams = streams
        self.empty = empty

    def get_shard_iterator(self, **parameters: Any) -> Any:
        answer = self._streams.get_shard_iterator(**parameters)
        if parameters["ShardIteratorType"] != "TRIM_HORIZON":
            return answer
        return {**answer, "ShardIterator": f"empty|{self.empty}|{answer['ShardIterator']}"}

    def get_records(self, **parameters: Any) -> Any:
        iterator = parameters["ShardIterator"]
        if iterator.startswith("empty|"):
            _, left, real = iterator.split("|", 2)
            if int(left) > 0:
                return {"Records": [], "NextShardIterator": f"empty|{int(left) - 1}|{real}"}
            parameters = {**parameters, "ShardIterator": real}
        return self._streams.get_records(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams, name)


class NoStartingSequence:
    """DescribeStream lists the shard with an empty SequenceNumberRange while `hidden` is set.

    AWS, *SequenceNumberRange*: StartingSequenceNumber "Required: No". MiniStack lists its one shard
    this way while the stream holds no record (ministack/services/dynamodb_streams.py, `_describe_stream`:
    `if starting_seq:`).
    """

    def __init__(self, streams: Any) -> None:
        self._streams = streams
        self.hidden = True

    def describe_stream(self, **parameters: Any) -> Any:
        description = self._streams.describe_stream(**parameters)
        if self.hidden:
            for shard in description["StreamDescription"]["Shards"]:
                shard["SequenceNumberRange"] = {}
        return description

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams, name)


def test_s4r1_empty_pages_after_the_trim_horizon_hide_the_gap_of_a_shard_with_an_unknown_start(
    stack: Deployed,  # noqa: F811
    lambda_context: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """S4's own history (shard listed after 10,000 others, first five records trimmed), with the documented
    empty pages between the trim horizon and the first readable record: the gap is silent again."""
    # given ten downloads in a shard listed after 10,000 others, whose first five the aggregator never counted
    stack.write("song1", 10)
    records = stack.stream_records()
    # when DynamoDB trims those five, GetRecords answers four empty pages from the trim horizon,
    # and the mapping delivers the other five
    trimmed = TrimmedStream(ManyShards(stack.streams), records[4]["dynamodb"]["SequenceNumber"])
    use_streams(monkeypatch, EmptyPagesFirst(trimmed, empty=EMPTY_PAGES_AT_THE_TIP + 1))
    aggregator.lambda_handler(stack.window_event(records[5:], final=True), lambda_context)
    # then the gap is reported for a recount (90aad0e: 5 counted, checkpoint at r10, no message)
    assert count_of(stack.dynamodb, "song1", "2018-01") == 5
    assert stack.checkpoint() == records[-1]["dynamodb"]["SequenceNumber"]
    assert "records_trimmed" in [message["kind"] for message in stack.failure_messages()]


def test_s4r1_control_three_empty_pages_are_probed_through(
    stack: Deployed,  # noqa: F811
    lambda_context: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Control for the test above (passes): with fewer empty pages than the probe reads, the gap is reported."""
    stack.write("song1", 10)
    records = stack.stream_records()
    trimmed = TrimmedStream(ManyShards(stack.streams), records[4]["dynamodb"]["SequenceNumber"])
    use_streams(monkeypatch, EmptyPagesFirst(trimmed, empty=3))
    aggregator.lambda_handler(stack.window_event(records[5:], final=True), lambda_context)
    assert count_of(stack.dynamodb, "song1", "2018-01") == 5
    assert "records_trimmed" in [message["kind"] for message in stack.failure_messages()]


def test_s4r2_a_shard_first_seen_empty_reports_no_gap_when_nothing_was_trimmed(
    stack: Deployed,  # noqa: F811
    lambda_context: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shard is found, and seen first while it holds no record: nothing can have been trimmed unread."""
    # given a direct invocation (recover, an operator) of the shard while the stream holds no record,
    # which DescribeStream lists without a StartingSequenceNumber
    streams = NoStartingSequence(stack.streams)
    use_streams(monkeypatch, streams)
    aggregator.lambda_handler(stack.direct_event([]), lambda_context)
    # when ten downloads arrive, none trimmed, and the mapping delivers them in one window
    streams.hidden = False
    stack.write("song1", 10)
    records = stack.stream_records()
    aggregator.lambda_handler(stack.window_event(records, final=True), lambda_context)
    # then all ten are counted and the failure queue stays empty (90aad0e: a records_trimmed message, checkpoint null)
    assert count_of(stack.dynamodb, "song1", "2018-01") == 10
    assert stack.failure_messages() == []


def test_s4_held_a_gap_not_sent_is_held_and_sent_again_without_double_counting(
    stack: Deployed,  # noqa: F811
    lambda_context: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The failure queue refuses the report: the checkpoint stays, the next invocation reports it, counts stay exact."""
    # given S4's history, and a failure queue that refuses the first report
    stack.write("song1", 10)
    records = stack.stream_records()
    use_streams(monkeypatch, TrimmedStream(ManyShards(stack.streams), records[4]["dynamodb"]["SequenceNumber"]))
    send = aggregator.DEPENDENCIES.send_failures
    refusals = iter([True])
    monkeypatch.setattr(
        aggregator.DEPENDENCIES, "send_failures", lambda messages: False if next(refusals, False) else send(messages)
    )
    # when the window's final invocation fails for want of the report, and Lambda retries it
    with pytest.raises(aggregator.AggregatesNotWritten):
        aggregator.lambda_handler(stack.window_event(records[5:], final=True), lambda_context)
    held = stack.checkpoint()
    aggregator.lambda_handler(stack.window_event(records[5:], final=True), lambda_context)
    aggregator.lambda_handler(stack.window_event(records[5:], final=True), lambda_context)
    # then the checkpoint was held, the gap is reported exactly once, and the five readable downloads count once
    assert held is None
    assert [message["kind"] for message in stack.failure_messages()] == ["records_trimmed"]
    assert count_of(stack.dynamodb, "song1", "2018-01") == 5
    assert stack.checkpoint() == records[-1]["dynamodb"]["SequenceNumber"]


def test_a_shard_first_seen_empty_and_first_read_a_day_later_reports_what_may_have_been_trimmed(
    stack: Deployed,  # noqa: F811
    lambda_context: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Listed empty proves nothing after a day: "Stream records whose age exceeds this limit are subject to removal"."""
    # given the shard seen first while it held no record
    streams = NoStartingSequence(stack.streams)
    use_streams(monkeypatch, streams)
    aggregator.lambda_handler(stack.direct_event([]), lambda_context)
    # when ten downloads arrive, the first five are trimmed and the shard is first read 25 hours after that sight
    streams.hidden = False
    stack.write("song1", 10)
    records = stack.stream_records()
    use_streams(monkeypatch, TrimmedStream(streams, records[4]["dynamodb"]["SequenceNumber"]))
    later = aggregator.DEPENDENCIES.clock() + 25 * 3600
    monkeypatch.setattr(aggregator.DEPENDENCIES, "clock", lambda: later)
    aggregator.lambda_handler(stack.window_event(records[5:], final=True), lambda_context)
    # then the five readable ones are counted and the gap before them is reported for a recount
    assert count_of(stack.dynamodb, "song1", "2018-01") == 5
    assert [message["kind"] for message in stack.failure_messages()] == ["records_trimmed"]
