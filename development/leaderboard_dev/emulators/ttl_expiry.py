"""TTL's userIdentity on the REMOVE records of the items LocalStack's TTL emulation deletes.

AWS: "Items that are deleted by the Time to Live process after expiration have the following fields:
Records[].userIdentity.type "Service", Records[].userIdentity.principalId "dynamodb.amazonaws.com""
(DynamoDB Streams API, Record). LocalStack's ``delete_expired_items`` (its ``DELETE /_aws/dynamodb/expired``
endpoint, and its hourly worker with DYNAMODB_REMOVE_EXPIRED_ITEMS) deletes with a plain BatchWriteItem,
so its REMOVE records carry no userIdentity and read like a user's delete.

Here the sweep runs with clients whose BatchWriteItem, just before deleting, takes a LATEST iterator on
each open shard of the table's stream and marks the keys pending; once deleted, it reads from those
iterators and notes the sequence number of the first REMOVE of each deleted key. GetRecords then stamps
exactly those records, for every reader and every read: the aggregator reads the shard itself, the
mapping's poller reads it, a retry or a late reader reads it again. A reader meeting a REMOVE of a
pending key waits until the sweep has noted it, so no read sees the record unstamped; the sweep's own
reads, marked with LocalStack's internal-request metadata, never wait (an iterator string cannot tell
them apart: a poller at the shard's end may hold the very iterator the sweep took). A user's delete
before the sweep, or of the item written again after it, is another record and stays unstamped.

Standard library only: LocalStack's interpreter imports it, and the unit tests drive it with fakes.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import re
import threading
import time
import types
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

LOG = logging.getLogger(__name__)

SWEEP_PRINCIPAL = "dynamodb.amazonaws.com"
"""The service principal the sweep's own GetRecords calls name (LocalStack's ``request_metadata``): TTL's."""
GETRECORDS_IDENTITY = {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}
"""TTL's identity as GetRecords returns it (the Identity shape: "For Time To Live, the principalId is
"dynamodb.amazonaws.com"", "For Time To Live, the type is "Service"")."""
RETENTION_SECONDS = 24 * 60 * 60
""""All data in DynamoDB Streams is subject to a 24 hour lifetime": a noted record is read within it."""
PAGE_LIMIT = 1000
"""GetRecords: "The upper limit is 1000." """
EMPTY_PAGES_AT_THE_TIP = 2
MAX_PAGES = 100
WAIT_SECONDS = 30.0
"""How long a reader waits for a sweep to note its deletions (it takes a few calls); then it reads on unstamped."""

_STREAM = re.compile(r"table/[^/|\"]+/stream/[^/|\"]+")


def stream_of(arn_or_iterator: str) -> str | None:
    """The stream a stream ARN or a shard iterator names (``table/NAME/stream/LABEL``), whatever region and
    account LocalStack writes into it: DynamoDB Local's shard iterators begin with the stream's ARN."""
    found = _STREAM.search(arn_or_iterator or "")
    return found.group(0) if found else None


def key_id(keys: dict[str, Any]) -> str:
    """One string per item key, the same from a Scan's item attributes and a stream record's Keys."""

    def encoded(value: Any) -> Any:
        return base64.b64encode(value).decode() if isinstance(value, bytes | bytearray) else str(value)

    return json.dumps(keys, sort_keys=True, default=encoded)


def sequence_of(record: dict[str, Any]) -> str | None:
    sequence = (record.get("dynamodb") or {}).get("SequenceNumber")
    return sequence if isinstance(sequence, str) else None


def removed_key(record: dict[str, Any]) -> str | None:
    """The key of a REMOVE record, None for any other record."""
    keys = (record.get("dynamodb") or {}).get("Keys")
    if record.get("eventName") != "REMOVE" or not isinstance(keys, dict):
        return None
    return key_id(keys)


def first_removes(records: Iterable[dict[str, Any]], wanted: set[str], found: dict[str, str]) -> None:
    """Note in ``found`` the sequence number of the first REMOVE of each wanted key, in stream order."""
    for record in records:
        key = removed_key(record)
        sequence = sequence_of(record)
        if key in wanted and key not in found and sequence is not None:
            found[key] = sequence


def lambda_user_identity(identity: Any) -> dict[str, Any] | None:
    """A record's userIdentity as Lambda events carry it: GetRecords names the fields ``Type`` and ``PrincipalId``,
    the event ``type`` and ``principalId`` (DynamoDB guide, "DynamoDB Streams and Time to Live", the TTL
    filter ``"userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]}``)."""
    if not isinstance(identity, dict):
        return None
    return {
        ("type" if name == "Type" else "principalId" if name == "PrincipalId" else name): value
        for name, value in identity.items()
    }


def carry_user_identity(records: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give each event its record's userIdentity, which LocalStack's ``transform_into_events`` leaves out, so
    that filter criteria on userIdentity see it (one event per record, in order)."""
    for record, event in zip(records, events, strict=True):
        identity = lambda_user_identity(record.get("userIdentity"))
        if identity is not None:
            event["userIdentity"] = identity
    return events


@dataclass
class Watch:
    """One BatchWriteItem's deletions from one table with a stream, from just before it ran."""

    table: str
    stream_arn: str
    stream: str
    keys: set[str]
    iterators: dict[str, str]
    """A LATEST iterator per shard open before the deletions: every record they wrote comes after it."""
    shards: set[str]
    """Every shard known before the deletions; one opened since is read from its start."""
    found: dict[str, str] = field(default_factory=dict)


class ExpiryLedger:
    """Which REMOVE records TTL's emulation wrote: pending keys while a sweep deletes them, then sequence numbers."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wait_seconds: float = WAIT_SECONDS,
        keep_seconds: float = RETENTION_SECONDS + 60 * 60,
    ) -> None:
        self._clock = clock
        self._wait_seconds = wait_seconds
        self._keep_seconds = keep_seconds
        self._changed = threading.Condition()
        self._pending: Counter[tuple[str, str]] = Counter()
        self._expiries: dict[tuple[str, str], tuple[str, float]] = {}
        """(stream, sequence number) -> (key, when noted)."""

    def expect(self, watch: Watch) -> None:
        """Before the deletions: a REMOVE of these keys may be TTL's until ``settle``."""
        with self._changed:
            self._pending.update((watch.stream, key) for key in watch.keys)

    def settle(self, watch: Watch) -> None:
        """After the deletions: their REMOVE records are the ones found; the keys are pending no more."""
        now = self._clock()
        with self._changed:
            for key in watch.keys:
                self._pending[(watch.stream, key)] -= 1
                if self._pending[(watch.stream, key)] <= 0:
                    del self._pending[(watch.stream, key)]
            for key, sequence in watch.found.items():
                self._expiries[(watch.stream, sequence)] = (key, now)
            for noted, (_key, at) in list(self._expiries.items()):
                if now - at > self._keep_seconds:
                    del self._expiries[noted]
            self._changed.notify_all()

    def stamp(self, iterator: str, records: list[dict[str, Any]], wait: bool = True) -> list[dict[str, Any]]:
        """Give TTL's userIdentity to the REMOVE records a sweep noted, waiting first for a sweep under way
        (``wait`` False: the sweep's own read)."""
        stream = stream_of(iterator)
        with self._changed:
            for record in records:
                key = removed_key(record)
                sequence = sequence_of(record)
                if key is None or sequence is None:
                    continue
                if wait and not self._changed.wait_for(
                    lambda key=key: not self._is_pending(stream, key), timeout=self._wait_seconds
                ):
                    LOG.warning("a TTL sweep did not note its deletions within %s s; read on", self._wait_seconds)
                if self._is_expiry(stream, sequence, key):
                    record["userIdentity"] = dict(GETRECORDS_IDENTITY)
        return records

    def _is_pending(self, stream: str | None, key: str) -> bool:
        if stream is not None:
            return (stream, key) in self._pending
        return any(pending_key == key for _stream, pending_key in self._pending)

    def _is_expiry(self, stream: str | None, sequence: str, key: str) -> bool:
        if stream is not None:
            noted = self._expiries.get((stream, sequence))
            return noted is not None and noted[0] == key
        return any(at == sequence and noted[0] == key for (_stream, at), noted in self._expiries.items())


def note_expiries(provider_module: Any, ledger: ExpiryLedger) -> None:
    """Make the provider module's ``delete_expired_items`` note its deletions: its endpoint and its worker both look
    the function up by name in the module."""
    original = provider_module.delete_expired_items
    if not getattr(original, "notes_expiries", False):
        provider_module.delete_expired_items = noting_expiries(original, ledger)


def noting_expiries(delete_expired_items: Callable[..., Any], ledger: ExpiryLedger) -> Callable[..., Any]:
    """The sweep as it is, run with a ``connect_to`` of its own whose BatchWriteItem notes each deletion: other
    threads' clients, users' deletes among them, are left alone."""

    @functools.wraps(delete_expired_items)
    def delete_noting_expiries(*args: Any, **kwargs: Any) -> Any:
        scope = dict(delete_expired_items.__globals__)
        scope["connect_to"] = _Sweep(scope["connect_to"], ledger)
        sweep = types.FunctionType(
            delete_expired_items.__code__,
            scope,
            delete_expired_items.__name__,
            delete_expired_items.__defaults__,
            delete_expired_items.__closure__,
        )
        return sweep(*args, **kwargs)

    delete_noting_expiries.notes_expiries = True  # type: ignore[attr-defined]
    return delete_noting_expiries


def stamp_expiries(streams_provider: type, ledger: ExpiryLedger) -> None:
    """Make the DynamoDB Streams provider's GetRecords stamp the noted records, for every reader. The handler keeps
    its markers (functools.wraps), by which LocalStack dispatches GetRecords to it."""
    original = streams_provider.get_records  # type: ignore[attr-defined]
    if getattr(original, "stamps_expiries", False):
        return

    @functools.wraps(original)
    def get_records(self: Any, context: Any, payload: dict[str, Any]) -> Any:
        response = original(self, context, payload)
        if isinstance(response, dict) and isinstance(response.get("Records"), list):
            metadata = getattr(context, "internal_request_params", None) or {}
            sweeping = metadata.get("service_principal") == SWEEP_PRINCIPAL
            ledger.stamp(str(payload.get("ShardIterator") or ""), response["Records"], wait=not sweeping)
        return response

    get_records.stamps_expiries = True  # type: ignore[attr-defined]
    streams_provider.get_records = get_records  # type: ignore[attr-defined]


class _Sweep:
    """The clients ``delete_expired_items`` connects to during one sweep."""

    def __init__(self, connect_to: Any, ledger: ExpiryLedger) -> None:
        self._connect_to = connect_to
        self._ledger = ledger

    def __call__(self, *args: Any, **kwargs: Any) -> _SweepClients:
        return _SweepClients(self._connect_to(*args, **kwargs), self._ledger)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connect_to, name)


class _SweepClients:
    def __init__(self, clients: Any, ledger: ExpiryLedger) -> None:
        self._clients = clients
        self._ledger = ledger

    @property
    def dynamodb(self) -> _NotingDynamoDB:
        return _NotingDynamoDB(self._clients.dynamodb, self._clients.dynamodbstreams, self._ledger)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._clients, name)


class _NotingDynamoDB:
    """A DynamoDB client whose BatchWriteItem notes the REMOVE record of each item it deletes."""

    def __init__(self, dynamodb: Any, streams: Any, ledger: ExpiryLedger) -> None:
        self._dynamodb = dynamodb
        self._streams = streams.request_metadata(service_principal=SWEEP_PRINCIPAL)
        self._ledger = ledger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dynamodb, name)

    def batch_write_item(self, **request: Any) -> Any:
        watches = []
        for table, writes in (request.get("RequestItems") or {}).items():
            keys = {key_id(write["DeleteRequest"]["Key"]) for write in writes if "DeleteRequest" in write}
            if keys and (watch := self._guarded(self._watch, table, keys)) is not None:
                self._ledger.expect(watch)
                watches.append(watch)
        try:
            response = self._dynamodb.batch_write_item(**request)
        except BaseException:
            for watch in watches:
                self._ledger.settle(watch)
            raise
        for watch in watches:
            try:
                unprocessed = (response.get("UnprocessedItems") or {}).get(watch.table, [])
                left = {key_id(write["DeleteRequest"]["Key"]) for write in unprocessed if "DeleteRequest" in write}
                self._guarded(self._find, watch, watch.keys - left)
            finally:
                self._ledger.settle(watch)
        return response

    def _guarded(self, step: Callable[..., Any], *arguments: Any) -> Any:
        """The deletions go ahead whatever noting them meets: their records then stay unstamped."""
        try:
            return step(*arguments)
        except Exception:
            LOG.warning("TTL sweep: %s failed; its REMOVE records carry no userIdentity", step.__name__, exc_info=True)
            return None

    def _watch(self, table: str, keys: set[str]) -> Watch | None:
        description = self._dynamodb.describe_table(TableName=table)["Table"]
        stream_arn = description.get("LatestStreamArn")
        stream = stream_of(stream_arn or "")
        if not (description.get("StreamSpecification") or {}).get("StreamEnabled") or not stream_arn or not stream:
            return None
        shards = self._shards(stream_arn)
        iterators = {
            shard_id: self._streams.get_shard_iterator(
                StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="LATEST"
            )["ShardIterator"]
            for shard_id, is_open in shards.items()
            if is_open
        }
        return Watch(table, stream_arn, stream, keys, iterators, set(shards))

    def _find(self, watch: Watch, deleted: set[str]) -> None:
        for iterator in watch.iterators.values():
            self._read(iterator, deleted, watch.found)
        if deleted - watch.found.keys():
            for shard_id in self._shards(watch.stream_arn).keys() - watch.shards:
                iterator = self._streams.get_shard_iterator(
                    StreamArn=watch.stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
                self._read(iterator, deleted, watch.found)
        if missing := len(deleted - watch.found.keys()):
            # A user's delete of the item just before the sweep's leaves the sweep nothing to delete, and no record.
            LOG.info("TTL sweep of %s: no REMOVE record found for %d of its deletions", watch.table, missing)

    def _read(self, iterator: str | None, wanted: set[str], found: dict[str, str]) -> None:
        """From ``iterator`` to the shard's current end, or until every wanted key is found."""
        empty = 0
        for _ in range(MAX_PAGES):
            if not iterator or wanted <= found.keys() or empty >= EMPTY_PAGES_AT_THE_TIP:
                return
            page = self._streams.get_records(ShardIterator=iterator, Limit=PAGE_LIMIT)
            records = page.get("Records") or []
            first_removes(records, wanted, found)
            empty = 0 if records else empty + 1
            iterator = page.get("NextShardIterator")

    def _shards(self, stream_arn: str) -> dict[str, bool]:
        """Every shard of the stream, and whether it is open (no ending sequence number)."""
        shards: dict[str, bool] = {}
        start: dict[str, str] = {}
        for _ in range(MAX_PAGES):
            description = self._streams.describe_stream(StreamArn=stream_arn, **start)["StreamDescription"]
            for shard in description.get("Shards") or []:
                shards[shard["ShardId"]] = "EndingSequenceNumber" not in (shard.get("SequenceNumberRange") or {})
            if not description.get("LastEvaluatedShardId"):
                break
            start = {"ExclusiveStartShardId": description["LastEvaluatedShardId"]}
        return shards
