from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.botocore_models import share_parsed_models

REPOSITORY = Path(__file__).resolve().parents[2]

# What the module gives the functions; read when the handler modules are imported.
os.environ.setdefault("TABLE_NAME", "test-downloads")
os.environ.setdefault("TABLE_ARN", "arn:aws:dynamodb:us-east-1:000000000000:table/test-downloads")
os.environ.setdefault("PROGRESS_TABLE_NAME", "test-progress")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "UnitTests")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "unit-tests")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
share_parsed_models()

LONGEST_FIRST = (
    "tests/unit/stream_model/test_exactly_once.py",
    "tests/unit/stream_model/test_guard_mutations.py",
    "tests/unit/query/test_query_verbs_adversarial.py",
    "tests/unit/tools/test_backfill_histories.py",
    "tests/unit/aggregator/test_catch_up_memory.py",
    "tests/bench/test_bench_all_in.py",
    "tests/unit/terraform/test_module_validations.py",
    "tests/unit/tools/test_band_records.py",
    "tests/unit/aggregator/test_window_steps.py",
    "tests/unit/tools/test_backfill.py",
    "tests/unit/tools/test_repair_band_histories.py",
    "tests/unit/aggregator/test_catch_up_nested_items.py",
    "tests/unit/tools/test_recover.py",
    "tests/unit/development/test_release.py",
    "tests/unit/terraform/test_stream_filter.py",
    "tests/unit/tools/test_cli_errors.py",
    "tests/unit/tools/test_single_table.py",
    "tests/unit/terraform/test_examples.py",
    "tests/unit/tools/test_backfill_release_concurrent.py",
    "tests/unit/tools/test_reconcile.py",
    "tests/unit/terraform/test_ledger_refusals.py",
    "tests/unit/tools/test_repair_band_retractions.py",
    "tests/unit/tools/test_operator_tools.py",
    "tests/unit/tools/test_backfill_ledger.py",
    "tests/unit/query/test_query.py",
)
"""The unit tier's longest files (`make test`'s and `make check`'s, by their --durations), longest first: `--dist
loadfile --no-loadscope-reorder` hands work units to the workers in collection order, so these start first and the
short files fill in, and the workers finish together instead of one running a long file alone at the end. The
files that tests/scheduling.py spreads a test at a time are here too: their long tests start first."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of LONGEST_FIRST first, in its order; every other file after them, in collection order."""
    rank = {str(REPOSITORY / name): position for position, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(str(item.path), len(rank)))


TABLE = "test-downloads"
PROGRESS_TABLE = "test-progress"
INDEX = "MonthDownloadsIndex"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto intercepts AWS hostnames only: an emulator endpoint in the environment must not leak in."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        yield


_CLIENTS: dict[str, tuple[Any, str | None, Any]] = {}


def moto_client(service: str) -> Any:
    """boto3.client(service) in us-east-1, made once per default session and endpoint: moto starts each test with a new
    session (a test against moto's server sets AWS_ENDPOINT_URL instead), and making a client costs about 12 ms, which
    helpers that write one item at a time paid hundreds of times a test."""
    session, endpoint = boto3._get_default_session(), os.environ.get("AWS_ENDPOINT_URL")
    made = _CLIENTS.get(service)
    if made is None or made[0] is not session or made[1] != endpoint:
        made = _CLIENTS[service] = (session, endpoint, session.client(service, region_name="us-east-1"))
    return made[2]


def create_table(table_name: str = TABLE, fresh: bool = False, stream_view_type: str | None = "NEW_IMAGE") -> Any:
    """The module's table in moto: songID/SK keys, a NEW_IMAGE stream (another view type, or None: no stream yet), the
    sparse (Month, LeaderboardOrder) index."""
    client = boto3.client("dynamodb", region_name="us-east-1")
    if fresh and table_name in client.list_tables()["TableNames"]:
        client.delete_table(TableName=table_name)
    client.create_table(
        TableName=table_name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "songID", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "S"},
            {"AttributeName": "Month", "AttributeType": "S"},
            {"AttributeName": "LeaderboardOrder", "AttributeType": "N"},
        ],
        KeySchema=[{"AttributeName": "songID", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": INDEX,
                "KeySchema": [
                    {"AttributeName": "Month", "KeyType": "HASH"},
                    {"AttributeName": "LeaderboardOrder", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["DownloadCount"]},
            }
        ],
        StreamSpecification=(
            {"StreamEnabled": True, "StreamViewType": stream_view_type}
            if stream_view_type
            else {"StreamEnabled": False}
        ),
    )
    return client


def create_progress_table(table_name: str = PROGRESS_TABLE) -> Any:
    """The module's progress table in moto: one item per stream shard, keyed by ShardKey."""
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName=table_name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "ShardKey", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "ShardKey", "KeyType": "HASH"}],
    )
    return client


@pytest.fixture
def dynamodb(aws: None) -> Any:
    """The table and the progress table, as the module creates them."""
    create_progress_table()
    return create_table()


@pytest.fixture
def sqs_queue(aws: None) -> tuple[Any, str]:
    client = boto3.client("sqs", region_name="us-east-1")
    return client, client.create_queue(QueueName="test-failures")["QueueUrl"]


def count_of(dynamodb: Any, song_id: str, month: str) -> int | None:
    item = dynamodb.get_item(TableName=TABLE, Key={"songID": {"S": song_id}, "SK": {"S": month}}).get("Item")
    return None if item is None else int(item["DownloadCount"]["N"])


class FakeLambdaContext:
    """The parts of the Lambda context the handlers and Powertools read."""

    function_name = "unit-test-function"
    function_version = "$LATEST"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:unit-test-function"
    aws_request_id = "00000000-0000-0000-0000-000000000000"

    def __init__(self, remaining_ms: int = 60_000) -> None:
        self._deadline = time.monotonic() + remaining_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        """Counts down in real time, as Lambda's does."""
        return max(0, round((self._deadline - time.monotonic()) * 1000))


@pytest.fixture
def lambda_context() -> FakeLambdaContext:
    return FakeLambdaContext()
