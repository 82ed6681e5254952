from __future__ import annotations

import json
import random
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import delivery
from leaderboard_dev.aws import Clients, clients
from leaderboard_dev.emulators.adversarial_retries import DIRECTORY_NAME, AdversarialRetries, switch_off, switch_on
from leaderboard_dev.emulators.lifecycle import endpoint_answers, identify, record_path, started_by_us, tail
from leaderboard_dev.fault_builds import faulty_aggregator, guide_aggregator
from leaderboard_dev.loadgen import Download
from leaderboard_dev.observe import scan_all
from leaderboard_dev.settings import REPOSITORY, STATE_DIR, Endpoint, endpoint_from_environment
from leaderboard_dev.terraform_stack import SharedProvider, Stack, deployed

pytestmark = pytest.mark.acceptance
SHIPPED_AGGREGATOR = REPOSITORY / "dist" / "aggregator.zip"


LONGEST_FIRST = (
    "test_exactly_once.py",
    "test_recovery.py",
    "test_adversarial_delivery.py",
    "test_window_given_up.py",
    "test_bench_smoke.py",
    "test_readme_demo.py",
    "test_leaderboard_shards.py",
    "test_trending_products.py",
    "test_failure_handling.py",
    "test_boards.py",
    "test_query_verbs.py",
    "test_consumer_stack.py",
    "test_existing_table.py",
    "test_ledger_mode.py",
    "test_one_reader.py",
    "test_local_time.py",
    "test_existing_table_example.py",
    "test_leaderboard.py",
    "test_tie_break.py",
    "test_retractions.py",
    "test_alarms.py",
    "test_retention.py",
    "test_emulated_stream_mapping.py",
    "test_emulator_down.py",
)
"""The acceptance files by their duration on MiniStack with the shared provider (pytest --durations), longest first."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest file first, then the unit tier: `--dist loadfile --no-loadscope-reorder` hands files to the two
    workers in this order, so the long files start early and the short ones fill in, and both workers finish
    together. Files keep their tests' order; a file missing from LONGEST_FIRST runs after those named."""
    rank = {name: position for position, name in enumerate(LONGEST_FIRST)}
    unnamed = len(LONGEST_FIRST)
    acceptance = Path(__file__).parent
    items.sort(key=lambda item: (0, rank.get(item.path.name, unnamed)) if item.path.parent == acceptance else (1, 0))


@pytest.fixture(scope="session", autouse=True)
def shared_providers() -> Iterator[None]:
    """Stop this worker's shared AWS providers and their proxies at the session's end: xdist workers skip exit
    handlers, which would leave the proxies' socket folders in the temporary directory."""
    yield
    SharedProvider.stop_all()


ANSWER_WITHIN = 60.0
"""How long a worker waits for the emulator's health to answer: CI starts every suite, the unit tier and lint at once
on two cores, and an emulator that has just said it is ready may take seconds to answer again."""
HEALTH_TIMEOUT = 10.0


@pytest.fixture(scope="session")
def endpoint() -> Endpoint:
    """AWS_ENDPOINT_URL picks the emulator (default http://127.0.0.1:4566); `make test` starts one there."""
    chosen = endpoint_from_environment()
    deadline = time.monotonic() + ANSWER_WITHIN
    while not endpoint_answers(chosen, timeout=HEALTH_TIMEOUT):
        if time.monotonic() > deadline:
            pytest.fail(
                f"no LocalStack-compatible endpoint answers at {chosen.url} within {ANSWER_WITHIN:.0f} s: run"
                f" `make up` or set AWS_ENDPOINT_URL\n{what_up_started(chosen)}"
            )
        time.sleep(1)
    return chosen


def what_up_started(endpoint: Endpoint) -> str:
    """The emulator `up` noted at this endpoint, whether it still runs, and its log's last lines."""
    try:
        record = json.loads(record_path(endpoint).read_text())
    except (OSError, ValueError):
        return f"`up` noted no emulator it started at {endpoint.url}"
    running = started_by_us(endpoint) is not None
    return (
        f"`up` started {record.get('name')} there (pid {record.get('pid')}, {'still running' if running else 'gone'});"
        f" the last lines of {record.get('log')}:\n{tail(Path(str(record.get('log'))))}"
    )


@pytest.fixture(scope="session")
def aws(endpoint: Endpoint) -> Clients:
    return clients(endpoint)


@contextmanager
def stack(endpoint: Endpoint, purpose: str, **variables: Any) -> Iterator[tuple[Stack, dict[str, Any]]]:
    """A uniquely named deployment of development/emulator_stack, destroyed afterwards even if apply failed."""
    deployment = Stack(f"{purpose}-{uuid.uuid4().hex[:6]}", endpoint, variables)
    with deployed(deployment) as outputs:
        yield deployment, outputs


class FaultBuilds:
    """Zips for fault experiments, built once per session (leaderboard_dev.fault_builds)."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory

    def faulty(self, rate: float, processed_share: float = 0.5, final_rate: float = 0.0) -> Path:
        path = self._directory / f"faulty-aggregator-{rate}-{processed_share}-{final_rate}.zip"
        if path.is_file():
            return path
        return faulty_aggregator(SHIPPED_AGGREGATOR, rate, path, processed_share, final_rate)

    def guide(self, rate: float) -> Path:
        path = self._directory / f"guide-aggregator-{rate}.zip"
        return path if path.is_file() else guide_aggregator(rate, path)


@pytest.fixture(scope="session")
def fault_builds(tmp_path_factory: pytest.TempPathFactory) -> FaultBuilds:
    return FaultBuilds(tmp_path_factory.mktemp("fault-builds"))


@pytest.fixture(scope="session")
def emulator_kind(endpoint: Endpoint) -> str:
    return identify(endpoint, timeout=HEALTH_TIMEOUT) or "unknown"


@pytest.fixture(scope="session")
def switch_directory(emulator_kind: str) -> Path:
    """Where the emulator, started by `python -m leaderboard_dev up` from this checkout, reads the adversarial retries'
    switch files (leaderboard_dev/emulators/adversarial_retries.py)."""
    if emulator_kind not in ("ministack", "localstack"):
        pytest.fail(f"adversarial retries need one of this project's emulators, not {emulator_kind}")
    return STATE_DIR / emulator_kind / DIRECTORY_NAME


@contextmanager
def adversarial_retries(directory: Path, function: str, policy: AdversarialRetries) -> Iterator[None]:
    """The emulator's stream mapping plays `policy` for `function` inside the block, and stops afterwards."""
    switch_on(directory, function, policy)
    try:
        yield
    finally:
        switch_off(directory, function)


def watermark_attribute(stream_arn: str, shard_id: str) -> str:
    """The aggregate attribute holding a shard's watermark, as the aggregator names it (its own code)."""
    return delivery.watermark_name(stream_arn, shard_id)


def shard_ids(aws: Clients, stream_arn: str) -> list[str]:
    description = aws.dynamodbstreams.describe_stream(StreamArn=stream_arn)["StreamDescription"]
    return [shard["ShardId"] for shard in description["Shards"]]


def stream_records(aws: Clients, stream_arn: str) -> tuple[str, list[dict[str, Any]]]:
    """The emulator's stream as GetRecords returns it: its (one) shard and records, shaped as Lambda delivers them."""
    shards = aws.dynamodbstreams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
    shard_id = shards[0]["ShardId"]
    iterator = aws.dynamodbstreams.get_shard_iterator(
        StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records: list[dict[str, Any]] = []
    for _ in range(20):
        page = aws.dynamodbstreams.get_records(ShardIterator=iterator)
        records += page.get("Records", [])
        iterator = page.get("NextShardIterator")
        if not iterator or (records and not page.get("Records")):
            break
    for record in records:
        record["eventSourceARN"] = stream_arn
        created = record["dynamodb"].get("ApproximateCreationDateTime")
        if created is not None and not isinstance(created, int | float):
            record["dynamodb"]["ApproximateCreationDateTime"] = created.timestamp()
    return shard_id, records


Counts = dict[tuple[str, str], int]
"""(song, month) -> downloads."""


def downloads(prefix: str, count: int, seed: int) -> list[Download]:
    """`count` downloads of 12 songs named `prefix`-…, over two months, in UTC (their month: the first 7 characters)."""
    chance = random.Random(seed)
    return [
        Download(
            f"{prefix}-song{chance.randrange(12)}",
            f"{prefix}-download-{n:04d}",
            f"user{chance.randrange(50)}",
            f"2019-0{chance.choice((3, 4))}-{chance.randrange(1, 29):02d}T{chance.randrange(24):02d}:00:00Z",
        )
        for n in range(count)
    ]


def recount(written: list[Download]) -> Counts:
    """The truth, from the downloads the test wrote: one per download, in its UTC month."""
    return dict(Counter((download.song_id, download.timestamp[:7]) for download in written))


def stored(aws: Clients, table: str) -> Counts:
    items = scan_all(
        aws,
        TableName=table,
        FilterExpression="attribute_exists(#m)",
        ExpressionAttributeNames={"#m": "Month"},
        ConsistentRead=True,
    )
    return {(item["songID"]["S"], item["SK"]["S"]): int(item["DownloadCount"]["N"]) for item in items}


def differences(observed: Counts, truth: Counts) -> dict[str, tuple[int, int]]:
    """song|month -> (stored, recounted) wherever they differ."""
    keys = set(observed) | set(truth)
    return {
        f"{song}|{month}": (observed.get((song, month), 0), truth.get((song, month), 0))
        for song, month in sorted(keys)
        if observed.get((song, month), 0) != truth.get((song, month), 0)
    }


ALARM_TAG_CHANGE = re.compile(r"^\s*~ (\w+)\s+=", flags=re.MULTILINE)


def second_plan(deployment: Stack, emulator_kind: str) -> str | None:
    """The second plan's text when it would change anything, None when it is empty.

    LocalStack drops the Tags given to PutMetricAlarm (ListTagsForResource answers none; TagResource
    keeps them), so right after creating alarms its second plan sets their tags. Only there, and only
    when that is all the plan would do, the tags are applied once (through TagResource) and the plan
    is taken again: every other difference still fails.
    """
    changes = deployment.pending_changes()
    if changes is None or emulator_kind != "localstack":
        return changes
    updated = re.findall(r"# (\S+) will be updated in-place", changes)
    attributes = set(ALARM_TAG_CHANGE.findall(changes))
    created_or_destroyed = re.search(r"will be (created|destroyed|replaced)|must be replaced", changes)
    if (
        updated
        and not created_or_destroyed
        and all(".aws_cloudwatch_metric_alarm." in address for address in updated)
        and attributes <= {"tags", "tags_all"}
    ):
        deployment.apply()
        return deployment.pending_changes()
    return changes


@pytest.fixture
def platform_table(aws: Clients) -> Iterator[str]:
    """The platform's table, created outside the module and deleted afterwards (after the stack that reads it)."""
    name = f"platform-{uuid.uuid4().hex[:6]}"
    aws.dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "BySortKey",
                "KeySchema": [{"AttributeName": "SK", "KeyType": "HASH"}, {"AttributeName": "PK", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    aws.dynamodb.get_waiter("table_exists").wait(TableName=name)
    try:
        yield name
    finally:
        aws.dynamodb.delete_table(TableName=name)
