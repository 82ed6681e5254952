"""Who reads a table's stream, against the two readers a shard allows.

DynamoDB Streams, LimitExceededException: "More than 2 processes are reading from the same streams
shard at the same time. Exceeding this limit may result in request throttling" (S6 in
docs/exactly-once.md). The module is both of them: its event source mapping and the aggregator's own
GetRecords of the shard it was invoked for, in ledger mode too (the module's `ledger`: the
watermarks still need each shard's records complete and in order, which the mapping's retries do not
promise). Every other event source mapping of the stream is one more reader, whatever its state (a
disabled one reads again once enabled, a deleting one until it is gone). A Kinesis streaming
destination is not a reader of the stream (DynamoDB writes the changes to Kinesis itself), so it is
neither listed nor counted; a process calling GetRecords itself (a DynamoDB Streams Kinesis Adapter
application) cannot be listed: AWS names no such reader.

Before the module is attached (no mapping of its aggregator yet), the aggregator counts as the two
readers it will add, so the check can run against a source table before `terraform apply`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_tools.deployment import Deployment, DeploymentError, _source_of_aggregates

READERS_PER_SHARD = 2
"""What DynamoDB Streams allows a shard before it throttles (S6)."""
AGGREGATOR_READERS = 2
"""The module's aggregator: its event source mapping and its own reads of the shard, with or without the ledger."""


@dataclass(frozen=True)
class Mapping:
    uuid: str
    state: str
    batch_size: int | None

    def as_json(self) -> dict[str, Any]:
        return {"uuid": self.uuid, "state": self.state, "batchSize": self.batch_size}


@dataclass(frozen=True)
class Reader:
    """The module's aggregator (its mappings, and its own reads) or one other mapping of the stream."""

    aggregator: bool
    function: str | None
    """The function's ARN; None: the module's aggregator, not attached yet."""
    mappings: tuple[Mapping, ...]
    note: str | None = None
    """Why it was taken for another consumer when that is not certain."""
    ledger: bool = False
    """The module's aggregator in ledger mode (LEDGER): it still reads its shard itself, so still two readers."""

    @property
    def readers(self) -> int:
        return AGGREGATOR_READERS if self.aggregator else len(self.mappings)

    @property
    def attached(self) -> bool:
        return bool(self.mappings)

    @property
    def function_name(self) -> str:
        return (self.function or "").split(":function:")[-1]

    def as_json(self) -> dict[str, Any]:
        return (
            {
                "kind": "aggregator" if self.aggregator else "mapping",
                "function": self.function,
                "attached": self.attached,
                "readers": self.readers,
                "mappings": [mapping.as_json() for mapping in self.mappings],
            }
            | ({"note": self.note} if self.note else {})
            | ({"ledger": self.ledger} if self.aggregator else {})
        )


@dataclass(frozen=True)
class StreamReaders:
    table: str
    stream_arn: str
    readers: tuple[Reader, ...]
    """The module's aggregator first (attached or not), then every other mapping of the stream."""

    @property
    def total(self) -> int:
        return sum(reader.readers for reader in self.readers)

    @property
    def too_many(self) -> bool:
        return self.total > READERS_PER_SHARD

    @property
    def others(self) -> tuple[Reader, ...]:
        return tuple(reader for reader in self.readers if not reader.aggregator)

    def warning(self) -> str | None:
        """What to do when the shards have more readers than they allow; None when they do not."""
        if not self.too_many:
            return None
        others = sorted({reader.function_name for reader in self.others})
        move = (
            f"Move {', '.join(others)} off the stream (to Kinesis Data Streams for DynamoDB, for instance: a Kinesis "
            "streaming destination is not a reader of the stream), then run this again"
            if others
            else "Attach one aggregator of the module to this stream, not several"
        )
        return (
            f"{self.total} readers of each shard of the stream of {self.table}, and DynamoDB Streams allows "
            f"{READERS_PER_SHARD} before it throttles (LimitExceededException). {move}. Or accept the throttling: the "
            "aggregator retries throttled reads with backoff and counts nothing twice, but the leaderboards lag; its "
            "ThrottledStreamReads metric (alarm throttled_stream_reads) shows it."
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "streamArn": self.stream_arn,
            "readers": [reader.as_json() for reader in self.readers],
            "total": self.total,
            "allowed": READERS_PER_SHARD,
            "tooMany": self.too_many,
            "warning": self.warning(),
        }


def stream_readers(clients: Any, table: str, deployment: Deployment | None) -> StreamReaders:
    """The readers of the current stream of `table` (the downloads' table, or `<name>-aggregates`). `deployment`:
    what discovery read; None when it found no aggregator of the module (not attached yet), and then the stream is
    read from DescribeTable and a mapping's function is the module's aggregator if its environment says so."""
    if deployment is not None and deployment.aggregator_function:
        table, stream_arn = deployment.table, deployment.stream_arn
    else:
        table = _source_of_aggregates(clients.lambda_, table) or table
        stream_arn = _current_stream(clients.dynamodb, table)
    if not stream_arn:
        raise DeploymentError(
            f"table {table} has no stream, so nothing reads one: the module attaches to a table whose stream is "
            "enabled (StreamViewType NEW_IMAGE or NEW_AND_OLD_IMAGES)"
        )
    mappings = _mappings(clients.lambda_, stream_arn)
    aggregators: dict[str, list[Mapping]] = {}
    readers: list[Reader] = []
    for listed in mappings:
        function = listed["FunctionArn"]
        mapping = Mapping(listed["UUID"], listed.get("State", ""), listed.get("BatchSize"))
        aggregator, note = (
            (True, None) if function in aggregators else _is_aggregator(clients, function, table, deployment)
        )
        if aggregator:
            # A mapping Terraform replaced stays listed (Deleting) beside its successor: one aggregator, two readers.
            aggregators.setdefault(function, []).append(mapping)
        else:
            readers.append(Reader(aggregator=False, function=function, mappings=(mapping,), note=note))
    ledger = deployment is not None and deployment.ledger
    found = [
        Reader(aggregator=True, function=function, mappings=tuple(of), ledger=ledger)
        for function, of in aggregators.items()
    ]
    return StreamReaders(
        table=table,
        stream_arn=stream_arn,
        readers=(*(found or [Reader(aggregator=True, function=None, mappings=())]), *readers),
    )


def _current_stream(dynamodb: Any, table: str) -> str | None:
    try:
        description = dynamodb.describe_table(TableName=table)["Table"]
    except ClientError as error:
        raise DeploymentError(f"cannot read table {table}: {error}") from error
    enabled = (description.get("StreamSpecification") or {}).get("StreamEnabled", False)
    return description.get("LatestStreamArn") if enabled else None


def _mappings(lambda_client: Any, stream_arn: str) -> list[dict[str, Any]]:
    """Every event source mapping of the stream, in any state."""
    try:
        pages = lambda_client.get_paginator("list_event_source_mappings").paginate(EventSourceArn=stream_arn)
        return [mapping for page in pages for mapping in page.get("EventSourceMappings", [])]
    except ClientError as error:
        raise DeploymentError(f"cannot list the event source mappings of {stream_arn}: {error}") from error


def _is_aggregator(clients: Any, function: str, table: str, deployment: Deployment | None) -> tuple[bool, str | None]:
    """Whether `function` is the module's aggregator for `table`: the one discovery found, or (discovery found none) a
    function whose environment is an aggregator's of this table. A function whose configuration cannot be read (another
    team's, without the permission) is taken for another consumer, and the note says so."""
    if deployment is not None and deployment.aggregator_function:
        return function == deployment.aggregator_function, None
    try:
        configuration = clients.lambda_.get_function_configuration(FunctionName=function)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        return False, f"its configuration could not be read ({code}): taken for another consumer"
    environment = (configuration.get("Environment") or {}).get("Variables") or {}
    return environment.get("TABLE_NAME") == table and "COUNT_ATTRIBUTE" in environment, None
