"""Every request the aggregator makes, counted at the SDK and priced: ours and the guide's, on moto, in process.

The shipped handler's steps (`handler_cpu.ours`) and the guide's handler run against moto's tables and stream
as `handler_cpu` runs them; here every request botocore sends is caught where moto answers it
(`BotocoreStubber.process_request`) and charged by DynamoDB's rules (`prices.SIZE_RULES`): the item's image
before and after each write is read from moto's backend, outside the clock, and gives the write units (the
larger image, rounded up to 1 KB; each item of a TransactWriteItems twice, TRANSACTIONAL_WRITE_FACTOR) and the
index writes (an entry that appears or goes is one, one whose index key moves is two, one whose projected
count changes is one). Reads are charged by the size of what they return, rounded up to 4 KB, half when
eventually consistent; each GetRecords call of the aggregator's is a streams read request unit (the mapping's
are free, and not made here: the mapping is `handler_cpu.StreamTail`, outside the meter).

Each configuration runs the same Zipf catalogue at RATE downloads a second: a warm-up window
(not counted), then the measured batches in one 60-second window and its final invocation. per_batch
measures some batches of the window, so the final invocation counts for the share of a window
they hold; per_window measures the whole window. Lambda's duration per invocation: the handler's
CPU (moto's time taken out, as in `handler_cpu`) plus `handler_cpu.LATENCY` for each call waited
for, the aggregate writes in rounds of `WRITE_CONCURRENCY`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from leaderboard_dev.bench.boards import realtime_downloads
from leaderboard_dev.bench.handler_cpu import (
    AGGREGATOR_SOURCE,
    LATENCY,
    PROGRESS_TABLE,
    REGION,
    TABLE,
    WARM_UP,
    WRITE_CONCURRENCY,
    CpuCase,
    StreamTail,
    function_environment,
    guide,
    is_new_download,
    ours,
    quiet_stdout,
    streams_as_aws,
)
from leaderboard_dev.bench.pressure_cost import AGGREGATOR_MEMORY_GB
from leaderboard_dev.bench.prices import (
    LAMBDA_GB_SECOND,
    LAMBDA_REQUEST,
    READ_REQUEST_UNIT,
    SQS_REQUEST,
    STREAMS_READ_REQUEST_UNIT,
    WRITE_REQUEST_UNIT,
    price_table,
)
from leaderboard_dev.bench.workload import say

AGGREGATES_TABLE = "cpu-aggregates"
RATE = 1000
"""Downloads a second: a 60-second window holds RATE * WINDOW_SECONDS of them."""
WINDOW_SECONDS = 60
EDITED, DELETED = 0.10, 0.05
"""The retraction workload: of each batch's downloads, this share is edited (moved a month on) and this deleted,
in the next batch."""
RETRIES = 10
"""Invocations of one event at most: a final one that fails (out of time before its bound) is retried, as on AWS."""
START = datetime(2024, 3, 14, 12, tzinfo=UTC)
TRANSACTIONAL_WRITE_FACTOR = 2
"""Write units of an item written in a TransactWriteItems, per unit of the same write alone: "DynamoDB performs two
underlying reads or writes of every item in the transaction: one to prepare the transaction and one to commit the
transaction." (*Amazon DynamoDB Transactions: How it works*, prices.SIZE_RULES). The index writes it causes propagate
after the transaction, as a standard write's do: charged once."""


@dataclass(frozen=True)
class AllInCase:
    name: str
    aggregator: str
    """ours, or guide."""
    batch_size: int
    aggregate_writes: str = "per_batch"
    separate_aggregates_table: bool = False
    retractions: bool = False


CASES = (
    AllInCase("ours_per_batch_100", "ours", 100),
    AllInCase("ours_per_batch_1000", "ours", 1000),
    AllInCase("ours_per_window_100", "ours", 100, aggregate_writes="per_window"),
    AllInCase("ours_per_window_1000", "ours", 1000, aggregate_writes="per_window"),
    AllInCase("guide_100", "guide", 100),
    AllInCase("ours_separate_aggregates_table_100", "ours", 100, separate_aggregates_table=True),
    AllInCase("ours_retractions_100", "ours", 100, retractions=True),
)


@dataclass(frozen=True)
class Index:
    name: str
    keys: tuple[str, ...]
    projected: tuple[str, ...]
    """Non-key attributes the index holds (INCLUDE); none for KEYS_ONLY."""


@dataclass(frozen=True)
class Table:
    name: str
    keys: tuple[str, ...]
    indexes: tuple[Index, ...] = ()
    stream: str | None = None


LEADERBOARD = Index("MonthDownloadsIndex", ("Month", "LeaderboardOrder"), ("DownloadCount",))
"""The module's sparse index (terraform/main.tf, leaderboard_index)."""
GUIDE_INDEX = Index("MonthDownloadCountIndex", ("Month", "DownloadCount"), ())
"""The guide's own leaderboard: its aggregates carry Month and DownloadCount, the index keyed on both."""
KEY_TYPES = {"songID": "S", "SK": "S", "ShardKey": "S", "Month": "S", "LeaderboardOrder": "N", "DownloadCount": "N"}


def tables_of(case: AllInCase) -> dict[str, Table]:
    """The downloads' table (with the aggregates, unless separate), the aggregates' table if separate, progress."""
    stream = "NEW_AND_OLD_IMAGES" if case.retractions else "NEW_IMAGE"
    index = GUIDE_INDEX if case.aggregator == "guide" else LEADERBOARD
    tables = [
        Table(TABLE, ("songID", "SK"), () if case.separate_aggregates_table else (index,), stream),
        Table(PROGRESS_TABLE, ("ShardKey",)),
    ]
    if case.separate_aggregates_table:
        tables.append(Table(AGGREGATES_TABLE, ("songID", "SK"), (LEADERBOARD,)))
    return {table.name: table for table in tables}


def key_schema(keys: tuple[str, ...]) -> list[dict[str, str]]:
    return [{"AttributeName": key, "KeyType": kind} for key, kind in zip(keys, ("HASH", "RANGE"), strict=False)]


def create_tables(dynamodb: Any, tables: dict[str, Table]) -> str:
    for table in tables.values():
        named = {*table.keys, *(key for index in table.indexes for key in index.keys)}
        arguments: dict[str, Any] = {
            "TableName": table.name,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": n, "AttributeType": KEY_TYPES[n]} for n in sorted(named)],
            "KeySchema": key_schema(table.keys),
        }
        if table.indexes:
            arguments["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": index.name,
                    "KeySchema": key_schema(index.keys),
                    "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(index.projected)}
                    if index.projected
                    else {"ProjectionType": "KEYS_ONLY"},
                }
                for index in table.indexes
            ]
        if table.stream:
            arguments["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": table.stream}
        dynamodb.create_table(**arguments)
    return dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]


def value_bytes(value: dict[str, Any]) -> int:
    """A value's size by DynamoDB's rules (prices.SIZE_RULES), its attribute name left out."""
    kind, content = next(iter(value.items()))
    if kind == "S":
        return len(content.encode())
    if kind == "N":
        digits = content.lstrip("-").replace(".", "").strip("0") or "0"
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(content) if isinstance(content, bytes) else len(content) * 3 // 4
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(value_bytes({kind[0]: member}) for member in content)
    if kind == "M":
        return 3 + sum(1 + len(name.encode()) + value_bytes(member) for name, member in content.items())
    return 3 + sum(1 + value_bytes(member) for member in content)


def item_bytes(item: dict[str, Any] | None) -> int:
    return sum(len(name.encode()) + value_bytes(value) for name, value in (item or {}).items())


def index_writes(index: Index, keys: tuple[str, ...], before: Any, after: Any) -> tuple[int, int]:
    """(index writes, their write units) of one table write: from the images before and after it."""

    def entry(image: dict[str, Any] | None) -> dict[str, Any] | None:
        if image is None or any(key not in image for key in index.keys):
            return None
        return {name: image[name] for name in (*keys, *index.keys, *index.projected) if name in image}

    old, new = entry(before), entry(after)
    if old == new:
        return 0, 0
    units = [max(1, math.ceil(item_bytes(image) / 1024)) for image in (old, new) if image is not None]
    if old is not None and new is not None and all(old[key] == new[key] for key in index.keys):
        return 1, max(units)
    return len(units), sum(units)


@dataclass
class Usage:
    """What one invocation (or the ingest of its batch) asked of AWS, counted at the SDK."""

    requests: Counter[str] = field(default_factory=Counter)
    write_units: Counter[str] = field(default_factory=Counter)
    read_units: Counter[str] = field(default_factory=Counter)
    index_writes: Counter[str] = field(default_factory=Counter)
    index_write_units: Counter[str] = field(default_factory=Counter)
    changed_counts: Counter[str] = field(default_factory=Counter)
    """Writes that changed an aggregate's count in the index (the entry there before and after), by index."""
    changed_count_index_writes: Counter[str] = field(default_factory=Counter)
    transaction_items: Counter[str] = field(default_factory=Counter)
    """Items a TransactWriteItems wrote (a ConditionCheck writes none), by table: each charged twice its units."""
    stream_records: int = 0
    parallel_writes: int = 0
    backend_seconds: float = 0.0


class SdkMeter:
    """Catches every request where moto answers it: counts it, reads the items it touches, charges it."""

    def __init__(self, tables: dict[str, Table], aggregates_table: str, parallel: bool) -> None:
        self.tables, self.aggregates_table, self.parallel = tables, aggregates_table, parallel
        self.usage = Usage()

    def take(self) -> Usage:
        taken, self.usage = self.usage, Usage()
        return taken

    def image(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.dynamodb.models import dynamodb_backends
        from moto.dynamodb.models.dynamo_type import DynamoType

        names = self.tables[table].keys
        stored = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].get_table(table)
        item = stored.get_item(*(DynamoType(key[name]) for name in names))
        return item.to_json()["Attributes"] if item is not None else None

    def touched(self, operation: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """The (table, key) of every item a write names."""

        def key_of(table: str, item: dict[str, Any]) -> dict[str, Any]:
            return {name: item[name] for name in self.tables[table].keys}

        if operation in ("PutItem", "UpdateItem", "DeleteItem"):
            return [(body["TableName"], key_of(body["TableName"], body.get("Item") or body["Key"]))]
        if operation == "TransactWriteItems":
            return [
                (action["TableName"], key_of(action["TableName"], action.get("Item") or action["Key"]))
                for entry in body["TransactItems"]
                for kind, action in entry.items()
                if kind != "ConditionCheck"
            ]
        if operation == "BatchWriteItem":
            return [
                (table, key_of(table, request.get("PutRequest", {}).get("Item") or request["DeleteRequest"]["Key"]))
                for table, requests in body["RequestItems"].items()
                for request in requests
            ]
        return []

    def account(self, request: Any, respond: Callable[[], Any]) -> Any:
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else str(target)
        prefix, _, operation = target.rpartition(".")
        raw = request.body.decode() if isinstance(request.body, bytes) else (request.body or "")
        body = json.loads(raw) if raw.startswith("{") else {}
        service = "dynamodbstreams" if "Streams" in prefix else "dynamodb" if prefix.startswith("DynamoDB") else "sqs"
        tables = (
            sorted({body.get("TableName", ""), *body.get("RequestItems", {})} - {""})
            or [action["TableName"] for entry in body.get("TransactItems", []) for action in entry.values()][:1]
        )
        self.usage.requests[" ".join([service, operation or "unknown", *tables])] += 1
        touched = self.touched(operation, body) if service == "dynamodb" else []
        before = [self.image(table, key) for table, key in touched]
        response = respond()
        succeeded = response is not None and response[0] == 200
        after = [self.image(table, key) for table, key in touched] if succeeded else before
        factor = TRANSACTIONAL_WRITE_FACTOR if operation == "TransactWriteItems" else 1
        for (table, _), old, new in zip(touched, before, after, strict=True):
            self.usage.write_units[table] += factor * max(1, math.ceil(max(item_bytes(old), item_bytes(new)) / 1024))
            if operation == "TransactWriteItems":
                self.usage.transaction_items[table] += 1
            for index in self.tables[table].indexes:
                writes, units = index_writes(index, self.tables[table].keys, old, new)
                self.usage.index_writes[index.name] += writes
                self.usage.index_write_units[index.name] += units
                if writes and old is not None and new is not None and all(k in old and k in new for k in index.keys):
                    self.usage.changed_counts[index.name] += 1
                    self.usage.changed_count_index_writes[index.name] += writes
        if operation in ("UpdateItem", "TransactWriteItems") and tables == [self.aggregates_table] and self.parallel:
            self.usage.parallel_writes += 1
        if succeeded and response[2]:
            self.account_reads(service, operation, body, json.loads(response[2]))
        return response

    def account_reads(self, service: str, operation: str, body: dict[str, Any], answer: dict[str, Any]) -> None:
        if service == "dynamodbstreams" and operation == "GetRecords":
            self.usage.stream_records += len(answer.get("Records", []))
        if service != "dynamodb":
            return
        share = 1.0 if body.get("ConsistentRead") else 0.5
        if operation == "GetItem":
            self.usage.read_units[body["TableName"]] += share * max(1, math.ceil(item_bytes(answer.get("Item")) / 4096))
        elif operation in ("Query", "Scan"):
            size = sum(item_bytes(item) for item in answer.get("Items", []))
            self.usage.read_units[body["TableName"]] += share * max(1, math.ceil(size / 4096))
        elif operation == "BatchGetItem":
            for table, items in answer.get("Responses", {}).items():
                consistent = body["RequestItems"][table].get("ConsistentRead")
                for item in items:
                    self.usage.read_units[table] += (1.0 if consistent else 0.5) * math.ceil(item_bytes(item) / 4096)

    @contextlib.contextmanager
    def metered(self) -> Iterator[None]:
        """moto's time answering, and this meter's own, go to backend_seconds: the handler's CPU leaves them out."""
        from moto.core.botocore_stubber import BotocoreStubber

        original = BotocoreStubber.process_request
        meter = self

        def process_request(stubber: Any, request: Any) -> Any:
            started = time.thread_time()
            try:
                return meter.account(request, lambda: original(stubber, request))
            finally:
                meter.usage.backend_seconds += time.thread_time() - started

        BotocoreStubber.process_request = process_request  # type: ignore[method-assign]
        try:
            yield
        finally:
            BotocoreStubber.process_request = original  # type: ignore[method-assign]


def passes_filter(case: AllInCase) -> Callable[[dict[str, Any]], bool]:
    """The mapping's filter (terraform/main.tf, event_filters): new downloads, and with retractions their changes."""

    def passes(record: dict[str, Any]) -> bool:
        if record["eventName"] == "INSERT":
            return case.separate_aggregates_table or is_new_download(record)
        old = record["dynamodb"].get("OldImage", {})
        return case.retractions and (case.separate_aggregates_table or not {"Month", "DownloadCount"} & set(old))

    return passes


@dataclass
class Batch:
    """One batch of the workload: its new downloads, and with retractions the changes to downloads before it."""

    items: list[dict[str, Any]]
    edited: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[dict[str, Any]] = field(default_factory=list)

    def moves(self) -> Counter[tuple[str, str]]:
        """What the batch does to each (song, month) count, read from the generated items themselves."""
        moves: Counter[tuple[str, str]] = Counter()
        for item in self.items:
            moves[(item["songID"]["S"], item["Timestamp"]["S"][:7])] += 1
        for item in [*self.edited, *self.deleted]:
            moves[(item["songID"]["S"], item["Timestamp"]["S"][:7])] -= 1
        for item in self.edited:
            moves[(item["songID"]["S"], moved(item)[:7])] += 1
        return moves

    def touched_aggregates(self) -> set[tuple[str, str]]:
        """Every (song, month) the batch names: a write each, at most."""
        keys = {(item["songID"]["S"], item["Timestamp"]["S"][:7]) for item in [*self.items, *self.deleted]}
        for item in self.edited:
            keys |= {(item["songID"]["S"], item["Timestamp"]["S"][:7]), (item["songID"]["S"], moved(item)[:7])}
        return keys


def write_bound(warm_up: Batch, measured: list[Batch], retractions: bool) -> int:
    """Aggregate writes at most: one per aggregate a batch names; with retractions one more for each count the batch
    leaves at 0 (it leaves the index), from the oracle's own running counts."""
    counts: Counter[tuple[str, str]] = Counter()
    counts.update(warm_up.moves())
    bound = 0
    for batch in measured:
        counts.update(batch.moves())
        touched = batch.touched_aggregates()
        bound += len(touched) + (sum(1 for key in touched if counts[key] == 0) if retractions else 0)
    return bound


def moved(item: dict[str, Any]) -> str:
    """An edit that moves a count: the download's Timestamp a month on."""
    moment = datetime.strptime(item["Timestamp"]["S"], "%Y-%m-%dT%H:%M:%SZ")
    return moment.replace(month=moment.month % 12 + 1).strftime("%Y-%m-%dT%H:%M:%SZ")


def batches(case: AllInCase, count: int, window: int, seed: int, before: Batch | None) -> list[Batch]:
    """`count` batches of window `window`, in time order; with retractions each changes the batch before it."""
    new_per_batch = case.batch_size * 20 // 23 // 20 * 20 if case.retractions else case.batch_size
    made: list[Batch] = []
    for number in range(count):
        start = START + timedelta(seconds=window * WINDOW_SECONDS + number * new_per_batch / RATE)
        items = realtime_downloads(new_per_batch, start, new_per_batch / RATE, seed=seed + number)
        batch = Batch(items)
        if case.retractions and before is not None:
            edits, deletes = round(EDITED * len(before.items)), round(DELETED * len(before.items))
            batch.edited = before.items[:edits]
            batch.deleted = before.items[edits : edits + deletes]
        made.append(batch)
        before = batch
    return made


def ingest(dynamodb: Any, batch: Batch) -> None:
    for first in range(0, len(batch.items), 25):
        chunk = batch.items[first : first + 25]
        dynamodb.batch_write_item(RequestItems={TABLE: [{"PutRequest": {"Item": item}} for item in chunk]})
    for item in batch.edited:
        dynamodb.update_item(
            TableName=TABLE,
            Key={"songID": item["songID"], "SK": item["SK"]},
            UpdateExpression="SET #t = :t",
            ExpressionAttributeNames={"#t": "Timestamp"},
            ExpressionAttributeValues={":t": {"S": moved(item)}},
        )
    for item in batch.deleted:
        dynamodb.delete_item(TableName=TABLE, Key={"songID": item["songID"], "SK": item["SK"]})


def window_of(number: int) -> tuple[str, str]:
    start = START + timedelta(seconds=number * WINDOW_SECONDS)
    return tuple(  # type: ignore[return-value]
        (start + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%SZ") for s in (0, WINDOW_SECONDS)
    )


def measure(case: AllInCase, measured_downloads: int, window_downloads: int) -> dict[str, Any]:
    """A warm-up window, then the measured batches of one window and its final invocation, every request metered."""
    import boto3
    from moto import mock_aws

    separate = {"AGGREGATES_TABLE_NAME": AGGREGATES_TABLE} if case.separate_aggregates_table else {}
    extra = {"AGGREGATE_WRITES": case.aggregate_writes, "RETRACTIONS": str(case.retractions).lower(), **separate}
    cpu_case = CpuCase("ours_per_batch", "month", case.batch_size, 1)
    with function_environment(cpu_case) as environment, mock_aws(), streams_as_aws(), quiet_stdout():
        os.environ.update(extra)
        environment.update(extra)
        sys.path.insert(0, str(AGGREGATOR_SOURCE))
        try:
            dynamodb = boto3.client("dynamodb", region_name=REGION)
            streams = boto3.client("dynamodbstreams", region_name=REGION)
            tables = tables_of(case)
            stream_arn = create_tables(dynamodb, tables)
            aggregates = AGGREGATES_TABLE if case.separate_aggregates_table else TABLE
            meter = SdkMeter(tables, aggregates, parallel=case.aggregator == "ours")
            invoke = ours(environment) if case.aggregator == "ours" else guide()
            tail = StreamTail(streams, stream_arn)
            run = Run(case, meter, tail, invoke, dynamodb, passes_filter(case))
            warm_up = batches(case, 1, 0, 100, None)[0] if case.batch_size <= WARM_UP else None
            warm_up = warm_up or Batch(realtime_downloads(WARM_UP, START, WARM_UP / RATE, seed=100))
            run.warm_up = warm_up
            with meter.metered():
                run.window(0, [warm_up], weight=None)
                size = window_downloads if case.aggregate_writes == "per_window" else measured_downloads
                count = max(1, size // case.batch_size)
                measured = batches(case, count, 1, 1000, warm_up)
                run.window(1, measured, weight=min(1.0, sum(len(b.items) for b in measured) / window_downloads))
        finally:
            sys.path.remove(str(AGGREGATOR_SOURCE))
    return summarise(case, run, window_downloads)


class Run:
    """Ingests each batch, delivers what passes the filter as the mapping would, and keeps every invocation's usage."""

    def __init__(self, case: AllInCase, meter: SdkMeter, tail: StreamTail, invoke: Any, dynamodb: Any, passes: Any):
        self.case, self.meter, self.tail, self.invoke, self.dynamodb, self.passes = (
            case,
            meter,
            tail,
            invoke,
            dynamodb,
            passes,
        )
        self.state: dict[str, Any] = {}
        self.invocations: list[dict[str, Any]] = []
        self.ingested = Usage()
        self.batches: list[Batch] = []
        self.warm_up = Batch([])

    def window(self, number: int, batches: list[Batch], weight: float | None) -> None:
        """weight None: a warm-up, not kept. Else the final invocation counts for `weight` of itself."""
        span = window_of(number)
        self.state = {}
        for batch in batches:
            self.meter.take()
            ingest(self.dynamodb, batch)
            ingested = self.meter.take()
            records = self.tail.downloads(self.passes)
            if len(records) > self.case.batch_size:
                raise ValueError(f"{len(records)} records in a batch of at most {self.case.batch_size}")
            self.deliver(self.tail.event(records, self.state, span), 1.0 if weight is not None else None, batch)
            if weight is not None:
                self.ingested = merge(self.ingested, ingested)
                self.batches.append(batch)
        self.deliver(self.tail.event([], self.state, span, final=True), weight, None)

    def deliver(self, event: dict[str, Any], weight: float | None, batch: Batch | None) -> None:
        """One event, retried as Lambda retries it while the handler reports its aggregates not written."""
        for _ in range(RETRIES):
            self.meter.take()
            started = time.thread_time()
            try:
                state = self.invoke(event)
            except Exception as error:
                if type(error).__name__ != "AggregatesNotWritten":
                    raise
                state = None
            elapsed = time.thread_time() - started
            usage = self.meter.take()
            if weight is not None:
                self.invocations.append(
                    {"weight": weight, "cpu_seconds": elapsed - usage.backend_seconds, "usage": usage, "batch": batch}
                )
            if state is not None:
                self.state = state
                return
        raise RuntimeError(f"{self.case.name}: an event failed {RETRIES} times")


def merge(first: Usage, second: Usage) -> Usage:
    merged = Usage()
    for usage in (first, second):
        for name in ("requests", "write_units", "read_units", "index_writes", "index_write_units", "transaction_items"):
            getattr(merged, name).update(getattr(usage, name))
        merged.stream_records += usage.stream_records
        merged.parallel_writes += usage.parallel_writes
    return merged


def lambda_seconds(invocation: dict[str, Any]) -> float:
    """The handler's CPU and the calls it waits for: the others one after another, the aggregate writes in rounds."""
    usage: Usage = invocation["usage"]
    sequential = sum(usage.requests.values()) - usage.parallel_writes
    rounds = math.ceil(usage.parallel_writes / WRITE_CONCURRENCY)
    return invocation["cpu_seconds"] + (sequential + rounds) * LATENCY["milliseconds_per_call"] / 1000


def summarise(case: AllInCase, run: Run, window_downloads: int) -> dict[str, Any]:
    """Per 100 downloads and dollars per million, by component; the bound from the generated downloads."""
    downloads = sum(len(batch.items) for batch in run.batches)
    per_100 = 100 / downloads
    aggregates = AGGREGATES_TABLE if case.separate_aggregates_table else TABLE

    def weighted(pick: Callable[[Usage], Counter[str]]) -> Counter[str]:
        total: Counter[str] = Counter()
        for invocation in run.invocations:
            for key, value in pick(invocation["usage"]).items():
                total[key] += invocation["weight"] * value
        return total

    def total(pick: Callable[[dict[str, Any]], float]) -> float:
        return sum(invocation["weight"] * pick(invocation) for invocation in run.invocations)

    requests = weighted(lambda usage: usage.requests)
    write_units, read_units = weighted(lambda u: u.write_units), weighted(lambda u: u.read_units)
    index_writes, index_units = weighted(lambda u: u.index_writes), weighted(lambda u: u.index_write_units)
    changed, changed_writes = weighted(lambda u: u.changed_counts), weighted(lambda u: u.changed_count_index_writes)
    transaction_items = weighted(lambda u: u.transaction_items)
    aggregate_writes = requests[f"dynamodb UpdateItem {aggregates}"] + transaction_items[aggregates]
    stream_reads = requests["dynamodbstreams GetRecords"]
    sqs_requests = sum(count for key, count in requests.items() if key.startswith("sqs "))
    invocations = total(lambda _: 1.0)
    seconds = total(lambda_seconds)
    gb_seconds = seconds * AGGREGATOR_MEMORY_GB
    if case.aggregate_writes == "per_window":
        bound = len(set().union(*(batch.touched_aggregates() for batch in run.batches)))
    else:
        bound = write_bound(run.warm_up, run.batches, case.retractions)
    per_million = 1e6 / downloads
    dollars = {
        "aggregate_writes": write_units[aggregates] * per_million * WRITE_REQUEST_UNIT.per_unit,
        "aggregate_reads": read_units[aggregates] * per_million * READ_REQUEST_UNIT.per_unit,
        "index_writes": sum(index_units.values()) * per_million * WRITE_REQUEST_UNIT.per_unit,
        "progress_reads": read_units[PROGRESS_TABLE] * per_million * READ_REQUEST_UNIT.per_unit,
        "progress_writes": write_units[PROGRESS_TABLE] * per_million * WRITE_REQUEST_UNIT.per_unit,
        "stream_reads": stream_reads * per_million * STREAMS_READ_REQUEST_UNIT.per_unit,
        "lambda_requests": invocations * per_million * LAMBDA_REQUEST.per_unit,
        "lambda_duration": gb_seconds * per_million * LAMBDA_GB_SECOND.per_unit,
        "sqs": sqs_requests * per_million * SQS_REQUEST.per_unit,
    }
    ingest_units = sum(run.ingested.write_units.values()) + sum(run.ingested.index_write_units.values())
    ingest_dollars = ingest_units * per_million * WRITE_REQUEST_UNIT.per_unit
    without = sum(dollars.values())
    return {
        **asdict(case),
        "downloads": downloads,
        "measured_invocations": len(run.invocations),
        "final_invocation_weight": round(run.invocations[-1]["weight"], 4),
        "per_100_downloads": {
            "requests": {key: round(count * per_100, 3) for key, count in sorted(requests.items())},
            "write_units": {key: round(units * per_100, 3) for key, units in sorted(write_units.items())},
            "read_units": {key: round(units * per_100, 3) for key, units in sorted(read_units.items())},
            "index_writes": {key: round(count * per_100, 3) for key, count in sorted(index_writes.items())},
            "index_write_units": {key: round(units * per_100, 3) for key, units in sorted(index_units.items())},
            "aggregate_writes": round(aggregate_writes * per_100, 3),
            "aggregate_write_bound": round(bound * per_100, 3) if case.aggregator == "ours" else None,
            "index_writes_per_aggregate_write": round(sum(index_writes.values()) / aggregate_writes, 3)
            if aggregate_writes
            else None,
            "index_writes_per_changed_count": {
                name: round(changed_writes[name] / count, 3) for name, count in sorted(changed.items()) if count
            },
            "stream_read_request_units": round(stream_reads * per_100, 3),
            "stream_records_read": round(total(lambda i: i["usage"].stream_records) * per_100, 3),
            "lambda_invocations": round(invocations * per_100, 3),
            "lambda_gb_seconds": round(gb_seconds * per_100, 5),
            "ingest_requests": {key: round(count * per_100, 3) for key, count in sorted(run.ingested.requests.items())},
            "ingest_write_units": round(ingest_units * per_100, 3),
        },
        "handler_cpu_ms_per_download": round(1000 * total(lambda i: i["cpu_seconds"]) / downloads, 4),
        "dollars_per_million": {key: round(value, 4) for key, value in dollars.items()},
        "dollars_per_million_total": round(without, 4),
        "dollars_per_million_ingest": round(ingest_dollars, 4),
        "dollars_per_million_total_with_ingest": round(without + ingest_dollars, 4),
    }


def run_all_in(measured_downloads: int, window_downloads: int, cases: tuple[AllInCase, ...] = CASES) -> dict[str, Any]:
    """Every configuration, one after another, in this process; the price table and the latency beside them."""
    results = []
    for case in cases:
        started = time.monotonic()
        result = measure(case, measured_downloads, window_downloads)
        say(
            f"all-in, {case.name}: ${result['dollars_per_million_total']} per million downloads "
            f"({time.monotonic() - started:.0f} s)"
        )
        results.append(result)
    return {
        "method": "moto in process; every request counted where moto answers it, units from the items' images",
        "downloads_per_second": RATE,
        "window_seconds": WINDOW_SECONDS,
        "window_downloads": window_downloads,
        "measured_downloads": measured_downloads,
        "memory_gb": AGGREGATOR_MEMORY_GB,
        "latency": LATENCY,
        "write_concurrency": WRITE_CONCURRENCY,
        "prices": price_table(),
        "cases": results,
    }
