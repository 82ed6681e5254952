"""The aggregator's handler wired to moto's table, stream, progress table and failure queue, as the module wires it,
and the stream clients that stand for what DynamoDB Streams does that moto does not (trims, very long shard listings).

Helpers, not tests: the `deployed` fixture (tests/unit/aggregator/conftest.py) returns `wire`'s `Deployed`, whose
`invoke` calls the handler with the test's own settings and clients (`aggregator.handle`), never the module's.
"""

from __future__ import annotations

import dataclasses
import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
from botocore.exceptions import ClientError

import aggregator
from aggregate_store import AggregateStore
from aggregator_settings import Settings
from dependencies import Dependencies
from stream_claims import StreamClaims
from tests.unit.conftest import PROGRESS_TABLE, TABLE
from wiring import dependencies_for

WRITERS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="aggregate-writer")
"""The aggregate writes' threads, one pool for every test's handler (the function makes one per instance)."""


def aggregator_settings(**changes: Any) -> Settings:
    """The aggregator's settings from the environment tests/unit/conftest.py sets, as the module reads them, changed."""
    return dataclasses.replace(Settings.from_environment(dict(os.environ)), **changes)


def aggregator_dependencies(settings: Settings, dynamodb: Any, streams: Any, sqs: Any) -> Dependencies:
    """The aggregator's clients as aggregator.py wires them from its settings, on the clients given."""
    return dependencies_for(settings, dynamodb, streams, sqs, WRITERS)


@dataclasses.dataclass
class Deployed:
    dynamodb: Any
    streams: Any
    sqs: Any
    queue_url: str
    stream_arn: str
    shard_id: str
    settings: Settings
    dependencies: Dependencies

    def invoke(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """The handler, as Lambda invokes it, with this deployment's settings and clients."""
        return aggregator.handle(event, context, self.settings, self.dependencies)

    def configure(self, **changes: Any) -> None:
        """Settings changed (`aggregate_writes`, a budget, the deadline margin), the clients kept."""
        self.settings = dataclasses.replace(self.settings, **changes)

    def with_schema(self, **changes: Any) -> None:
        """The deployment's schema changed (periods, category, sum), its aggregate store with it."""
        self.configure(schema=dataclasses.replace(self.settings.schema, **changes))
        self.use_store(self.dynamodb)

    def use_store(self, client: Any) -> None:
        """Aggregate writes through another DynamoDB client (throttled, slow), the progress table's kept."""
        store = AggregateStore(
            client,
            self.settings.aggregates_table_name,
            self.settings.schema,
            self.dependencies.progress,
            leaderboard_shards=self.settings.leaderboard_shards,
        )
        self.dependencies = dataclasses.replace(self.dependencies, store=store)

    def use_streams(self, streams: Any) -> None:
        """The stream read through another client (trimmed, long listings, throttled)."""
        self.dependencies = dataclasses.replace(self.dependencies, streams=streams)

    def use_claims(self, table: str, client: Any) -> None:
        """A backfill's claims table (CLAIMS_TABLE_NAME), read and written through `client`."""
        self.configure(claims_table_name=table)
        self.dependencies = dataclasses.replace(self.dependencies, claims=StreamClaims(client, table, WRITERS))

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


def wire(dynamodb: Any, sqs: Any, queue_url: str) -> Deployed:
    """The handler wired to moto's table, its stream, the progress table and the failure queue, as the module does."""
    table = dynamodb.describe_table(TableName=TABLE)["Table"]
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    stream_arn = table["LatestStreamArn"]
    shard_id = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    settings = aggregator_settings(
        aggregates_table_name=TABLE,
        table_arn=table["TableArn"],
        progress_table_name=PROGRESS_TABLE,
        failure_queue_url=queue_url,
    )
    dependencies = aggregator_dependencies(settings, dynamodb, streams, sqs)
    return Deployed(dynamodb, streams, sqs, queue_url, stream_arn, shard_id, settings, dependencies)


def sequence_of(record: dict[str, Any]) -> str:
    return record["dynamodb"]["SequenceNumber"]


def client_error(code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, operation)


class TrimmedStream:
    """moto's stream after DynamoDB trimmed every record up to `trimmed_through` (24 hours old).

    GetShardIterator with a sequence number older than the trim point raises
    TrimmedDataAccessException; TRIM_HORIZON starts "at the last (untrimmed) stream record".
    """

    def __init__(self, streams: Any, trimmed_through: str) -> None:
        self._streams = streams
        self.trimmed_through = trimmed_through

    def get_shard_iterator(self, **parameters: Any) -> Any:
        kind = parameters["ShardIteratorType"]
        if kind == "TRIM_HORIZON":
            parameters = {**parameters, "ShardIteratorType": "AFTER_SEQUENCE_NUMBER"}
            parameters["SequenceNumber"] = self.trimmed_through
        elif kind in ("AFTER_SEQUENCE_NUMBER", "AT_SEQUENCE_NUMBER") and int(parameters["SequenceNumber"]) < int(
            self.trimmed_through
        ):
            raise client_error("TrimmedDataAccessException", "GetShardIterator")
        return self._streams.get_shard_iterator(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams, name)


class ManyShards:
    """moto's stream as DescribeStream pages a large one: 100 shards a page, this table's shards after 10,000 others.

    AWS, *DescribeStream*: "Limit: The maximum number of shard objects to return. The upper limit is
    100." "The only way to know when you have reached the end of the result set is when
    LastEvaluatedShardId is empty." Nothing bounds the number of shards a stream lists.
    """

    def __init__(self, streams: Any, others: int = 10_000) -> None:
        self._streams = streams
        self.others = [f"shardId-00000000000000000000-{number:08d}" for number in range(others)]

    def describe_stream(self, **parameters: Any) -> Any:
        start = parameters.get("ExclusiveStartShardId")
        position = self.others.index(start) + 1 if start in self.others else 0
        if (start is not None and start not in self.others) or position >= len(self.others):
            return self._streams.describe_stream(StreamArn=parameters["StreamArn"])
        page = self.others[position : position + 100]
        description = self._streams.describe_stream(StreamArn=parameters["StreamArn"])["StreamDescription"]
        description = {**description, "Shards": [{"ShardId": shard_id} for shard_id in page]}
        description["LastEvaluatedShardId"] = page[-1]
        return {"StreamDescription": description}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams, name)
