"""The aggregator's handler on moto's table and stream: it counts what the shard holds, never what is delivered.

Each test writes downloads into moto's table, so that its stream holds them, then plays an
event sequence AWS's documentation allows (retries out of order, larger retries, direct
invocations ahead of the mapping, windows given up, fresh states) and asserts the counts
against the downloads written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aggregator
from aggregate_store import AggregateStore
from aggregator import AggregatesNotWritten
from aggregator_settings import PER_WINDOW
from dependencies import Dependencies
from failure_messages import send_to_failure_queue
from shard_progress import ProgressStore
from tests.unit.conftest import PROGRESS_TABLE, TABLE, FakeLambdaContext, count_of, create_progress_table, create_table


@dataclasses.dataclass
class Deployed:
    dynamodb: Any
    streams: Any
    sqs: Any
    queue_url: str
    stream_arn: str
    shard_id: str

    def write(self, song_id: str, count: int, timestamp: str = "2018-01-15T10:00:00Z", first: int = 0) -> None:
        for number in range(first, first + count):
            self.dynamodb.put_item(
                TableName=TABLE,
                Item={"songID": {"S": song_id}, "SK": {"S": f"{song_id}-d{number}"}, "Timestamp": {"S": timestamp}},
            )

    def put_raw(self, item: dict[str, Any]) -> None:
        self.dynamodb.put_item(TableName=TABLE, Item=item)

    def stream_records(self, unfiltered: bool = False) -> list[dict[str, Any]]:
        """The shard's download records as a Lambda event carries them (the aggregator's own writes left out by the
        mapping's filter, unless `unfiltered`)."""
        iterator = self.streams.get_shard_iterator(
            StreamArn=self.stream_arn, ShardId=self.shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records = self.streams.get_records(ShardIterator=iterator)["Records"]
        for record in records:
            record["eventSourceARN"] = self.stream_arn
            record["dynamodb"]["ApproximateCreationDateTime"] = record["dynamodb"][
                "ApproximateCreationDateTime"
            ].timestamp()
        if unfiltered:
            return records
        return [r for r in records if r["eventName"] == "INSERT" and "Month" not in r["dynamodb"].get("NewImage", {})]

    def window_event(
        self, records: list[dict[str, Any]], state: dict[str, Any] | None = None, final: bool = False
    ) -> dict[str, Any]:
        return {
            "Records": records,
            "window": {"start": "2018-01-15T07:04:00Z", "end": "2018-01-15T07:05:00Z"},
            "state": state or {},
            "shardId": self.shard_id,
            "eventSourceARN": self.stream_arn,
            "isFinalInvokeForWindow": final,
            "isWindowTerminatedEarly": False,
        }

    def direct_event(self, records: list[dict[str, Any]], through: str | None = None) -> dict[str, Any]:
        event: dict[str, Any] = {"shardId": self.shard_id, "eventSourceARN": self.stream_arn, "Records": records}
        if through is not None:
            event["throughSequenceNumber"] = through
        return event

    def failure_messages(self) -> list[dict[str, Any]]:
        bodies = []
        while True:
            messages = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get("Messages", [])
            if not messages:
                return sorted(bodies, key=lambda body: str(body.get("sequenceNumber")))
            bodies += [json.loads(message["Body"]) for message in messages]

    def checkpoint(self) -> str | None:
        """The shard's checkpoint in the progress table, as the stream spells it."""
        key = {"ShardKey": {"S": f"{self.stream_arn}|{self.shard_id}"}}
        item = self.dynamodb.get_item(TableName=PROGRESS_TABLE, Key=key).get("Item") or {}
        return item["CheckpointSequence"]["S"] if "CheckpointSequence" in item else None


def use_store(monkeypatch: pytest.MonkeyPatch, client: Any) -> None:
    """The handler's dependencies with another DynamoDB client for aggregate writes (throttled, slow)."""
    settings = aggregator.SETTINGS
    progress = ProgressStore(aggregator.DEPENDENCIES.progress._client, PROGRESS_TABLE)
    store = AggregateStore(client, TABLE, settings.schema, progress, leaderboard_shards=settings.leaderboard_shards)
    monkeypatch.setattr(aggregator, "DEPENDENCIES", dataclasses.replace(aggregator.DEPENDENCIES, store=store))


def wire(dynamodb: Any, sqs: Any, queue_url: str, monkeypatch: pytest.MonkeyPatch) -> Deployed:
    """The handler wired to moto's table, its stream, the progress table and the failure queue, as the module does."""
    table = dynamodb.describe_table(TableName=TABLE)["Table"]
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    stream_arn = table["LatestStreamArn"]
    shard_id = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    settings = dataclasses.replace(
        aggregator.SETTINGS,
        failure_queue_url=queue_url,
        table_arn=table["TableArn"],
        progress_table_name=PROGRESS_TABLE,
    )
    progress = ProgressStore(dynamodb, PROGRESS_TABLE)
    dependencies = Dependencies(
        store=AggregateStore(dynamodb, TABLE, settings.schema, progress),
        progress=progress,
        streams=streams,
        executor=aggregator.DEPENDENCIES.executor,
        send_failures=lambda messages: send_to_failure_queue(sqs, queue_url, messages),
    )
    monkeypatch.setattr(aggregator, "SETTINGS", settings)
    monkeypatch.setattr(aggregator, "DEPENDENCIES", dependencies)
    return Deployed(dynamodb, streams, sqs, queue_url, stream_arn, shard_id)


@pytest.fixture
def deployed(dynamodb: Any, sqs_queue: tuple[Any, str], monkeypatch: pytest.MonkeyPatch) -> Deployed:
    sqs, queue_url = sqs_queue
    return wire(dynamodb, sqs, queue_url, monkeypatch)


def summary_of(caplog: pytest.LogCaptureFixture) -> Any:
    return [record for record in caplog.records if record.getMessage() == "batch summary"][-1]


def test_a_batch_is_counted_from_the_shard_one_write_per_aggregate_and_bad_records_reported(
    deployed: Deployed, lambda_context: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # given good downloads of two songs and two malformed ones in the table's stream
    deployed.write("song1", 2)
    deployed.put_raw({"songID": {"S": "song1"}, "SK": {"S": "bad-1"}})
    deployed.write("song2", 1)
    deployed.put_raw({"songID": {"S": "song1"}, "SK": {"S": "bad-2"}, "Timestamp": {"S": "31/01/2018"}})
    records = deployed.stream_records()
    # when the mapping delivers them in a window
    response = aggregator.lambda_handler(deployed.window_event(records), lambda_context)
    # then the good ones are counted with one write per aggregate, the bad ones reported, and the checkpoint moved
    assert (count_of(deployed.dynamodb, "song1", "2018-01"), count_of(deployed.dynamodb, "song2", "2018-01")) == (2, 1)
    assert response["batchItemFailures"] == []
    assert response["state"]["high"] == records[-1]["dynamodb"]["SequenceNumber"]
    assert [m["kind"] for m in deployed.failure_messages()] == ["rejected_download", "rejected_download"]
    summary = summary_of(caplog)
    assert (summary.added, summary.aggregate_writes, summary.rejected, summary.records_read) == (3, 2, 2, 5)
    assert deployed.checkpoint() == records[-1]["dynamodb"]["SequenceNumber"]


def test_the_summary_names_what_an_event_carried_that_is_no_download(
    deployed: Deployed, lambda_context: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # given a download counted, so that the shard also holds the aggregator's own write of its aggregate
    deployed.write("song1", 1)
    aggregator.lambda_handler(deployed.window_event(deployed.stream_records()), lambda_context)
    assert summary_of(caplog).ignored_delivered == {}
    # when an event carries that write too (a mapping without the module's filter on the period attribute)
    deployed.write("song1", 1, first=1)
    aggregator.lambda_handler(deployed.window_event(deployed.stream_records(unfiltered=True)), lambda_context)
    # then the summary names it among what the event carried, apart from what the aggregator read itself
    assert summary_of(caplog).ignored_delivered == {"aggregate item": 1}
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 2


def test_a_retry_out_of_order_counts_every_download_once(deployed: Deployed, lambda_context: Any) -> None:
    # given ten downloads of one song whose first delivery failed
    deployed.write("song1", 10)
    records = deployed.stream_records()
    # when the retry presents r6..r10 before r1..r5 ("they might be processed out of order"), each with a fresh state
    aggregator.lambda_handler(deployed.window_event(records[5:]), lambda_context)
    aggregator.lambda_handler(deployed.window_event(records[:5]), lambda_context)
    # then all ten are counted, once (issue 7's design counted 5)
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 10


def test_a_larger_retry_after_a_lost_response_counts_every_download_once(
    deployed: Deployed, lambda_context: Any
) -> None:
    # given r1..r5 counted, the response lost, and five more downloads written meanwhile
    deployed.write("song1", 5)
    aggregator.lambda_handler(deployed.window_event(deployed.stream_records()), lambda_context)
    deployed.write("song1", 5, first=5)
    # when the retry brings r1..r10, then r3..r8 again (smaller, overlapping)
    records = deployed.stream_records()
    aggregator.lambda_handler(deployed.window_event(records), lambda_context)
    aggregator.lambda_handler(deployed.window_event(records[2:8]), lambda_context)
    # then each download counts once
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 10


def test_a_direct_invocation_ahead_of_the_mapping_counts_everything_before_its_record(
    deployed: Deployed, lambda_context: Any
) -> None:
    # given ten downloads the mapping has not delivered yet
    deployed.write("song1", 10)
    records = deployed.stream_records()
    # when an operator invokes the aggregator directly with r8 only
    response = aggregator.lambda_handler(deployed.direct_event([records[7]]), lambda_context)
    # then r1..r8 are counted (issue 7's design counted r8 and took r1..r7 for applied)
    assert (response["reachedBound"], count_of(deployed.dynamodb, "song1", "2018-01")) == (True, 8)
    # and when the mapping delivers r1..r10, then r9 and r10 are added
    aggregator.lambda_handler(deployed.window_event(records), lambda_context)
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 10


def test_a_direct_invocation_counts_only_records_the_stream_holds(deployed: Deployed, lambda_context: Any) -> None:
    # given three downloads in the stream and a claimed record with an invented sequence number beyond them
    deployed.write("song1", 3)
    records = deployed.stream_records()
    invented = json.loads(json.dumps(records[1]))
    invented["dynamodb"]["SequenceNumber"] = str(int(records[-1]["dynamodb"]["SequenceNumber"]) + 500)
    # when an operator invokes the aggregator with the real ones, then with all four
    first = aggregator.lambda_handler(deployed.direct_event(records), lambda_context)
    second = aggregator.lambda_handler(deployed.direct_event([*records, invented]), lambda_context)
    # then the real ones count once; the invented one counts nothing, moves nothing and is reported
    assert (first["reachedBound"], second["reachedBound"]) == (True, False)
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 3
    assert deployed.checkpoint() < invented["dynamodb"]["SequenceNumber"]
    refused = [m for m in deployed.failure_messages() if m["kind"] == "refused_record"]
    assert [m["sequenceNumber"] for m in refused] == [invented["dynamodb"]["SequenceNumber"]]


def test_a_window_given_up_is_counted_by_the_next_invocation_of_the_shard(
    deployed: Deployed, lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aggregator, "SETTINGS", dataclasses.replace(aggregator.SETTINGS, aggregate_writes=PER_WINDOW))
    # given a per_window window of five downloads whose final invocation fails past the retries (song1 throttled)
    deployed.write("song1", 5)
    first = deployed.stream_records()
    opened = aggregator.lambda_handler(deployed.window_event(first), lambda_context)
    assert count_of(deployed.dynamodb, "song1", "2018-01") is None
    use_store(monkeypatch, ThrottledFor(deployed.dynamodb, {"song1"}))
    for _ in range(3):
        with pytest.raises(AggregatesNotWritten):
            aggregator.lambda_handler(deployed.window_event([], state=opened["state"], final=True), lambda_context)
    # when the mapping gives the window up and the next window brings five more, with a fresh state
    use_store(monkeypatch, deployed.dynamodb)
    deployed.write("song1", 5, first=5)
    second = deployed.stream_records()[5:]
    state = aggregator.lambda_handler(deployed.window_event(second), lambda_context)["state"]
    aggregator.lambda_handler(deployed.window_event([], state=state, final=True), lambda_context)
    # then all ten are counted: the given-up window was still in the stream, behind the checkpoint
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 10


def test_a_final_invocation_with_a_fresh_state_and_no_records_reads_the_window_from_the_shard(
    deployed: Deployed, lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aggregator, "SETTINGS", dataclasses.replace(aggregator.SETTINGS, aggregate_writes=PER_WINDOW))
    # given a window delivered in two batches, then ended early: its final invocation gets a fresh state
    deployed.write("song1", 3)
    deployed.write("song2", 2)
    records = deployed.stream_records()
    aggregator.lambda_handler(deployed.window_event(records[:3]), lambda_context)
    aggregator.lambda_handler(deployed.window_event(records[3:]), lambda_context)
    # when the final invocation carries no records and no state
    aggregator.lambda_handler(deployed.window_event([], final=True), lambda_context)
    # then the shard itself says what the window held
    assert (count_of(deployed.dynamodb, "song1", "2018-01"), count_of(deployed.dynamodb, "song2", "2018-01")) == (3, 2)


def test_a_state_of_another_shard_or_version_is_ignored_never_fatal(
    deployed: Deployed, lambda_context: Any, caplog: pytest.LogCaptureFixture
) -> None:
    deployed.write("song1", 2)
    state = {"v": 1, "stream": "x", "shard": "y", "pending": [["song1", "2018-01", [[99, "1", "2", 0, 0, 0]]]]}
    response = aggregator.lambda_handler(deployed.window_event(deployed.stream_records(), state=state), lambda_context)
    assert response["batchItemFailures"] == []
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 2
    assert summary_of(caplog).state_ignored.startswith("state version 1")


class ThrottledFor:
    """A DynamoDB client that throttles updates of some songs, as an exhausted adaptive retry surfaces it."""

    def __init__(self, client: Any, songs: set[str]) -> None:
        self._client = client
        self.songs = songs

    def update_item(self, **parameters: Any) -> Any:
        if parameters["Key"]["songID"]["S"] in self.songs:
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}}, "x")
        return self._client.update_item(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_throttled_aggregate_holds_the_checkpoint_back_and_is_counted_once_it_can(
    deployed: Deployed, lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given song2 throttled during a batch that also holds song1 and song3
    deployed.write("song1", 1)
    deployed.write("song2", 1)
    deployed.write("song3", 1)
    records = deployed.stream_records()
    use_store(monkeypatch, ThrottledFor(deployed.dynamodb, {"song2"}))
    response = aggregator.lambda_handler(deployed.window_event(records), lambda_context)
    # then the batch succeeds, song1 and song3 are written, and the checkpoint waits before song2's record
    assert response["batchItemFailures"] == []
    assert [count_of(deployed.dynamodb, f"song{n}", "2018-01") for n in (1, 2, 3)] == [1, None, 1]
    assert deployed.checkpoint() == records[0]["dynamodb"]["SequenceNumber"]
    # when the final invocation still cannot write it, then it fails, so Lambda retries it
    with pytest.raises(AggregatesNotWritten):
        aggregator.lambda_handler(deployed.window_event([], state=response["state"], final=True), lambda_context)
    # and once the throttling is over, the retry counts song2 once and song3 not again
    use_store(monkeypatch, deployed.dynamodb)
    aggregator.lambda_handler(deployed.window_event([], state=response["state"], final=True), lambda_context)
    assert [count_of(deployed.dynamodb, f"song{n}", "2018-01") for n in (1, 2, 3)] == [1, 1, 1]


class SlowClient:
    """A DynamoDB client whose updates hang longer than the function has, as a stuck SDK retry would."""

    def __init__(self, client: Any, delay: float) -> None:
        self._client = client
        self.delay = delay
        self.landed = threading.Event()

    def update_item(self, **parameters: Any) -> Any:
        time.sleep(self.delay)
        try:
            return self._client.update_item(**parameters)
        finally:
            self.landed.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_the_handler_returns_before_the_deadline_margin_whatever_the_sdk_is_doing(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aggregator, "SETTINGS", dataclasses.replace(aggregator.SETTINGS, deadline_margin_ms=1000))
    slow = SlowClient(deployed.dynamodb, delay=4.0)
    use_store(monkeypatch, slow)
    deployed.write("song1", 1)
    records = deployed.stream_records()
    # given an invocation with 3.5 s left, a 1 s margin, and updates that take 4 s
    context = FakeLambdaContext(remaining_ms=3500)
    started = time.monotonic()
    # when it runs
    response = aggregator.lambda_handler(deployed.window_event(records), context)
    # then it answers after about the 2.5 s it had, with the checkpoint not moved past the unfinished write
    assert time.monotonic() - started < 3.0
    assert deployed.checkpoint() is None
    # and when the abandoned update lands late and the next invocation writes the same aggregate, it counts once
    assert slow.landed.wait(10)
    slow.delay = 0
    aggregator.lambda_handler(deployed.window_event([], state=response["state"], final=True), FakeLambdaContext())
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 1


def test_an_event_without_shard_id_is_refused_to_the_failure_queue_not_counted(
    deployed: Deployed, lambda_context: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # given a plain stream event, as a mapping without a tumbling window would send
    deployed.write("song1", 1)
    response = aggregator.lambda_handler({"Records": deployed.stream_records()}, lambda_context)
    # then nothing is counted, the record is in the failure queue with the reason, and a metric says so
    assert response["reachedBound"] is False
    assert count_of(deployed.dynamodb, "song1", "2018-01") is None
    [message] = deployed.failure_messages()
    assert (message["kind"], "shardId" in message["reason"]) == ("refused_record", True)
    assert summary_of(caplog).refused == 1
    assert any(r.getMessage() == "refused record" for r in caplog.records)


def test_an_empty_window_event_is_a_successful_no_op(deployed: Deployed, lambda_context: Any) -> None:
    response = aggregator.lambda_handler(deployed.window_event([]), lambda_context)
    assert response["batchItemFailures"] == []


def utc_month_of(timestamp: str) -> str:
    """The oracle's month, independent of the aggregator's parser."""
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(UTC)
    return f"{moment.year:04d}-{moment.month:02d}"


STEP = st.one_of(
    st.tuples(st.just("write"), st.lists(st.sampled_from(["song1", "song2", "song3", "bad"]), min_size=1, max_size=6)),
    st.tuples(st.just("deliver"), st.lists(st.integers(0, 40), max_size=8), st.booleans(), st.booleans()),
    st.tuples(st.just("direct"), st.lists(st.integers(0, 40), min_size=1, max_size=3)),
    st.tuples(st.just("throttle"), st.sets(st.sampled_from(["song1", "song2", "song3"]))),
)
TIMESTAMPS = ["2018-01-15T10:00:00Z", "2018-01-31T23:30:00-05:00", "2018-02-01T00:10:00+02:00"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=25), per_window=st.booleans())
def test_any_order_any_subset_any_state_counts_each_download_once_and_never_more(
    aws: None, steps: list[Any], per_window: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given the module's tables in moto, and deliveries far more adversarial than AWS documents: any subset of the
    # records written so far, in any order, with the last state or a fresh one, final or not, direct invocations
    # of any real records, and aggregates throttled at random
    dynamodb = create_table(TABLE, fresh=True)
    if PROGRESS_TABLE in dynamodb.list_tables()["TableNames"]:
        dynamodb.delete_table(TableName=PROGRESS_TABLE)
    create_progress_table()
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue_url = sqs.create_queue(QueueName=f"failures-{uuid.uuid4().hex}")["QueueUrl"]
    deployed = wire(dynamodb, sqs, queue_url, monkeypatch)
    writes = "per_window" if per_window else "per_batch"
    monkeypatch.setattr(aggregator, "SETTINGS", dataclasses.replace(aggregator.SETTINGS, aggregate_writes=writes))
    truth: Counter[tuple[str, str]] = Counter()
    state: dict[str, Any] = {}
    throttled = ThrottledFor(dynamodb, set())
    use_store(monkeypatch, throttled)
    written = 0
    for step in steps:
        records = deployed.stream_records()
        if step[0] == "write":
            for song in step[1]:
                timestamp = TIMESTAMPS[written % len(TIMESTAMPS)]
                if song == "bad":
                    deployed.put_raw({"songID": {"S": "song1"}, "SK": {"S": f"bad-{written}"}})
                else:
                    deployed.put_raw({"songID": {"S": song}, "SK": {"S": f"d{written}"}, "Timestamp": {"S": timestamp}})
                    truth[(song, utc_month_of(timestamp))] += 1
                written += 1
        elif step[0] == "deliver" and records:
            chosen = [records[index % len(records)] for index in step[1]]
            event = deployed.window_event(chosen, state=state if step[2] else {}, final=step[3])
            with contextlib.suppress(AggregatesNotWritten):
                response = aggregator.lambda_handler(event, FakeLambdaContext())
                state = response["state"]
        elif step[0] == "direct" and records:
            with contextlib.suppress(AggregatesNotWritten):
                aggregator.lambda_handler(
                    deployed.direct_event([records[index % len(records)] for index in step[1]]), FakeLambdaContext()
                )
        elif step[0] == "throttle":
            throttled.songs = set(step[1])
        # then no aggregate ever exceeds the downloads written
        for (song, month), count in counts(dynamodb).items():
            assert count <= truth[(song, month)], (song, month)
    # when the throttling ends and recover catches the shard up to its last record
    throttled.songs = set()
    records = deployed.stream_records()
    if records:
        aggregator.lambda_handler(
            deployed.direct_event([], through=records[-1]["dynamodb"]["SequenceNumber"]), FakeLambdaContext()
        )
    # then every aggregate equals the downloads written, and every malformed record was reported
    assert counts(dynamodb) == {key: value for key, value in truth.items() if value}
    reported = {
        m["sequenceNumber"]: m["record"] for m in deployed.failure_messages() if m["kind"] == "rejected_download"
    }
    bad = {r["dynamodb"]["SequenceNumber"] for r in records if r["dynamodb"]["Keys"]["SK"]["S"].startswith("bad-")}
    assert bad <= set(reported)
    # moto (not DynamoDB) writes a keys-only INSERT before an UpdateItem's new item: that one is rightly rejected too
    others = [record["dynamodb"]["NewImage"] for sequence, record in reported.items() if sequence not in bad]
    assert all(set(image) == {"songID", "SK"} and len(image["SK"]["S"]) == 7 for image in others), others


def counts(dynamodb: Any) -> dict[tuple[str, str], int]:
    result = {}
    for item in dynamodb.scan(TableName=TABLE)["Items"]:
        if "DownloadCount" in item:
            result[(item["songID"]["S"], item["SK"]["S"])] = int(item["DownloadCount"]["N"])
    return result


def oracle_boards(timestamp: str, genre: str | None, periods: tuple[str, ...]) -> list[str]:
    """The boards a download belongs to, computed here without the aggregator's code (ISO weeks by their Thursday)."""
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(UTC)
    thursday = moment.date() + timedelta(days=3 - moment.weekday())
    buckets = {
        "hour": f"{moment:%Y-%m-%dT%H}",
        "day": f"{moment:%Y-%m-%d}",
        "week": f"{thursday.year:04d}-W{(thursday.timetuple().tm_yday - 1) // 7 + 1:02d}",
        "month": f"{moment:%Y-%m}",
        "year": f"{moment:%Y}",
        "all": "all",
    }
    boards = [buckets[period] for period in periods]
    return boards + ([f"{board}@{quote(genre, safe='')}" for board in boards] if genre else [])


MOMENTS = st.datetimes(min_value=datetime(2018, 12, 29), max_value=datetime(2019, 1, 3), timezones=st.just(UTC))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    downloads=st.lists(
        st.tuples(
            st.sampled_from(["p1", "p2", "p3"]),
            MOMENTS,
            st.sampled_from([None, "rock", "hip hop", "r&b/soul"]),
            st.decimals(min_value=-50, max_value=500, places=2),
        ),
        min_size=1,
        max_size=30,
    ),
    orders=st.lists(st.lists(st.integers(0, 60), max_size=10), max_size=4),
    summed=st.booleans(),
)
def test_every_period_category_and_sum_is_exact_under_any_delivery(
    aws: None, downloads: list[Any], orders: list[list[int]], summed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given hourly, daily, weekly (across a year boundary), monthly, yearly and all-time boards, a category,
    # and either counts or sums of a revenue attribute
    periods = ("hour", "day", "week", "month", "year", "all")
    dynamodb = create_table(TABLE, fresh=True)
    if PROGRESS_TABLE in dynamodb.list_tables()["TableNames"]:
        dynamodb.delete_table(TableName=PROGRESS_TABLE)
    create_progress_table()
    sqs = boto3.client("sqs", region_name="us-east-1")
    deployed = wire(dynamodb, sqs, sqs.create_queue(QueueName=f"f-{uuid.uuid4().hex}")["QueueUrl"], monkeypatch)
    schema = dataclasses.replace(
        aggregator.SETTINGS.schema, periods=periods, category="Genre", amount="Revenue" if summed else None
    )
    monkeypatch.setattr(aggregator, "SETTINGS", dataclasses.replace(aggregator.SETTINGS, schema=schema))
    store = AggregateStore(dynamodb, TABLE, schema, aggregator.DEPENDENCIES.progress)
    monkeypatch.setattr(aggregator, "DEPENDENCIES", dataclasses.replace(aggregator.DEPENDENCIES, store=store))
    truth: dict[tuple[str, str], Decimal] = {}
    for number, (product, moment, genre, revenue) in enumerate(downloads):
        timestamp = moment.isoformat()
        item = {"songID": {"S": product}, "SK": {"S": f"purchase-{number}"}, "Timestamp": {"S": timestamp}}
        item |= {"Genre": {"S": genre}} if genre else {}
        item |= {"Revenue": {"N": str(revenue)}}
        deployed.put_raw(item)
        for board in oracle_boards(timestamp, genre, periods):
            truth[(product, board)] = truth.get((product, board), Decimal(0)) + (revenue if summed else 1)
    # when the mapping delivers any subsets in any order, then the final invocation comes
    records = deployed.stream_records()
    for order in orders:
        aggregator.lambda_handler(
            deployed.window_event([records[i % len(records)] for i in order]), FakeLambdaContext()
        )
    aggregator.lambda_handler(deployed.window_event(records, final=True), FakeLambdaContext())
    # then every board of every product holds exactly its downloads (or their revenue), and nothing else exists
    stored = {
        (item["songID"]["S"], item["SK"]["S"]): Decimal(item["DownloadCount"]["N"])
        for item in dynamodb.scan(TableName=TABLE)["Items"]
        if "DownloadCount" in item
    }
    assert stored == truth
