"""In flight: the downloads the stream still holds above the aggregator's checkpoints."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from leaderboard_core.attributes import carries_aggregate_attributes
from leaderboard_core.source_items import expired_by_ttl
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.reconcile.phases import READING_STREAM
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
            progress_item = shard_progress(
                self._dynamodb, deployment.progress_table or "", deployment.stream_arn or "", shard["ShardId"]
            )
            if progress_item.ended:
                return None
            reader = ShardReader(
                self._streams,
                deployment.stream_arn or "",
                budget_seconds=self._stream_budget if budget is None else min(budget, self._stream_budget),
                empty_pages_at_tip=self._empty_pages_at_tip,
                empty_page_pause=self._empty_page_pause,
                sleep=self._sleep,
            )
            at, after = progress_item.start
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
                    self._on_phase(1)

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
    """The aggregates a stream record moves a count in, as the aggregator parses it: an INSERT's; with retractions,
    a MODIFY's or REMOVE's whose old and new images count differently (not an expiry by TTL, nor an aggregate's
    write); none for anything else."""
    if not isinstance(record, dict):
        return []
    stream = record.get("dynamodb") or {}
    if not isinstance(stream, dict):
        return []
    event = record.get("eventName")
    if event == "INSERT":
        image = stream.get("NewImage")
        return [] if _is_aggregate(image, deployment) else list(_image_parts(image, deployment))
    if not deployment.retractions or event not in ("MODIFY", "REMOVE") or expired_by_ttl(record):
        return []
    images = [stream.get("OldImage"), stream.get("NewImage") if event == "MODIFY" else {}]
    # Without both images the aggregator rejects the record (reported, nothing moved).
    if not all(isinstance(image, dict) for image in images) or any(_is_aggregate(i, deployment) for i in images):
        return []
    old, new = (_image_parts(image, deployment) for image in images)
    return sorted(aggregate for aggregate in old.keys() | new.keys() if old.get(aggregate) != new.get(aggregate))


def _is_aggregate(image: Any, deployment: Deployment) -> bool:
    """An aggregate's image where aggregates share the table (attributes.carries_aggregate_attributes)."""
    return (
        isinstance(image, dict)
        and deployment.aggregates_beside
        and carries_aggregate_attributes(image, deployment.names, deployment.retractions)
    )


def _image_parts(image: Any, deployment: Deployment) -> dict[AggregateId, Any]:
    """The aggregates one image of a download counts in, each with what it adds there (its sum's value, or 1)."""
    if not isinstance(image, dict):
        return {}
    if deployment.marker is not None and not deployment.marker.marks(image):
        return {}
    amount = image.get(deployment.sum_attribute) if deployment.sum_attribute else 1
    return {(image[deployment.names.entity]["S"], board): amount for board in boards_of_download(image, deployment)}
