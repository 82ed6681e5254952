"""The invocation context: what every step that reads a shard is handed, one object per invocation.

A delivery with two readers per shard (two_readers.py), the lineage sweep (lineage_sweep.py), a shard's ancestors
(shard_lineage.py) and each step of catch-up (catch_up.py) all read with the deployment's settings, its clients and
the time the invocation has left; a shard's ancestors are read within a share of that time (`within`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from aggregator_settings import Settings
from dependencies import Dependencies


@dataclass(frozen=True)
class InvocationContext:
    """One invocation's settings, clients and clock."""

    settings: Settings
    deps: Dependencies
    remaining_ms: Callable[[], int]
    """The milliseconds left before Lambda's deadline (the context's get_remaining_time_in_millis)."""

    def within(self, remaining_ms: Callable[[], int]) -> InvocationContext:
        """The same invocation, given less time: a share of what is left."""
        return replace(self, remaining_ms=remaining_ms)
