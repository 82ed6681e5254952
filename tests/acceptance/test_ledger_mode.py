"""Ledger mode attached to a platform's table with history, whose stream already feeds another consumer.

The platform's table (a single-table design, keyed PK/SK) holds downloads written before its stream existed; an
audit feed (another team's function) reads the stream through its own mapping. The module is applied with `ledger`
and `retractions`; while downloads are written, edited across months and genres, deleted and written again (history
included), two backfills run at once, one is killed, and one more runs after. Then every board equals a recount of
the table's items as they are, the audit feed received every record of the stream, and the operator tools say what
ledger mode takes: two readers of each shard (three with the audit feed), nothing to release.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import subprocess
import sys
import threading
import uuid
import zipfile
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from localstack_client.session import Session

from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import poll_until
from leaderboard_dev.loadgen import write_items
from leaderboard_dev.observe import scan_all
from leaderboard_dev.settings import REPOSITORY, Endpoint
from tests.acceptance.conftest import stack, stored
from tests.acceptance.test_existing_table import (
    GENRES,
    MARKER,
    MONTHS,
    cli,
    enable_stream,
    genred,
    platform_item,
    segments_saved,
)

pytestmark = pytest.mark.acceptance

AUDIT_SOURCE = '''
import os

import boto3

dynamodb = boto3.client("dynamodb")


def handler(event, context):
    """Another team's consumer of the stream: it keeps the id of every record it is given."""
    for record in event.get("Records", []):
        dynamodb.put_item(TableName=os.environ["AUDIT_TABLE"], Item={"id": {"S": record["eventID"]}})
'''


def audit_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("audit.py", AUDIT_SOURCE)
    return buffer.getvalue()


@contextlib.contextmanager
def audit_feed(aws: Clients, endpoint: Endpoint, table: str) -> Iterator[str]:
    """The audit feed on the table's stream: its function, its own mapping from TRIM_HORIZON and the table it writes
    each record's id to (yielded); all deleted afterwards."""
    name = f"audit-{uuid.uuid4().hex[:6]}"
    with contextlib.ExitStack() as cleanup:
        aws.dynamodb.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        )
        cleanup.callback(_quietly, aws.dynamodb.delete_table, TableName=name)
        aws.dynamodb.get_waiter("table_exists").wait(TableName=name)
        aws.lambda_.create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role="arn:aws:iam::000000000000:role/audit-feed",
            Handler="audit.handler",
            Code={"ZipFile": audit_zip()},
            Timeout=30,
            Environment={"Variables": {"AUDIT_TABLE": name, "AWS_ENDPOINT_URL": endpoint.url}},
        )
        cleanup.callback(_quietly, aws.lambda_.delete_function, FunctionName=name)
        poll_until(
            lambda: aws.lambda_.get_function(FunctionName=name)["Configuration"].get("State", "Active") == "Active",
            timeout=60,
            describe=f"function {name} active",
        )
        stream_arn = aws.dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        mapping = aws.lambda_.create_event_source_mapping(
            FunctionName=name, EventSourceArn=stream_arn, StartingPosition="TRIM_HORIZON", BatchSize=100
        )
        cleanup.callback(_quietly, aws.lambda_.delete_event_source_mapping, UUID=mapping["UUID"])
        poll_until(
            lambda: aws.lambda_.get_event_source_mapping(UUID=mapping["UUID"])["State"] == "Enabled",
            timeout=60,
            describe="the audit feed's mapping enabled",
        )
        yield name


def _quietly(action: Any, **arguments: Any) -> None:
    with contextlib.suppress(ClientError):
        action(**arguments)


class Changes(threading.Thread):
    """The platform's writes while the backfills run: new downloads, edits across months and genres (of the history
    too), deletions, and downloads written again under a deleted key; until stopped."""

    def __init__(self, aws: Clients, table: str, history: list[dict[str, Any]], chance: random.Random) -> None:
        super().__init__(daemon=True)
        self._aws, self._table, self._chance = aws, table, chance
        self._known = list(history)
        self._deleted: list[dict[str, Any]] = []
        self._next = 100_000
        self._halt = threading.Event()
        self.operations: Counter[str] = Counter()

    def run(self) -> None:
        while not self._halt.is_set():
            for _ in range(5):
                self._change()
            self._halt.wait(0.2)

    def _change(self) -> None:
        chance, dynamodb = self._chance, self._aws.dynamodb
        kind = chance.choice(["new", "new", "edit month", "edit genre", "delete", "put again"])
        if kind == "new" or (kind == "put again" and not self._deleted):
            item = genred(platform_item("DOWNLOAD", self._next, chance), chance)
            self._next += 1
            write_items(dynamodb, self._table, [item])
            self._known.append(item)
        elif kind == "put again":
            item = genred(self._deleted.pop(chance.randrange(len(self._deleted))), chance)
            write_items(dynamodb, self._table, [item])
            self._known.append(item)
        else:
            item = self._known.pop(chance.randrange(len(self._known)))
            if kind == "delete":
                dynamodb.delete_item(TableName=self._table, Key={"PK": item["PK"], "SK": item["SK"]})
                self._deleted.append(item)
                self.operations[kind] += 1
                return
            month = chance.choice([m for m in MONTHS if m != item["Timestamp"]["S"][:7]])
            if kind == "edit month":
                edited = {**item, "Timestamp": {"S": month + item["Timestamp"]["S"][7:]}}
            else:
                edited = {**item, "Genre": {"S": chance.choice([g for g in GENRES if g != item["Genre"]["S"]])}}
            write_items(dynamodb, self._table, [edited])
            self._known.append(edited)
        self.operations[kind] += 1

    def stop(self) -> Counter[str]:
        self._halt.set()
        self.join(timeout=60)
        return self.operations


def recount(aws: Clients, table: str) -> dict[tuple[str, str], int]:
    """The boards as the table's items say now: each download in its UTC month and its genre's board of it."""
    counts: Counter[tuple[str, str]] = Counter()
    for item in scan_all(aws, TableName=table, ConsistentRead=True):
        if item.get("type", {}).get("S") != "DOWNLOAD":
            continue
        song, month = item["songID"]["S"], item["Timestamp"]["S"][:7]
        counts[(song, month)] += 1
        counts[(song, f"{month}@{item['Genre']['S']}")] += 1
    return dict(counts)


def without_zeros(boards: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    return {board: count for board, count in boards.items() if count}


def stream_record_ids(endpoint: Endpoint, stream_arn: str) -> set[str]:
    """Every record id the stream holds, read shard by shard from its trim horizon."""
    streams = Session(region_name=endpoint.region, localstack_host=f"{endpoint.host}:{endpoint.port}").client(
        "dynamodbstreams"
    )
    ids: set[str] = set()
    for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            ids |= {record["eventID"] for record in page["Records"]}
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return ids


def backfill(*flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "leaderboard_tools", "backfill", *flags],
        cwd=REPOSITORY,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_ledger_mode_counts_a_history_edited_and_deleted_beside_two_backfills_and_another_consumer(
    endpoint: Endpoint,
    aws: Clients,
    platform_table: str,
) -> None:
    # given a platform's table holding 1,500 downloads over two months and three genres that its stream never
    # carried, beside users, whose stream an audit feed reads; and the module attached in ledger mode
    chance = random.Random(38)
    history = [genred(platform_item("DOWNLOAD", number, chance), chance) for number in range(1500)]
    write_items(aws.dynamodb, platform_table, history + [platform_item("USER", number, chance) for number in range(50)])
    enable_stream(aws, platform_table)
    variables = {
        "source_table_name": platform_table,
        "source_item_filter": MARKER,
        "category_attribute_name": "Genre",
        "retractions": True,
        "ledger": True,
    }
    with (
        audit_feed(aws, endpoint, platform_table) as audit,
        stack(endpoint, "ledger", **variables) as (_, outputs),
    ):
        aggregates, ledger = outputs["aggregates_table_name"], outputs["claims_table_name"]
        # when downloads are written, edited across months and genres, deleted and written again, while two backfills
        # run at once, one of them is killed, and one more runs after them
        changes = Changes(aws, platform_table, history, random.Random(39))
        changes.start()
        table = ["--table", platform_table, "--segments", "2"]
        killed = backfill(*table, "--page-size", "50", "--max-read-units", "5")
        beside = backfill(*table, "--page-size", "50", "--max-read-units", "20", "--json")
        poll_until(
            lambda: segments_saved(aws, ledger) >= 1 or killed.poll() is not None,
            timeout=300,
            describe="a backfill's first page",
        )
        assert killed.poll() is None, killed.communicate(timeout=60)
        killed.kill()
        killed.communicate(timeout=60)
        out, err = beside.communicate(timeout=1200)
        assert beside.returncode == 0, out + err
        again = cli("backfill", *table, "--json")
        assert again.returncode == 0, again.stdout + again.stderr
        operations = changes.stop()
        assert min(operations[kind] for kind in ("new", "edit month", "edit genre", "delete", "put again")) > 0
        # then every board, month and genre, equals a recount of the table's items as they are now
        truth = recount(aws, platform_table)
        poll_until(
            lambda: without_zeros(stored(aws, aggregates)) == truth,
            timeout=300,
            describe="the boards equal to the recount of the items",
        )
        # and the audit feed received every record of the stream
        stream_ids = stream_record_ids(endpoint, outputs["table_stream_arn"])
        poll_until(
            lambda: {item["id"]["S"] for item in scan_all(aws, TableName=audit)} == stream_ids,
            timeout=300,
            describe="the audit feed's records",
        )
        # and there is nothing to release, and the stream has three readers: the module's two and the audit feed
        released = cli("backfill", "--table", platform_table, "--release-check")
        assert released.returncode == 0, released.stdout + released.stderr
        assert "ledger mode: the ledger is permanent, nothing to release" in released.stdout
        readers = cli("readers", "--table", platform_table, "--json")
        answer = json.loads(readers.stdout)
        assert readers.returncode == 3, readers.stdout + readers.stderr
        assert [(reader["kind"], reader["readers"]) for reader in answer["readers"]] == [
            ("aggregator", 2),
            ("mapping", 1),
        ]
        assert answer["readers"][0]["ledger"] is True
