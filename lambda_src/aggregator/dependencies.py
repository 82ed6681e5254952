"""The clients, clock and per-instance memory every step of the aggregator is handed."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from aggregate_store import AggregateStore
from delivery_notes import DeliveryNotes
from described_shard import ShardFacts
from ledger import StreamLedger
from replica_guard import ReplicaGuard
from shard_progress import ProgressStore
from stream_claims import StreamClaims
from versioned_ledger import VersionedLedger


@dataclass
class Dependencies:
    """What the aggregator talks to: clients and the clock, so a test or the stream model can supply its own."""

    store: AggregateStore
    progress: ProgressStore
    streams: Any
    executor: Executor
    send_failures: Callable[[list[dict[str, Any]]], bool]
    """Puts messages into the failure queue; False if they did not all get there."""
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    shards: dict[str, ShardFacts] = field(default_factory=dict)
    """Shard id -> what DescribeStream said of it (per instance: shards never change parents or first records)."""
    unlisted_at: dict[str, float] = field(default_factory=dict)
    """Shard id -> when DescribeStream last did not list it (per instance): not searched for again soon."""
    lineages_swept_at: float | None = None
    claims: StreamClaims | None = None
    """While a backfill may count the table's history (CLAIMS_TABLE_NAME): each download is claimed before it counts."""
    ledger: StreamLedger | None = None
    """Ledger mode (LEDGER): each download key's ledger item places every record of it (and holds what it counted)."""
    versioned_ledger: VersionedLedger | None = None
    """One reader per shard (STREAM_READERS=1): each download key's versioned ledger item says what a record moves."""
    delivery_notes: DeliveryNotes | None = None
    """One reader per shard: what each shard's deliveries left, to report records the mapping may have skipped."""
    replica_guard: ReplicaGuard | None = None
    """With retractions (or ledger) on: refuses every invocation that may apply a record once the stream's table is
    found replicated (replica_guard.py)."""
