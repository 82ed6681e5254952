"""The module's deployment in moto, as the operator tools find it, and the aggregator's design in miniature.

`deploy` creates what terraform/ creates around a table: the table (any attribute names, its
stream and sparse index), the progress table, the failure queue, the aggregator and query functions
with the module's environment, and the event source mapping. With `single_table` it attaches to a
platform's own table instead (source_table_name, docs/attaching.md): a single-table design keyed
PK/SK, downloads marked among other item types, the aggregates and their index in `<name>-aggregates`.
`ModelAggregator` plays the mapping and the aggregator's reading just far enough for the operator
tools' tests: it reads the shard from its checkpoint one record at a time, parses each record with
the shipped aggregator's `parse_record` and the Schema its Settings read from the deployed
environment, hands each download to the shipped aggregator's store (`aggregate_store.AggregateStore`:
watermarks, the recount fence, a repair's band), and advances the checkpoint. Its reading is a test
double; its parsing and writes are the shipped code's.
"""

from __future__ import annotations

import io
import json
import math
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

import boto3
import botocore.handlers
import pytest
from botocore.awsrequest import AWSResponse

from aggregate_store import AggregateStore
from aggregate_writes import Contribution
from aggregator_settings import Settings
from delivery import ShardRef
from download_records import Download, Ignored, Rejected, parse_record
from leaderboard_core.attributes import AttributeNames
from leaderboard_core.index_layout import leaderboard_partition, order_of
from leaderboard_core.source_items import DownloadMarker
from leaderboard_tools.cli import main
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile import Reconciler
from leaderboard_tools.recover import Pacing, recover
from shard_progress import ProgressStore
from shard_reader import _as_lambda_record
from tests.unit.conftest import moto_client

REGION = "us-east-1"
MONTH = "2018-03"
"""The month of the stack's default download timestamp (write_download), the month the tools' tests repair."""
QUICK_BANDS = {"clock_margin_seconds": 0, "band_settle_seconds": 0, "band_poll_seconds": 0.05, "band_seconds": 5}
"""A repair's band as a unit test can afford it: moto stamps stream records with this machine's clock, so no clock
margin is needed, and the band closes once the fence's second has passed and the stream shows nothing left."""
QUICK_RECOVERY = Pacing(long_poll_seconds=0, settle_seconds=0)
"""recover as a unit test can afford it: moto answers a short poll with every visible message (its queue is one
server), and its aggregator's transactions are applied before the call that sends them returns."""
DEFAULT_ACCOUNT_ID = "123456789012"
DOWNLOADS = DownloadMarker("type", "DOWNLOAD")
"""source_item_filter as docs/attaching.md writes it: the platform's downloads are its items of type DOWNLOAD."""


@dataclass(frozen=True)
class SingleTable:
    """A platform's own table, attached with source_table_name (docs/attaching.md): a single-table design keyed
    `partition_key`/`sort_key` (no index), users and playlists beside the downloads. A download names its song in the
    entity attribute (not a key, unless `partition_key` is the entity's name) and carries `marker`."""

    table: str = "music-platform"
    partition_key: str = "PK"
    sort_key: str = "SK"
    key_types: tuple[str, str] = ("S", "S")
    marker: DownloadMarker | None = DOWNLOADS
    view_type: str = "NEW_AND_OLD_IMAGES"


@dataclass(frozen=True)
class MotoStack:
    name: str
    table: str
    """The downloads' table, whose stream the aggregator reads: `<name>-downloads`, or the platform's own."""
    stream_arn: str
    progress_table: str | None
    queue_url: str
    names: AttributeNames
    shards: int
    aggregator: str
    query: str
    band_queue_url: str | None = None
    aggregates_table: str = ""
    """Where the aggregates are: `<name>-aggregates` beside a platform's table; by default `table` itself."""
    single_table: SingleTable | None = None

    def __post_init__(self) -> None:
        if not self.aggregates_table:
            object.__setattr__(self, "aggregates_table", self.table)


def _function_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return event\n")
    return buffer.getvalue()


def deploy(
    name: str = "music",
    names: AttributeNames | None = None,
    shards: int = 1,
    previous_shards: int | None = None,
    ttl_attribute: str | None = None,
    with_progress_table: bool = True,
    window_seconds: int = 60,
    aggregator_settings: dict[str, str] | None = None,
    band_queue: bool = False,
    single_table: SingleTable | None = None,
    retractions: bool = False,
) -> MotoStack:
    """The module's resources in moto; `band_queue`: with the queue of the repairs' band records, as the module has;
    `single_table`: attached to that platform table (created with its stream unless it exists already, as a platform
    brings it), the aggregates in `<name>-aggregates`; `retractions`: the module's `retractions` (RETRACTIONS=true,
    its table's stream NEW_AND_OLD_IMAGES)."""
    names = names or AttributeNames()
    dynamodb = moto_client("dynamodb")
    if single_table is None:
        table = aggregates_table = f"{name}-downloads"
        view_type = "NEW_AND_OLD_IMAGES" if retractions else "NEW_IMAGE"
        description = _leaderboard_table(dynamodb, table, names, stream=True, view_type=view_type)
    else:
        table, aggregates_table = single_table.table, f"{name}-aggregates"
        if table not in dynamodb.list_tables()["TableNames"]:
            platform_table(single_table)
        description = dynamodb.describe_table(TableName=table)["Table"]
        assert description.get("LatestStreamArn"), "the module attaches to a table with a stream"
        _leaderboard_table(dynamodb, aggregates_table, names, stream=False)
    if ttl_attribute:
        dynamodb.update_time_to_live(
            TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl_attribute}
        )
    progress_table = f"{name}-progress" if with_progress_table else None
    if progress_table:
        dynamodb.create_table(
            TableName=progress_table,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "ShardKey", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "ShardKey", "KeyType": "HASH"}],
        )
    sqs = moto_client("sqs")
    queue_url = sqs.create_queue(QueueName=f"{name}-aggregator-failures")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    band_queue_url = sqs.create_queue(QueueName=f"{name}-recount-bands")["QueueUrl"] if band_queue else None
    role = moto_client("iam").create_role(
        RoleName=f"{name}-role", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []})
    )["Role"]["Arn"]
    lambda_client = moto_client("lambda")
    aggregator_environment = {
        "TABLE_NAME": table,
        "TABLE_ARN": description["TableArn"],
        "ENTITY_ATTRIBUTE": names.entity,
        "SORT_KEY_ATTRIBUTE": names.sort_key,
        "TIMESTAMP_ATTRIBUTE": names.timestamp,
        "PERIOD_ATTRIBUTE": names.period,
        "COUNT_ATTRIBUTE": names.count,
        "ORDER_ATTRIBUTE": names.order,
        "LEADERBOARD_SHARDS": str(shards),
        "FAILURE_QUEUE_URL": queue_url,
        "TUMBLING_WINDOW_SECONDS": str(window_seconds),
    }
    if progress_table:
        aggregator_environment["PROGRESS_TABLE_NAME"] = progress_table
    if band_queue_url:
        aggregator_environment["RECOUNT_BAND_QUEUE_URL"] = band_queue_url
    if retractions:
        aggregator_environment["RETRACTIONS"] = "true"
    aggregator_environment |= aggregator_settings or {}
    query_environment = {
        "TABLE_NAME": table,
        "INDEX_NAME": "MonthDownloadsIndex",
        "LEADERBOARD_SHARDS": str(shards),
        "LEADERBOARD_SHARDS_PREVIOUS": "" if previous_shards is None else str(previous_shards),
    }
    if single_table is not None:
        # As terraform/lambda.tf sets them with source_table_name: the stream's table, the aggregates', the marker.
        marker = single_table.marker
        aggregator_environment |= {
            "AGGREGATES_TABLE_NAME": aggregates_table,
            "SOURCE_ITEM_ATTRIBUTE": marker.attribute if marker else "",
            "SOURCE_ITEM_VALUE": marker.value if marker else "",
        }
        del query_environment["TABLE_NAME"]
        query_environment["AGGREGATES_TABLE_NAME"] = aggregates_table
    for function, environment in ((f"{name}-aggregator", aggregator_environment), (f"{name}-query", query_environment)):
        lambda_client.create_function(
            FunctionName=function,
            Runtime="python3.12",
            Role=role,
            Handler="handler.handler",
            Code={"ZipFile": _function_zip()},
            Environment={"Variables": environment},
        )
    lambda_client.create_event_source_mapping(
        EventSourceArn=description["LatestStreamArn"],
        FunctionName=f"{name}-aggregator",
        StartingPosition="TRIM_HORIZON",
        TumblingWindowInSeconds=window_seconds,
        DestinationConfig={"OnFailure": {"Destination": queue_arn}},
    )
    _keep_the_stream(table)
    return MotoStack(
        name=name,
        table=table,
        stream_arn=description["LatestStreamArn"],
        progress_table=progress_table,
        queue_url=queue_url,
        names=names,
        shards=shards,
        aggregator=f"{name}-aggregator",
        query=f"{name}-query",
        band_queue_url=band_queue_url,
        aggregates_table=aggregates_table,
        single_table=single_table,
    )


def _leaderboard_table(
    dynamodb: Any, table: str, names: AttributeNames, stream: bool, view_type: str = "NEW_IMAGE"
) -> dict[str, Any]:
    """A table keyed by the entity and the board with the sparse leaderboard index: the guide's downloads table (its
    stream on), or `<name>-aggregates` (aggregates_table.tf: no stream)."""
    return dynamodb.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": names.entity, "AttributeType": "S"},
            {"AttributeName": names.sort_key, "AttributeType": "S"},
            {"AttributeName": names.period, "AttributeType": "S"},
            {"AttributeName": names.order, "AttributeType": "N"},
        ],
        KeySchema=[
            {"AttributeName": names.entity, "KeyType": "HASH"},
            {"AttributeName": names.sort_key, "KeyType": "RANGE"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "MonthDownloadsIndex",
                "KeySchema": [
                    {"AttributeName": names.period, "KeyType": "HASH"},
                    {"AttributeName": names.order, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": [names.count]},
            }
        ],
        **({"StreamSpecification": {"StreamEnabled": True, "StreamViewType": view_type}} if stream else {}),
    )["TableDescription"]


def platform_table(single_table: SingleTable, stream: bool = True) -> None:
    """The platform's table as its own Terraform creates it: its key, no index; `stream=False`: a table that had no
    stream yet (its history written before one existed), enabled later with `enable_stream`."""
    keys = (single_table.partition_key, single_table.sort_key)
    moto_client("dynamodb").create_table(
        TableName=single_table.table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": key, "AttributeType": kind}
            for key, kind in zip(keys, single_table.key_types, strict=True)
        ],
        KeySchema=[{"AttributeName": keys[0], "KeyType": "HASH"}, {"AttributeName": keys[1], "KeyType": "RANGE"}],
        **(
            {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": single_table.view_type}} if stream else {}
        ),
    )


def enable_stream(single_table: SingleTable) -> None:
    """The platform turns its table's stream on (before attaching the module): what was written before is not on it."""
    moto_client("dynamodb").update_table(
        TableName=single_table.table,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": single_table.view_type},
    )


def _keep_the_stream(table: str) -> None:
    """moto delivers a table's stream records to its mapped function on every write and then drops them from the
    stream (restarting the sequence numbers); AWS's stream keeps every record for 24 hours whoever reads it. The
    tests play the mapping themselves (ModelAggregator), so moto's own delivery is switched off."""
    from moto.backends import get_backend

    backend = get_backend("dynamodb")[DEFAULT_ACCOUNT_ID][REGION]
    backend.get_table(table).lambda_event_source_mappings.clear()


def write_download(stack: MotoStack, song: str, download_id: str, timestamp: str = "2018-03-10T10:00:00Z") -> None:
    moto_client("dynamodb").put_item(
        TableName=stack.table,
        Item=download_item(stack.names, song, download_id, timestamp, stack.single_table),
    )


def download_item(
    names: AttributeNames,
    song: str,
    download_id: str,
    timestamp: str = "2018-03-10T10:00:00Z",
    single_table: SingleTable | None = None,
) -> dict[str, Any]:
    """A download as the table holds it: keyed by song and `download_id` in the guide's table; in a platform's
    single-table design keyed by its user and the download (`single_key`), its song and time attributes, marked."""
    item = {names.entity: {"S": song}, names.timestamp: {"S": timestamp}, "UserID": {"S": "user1"}}
    if single_table is None:
        return item | {names.sort_key: {"S": download_id}}
    marker = single_table.marker
    key = single_key(single_table, names, song, download_id)
    return item | key | ({marker.attribute: {"S": marker.value}} if marker else {})


def single_key(single_table: SingleTable, names: AttributeNames, song: str, download_id: str) -> dict[str, Any]:
    """The primary key `write_download` gives a download in a single-table design: its user's partition and the
    download (or the song's partition, where the table's partition key is the entity), unique across songs."""
    assert single_table.key_types == ("S", "S"), "write_download writes string keys"
    partition = song if single_table.partition_key == names.entity else "USER#user1"
    return {
        single_table.partition_key: {"S": partition},
        single_table.sort_key: {"S": f"DOWNLOAD#{song}#{download_id}"},
    }


def stored_count(stack: MotoStack, song: str, month: str) -> int | None:
    item = (
        moto_client("dynamodb")
        .get_item(
            TableName=stack.aggregates_table,
            Key={stack.names.entity: {"S": song}, stack.names.sort_key: {"S": month}},
            ConsistentRead=True,
        )
        .get("Item")
    )
    return None if item is None else int(item[stack.names.count]["N"])


def aggregate_item(stack: MotoStack, song: str, month: str) -> dict[str, Any] | None:
    return (
        moto_client("dynamodb")
        .get_item(
            TableName=stack.aggregates_table,
            Key={stack.names.entity: {"S": song}, stack.names.sort_key: {"S": month}},
            ConsistentRead=True,
        )
        .get("Item")
    )


def once_the_band_opens(
    stack: MotoStack, action: Callable[[], None], song: str = "song1", month: str = "2018-03"
) -> Callable[[float], None]:
    """A Reconciler's `sleep` that runs `action` once, at the first pause after the repair opened its band on the
    aggregate, then sleeps: what happens while a band is open. An exception of `action` reaches the repair."""
    pending = [action]

    def sleep(seconds: float) -> None:
        if pending and "RecountBand" in (aggregate_item(stack, song, month) or {}):
            pending.pop()()
        time.sleep(seconds)

    return sleep


def drifted_song(month: str = "2018-03", band_queue: bool = False) -> MotoStack:
    """song1 with two downloads, counted, then hand-edited to 5: the drift a repair sets right."""
    stack = deploy(band_queue=band_queue)
    write_download(stack, "song1", "d1")
    write_download(stack, "song1", "d2")
    ModelAggregator(stack).run()
    set_count(stack, "song1", month, 5)
    return stack


def set_count(stack: MotoStack, song: str, month: str, count: int) -> None:
    """A hand edit: the drift reconcile exists for."""
    names = stack.names
    moto_client("dynamodb").update_item(
        TableName=stack.aggregates_table,
        Key={names.entity: {"S": song}, names.sort_key: {"S": month}},
        UpdateExpression="SET #count = :count, #order = :order, #period = :partition",
        ExpressionAttributeNames={"#count": names.count, "#order": names.order, "#period": names.period},
        ExpressionAttributeValues={
            ":count": {"N": str(count)},
            ":order": {"N": str(order_of(count, song))},
            ":partition": {"S": leaderboard_partition(month, song, stack.shards)},
        },
    )


@dataclass
class ModelAggregator:
    """Counts a shard's downloads from its checkpoint, as the lead's aggregator does (a test double)."""

    stack: MotoStack
    refused: list[tuple[str, str, str]] = field(default_factory=list)
    """(song, board, sequence) of records refused by a recount fence."""
    held: int = 0
    """Records a repair's open band held."""
    refusals: list[str] = field(default_factory=list)
    """The reason of each refusal in `refused` (and of a count the store reports gone below 0)."""
    rejected: list[Rejected] = field(default_factory=list)
    """Records the shipped parse rejects: reported by the aggregator (failure queue), never counted."""
    ignored: list[str] = field(default_factory=list)
    """Why each record that is not a download was passed over (an aggregate write, an item of another type)."""

    @property
    def settings(self) -> Settings:
        """The shipped aggregator's Settings, read from the deployed function's environment as it reads its own."""
        if self._settings is None:
            environment = moto_client("lambda").get_function_configuration(FunctionName=self.stack.aggregator)[
                "Environment"
            ]["Variables"]
            self._settings = Settings.from_environment({"PROGRESS_TABLE_NAME": "", **environment})
        return self._settings

    def _store(self) -> AggregateStore:
        """The shipped aggregator's store, on the aggregates table: the fence, the band and the watermarks as it
        writes them."""
        assert self.stack.progress_table
        progress = ProgressStore(self._dynamodb, self.stack.progress_table)
        return AggregateStore(
            self._dynamodb,
            self.settings.aggregates_table_name,
            self.settings.schema,
            progress,
            leaderboard_shards=self.stack.shards,
        )

    def __post_init__(self) -> None:
        self._dynamodb = moto_client("dynamodb")
        self._streams = moto_client("dynamodbstreams")
        self._settings: Settings | None = None

    def _records(self, shard_id: str, checkpoint: str | None) -> list[dict[str, Any]]:
        parameters: dict[str, Any] = {"StreamArn": self.stack.stream_arn, "ShardId": shard_id}
        if checkpoint:
            parameters |= {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": str(int(checkpoint))}
        else:
            parameters["ShardIteratorType"] = "TRIM_HORIZON"
        iterator = self._streams.get_shard_iterator(**parameters)["ShardIterator"]
        records: list[dict[str, Any]] = []
        while iterator:
            page = self._streams.get_records(ShardIterator=iterator, Limit=1000)
            records.extend(page["Records"])
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
        return records

    def shard_ids(self) -> list[str]:
        description = self._streams.describe_stream(StreamArn=self.stack.stream_arn)["StreamDescription"]
        return [shard["ShardId"] for shard in description["Shards"]]

    def checkpoint(self, shard_id: str) -> str | None:
        assert self.stack.progress_table
        item = self._dynamodb.get_item(
            TableName=self.stack.progress_table,
            Key={"ShardKey": {"S": f"{self.stack.stream_arn}|{shard_id}"}},
            ConsistentRead=True,
        ).get("Item")
        return (item or {}).get("Checkpoint", {}).get("S")

    def run(self, limit: int | None = None) -> int:
        """Count up to `limit` records of every shard from its checkpoint (all when None); returns records read."""
        read = 0
        for shard_id in self.shard_ids():
            records = self._records(shard_id, self.checkpoint(shard_id))
            for record in records[:limit]:
                self._count(shard_id, record)
                read += 1
        return read

    def _count(self, shard_id: str, record: dict[str, Any]) -> None:
        sequence = record["dynamodb"]["SequenceNumber"]
        shard = ShardRef(self.stack.stream_arn, shard_id)
        # As the aggregator reads its shard (shard_reader): the record in a Lambda event's form, parsed by the shipped
        # parse_record with the Schema of the deployed Settings (marker, aggregates beside the downloads or not).
        parsed = parse_record(_as_lambda_record(record, shard), self.settings.schema)
        if isinstance(parsed, Download):
            # As catch_up.py hands a record to the store: one contribution per aggregate it changes (a MODIFY's or
            # REMOVE's moves, with retractions, each saying what it leaves of the download's part there).
            for change in parsed.changes:
                contribution = Contribution(
                    parsed.sequence,
                    parsed.created,
                    change.amount,
                    parsed.download_id,
                    change.value_after,
                    parsed.instant,
                )
                outcome = self._store().apply(change.key, shard, [contribution])
                self.refused += [(change.key.entity_id, change.key.board, sequence) for _ in outcome.refused]
                self.refusals += [reason for _, reason in outcome.refused]
                self.held += outcome.held
        elif isinstance(parsed, Rejected):
            self.rejected.append(parsed)
        else:
            assert isinstance(parsed, Ignored)
            self.ignored.append(parsed.reason)
        self._checkpoint(shard_id, sequence)

    def skip(self) -> int:
        """Move every shard's checkpoint past its records without counting them: records the mapping never delivered
        to the aggregator (a batch given up, records trimmed before it read them). Returns the records skipped."""
        skipped = 0
        for shard_id in self.shard_ids():
            records = self._records(shard_id, self.checkpoint(shard_id))
            if records:
                self._checkpoint(shard_id, records[-1]["dynamodb"]["SequenceNumber"])
            skipped += len(records)
        return skipped

    def _checkpoint(self, shard_id: str, sequence: str) -> None:
        assert self.stack.progress_table
        self._dynamodb.put_item(
            TableName=self.stack.progress_table,
            Item={
                "ShardKey": {"S": f"{self.stack.stream_arn}|{shard_id}"},
                "StreamArn": {"S": self.stack.stream_arn},
                "ShardId": {"S": shard_id},
                "Checkpoint": {"S": sequence.zfill(40)},
                "CheckpointSequence": {"S": sequence},
            },
        )


class RepairKilled(BaseException):
    """The operator's process killed (SIGKILL) while its band is open: no handler of it runs."""


def reconciler(stack: MotoStack, sleep: Callable[[float], None] = time.sleep, **settings: Any) -> Reconciler:
    clients = operator_clients(region=REGION)
    return Reconciler(
        clients,
        discover(clients, stack.table),
        empty_page_pause=0,
        sleep=sleep,
        **(QUICK_BANDS | {"band_seconds": 1} | settings),
    )


def run_recover(stack: MotoStack) -> Any:
    clients = operator_clients(region=REGION)
    return recover(
        clients,
        discover(clients, stack.table),
        reconciler(stack),
        stack.queue_url,
        visibility_seconds=30,
        pacing=QUICK_RECOVERY,
    )


def queue_counts(stack: MotoStack) -> tuple[int, int]:
    """(visible, delayed) messages of the failure queue."""
    attributes = moto_client("sqs").get_queue_attributes(
        QueueUrl=stack.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesDelayed"])


def band_of(stack: MotoStack) -> str | None:
    return ((aggregate_item(stack, "song1", MONTH) or {}).get("RecountBand") or {}).get("S")


def killed_repair_holding_a_missed_download(stack: MotoStack, band_seconds: float) -> int:
    """A repair of song1 killed while its band holds d3, a download its recount missed; the band's deadline.
    `band_seconds` past the fence's second: the band must still be open when d3 is read, so a test that waits the
    deadline out gives a few seconds, and one that only needs the deadline's value a span no load outlasts (120)."""
    aggregator = ModelAggregator(stack)

    def listener_then_kill() -> None:
        write_download(stack, "song1", "d3")
        aggregator.run()
        assert aggregator.held == 1
        raise RepairKilled

    killed = reconciler(stack, once_the_band_opens(stack, listener_then_kill, month=MONTH), band_seconds=band_seconds)
    killed._close_at_once = lambda bands: None  # type: ignore[method-assign] # SIGKILL: no handler of it runs
    with pytest.raises(RepairKilled):
        killed.run_month(MONTH, repair=True)
    band = band_of(stack)
    assert band is not None
    return int(band.split("|")[1])


def downloads_in_table(stack: MotoStack, song: str) -> int:
    items = moto_client("dynamodb").query(
        TableName=stack.table,
        KeyConditionExpression="songID = :song",
        FilterExpression="attribute_not_exists(#period)",
        ExpressionAttributeNames={"#period": stack.names.period},
        ExpressionAttributeValues={":song": {"S": song}},
        ConsistentRead=True,
    )["Items"]
    return len(items)


def run(argv: list[str]) -> int | BaseException:
    """The command's exit code; an exception it let escape (the tools once did) is returned as is.

    moto stamps stream records with this machine's clock, so a repair here needs no clock margin: without one it
    waits a few seconds for its band, not a minute (the flag is the operator's, `--clock-margin-seconds`)."""
    if argv[:1] in (["reconcile"], ["recover"]) and "--clock-margin-seconds" not in argv:
        argv = [*argv, "--clock-margin-seconds", str(QUICK_BANDS["clock_margin_seconds"])]
    try:
        return main(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    except Exception as error:
        return error


def on_every_new_client(monkeypatch: pytest.MonkeyPatch, event: str, handler: Callable[..., Any]) -> None:
    """`handler` registered for botocore's `event` in every client created from now on, from a new session or boto3's
    default one. Clients created before this call (the test's own) are not affected."""
    monkeypatch.setattr(botocore.handlers, "BUILTIN_HANDLERS", [(event, handler), *botocore.handlers.BUILTIN_HANDLERS])
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # boto3.client() makes a new one, with the handler


def answer_with(monkeypatch: pytest.MonkeyPatch, operation: str, handler: Any) -> None:
    """`handler(body)` answers `operation` ("service-id.Operation", a JSON-protocol service's request body as a dict)
    for every client created from now on; a None answer lets moto answer."""

    def before_call(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        body = params.get("body") or b"{}"
        parsed = handler(json.loads(body) if body[:1] in (b"{", "{") else {})
        return None if parsed is None else (AWSResponse(None, 200, {}, None), parsed)

    on_every_new_client(monkeypatch, f"before-call.{operation}", before_call)


class DynamoDBTime:
    """One time for DynamoDB's Date headers, this machine's clock and the repair's interval clock, which passes only
    while the repair sleeps: what a repair measures of the clocks is the same whatever the machine's load.

    moto stamps its Date header with this machine's clock as it starts answering, and the repair bounds DynamoDB's
    clock by that whole second and the request's round trip: on a loaded machine the offset it reports was off by up
    to half a slow round trip ("about 3601 s"). Here no time passes between a request and its answer, and every
    DynamoDB response carries this time's Date.
    """

    def __init__(self, offset: float = 0.0) -> None:
        self.now = math.ceil(time.time()) + 0.5
        """DynamoDB's time: after every record written so far, in the middle of a second (its Date header, a whole
        second, then bounds it to half a second either way)."""
        self.offset = offset
        """How far this machine's clock is off DynamoDB's."""

    def clock(self) -> float:
        """This machine's clock (the Reconciler's `clock`)."""
        return self.now + self.offset

    def monotonic(self) -> float:
        """The repair's interval clock: DynamoDB's time since an arbitrary boot."""
        return self.now - 1_000_000.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def stamp(self, parsed: dict[str, Any], **_: Any) -> None:
        """A DynamoDB response's Date header, as DynamoDB would have stamped it now (botocore's after-call event)."""
        headers = (parsed.get("ResponseMetadata") or {}).get("HTTPHeaders")
        if headers is not None and "date" in headers:
            headers["date"] = formatdate(math.floor(self.now), usegmt=True)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> DynamoDBTime:
        """Every DynamoDB client created from now on answers with this time's Date, and every Reconciler built with
        the defaults (the commands') uses this time's clocks and sleep."""
        on_every_new_client(monkeypatch, "after-call.dynamodb", self.stamp)
        for name, value in (("clock", self.clock), ("monotonic", self.monotonic), ("sleep", self.sleep)):
            monkeypatch.setitem(Reconciler.__init__.__kwdefaults__, name, value)
        return self


def given_up_batch(stack: MotoStack) -> None:
    """The mapping's on-failure record for the shard's records so far, sent to the failure queue."""
    streams = moto_client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=stack.stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=stack.stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    info = {
        "shardId": shard,
        "streamArn": stack.stream_arn,
        "startSequenceNumber": records[0]["dynamodb"]["SequenceNumber"],
        "endSequenceNumber": records[-1]["dynamodb"]["SequenceNumber"],
        "approximateArrivalOfFirstRecord": "2018-03-10T10:00:00Z",
        "approximateArrivalOfLastRecord": "2018-03-10T10:00:00Z",
        "batchSize": len(records),
    }
    body = {"requestContext": {"condition": "RetryAttemptsExhausted"}, "DDBStreamBatchInfo": info}
    moto_client("sqs").send_message(QueueUrl=stack.queue_url, MessageBody=json.dumps(body))
