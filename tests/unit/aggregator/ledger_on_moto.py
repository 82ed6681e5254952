"""Ledger mode's handler on moto's tables (aggregates, progress, ledger) and a stream the test writes itself.

Helpers, not tests. `LedgerWorld` keeps the table's items as the test changes them, appends each change's stream record
(INSERT, MODIFY, REMOVE with both images, as NEW_AND_OLD_IMAGES writes them) to the shard the test names, and lets the
test choose what is read when: a direct invocation through a record (the handler as deployed), a reader whose progress
read is stale (a re-read), or a backfill's transaction (its ledger Put with what it counts, and the counts). `recount`
counts the items' last images independently of the aggregator's code.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from email.utils import formatdate
from typing import Any

import pytest
from botocore.exceptions import ClientError

import wiring
from aggregator_settings import Settings
from batch_report import BatchReport
from catch_up import advance, catch_up
from delivery import ShardRef
from download_records import Schema
from invocation_context import InvocationContext
from leaderboard_core.claims import CLAIM_KEY, backfill_claim, claim_key
from leaderboard_core.index_layout import ORDER_SCALE, leaderboard_partition, order_tiebreak
from leaderboard_core.source_items import DownloadMarker
from progress_item import Progress
from tests.unit.aggregator.handler_on_moto import Deployed, aggregator_dependencies, aggregator_settings, client_error
from tests.unit.conftest import FakeLambdaContext, count_of

LEDGER_TABLE = "test-ledger"
TABLE = "test-downloads"
TABLE_ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/test-downloads"
STREAM_ARN = TABLE_ARN + "/stream/2018-01-01T00:00:00.000"
ROOT = "shardId-00000001000000000000-aaaa0000"
CHILD = "shardId-00000002000000000000-bbbb0000"
MARKER = DownloadMarker("Type", "download")
"""source_item_filter in these tests: downloads carry Type = download."""
OK = {"state": {}, "batchItemFailures": []}
"""The handler's answer to a tumbling-window invocation that applied its records and carries no state."""


def key_of(song: str, number: int) -> dict[str, Any]:
    return {"songID": {"S": song}, "SK": {"S": f"{song}-d{number}"}}


def image(song: str, number: int, month: str, valid: bool = True, download: bool = True) -> dict[str, Any]:
    """A download's item: in `month` (day 15), with an unreadable timestamp when not `valid`, and a Type that
    source_item_filter passes only when `download`."""
    timestamp = f"{month}-15T10:00:00Z" if valid else "not a time"
    return {
        **key_of(song, number),
        "Timestamp": {"S": timestamp},
        "Type": {"S": "download" if download else "playlist"},
    }


@dataclass
class ShardLog:
    parent: str | None
    next_sequence: int
    records: list[dict[str, Any]] = field(default_factory=list)


class FakeStreams:
    """The stream as DynamoDB Streams answers for it: every shard open and listed with its parent, read in order."""

    def __init__(self, shards: dict[str, ShardLog]) -> None:
        self.shards = shards

    def describe_stream(self, **parameters: Any) -> Any:
        listed = []
        for shard_id, log in self.shards.items():
            first = log.records[0]["dynamodb"]["SequenceNumber"] if log.records else str(log.next_sequence)
            entry: dict[str, Any] = {"ShardId": shard_id, "SequenceNumberRange": {"StartingSequenceNumber": first}}
            if log.parent is not None:
                entry["ParentShardId"] = log.parent
            listed.append(entry)
        description = {"StreamArn": STREAM_ARN, "StreamStatus": "ENABLED", "Shards": listed}
        return {"StreamDescription": description}

    def get_shard_iterator(self, **parameters: Any) -> Any:
        records = self.shards[parameters["ShardId"]].records
        kind, sequence = parameters["ShardIteratorType"], parameters.get("SequenceNumber")
        position = 0
        if kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
            after = kind == "AFTER_SEQUENCE_NUMBER"
            position = next(
                (
                    index
                    for index, record in enumerate(records)
                    if int(record["dynamodb"]["SequenceNumber"]) > int(sequence) - (0 if after else 1)
                ),
                len(records),
            )
        return {"ShardIterator": f"{parameters['ShardId']}|{position}"}

    def get_records(self, **parameters: Any) -> Any:
        shard_id, position = parameters["ShardIterator"].rsplit("|", 1)
        records = self.shards[shard_id].records[int(position) : int(position) + 1000]
        return {
            "Records": [_copy(record) for record in records],
            "NextShardIterator": f"{shard_id}|{int(position) + len(records)}",
        }


def _copy(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "dynamodb": dict(record["dynamodb"])}


class LedgerWorld:
    """The table's items, its stream, and the aggregator in ledger mode reading it."""

    def __init__(self, dynamodb: Any, sqs: Any, queue_url: str, schema: Schema | None = None) -> None:
        dynamodb.create_table(
            TableName=LEDGER_TABLE,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": CLAIM_KEY, "AttributeType": "S"}],
            KeySchema=[{"AttributeName": CLAIM_KEY, "KeyType": "HASH"}],
        )
        self.dynamodb = dynamodb
        self.items: dict[tuple[str, int], dict[str, Any]] = {}
        self.shards: dict[str, ShardLog] = {ROOT: ShardLog(None, 1_000_000)}
        self.streams = FakeStreams(self.shards)
        settings = aggregator_settings(
            aggregates_table_name=TABLE,
            table_arn=TABLE_ARN,
            progress_table_name="test-progress",
            failure_queue_url=queue_url,
            claims_table_name=LEDGER_TABLE,
            ledger=True,
            schema=schema or Schema(retractions=True, marker=MARKER),
        )
        self.settings = settings
        dependencies = aggregator_dependencies(settings, dynamodb, self.streams, sqs)
        dependencies.lineages_swept_at = float("inf")  # the shards here are open: nothing for a sweep to do
        self.deployed = Deployed(dynamodb, self.streams, sqs, queue_url, STREAM_ARN, ROOT, settings, dependencies)
        self.clock = 1_514_764_800
        """The stream's clock: each record's ApproximateCreationDateTime; one second passes with each record."""
        self.date_offset = 0
        """How far DynamoDB's clock (its Date header) is from the stream's: 0, one clock, unless a test skews it."""
        dynamodb.meta.events.register("after-call.dynamodb", self._stamp)

    def _stamp(self, parsed: dict[str, Any], **_: Any) -> None:
        """A DynamoDB response's Date header, on the world's clock (what the repair records as an item's read time)."""
        headers = (parsed.get("ResponseMetadata") or {}).get("HTTPHeaders")
        if headers is not None and "date" in headers:
            headers["date"] = formatdate(self.clock + self.date_offset, usegmt=True)

    def pass_time(self, seconds: int) -> None:
        """Time passes with nothing written: the next record is created `seconds` later."""
        self.clock += seconds

    # the table's writers

    def _record(self, shard_id: str, event: str, key: dict[str, Any], old: Any, new: Any) -> dict[str, Any]:
        log = self.shards[shard_id]
        stream: dict[str, Any] = {
            "ApproximateCreationDateTime": datetime.datetime.fromtimestamp(self.clock, datetime.UTC),
            "Keys": key,
            "SequenceNumber": str(log.next_sequence),
            "SizeBytes": 100,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        }
        if old is not None:
            stream["OldImage"] = old
        if new is not None:
            stream["NewImage"] = new
        record = {"eventID": f"{shard_id}-{log.next_sequence}", "eventName": event, "dynamodb": stream}
        log.records.append(record)
        log.next_sequence += 100
        self.clock += 1
        return record

    def put(
        self,
        shard_id: str,
        song: str,
        number: int,
        month: str,
        valid: bool = True,
        download: bool = True,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """PutItem (or an UpdateItem that leaves this image): an INSERT, or a MODIFY of the item that was there; `extra`
        attributes beside the download's (a summed amount)."""
        old = self.items.get((song, number))
        new = image(song, number, month, valid, download) | (extra or {})
        self.items[(song, number)] = new
        record = self._record(shard_id, "MODIFY" if old else "INSERT", key_of(song, number), old, new)
        return str(record["dynamodb"]["SequenceNumber"])

    def delete(self, shard_id: str, song: str, number: int) -> str | None:
        old = self.items.pop((song, number), None)
        if old is None:
            return None
        return str(self._record(shard_id, "REMOVE", key_of(song, number), old, None)["dynamodb"]["SequenceNumber"])

    def expire(self, shard_id: str, song: str, number: int) -> None:
        """DynamoDB's Time to Live deletes the item: its REMOVE names the service (S12)."""
        self.delete(shard_id, song, number)
        self.shards[shard_id].records[-1]["userIdentity"] = {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}

    def split(self, parent: str | None, child: str, first_sequence: int) -> None:
        """A child of `parent` (None: a shard of no lineage in common); its sequence numbers start at
        `first_sequence`, lower than the parent's if so chosen."""
        self.shards[child] = ShardLog(parent, first_sequence)

    def history_before_the_stream(
        self, song: str, number: int, month: str, extra: dict[str, Any] | None = None
    ) -> None:
        """An item written before the stream existed: in the table, on no shard."""
        self.items[(song, number)] = image(song, number, month) | (extra or {})

    # the backfill

    def backfill(self, keys: list[tuple[str, int]] | None = None, read_time: bool = True) -> list[tuple[str, int]]:
        """`leaderboard-tools backfill` in ledger mode, key by key: what the scan finds now, counted in one transaction
        with its ledger Put (Entity, Contribution, and when it read the item: ReadAt, DynamoDB's clock now; none when
        not `read_time`, as a backfill before ReadAt wrote it) where no ledger item exists. Returns the keys it
        counted."""
        counted = []
        for song, number in keys if keys is not None else sorted(self.items):
            item = self.items.get((song, number))
            month = counted_month(item)
            if item is None or month is None:
                continue
            read_at = self.clock + self.date_offset if read_time else None
            put = backfill_claim(LEDGER_TABLE, key_of(song, number), song, {month: 1}, read_at)
            try:
                self.dynamodb.transact_write_items(TransactItems=[put, backfill_update(song, month, 1)])
            except ClientError as error:
                if error.response["Error"]["Code"] != "TransactionCanceledException":
                    raise
                continue
            counted.append((song, number))
        return counted

    # the readers

    def last(self, shard_id: str) -> str:
        return str(self.shards[shard_id].records[-1]["dynamodb"]["SequenceNumber"])

    def read(self, shard_id: str, through: str | None = None, skip_ancestors: bool = False) -> dict[str, Any]:
        """A direct invocation of the shard through `through` (its last record by default), as `recover` makes one.
        `skip_ancestors`: the shard's lineage taken as counted (its parents read later, by their own invocations)."""
        if skip_ancestors:
            log = self.shards[shard_id]
            first = log.records[0]["dynamodb"]["SequenceNumber"] if log.records else None
            self.deployed.dependencies.progress.first_seen(
                ShardRef(STREAM_ARN, shard_id), first, log.parent, lineage_counted=True
            )
        event = {
            "shardId": shard_id,
            "eventSourceARN": STREAM_ARN,
            "Records": [],
            "throughSequenceNumber": through or self.last(shard_id),
        }
        return self.deployed.invoke(event, FakeLambdaContext())

    def progress(self, shard_id: str) -> Progress:
        return self.deployed.dependencies.progress.read(ShardRef(STREAM_ARN, shard_id))

    def unread(self, shard_id: str) -> Progress:
        """The shard's progress as a reader saw it before anything of the shard was counted."""
        log = self.shards[shard_id]
        return Progress(resume_at=log.records[0]["dynamodb"]["SequenceNumber"], parent_shard_id=log.parent, exists=True)

    def reread(self, shard_id: str, stale: Progress, through: str | None = None) -> BatchReport:
        """A reader that read the shard's progress earlier (`stale`): it reads again what others counted since."""
        report = BatchReport()
        deps, settings = self.deployed.dependencies, self.deployed.settings
        remaining: Callable[[], int] = FakeLambdaContext().get_remaining_time_in_millis
        shard = ShardRef(STREAM_ARN, shard_id)
        bound = through or self.last(shard_id)
        caught = catch_up(InvocationContext(settings, deps, remaining), shard, stale, bound, lambda *_: True, report)
        advance(deps, caught)
        return report

    def use_settings(self, settings: Settings) -> None:
        self.deployed.settings = settings

    # what the boards say, and the truth

    def boards(self) -> dict[tuple[str, str], int]:
        """Every aggregate's count but those at 0 (off the boards), read from the table."""
        found = {}
        for item in self.dynamodb.scan(TableName=TABLE)["Items"]:
            if "DownloadCount" in item and int(item["DownloadCount"]["N"]) != 0:
                found[(item["songID"]["S"], item["SK"]["S"])] = int(item["DownloadCount"]["N"])
        return found

    def recount(self) -> dict[tuple[str, str], int]:
        """The items' last images counted by the test's own rule: a download (Type) with a readable month, once."""
        truth: dict[tuple[str, str], int] = {}
        for (song, _), item in self.items.items():
            month = counted_month(item)
            if month is not None:
                truth[(song, month)] = truth.get((song, month), 0) + 1
        return truth

    def reports(self) -> list[dict[str, Any]]:
        return self.deployed.failure_messages()


def counted_month(item: dict[str, Any] | None) -> str | None:
    """The month an item counts in by the test's own reading, or None: not a download, or no readable timestamp."""
    if item is None or item.get("Type") != {"S": "download"}:
        return None
    timestamp = item["Timestamp"]["S"]
    return timestamp[:7] if timestamp.endswith("-15T10:00:00Z") else None


def backfill_update(song: str, month: str, added: int) -> dict[str, Any]:
    """The backfill's aggregate update (leaderboard_tools.backfill.transactions): the count and the order it adds."""
    return {
        "Update": {
            "TableName": TABLE,
            "Key": {"songID": {"S": song}, "SK": {"S": month}},
            "UpdateExpression": "ADD #count :added SET #period = :partition, "
            "#order = if_not_exists(#order, :tiebreak) + :scaled",
            "ExpressionAttributeNames": {"#count": "DownloadCount", "#period": "Month", "#order": "LeaderboardOrder"},
            "ExpressionAttributeValues": {
                ":added": {"N": str(added)},
                ":partition": {"S": leaderboard_partition(month, song, 1)},
                ":tiebreak": {"N": str(order_tiebreak(song))},
                ":scaled": {"N": str(added * ORDER_SCALE)},
            },
        }
    }


@pytest.fixture
def world(dynamodb: Any, sqs_queue: tuple[Any, str]) -> LedgerWorld:
    """Ledger mode with one reader per shard, its clock the stream's: the one-reader tests' `world` (import it; the
    two-reader tests have their own)."""
    return one_reader_world(dynamodb, *sqs_queue)


def one_reader_world(
    dynamodb: Any, sqs: Any, queue_url: str, schema: Schema | None = None, **settings_changed: Any
) -> LedgerWorld:
    """Ledger mode with one reader per shard, its clock the stream's (the records are written in 2018);
    `settings_changed`: other settings of the deployment (its index partitions), wired as the handler wires them."""
    world = LedgerWorld(dynamodb, sqs, queue_url, schema)
    settings = dataclasses.replace(world.settings, stream_readers=1, **settings_changed)
    dependencies = aggregator_dependencies(settings, dynamodb, world.streams, sqs)
    dependencies.clock = lambda: float(world.clock)
    wiring.one_reader_parts(dependencies, settings, dynamodb)
    world.deployed = dataclasses.replace(world.deployed, settings=settings, dependencies=dependencies)
    return world


def ledger_item_of(world: LedgerWorld, key: dict[str, Any]) -> dict[str, Any]:
    """The versioned ledger's item of a download `key`, read consistently: what the handler or the repair last wrote."""
    item = {CLAIM_KEY: {"S": claim_key(key)}}
    return world.dynamodb.get_item(TableName=LEDGER_TABLE, Key=item, ConsistentRead=True)["Item"]


def ledger_item(world: LedgerWorld, song: str, number: int) -> dict[str, Any]:
    """The ledger's item of the world's download `number` of `song` (the table's own key, not a single-table one)."""
    return ledger_item_of(world, key_of(song, number))


# another writer, a failure or a resent request between the handler's (or the repair's) steps


class Interleaved:
    """A DynamoDB client whose `method` runs `before` the first time it is called (another writer's step between the
    handler's read and its write), or whose calls are replaced by `instead` (a failure, a resent request)."""

    def __init__(self, client: Any, method: str, before: Callable[[], Any] | None = None, instead: Any = None) -> None:
        self.client, self.method, self.before, self.instead, self.calls = client, method, before, instead, 0

    def __getattr__(self, name: str) -> Any:
        if name != self.method:
            return getattr(self.client, name)

        def call(**parameters: Any) -> Any:
            self.calls += 1
            if self.before is not None:
                before, self.before = self.before, None
                before()
            if self.instead is not None:
                return self.instead(self.calls, getattr(self.client, name), parameters)
            return getattr(self.client, name)(**parameters)

        return call


def ledger_client(world: LedgerWorld, interleaved: Any) -> Any:
    """The versioned ledger's DynamoDB client replaced by `interleaved`, and its expiries' parts' (`expiry_keeps`,
    `followed_expiries`): in place, so that an invocation under way (a step run between its read and its write) goes
    on with it too."""
    ledger = world.deployed.dependencies.versioned_ledger
    assert ledger is not None
    ledger.client = ledger.expiry_keeps.client = ledger.followed_expiries.client = interleaved
    return interleaved


def on_call(number: int, step: Any) -> Any:
    """An `Interleaved` replacement: `step` runs before the client's `number`-th call of the method, then the call."""

    def call(calls: int, send: Any, parameters: dict[str, Any]) -> Any:
        if calls == number:
            step()
        return send(**parameters)

    return call


def fails_at(number: int | None, code: str, operation: str) -> Any:
    """An `Interleaved` replacement: the `number`-th call (every call when None) fails with DynamoDB's error `code`,
    as an outage or another writer's conflict would; the other calls go through."""

    def call(calls: int, send: Any, parameters: dict[str, Any]) -> Any:
        if number is None or calls == number:
            raise client_error(code, operation)
        return send(**parameters)

    return call


# what the mapping and recover hand the handler (one reader per shard)


def delivered(world: LedgerWorld, shard_id: str, sequences: list[str]) -> list[dict[str, Any]]:
    """The shard's records with these sequence numbers, as a Lambda event carries them."""
    records = []
    for record in world.shards[shard_id].records:
        if record["dynamodb"]["SequenceNumber"] in sequences:
            stream = {**record["dynamodb"]}
            stream["ApproximateCreationDateTime"] = stream["ApproximateCreationDateTime"].timestamp()
            records.append({**record, "dynamodb": stream, "eventSourceARN": STREAM_ARN})
    return records


def deliver(world: LedgerWorld, shard_id: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """One tumbling-window invocation of the mapping with these records."""
    event = {
        "Records": records,
        "window": {"start": "2018-01-01T00:00:00Z", "end": "2018-01-01T00:01:00Z"},
        "state": {},
        "shardId": shard_id,
        "eventSourceARN": STREAM_ARN,
        "isFinalInvokeForWindow": False,
        "isWindowTerminatedEarly": False,
    }
    return world.deployed.invoke(event, FakeLambdaContext())


def read_back(world: LedgerWorld, shard_id: str, start: str, end: str) -> dict[str, Any]:
    """recover's readBack of an on-failure record's range (its DDBStreamBatchInfo, as Lambda writes it)."""
    info = {
        "shardId": shard_id,
        "startSequenceNumber": start,
        "endSequenceNumber": end,
        "approximateArrivalOfFirstRecord": "2018-01-01T00:00:00Z",
        "approximateArrivalOfLastRecord": "2018-01-01T00:00:05Z",
        "batchSize": 2,
        "streamArn": STREAM_ARN,
    }
    return world.deployed.invoke({"readBack": info}, FakeLambdaContext())


def in_index(world: LedgerWorld, song: str, month: str) -> bool:
    """Whether the aggregate is on its board's index (it has its period attribute, Month)."""
    item = world.dynamodb.get_item(TableName=TABLE, Key={"songID": {"S": song}, "SK": {"S": month}}).get("Item", {})
    return "Month" in item


def kinds(world: LedgerWorld) -> list[str]:
    """The kinds of the failure queue's messages, in the order sent."""
    return [report["kind"] for report in world.reports()]


def trimmed_iterator(**_parameters: Any) -> Any:
    """A stream's GetShardIterator past the retention: the range is trimmed (TrimmedDataAccessException)."""
    raise client_error("TrimmedDataAccessException", "GetShardIterator")


# a single-table design's downloads: keyed by PK alone, the song an attribute of the item


def single_table(number: int, song: str, month: str = "2018-01") -> tuple[dict[str, Any], dict[str, Any]]:
    """A single-table design's download: keyed by PK, its song an attribute of the item."""
    key = {"PK": {"S": f"DOWNLOAD#{number}"}}
    image = {**key, "songID": {"S": song}, "Timestamp": {"S": f"{month}-15T10:00:00Z"}, "Type": {"S": "download"}}
    return key, image


def write(world: LedgerWorld, event: str, key: dict[str, Any], old: Any, new: Any, shard: str = ROOT) -> str:
    """A write of the table, as its stream record says it: the record's sequence number."""
    return str(world._record(shard, event, key, old, new)["dynamodb"]["SequenceNumber"])


def counts(world: LedgerWorld, *aggregates: tuple[str, str]) -> list[int]:
    """The aggregates' counts, in the order named; 0 where an aggregate has no item."""
    return [count_of(world.dynamodb, song, month) or 0 for song, month in aggregates]


# the summed world: boards that sum an attribute of each download


PLAYS = "Plays"
"""The summed attribute of the summed world (SUM_ATTRIBUTE)."""


def summed_world(dynamodb: Any, sqs: Any, queue_url: str, **settings_changed: Any) -> LedgerWorld:
    """The one-reader world with boards that sum each download's Plays (SUM_ATTRIBUTE); `settings_changed` as in
    one_reader_world."""
    schema = Schema(retractions=True, marker=MARKER, amount=PLAYS)
    return one_reader_world(dynamodb, sqs, queue_url, schema, **settings_changed)


@pytest.fixture
def summed(dynamodb: Any, sqs_queue: tuple[Any, str]) -> LedgerWorld:
    """The one-reader world with boards that sum each download's Plays (SUM_ATTRIBUTE)."""
    return summed_world(dynamodb, *sqs_queue)


def plays(amount: str) -> dict[str, Any]:
    """A download's summed attribute, `extra` to LedgerWorld.put."""
    return {PLAYS: {"N": amount}}


def sums(world: LedgerWorld) -> dict[tuple[str, str], Decimal]:
    """Every aggregate's sum but those at 0, read from the table."""
    found = {}
    for item in world.dynamodb.scan(TableName=TABLE)["Items"]:
        if "DownloadCount" in item and Decimal(item["DownloadCount"]["N"]) != 0:
            found[(item["songID"]["S"], item["SK"]["S"])] = Decimal(item["DownloadCount"]["N"])
    return found
