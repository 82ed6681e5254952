"""The aggregator's own processing time per download, with DynamoDB and DynamoDB Streams answering at once.

On the emulator every DynamoDB call is Python work of the emulator's, far slower than DynamoDB's,
so the durations it logs say little about Lambda's bill on AWS. This measures what the function
itself spends: the shipped handler's functions (`process_delivery`, then `publish`, which logs the
batch summary and the metrics) on moto's table, stream and progress table, in process. The time
moto's backend takes to answer each request is measured on the same thread and taken out; what
botocore does in the function (build, sign and send the request, parse the answer) stays in, as
it runs in the function on AWS too. CPU time of the measuring thread (`time.thread_time`), so
that other processes on the machine do not count; the aggregate writes run one after another on
that thread (the function runs them `aggregator_write_concurrency` at a time).

Per case (a batch size, the boards kept): a warm-up batch (WARM_UP), then batches of fresh downloads
(the benchmark's Zipf catalogue, in time order), each written to moto's table outside the clock
and delivered as a tumbling-window event of the records the stream holds for them. The stream
interleaves them with the aggregate writes of the batches before, as on AWS. Counted per
invocation: every DynamoDB and DynamoDB Streams call, by operation, and which of them are the
aggregate writes (parallel) and which are not (one after another).

The cost table then takes, per million downloads, this CPU plus a stated latency per call
(LATENCY, cited) times the calls that wait one after another: the non-write calls of an
invocation and its writes in rounds of `aggregator_write_concurrency`
(`pressure_cost.lambda_seconds_per_million`). The guide's handler is measured the same way: one
ADD per record, each waiting for the last.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from leaderboard_dev.backlog_stream import InlineExecutor
from leaderboard_dev.bench.boards import BY_NAME, CATEGORY_ATTRIBUTE, realtime_downloads
from leaderboard_dev.bench.workload import say
from leaderboard_dev.fault_builds import BASELINES
from leaderboard_dev.settings import REPOSITORY
from leaderboard_tools.size.sizing import AGGREGATOR_MEMORY_MB

AGGREGATOR_SOURCE = REPOSITORY / "lambda_src" / "aggregator"
TABLE = "cpu-downloads"
PROGRESS_TABLE = "cpu-progress"
REGION = "us-east-1"
TABLE_ARN = f"arn:aws:dynamodb:{REGION}:123456789012:table/{TABLE}"
WRITE_CONCURRENCY = 8
"""The module's default aggregator_write_concurrency."""
WARM_UP = 100
"""Downloads of the warm-up batch: the first invocation of a function reads its shard's description and progress."""

LATENCY: dict[str, Any] = {
    "milliseconds_per_call": 10.0,
    "stated": (
        "10 ms per DynamoDB or DynamoDB Streams call, waited for in full: the upper end of the single-digit "
        "milliseconds AWS documents for the average service-side latency of single-item operations (GetItem, "
        "PutItem; UpdateItem is one), which leaves out the network between the function and the endpoint"
    ),
    "sources": [
        {
            "quote": "For most atomic operations, such as GetItem and PutItem, an average latency is in single-digit "
            "milliseconds.",
            "title": "AWS re:Post Knowledge Center, How can I troubleshoot high latency on an Amazon DynamoDB table?",
            "url": "https://repost.aws/knowledge-center/dynamodb-high-latency",
        },
        {
            "quote": "The SuccessfulRequestLatency Amazon CloudWatch metric measures only the amount of time it takes "
            "for DynamoDB to fully process the API request. DynamoDB doesn't measure the time the application takes "
            "to connect to the DynamoDB endpoint or download the results from the endpoint.",
            "title": "the same article",
            "url": "https://repost.aws/knowledge-center/dynamodb-high-latency",
        },
        {
            "quote": "Single-digit millisecond performance at any scale",
            "title": "Amazon DynamoDB Developer Guide, What is Amazon DynamoDB?, Characteristics of DynamoDB",
            "url": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Introduction.html",
        },
    ],
    "assumptions": [
        "GetRecords and GetShardIterator (DynamoDB Streams) take as long as a single-item write",
        "calls that are not aggregate writes wait one after another; aggregate writes run "
        f"{WRITE_CONCURRENCY} at a time (aggregator_write_concurrency), so they wait in rounds",
        "an invocation without records (a window's final one) is charged as one with records: an upper estimate",
    ],
}


@dataclass(frozen=True)
class CpuCase:
    """What one measurement runs: the shipped handler with the boards of a configuration, or the guide's."""

    aggregator: str
    """ours_per_batch, or guide."""
    configuration: str
    """A name of boards.CONFIGURATIONS (the guide's handler keeps months only)."""
    batch_size: int
    batches: int
    """Measured batches, after a warm-up batch."""


def cases(
    batch_sizes: tuple[int, ...], guide_batch_sizes: tuple[int, ...], board_batch_sizes: tuple[int, ...]
) -> list[CpuCase]:
    """Ours with months at every batch size, every board configuration at the board batch sizes, the guide's."""

    def batches(size: int) -> int:
        """Some 1,000 downloads measured per case: moto answers the handler's writes in some 30 ms each."""
        return max(1, math.ceil(1000 / size))

    measured = [CpuCase("ours_per_batch", "month", size, batches(size)) for size in batch_sizes]
    measured += [
        CpuCase("ours_per_batch", name, size, batches(size))
        for name in BY_NAME
        if name != "month"
        for size in board_batch_sizes
    ]
    measured += [CpuCase("guide", "month", size, batches(size)) for size in guide_batch_sizes]
    return measured


@dataclass
class Meter:
    """What moto's backend spent answering (thread CPU seconds), and every call it answered, by operation."""

    backend_seconds: float = 0.0
    calls: Counter[str] = field(default_factory=Counter)

    def take(self) -> tuple[float, Counter[str]]:
        taken = (self.backend_seconds, self.calls)
        self.backend_seconds, self.calls = 0.0, Counter()
        return taken


def operation_of(request: Any) -> str:
    """`UpdateItem:<table>` for writes (aggregates or progress), else the operation: from X-Amz-Target and the body."""
    target = request.headers.get("X-Amz-Target", b"")
    operation = (target.decode() if isinstance(target, bytes) else str(target)).rsplit(".", 1)[-1]
    if operation in ("UpdateItem", "TransactWriteItems", "GetItem"):
        body = request.body.decode() if isinstance(request.body, bytes) else (request.body or "")
        table = json.loads(body).get("TableName", "") if body.startswith("{") else ""
        if operation == "TransactWriteItems":
            return "TransactWriteItems"
        return f"{operation}:{'aggregates' if table == TABLE else 'progress'}"
    return operation or "unknown"


@contextlib.contextmanager
def metered(meter: Meter) -> Iterator[None]:
    """Time moto's backend on the calling thread (BotocoreStubber.process_request) and count the calls."""
    from moto.core.botocore_stubber import BotocoreStubber

    original = BotocoreStubber.process_request

    def process_request(self: Any, request: Any) -> Any:
        started = time.thread_time()
        try:
            return original(self, request)
        finally:
            meter.backend_seconds += time.thread_time() - started
            meter.calls[operation_of(request)] += 1

    BotocoreStubber.process_request = process_request  # type: ignore[method-assign]
    try:
        yield
    finally:
        BotocoreStubber.process_request = original  # type: ignore[method-assign]


@contextlib.contextmanager
def streams_as_aws() -> Iterator[None]:
    """moto records an UpdateItem that creates an item as two INSERTs, the first of its key alone (it puts the key,
    then updates it); DynamoDB records one. The first is dropped, or the aggregator would read it and reject it."""
    from moto.dynamodb.models.table import StreamShard

    original = StreamShard.add

    def add(self: Any, old: Any, new: Any) -> None:
        if old is None and new is not None and set(new.attrs) <= set(self.table.attribute_keys):
            return
        original(self, old, new)

    StreamShard.add = add  # type: ignore[method-assign]
    try:
        yield
    finally:
        StreamShard.add = original  # type: ignore[method-assign]


@contextlib.contextmanager
def function_environment(case: CpuCase) -> Iterator[dict[str, str]]:
    """What the module gives the aggregator, and moto's credentials; the caller's environment restored after."""
    configuration = BY_NAME[case.configuration]
    saved = dict(os.environ)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "TABLE_NAME": TABLE,
            "TABLE_ARN": TABLE_ARN,
            "PROGRESS_TABLE_NAME": PROGRESS_TABLE,
            "LEADERBOARD_PERIODS": ",".join(configuration.periods),
            "CATEGORY_ATTRIBUTE": CATEGORY_ATTRIBUTE if configuration.category else "",
            "WRITE_CONCURRENCY": str(WRITE_CONCURRENCY),
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(AGGREGATOR_MEMORY_MB),
            "POWERTOOLS_SERVICE_NAME": "cpu-aggregator",
            "POWERTOOLS_METRICS_NAMESPACE": "MaterializedAggregation",
        }
    )
    try:
        yield dict(os.environ)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def load_module(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def create_tables(dynamodb: Any) -> str:
    """The module's table (stream of new images, the sparse index) and progress table in moto; the stream's ARN."""
    dynamodb.create_table(
        TableName=TABLE,
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
                "IndexName": "MonthDownloadsIndex",
                "KeySchema": [
                    {"AttributeName": "Month", "KeyType": "HASH"},
                    {"AttributeName": "LeaderboardOrder", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["DownloadCount"]},
            }
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    )
    dynamodb.create_table(
        TableName=PROGRESS_TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "ShardKey", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "ShardKey", "KeyType": "HASH"}],
    )
    return dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]


def is_new_download(record: dict[str, Any]) -> bool:
    """The mapping's filter where aggregates share the table: INSERTs without the period attribute."""
    return record["eventName"] == "INSERT" and "Month" not in record["dynamodb"].get("NewImage", {})


class StreamTail:
    """The downloads the stream holds beyond what was delivered before, shaped as Lambda delivers them."""

    def __init__(self, streams: Any, stream_arn: str) -> None:
        self.streams, self.stream_arn = streams, stream_arn
        self.shard_id = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
        self.iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=self.shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]

    def downloads(self, passes: Callable[[dict[str, Any]], bool] | None = None) -> list[dict[str, Any]]:
        """The new records that pass the mapping's filter: `passes`, by default new downloads only."""
        records: list[dict[str, Any]] = []
        while True:
            page = self.streams.get_records(ShardIterator=self.iterator, Limit=1000)
            self.iterator = page["NextShardIterator"]
            records += page["Records"]
            if not page["Records"]:
                break
        delivered = []
        for record in records:
            if not (passes or is_new_download)(record):
                continue
            record["eventSourceARN"] = self.stream_arn
            created = record["dynamodb"].get("ApproximateCreationDateTime")
            if isinstance(created, datetime):
                record["dynamodb"]["ApproximateCreationDateTime"] = created.timestamp()
            delivered.append(record)
        return delivered

    def event(
        self,
        records: list[dict[str, Any]],
        state: dict[str, Any],
        window: tuple[str, str] = ("2024-03-14T12:00:00Z", "2024-03-14T12:01:00Z"),
        final: bool = False,
    ) -> dict[str, Any]:
        return {
            "Records": records,
            "window": {"start": window[0], "end": window[1]},
            "state": state,
            "shardId": self.shard_id,
            "eventSourceARN": self.stream_arn,
            "isFinalInvokeForWindow": final,
            "isWindowTerminatedEarly": False,
        }


class LambdaContext:
    """What the handler asks of its context: a request id, a name and the time left (a minute, always)."""

    aws_request_id = "cpu-measurement"
    function_name = "cpu-aggregator"
    memory_limit_in_mb = 512
    invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:cpu-aggregator"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 60_000


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """The handler's log lines and metrics go to /dev/null (written all the same: their cost is counted)."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 1)
        try:
            yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)


def measure_case(case: CpuCase) -> dict[str, Any]:
    """Warm up, then time `case.batches` invocations of `case.batch_size` downloads each (a minute of time each)."""
    import boto3
    from moto import mock_aws

    with function_environment(case) as environment, mock_aws(), streams_as_aws(), quiet_stdout():
        sys.path.insert(0, str(AGGREGATOR_SOURCE))
        try:
            dynamodb = boto3.client("dynamodb", region_name=REGION)
            streams = boto3.client("dynamodbstreams", region_name=REGION)
            stream_arn = create_tables(dynamodb)
            invoke = ours(environment) if case.aggregator != "guide" else guide()
            tail = StreamTail(streams, stream_arn)
            meter = Meter()
            samples: list[dict[str, Any]] = []
            state: dict[str, Any] = {}
            start = datetime(2024, 3, 14, 12, tzinfo=UTC)
            for number in range(case.batches + 1):
                size = case.batch_size if number else min(case.batch_size, WARM_UP)
                items = realtime_downloads(size, start + timedelta(minutes=number), 60.0, seed=900 + number)
                for first in range(0, len(items), 25):
                    chunk = items[first : first + 25]
                    dynamodb.batch_write_item(RequestItems={TABLE: [{"PutRequest": {"Item": i}} for i in chunk]})
                records = tail.downloads()
                meter.take()
                with metered(meter):
                    started = time.thread_time()
                    state = invoke(tail.event(records, state))
                    elapsed = time.thread_time() - started
                backend, calls = meter.take()
                if number:  # the first invocation warms the function up
                    samples.append({"records": len(records), "seconds": elapsed - backend, "calls": calls})
        finally:
            sys.path.remove(str(AGGREGATOR_SOURCE))
    return summarise(case, samples)


def ours(environment: dict[str, str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The shipped handler's own steps, on clients configured as its own, the writes one after another."""
    import boto3

    import two_readers
    from aggregate_store import AggregateStore
    from aggregator_settings import Settings
    from dependencies import Dependencies
    from shard_progress import ProgressStore

    aggregator = sys.modules.get("aggregator") or load_module("aggregator", AGGREGATOR_SOURCE / "aggregator.py")
    # Each case's periods and category, and the read budget of the function's memory; not its memory ceiling, which
    # would measure moto's tables too (they share this process).
    settings = replace(Settings.from_environment(environment), memory_ceiling_bytes=None)
    dynamodb = boto3.client("dynamodb", region_name=REGION, config=aggregator._SDK_CONFIG)
    streams = boto3.client("dynamodbstreams", region_name=REGION, config=aggregator._SDK_CONFIG)
    progress = ProgressStore(dynamodb, settings.progress_table_name)
    dependencies = Dependencies(
        store=AggregateStore(dynamodb, settings.aggregates_table_name, settings.schema, progress),
        progress=progress,
        streams=streams,
        executor=InlineExecutor(),
        send_failures=lambda messages: True,
    )

    return invoker(two_readers, settings, dependencies)


def invoker(two_readers: Any, settings: Any, dependencies: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """One invocation of the shipped handler's steps, as lambda_handler runs them: parse, process, publish, flush."""
    from batch_report import publish
    from delivery import parse_delivery
    from invocation_context import InvocationContext
    from telemetry import metrics

    invocation = InvocationContext(settings, dependencies, LambdaContext.get_remaining_time_in_millis)

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        delivery = parse_delivery(event, settings.table_arn)
        response, report = two_readers.process_delivery(delivery, invocation)
        publish(report, started, succeeded=True)
        metrics.flush_metrics()
        return dict(response["state"])

    return invoke


def guide() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The guide's handler (leaderboard_dev/baselines), as the benchmark deploys it."""
    handler = load_module("guide_aggregator_cpu", BASELINES / "guide_aggregator.py")

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        return dict(handler.lambda_handler(event, LambdaContext())["state"])

    return invoke


def summarise(case: CpuCase, samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Per download and per invocation: CPU, the calls, the aggregate writes and the calls that wait in line."""
    downloads = sum(sample["records"] for sample in samples)
    seconds = sum(sample["seconds"] for sample in samples)
    calls: Counter[str] = Counter()
    for sample in samples:
        calls.update(sample["calls"])
    invocations = len(samples)
    writes = calls["UpdateItem:aggregates"] + calls["TransactWriteItems"] if case.aggregator != "guide" else 0
    sequential = sum(calls.values()) - writes
    return {
        **asdict(case),
        "downloads": downloads,
        "invocations": invocations,
        "cpu_ms_per_download": round(1000 * seconds / downloads, 4),
        "cpu_ms_per_invocation": round(1000 * seconds / invocations, 2),
        "cpu_ms_per_download_spread": [
            round(1000 * min(s["seconds"] / s["records"] for s in samples), 4),
            round(1000 * statistics.median(s["seconds"] / s["records"] for s in samples), 4),
            round(1000 * max(s["seconds"] / s["records"] for s in samples), 4),
        ],
        "calls_per_invocation": {
            operation: round(count / invocations, 2) for operation, count in sorted(calls.items())
        },
        "aggregate_writes_per_invocation": round(writes / invocations, 2),
        "sequential_calls_per_invocation": round(sequential / invocations, 2),
    }


def run_handler_cpu(measured: list[CpuCase]) -> dict[str, Any]:
    """Every case, one after another, in this process; with the latency the cost table adds per call."""
    return {
        "method": "moto in process, its backend's time taken out; thread CPU time (time.thread_time)",
        "latency": LATENCY,
        "write_concurrency": WRITE_CONCURRENCY,
        "cases": [_measured(case) for case in measured],
    }


def _measured(case: CpuCase) -> dict[str, Any]:
    started = time.monotonic()
    result = measure_case(case)
    say(
        f"handler CPU, {case.aggregator} {case.configuration} at batch size {case.batch_size}: "
        f"{result['cpu_ms_per_download']} ms per download ({time.monotonic() - started:.0f} s)"
    )
    return result
