"""What `leaderboard-tools backfill` asks of DynamoDB per item of history: the real Backfill, on moto, in process.

A table attached with `source_table_name` (its aggregates in a table of their own, docs/attaching.md) holds a
generated history: the bench's Zipf catalogue (1,000 songs, exponent 1.1) over six months. The shipped
`leaderboard_tools.backfill.Backfill` counts it with its defaults (4 segments, pages of 100), unpaced, while every
request botocore sends is counted where moto answers it (`all_in.SdkMeter`: requests by operation and table, write
units from the items' images, transactions at twice the units, the leaderboard index's writes).

moto's Scan answers a constant ConsumedCapacity of 1 per request, so the Scan's read units are computed here by
DynamoDB's rule: a page is charged for the items it evaluated (before the projection; no filter applies on a table of
downloads only), their sizes summed and rounded up to 4 KB, one unit per 4 KB for the backfill's strongly
consistent reads (half for eventually consistent ones). Times are this machine's, moto's answers and the meter
included; the AWS-side limit is the pace, MAX_READ_UNITS read units a second by default.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from leaderboard_core.attributes import AttributeNames
from leaderboard_core.claims import CLAIM_KEY
from leaderboard_dev.bench.all_in import LEADERBOARD, SdkMeter, Table, item_bytes
from leaderboard_dev.bench.prices import READ_REQUEST_UNIT, WRITE_REQUEST_UNIT
from leaderboard_dev.bench.workload import SONGS, ZIPF_EXPONENT, say
from leaderboard_dev.loadgen import utc_month, zipf_downloads
from leaderboard_tools.backfill import DONE, Backfill
from leaderboard_tools.backfill.scan import MAX_READ_UNITS, PAGE_SIZE, SEGMENTS
from leaderboard_tools.deployment import Deployment

REGION = "us-east-1"
DOWNLOADS = "backfill-downloads"
AGGREGATES = "backfill-aggregates"
CLAIMS = "backfill-claims"
PROGRESS = "backfill-progress"
MONTHS = ("2024-01", "2024-02", "2024-03", "2024-04", "2024-05", "2024-06")
SEED = 30
READ_UNIT_BYTES = 4096
TABLES = {
    DOWNLOADS: Table(DOWNLOADS, ("songID", "SK")),
    AGGREGATES: Table(AGGREGATES, ("songID", "SK"), (LEADERBOARD,)),
    CLAIMS: Table(CLAIMS, (CLAIM_KEY,)),
    PROGRESS: Table(PROGRESS, ("ShardKey",)),
}
KEY_TYPES = {"songID": "S", "SK": "S", CLAIM_KEY: "S", "ShardKey": "S", "Month": "S", "LeaderboardOrder": "N"}


def history(downloads: int, seed: int = SEED) -> list[dict[str, Any]]:
    """The table's downloads, as written before the module was attached."""
    return [
        download.as_item()
        for download in zipf_downloads(downloads, songs=SONGS, months=MONTHS, seed=seed, exponent=ZIPF_EXPONENT)
    ]


def deployment() -> Deployment:
    """The module attached with source_table_name and backfill_claims = true, as `discover` reads it."""
    return Deployment(
        table=DOWNLOADS,
        table_arn=f"arn:aws:dynamodb:{REGION}:123456789012:table/{DOWNLOADS}",
        stream_arn=None,
        names=AttributeNames(),
        leaderboard_shards=1,
        query_leaderboard_shards=1,
        query_leaderboard_shards_previous=None,
        ttl_attribute=None,
        window_seconds=60,
        failure_queue_url=None,
        progress_table=PROGRESS,
        aggregator_function="backfill-aggregator",
        query_function=None,
        mapping_uuid=None,
        mapping_state=None,
        aggregates_table=AGGREGATES,
        key_attributes=("songID", "SK"),
        claims_table=CLAIMS,
    )


def create_tables(dynamodb: Any) -> None:
    """The claims table before the progress table, as the module creates them (the backfill checks the order)."""
    for name in (DOWNLOADS, AGGREGATES, CLAIMS, PROGRESS):
        table = TABLES[name]
        named = {*table.keys, *(key for index in table.indexes for key in index.keys)}
        key_schema = [{"AttributeName": k, "KeyType": t} for k, t in zip(table.keys, ("HASH", "RANGE"), strict=False)]
        arguments: dict[str, Any] = {
            "TableName": name,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": n, "AttributeType": KEY_TYPES[n]} for n in sorted(named)],
            "KeySchema": key_schema,
        }
        if table.indexes:
            arguments["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": index.name,
                    "KeySchema": [
                        {"AttributeName": k, "KeyType": t} for k, t in zip(index.keys, ("HASH", "RANGE"), strict=True)
                    ],
                    "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(index.projected)},
                }
                for index in table.indexes
            ]
        dynamodb.create_table(**arguments)


class ScanUnits:
    """The backfill's client, passed through, with each Scan page's read units computed from the full size of the
    items it evaluated (what DynamoDB charges), not from the projected attributes it returns."""

    def __init__(self, client: Any, sizes: dict[tuple[str, str], int]) -> None:
        self._client = client
        self._sizes = sizes
        self._lock = threading.Lock()
        self.pages = 0
        self.evaluated = 0
        self.evaluated_bytes = 0
        self.read_units = 0.0
        self.reported_units = 0.0
        """What moto's ConsumedCapacity said: a constant per request, kept to show it is not used."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def scan(self, **request: Any) -> Any:
        page = self._client.scan(**request)
        if request.get("TableName") != DOWNLOADS or "Segment" not in request:
            return page
        if page.get("ScannedCount") != page.get("Count"):
            raise ValueError("a filter dropped items: their sizes are not known here")
        size = sum(self._sizes[(item["songID"]["S"], item["SK"]["S"])] for item in page.get("Items", []))
        share = 1.0 if request.get("ConsistentRead") else 0.5
        with self._lock:
            self.pages += 1
            self.evaluated += int(page.get("ScannedCount", 0))
            self.evaluated_bytes += size
            self.read_units += share * max(1, math.ceil(size / READ_UNIT_BYTES))
            self.reported_units += float((page.get("ConsumedCapacity") or {}).get("CapacityUnits") or 0)
        return page


@contextlib.contextmanager
def one_request_at_a_time() -> Iterator[None]:
    """moto's TransactWriteItems deep-copies the tables it writes (to roll them back), which another thread's write
    breaks, and the meter reads each item before and after a write: the segments' requests are served one by one."""
    from moto.core.botocore_stubber import BotocoreStubber

    lock = threading.Lock()
    metered = BotocoreStubber.process_request

    def serialized(stubber: Any, request: Any) -> Any:
        with lock:
            return metered(stubber, request)

    BotocoreStubber.process_request = serialized  # type: ignore[method-assign]
    try:
        yield
    finally:
        BotocoreStubber.process_request = metered  # type: ignore[method-assign]


@contextlib.contextmanager
def one_backup_per_table() -> Iterator[None]:
    """moto's TransactWriteItems deep-copies a table once per action naming it, to roll the table back if the
    transaction fails: a backup made again and again, which at 20,000 claims took minutes and gigabytes per
    transaction. Each table is copied once per transaction here, the same backup."""
    import copy
    from types import SimpleNamespace

    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table as MotoTable

    transact = models.DynamoDBBackend.transact_write_items

    def once_per_table(backend: Any, transact_items: list[dict[str, Any]]) -> None:
        backups: dict[int, Any] = {}

        def deepcopy(value: Any, memo: Any = None) -> Any:
            if not isinstance(value, MotoTable):
                return copy.deepcopy(value, memo)
            if id(value) not in backups:
                backups[id(value)] = copy.deepcopy(value, memo)
            return backups[id(value)]

        models.copy = SimpleNamespace(deepcopy=deepcopy)  # type: ignore[assignment]
        try:
            return transact(backend, transact_items)
        finally:
            models.copy = copy  # type: ignore[assignment]

    models.DynamoDBBackend.transact_write_items = once_per_table  # type: ignore[method-assign]
    try:
        yield
    finally:
        models.DynamoDBBackend.transact_write_items = transact  # type: ignore[method-assign]


@contextlib.contextmanager
def moto_environment() -> Iterator[None]:
    """moto's credentials and region, no emulator endpoint; the caller's environment restored after."""
    saved = dict(os.environ)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ.update(
        {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}
    )
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def aggregates_of(dynamodb: Any) -> dict[tuple[str, str], int]:
    counts = {}
    for page in dynamodb.get_paginator("scan").paginate(TableName=AGGREGATES, ConsistentRead=True):
        for item in page["Items"]:
            counts[(item["songID"]["S"], item["SK"]["S"])] = int(item["DownloadCount"]["N"])
    return counts


def recount(items: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    """The oracle: each generated download in its song's UTC month."""
    return Counter((item["songID"]["S"], utc_month(item["Timestamp"]["S"])) for item in items)


@dataclass
class Measured:
    """One backfill of a generated history: its input, what the table holds after, and what it asked of AWS."""

    items: list[dict[str, Any]]
    stored: dict[tuple[str, str], int]
    scan: ScanUnits
    usage: Any
    report: Any
    seconds: float
    cpu_seconds: float


def backfill_history(downloads: int, seed: int = SEED) -> Measured:
    """Write the history (not counted), then run the backfill to its end with every request metered."""
    import boto3
    from moto import mock_aws

    items = history(downloads, seed)
    sizes = {(item["songID"]["S"], item["SK"]["S"]): item_bytes(item) for item in items}
    with moto_environment(), mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        create_tables(dynamodb)
        for first in range(0, len(items), 25):
            chunk = items[first : first + 25]
            dynamodb.batch_write_item(RequestItems={DOWNLOADS: [{"PutRequest": {"Item": item}} for item in chunk]})
        client = ScanUnits(dynamodb, sizes)
        meter = SdkMeter(TABLES, AGGREGATES, parallel=False)
        backfill = Backfill(client, deployment(), max_read_units=1e9, dynamo_time=time.time)
        with meter.metered(), one_request_at_a_time(), one_backup_per_table():
            started, cpu = time.monotonic(), time.process_time()
            report = backfill.run()
            seconds, cpu_seconds = time.monotonic() - started, time.process_time() - cpu
        usage = meter.take()
        stored = aggregates_of(dynamodb)
    return Measured(items, stored, client, usage, report, seconds, cpu_seconds)


def summarise(measured: Measured) -> dict[str, Any]:
    """Requests, units and dollars per million items; the machine's speed beside the pace's bound."""
    items, scan, usage, report, stored = (
        measured.items,
        measured.scan,
        measured.usage,
        measured.report,
        measured.stored,
    )
    downloads = len(items)
    truth = recount(items)
    wrong = sum(1 for key in set(stored) | set(truth) if stored.get(key, 0) != truth.get(key, 0))
    read_units = {**usage.read_units, DOWNLOADS: scan.read_units}
    per_million = 1e6 / downloads
    dollars = {
        "scan_reads": scan.read_units * per_million * READ_REQUEST_UNIT.per_unit,
        "claims_table_reads": usage.read_units[CLAIMS] * per_million * READ_REQUEST_UNIT.per_unit,
        "claims_table_writes": usage.write_units[CLAIMS] * per_million * WRITE_REQUEST_UNIT.per_unit,
        "aggregate_writes": usage.write_units[AGGREGATES] * per_million * WRITE_REQUEST_UNIT.per_unit,
        "index_writes": sum(usage.index_write_units.values()) * per_million * WRITE_REQUEST_UNIT.per_unit,
    }
    transactions = sum(count for key, count in usage.requests.items() if " TransactWriteItems " in f"{key} ")
    write_requests = {
        key: count
        for key, count in usage.requests.items()
        if key.split()[1] in ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")
    }
    units_per_item = scan.read_units / downloads
    return {
        "method": "leaderboard_tools.backfill.Backfill on moto in process, unpaced; every request counted where moto "
        "answers it (all_in.SdkMeter); the Scan's read units from the full size of the items each page evaluated",
        "downloads": downloads,
        "months": list(MONTHS),
        "songs": SONGS,
        "segments": SEGMENTS,
        "page_size": PAGE_SIZE,
        "mean_item_bytes": round(sum(item_bytes(item) for item in items) / downloads, 1),
        "status": report.status,
        "counted": report.run.counted,
        "aggregates": len(stored),
        "wrong_aggregates": wrong,
        "exact": wrong == 0 and report.run.counted == downloads,
        "requests": dict(sorted(usage.requests.items())),
        "write_requests": dict(sorted(write_requests.items())),
        "transactions": transactions,
        "downloads_per_transaction": round(report.run.counted / transactions, 2) if transactions else None,
        "scan": {
            "pages": scan.pages,
            "items_evaluated": scan.evaluated,
            "bytes_evaluated": scan.evaluated_bytes,
            "consistent_reads": True,
            "read_units": scan.read_units,
            "read_units_from_moto": scan.reported_units,
        },
        "read_units": {table: round(units, 2) for table, units in sorted(read_units.items())},
        "write_units": dict(sorted(usage.write_units.items())),
        "index_writes": dict(sorted(usage.index_writes.items())),
        "index_write_units": dict(sorted(usage.index_write_units.items())),
        "read_units_per_item": round(units_per_item, 5),
        "write_units_per_item": round(
            (sum(usage.write_units.values()) + sum(usage.index_write_units.values())) / downloads, 3
        ),
        "seconds_this_machine": round(measured.seconds, 2),
        "items_per_second_this_machine": round(downloads / measured.seconds, 1),
        "cpu_ms_per_item_this_machine": round(1000 * measured.cpu_seconds / downloads, 3),
        "moto_cpu_ms_per_item_this_machine": round(1000 * usage.backend_seconds / downloads, 3),
        "max_read_units_per_second": MAX_READ_UNITS,
        "items_per_second_at_default_pace": round(MAX_READ_UNITS / units_per_item) if units_per_item else None,
        "prices": {
            "read_request_unit": READ_REQUEST_UNIT.as_json(),
            "write_request_unit": WRITE_REQUEST_UNIT.as_json(),
        },
        "dollars_per_million_items": {key: round(value, 4) for key, value in dollars.items()},
        "dollars_per_million_items_total": round(sum(dollars.values()), 4),
    }


def run_backfill_cost(downloads: int) -> dict[str, Any]:
    started = time.monotonic()
    result = summarise(backfill_history(downloads))
    if result["status"] != DONE:
        raise RuntimeError(f"the backfill ended {result['status']}, not done")
    say(
        f"backfill: {downloads:,} items, ${result['dollars_per_million_items_total']} per million items, "
        f"{result['items_per_second_this_machine']:,} items/s on this machine ({time.monotonic() - started:.0f} s)"
    )
    return result
