"""An invocation reads its shard in bounded steps, within the one invocation: a window longer than one read budget,
a backlog of rejected records held one step at a time, and steps that end before the invocation's timeout.

The handler on moto's stream, read through pages of two records (GetRecords' `Limit`) and a read
budget of five records, so that a window of fifteen downloads is three budgets long; and the shipped
`process_delivery` on the stream model's DynamoDB and `BacklogStream`, as in test_catch_up_memory.py.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from botocore.exceptions import ClientError

import two_readers
from aggregator_settings import PER_WINDOW
from invocation_context import InvocationContext
from leaderboard_dev.backlog_stream import BacklogStream, backlog_invocation, catch_up_alone
from tests.stream_model.fake_dynamodb import FakeDynamoDB
from tests.unit.aggregator.handler_on_moto import Deployed, sequence_of
from tests.unit.conftest import FakeLambdaContext, count_of
from two_readers import AggregatesNotWritten

BUDGET, PAGE = 5, 2


class SmallPages:
    """moto's stream read through pages of `PAGE` records, each read's records (one GetShardIterator on) counted."""

    def __init__(self, streams: Any) -> None:
        self._streams = streams
        self.reads: list[int] = []
        self.pages = 0

    def get_shard_iterator(self, **parameters: Any) -> Any:
        self.reads.append(0)
        return self._streams.get_shard_iterator(**parameters)

    def get_records(self, **parameters: Any) -> Any:
        page = self._streams.get_records(**{**parameters, "Limit": PAGE})
        self.pages += 1
        self.reads[-1] += len(page.get("Records") or [])
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams, name)


class TimeForPages(FakeLambdaContext):
    """An invocation with time for `pages` more pages of the stream, then only enough to write what it read."""

    def __init__(self, stream: SmallPages, pages: int, deadline_margin_ms: int) -> None:
        super().__init__()
        self._stream, self._last_page, self._left = stream, stream.pages + pages, deadline_margin_ms + 1000

    def get_remaining_time_in_millis(self) -> int:
        return 60_000 if self._stream.pages < self._last_page else self._left


def a_window_of_three_budgets(deployed: Deployed, lambda_context: Any) -> tuple[SmallPages, dict[str, Any]]:
    """Fifteen downloads delivered in two non-final batches of a per_window window; the state they hand on."""
    deployed.configure(aggregate_writes=PER_WINDOW, read_budget_records=BUDGET)
    pages = SmallPages(deployed.streams)
    deployed.use_streams(pages)
    deployed.write("song1", 9)
    deployed.write("song2", 6)
    records = deployed.stream_records()
    state = deployed.invoke(deployed.window_event(records[:8]), lambda_context)["state"]
    state = deployed.invoke(deployed.window_event(records[8:], state=state), lambda_context)["state"]
    return pages, state


def test_a_final_invocation_counts_a_window_of_three_read_budgets_in_one_invocation_step_by_step(
    deployed: Deployed, lambda_context: Any
) -> None:
    # given a per_window window of fifteen downloads, three read budgets of five
    pages, state = a_window_of_three_budgets(deployed, lambda_context)
    pages.reads.clear()
    # when its final invocation runs, with time to spare
    deployed.invoke(deployed.window_event([], state=state, final=True), lambda_context)
    # then it counted the whole window without failing, reading at most a budget and a page per step
    assert (count_of(deployed.dynamodb, "song1", "2018-01"), count_of(deployed.dynamodb, "song2", "2018-01")) == (9, 6)
    assert len(pages.reads) >= 3
    assert max(pages.reads) <= BUDGET + PAGE


def test_a_final_invocation_logs_each_steps_range_and_writes_each_aggregate_once_per_step(
    deployed: Deployed, lambda_context: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # given a per_window window of fifteen downloads, three read budgets of five, and each download's song
    pages, state = a_window_of_three_budgets(deployed, lambda_context)
    song_at = {int(sequence_of(r)): r["dynamodb"]["Keys"]["songID"]["S"] for r in deployed.stream_records()}
    pages.reads.clear()
    # when its final invocation counts it step by step
    deployed.invoke(deployed.window_event([], state=state, final=True), lambda_context)
    # then its summary names one range per read that met records, in the shard's order, covering every download
    summary = [record for record in caplog.records if record.getMessage() == "batch summary"][-1]
    ranges = [(int(first), int(last)) for first, last in summary.read_ranges]
    assert len(ranges) == len([read for read in pages.reads if read]) >= 3
    assert all(first <= last < next_first for (first, last), (next_first, _) in pairwise(ranges))
    assert ranges[0][0] <= min(song_at)
    assert ranges[-1][1] >= max(song_at)
    # and it wrote each song once per step that read it, as the stream's own records in each range say
    per_step = sum(len({song for at, song in song_at.items() if first <= at <= last}) for first, last in ranges)
    assert summary.aggregate_writes == summary.distinct_aggregates == per_step


def test_a_final_invocation_out_of_time_mid_window_fails_and_its_retry_counts_the_window_exactly(
    deployed: Deployed, lambda_context: Any
) -> None:
    # given a per_window window of fifteen downloads, three read budgets of five
    pages, state = a_window_of_three_budgets(deployed, lambda_context)
    final = deployed.window_event([], state=state, final=True)
    # when its final invocation has time for one step only
    with pytest.raises(AggregatesNotWritten):
        deployed.invoke(final, TimeForPages(pages, 3, deployed.settings.deadline_margin_ms))
    # then it fails, and its retry, with time to spare, counts every download of the window once
    deployed.invoke(final, lambda_context)
    assert (count_of(deployed.dynamodb, "song1", "2018-01"), count_of(deployed.dynamodb, "song2", "2018-01")) == (9, 6)


MEMORY_TABLE, MEMORY_PROGRESS_TABLE = "memory-downloads", "memory-progress"


class MalformedBacklog(BacklogStream):
    """The same backlog, every download's Timestamp malformed (a producer's bug, a wrong TIMESTAMP attribute):
    each record is Rejected, reported to the failure queue (which takes it) and passed by the checkpoint."""

    def record(self, index: int) -> dict[str, Any]:
        record = super().record(index)
        record["dynamodb"]["NewImage"]["Timestamp"] = {"S": "not a timestamp"}
        return record


@pytest.mark.slow  # a backlog of tens of thousands of records: CI runs it, make check does not
def test_an_invocation_passing_100000_rejected_records_of_4_kb_in_steps_peaks_under_256_mib() -> None:
    # given a shard whose checkpoint lags 100,000 malformed downloads of 4 KB (400 MB) behind the bound
    stream = MalformedBacklog(records=100_000, item_bytes=4096)
    # when the aggregator is invoked through the backlog's end, with time enough to read it all, in a process of its
    # own (its log written out and kept by nobody, as on Lambda)
    (invocation,), stream = catch_up_alone("two_readers", FakeDynamoDB, stream, 2, MEMORY_TABLE, MEMORY_PROGRESS_TABLE)
    # then that one invocation reads the whole backlog in several steps (every record rejected and reported)...
    assert invocation.caught_up
    assert invocation.records_read == 100_000
    assert invocation.downloads == 0
    assert stream.iterators > 1
    # ...and, as for counted downloads, peaks under 256 MiB: one step's records at a time
    assert invocation.peak_mib < 256, invocation


class Clock:
    """Simulated time of one invocation: each call to the stream or the failure queue costs what it costs on AWS."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.elapsed_ms = 0.0

    def remaining_ms(self) -> int:
        return int(self.timeout_ms - self.elapsed_ms)

    def spend(self, ms: float) -> None:
        self.elapsed_ms += ms


class TimedMalformedBacklog(MalformedBacklog):
    """GetShardIterator 20 ms, GetRecords (a page of up to 1,000 records) 50 ms."""

    def __init__(self, clock: Clock, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.clock = clock

    def get_shard_iterator(self, **parameters: Any) -> dict[str, Any]:
        self.clock.spend(20)
        return super().get_shard_iterator(**parameters)

    def get_records(self, **parameters: Any) -> dict[str, Any]:
        self.clock.spend(50)
        return super().get_records(**parameters)


class TimedFailureQueue:
    """The failure queue: `batch_ms` per SendMessageBatch of ten; what it took, by sequence number."""

    def __init__(self, clock: Clock, batch_ms: float) -> None:
        self.clock, self.batch_ms = clock, batch_ms
        self.sequences: list[int] = []

    def __call__(self, messages: list[Any]) -> bool:
        self.clock.spend(self.batch_ms * -(-len(messages) // 10))
        self.sequences += [int(message["sequenceNumber"]) for message in messages]
        return True


def invoke_through_the_backlog(
    stream: BacklogStream, clock: Clock, queue: TimedFailureQueue, dynamodb: FakeDynamoDB
) -> dict[str, Any] | None:
    """A direct invocation through the backlog's end, deadline margin 5 s (the default); None if it raised (retried)."""
    settings, dependencies, delivery = backlog_invocation(
        dynamodb, stream, MEMORY_TABLE, MEMORY_PROGRESS_TABLE, deadline_margin_ms=5000, send_failures=queue
    )
    try:
        response, _ = two_readers.process_delivery(
            delivery, InvocationContext(settings, dependencies, clock.remaining_ms)
        )
    except two_readers.AggregatesNotWritten:  # out of time before its bound: retried
        return None
    return response


@pytest.mark.slow  # a backlog of tens of thousands of records: CI runs it, make check does not
def test_an_invocation_through_60000_rejected_records_ends_before_its_timeout() -> None:
    # given a 60-second invocation, a backlog of 60,000 rejected records (three read budgets) behind its bound,
    # GetRecords at 50 ms a page and SendMessageBatch at 10 ms per batch of ten (a step's reports: 20 s)
    clock = Clock(timeout_ms=60_000)
    stream = TimedMalformedBacklog(clock, records=60_000, item_bytes=100)
    queue = TimedFailureQueue(clock, batch_ms=10)
    # when it is invoked through the backlog's end
    invoke_through_the_backlog(stream, clock, queue, FakeDynamoDB())
    # then it handed its answer back before Lambda's timeout: no step began that could not end within it
    assert clock.remaining_ms() > 0, (clock.elapsed_ms, len(queue.sequences))


def test_reports_that_outlast_the_invocation_stop_at_the_deadline_and_the_retry_sends_the_rest_once() -> None:
    # given a backlog of 20,000 rejected records (one read budget) and a failure queue at 50 ms per batch of ten,
    # so that one step's reports take 100 s of a 60-second invocation
    dynamodb = FakeDynamoDB()
    clock = Clock(timeout_ms=60_000)
    stream = TimedMalformedBacklog(clock, records=20_000, item_bytes=100)
    queue = TimedFailureQueue(clock, batch_ms=50)
    # when it is invoked through the backlog's end, and retried until it answers
    answers = []
    for _ in range(3):
        clock.elapsed_ms = 0
        answers.append(invoke_through_the_backlog(stream, clock, queue, dynamodb))
        # then each invocation stops sending at its deadline margin, before its timeout...
        assert clock.remaining_ms() > 0, clock.elapsed_ms
        if answers[-1] is not None:
            break
    # ...the first fails (its reports unsent hold the checkpoint before them) and a retry reaches the bound,
    # every rejected record reported exactly once
    assert answers[0] is None
    assert answers[-1] is not None
    assert answers[-1]["reachedBound"]
    assert sorted(queue.sequences) == [stream.sequence(index) for index in range(20_000)]


# A gap met mid-read after reports left unsent: the gap report covers them.

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
    assert answers[-1] is not None
    assert answers[-1]["reachedBound"]
