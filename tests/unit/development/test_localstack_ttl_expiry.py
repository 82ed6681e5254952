"""LocalStack's TTL deletions reach every reader of the stream with TTL's userIdentity, and only they do.

AWS: "Items that are deleted by the Time to Live process after expiration have the following fields:
Records[].userIdentity.type "Service", Records[].userIdentity.principalId "dynamodb.amazonaws.com""
(DynamoDB Streams API, Record). The ledger is driven directly; the sweep is a stand-in for LocalStack's
``delete_expired_items`` (same shape: a module function that connects, scans, and deletes in batches of 25
with BatchWriteItem) over a fake table and stream, read through a GetRecords handler that
``stamp_expiries`` patches as it patches LocalStack's provider (leaderboard_dev/emulators/ttl_expiry.py).
"""

from __future__ import annotations

import ast
import copy
import json
import threading
import time
import tomllib
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from moto.events.models import EventPattern

from leaderboard_dev.emulators import localstack
from leaderboard_dev.emulators.ttl_expiry import (
    GETRECORDS_IDENTITY,
    ExpiryLedger,
    Watch,
    carry_user_identity,
    first_removes,
    key_id,
    lambda_user_identity,
    note_expiries,
    stamp_expiries,
    stream_of,
)

LABEL = "2020-12-09T07:00:00.000"
STREAM = f"table/songs/stream/{LABEL}"
STREAM_ARN = f"arn:aws:dynamodb:us-east-1:000000000000:{STREAM}"
SHARD = "shardId-00000001607497000000-0abc1234"
NOW = 1_000
"""The fake sweep's clock: an item whose ExpiresAt is at or before it has expired."""
TTL_FILTER = {"userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]}}
"""The filter the DynamoDB guide gives for TTL deletions ("DynamoDB Streams and Time to Live")."""


def key(download: str) -> dict[str, Any]:
    return {"songID": {"S": "song1"}, "SK": {"S": download}}


def remove(sequence: int, download: str) -> dict[str, Any]:
    return {"eventName": "REMOVE", "dynamodb": {"Keys": key(download), "SequenceNumber": str(sequence)}}


def iterator_at(position: int, stream: str = STREAM) -> str:
    """DynamoDB Local's shape: the stream's ARN, then the shard and a position."""
    return f"arn:aws:dynamodb:ddblocal:000000000000:{stream}|{SHARD}|{position}"


def watch(*downloads: str, stream: str = STREAM) -> Watch:
    keys = {key_id(key(download)) for download in downloads}
    return Watch("songs", f"arn:aws:dynamodb:us-east-1:000000000000:{stream}", stream, keys, {}, {SHARD})


def swept(ledger: ExpiryLedger, found: dict[str, int], stream: str = STREAM) -> None:
    """A sweep that deleted these downloads and found their REMOVE records at these sequence numbers."""
    done = watch(*found, stream=stream)
    ledger.expect(done)
    done.found = {key_id(key(download)): str(sequence) for download, sequence in found.items()}
    ledger.settle(done)


def stamped(records: list[dict[str, Any]]) -> list[str]:
    return [record["dynamodb"]["SequenceNumber"] for record in records if "userIdentity" in record]


# Pure functions


def test_a_stream_arn_and_dynamodb_locals_shard_iterators_name_the_same_stream() -> None:
    # given the stream's ARN as LocalStack describes it, and iterators as DynamoDB Local writes them
    named = [
        STREAM_ARN,
        iterator_at(7),
        f"000|arn:aws:dynamodb:ddblocal:000000000000:{STREAM}|{SHARD}|7",
        "arn:aws:dynamodb:eu-west-1:111111111111:table/songs/stream/2020-12-09T07:00:00.000",
    ]
    # when the stream is read from each
    # then it is the same, whatever region and account are written into it; an opaque string names none
    assert {stream_of(text) for text in named} == {STREAM}
    assert stream_of("AAAAAAAAAAGQ") is None


def test_a_scanned_items_key_and_a_stream_records_keys_are_the_same_key() -> None:
    # given a key as a Scan's item gives it and as a stream record's Keys give it, in another order
    scanned = {"songID": {"S": "song1"}, "SK": {"S": "download-1"}}
    recorded = {"SK": {"S": "download-1"}, "songID": {"S": "song1"}}
    # then they are one key, binary keys included, and another value is another key
    assert key_id(scanned) == key_id(recorded)
    assert key_id({"id": {"B": b"\x00\x01"}}) == key_id({"id": {"B": bytearray(b"\x00\x01")}})
    assert key_id(scanned) != key_id(key("download-2"))


def test_a_sweep_finds_the_first_remove_of_each_deleted_key_after_its_start() -> None:
    # given the records after the sweep's start: the item's REMOVE, its INSERT again, a user's REMOVE of it
    records = [
        remove(5, "download-1"),
        {"eventName": "INSERT", "dynamodb": {"Keys": key("download-1"), "SequenceNumber": "6"}},
        remove(7, "download-1"),
        remove(8, "download-2"),
    ]
    found: dict[str, str] = {}
    # when the sweep looks for the one key it deleted
    first_removes(records, {key_id(key("download-1"))}, found)
    # then its record is the first REMOVE of that key, and no other key is taken
    assert found == {key_id(key("download-1")): "5"}


def test_lambda_events_name_the_identity_fields_as_lambdas_filters_do() -> None:
    # given a record as GetRecords returns it, stamped, and one without an identity
    records = [{**remove(5, "download-1"), "userIdentity": dict(GETRECORDS_IDENTITY)}, remove(6, "download-2")]
    events = [{"eventName": "REMOVE", "dynamodb": record["dynamodb"]} for record in records]
    # when the events carry their records' identity
    carried = carry_user_identity(records, events)
    # then the stamped event matches the guide's TTL filter, the other does not, and gains no identity
    assert carried[0]["userIdentity"] == {"principalId": "dynamodb.amazonaws.com", "type": "Service"}
    assert "userIdentity" not in carried[1]
    assert [EventPattern.load(json.dumps(TTL_FILTER)).matches_event(event) for event in carried] == [True, False]
    assert lambda_user_identity(None) is None


# The ledger


def test_a_noted_remove_is_stamped_in_every_read_by_every_reader() -> None:
    # given a sweep that deleted download-1, whose REMOVE is sequence 5
    ledger = ExpiryLedger()
    swept(ledger, {"download-1": 5})
    # when the mapping's poller reads it, then the aggregator, then a retry
    reads = [ledger.stamp(iterator_at(4), [remove(5, "download-1")]) for _ in range(3)]
    # then every read carries TTL's identity
    assert [record["userIdentity"] for read in reads for record in read] == [GETRECORDS_IDENTITY] * 3


def test_a_users_delete_before_the_expiry_or_of_the_item_written_again_after_it_is_not_stamped() -> None:
    # given a sweep whose REMOVE of download-1 is sequence 5
    ledger = ExpiryLedger()
    swept(ledger, {"download-1": 5})
    # when a late reader meets a user's earlier REMOVE of the same key, the expiry, and a user's later one
    read = ledger.stamp(iterator_at(0), [remove(2, "download-1"), remove(5, "download-1"), remove(9, "download-1")])
    # then only the expiry's record is TTL's
    assert stamped(read) == ["5"]


def test_the_same_key_at_the_same_sequence_number_in_another_stream_is_not_stamped() -> None:
    # given an expiry in the songs table's stream
    ledger = ExpiryLedger()
    swept(ledger, {"download-1": 5})
    other = "table/albums/stream/2020-12-09T08:00:00.000"
    # when the same key's REMOVE at the same sequence number is read from another table's stream
    read = ledger.stamp(iterator_at(0, other), [remove(5, "download-1")])
    # then it is that table's user delete
    assert stamped(read) == []


def test_a_remove_read_long_after_is_stamped_until_the_stream_retention_has_passed() -> None:
    # given a ledger on a clock, keeping what it noted for the stream's 24 hours and a margin
    moment = [0.0]
    ledger = ExpiryLedger(clock=lambda: moment[0])
    swept(ledger, {"download-1": 5})
    # when the record is read 24 hours later (a mapping disabled meanwhile)
    moment[0] = 24 * 60 * 60.0
    late = ledger.stamp(iterator_at(0), [remove(5, "download-1")])
    # then it is still TTL's; once the stream can no longer hold it, a later sweep forgets it
    assert stamped(late) == ["5"]
    moment[0] = 26 * 60 * 60.0
    swept(ledger, {"download-2": 9})
    assert stamped(ledger.stamp(iterator_at(0), [remove(5, "download-1"), remove(9, "download-2")])) == ["9"]


def test_a_reader_meeting_a_key_the_sweep_is_deleting_waits_until_the_sweep_noted_its_record() -> None:
    # given a sweep deleting download-1, its REMOVE (sequence 5) already in the stream but not yet noted
    ledger = ExpiryLedger(wait_seconds=10)
    deleting = watch("download-1")
    ledger.expect(deleting)
    read: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: read.extend(ledger.stamp(iterator_at(4), [remove(5, "download-1")])))
    # when a reader meets it
    reader.start()
    reader.join(timeout=0.2)
    # then it waits, and reads it stamped once the sweep has noted it
    assert reader.is_alive()
    deleting.found = {key_id(key("download-1")): "5"}
    ledger.settle(deleting)
    reader.join(timeout=5)
    assert stamped(read) == ["5"]


def test_a_reader_meeting_other_keys_or_the_sweeps_own_read_does_not_wait() -> None:
    # given a sweep deleting download-1
    ledger = ExpiryLedger(wait_seconds=10)
    ledger.expect(watch("download-1"))
    started = time.monotonic()
    # when another key's REMOVE is read, and the sweep reads its own deletion
    ledger.stamp(iterator_at(0), [remove(3, "download-2")])
    ledger.stamp(iterator_at(4), [remove(5, "download-1")], wait=False)
    # then neither waits
    assert time.monotonic() - started < 1


def test_a_sweep_that_never_notes_its_deletions_holds_a_reader_up_only_for_a_while() -> None:
    # given a sweep that stopped between its deletions and noting them
    ledger = ExpiryLedger(wait_seconds=0.05)
    ledger.expect(watch("download-1"))
    # when a reader meets the key
    read = ledger.stamp(iterator_at(0), [remove(5, "download-1")])
    # then it reads on, unstamped
    assert stamped(read) == []


# The sweep, as LocalStack's delete_expired_items runs it


class Table:
    """The table songs (key songID and SK, TTL on ExpiresAt) in a DynamoDB Local, and its stream's one shard."""

    def __init__(self, stream: bool = True) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.records: list[dict[str, Any]] = []
        self.stream = stream
        self.unprocessed: set[str] = set()
        """Keys BatchWriteItem leaves unprocessed."""
        self.during_batch: Callable[[], None] = lambda: None

    def put(self, download: str, expires_at: int) -> None:
        item = {**key(download), "ExpiresAt": {"N": str(expires_at)}}
        event = "MODIFY" if key_id(key(download)) in self.items else "INSERT"
        self.items[key_id(key(download))] = item
        self._record(event, key(download))

    def delete(self, keys: dict[str, Any]) -> None:
        if self.items.pop(key_id(keys), None) is not None:
            self._record("REMOVE", keys)

    def _record(self, event: str, keys: dict[str, Any]) -> None:
        if self.stream:
            sequence = str(100 + len(self.records))
            self.records.append({"eventName": event, "dynamodb": {"Keys": keys, "SequenceNumber": sequence}})


class DynamoDBClient:
    def __init__(self, table: Table) -> None:
        self.table = table

    def describe_table(self, TableName: str) -> dict[str, Any]:  # noqa: N803 (boto3's names)
        stream = {"LatestStreamArn": STREAM_ARN, "StreamSpecification": {"StreamEnabled": True}}
        return {"Table": {"TableName": TableName, **(stream if self.table.stream else {})}}

    def scan(self, **_request: Any) -> dict[str, Any]:
        return {"Items": [item for item in self.table.items.values() if int(item["ExpiresAt"]["N"]) <= NOW]}

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803
        left = []
        for write in RequestItems["songs"]:
            if key_id(write["DeleteRequest"]["Key"]) in self.table.unprocessed:
                left.append(write)
            else:
                self.table.delete(write["DeleteRequest"]["Key"])
        self.table.during_batch()
        return {"UnprocessedItems": {"songs": left} if left else {}}


def streams_provider(table: Table) -> type:
    """A GetRecords handler as LocalStack's provider has it: a fresh class per test, since the patch is on the class."""

    class StreamsProvider:
        def get_records(self, _context: Any, payload: dict[str, Any]) -> dict[str, Any]:
            stream, shard, position = payload["ShardIterator"].rsplit("|", 2)
            end = min(len(table.records), int(position) + payload.get("Limit", 1000))
            records = copy.deepcopy(table.records[int(position) : end])
            return {"Records": records, "NextShardIterator": f"{stream}|{shard}|{end}"}

    StreamsProvider.get_records.operation = "GetRecords"  # type: ignore[attr-defined]
    return StreamsProvider


class StreamsClient:
    """A LocalStack internal client: what ``request_metadata`` presets reaches the handler's context."""

    def __init__(self, table: Table, provider: Any, metadata: dict[str, str] | None = None) -> None:
        self.table = table
        self.provider = provider
        self.metadata = metadata
        self.fail: str | None = None

    def request_metadata(self, service_principal: str) -> StreamsClient:
        client = StreamsClient(self.table, self.provider, {"service_principal": service_principal})
        client.fail = self.fail
        return client

    def describe_stream(self, StreamArn: str) -> dict[str, Any]:  # noqa: N803
        if self.fail == "describe_stream":
            raise RuntimeError("stream unavailable")
        return {"StreamDescription": {"StreamArn": StreamArn, "Shards": [{"ShardId": SHARD}]}}

    def get_shard_iterator(self, StreamArn: str, ShardId: str, ShardIteratorType: str) -> dict[str, Any]:  # noqa: N803
        position = len(self.table.records) if ShardIteratorType == "LATEST" else 0
        return {"ShardIterator": f"{StreamArn}|{ShardId}|{position}"}

    def get_records(self, ShardIterator: str, Limit: int = 1000) -> dict[str, Any]:  # noqa: N803
        context = types.SimpleNamespace(internal_request_params=self.metadata)
        return self.provider.get_records(context, {"ShardIterator": ShardIterator, "Limit": Limit})


SWEEP = """
def delete_expired_items():
    expired = 0
    client = connect_to(aws_access_key_id="000000000000", region_name="us-east-1").dynamodb
    try:
        items = client.scan(TableName="songs")["Items"]
        expired += len(items)
        client.describe_table(TableName="songs")
        requests = [{"DeleteRequest": {"Key": {"songID": item["songID"], "SK": item["SK"]}}} for item in items]
        for i in range(0, len(requests), 25):
            client.batch_write_item(RequestItems={"songs": requests[i : i + 25]})
    except Exception as error:
        errors.append(error)
    return expired
"""


class LocalStack:
    """The provider module with its sweep, the streams provider, and a reader's client, patched as the hook does."""

    def __init__(self, table: Table, ledger: ExpiryLedger | None = None) -> None:
        self.table = table
        self.ledger = ledger or ExpiryLedger(wait_seconds=5)
        self.provider = streams_provider(table)
        self.streams = StreamsClient(table, self.provider())
        self.module = types.ModuleType("dynamodb_provider")
        self.module.connect_to = self.connect_to
        self.module.errors = []
        exec(SWEEP, self.module.__dict__)  # a module function, looking connect_to up in its module
        note_expiries(self.module, self.ledger)
        stamp_expiries(self.provider, self.ledger)

    def connect_to(self, **_credentials: Any) -> types.SimpleNamespace:
        return types.SimpleNamespace(dynamodb=DynamoDBClient(self.table), dynamodbstreams=self.streams)

    def expire(self) -> int:
        """DELETE /_aws/dynamodb/expired, or the worker: the module's function, looked up by name."""
        expired: int = self.module.delete_expired_items()
        return expired

    def stamped_removes(self) -> list[str]:
        """The downloads whose REMOVE a reader of the whole shard sees with TTL's identity."""
        page = self.streams.get_records(ShardIterator=f"{STREAM_ARN}|{SHARD}|0")
        return [
            record["dynamodb"]["Keys"]["SK"]["S"]
            for record in page["Records"]
            if record["eventName"] == "REMOVE" and record.get("userIdentity") == GETRECORDS_IDENTITY
        ]

    def removes(self) -> list[str]:
        return [
            record["dynamodb"]["Keys"]["SK"]["S"] for record in self.table.records if record["eventName"] == "REMOVE"
        ]


def test_the_sweeps_deletions_carry_ttls_identity_and_a_users_delete_does_not() -> None:
    # given an expired download, a live one, and a download a user deletes before and after the sweep
    table = Table()
    table.put("download-expired", NOW - 1)
    table.put("download-live", NOW + 3600)
    table.put("download-user", NOW + 3600)
    table.put("download-late", NOW + 3600)
    emulator = LocalStack(table)
    table.delete(key("download-user"))
    # when LocalStack's TTL emulation sweeps, and a user deletes another download afterwards
    assert emulator.expire() == 1
    table.delete(key("download-late"))
    # then the expired download's REMOVE alone is TTL's, and the sweep deleted as it does unpatched
    assert emulator.removes() == ["download-user", "download-expired", "download-late"]
    assert emulator.stamped_removes() == ["download-expired"]
    assert set(table.items) == {key_id(key("download-live"))}


def test_an_item_expired_then_written_again_and_deleted_by_a_user_counts_as_one_expiry() -> None:
    # given a download that expires
    table = Table()
    table.put("download-1", NOW - 1)
    emulator = LocalStack(table)
    emulator.expire()
    # when it is written again under the same key, and a user deletes it
    table.put("download-1", NOW + 3600)
    table.delete(key("download-1"))
    # then its first REMOVE is TTL's, the user's is not
    assert emulator.removes() == ["download-1", "download-1"]
    assert emulator.stamped_removes() == ["download-1"]
    assert [
        record.get("userIdentity")
        for record in emulator.streams.get_records(ShardIterator=f"{STREAM_ARN}|{SHARD}|0")["Records"]
        if record["eventName"] == "REMOVE"
    ] == [
        GETRECORDS_IDENTITY,
        None,
    ]


def test_every_batch_of_a_large_sweep_is_noted() -> None:
    # given more expired downloads than one BatchWriteItem deletes
    table = Table()
    for number in range(60):
        table.put(f"download-{number:02d}", NOW - 1)
    emulator = LocalStack(table)
    # when they are swept (three batches)
    assert emulator.expire() == 60
    # then each REMOVE is TTL's
    assert sorted(emulator.stamped_removes()) == [f"download-{number:02d}" for number in range(60)]


def test_a_deletion_left_unprocessed_is_not_noted_and_a_later_user_delete_of_it_is_not_ttls() -> None:
    # given an expired download whose deletion BatchWriteItem leaves unprocessed
    table = Table()
    table.put("download-1", NOW - 1)
    table.put("download-2", NOW - 1)
    table.unprocessed = {key_id(key("download-1"))}
    emulator = LocalStack(table)
    emulator.expire()
    # when a user deletes it afterwards
    table.delete(key("download-1"))
    # then only the processed deletion is TTL's
    assert emulator.removes() == ["download-2", "download-1"]
    assert emulator.stamped_removes() == ["download-2"]


def test_a_reader_polling_while_the_sweep_deletes_sees_its_records_stamped() -> None:
    # given a reader (the mapping's poller) that reads the shard right after the deletions, before the sweep ends,
    # from the very iterator the sweep took (the shard's end before the deletions)
    table = Table()
    table.put("download-1", NOW - 1)
    emulator = LocalStack(table)
    polled: list[dict[str, Any]] = []
    reading = threading.Event()

    def poll() -> None:
        reading.set()
        polled.extend(emulator.streams.get_records(ShardIterator=f"{STREAM_ARN}|{SHARD}|1")["Records"])

    reader = threading.Thread(target=poll)
    table.during_batch = lambda: (reader.start(), reading.wait(5))
    # when the sweep runs
    emulator.expire()
    reader.join(timeout=5)
    # then the reader saw the REMOVE with TTL's identity
    assert [record.get("userIdentity") for record in polled] == [GETRECORDS_IDENTITY]


def test_a_sweep_that_cannot_note_its_deletions_still_deletes_as_before() -> None:
    # given a stream that cannot be described when the sweep runs
    table = Table()
    table.put("download-1", NOW - 1)
    emulator = LocalStack(table)
    emulator.streams.fail = "describe_stream"
    # when the sweep runs
    expired = emulator.expire()
    # then it deleted the item, raised nothing, and its REMOVE carries no identity (nothing left pending)
    assert expired == 1
    assert emulator.module.errors == []
    assert table.items == {}
    assert emulator.stamped_removes() == []


def test_a_table_without_a_stream_is_swept_as_before() -> None:
    # given a table with TTL and no stream
    table = Table(stream=False)
    table.put("download-1", NOW - 1)
    emulator = LocalStack(table)
    # when the sweep runs
    # then it deletes the expired item
    assert emulator.expire() == 1
    assert table.items == {}


def test_only_the_sweep_connects_through_the_noting_clients() -> None:
    # given the patched provider module
    table = Table()
    table.put("download-1", NOW + 3600)
    emulator = LocalStack(table)
    # when other code of the module deletes through its connect_to, as a user's request would be served
    client = emulator.module.connect_to(aws_access_key_id="000000000000", region_name="us-east-1").dynamodb
    client.batch_write_item(RequestItems={"songs": [{"DeleteRequest": {"Key": key("download-1")}}]})
    # then its connect_to is LocalStack's own, and the deletion is a user's
    assert emulator.module.connect_to == emulator.connect_to
    assert emulator.removes() == ["download-1"]
    assert emulator.stamped_removes() == []


def test_patching_twice_wraps_once_and_keeps_the_handlers_dispatch_markers() -> None:
    # given LocalStack patched by the hook
    table = Table()
    emulator = LocalStack(table)
    sweep, handler = emulator.module.delete_expired_items, emulator.provider.get_records
    # when the hook runs again (a second on_infra_start)
    note_expiries(emulator.module, emulator.ledger)
    stamp_expiries(emulator.provider, emulator.ledger)
    # then nothing is wrapped twice, and LocalStack still dispatches GetRecords to the handler by its markers
    assert emulator.module.delete_expired_items is sweep
    assert emulator.provider.get_records is handler
    assert handler.operation == "GetRecords"
    assert handler.__name__ == "get_records"


def test_localstack_runs_the_ttl_hook_from_its_hooks_distribution() -> None:
    # given the entry points of the hooks distribution LocalStack installs
    entry_points = tomllib.loads(localstack.HOOKS_PYPROJECT)["project"]["entry-points"][
        "localstack.hooks.on_infra_start"
    ]
    package = Path(localstack.__file__).resolve().parents[1]
    # when each is looked up in its module
    for target in entry_points.values():
        module, function = target.split(":")
        path = Path(*module.split(".")[1:]).with_suffix(".py")
        tree = ast.parse((package / path).read_text())
        hooked = {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef)
            and any("on_infra_start" in ast.unparse(decorator) for decorator in node.decorator_list)
        }
        # then it is an on_infra_start hook of a module LocalStack is given
        assert function in hooked
        assert str(path) in localstack.HOOK_MODULES
    assert "mark_ttl_expiries" in entry_points
    assert "emulators/ttl_expiry.py" in localstack.HOOK_MODULES


def test_a_reader_of_an_unknown_stream_still_finds_the_expiry_by_its_sequence_and_key() -> None:
    # given an expiry, and a reader whose iterator names no stream (an iterator shape not foreseen)
    ledger = ExpiryLedger()
    swept(ledger, {"download-1": 5})
    # when it reads the REMOVE and a user's REMOVE of another key at another sequence
    read = ledger.stamp("AAAAAAAAAAGQ", [remove(5, "download-1"), remove(6, "download-2")])
    # then the expiry is matched by sequence number and key alone
    assert stamped(read) == ["5"]
