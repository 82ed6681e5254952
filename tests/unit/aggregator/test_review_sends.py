"""Review of d1b84b7 (failure reports sent ten at a time; the gap's bookkeeping once the gap report itself went).

Each test is a history AWS's documentation allows, on the stream model's DynamoDB and a BacklogStream, invoked as
test_window_steps.py invokes the shipped `process_delivery`.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from download_records import Schema
from leaderboard_core.bookkeeping import pad_sequence

from leaderboard_dev.bench.catch_up_memory import BacklogStream
from tests.stream_model.fake_dynamodb import FakeDynamoDB
from tests.unit.aggregator.test_window_steps import Clock, invoke_through_the_backlog

MALFORMED, TRIMMED_FROM, TRIMMED_TO, RECORDS = 12, 12, 20, 30


def _error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "GetRecords")


class TrimmedMidRead(BacklogStream):
    """Thirty downloads, the first twelve malformed (rejected). The first read gets a page of those twelve; before its
    next GetRecords, DynamoDB trims records 12..19 (24 hours old: "a stream record in the shard exceeds the 24 hour
    period and is trimmed", TrimmedDataAccessException), so the iterator after record 11 is refused and the read
    goes on from the trim horizon, record 20: a gap *after* records it has read."""

    def __init__(self) -> None:
        super().__init__(records=RECORDS, item_bytes=100, songs=3)
        self.trimmed = False

    def record(self, index: int) -> dict[str, Any]:
        record = super().record(index)
        if index < MALFORMED:
            record["dynamodb"]["NewImage"]["Timestamp"] = {"S": "not a timestamp"}
        return record

    def _index_of(self, parameters: dict[str, Any]) -> int:
        offset = int(parameters["SequenceNumber"]) - 10**20
        return offset // 100 + (0 if parameters["ShardIteratorType"] == "AT_SEQUENCE_NUMBER" else 1)

    def get_shard_iterator(self, **parameters: Any) -> dict[str, Any]:
        if self.trimmed:
            if parameters["ShardIteratorType"] == "TRIM_HORIZON":
                self.iterators += 1
                return {"ShardIterator": str(TRIMMED_TO)}
            if self._index_of(parameters) < TRIMMED_TO:
                raise _error("TrimmedDataAccessException")
        return super().get_shard_iterator(**parameters)

    def get_records(self, **parameters: Any) -> dict[str, Any]:
        position = int(parameters["ShardIterator"])
        if not self.trimmed and position == TRIMMED_FROM:
            self.trimmed = True  # records 12..19 trimmed between two GetRecords of one read
            raise _error("ExpiredIteratorException")
        if not self.trimmed and position == 0:
            parameters = {**parameters, "Limit": MALFORMED}
        return super().get_records(**parameters)


class TakesFirstSendOnly:
    """The failure queue: takes one SendMessageBatch, refuses the next (throttled), then takes everything."""

    def __init__(self) -> None:
        self.sends = 0
        self.refuse_second = True
        self.messages: list[dict[str, Any]] = []

    def __call__(self, messages: list[dict[str, Any]]) -> bool:
        self.sends += 1
        if self.sends == 2 and self.refuse_second:
            return False
        self.messages += messages
        return True


def test_reports_left_unsent_before_a_gap_met_mid_read_are_covered_by_a_gap_report_from_before_them() -> None:
    # given twelve malformed downloads, then eight trimmed between two pages of the read, then ten good ones
    dynamodb = FakeDynamoDB()
    stream = TrimmedMidRead()
    queue = TakesFirstSendOnly()
    # when the first invocation's queue takes the first batch of ten (the gap report, the first nine rejected)
    # and refuses the second (records 9, 10 and 11), and the retry's queue takes everything
    answers = []
    for _ in range(3):
        answers.append(invoke_through_the_backlog(stream, Clock(timeout_ms=60_000), queue, dynamodb))  # type: ignore[arg-type]
        if answers[-1] is not None and answers[-1]["reachedBound"]:
            break
    # then the reports the queue took are the gap and the first nine rejected; records 9..11, read before the gap, are
    # older than the trimmed records and so trimmed too: no reader can meet them again, and resume_after_gap skipping
    # them loses nothing readable. They are covered by a records_trimmed report whose range starts before them (the
    # first gap's from the step's start, the retry's from the checkpoint held before record 9): recover recounts
    # every board. Only their rejected_download messages (the malformed items' keys) are not in the queue.
    reported = {int(message["sequenceNumber"]) for message in queue.messages if message["kind"] == "rejected_download"}
    assert reported == {stream.sequence(index) for index in range(9)}
    gaps = [message for message in queue.messages if message["kind"] == "records_trimmed"]
    assert gaps
    assert all(gap["checkpoint"] is None or int(gap["checkpoint"]) < stream.sequence(9) for gap in gaps), gaps
    assert answers[-1] is not None and answers[-1]["reachedBound"]


# ------------------------------------------------ a refusal is not met again once a later write passed it

@pytest.mark.xfail(
    strict=True,
    reason="review d1b84b7: a contribution refused (an open band full, or no sort key to hold it by) below a contribution "
    "of the same aggregate that the same write added is passed by the watermark; the reader that re-reads it because "
    "its report was not sent (deadline margin, queue refused) finds it at or below the watermark, already_applied, "
    "and does not refuse or report it again (docs rule 10: 'the next reader meets and reports them')",
)
def test_a_refusal_whose_report_went_unsent_is_made_again_by_the_reader_that_rereads_it(dynamodb: Any) -> None:
    from leaderboard_core.band_holds import MAX_HELD
    from tests.unit.aggregator.test_band_holds import FENCE, KEY, NOW, SHARD, counted_with_an_open_band, record, store

    # given an aggregate under a repair's open band that already holds as many downloads as it may (MAX_HELD)
    counted_with_an_open_band(dynamodb, 0, [f"id{number}" for number in range(MAX_HELD)])
    aggregates = store(dynamodb, Schema())
    contributions = [record(101, "d1", 1, 1, created=NOW), record(102, "d2", 1, 1, created=FENCE + 1)]
    # when a step writes d1 (created by the fence: refused, the band is full) and d2 (after the fence: added) ...
    first = aggregates.apply(KEY, SHARD, contributions)
    assert ([c.sequence for c, _ in first.refused], first.added) == ([pad_sequence("101")], 1)
    # ... the step's report of d1 is not sent (the deadline margin, or a SendMessageBatch with d1 among its Failed),
    # so catch_up holds the checkpoint before 101, and the next reader reads 101 and 102 again
    again = aggregates.apply(KEY, SHARD, contributions)
    # then that reader refuses d1 again, so that its report is made (d1 is counted nowhere: the band does not hold it)
    assert [c.sequence for c, _ in again.refused] == [pad_sequence("101")], (again.already_applied, again.refused)
