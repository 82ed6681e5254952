"""The aggregator's handler end to end on moto: window events in, exact aggregates, state and reports out."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

import aggregator
from aggregate_store import AggregateStore
from aggregator import PER_WINDOW, AggregatesNotWritten
from tests.streams import TABLE_ARN, aggregate_record, download_record, window_event
from tests.unit.conftest import TABLE, FakeLambdaContext, count_of


@pytest.fixture
def deployed(dynamodb: Any, sqs_queue: tuple[Any, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The handler wired to moto's table, stream and failure queue, as the module wires it to the real ones."""
    sqs, queue_url = sqs_queue
    settings = dataclasses.replace(aggregator.SETTINGS, failure_queue_url=queue_url, table_arn=TABLE_ARN)
    monkeypatch.setattr(aggregator, "SETTINGS", settings)
    monkeypatch.setattr(aggregator, "STORE", AggregateStore(dynamodb, TABLE, settings.schema, settings.retention))
    monkeypatch.setattr(aggregator, "_sqs", sqs)
    monkeypatch.setattr(aggregator, "_streams", boto3.client("dynamodbstreams", region_name="us-east-1"))
    return {"dynamodb": dynamodb, "sqs": sqs, "queue_url": queue_url}


def failure_messages(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
    return sorted((json.loads(m["Body"]) for m in messages), key=lambda body: str(body.get("sequenceNumber")))


def summary_of(caplog: pytest.LogCaptureFixture) -> Any:
    return [record for record in caplog.records if record.getMessage() == "batch summary"][-1]


def test_a_batch_is_written_per_aggregate_and_its_bad_records_reported(
    deployed: dict[str, Any], lambda_context: Any, caplog: pytest.LogCaptureFixture
) -> None:
    dynamodb, sqs = deployed["dynamodb"], deployed["sqs"]
    # given good downloads, two malformed ones and an aggregate record that slipped past a filter
    records = [
        download_record(1, "song1"),
        download_record(2, "song1", timestamp=None),
        download_record(3, "song2"),
        download_record(4, "song1", timestamp="31/01/2018"),
        aggregate_record(5, "song1", "2018-01", 2),
        download_record(6, "song1"),
    ]
    # when the mapping delivers them in a window
    response = aggregator.lambda_handler(window_event(records), lambda_context)
    # then the good downloads are counted, one write per aggregate, and the state carries no pending work
    assert (count_of(dynamodb, "song1", "2018-01"), count_of(dynamodb, "song2", "2018-01")) == (2, 1)
    assert response["batchItemFailures"] == []
    assert response["state"]["pending"] == []
    assert [(b["kind"], b["sequenceNumber"][-1]) for b in failure_messages(sqs, deployed["queue_url"])] == [
        ("rejected_download", "2"),
        ("rejected_download", "4"),
    ]
    summary = summary_of(caplog)
    assert (summary.added, summary.aggregate_writes, summary.rejected, summary.ignored) == (
        3,
        2,
        2,
        {"aggregate item": 1},
    )
    assert (summary.distinct_aggregates, summary.index_partition_writes) == (2, {"2018-01": 2})


def test_a_redelivery_with_the_returned_state_is_skipped_without_writes(
    deployed: dict[str, Any], lambda_context: Any, caplog: pytest.LogCaptureFixture
) -> None:
    records = [download_record(n, "song1") for n in range(1, 6)]
    first = aggregator.lambda_handler(window_event(records), lambda_context)
    aggregator.lambda_handler(window_event(records[2:], state=first["state"]), lambda_context)
    summary = summary_of(caplog)
    assert (summary.redelivered, summary.aggregate_writes) == (3, 0)
    assert count_of(deployed["dynamodb"], "song1", "2018-01") == 5


def test_a_retry_with_the_previous_state_adds_nothing_twice(deployed: dict[str, Any], lambda_context: Any) -> None:
    # given an invocation whose response Lambda never received: it retries with the state it had before
    records = [download_record(n, f"song{n % 2}") for n in range(1, 9)]
    aggregator.lambda_handler(window_event(records), lambda_context)
    aggregator.lambda_handler(window_event(records), lambda_context)
    # and then bisects
    aggregator.lambda_handler(window_event(records[:4]), lambda_context)
    aggregator.lambda_handler(window_event(records[4:]), lambda_context)
    assert (count_of(deployed["dynamodb"], "song0", "2018-01"), count_of(deployed["dynamodb"], "song1", "2018-01")) == (
        4,
        4,
    )


def test_per_window_writes_only_at_the_end_of_the_window(
    deployed: dict[str, Any], lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aggregator, "SETTINGS", dataclasses.replace(aggregator.SETTINGS, aggregate_writes=PER_WINDOW))
    dynamodb = deployed["dynamodb"]
    # given two batches of one window
    first = aggregator.lambda_handler(window_event([download_record(1, "song1")]), lambda_context)
    second = aggregator.lambda_handler(
        window_event([download_record(2, "song1"), download_record(3, "song2")], state=first["state"]), lambda_context
    )
    # then nothing is written while the window is open
    assert count_of(dynamodb, "song1", "2018-01") is None
    assert [row[0] for row in second["state"]["pending"]] == ["song1", "song2"]
    # when the final invocation comes, then each aggregate is written once and the state is dropped
    final = aggregator.lambda_handler(window_event([], state=second["state"], final=True), lambda_context)
    assert final == {"state": {}, "batchItemFailures": []}
    assert (count_of(dynamodb, "song1", "2018-01"), count_of(dynamodb, "song2", "2018-01")) == (2, 1)


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


def test_a_throttled_aggregate_stays_pending_in_the_state_and_is_written_later(
    deployed: dict[str, Any], lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    dynamodb = deployed["dynamodb"]
    settings = aggregator.SETTINGS
    throttled = ThrottledFor(dynamodb, {"song2"})
    monkeypatch.setattr(aggregator, "STORE", AggregateStore(throttled, TABLE, settings.schema, settings.retention))
    # given song2 throttled during a batch
    first = aggregator.lambda_handler(
        window_event([download_record(1, "song1"), download_record(2, "song2")]), lambda_context
    )
    # then the batch succeeds, song1 is written and song2 travels on in the state
    assert count_of(dynamodb, "song2", "2018-01") is None
    assert [row[0] for row in first["state"]["pending"]] == ["song2"]
    # when the final invocation still cannot write it, then it fails, so Lambda retries it with the same state
    with pytest.raises(AggregatesNotWritten):
        aggregator.lambda_handler(window_event([], state=first["state"], final=True), lambda_context)
    # and once the throttling is over, the retry writes it exactly once
    throttled.songs.clear()
    aggregator.lambda_handler(window_event([], state=first["state"], final=True), lambda_context)
    assert (count_of(dynamodb, "song1", "2018-01"), count_of(dynamodb, "song2", "2018-01")) == (1, 1)


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
    deployed: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    dynamodb = deployed["dynamodb"]
    settings = dataclasses.replace(aggregator.SETTINGS, deadline_margin_ms=1000)
    slow = SlowClient(dynamodb, delay=2.0)
    monkeypatch.setattr(aggregator, "SETTINGS", settings)
    monkeypatch.setattr(aggregator, "STORE", AggregateStore(slow, TABLE, settings.schema, settings.retention))
    # given an invocation with 1.5 s left, a 1 s margin, and updates that take 2 s
    context = FakeLambdaContext(remaining_ms=1500)
    started = time.monotonic()
    # when it runs
    response = aggregator.lambda_handler(window_event([download_record(1, "song1")]), context)
    # then it answers after about the 0.5 s it had, with the aggregate still pending in its state
    assert time.monotonic() - started < 1.2
    assert [row[0] for row in response["state"]["pending"]] == ["song1"]
    # and when the abandoned update lands late and the next invocation writes the same aggregate, it counts once
    assert slow.landed.wait(5)
    slow.delay = 0
    aggregator.lambda_handler(window_event([], state=response["state"], final=True), FakeLambdaContext())
    assert count_of(dynamodb, "song1", "2018-01") == 1


def test_an_event_without_shard_id_is_refused_to_the_failure_queue_not_counted(
    deployed: dict[str, Any], lambda_context: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # given a plain stream event, as a mapping without a tumbling window would send
    response = aggregator.lambda_handler({"Records": [download_record(1, "song1")]}, lambda_context)
    # then nothing is counted, the record is in the failure queue with the reason, and a metric says so
    assert response == {"state": {}, "batchItemFailures": []}
    assert count_of(deployed["dynamodb"], "song1", "2018-01") is None
    [message] = failure_messages(deployed["sqs"], deployed["queue_url"])
    assert (message["kind"], "shardId" in message["reason"]) == ("refused_record", True)
    assert summary_of(caplog).refused == 1
    assert any(r.getMessage() == "refused record" for r in caplog.records)


def stream_records(dynamodb: Any) -> tuple[str, str, list[dict[str, Any]]]:
    """The table's real stream in moto: its ARN, its shard, and its records as GetRecords returns them."""
    stream_arn = dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    shard_id = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")
    records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    for record in records:
        record["eventSourceARN"] = stream_arn
        created = record["dynamodb"]["ApproximateCreationDateTime"]
        record["dynamodb"]["ApproximateCreationDateTime"] = created.timestamp()
    return stream_arn, shard_id, records


def test_a_direct_invocation_counts_only_records_the_stream_confirms(
    deployed: dict[str, Any], lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    dynamodb = deployed["dynamodb"]
    real_table_arn = dynamodb.describe_table(TableName=TABLE)["Table"]["TableArn"]
    monkeypatch.setattr(aggregator, "SETTINGS", dataclasses.replace(aggregator.SETTINGS, table_arn=real_table_arn))
    # given three downloads written to the table, so that its stream holds them
    for number in range(3):
        dynamodb.put_item(
            TableName=TABLE,
            Item={"songID": {"S": "song1"}, "SK": {"S": f"d{number}"}, "Timestamp": {"S": "2018-01-05T00:00:00Z"}},
        )
    stream_arn, shard_id, records = stream_records(dynamodb)
    invented = json.loads(json.dumps(records[0]))
    invented["dynamodb"]["SequenceNumber"] = "9" * 30
    # when an operator invokes the aggregator directly with them, an invented one, and then again with all
    event = {"shardId": shard_id, "eventSourceARN": stream_arn, "Records": [*records, invented]}
    response = aggregator.lambda_handler(event, lambda_context)
    aggregator.lambda_handler(event, lambda_context)
    # then the real ones count once, and the invented one is refused to the failure queue
    assert response == {"state": {}, "batchItemFailures": []}
    assert count_of(dynamodb, "song1", "2018-01") == 3
    refused = [m for m in failure_messages(deployed["sqs"], deployed["queue_url"]) if m["kind"] == "refused_record"]
    assert {m["sequenceNumber"] for m in refused} == {"9" * 30}


def test_a_direct_invocation_naming_a_shard_that_does_not_exist_counts_nothing(
    deployed: dict[str, Any], lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    dynamodb = deployed["dynamodb"]
    real_table_arn = dynamodb.describe_table(TableName=TABLE)["Table"]["TableArn"]
    monkeypatch.setattr(aggregator, "SETTINGS", dataclasses.replace(aggregator.SETTINGS, table_arn=real_table_arn))
    dynamodb.put_item(
        TableName=TABLE,
        Item={"songID": {"S": "song1"}, "SK": {"S": "d1"}, "Timestamp": {"S": "2018-01-05T00:00:00Z"}},
    )
    _stream_arn, _, records = stream_records(dynamodb)
    aggregator.lambda_handler({"shardId": "shardId-invented", "Records": records}, lambda_context)
    assert count_of(dynamodb, "song1", "2018-01") is None
    [message] = failure_messages(deployed["sqs"], deployed["queue_url"])
    assert "could not be read" in message["reason"] or "no record" in message["reason"]


def test_an_empty_window_event_is_a_successful_no_op(deployed: dict[str, Any], lambda_context: Any) -> None:
    response = aggregator.lambda_handler(window_event([]), lambda_context)
    assert response["batchItemFailures"] == []
