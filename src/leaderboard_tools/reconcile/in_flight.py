"""In flight: the downloads the stream still holds above the aggregator's checkpoints."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from leaderboard_tools.deployment import Deployment
from leaderboard_tools.reconcile.progress import READING_STREAM
from leaderboard_tools.reconcile.recount import boards_of_download
from leaderboard_tools.reconcile.report import AggregateId, StreamCheck
from leaderboard_tools.stream_reading import (
    ShardReader,
    ShardReadOutcome,
    created_of,
    is_open,
    shard_progress,
    starting_sequence,
    stream_shards,
)


class InFlightCheck:
    """The Reconciler's reading of the stream."""

    def _in_flight_reported(
        self, boards: set[str] | None, recount_end: int
    ) -> tuple[set[AggregateId] | None, StreamCheck]:
        """`_in_flight`, reported as the phase READING_STREAM, its count the shards read."""
        self._stream_phase = READING_STREAM
        try:
            return self._in_flight(boards, recount_end)
        finally:
            self._stream_phase = None

    def _in_flight(
        self, boards: set[str] | None, recount_end: int, budget: float | None = None
    ) -> tuple[set[AggregateId] | None, StreamCheck]:
        """Aggregates of `boards` (None: any) with a download in the stream above its shard's checkpoint, created by
        `recount_end`; None: unknown."""
        deployment = self._deployment
        assert deployment.stream_arn is not None
        assert deployment.progress_table is not None
        check = StreamCheck()
        found: set[AggregateId] = set()
        lock = threading.Lock()
        shards = stream_shards(self._streams, deployment.stream_arn)
        check.shards = len(shards)
        phase = getattr(self, "_stream_phase", None)
        if phase is not None:
            self._phase(phase, len(shards), unit="shards")

        def on_record(record: dict[str, Any]) -> None:
            aggregates = [
                aggregate
                for aggregate in download_aggregates(record, deployment)
                if boards is None or aggregate[1] in boards
            ]
            if aggregates:
                with lock:
                    found.update(aggregates)
                    check.in_flight += 1

        def read(shard: dict[str, Any]) -> ShardReadOutcome | None:
            progress = shard_progress(
                self._dynamodb, deployment.progress_table or "", deployment.stream_arn or "", shard["ShardId"]
            )
            if progress.ended:
                return None
            reader = ShardReader(
                self._streams,
                deployment.stream_arn or "",
                budget_seconds=self._stream_budget if budget is None else min(budget, self._stream_budget),
                empty_pages_at_tip=self._empty_pages_at_tip,
                empty_page_pause=self._empty_page_pause,
                sleep=self._sleep,
            )
            at, after = progress.start
            return reader.read(
                shard["ShardId"],
                on_record,
                at=at,
                after=after,
                past_bound=lambda record: (created_of(record) or 0) > recount_end,
                open_shard=is_open(shard),
                shard_start=starting_sequence(shard),
            )

        def read_counted(shard: dict[str, Any]) -> ShardReadOutcome | None:
            try:
                return read(shard)
            finally:
                if phase is not None:
                    self._on_progress(1)

        with ThreadPoolExecutor(max_workers=max(1, min(4, len(shards)))) as pool:
            outcomes = list(pool.map(read_counted, shards))
        for outcome in outcomes:
            if outcome is None:
                check.skipped_ended += 1
                continue
            check.records += outcome.records
            if outcome.trimmed:
                check.trimmed.append(outcome.shard_id)
            if not outcome.complete:
                check.incomplete.append(outcome.shard_id)
        return (None if check.incomplete else found), check


def download_aggregates(record: Any, deployment: Deployment) -> list[AggregateId]:
    """The aggregates a stream record counts in, as the aggregator parses it: none for anything but a download."""
    if not isinstance(record, dict) or record.get("eventName") != "INSERT":
        return []
    image = (record.get("dynamodb") or {}).get("NewImage") or {}
    if not isinstance(image, dict) or (deployment.aggregates_beside and deployment.names.period in image):
        return []
    if deployment.marker is not None and not deployment.marker.marks(image):
        return []
    return [(image[deployment.names.entity]["S"], board) for board in boards_of_download(image, deployment)]
