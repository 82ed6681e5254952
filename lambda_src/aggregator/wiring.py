"""The aggregator's dependencies from its settings and clients: one wiring for the function and for its tests."""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Any

from aggregate_store import AggregateStore
from aggregator_settings import Settings
from dependencies import Dependencies
from failure_messages import send_to_failure_queue
from ledger import StreamLedger
from shard_progress import ProgressStore
from stream_claims import StreamClaims


def dependencies_for(settings: Settings, dynamodb: Any, streams: Any, sqs: Any, executor: Executor) -> Dependencies:
    progress = ProgressStore(dynamodb, settings.progress_table_name, ledger=settings.ledger)
    dependencies = Dependencies(
        store=AggregateStore(
            dynamodb,
            settings.aggregates_table_name,
            settings.schema,
            progress,
            leaderboard_shards=settings.leaderboard_shards,
        ),
        progress=progress,
        streams=streams,
        executor=executor,
        send_failures=lambda messages: send_to_failure_queue(sqs, settings.failure_queue_url, messages),
    )
    if settings.ledger and settings.claims_table_name:
        dependencies.ledger = StreamLedger(dynamodb, settings.claims_table_name, executor, progress)
    elif settings.claims_table_name:
        dependencies.claims = StreamClaims(dynamodb, settings.claims_table_name, executor)
    return dependencies
