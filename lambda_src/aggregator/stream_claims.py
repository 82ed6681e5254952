"""The aggregator's side of the claims (leaderboard_core.claims): while a backfill may count a table's history, every
download it reads is claimed before it is counted, and a download the backfill claimed first is left to it.

A claim names the first stream record it was made for (its eventID, as FirstWrite). An INSERT whose claim names another
record is the same key written again after a deletion: a claim says who counted the key, not which of its writes, so
that write is counted nowhere and reported (`refused_record`: recover recounts its board); ledger mode counts it where
its last image says."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from batch_report import BatchReport
from delivery import Refused, ShardRef
from download_records import Download
from leaderboard_core.claims import BACKFILL, STREAM, claim_key, first_record_of, owner_of, stream_claim

WRITTEN_AGAIN = (
    "download key written again while backfill_claims is on (deleted and put back): its claim belongs to an earlier "
    "write of the key (stream record {first}), and a claim says who counted the key, not which of its writes, so "
    "this write is counted nowhere; recover recounts its board. Ledger mode (ledger = true) counts such keys where "
    "their last image says"
)


@dataclass
class ClaimOutcome:
    ours: list[Download] = field(default_factory=list)
    """Claimed by the stream, now or by an earlier read of the same record: the aggregator counts these."""
    backfilled: list[Download] = field(default_factory=list)
    """Claimed by the backfill first: it counted them, the aggregator must not."""
    unclaimed: list[Download] = field(default_factory=list)
    """The claim failed (throttled, an error, an owner nobody writes): not counted now, the checkpoint stays below."""
    written_again: list[tuple[Download, str]] = field(default_factory=list)
    """INSERTs of a key whose claim names another record (the first write the claim was made for): reported."""


class Claims(Protocol):
    def sort(self, downloads: list[Download], late: Callable[[], bool] = ...) -> ClaimOutcome: ...


@dataclass(frozen=True)
class _Claimed:
    owner: str | None
    first_record: str | None


class StreamClaims:
    def __init__(self, client: Any, table: str, executor: Executor) -> None:
        self._client = client
        self._table = table
        self._executor = executor

    def _claim(self, download: Download, late: Callable[[], bool]) -> _Claimed:
        if not download.item_key or late():
            return _Claimed(None, None)
        try:
            response = self._client.update_item(**stream_claim(self._table, download.item_key, download.event_id))
        except (ClientError, BotoCoreError):
            return _Claimed(None, None)
        return _Claimed(owner_of(response), first_record_of(response))

    def sort(self, downloads: list[Download], late: Callable[[], bool] = lambda: False) -> ClaimOutcome:
        """Claim every download key at once, by its first record here; each key is claimed once, however many boards
        it counts in. Once `late` says the invocation's time is nearly up, no claim starts: the rest stay unclaimed,
        for the next read."""
        by_key: dict[str, list[Download]] = {}
        for download in downloads:
            by_key.setdefault(claim_key(download.item_key) if download.item_key else "", []).append(download)
        groups = [sorted(records, key=lambda download: download.sequence) for records in by_key.values()]
        outcome = ClaimOutcome()
        claimed = self._executor.map(lambda records: self._claim(records[0], late), groups)
        for records, claim in zip(groups, claimed, strict=True):
            if claim.owner not in (STREAM, BACKFILL):
                outcome.unclaimed += records
                continue
            for download in records:
                if claim.first_record is not None and download.event_id not in (None, claim.first_record):
                    outcome.written_again.append((download, claim.first_record))
                elif claim.owner == STREAM:
                    outcome.ours.append(download)
                else:
                    outcome.backfilled.append(download)
        return outcome


def claimed_step(
    claims: Claims, shard: ShardRef, downloads: list[Download], late: Callable[[], bool], report: BatchReport
) -> tuple[list[Download], list[str], list[Refused]]:
    """One step's downloads through the claims: those to count, the sequence below which the checkpoint stays (a claim
    failed: nothing above it may be counted, or an aggregate's watermark would pass it) and the refused. Records above
    that hold are left for the read that meets them again, reports included."""
    claimed = claims.sort(downloads, late)
    report.counted_by_backfill += len(claimed.backfilled)
    report.unclaimed += len(claimed.unclaimed)
    held = min(download.sequence for download in claimed.unclaimed) if claimed.unclaimed else None
    ours = [download for download in claimed.ours if held is None or download.sequence < held]
    refused = [
        Refused(
            WRITTEN_AGAIN.format(first=first),
            download.raw_sequence,
            {"entityId": key.entity_id, "board": key.board, "created": download.created, "keys": download.item_key},
            shard.shard_id,
            shard.stream_arn,
        )
        for download, first in claimed.written_again
        if held is None or download.sequence < held
        for key in download.keys
    ]
    return ours, [held] if held is not None else [], refused
