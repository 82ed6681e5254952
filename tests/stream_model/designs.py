"""The shipped aggregator as the stream model runs it: the one adapter to `lambda_src/aggregator`.

Everything the model knows of the shipped code is in this file, so that a change of the
aggregator's signatures stays here. The naive designs the model must break are in
`naive_designs.py`; the design file's rules in the model's own words in `reference_design.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import lineage_sweep
import two_readers
from aggregate_store import AggregateStore
from aggregator_settings import PER_BATCH, Settings
from delivery import parse_delivery
from dependencies import Dependencies
from download_records import Schema
from failure_messages import send_to_failure_queue
from invocation_context import InvocationContext
from leaderboard_core.buckets import Calendar
from leaderboard_core.index_layout import leaderboard_partition, order_of
from leaderboard_core.periods import Season
from leaderboard_core.source_items import DownloadMarker
from leaderboard_dev.backlog_stream import InlineExecutor
from ledger import StreamLedger
from shard_progress import ProgressStore
from tests.stream_model.aws_delivery import MARKER
from tests.stream_model.environment import FAILURE_QUEUE_URL, PROGRESS_TABLE, TABLE, TABLE_ARN, Design, Environment
from tests.stream_model.histories import BOARDS, LOCAL_TIME
from tests.stream_model.ledger_backfill import LEDGER_TABLE, backfill_item

SCHEMA = Schema()


class ShardWatermarkDesign(Design):
    """The shipped aggregator, built with the model's fakes, and the operator's recover of the design file."""

    uses_windows = True
    reports_rejected = True
    sweeps_on_schedule = True
    keeps_index = True

    def __init__(
        self, env: Environment, aggregate_writes: str = PER_BATCH, leaderboard_shards: int = 1, schema: Schema = SCHEMA
    ) -> None:
        self.env = env
        self.schema = schema
        self.settings = Settings(
            aggregates_table_name=TABLE,
            table_arn=TABLE_ARN,
            progress_table_name=PROGRESS_TABLE,
            schema=schema,
            leaderboard_shards=leaderboard_shards,
            failure_queue_url=FAILURE_QUEUE_URL,
            aggregate_writes=aggregate_writes,
            write_concurrency=1,
            deadline_margin_ms=1000,
        )
        self.leaderboard_shards = leaderboard_shards
        self.name = f"shipped, {aggregate_writes}" + ("" if schema == SCHEMA else f", {schema.periods}")
        self.name += ", retractions" if schema.retractions else ""
        self.restart()

    def restart(self) -> None:
        """A new function instance (after a kill or a cold start): nothing cached survives."""
        progress = ProgressStore(self.env.dynamodb, PROGRESS_TABLE, clock=self.env.clock)
        self.dependencies = Dependencies(
            store=AggregateStore(
                self.env.dynamodb,
                TABLE,
                self.schema,
                progress,
                clock=self.env.clock,
                leaderboard_shards=self.leaderboard_shards,
            ),
            progress=progress,
            streams=self.env.streams,
            executor=InlineExecutor(),
            send_failures=lambda messages: send_to_failure_queue(self.env.queue, FAILURE_QUEUE_URL, messages),
            clock=self.env.clock,
            sleep=self.env.sleep,
        )

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        invocation = InvocationContext(self.settings, self.dependencies, remaining_ms)
        if lineage_sweep.is_lineage_sweep_event(event):
            response, _report = lineage_sweep.sweep_lineages_on_schedule(event, invocation)
            return response
        response, _report = two_readers.process_delivery(parse_delivery(event, TABLE_ARN), invocation)
        return response

    def recover(self, message: dict[str, Any], invoke: Callable[[dict[str, Any]], Any], recount: Any) -> None:
        """The design file's recover: invoke through the range's end until reached; a recount for trimmed records."""
        info = message.get("DDBStreamBatchInfo")
        if info is not None:
            for _ in range(5):
                event = {
                    "shardId": info["shardId"],
                    "eventSourceARN": info["streamArn"],
                    "Records": [],
                    "throughSequenceNumber": info["endSequenceNumber"],
                }
                succeeded, response = invoke(event)
                if succeeded and isinstance(response, dict) and response.get("reachedBound"):
                    return
        elif message.get("kind") == "records_trimmed":
            recount(None)

    def recount(self, env: Environment, counts: dict[tuple[str, str], int]) -> None:
        """The operator's recount as reconcile writes it: each aggregate set to its count with its order in the
        index, or out of the index at 0."""
        summed = self.schema.amount is not None
        for (entity, board), count in counts.items():
            names = {"#count": self.schema.count, "#period": self.schema.period, "#order": self.schema.order}
            values: dict[str, Any] = {":count": {"N": str(count)}}
            if count:
                update = "SET #count = :count, #period = :period, #order = :order"
                values[":period"] = {"S": leaderboard_partition(board, entity, self.leaderboard_shards)}
                values[":order"] = {"N": str(order_of(count, entity, summed))}
            else:
                update = "SET #count = :count REMOVE #period, #order"
            env.dynamodb.update_item(
                TableName=TABLE,
                Key={self.schema.entity: {"S": entity}, self.schema.sort_key: {"S": board}},
                UpdateExpression=update,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )


def schema_of(config: Any, retractions: bool | None = None) -> Schema:
    """The aggregator's schema for a history: its boards, marker and retractions (the history's unless given)."""
    periods, category, summed = BOARDS[config.boards]
    schema = Schema(periods=periods, category=category, amount=summed) if periods else SCHEMA
    if config.boards in LOCAL_TIME:
        zone, first_day, days = LOCAL_TIME[config.boards]
        schema = replace(schema, calendar=Calendar(zone, Season(first_day, days)))
    return replace(
        schema,
        retractions=config.retractions if retractions is None else retractions,
        marker=DownloadMarker(*MARKER) if config.marker else None,
    )


def on_new_york_standard_time_all_year(env: Environment, config: Any) -> Design:
    """A naive calendar: the shipped aggregator with New York's boards on a fixed UTC-5 (`Etc/GMT+5`), as if the
    zone's offset were a constant. Histories on New York's clock must break it."""
    schema = schema_of(config)
    if config.boards in LOCAL_TIME:
        schema = replace(schema, calendar=Calendar("Etc/GMT+5", schema.calendar.season))
    return ShardWatermarkDesign(env, aggregate_writes=config.aggregate_writes, schema=schema)


def shipped(env: Environment, config: Any) -> Design:
    """The model's factory: the shipped aggregator in the history's write mode, window, boards and retractions."""
    return ShardWatermarkDesign(env, aggregate_writes=config.aggregate_writes, schema=schema_of(config))


class ShippedLedgerDesign(ShardWatermarkDesign):
    """The shipped aggregator in ledger mode (LEDGER, the claims table kept as the ledger), with the model's backfill
    (ledger_backfill.py: the lead's transaction, built with the shipped claim request)."""

    takes_config = True
    first_record_moves_from_base = True

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, aggregate_writes=config.aggregate_writes, schema=schema_of(config, retractions=True))
        self.settings = replace(self.settings, claims_table_name=LEDGER_TABLE, ledger=True)
        self.name = f"shipped ledger, {config.aggregate_writes}"

    def restart(self) -> None:
        super().restart()
        self.dependencies.ledger = StreamLedger(
            self.env.dynamodb, LEDGER_TABLE, self.dependencies.executor, self.dependencies.progress
        )

    def backfill(self, image: dict[str, Any]) -> None:
        backfill_item(self.env.dynamodb, self.schema, image, self.leaderboard_shards)

    def recover(self, message: dict[str, Any], invoke: Callable[[dict[str, Any]], Any], recount: Any) -> None:
        """As the shipped design's, and a record the ledger could not place ("recount it") recounts its aggregate."""
        if message.get("kind") == "refused_record" and message.get("entityId") and message.get("board"):
            recount({(message["entityId"], message["board"])})
            return
        super().recover(message, invoke, recount)


def shipped_ledger(env: Environment, config: Any) -> Design:
    """The model's factory for ledger histories on the shipped aggregator."""
    return ShippedLedgerDesign(env, config)
