"""Who reads a table's stream, against the two readers a shard allows.

DynamoDB Streams, LimitExceededException: "More than 2 processes are reading from the same streams
shard at the same time. Exceeding this limit may result in request throttling" (S6 in
docs/exactly-once.md). With the module's `stream_readers = 2` (the default, in ledger mode too) the
module is both of them: its event source mapping and the aggregator's own GetRecords of the shard it
was invoked for (the watermarks need each shard's records complete and in order, which the mapping's
retries do not promise). With `stream_readers = 1` (ledger mode only) the mapping is the module's one
steady reader: the aggregator applies what it delivers, and reads a shard only when `recover` hands it
a batch the mapping gave up, for the minutes that takes. Every other event source mapping of the
stream is one more reader, whatever its state (a disabled one reads again once enabled, a deleting
one until it is gone). A Kinesis streaming destination is not a reader of the stream (DynamoDB
writes the changes to Kinesis itself), so it is neither listed nor counted; a process calling
GetRecords itself (a DynamoDB Streams Kinesis Adapter application) cannot be listed: AWS names no
such reader.

Before the module is attached (no mapping of its aggregator yet), the aggregator counts as the
readers it will add (`planned`: the `stream_readers` it will be applied with, 2 unless given), so the
check can run against a source table before `terraform apply`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_core.claims import LEDGER_VARIABLE
from leaderboard_tools.deployment import (
    STREAM_READERS_VARIABLE,
    TWO_STREAM_READERS,
    Deployment,
    DeploymentError,
    _source_of_aggregates,
    deployed_stream_readers,
)

READERS_PER_SHARD = 2
"""What DynamoDB Streams allows a shard before it throttles (S6)."""
MOMENTARY_READ_BACK = (
    "recover's read-back of a batch the mapping gave up is a momentary reader, only after a give-up and for the "
    "minutes it runs"
)
"""What a one-reader deployment adds beside its steady reader, and why it is not counted."""


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
    """The module's aggregator in ledger mode (LEDGER)."""
    stream_readers: int = TWO_STREAM_READERS
    """The module's aggregator: the steady readers it takes of each shard (STREAM_READERS, or what it is planned with
    before it is attached): 2, its mapping and its own reads; 1, its mapping only."""

    @property
    def readers(self) -> int:
        return self.stream_readers if self.aggregator else len(self.mappings)

    @property
    def momentary(self) -> str | None:
        """A reader that comes only for a while and is not counted: the one-reader aggregator's read-back."""
        return MOMENTARY_READ_BACK if self.aggregator and self.stream_readers == 1 else None

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
            | ({"ledger": self.ledger, "streamReaders": self.stream_readers} if self.aggregator else {})
            | ({"momentary": self.momentary} if self.momentary else {})
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

    @property
    def aggregator_readers(self) -> int:
        """The steady readers the module's aggregator takes (the first reader listed)."""
        return next((reader.readers for reader in self.readers if reader.aggregator), TWO_STREAM_READERS)

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
        one_reader = (
            " Or, in ledger mode, apply the module with stream_readers = 1: the mapping is then its only steady reader."
            if self.aggregator_readers == TWO_STREAM_READERS and self.total - 1 <= READERS_PER_SHARD
            else ""
        )
        throttling = (
            "the aggregator retries throttled reads with backoff and counts nothing twice, but the leaderboards lag; "
            "its ThrottledStreamReads metric (alarm throttled_stream_reads) shows it."
            if self.aggregator_readers == TWO_STREAM_READERS
            else "the mappings' reads are throttled and retried, and the leaderboards lag; the iterator_age alarm "
            "shows it."
        )
        return (
            f"{self.total} readers of each shard of the stream of {self.table}, and DynamoDB Streams allows "
            f"{READERS_PER_SHARD} before it throttles (LimitExceededException). {move}.{one_reader} Or accept the "
            f"throttling: {throttling}"
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


def stream_readers(
    clients: Any, table: str, deployment: Deployment | None, planned: int | None = None
) -> StreamReaders:
    """The readers of the current stream of `table` (the downloads' table, or `<name>-aggregates`). `deployment`:
    what discovery read; None when it found no aggregator of the module (not attached yet), and then the stream is
    read from DescribeTable and a mapping's function is the module's aggregator if its environment says so.
    `planned`: the `stream_readers` the module is (to be) applied with; an attached aggregator's must agree."""
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
    settings: dict[str, tuple[bool, int]] = {}
    readers: list[Reader] = []
    for listed in mappings:
        function = listed["FunctionArn"]
        mapping = Mapping(listed["UUID"], listed.get("State", ""), listed.get("BatchSize"))
        aggregator, note = (
            (True, None) if function in aggregators else _is_aggregator(clients, function, table, deployment, settings)
        )
        if aggregator:
            # A mapping Terraform replaced stays listed (Deleting) beside its successor: one aggregator, its readers.
            aggregators.setdefault(function, []).append(mapping)
        else:
            readers.append(Reader(aggregator=False, function=function, mappings=(mapping,), note=note))
    found = []
    for function, of in aggregators.items():
        ledger, deployed = settings[function]
        if planned is not None and planned != deployed:
            raise DeploymentError(
                f"--stream-readers {planned} contradicts the deployment: the aggregator {function} "
                f"({STREAM_READERS_VARIABLE}) says {deployed}"
            )
        found.append(
            Reader(aggregator=True, function=function, mappings=tuple(of), ledger=ledger, stream_readers=deployed)
        )
    to_come = Reader(aggregator=True, function=None, mappings=(), stream_readers=planned or TWO_STREAM_READERS)
    return StreamReaders(table=table, stream_arn=stream_arn, readers=(*(found or [to_come]), *readers))


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


def _is_aggregator(
    clients: Any, function: str, table: str, deployment: Deployment | None, settings: dict[str, tuple[bool, int]]
) -> tuple[bool, str | None]:
    """Whether `function` is the module's aggregator for `table`: the one discovery found, or (discovery found none) a
    function whose environment is an aggregator's of this table; an aggregator's ledger mode and stream readers go into
    `settings`. A function whose configuration cannot be read (another team's, without the permission) is taken for
    another consumer, and the note says so."""
    if deployment is not None and deployment.aggregator_function:
        settings[function] = (deployment.ledger, deployment.stream_readers)
        return function == deployment.aggregator_function, None
    try:
        configuration = clients.lambda_.get_function_configuration(FunctionName=function)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        return False, f"its configuration could not be read ({code}): taken for another consumer"
    environment = (configuration.get("Environment") or {}).get("Variables") or {}
    if environment.get("TABLE_NAME") != table or "COUNT_ATTRIBUTE" not in environment:
        return False, None
    settings[function] = (environment.get(LEDGER_VARIABLE) == "true", deployed_stream_readers(environment))
    return True, None
