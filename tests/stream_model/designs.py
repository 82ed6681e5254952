"""The aggregator designs the stream model runs: the guide's handler, the previous design, and the shipped one.

Each takes the events the model's mapping delivers and writes into the model's FakeDynamoDB.
The guide's and the previous design's code live here, in the tests, only to show what the
model's hazards do to them; the shipped design is called through the Lambda's own functions.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from aggregate_store import AggregateStore, WatermarkRetention
from aggregator import PER_BATCH, AggregatesNotWritten, BatchReport, Settings, process_delivery
from delivery import parse_delivery
from download_records import AggregateKey, Download, Schema, coalesce, parse_record

TABLE = "model-downloads"
TABLE_ARN = f"arn:aws:dynamodb:us-east-1:000000000000:table/{TABLE}"
SCHEMA = Schema()


class InlineExecutor(Executor):
    """Runs each write at submission, one after another: the model's histories replay exactly from their seed."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:
            future.set_exception(error)
        return future


class Design:
    name: str
    uses_windows: bool
    reports_batch_item_failures: bool

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        raise NotImplementedError


@dataclass
class GuideDesign(Design):
    """The guide's handler: one ADD per INSERT, month = the first seven characters of the timestamp."""

    client: Any
    name: str = "guide"
    uses_windows: bool = False
    reports_batch_item_failures: bool = False

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        for record in event["Records"]:
            if record["eventName"] != "INSERT":
                continue
            image = record["dynamodb"]["NewImage"]
            month = image["Timestamp"]["S"][:7]
            self.client.update_item(
                TableName=TABLE,
                Key={"songID": {"S": image["songID"]["S"]}, "SK": {"S": month}},
                UpdateExpression="ADD DownloadCount :one SET #month = :month",
                ExpressionAttributeNames={"#month": "Month"},
                ExpressionAttributeValues={":one": {"N": "1"}, ":month": {"S": month}},
            )
        return None


@dataclass
class PreviousDesign(Design):
    """Version 0.1's aggregator: one watermark per aggregate for the whole stream, partial batch responses.

    It assumed that every download of a song arrives in one ordered sequence; the model shows
    where AWS's documentation does not promise that.
    """

    client: Any
    name: str = "single watermark (0.1)"
    uses_windows: bool = False
    reports_batch_item_failures: bool = True

    def _apply(self, key: AggregateKey, sequences: list[str]) -> None:
        item_key = {"songID": {"S": key.entity_id}, "SK": {"S": key.period}}
        known: str | None = None
        watermark_known = False
        for _ in range(8):
            values: dict[str, Any] = {":period": {"S": key.period}, ":highest": {"S": sequences[-1]}}
            if not watermark_known:
                addition = len(sequences)
                condition = "attribute_not_exists(#wm) OR #wm < :lowest"
                values[":lowest"] = {"S": sequences[0]}
            else:
                addition = len(sequences) - (bisect.bisect_right(sequences, known) if known else 0)
                if addition == 0:
                    return
                condition = "attribute_not_exists(#wm)" if known is None else "#wm = :expected"
                if known is not None:
                    values[":expected"] = {"S": known}
            values[":addition"] = {"N": str(addition)}
            try:
                self.client.update_item(
                    TableName=TABLE,
                    Key=item_key,
                    UpdateExpression="ADD #count :addition SET #period = :period, #wm = :highest",
                    ConditionExpression=condition,
                    ExpressionAttributeNames={"#count": "DownloadCount", "#period": "Month", "#wm": "AppliedSequence"},
                    ExpressionAttributeValues=values,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return
            except ClientError as error:
                if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                item = error.response.get("Item") or {}
                known = item["AppliedSequence"]["S"] if "AppliedSequence" in item else None
                watermark_known = True
        raise RuntimeError("watermark contention")

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        downloads = [
            parsed for parsed in (parse_record(r, SCHEMA) for r in event["Records"]) if isinstance(parsed, Download)
        ]
        groups = coalesce(downloads)
        failures = []
        for key in sorted(groups, key=lambda key: groups[key][0].sequence):
            if remaining_ms() < 1000:
                failures.append(groups[key][0].raw_sequence)
                continue
            try:
                self._apply(key, [download.sequence for download in groups[key]])
            except ClientError:
                failures.append(groups[key][0].raw_sequence)
        return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failures]}


@dataclass
class ShardWatermarkDesign(Design):
    """The shipped aggregator: tumbling-window events, one watermark per stream shard in each aggregate."""

    client: Any
    aggregate_writes: str = PER_BATCH
    window_seconds: int = 60
    maximum_record_age_seconds: int = 3600
    clock: Callable[[], float] = field(default=lambda: 1_600_000_000.0)
    leaderboard_shards: int = 1
    name: str = "shard watermarks"
    uses_windows: bool = True
    reports_batch_item_failures: bool = False

    def __post_init__(self) -> None:
        retention = WatermarkRetention(self.maximum_record_age_seconds, self.window_seconds)
        self.settings = Settings(
            table_name=TABLE,
            table_arn=TABLE_ARN,
            schema=SCHEMA,
            leaderboard_shards=self.leaderboard_shards,
            failure_queue_url=None,
            aggregate_writes=self.aggregate_writes,
            retention=retention,
            write_concurrency=1,
            deadline_margin_ms=1000,
        )
        self.store = AggregateStore(
            self.client, TABLE, SCHEMA, retention, clock=self.clock, leaderboard_shards=self.leaderboard_shards
        )
        self.executor = InlineExecutor()
        self.refused: list[Any] = []
        self.inconsistencies: list[Any] = []
        self.name = f"shard watermarks, {self.aggregate_writes}"

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        try:
            response, report = process_delivery(
                parse_delivery(event, TABLE_ARN),
                self.store,
                self.settings,
                remaining_ms,
                self.executor,
                clock=self.clock,
            )
        except AggregatesNotWritten as failure:
            self._record(failure.report)
            raise
        self._record(report)
        return response

    def _record(self, report: BatchReport) -> None:
        self.refused.extend(report.refused)
        self.inconsistencies.extend(report.inconsistent_keys)
