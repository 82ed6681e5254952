"""The emulated DynamoDB stream mapping follows the Lambda developer guide, rule by rule.

Each test drives one shard through a fake function and a fake clock; the quoted sentences are the
rules the engine cites (leaderboard_dev/emulators/stream_mapping.py).
"""

from __future__ import annotations

import ast
import copy
import datetime
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leaderboard_dev.emulators import localstack, ministack
from leaderboard_dev.emulators.adversarial_retries import (
    ADVERSARIAL_RETRIES_VARIABLE,
    DIRECTORY_NAME,
    AdversarialRetries,
    SwitchFiles,
    directory_from_environment,
    read_journal,
    switch_off,
    switch_on,
)
from leaderboard_dev.emulators.stream_mapping import (
    POLL_INTERVAL_SECONDS,
    RECORD_AGE_EXCEEDED,
    RETRY_ATTEMPTS_EXHAUSTED,
    Gathering,
    InvocationNotDelivered,
    MappingSettings,
    ShardDelivery,
    insertion_time_within_the_minute,
)
from tests.property_examples import examples

STREAM_ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/songs/stream/2020-12-09T07:00:00.000"
SHARD_ID = "shardId-00000001607497000000-0abc1234"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:000000000000:function:aggregate"
# 2020-12-09T07:04:00Z, the start of a 120-second window in the guide's example.
WINDOW_START = 1607497440.0


def epoch(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


class FakeClock:
    def __init__(self, now: float) -> None:
        self.moment = now
        self.pauses: list[float] = []
        self.on_sleep: Callable[[], None] = lambda: None

    def now(self) -> float:
        return self.moment

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.moment += seconds
        self.on_sleep()


Response = tuple[bool, Any]


class FakeFunction:
    """Records every payload; answers with `behaviour`, by default a window aggregation that counts keys."""

    def __init__(self, behaviour: Callable[[dict[str, Any]], Response] | None = None) -> None:
        self.payloads: list[dict[str, Any]] = []
        self.behaviour = behaviour or count_keys

    def __call__(self, payload: dict[str, Any]) -> Response:
        self.payloads.append(copy.deepcopy(payload))
        return self.behaviour(payload)

    def batches(self) -> list[list[int]]:
        return [numbers(payload) for payload in self.payloads]


def numbers(payload: dict[str, Any]) -> list[int]:
    return [int(record["dynamodb"]["SequenceNumber"]) for record in payload["Records"]]


def count_keys(payload: dict[str, Any]) -> Response:
    state = dict(payload.get("state") or {})
    for record in payload["Records"]:
        key = record["dynamodb"]["Keys"]["pk"]["S"]
        state[key] = state.get(key, 0) + 1
    return False, {"state": state}


def record(number: int, at: float) -> dict[str, Any]:
    return {
        "eventID": f"event-{number}",
        "eventName": "INSERT",
        "eventSource": "aws:dynamodb",
        "dynamodb": {
            "ApproximateCreationDateTime": at,
            "Keys": {"pk": {"S": f"key-{number}"}},
            "SequenceNumber": str(number).zfill(21),
        },
        "eventSourceARN": STREAM_ARN,
    }


def records(*numbers_and_times: tuple[int, float]) -> list[dict[str, Any]]:
    return [record(number, at) for number, at in numbers_and_times]


class Harness:
    def __init__(self, now: float = WINDOW_START + 1, **settings: Any) -> None:
        self.clock = FakeClock(now)
        self.function = FakeFunction()
        self.failure_records: list[dict[str, Any]] = []
        self.settings = MappingSettings(function_arn=FUNCTION_ARN, **settings)
        self.delivery = ShardDelivery(
            self.settings, SHARD_ID, STREAM_ARN, self.function, self.failure_records.append, self.clock
        )


def windowed(**settings: Any) -> Harness:
    return Harness(tumbling_window_seconds=120, **settings)


def fails_when(poisoned: Callable[[dict[str, Any]], bool], then: Callable[[dict[str, Any]], Response]) -> Any:
    def behaviour(payload: dict[str, Any]) -> Response:
        return (True, {"errorMessage": "boom"}) if poisoned(payload) else then(payload)

    return behaviour


def fails_times(times: int, then: Callable[[dict[str, Any]], Response]) -> Any:
    failures = iter(range(times))

    def behaviour(payload: dict[str, Any]) -> Response:
        return (True, {"errorMessage": "boom"}) if next(failures, None) is not None else then(payload)

    return behaviour


def succeeds(payload: dict[str, Any]) -> Response:
    return False, None


# -- tumbling windows --------------------------------------------------------------------------


def test_window_boundaries_are_multiples_of_the_window_length_around_the_records_timestamp() -> None:
    # given a 120-second window and a record inserted at 07:05:13
    harness = windowed()
    # when it is delivered
    harness.delivery.deliver([record(1, epoch("2020-12-09T07:05:13Z"))])
    # then the invocation names the window the guide's example shows
    assert harness.function.payloads[0]["window"] == {"start": "2020-12-09T07:04:00Z", "end": "2020-12-09T07:06:00Z"}


def test_windows_follow_the_insertion_time_the_emulator_knows_better_than_the_records_stamp() -> None:
    # given 5-second windows, and an emulator that stamps records to the minute but knows better
    clock = FakeClock(epoch("2020-12-09T07:06:24Z"))
    function = FakeFunction()
    delivery = ShardDelivery(
        MappingSettings(tumbling_window_seconds=5),
        SHARD_ID,
        STREAM_ARN,
        function,
        clock=clock,
        insertion_time=lambda record: epoch("2020-12-09T07:06:23Z"),
    )
    # when a record stamped 07:06:00 is delivered
    delivery.deliver([record(1, epoch("2020-12-09T07:06:00Z"))])
    # then its window is the one of its insertion time
    assert function.payloads[0]["window"] == {"start": "2020-12-09T07:06:20Z", "end": "2020-12-09T07:06:25Z"}


def test_a_record_stamped_to_the_minute_was_inserted_within_that_minute_and_before_it_was_read() -> None:
    stamped = epoch("2020-12-09T07:06:00Z")
    # read promptly: the read time
    assert insertion_time_within_the_minute(stamped, stamped + 23.5) == stamped + 23.5
    # read from a backlog: the end of its minute
    assert insertion_time_within_the_minute(stamped, stamped + 600) == pytest.approx(stamped + 60, abs=0.01)
    # never before its stamp
    assert insertion_time_within_the_minute(stamped, stamped - 1) == stamped


def test_a_window_invocation_carries_the_shard_the_stream_the_state_and_both_flags() -> None:
    harness = windowed()
    harness.delivery.deliver(records((1, WINDOW_START + 5)))
    payload = harness.function.payloads[0]
    assert payload["shardId"] == SHARD_ID
    assert payload["eventSourceARN"] == STREAM_ARN
    assert payload["state"] == {}
    assert payload["isFinalInvokeForWindow"] is False
    assert payload["isWindowTerminatedEarly"] is False
    assert numbers(payload) == [1]


def test_each_invocation_of_a_window_receives_the_state_the_previous_one_returned() -> None:
    # given batches of two within one window
    harness = windowed(batch_size=2)
    # when five records arrive
    harness.delivery.deliver(records(*[(n, WINDOW_START + n) for n in range(1, 6)]))
    # then three invocations in order, each starting from the state the previous one returned
    assert harness.function.batches() == [[1, 2], [3, 4], [5]]
    assert [payload["state"] for payload in harness.function.payloads] == [
        {},
        {"key-1": 1, "key-2": 1},
        {"key-1": 1, "key-2": 1, "key-3": 1, "key-4": 1},
    ]


def test_a_response_without_state_is_a_failed_invocation_retried_with_the_previous_state() -> None:
    # "If the response does not contain a state property, Lambda considers this a failed invocation."
    harness = windowed(batch_size=1)
    answers = iter([count_keys, lambda payload: (False, {"batchItemFailures": []}), count_keys])
    harness.function.behaviour = lambda payload: next(answers)(payload)
    harness.delivery.deliver(records((1, WINDOW_START + 1), (2, WINDOW_START + 2)))
    assert harness.function.batches() == [[1], [2], [2]]
    assert harness.function.payloads[1]["state"] == harness.function.payloads[2]["state"] == {"key-1": 1}


def test_a_function_error_leaves_the_state_of_the_last_successful_invocation() -> None:
    # given a function that fails once on the second record
    harness = windowed(batch_size=1)
    failed_once: list[bool] = []

    def fails_once_on_record_2(payload: dict[str, Any]) -> Response:
        if numbers(payload) == [2] and not failed_once:
            failed_once.append(True)
            return True, {"errorMessage": "boom"}
        return count_keys(payload)

    harness.function.behaviour = fails_once_on_record_2
    harness.delivery.deliver(records((1, WINDOW_START + 1), (2, WINDOW_START + 2), (3, WINDOW_START + 3)))
    assert harness.function.batches() == [[1], [2], [2], [3]]
    assert [payload["state"] for payload in harness.function.payloads] == [
        {},
        {"key-1": 1},
        {"key-1": 1},
        {"key-1": 1, "key-2": 1},
    ]


def test_the_final_invocation_comes_on_tick_once_the_window_has_ended_even_without_new_records() -> None:
    harness = windowed()
    harness.delivery.deliver(records((1, WINDOW_START + 1), (2, WINDOW_START + 2)))
    # when the clock has not reached the end yet, nothing happens
    harness.clock.moment = WINDOW_START + 119
    assert harness.delivery.tick() is False
    # then at the end the final invocation carries no record and the window's state
    harness.clock.moment = WINDOW_START + 120
    assert harness.delivery.tick() is True
    final = harness.function.payloads[-1]
    assert final["Records"] == []
    assert final["isFinalInvokeForWindow"] is True
    assert final["isWindowTerminatedEarly"] is False
    assert final["state"] == {"key-1": 1, "key-2": 1}
    assert final["window"] == {"start": "2020-12-09T07:04:00Z", "end": "2020-12-09T07:06:00Z"}
    # and the state is dropped: nothing more to close, the next window starts empty
    assert harness.delivery.tick() is False
    harness.delivery.deliver(records((3, WINDOW_START + 130)))
    assert harness.function.payloads[-1]["state"] == {}
    assert harness.function.payloads[-1]["window"]["start"] == "2020-12-09T07:06:00Z"


def test_the_first_record_of_the_next_window_closes_the_current_window_first() -> None:
    # given records of two consecutive windows in one read, within the batch size
    harness = windowed(batch_size=10)
    harness.delivery.deliver(records((1, WINDOW_START + 100), (2, WINDOW_START + 110), (3, WINDOW_START + 125)))
    # then a batch never spans the two windows, and the final invocation of the first comes in between
    assert [(numbers(p), p["isFinalInvokeForWindow"], p["window"]["start"]) for p in harness.function.payloads] == [
        ([1, 2], False, "2020-12-09T07:04:00Z"),
        ([], True, "2020-12-09T07:04:00Z"),
        ([3], False, "2020-12-09T07:06:00Z"),
    ]
    assert harness.function.payloads[2]["state"] == {}


def test_an_unsuccessful_final_invocation_suspends_processing_until_it_succeeds() -> None:
    # given unlimited retries (the default) and a final invocation that fails twice
    harness = windowed()
    harness.delivery.deliver(records((1, WINDOW_START + 1)))
    harness.function.behaviour = fails_times(2, count_keys)
    # when the next window's first record arrives
    harness.delivery.deliver(records((2, WINDOW_START + 121)))
    # then the final invocation is retried with the same state before the next window gets its record
    flags = [(p["isFinalInvokeForWindow"], numbers(p), p["state"]) for p in harness.function.payloads]
    assert flags == [
        (False, [1], {}),
        (True, [], {"key-1": 1}),
        (True, [], {"key-1": 1}),
        (True, [], {"key-1": 1}),
        (False, [2], {}),
    ]
    assert harness.failure_records == []


def test_a_final_invocation_that_exhausts_its_retries_sends_the_window_to_the_failure_destination() -> None:
    harness = windowed(maximum_retry_attempts=1, batch_size=2)
    harness.delivery.deliver(records((1, WINDOW_START + 1), (2, WINDOW_START + 2), (3, WINDOW_START + 3)))
    harness.function.behaviour = fails_when(lambda payload: payload["isFinalInvokeForWindow"], count_keys)
    harness.clock.moment = WINDOW_START + 121
    assert harness.delivery.tick() is True
    # then 1 + 1 final invocations, and a failure record naming the window's records
    assert sum(p["isFinalInvokeForWindow"] for p in harness.function.payloads) == 2
    [failure] = harness.failure_records
    assert failure["requestContext"]["condition"] == RETRY_ATTEMPTS_EXHAUSTED
    assert failure["requestContext"]["approximateInvokeCount"] == 2
    assert failure["responseContext"]["functionError"] == "Unhandled"
    info = failure["DDBStreamBatchInfo"]
    assert (info["startSequenceNumber"], info["endSequenceNumber"], info["batchSize"]) == (
        "1".zfill(21),
        "3".zfill(21),
        3,
    )
    # and the window is over: the shard moves on
    assert harness.delivery.open_window is None


def test_a_state_over_the_limit_terminates_the_window_early_and_the_window_continues_from_an_empty_state() -> None:
    harness = windowed(batch_size=1, state_limit_bytes=20)
    harness.delivery.deliver(records((1, WINDOW_START + 1), (2, WINDOW_START + 2), (3, WINDOW_START + 3)))
    summary = [
        (numbers(p), p["isFinalInvokeForWindow"], p["isWindowTerminatedEarly"], p["state"])
        for p in harness.function.payloads
    ]
    assert summary == [
        ([1], False, False, {}),
        ([2], False, False, {"key-1": 1}),
        ([], True, True, {"key-1": 1, "key-2": 1}),
        ([3], False, False, {}),
    ]
    assert harness.delivery.open_window == (int(WINDOW_START), int(WINDOW_START) + 120)


def test_the_end_of_the_shard_closes_its_window() -> None:
    harness = windowed()
    harness.delivery.deliver(records((1, WINDOW_START + 1)))
    assert harness.delivery.end_of_shard() is True
    assert harness.function.payloads[-1]["isFinalInvokeForWindow"] is True
    assert harness.delivery.open_window is None


def test_batch_item_failures_beside_a_state_fail_the_invocation_which_is_retried_with_the_previous_state() -> None:
    # AWS documents nothing about the combination; the engine retries the whole batch from the previous state.
    harness = windowed(report_batch_item_failures=True, batch_size=2)
    answers = iter([(False, {"state": {"x": 1}, "batchItemFailures": [{"itemIdentifier": "2".zfill(21)}]})])
    harness.function.behaviour = lambda payload: next(answers, None) or count_keys(payload)
    harness.delivery.deliver(records((1, WINDOW_START + 1), (2, WINDOW_START + 2)))
    assert harness.function.batches() == [[1, 2], [1, 2]]
    assert harness.function.payloads[1]["state"] == {}


def test_windows_follow_the_retry_policies_with_bisection() -> None:
    # given a record that always fails, bisection and one retry
    harness = windowed(batch_size=4, bisect_batch_on_function_error=True, maximum_retry_attempts=1)
    harness.function.behaviour = fails_when(lambda payload: 3 in numbers(payload), count_keys)
    harness.delivery.deliver(records(*[(n, WINDOW_START + n) for n in range(1, 5)]))
    # then the halves are retried from the state of the last success, and the bad record is discarded
    assert [(numbers(p), p["state"]) for p in harness.function.payloads] == [
        ([1, 2, 3, 4], {}),
        ([1, 2], {}),
        ([3, 4], {"key-1": 1, "key-2": 1}),
        ([3], {"key-1": 1, "key-2": 1}),
        ([3], {"key-1": 1, "key-2": 1}),
        ([4], {"key-1": 1, "key-2": 1}),
    ]
    assert [f["DDBStreamBatchInfo"]["startSequenceNumber"] for f in harness.failure_records] == ["3".zfill(21)]
    harness.clock.moment = WINDOW_START + 120
    harness.delivery.tick()
    assert harness.function.payloads[-1]["state"] == {"key-1": 1, "key-2": 1, "key-4": 1}


# -- retries, bisection, failure destination (no window) ---------------------------------------


def test_records_are_delivered_in_order_in_batches_of_at_most_batch_size() -> None:
    harness = Harness(batch_size=2)
    harness.function.behaviour = succeeds
    assert harness.delivery.deliver(records(*[(n, WINDOW_START) for n in range(1, 6)])) == 5
    assert harness.function.batches() == [[1, 2], [3, 4], [5]]
    assert "window" not in harness.function.payloads[0]


def test_a_failing_batch_is_retried_whole_until_the_retry_quota_then_sent_to_the_failure_destination() -> None:
    # given two retries and no bisection
    harness = Harness(batch_size=10, maximum_retry_attempts=2, retry_interval_seconds=0.5)
    harness.function.behaviour = lambda payload: (True, {"errorMessage": "boom"})
    harness.delivery.deliver(records((1, WINDOW_START - 30), (2, WINDOW_START - 20)))
    # then 1 + 2 invocations of the whole batch, paced, and one failure record
    assert harness.function.batches() == [[1, 2]] * 3
    assert harness.clock.pauses == [0.5, 0.5]
    [failure] = harness.failure_records
    assert failure["requestContext"]["condition"] == RETRY_ATTEMPTS_EXHAUSTED
    assert failure["requestContext"]["approximateInvokeCount"] == 3
    assert failure["requestContext"]["functionArn"] == FUNCTION_ARN
    assert failure["responseContext"] == {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"}
    assert failure["version"] == "1.0"
    assert failure["timestamp"] == "2020-12-09T07:04:02.000Z"
    assert failure["DDBStreamBatchInfo"] == {
        "shardId": SHARD_ID,
        "startSequenceNumber": "1".zfill(21),
        "endSequenceNumber": "2".zfill(21),
        "approximateArrivalOfFirstRecord": "2020-12-09T07:03:30Z",
        "approximateArrivalOfLastRecord": "2020-12-09T07:03:40Z",
        "batchSize": 2,
        "streamArn": STREAM_ARN,
    }


def test_bisection_isolates_a_bad_record_and_splitting_does_not_count_towards_the_retry_quota() -> None:
    # given no retries at all, but bisection
    harness = Harness(batch_size=4, maximum_retry_attempts=0, bisect_batch_on_function_error=True)
    harness.function.behaviour = fails_when(lambda payload: 3 in numbers(payload), succeeds)
    harness.delivery.deliver(records(*[(n, WINDOW_START) for n in range(1, 5)]))
    # then the failed batches were split, not discarded; only the bad record was, after one invocation of its own
    assert harness.function.batches() == [[1, 2, 3, 4], [1, 2], [3, 4], [3], [4]]
    [failure] = harness.failure_records
    assert failure["DDBStreamBatchInfo"]["batchSize"] == 1
    assert failure["DDBStreamBatchInfo"]["startSequenceNumber"] == "3".zfill(21)
    assert failure["requestContext"]["approximateInvokeCount"] == 1


def test_a_batch_that_never_reached_the_function_is_retried_without_counting() -> None:
    # "This doesn't apply to service errors or throttles where the batch didn't reach the function."
    harness = Harness(maximum_retry_attempts=0)
    throttles = iter(range(2))

    def throttled_twice(payload: dict[str, Any]) -> Response:
        if next(throttles, None) is not None:
            raise InvocationNotDelivered("TooManyRequestsException")
        return False, None

    harness.function.behaviour = throttled_twice
    assert harness.delivery.deliver(records((1, WINDOW_START))) == 1
    assert harness.function.batches() == [[1]] * 3
    assert harness.failure_records == []


def test_records_older_than_the_maximum_age_are_not_sent_but_reported() -> None:
    # given a maximum age of one minute and a record already two minutes old
    harness = Harness(maximum_record_age_seconds=60)
    harness.function.behaviour = succeeds
    harness.delivery.deliver(records((1, WINDOW_START - 120), (2, WINDOW_START - 10)))
    # then only the young record reaches the function, the old one goes to the destination uninvoked
    assert harness.function.batches() == [[2]]
    [failure] = harness.failure_records
    assert failure["requestContext"]["condition"] == RECORD_AGE_EXCEEDED
    assert failure["requestContext"]["approximateInvokeCount"] == 0
    assert "responseContext" not in failure
    assert failure["DDBStreamBatchInfo"]["startSequenceNumber"] == "1".zfill(21)


def test_records_too_old_are_discarded_before_a_batch_is_formed_so_the_next_batch_is_full() -> None:
    # given batches of three, a maximum age of one minute, and two records already two minutes old
    harness = Harness(batch_size=3, maximum_record_age_seconds=60)
    harness.function.behaviour = succeeds
    old = [(number, WINDOW_START - 120) for number in (1, 2)]
    young = [(number, WINDOW_START - 10) for number in (3, 4, 5, 6)]
    # when the six records are delivered
    assert harness.delivery.deliver(records(*old, *young)) == 6
    # then the old ones are reported uninvoked and the first batch is three young ones, as the model cuts it
    assert harness.function.batches() == [[3, 4, 5], [6]]
    [failure] = harness.failure_records
    assert failure["requestContext"]["condition"] == RECORD_AGE_EXCEEDED
    assert failure["DDBStreamBatchInfo"]["batchSize"] == 2
    assert failure["requestContext"]["approximateInvokeCount"] == 0


def test_a_failing_batch_is_retried_until_its_records_exceed_the_maximum_age() -> None:
    # given unlimited retries, ten seconds apart, and a maximum age of one minute
    harness = Harness(maximum_record_age_seconds=60, retry_interval_seconds=10)
    harness.function.behaviour = lambda payload: (True, {"errorMessage": "boom"})
    harness.delivery.deliver(records((1, WINDOW_START)))
    # then it is invoked while the record is at most a minute old (at 1, 11, ... 51 s), then discarded
    assert len(harness.function.payloads) == 6
    [failure] = harness.failure_records
    assert failure["requestContext"]["condition"] == RECORD_AGE_EXCEEDED
    assert failure["requestContext"]["approximateInvokeCount"] == 6
    assert failure["responseContext"]["functionError"] == "Unhandled"


def failing_items(*sequence_numbers: int) -> dict[str, Any]:
    return {"batchItemFailures": [{"itemIdentifier": str(n).zfill(21)} for n in sequence_numbers]}


def test_a_partial_batch_response_checkpoints_before_the_lowest_reported_record_and_retries_from_it() -> None:
    harness = Harness(report_batch_item_failures=True, batch_size=5)
    answers = iter([(False, failing_items(4, 3))])
    harness.function.behaviour = lambda payload: next(answers, None) or (False, failing_items())
    harness.delivery.deliver(records(*[(n, WINDOW_START) for n in range(1, 6)]))
    assert harness.function.batches() == [[1, 2, 3, 4, 5], [3, 4, 5]]


def test_a_partial_batch_response_is_bisected_at_the_reported_record_not_in_halves() -> None:
    harness = Harness(report_batch_item_failures=True, bisect_batch_on_function_error=True, batch_size=5)
    answers = iter([(False, failing_items(2))])
    harness.function.behaviour = lambda payload: next(answers, None) or (False, None)
    harness.delivery.deliver(records(*[(n, WINDOW_START) for n in range(1, 6)]))
    assert harness.function.batches() == [[1, 2, 3, 4, 5], [2, 3, 4, 5]]


def test_a_function_error_is_bisected_whatever_report_batch_item_failures_says() -> None:
    harness = Harness(report_batch_item_failures=True, bisect_batch_on_function_error=True, batch_size=4)
    harness.function.behaviour = fails_times(1, lambda payload: (False, None))
    harness.delivery.deliver(records(*[(n, WINDOW_START) for n in range(1, 5)]))
    assert harness.function.batches() == [[1, 2, 3, 4], [1, 2], [3, 4]]


def test_records_reported_again_and_again_go_to_the_failure_destination_after_the_retries() -> None:
    harness = Harness(report_batch_item_failures=True, maximum_retry_attempts=1, batch_size=5)
    harness.function.behaviour = lambda payload: (False, failing_items(3))
    harness.delivery.deliver(records(*[(n, WINDOW_START) for n in range(1, 6)]))
    assert harness.function.batches() == [[1, 2, 3, 4, 5], [3, 4, 5]]
    [failure] = harness.failure_records
    info = failure["DDBStreamBatchInfo"]
    assert (info["startSequenceNumber"], info["endSequenceNumber"], info["batchSize"]) == (
        "3".zfill(21),
        "5".zfill(21),
        3,
    )
    assert "functionError" not in failure["responseContext"]


@pytest.mark.parametrize(
    "response",
    [
        {"batchItemFailures": [{"itemIdentifier": ""}]},
        {"batchItemFailures": [{"itemIdentifier": None}]},
        {"batchItemFailures": [{"sequenceNumber": "2".zfill(21)}]},
        {"batchItemFailures": [{"itemIdentifier": "not-in-this-batch"}]},
    ],
    ids=["empty identifier", "null identifier", "bad key name", "unknown identifier"],
)
def test_a_malformed_partial_batch_response_is_a_complete_failure(response: dict[str, Any]) -> None:
    harness = Harness(report_batch_item_failures=True, batch_size=3)
    answers = iter([(False, response)])
    harness.function.behaviour = lambda payload: next(answers, None) or (False, None)
    harness.delivery.deliver(records(*[(n, WINDOW_START) for n in range(1, 4)]))
    assert harness.function.batches() == [[1, 2, 3], [1, 2, 3]]


@pytest.mark.parametrize(
    "response",
    [None, {}, {"batchItemFailures": []}, {"batchItemFailures": None}],
    ids=["null response", "empty response", "empty list", "null list"],
)
def test_a_partial_batch_response_without_failures_is_a_complete_success(response: Any) -> None:
    harness = Harness(report_batch_item_failures=True, batch_size=3)
    harness.function.behaviour = lambda payload: (False, response)
    harness.delivery.deliver(records(*[(n, WINDOW_START) for n in range(1, 4)]))
    assert harness.function.batches() == [[1, 2, 3]]


def test_reported_failures_are_ignored_unless_report_batch_item_failures_is_on() -> None:
    harness = Harness(batch_size=3)
    harness.function.behaviour = lambda payload: (False, failing_items(1))
    harness.delivery.deliver(records(*[(n, WINDOW_START) for n in range(1, 4)]))
    assert harness.function.batches() == [[1, 2, 3]]


# -- the engine itself -------------------------------------------------------------------------


def test_close_interrupts_a_delivery_that_would_retry_forever() -> None:
    harness = Harness()
    harness.function.behaviour = lambda payload: (True, {"errorMessage": "boom"})
    harness.clock.on_sleep = lambda: len(harness.function.payloads) >= 3 and harness.delivery.close()
    assert harness.delivery.deliver(records((1, WINDOW_START), (2, WINDOW_START))) == 0
    assert len(harness.function.payloads) == 3


def test_a_parallelization_factor_above_one_is_processed_one_batch_at_a_time(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        harness = Harness(parallelization_factor=4, batch_size=1)
    harness.function.behaviour = succeeds
    harness.delivery.deliver(records((1, WINDOW_START), (2, WINDOW_START)))
    assert "ParallelizationFactor 4 is not emulated" in caplog.text
    assert harness.function.batches() == [[1], [2]]


def test_settings_are_read_from_an_event_source_mapping_with_aws_defaults() -> None:
    mapping = {
        "FunctionArn": FUNCTION_ARN,
        "BatchSize": 7,
        "TumblingWindowInSeconds": 30,
        "BisectBatchOnFunctionError": True,
        "MaximumRetryAttempts": 3,
        "MaximumRecordAgeInSeconds": 600,
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
        "ParallelizationFactor": 2,
        "MaximumBatchingWindowInSeconds": 5,
    }
    assert MappingSettings.from_event_source_mapping(mapping, retry_interval_seconds=0.2) == MappingSettings(
        function_arn=FUNCTION_ARN,
        batch_size=7,
        tumbling_window_seconds=30,
        bisect_batch_on_function_error=True,
        maximum_retry_attempts=3,
        maximum_record_age_seconds=600,
        report_batch_item_failures=True,
        parallelization_factor=2,
        maximum_batching_window_seconds=5,
        retry_interval_seconds=0.2,
    )
    assert MappingSettings.from_event_source_mapping({}) == MappingSettings()


# -- batch size, payload limit and the batching window -----------------------------------------


def test_a_batch_holds_up_to_ten_thousand_records_in_one_invocation() -> None:
    # given a mapping with the largest batch size a DynamoDB stream allows
    harness = Harness(batch_size=10_000)
    # when 12,000 records are delivered
    harness.delivery.deliver(records(*((n, WINDOW_START) for n in range(1, 12_001))))
    # then "BatchSize ... Maximum is 10,000" holds, and nothing is lost or repeated
    assert [len(batch) for batch in harness.function.batches()] == [10_000, 2_000]


def test_a_batch_stops_before_the_six_megabyte_payload_limit() -> None:
    # given records of about 100 KB each
    harness = Harness(batch_size=10_000)
    bulky = records(*((n, WINDOW_START) for n in range(1, 151)))
    for item in bulky:
        item["dynamodb"]["NewImage"] = {"blob": {"S": "x" * 100_000}}
    # when they are delivered
    harness.delivery.deliver(bulky)
    # then every invocation stays under 6 MB, and every record goes out once, in order
    batches = harness.function.batches()
    assert all(len(batch) * 100_000 < 6 * 1024 * 1024 for batch in batches)
    assert len(batches) == 3
    assert [number for batch in batches for number in batch] == list(range(1, 151))


def gathering_harness(**settings: Any) -> tuple[Harness, Gathering]:
    harness = Harness(batch_size=1000, maximum_batching_window_seconds=5, **settings)
    return harness, Gathering(harness.clock)


def test_short_reads_are_held_back_until_the_batching_window_expires() -> None:
    # given a 5-second batching window and 10 records read up to the present
    harness, gathering = gathering_harness()
    read = records(*((n, WINDOW_START) for n in range(1, 11)))
    # when the reader asks at once and 4.9 s later, then at 5 s
    held_at_once = gathering.ready(read, harness.delivery, read_to_present=True)
    harness.clock.moment += 4.9
    held_later = gathering.ready(read, harness.delivery, read_to_present=True)
    harness.clock.moment += 0.1
    # then "the maximum amount of time to gather records" is the window, counted from the first read
    assert (held_at_once, held_later) == (False, False)
    assert gathering.ready(read, harness.delivery, read_to_present=True)


def test_a_full_batch_or_a_backlog_goes_out_without_waiting() -> None:
    harness, gathering = gathering_harness()
    full = records(*((n, WINDOW_START) for n in range(1, 1001)))
    # a full batch: "until it has gathered a full batch"; and a partial read with more records behind it
    assert gathering.ready(full, harness.delivery, read_to_present=True)
    assert gathering.ready(full[:10], harness.delivery, read_to_present=False)


def test_without_a_batching_window_records_go_out_as_soon_as_they_are_read() -> None:
    harness = Harness(batch_size=1000)
    assert Gathering(harness.clock).ready(records((1, WINDOW_START)), harness.delivery, read_to_present=True)


def test_gathering_restarts_with_the_next_batch_and_stops_when_nothing_is_read() -> None:
    harness, gathering = gathering_harness()
    read = records((1, WINDOW_START))
    gathering.ready(read, harness.delivery, read_to_present=True)
    harness.clock.moment += 5
    assert gathering.ready(read, harness.delivery, read_to_present=True)
    # when the batch went out, the next one gathers for its own window
    gathering.delivered()
    assert not gathering.ready(records((2, WINDOW_START + 5)), harness.delivery, read_to_present=True)
    # and an empty read is never ready
    assert not gathering.ready([], harness.delivery, read_to_present=True)


def test_gathering_stops_at_the_end_of_the_tumbling_window_of_its_first_record() -> None:
    # given a 120-second tumbling window that ends 2 s from now, and a 5-second batching window
    harness, gathering = gathering_harness(tumbling_window_seconds=120)
    harness.clock.moment = WINDOW_START + 118
    read = records((1, WINDOW_START + 117))
    assert not gathering.ready(read, harness.delivery, read_to_present=True)
    # when the tumbling window ends, before the batching window would
    harness.clock.moment = WINDOW_START + 120
    # then the records go out: a batch never spans two windows, so waiting could not fill it
    assert gathering.ready(read, harness.delivery, read_to_present=True)


# -- adversarial retries (off unless a policy is given) ----------------------------------------
# "Lambda will process each record at least once, but doesn't guarantee that each record will be processed only
# once. In rare cases, such as error handling, some records might be processed more than once. Records are always
# processed in order the first time. If records are processed more than once, they might be processed out of
# order." (Lambda Developer Guide, tumbling windows)


class Adversarial(Harness):
    """A harness whose engine plays the given adversarial retries and journals them."""

    def __init__(self, policy: AdversarialRetries | None, now: float = WINDOW_START + 1, **settings: Any) -> None:
        super().__init__(now, **settings)
        self.policy = policy
        self.journal: list[dict[str, Any]] = []
        self.delivery = ShardDelivery(
            self.settings,
            SHARD_ID,
            STREAM_ARN,
            self.function,
            self.failure_records.append,
            self.clock,
            adversary=lambda: self.policy,
            journal=self.journal.append,
        )

    def retries(self) -> list[dict[str, Any]]:
        return [entry for entry in self.journal if entry["event"] == "retry"]


def fails_first(then: Callable[[dict[str, Any]], Response]) -> Any:
    return fails_times(1, then)


def in_window(*numbers_: int) -> list[dict[str, Any]]:
    return records(*[(n, WINDOW_START + n) for n in numbers_])


def test_without_a_policy_retries_re_send_the_batch_in_order() -> None:
    # given an adversary that answers no policy (the switch is off)
    harness = Adversarial(None, batch_size=10, tumbling_window_seconds=120)
    harness.function.behaviour = fails_first(count_keys)
    # when a batch fails once
    harness.delivery.deliver(in_window(*range(1, 11)))
    # then the retry is the same batch, in order, with the same state, and nothing is journalled
    assert harness.function.batches() == [list(range(1, 11))] * 2
    assert harness.function.payloads[1]["state"] == {}
    assert harness.journal == []


def test_a_retry_may_present_the_records_from_the_checkpoint_on_out_of_order() -> None:
    # "If records are processed more than once, they might be processed out of order."
    harness = Adversarial(AdversarialRetries(seed=1, reorder=1.0), batch_size=10, tumbling_window_seconds=120)
    harness.function.behaviour = fails_first(count_keys)
    harness.delivery.deliver(in_window(*range(1, 11)))
    first, retry = harness.function.batches()
    # the first time in order; the retry holds the same records, not in order
    assert first == list(range(1, 11))
    assert sorted(retry) == first
    assert retry != first
    [played] = harness.retries()
    assert (played["reordered"], played["succeeded"]) == (True, True)
    assert harness.delivery.checkpoint == "10".zfill(21)


def test_a_retry_may_be_split_into_smaller_invocations_that_chain_the_state() -> None:
    harness = Adversarial(AdversarialRetries(seed=2, split=1.0), batch_size=10, tumbling_window_seconds=120)
    harness.function.behaviour = fails_first(count_keys)
    harness.delivery.deliver(in_window(*range(1, 11)))
    retry = harness.function.batches()[1:]
    # then 2 to 4 smaller invocations, in order (no reorder asked), covering the batch once
    assert 2 <= len(retry) <= 4
    assert [number for batch in retry for number in batch] == list(range(1, 11))
    # each starting from the state the previous one returned
    assert harness.function.payloads[2]["state"] == count_keys(harness.function.payloads[1])[1]["state"]
    assert harness.retries()[0]["split"] is True


def test_a_retry_may_take_on_newer_records_of_the_window_up_to_the_batch_size() -> None:
    # given first deliveries shorter than the records at hand, a retry that merges, and a record of the next window
    harness = Adversarial(
        AdversarialRetries(seed=3, merge=1.0, short_batches=1.0), batch_size=6, tumbling_window_seconds=120
    )
    harness.function.behaviour = fails_first(count_keys)
    harness.delivery.deliver([*in_window(*range(1, 11)), record(11, WINDOW_START + 125)])
    first, retry = harness.function.batches()[:2]
    # then the retry holds the failed batch and the next records, in order, as one larger batch
    assert len(first) < 6
    assert retry[: len(first)] == first
    assert len(first) < len(retry) <= 6
    assert retry == list(range(1, len(retry) + 1))
    [played] = harness.retries()
    assert played["merged"] == [str(n).zfill(21) for n in retry[len(first) :]]
    # and no batch ever spans two windows or exceeds the batch size; every record is checkpointed once
    windows = {p["window"]["start"] for p in harness.function.payloads if numbers(p) and 11 in numbers(p)}
    assert windows == {"2020-12-09T07:06:00Z"}
    assert all(11 not in batch or batch == [11] for batch in harness.function.batches())
    assert all(len(batch) <= 6 for batch in harness.function.batches())
    assert harness.delivery.checkpoint == "11".zfill(21)


def test_records_taken_on_by_a_reordered_retry_still_come_in_order_the_first_time() -> None:
    # "Records are always processed in order the first time."
    harness = Adversarial(
        AdversarialRetries(seed=4, merge=1.0, reorder=1.0, short_batches=1.0), batch_size=50, tumbling_window_seconds=0
    )
    harness.function.behaviour = fails_first(succeeds)
    harness.delivery.deliver(records(*[(n, WINDOW_START) for n in range(1, 41)]))
    retry = harness.function.batches()[1]
    merged = [int(sequence) for sequence in harness.retries()[0]["merged"]]
    assert merged
    assert [number for number in retry if number in merged] == sorted(merged)


def test_a_retry_may_receive_a_fresh_state_instead_of_the_last_successful_one() -> None:
    # given a first batch that succeeds and a second that fails once
    harness = Adversarial(AdversarialRetries(seed=5, fresh_state=1.0), batch_size=1, tumbling_window_seconds=120)
    harness.function.behaviour = fails_when(
        lambda payload: numbers(payload) == [2] and not harness.journal and len(harness.function.payloads) == 2,
        count_keys,
    )
    harness.delivery.deliver(in_window(1, 2))
    states = [(numbers(p), p["state"]) for p in harness.function.payloads]
    # then the retry of record 2 is handed an empty state, not {"key-1": 1}
    assert states == [([1], {}), ([2], {"key-1": 1}), ([2], {})]
    assert harness.retries()[0]["freshState"] == [True]


def test_after_a_failure_the_window_may_end_early_and_continue_with_a_fresh_state() -> None:
    # "isWindowTerminatedEarly: ... Subsequent invoke will continue the same window with a fresh state."
    harness = Adversarial(AdversarialRetries(seed=6, terminate_early=1.0), batch_size=1, tumbling_window_seconds=120)
    harness.function.behaviour = fails_when(
        lambda payload: numbers(payload) == [2] and len(harness.function.payloads) == 2, count_keys
    )
    harness.delivery.deliver(in_window(1, 2))
    summary = [
        (numbers(p), p["isFinalInvokeForWindow"], p["isWindowTerminatedEarly"], p["state"], p["window"]["start"])
        for p in harness.function.payloads
    ]
    assert summary == [
        ([1], False, False, {}, "2020-12-09T07:04:00Z"),
        ([2], False, False, {"key-1": 1}, "2020-12-09T07:04:00Z"),
        ([], True, True, {"key-1": 1}, "2020-12-09T07:04:00Z"),
        ([2], False, False, {}, "2020-12-09T07:04:00Z"),
    ]
    assert [entry["event"] for entry in harness.journal] == ["window terminated early", "retry"]


def test_a_retried_final_invocation_may_receive_a_fresh_state() -> None:
    harness = Adversarial(AdversarialRetries(seed=7, fresh_state=1.0), tumbling_window_seconds=120)
    harness.delivery.deliver(in_window(1))
    harness.function.behaviour = fails_first(count_keys)
    harness.clock.moment = WINDOW_START + 120
    assert harness.delivery.tick()
    finals = [p["state"] for p in harness.function.payloads if p["isFinalInvokeForWindow"]]
    assert finals == [{"key-1": 1}, {}]


def test_a_retry_that_keeps_failing_is_given_up_with_every_record_after_the_checkpoint() -> None:
    # given retries that merge newer records and are split, and a function that fails on record 3 forever
    harness = Adversarial(
        AdversarialRetries(seed=8, merge=1.0, split=1.0, short_batches=1.0), batch_size=8, maximum_retry_attempts=3
    )
    harness.function.behaviour = fails_when(lambda payload: 3 in numbers(payload), succeeds)
    harness.delivery.deliver(records(*[(n, WINDOW_START) for n in range(1, 9)]))
    # then the failure record starts right after the checkpoint and covers what the last retry held
    reports = [failure["DDBStreamBatchInfo"] for failure in harness.failure_records]
    first_report = reports[0]
    assert int(first_report["startSequenceNumber"]) <= 3 <= int(first_report["endSequenceNumber"])
    assert harness.failure_records[0]["requestContext"]["approximateInvokeCount"] >= 4
    assert harness.delivery.checkpoint == "8".zfill(21)


POLICIES = st.builds(
    AdversarialRetries,
    seed=st.integers(0, 2**16),
    reorder=st.sampled_from([0.0, 0.5, 1.0]),
    split=st.sampled_from([0.0, 0.5, 1.0]),
    merge=st.sampled_from([0.0, 0.5, 1.0]),
    fresh_state=st.sampled_from([0.0, 0.5]),
    terminate_early=st.sampled_from([0.0, 0.3]),
    short_batches=st.sampled_from([0.0, 0.5]),
)


@dataclass
class Played:
    """What a whole shard's delivery did, and every breach of the rules seen along the way."""

    harness: Adversarial
    violations: list[str]
    final_checkpoint: int
    dealt_with: set[int]


def play(
    policy: AdversarialRetries,
    failure_seed: int = 0,
    failure_rate: float = 0.3,
    batch_size: int = 5,
    window: int = 120,
    bisect: bool = False,
    report_items: bool = False,
    retries: int = 50,
    count: int = 30,
) -> Played:
    """Deliver ``count`` records, two seconds apart, to a function failing a share of its invocations with records
    (sometimes by reporting one record), checking at every invocation what a retry may present and where the
    checkpoint may be."""
    harness = Adversarial(
        policy,
        batch_size=batch_size,
        tumbling_window_seconds=window,
        bisect_batch_on_function_error=bisect,
        report_batch_item_failures=report_items and not window,
        maximum_retry_attempts=retries,
    )
    chances = random.Random(failure_seed)
    acknowledged: set[int] = set()
    reported: set[int] = set()
    seen: list[int] = []
    violations: list[str] = []
    checkpoints: list[int] = []

    def dealt_with() -> set[int]:
        for failure in harness.failure_records:
            info = failure["DDBStreamBatchInfo"]
            if info["startSequenceNumber"]:
                reported.update(range(int(info["startSequenceNumber"]), int(info["endSequenceNumber"]) + 1))
        return acknowledged | reported

    def observe_checkpoint() -> int:
        checkpoint = int(harness.delivery.checkpoint or 0)
        # the checkpoint moves only over records that were in a successful invocation or were given up
        if not set(range(1, checkpoint + 1)) <= dealt_with():
            violations.append(f"checkpoint {checkpoint} passed records never acknowledged nor reported")
        if checkpoints and checkpoint < checkpoints[-1]:
            violations.append(f"checkpoint went back from {checkpoints[-1]} to {checkpoint}")
        checkpoints.append(checkpoint)
        return checkpoint

    def function(payload: dict[str, Any]) -> Response:
        checkpoint = observe_checkpoint()
        presented = numbers(payload)
        # a retry only re-presents records after the checkpoint
        if any(number <= checkpoint for number in presented):
            violations.append(f"{presented} presented at checkpoint {checkpoint}")
        # "Records are always processed in order the first time."
        new = [number for number in presented if number not in seen]
        if new != sorted(new) or (new and seen and min(new) < max(seen)):
            violations.append(f"first presentation out of order: {presented} after {seen}")
        seen.extend(new)
        if len(presented) > batch_size:
            violations.append(f"{len(presented)} records in a batch of at most {batch_size}")
        if presented and chances.random() < failure_rate:
            if report_items and not window and chances.random() < 0.5:
                # "Lambda uses the record with the lowest sequence number as the checkpoint": those below are done
                failing = chances.choice(presented)
                acknowledged.update(number for number in presented if number < failing)
                return False, failing_items(failing)
            return True, {"errorMessage": "boom"}
        acknowledged.update(presented)
        return count_keys(payload) if window else (False, None)

    harness.function.behaviour = function
    delivered = harness.delivery.deliver(records(*[(n, WINDOW_START + 2 * n) for n in range(1, count + 1)]))
    if delivered != count:
        violations.append(f"deliver dealt with {delivered} of {count} records")
    harness.delivery.end_of_shard()
    return Played(harness, violations, observe_checkpoint(), dealt_with())


def test_every_liberty_is_taken_within_the_rules_when_all_are_switched_on() -> None:
    # given every liberty always taken, windows of 10 s, and a function failing 40 % of its invocations with records
    policy = AdversarialRetries(
        seed=11, reorder=1.0, split=1.0, merge=1.0, fresh_state=1.0, terminate_early=0.5, short_batches=1.0
    )
    # when 60 records are delivered
    played = play(policy, failure_seed=3, failure_rate=0.4, batch_size=8, window=10, count=60)
    # then each liberty was taken at least once
    journal = played.harness.journal
    retries = played.harness.retries()
    assert any(entry["reordered"] for entry in retries)
    assert any(entry["split"] for entry in retries)
    assert any(entry["merged"] for entry in retries)
    assert any(any(entry["freshState"]) for entry in retries)
    assert any(entry["event"] == "window terminated early" for entry in journal)
    assert any(p["isWindowTerminatedEarly"] for p in played.harness.function.payloads)
    # and the checkpoint never skipped nor repeated a record: every one was dealt with, up to the last
    assert played.violations == []
    assert played.final_checkpoint == 60
    assert played.dealt_with >= set(range(1, 61))


@settings(max_examples=examples(500), deadline=None)
@given(
    policy=POLICIES,
    failure_seed=st.integers(0, 2**16),
    failure_rate=st.sampled_from([0.0, 0.3, 0.6]),
    batch_size=st.integers(1, 12),
    window=st.sampled_from([0, 5, 120]),
    bisect=st.booleans(),
    report_items=st.booleans(),
    retries=st.sampled_from([0, 2, 50]),
    count=st.integers(1, 40),
)
def test_the_checkpoint_never_skips_or_repeats_a_record_whatever_the_retries(
    policy: AdversarialRetries,
    failure_seed: int,
    failure_rate: float,
    batch_size: int,
    window: int,
    bisect: bool,
    report_items: bool,
    retries: int,
    count: int,
) -> None:
    # when a shard is delivered under any policy, failure pattern and mapping settings
    played = play(policy, failure_seed, failure_rate, batch_size, window, bisect, report_items, retries, count)
    # then the rules held throughout, and at the end every record was dealt with, up to the last one
    assert played.violations == []
    assert played.final_checkpoint == count
    assert played.dealt_with >= set(range(1, count + 1))


# -- the switch a test sets for a deployed stack ------------------------------------------------


def test_a_switch_file_turns_a_functions_adversarial_retries_on_and_off(tmp_path: Path) -> None:
    # given the switch files of the directory the emulator's environment names
    switch = SwitchFiles(tmp_path, f"{FUNCTION_ARN}:$LATEST")
    assert switch.policy() is None
    # when a test writes the function's file, then the engine reads that policy
    policy = AdversarialRetries(seed=3, reorder=1.0, merge=0.5)
    switch_on(tmp_path, "aggregate", policy)
    assert switch.policy() == policy
    # and what the engine journals, the test reads back
    switch.journal({"event": "retry", "reordered": True})
    assert read_journal(tmp_path, "aggregate") == [{"event": "retry", "reordered": True}]
    # when the file is removed, the retries are AWS's ordinary ones again
    switch_off(tmp_path, "aggregate")
    assert switch.policy() is None


def test_without_the_environment_variable_there_is_no_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ADVERSARIAL_RETRIES_VARIABLE, raising=False)
    switch = SwitchFiles(directory_from_environment(), FUNCTION_ARN)
    assert switch.policy() is None
    switch.journal({"event": "retry"})


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{not json", "Expecting property name"),
        ("[]", "expected a JSON object"),
        ('{"reorder": 2}', "reorder must be a probability"),
        ('{"reorder": true}', "reorder must be a probability"),
        ('{"seed": "7"}', "seed must be an integer"),
        ('{"reordered": 1}', "unknown keys ['reordered']"),
    ],
)
def test_a_malformed_switch_file_is_reported_and_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, error: str
) -> None:
    (tmp_path / "aggregate.json").write_text(text)
    with caplog.at_level(logging.ERROR):
        assert SwitchFiles(tmp_path, FUNCTION_ARN).policy() is None
    assert error in caplog.text
    assert "switch file ignored" in caplog.text


def test_both_emulators_are_launched_with_the_switch_directory(tmp_path: Path) -> None:
    _argv, environment = ministack.launch_spec(tmp_path / "cache", 4599, tmp_path / "state")
    assert environment[ADVERSARIAL_RETRIES_VARIABLE] == str(tmp_path / "state" / DIRECTORY_NAME)
    _argv, environment = localstack.launch_spec(tmp_path / "cache", 4599, tmp_path / "state")
    assert environment[ADVERSARIAL_RETRIES_VARIABLE] == str(tmp_path / "state" / DIRECTORY_NAME)
    assert "emulators/adversarial_retries.py" in localstack.HOOK_MODULES


def test_localstack_is_given_every_module_its_hooks_import() -> None:
    # given the modules of leaderboard_dev that LocalStack installs as its hook distribution, and nothing else of it
    package = Path(localstack.__file__).resolve().parents[1]
    # when their imports of leaderboard_dev are read
    imported: set[str] = set()
    for module in localstack.HOOK_MODULES:
        for node in ast.walk(ast.parse((package / module).read_text())):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("leaderboard_dev"):
                continue
            path = Path(*(node.module or "").split(".")[1:])
            for alias in node.names:
                named = path / f"{alias.name}.py"
                imported.add(str(named if (package / named).is_file() else path.with_suffix(".py")))
    # then each of them is installed too (a module left out fails LocalStack's start with an ImportError)
    assert imported
    assert imported <= set(localstack.HOOK_MODULES)


def test_localstack_polls_at_the_base_rate_aws_documents(tmp_path: Path) -> None:
    # given AWS's base rate of four polls a second, which MiniStack's poller keeps
    assert POLL_INTERVAL_SECONDS == 0.25
    # when LocalStack is launched
    _argv, environment = localstack.launch_spec(tmp_path / "cache", 4599, tmp_path / "state")
    # then its event source mappings poll at that rate, not once a second
    assert float(environment["LAMBDA_EVENT_SOURCE_MAPPING_POLL_INTERVAL_SEC"]) == POLL_INTERVAL_SECONDS
    assert float(environment["LAMBDA_EVENT_SOURCE_MAPPING_MAX_BACKOFF_ON_EMPTY_POLL_SEC"]) <= 1
