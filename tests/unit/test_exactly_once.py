"""Every redelivery pattern of Lambda's stream mapping counts each record exactly once (moto)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from botocore.exceptions import ClientError

from aggregate_store import AggregateStore, records_above
from aggregator import InjectedFault, Settings, process_batch
from download_records import Schema
from tests.streams import download_record
from tests.unit.conftest import TABLE, count_of

SETTINGS = Settings(
    table_name=TABLE,
    schema=Schema(),
    quarantine_queue_url=None,
    write_concurrency=4,
    deadline_margin_ms=1000,
    fault_injection_rate=0.0,
)
PLENTY_OF_TIME = lambda: 60_000  # noqa: E731


class ThrottledFor:
    """A DynamoDB client that throttles updates of some songs, as an exhausted adaptive retry would surface it."""

    def __init__(self, client: Any, songs: set[str]) -> None:
        self._client = client
        self.songs = songs

    def update_item(self, **parameters: Any) -> Any:
        if parameters["Key"]["songID"]["S"] in self.songs:
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}, "UpdateItem"
            )
        return self._client.update_item(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def store(client: Any) -> AggregateStore:
    return AggregateStore(client, TABLE, Schema())


def stream_of(songs_and_months: list[tuple[str, str]], first_sequence: int = 1) -> list[dict[str, Any]]:
    return [
        download_record(first_sequence + offset, song, f"{month}-10T12:00:00Z")
        for offset, (song, month) in enumerate(songs_and_months)
    ]


def truth(records: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    return Counter(
        (r["dynamodb"]["NewImage"]["songID"]["S"], r["dynamodb"]["NewImage"]["Timestamp"]["S"][:7]) for r in records
    )


def assert_counts(dynamodb: Any, expected: Counter[tuple[str, str]]) -> None:
    observed = {key: count_of(dynamodb, *key) for key in expected}
    assert observed == dict(expected)


INTERLEAVED = stream_of(
    [
        ("song1", "2018-01"),
        ("song2", "2018-01"),
        ("song1", "2018-02"),
        ("song1", "2018-01"),
        ("song3", "2018-02"),
        ("song2", "2018-01"),
        ("song1", "2018-01"),
        ("song3", "2018-01"),
        ("song2", "2018-02"),
        ("song1", "2018-01"),
    ]
)


def test_one_conditional_write_per_aggregate_not_per_download(dynamodb: Any) -> None:
    # given 10 downloads of 6 distinct (song, month) aggregates, interleaved
    # when the batch is applied
    response, report = process_batch(INTERLEAVED, store(dynamodb), SETTINGS, PLENTY_OF_TIME)
    # then each aggregate got exactly its count, in one write each
    assert response == {"batchItemFailures": []}
    assert_counts(dynamodb, truth(INTERLEAVED))
    assert (report.added, report.writes) == (10, 6)


def test_the_same_batch_twice_adds_nothing_the_second_time(dynamodb: Any) -> None:
    process_batch(INTERLEAVED, store(dynamodb), SETTINGS, PLENTY_OF_TIME)
    _, again = process_batch(INTERLEAVED, store(dynamodb), SETTINGS, PLENTY_OF_TIME)
    assert (again.added, again.already_applied) == (0, 10)
    assert_counts(dynamodb, truth(INTERLEAVED))


def test_bisected_halves_after_the_whole_batch_add_nothing(dynamodb: Any) -> None:
    # given the whole batch applied (the invocation then failed, so the mapping bisects)
    process_batch(INTERLEAVED, store(dynamodb), SETTINGS, PLENTY_OF_TIME)
    # when each half is redelivered
    _, first = process_batch(INTERLEAVED[:5], store(dynamodb), SETTINGS, PLENTY_OF_TIME)
    _, second = process_batch(INTERLEAVED[5:], store(dynamodb), SETTINGS, PLENTY_OF_TIME)
    # then nothing is added twice
    assert first.added == second.added == 0
    assert_counts(dynamodb, truth(INTERLEAVED))


def test_first_half_then_the_whole_batch_adds_only_the_rest(dynamodb: Any) -> None:
    process_batch(INTERLEAVED[:5], store(dynamodb), SETTINGS, PLENTY_OF_TIME)
    _, whole = process_batch(INTERLEAVED, store(dynamodb), SETTINGS, PLENTY_OF_TIME)
    assert whole.added == 5
    assert_counts(dynamodb, truth(INTERLEAVED))


def test_overlapping_ranges_count_each_record_once(dynamodb: Any) -> None:
    # given a stream of 100 downloads over 4 songs and 2 months
    rng = random.Random(3)
    records = stream_of([(f"song{rng.randint(1, 4)}", rng.choice(["2018-01", "2018-02"])) for _ in range(100)])
    # when it is delivered as overlapping windows, as retries after partial progress deliver it
    for start, end in [(0, 60), (40, 80), (0, 30), (55, 100), (90, 100)]:
        process_batch(records[start:end], store(dynamodb), SETTINGS, PLENTY_OF_TIME)
    # then every aggregate equals the number of its records
    assert_counts(dynamodb, truth(records))


def test_a_failed_key_is_reported_at_its_lowest_sequence_and_the_retry_completes_exactly(dynamodb: Any) -> None:
    # given song2 throttled in the middle of a batch
    throttled = ThrottledFor(dynamodb, {"song2"})
    # when the batch is applied
    response, report = process_batch(INTERLEAVED, store(throttled), SETTINGS, PLENTY_OF_TIME)
    # then the other aggregates are applied, and each of song2's two aggregates is reported at its lowest record
    song2_sequences = [
        r["dynamodb"]["SequenceNumber"] for r in INTERLEAVED if r["dynamodb"]["NewImage"]["songID"]["S"] == "song2"
    ]
    assert response == {
        "batchItemFailures": [{"itemIdentifier": "000000000000000000002"}, {"itemIdentifier": "000000000000000000009"}]
    }
    assert [key.entity_id for key, _ in report.failed_keys] == ["song2", "song2"]
    assert (report.first_sequence, report.last_sequence) == ("000000000000000000001", "000000000000000000010")
    assert report.retry_from == "000000000000000000002"
    assert count_of(dynamodb, "song2", "2018-01") is None
    assert count_of(dynamodb, "song1", "2018-01") == 4
    # when the mapping retries from the reported record onwards
    retry_from = next(i for i, r in enumerate(INTERLEAVED) if r["dynamodb"]["SequenceNumber"] == min(song2_sequences))
    response, retry = process_batch(INTERLEAVED[retry_from:], store(dynamodb), SETTINGS, PLENTY_OF_TIME)
    # then only what failed is added, and every aggregate is exact
    assert response == {"batchItemFailures": []}
    assert retry.added == 3
    assert_counts(dynamodb, truth(INTERLEAVED))


def test_near_the_deadline_no_update_starts_and_every_key_is_reported(dynamodb: Any) -> None:
    # given an invocation with less time left than the safety margin
    response, report = process_batch(INTERLEAVED, store(dynamodb), SETTINGS, lambda: 500)
    # then nothing is written and each aggregate's first record is named for the retry
    assert report.writes == 0
    assert len(report.deferred_keys) == 6
    assert (
        min(f["itemIdentifier"] for f in response["batchItemFailures"]) == INTERLEAVED[0]["dynamodb"]["SequenceNumber"]
    )
    # when the retry has time, then counts are exact
    process_batch(INTERLEAVED, store(dynamodb), SETTINGS, PLENTY_OF_TIME)
    assert_counts(dynamodb, truth(INTERLEAVED))


def test_an_injected_fault_after_partial_progress_is_repaired_by_the_retry(dynamodb: Any) -> None:
    # given an invocation that fails on purpose after applying half of its aggregates
    with pytest.raises(InjectedFault):
        process_batch(INTERLEAVED, store(dynamodb), SETTINGS, PLENTY_OF_TIME, inject_fault=True)
    applied = sum(count_of(dynamodb, *key) or 0 for key in truth(INTERLEAVED))
    assert 0 < applied < len(INTERLEAVED)
    # when the mapping retries the whole batch
    process_batch(INTERLEAVED, store(dynamodb), SETTINGS, PLENTY_OF_TIME)
    # then nothing is lost or doubled
    assert_counts(dynamodb, truth(INTERLEAVED))


def test_records_above_the_watermark() -> None:
    sequences = ["0" * 39 + str(n) for n in range(1, 10)]
    assert records_above(sequences, None) == 9
    assert records_above(sequences, "0" * 40) == 9
    assert records_above(sequences, sequences[3]) == 5
    assert records_above(sequences, sequences[-1]) == 0


@pytest.mark.parametrize("seed", range(12))
def test_any_mapping_delivery_history_counts_exactly(dynamodb: Any, seed: int) -> None:
    """A random history of what Lambda may do: retries, bisections, partial failures, crashes, replays."""
    rng = random.Random(seed)
    records = stream_of(
        [(f"song{rng.randint(1, 6)}", rng.choice(["2018-01", "2018-02", "2018-03"])) for _ in range(150)]
    )
    checkpoint = 0
    for _ in range(2000):
        if checkpoint == len(records):
            break
        size = rng.randint(1, 25)
        batch = records[checkpoint : checkpoint + size]
        move = rng.choice(["succeed", "succeed", "crash", "throttle", "deadline", "replay"])
        if move == "succeed":
            response, _ = process_batch(batch, store(dynamodb), SETTINGS, PLENTY_OF_TIME)
            assert response == {"batchItemFailures": []}
            checkpoint += len(batch)
        elif move == "crash":
            with pytest.raises(InjectedFault):
                process_batch(batch, store(dynamodb), SETTINGS, PLENTY_OF_TIME, inject_fault=True)
        elif move in ("throttle", "deadline"):
            client = ThrottledFor(dynamodb, {f"song{rng.randint(1, 6)}"}) if move == "throttle" else dynamodb
            remaining = PLENTY_OF_TIME if move == "throttle" else (lambda: 0)
            response, _ = process_batch(batch, store(client), SETTINGS, remaining)
            reported = [failure["itemIdentifier"] for failure in response["batchItemFailures"]]
            if reported:
                lowest = min(reported)
                checkpoint += next(i for i, r in enumerate(batch) if r["dynamodb"]["SequenceNumber"] == lowest)
            else:
                checkpoint += len(batch)
        elif checkpoint > 0:
            start = rng.randrange(0, checkpoint)
            replay = records[start : rng.randint(start + 1, checkpoint)]
            _, report = process_batch(replay, store(dynamodb), SETTINGS, PLENTY_OF_TIME)
            assert report.added == 0
    assert checkpoint == len(records)
    assert_counts(dynamodb, truth(records))


def test_a_corrupt_watermark_fails_its_aggregate_only_until_repaired(dynamodb: Any) -> None:
    # given an aggregate whose watermark was overwritten with something that is no sequence number
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": "song2"},
            "SK": {"S": "2018-01"},
            "Month": {"S": "2018-01"},
            "DownloadCount": {"N": "0"},
            "AppliedSequence": {"S": "overwritten"},
        },
    )
    # when a batch arrives, then the other aggregates are applied and song2's is reported, not guessed
    _, report = process_batch(INTERLEAVED, store(dynamodb), SETTINGS, PLENTY_OF_TIME)
    assert report.retry_from == "000000000000000000002"
    assert [(key.entity_id, reason.split(":")[0]) for key, reason in report.failed_keys] == [
        ("song2", "CorruptWatermark")
    ]
    assert count_of(dynamodb, "song2", "2018-01") == 0
    # when it is repaired and the mapping retries from the reported record
    dynamodb.update_item(
        TableName=TABLE,
        Key={"songID": {"S": "song2"}, "SK": {"S": "2018-01"}},
        UpdateExpression="REMOVE AppliedSequence",
    )
    process_batch(INTERLEAVED[1:], store(dynamodb), SETTINGS, PLENTY_OF_TIME)
    # then every aggregate is exact
    assert_counts(dynamodb, truth(INTERLEAVED))
