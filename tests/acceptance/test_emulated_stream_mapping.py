"""A tumbling-window stream mapping on the running emulator, built with boto3 alone (no Terraform).

A tiny function records every event it receives, and what it returned, in a second table, and
keeps in its window state a count per record key. What the emulator's mapping sent is then read
back and checked against the rules of the Lambda developer guide that the project's emulation
(leaderboard_dev/emulators/stream_mapping.py) implements on both emulators.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError
from localstack_client.session import Session

from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import poll_until
from leaderboard_dev.observe import scan_all
from leaderboard_dev.settings import Endpoint

pytestmark = pytest.mark.acceptance

WINDOW_SECONDS = 5
RECORDER_SOURCE = '''
import json
import os
import time
import uuid

import boto3

dynamodb = boto3.client("dynamodb")


def handler(event, context):
    """Counts each record's key into the window state; a batch holding a "poison" key fails."""
    keys = [record["dynamodb"]["Keys"]["pk"]["S"] for record in event.get("Records", [])]
    failing = any(key.startswith("poison") for key in keys)
    state = dict(event.get("state") or {})
    if not failing:
        for key in keys:
            state[key] = state.get(key, 0) + 1
    dynamodb.put_item(
        TableName=os.environ["RECORDER_TABLE"],
        Item={
            "id": {"S": f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"},
            "event": {"S": json.dumps(event)},
            "failed": {"BOOL": failing},
            "returned": {"S": json.dumps(state)},
        },
    )
    if failing:
        raise RuntimeError("a poisoned batch")
    return {"state": state}
'''


@dataclass(frozen=True)
class Invocation:
    keys: list[str]
    sequence_numbers: list[str]
    event: dict[str, Any]
    failed: bool
    returned: dict[str, Any]

    @property
    def final(self) -> bool:
        return bool(self.event["isFinalInvokeForWindow"])

    @property
    def window_start(self) -> str:
        return str(self.event["window"]["start"])


@dataclass(frozen=True)
class RecordedMapping:
    table: str
    stream_arn: str
    shard_id: str
    recorder: str
    uuid: str
    failure_queue_url: str


def recorder_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("recorder.py", RECORDER_SOURCE)
    return buffer.getvalue()


def quietly(action: Callable[..., Any], **arguments: Any) -> None:
    with contextlib.suppress(ClientError):
        action(**arguments)


def create_table(aws: Clients, cleanup: contextlib.ExitStack, name: str, key: str, stream: bool) -> dict[str, Any]:
    parameters: dict[str, Any] = {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": key, "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": key, "KeyType": "HASH"}],
    }
    if stream:
        parameters["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    description = aws.dynamodb.create_table(**parameters)["TableDescription"]
    cleanup.callback(quietly, aws.dynamodb.delete_table, TableName=name)
    poll_until(
        lambda: aws.dynamodb.describe_table(TableName=name)["Table"]["TableStatus"] == "ACTIVE",
        timeout=60,
        interval=0.5,
        describe=f"table {name} active",
    )
    return description


@contextlib.contextmanager
def windowed_mapping(aws: Clients, endpoint: Endpoint, **mapping_settings: Any) -> Iterator[RecordedMapping]:
    """A stream table, a recorder table, the recording function, a failure queue and an enabled tumbling-window
    mapping reading from TRIM_HORIZON; all deleted afterwards, whatever happened."""
    name = f"window-{uuid.uuid4().hex[:8]}"
    with contextlib.ExitStack() as cleanup:
        table = create_table(aws, cleanup, f"{name}-source", "pk", stream=True)
        create_table(aws, cleanup, f"{name}-recorder", "id", stream=False)
        stream_arn = table["LatestStreamArn"]
        streams = Session(region_name=endpoint.region, localstack_host=f"{endpoint.host}:{endpoint.port}").client(
            "dynamodbstreams"
        )
        [shard] = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
        queue_url = aws.sqs.create_queue(QueueName=f"{name}-failures")["QueueUrl"]
        cleanup.callback(quietly, aws.sqs.delete_queue, QueueUrl=queue_url)
        queue_arn = aws.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        aws.lambda_.create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role="arn:aws:iam::000000000000:role/stream-mapping-recorder",
            Handler="recorder.handler",
            Code={"ZipFile": recorder_zip()},
            Timeout=30,
            Environment={"Variables": {"RECORDER_TABLE": f"{name}-recorder", "AWS_ENDPOINT_URL": endpoint.url}},
        )
        cleanup.callback(quietly, aws.lambda_.delete_function, FunctionName=name)
        poll_until(
            lambda: aws.lambda_.get_function(FunctionName=name)["Configuration"].get("State", "Active") == "Active",
            timeout=60,
            interval=0.5,
            describe=f"function {name} active",
        )
        mapping = aws.lambda_.create_event_source_mapping(
            FunctionName=name,
            EventSourceArn=stream_arn,
            StartingPosition="TRIM_HORIZON",
            TumblingWindowInSeconds=WINDOW_SECONDS,
            DestinationConfig={"OnFailure": {"Destination": queue_arn}},
            **mapping_settings,
        )
        cleanup.callback(quietly, aws.lambda_.delete_event_source_mapping, UUID=mapping["UUID"])
        poll_until(
            lambda: aws.lambda_.get_event_source_mapping(UUID=mapping["UUID"])["State"] == "Enabled",
            timeout=60,
            interval=0.5,
            describe="mapping enabled",
        )
        yield RecordedMapping(
            table["TableName"], stream_arn, shard["ShardId"], f"{name}-recorder", mapping["UUID"], queue_url
        )


def start_of_a_fresh_window() -> None:
    """Sleep until just after a window boundary, so that the next few writes share one window."""
    time.sleep(WINDOW_SECONDS - time.time() % WINDOW_SECONDS + 0.2)


def put_keys(aws: Clients, table: str, keys: list[str]) -> None:
    for key in keys:
        aws.dynamodb.put_item(TableName=table, Item={"pk": {"S": key}})


def invocations(aws: Clients, recorder: str) -> list[Invocation]:
    recorded = sorted(scan_all(aws, TableName=recorder, ConsistentRead=True), key=lambda item: item["id"]["S"])
    result = []
    for item in recorded:
        event = json.loads(item["event"]["S"])
        records = event.get("Records", [])
        result.append(
            Invocation(
                keys=[record["dynamodb"]["Keys"]["pk"]["S"] for record in records],
                sequence_numbers=[record["dynamodb"]["SequenceNumber"] for record in records],
                event=event,
                failed=item["failed"]["BOOL"],
                returned=json.loads(item["returned"]["S"]),
            )
        )
    return result


def until_final(aws: Clients, recorder: str) -> list[Invocation]:
    return poll_until(
        lambda: (recorded := invocations(aws, recorder)) and any(i.final for i in recorded) and recorded,
        timeout=90,
        interval=1,
        describe="a final invocation",
    )


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def until_every_window_is_closed(aws: Clients, recorder: str, keys: list[str]) -> list[Invocation]:
    """Until every key was delivered and the window of the last one ended in its final invocation."""

    def closed() -> list[Invocation] | None:
        recorded = invocations(aws, recorder)
        delivered = {key for invocation in recorded for key in invocation.keys}
        return recorded if recorded and set(keys) <= delivered and recorded[-1].final else None

    return poll_until(closed, timeout=90, interval=1, describe="every window closed")


def test_a_tumbling_window_carries_its_state_across_invocations_to_a_final_invocation(
    aws: Clients, endpoint: Endpoint
) -> None:
    with windowed_mapping(aws, endpoint, BatchSize=2) as mapping:
        # given a mapping whose settings the emulator echoes back
        assert aws.lambda_.get_event_source_mapping(UUID=mapping.uuid)["TumblingWindowInSeconds"] == WINDOW_SECONDS
        # when five records are written just after a window boundary (a slow poller may still split them)
        keys = [f"song-{n}" for n in range(5)]
        start_of_a_fresh_window()
        put_keys(aws, mapping.table, keys)
        recorded = until_every_window_is_closed(aws, mapping.recorder, keys)

    # then every invocation names the shard DescribeStream lists, the stream, and an aligned window
    assert {i.event["shardId"] for i in recorded} == {mapping.shard_id}
    assert {i.event["eventSourceARN"] for i in recorded} == {mapping.stream_arn}
    for invocation in recorded:
        start, end = epoch(invocation.event["window"]["start"]), epoch(invocation.event["window"]["end"])
        assert (end - start, start % WINDOW_SECONDS) == (WINDOW_SECONDS, 0)
    # and the records came in order, in batches of at most two, in windows that follow one another
    assert [key for i in recorded for key in i.keys] == keys
    assert all(len(i.keys) <= 2 for i in recorded)
    windows: list[list[Invocation]] = []
    for invocation in recorded:
        if not windows or windows[-1][0].window_start != invocation.window_start:
            windows.append([])
        windows[-1].append(invocation)
    assert [window[0].window_start for window in windows] == sorted({i.window_start for i in recorded})
    for window in windows:
        # ... each window's invocations receiving the state the previous one returned, from an empty one
        previous: dict[str, Any] = {}
        for invocation in window:
            assert invocation.event["state"] == previous
            previous = invocation.returned
        # ... and each window ending in one final invocation, without records, holding its records exactly once
        *batches, final = window
        assert final.final
        assert not any(batch.final for batch in batches)
        assert final.keys == []
        assert final.event["isWindowTerminatedEarly"] is False
        assert final.event["state"] == dict.fromkeys((key for batch in batches for key in batch.keys), 1)


def test_a_failing_batch_is_bisected_and_retried_with_the_previous_state(aws: Clients, endpoint: Endpoint) -> None:
    settings = {"BatchSize": 4, "BisectBatchOnFunctionError": True, "MaximumRetryAttempts": 1}
    with windowed_mapping(aws, endpoint, **settings) as mapping:
        # given a batch of four records of one window whose third always fails the function
        aws.lambda_.update_event_source_mapping(UUID=mapping.uuid, Enabled=False)
        poll_until(
            lambda: aws.lambda_.get_event_source_mapping(UUID=mapping.uuid)["State"] == "Disabled",
            timeout=60,
            interval=0.5,
            describe="mapping disabled",
        )
        start_of_a_fresh_window()
        put_keys(aws, mapping.table, ["a", "b", "poison", "d"])
        # when the mapping reads them
        aws.lambda_.update_event_source_mapping(UUID=mapping.uuid, Enabled=True)
        recorded = until_final(aws, mapping.recorder)
        failure_record = poll_until(
            lambda: next(
                (
                    json.loads(message["Body"])
                    for message in aws.sqs.receive_message(
                        QueueUrl=mapping.failure_queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
                    ).get("Messages", [])
                ),
                None,
            ),
            timeout=90,
            interval=0.5,
            describe="a failure record",
        )

    # then the failed batch was split in two and retried from the same state; the bad record alone
    # was invoked 1 + 1 times, then skipped; the window went on with the state of the last success
    ab = {"a": 1, "b": 1}
    assert [(i.keys, i.event["state"], i.failed) for i in recorded if not i.final] == [
        (["a", "b", "poison", "d"], {}, True),
        (["a", "b"], {}, False),
        (["poison", "d"], ab, True),
        (["poison"], ab, True),
        (["poison"], ab, True),
        (["d"], ab, False),
    ]
    assert recorded[-1].final
    assert recorded[-1].event["state"] == {"a": 1, "b": 1, "d": 1}
    # and the bad record went to the on-failure destination
    poison_sequence = recorded[3].sequence_numbers[0]
    assert failure_record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert failure_record["requestContext"]["approximateInvokeCount"] == 2
    assert failure_record["responseContext"]["functionError"] == "Unhandled"
    info = failure_record["DDBStreamBatchInfo"]
    assert (info["shardId"], info["streamArn"], info["batchSize"]) == (mapping.shard_id, mapping.stream_arn, 1)
    assert info["startSequenceNumber"] == info["endSequenceNumber"] == poison_sequence
