"""The aggregator's dependencies from its settings and clients: one wiring for the function and for its tests."""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Any

from aggregate_store import AggregateStore
from aggregator_settings import Settings
from delivery_notes import DeliveryNotes
from dependencies import Dependencies
from failure_messages import send_to_failure_queue
from ledger import StreamLedger
from replica_guard import ReplicaGuard
from shard_progress import ProgressStore
from stream_claims import StreamClaims
from stream_shards import StreamShards
from versioned_ledger import VersionedLedger


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
    if settings.schema.retractions:
        dependencies.replica_guard = ReplicaGuard(dynamodb, settings.table_arn, settings.progress_table_name)
    if settings.stream_readers == 1 and settings.claims_table_name:
        one_reader_parts(dependencies, settings, dynamodb)
    elif settings.ledger and settings.claims_table_name:
        dependencies.ledger = StreamLedger(dynamodb, settings.claims_table_name, executor, progress)
    elif settings.claims_table_name:
        dependencies.claims = StreamClaims(dynamodb, settings.claims_table_name, executor)
    return dependencies


def one_reader_parts(dependencies: Dependencies, settings: Settings, dynamodb: Any) -> None:
    """One reader per shard: the versioned ledger and the delivery notes, sharing what DescribeStream said."""
    shards = StreamShards(dynamodb, settings.progress_table_name, dependencies.streams)
    dependencies.versioned_ledger = VersionedLedger(
        dynamodb,
        str(settings.claims_table_name),
        settings.aggregates_table_name,
        settings.schema,
        settings.leaderboard_shards,
        shards,
    )
    dependencies.delivery_notes = DeliveryNotes(dynamodb, settings.progress_table_name, shards, dependencies.clock)
