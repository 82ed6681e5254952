"""The aggregator's side of the claims (leaderboard_core.claims): while a backfill may count a table's history, every
download it reads is claimed before it is counted, and a download the backfill claimed first is left to it.

A claim names the first stream record it was made for (its eventID, as FirstWrite), and a REMOVE of the key read before
any INSERT of it (FirstRemoval). An INSERT whose claim names another record is the same key written again after a
deletion; one the backfill owns whose claim names a removal, or other boards than the backfill's claim says it
counted, is a key the backfill counted before it was deleted and written again. A claim says who counted the key, not
which of its writes, so such a write is counted nowhere and reported (`refused_record`: recover recounts its board);
ledger mode counts it where its last image says. A deletion by Time to Live changes no count and claims nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from batch_report import BatchReport
from delivery import Refused, ShardRef
from download_records import Download
from leaderboard_core.bookkeeping import pad_sequence
from leaderboard_core.claims import (
    BACKFILL,
    STREAM,
    backfill_counted,
    claim_key,
    first_record_of,
    first_removal_of,
    owner_of,
    removal_claim,
    stream_claim,
)
from leaderboard_core.source_items import expired_by_ttl

WRITTEN_AGAIN = (
    "download key written again while backfill_claims is on (deleted and put back): its claim belongs to an earlier "
    "write of the key (stream record {first}), and a claim says who counted the key, not which of its writes, so "
    "this write is counted nowhere; recover recounts its board. Ledger mode (ledger = true) counts such keys where "
    "their last image says"
)
COUNTED_BEFORE_REMOVAL = (
    "download key written again while backfill_claims is on: the backfill claimed the key before its deletion (stream "
    "record {removal}), so what it counted is an earlier write, and a claim says who counted the key, not which of "
    "its writes, so this write is counted nowhere; recover recounts its board. Ledger mode (ledger = true) counts such "
    "keys where their last image says"
)
COUNTED_IN_OTHER_BOARDS = (
    "download key written again while backfill_claims is on: the backfill's claim says it counted the key in "
    "{counted}, and this write counts in other boards, so it is a later write of the key whose deletion this read has "
    "not met (on a shard not read yet, or read by an aggregator that claimed no deletions); a claim says who counted "
    "the key, not which of its writes, so this write is counted nowhere; recover recounts its board. Ledger mode "
    "(ledger = true) counts such keys where their last image says"
)
UNKNOWN_FIRST_WRITE = (
    "download key claimed by the stream without FirstWrite (the claim does not name the record it was made for): this "
    "INSERT may be that record or the key written again after a deletion, which the claim cannot tell apart, so it is "
    "counted nowhere; recover recounts its board. Ledger mode (ledger = true) counts every write of a key where its "
    "last image says"
)


@dataclass(frozen=True)
class Removal:
    """A REMOVE read while claims are on: the key it names existed before any INSERT of it that follows (an INSERT is
    "a new item was added to the table", a REMOVE "the item was deleted from the table": DynamoDB Streams, *Record*)."""

    item_key: dict[str, Any]
    sequence: str
    """Padded: where a failed claim of it holds the checkpoint."""
    event_id: str


def removal_of(record: Mapping[str, Any]) -> Removal | None:
    """A REMOVE with its Keys, eventID and sequence number; None for any other record, and for an expiry by Time to
    Live: it changes no count, so a backfill that scanned the expired item before it went counts it all the same."""
    stream = record.get("dynamodb")
    if record.get("eventName") != "REMOVE" or expired_by_ttl(record) or not isinstance(stream, Mapping):
        return None
    keys, sequence, event_id = stream.get("Keys"), stream.get("SequenceNumber"), record.get("eventID")
    if not (isinstance(keys, dict) and keys and isinstance(sequence, str) and isinstance(event_id, str) and event_id):
        return None
    return Removal(keys, pad_sequence(sequence), event_id)


@dataclass
class ClaimOutcome:
    ours: list[Download] = field(default_factory=list)
    """Claimed by the stream, now or by an earlier read of the same record: the aggregator counts these."""
    backfilled: list[Download] = field(default_factory=list)
    """Claimed by the backfill first: it counted them, the aggregator must not."""
    unclaimed: list[Download] = field(default_factory=list)
    """The claim failed (throttled, an error, an owner nobody writes): not counted now, the checkpoint stays below."""
    unclaimed_removals: list[Removal] = field(default_factory=list)
    """REMOVEs whose claim failed: the checkpoint stays below them, or an INSERT after one would find no removal."""
    refused: list[tuple[Download, str]] = field(default_factory=list)
    """INSERTs no claim can count once (the key written again, or a claim naming no first write), and why: reported."""


class Claims(Protocol):
    def sort(
        self, downloads: list[Download], late: Callable[[], bool] = ..., removals: Sequence[Removal] = ...
    ) -> ClaimOutcome: ...


@dataclass(frozen=True)
class _Claimed:
    owner: str | None = None
    first_record: str | None = None
    first_removal: str | None = None
    failed: bool = False
    """Not made (throttled, an error, too late): the key's records wait below the checkpoint."""
    unknown_first_write: bool = False
    """The stream owns the claim but it names no first write: which write it counted cannot be told."""
    backfill_counted: frozenset[tuple[str, str]] | None = None
    """(entity, board) pairs the backfill's claim says it counted; None where it records none."""


_FAILED = _Claimed(failed=True)


class StreamClaims:
    def __init__(self, client: Any, table: str, executor: Executor) -> None:
        self._client = client
        self._table = table
        self._executor = executor

    def _claim_removal(self, removal: Removal, late: Callable[[], bool]) -> bool:
        """Whether the removal is recorded, or needs not be (an INSERT of the key claimed first, or a claim naming no
        first write, which every INSERT of the key then finds)."""
        if late():
            return False
        try:
            self._client.update_item(**removal_claim(self._table, removal.item_key, removal.event_id))
        except ClientError as error:
            return error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
        except BotoCoreError:
            return False
        return True

    def _claim_insert(self, download: Download, late: Callable[[], bool]) -> _Claimed:
        if not download.item_key or late():
            return _FAILED
        try:
            response = self._client.update_item(**stream_claim(self._table, download.item_key, download.event_id))
        except ClientError as error:
            unknown = error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
            return _Claimed(unknown_first_write=True) if unknown else _FAILED
        except BotoCoreError:
            return _FAILED
        return _Claimed(
            owner_of(response),
            first_record_of(response),
            first_removal_of(response),
            backfill_counted=backfill_counted(response),
        )

    def _claim(self, downloads: list[Download], removals: list[Removal], late: Callable[[], bool]) -> _Claimed:
        """One key's claim in a step: a REMOVE before its first INSERT here first (the INSERT is then a write
        again of a key that existed), then that INSERT."""
        first = downloads[0] if downloads else None
        before = [removal for removal in removals if first is None or removal.sequence < first.sequence]
        if before and not self._claim_removal(before[0], late):
            return _FAILED
        return self._claim_insert(first, late) if first is not None else _Claimed()

    def sort(
        self, downloads: list[Download], late: Callable[[], bool] = lambda: False, removals: Sequence[Removal] = ()
    ) -> ClaimOutcome:
        """Claim every download key at once, by its first record here; each key is claimed once, however many boards
        it counts in. Once `late` says the invocation's time is nearly up, no claim starts: the rest stay unclaimed,
        for the next read."""
        by_key: dict[str, tuple[list[Download], list[Removal]]] = {}
        for download in downloads:
            by_key.setdefault(claim_key(download.item_key) if download.item_key else "", ([], []))[0].append(download)
        for removal in removals:
            by_key.setdefault(claim_key(removal.item_key), ([], []))[1].append(removal)
        groups = [
            (sorted(records, key=lambda download: download.sequence), sorted(gone, key=lambda item: item.sequence))
            for records, gone in by_key.values()
        ]
        outcome = ClaimOutcome()
        claimed = self._executor.map(lambda group: self._claim(group[0], group[1], late), groups)
        for (records, gone), claim in zip(groups, claimed, strict=True):
            if claim.failed:
                outcome.unclaimed += records
                outcome.unclaimed_removals += gone
                continue
            if claim.unknown_first_write:
                outcome.refused += [(download, UNKNOWN_FIRST_WRITE) for download in records]
                continue
            if records and claim.owner not in (STREAM, BACKFILL):
                outcome.unclaimed += records
                continue
            for download in records:
                if claim.first_record is not None and download.event_id not in (None, claim.first_record):
                    outcome.refused.append((download, WRITTEN_AGAIN.format(first=claim.first_record)))
                elif claim.owner == STREAM:
                    outcome.ours.append(download)
                elif claim.first_removal is not None:
                    outcome.refused.append((download, COUNTED_BEFORE_REMOVAL.format(removal=claim.first_removal)))
                elif claim.backfill_counted is not None and claim.backfill_counted != _boards(download):
                    counted = ", ".join(f"{board} of {entity}" for entity, board in sorted(claim.backfill_counted))
                    outcome.refused.append((download, COUNTED_IN_OTHER_BOARDS.format(counted=counted)))
                else:
                    outcome.backfilled.append(download)
        return outcome


def _boards(download: Download) -> frozenset[tuple[str, str]]:
    return frozenset((key.entity_id, key.board) for key in download.keys)


def claimed_step(
    claims: Claims,
    shard: ShardRef,
    downloads: list[Download],
    late: Callable[[], bool],
    report: BatchReport,
    removals: Sequence[Removal] = (),
) -> tuple[list[Download], list[str], list[Refused]]:
    """One step's downloads (and REMOVEs) through the claims: those to count, the sequence below which the checkpoint
    stays (a claim failed: nothing above it may be counted, or an aggregate's watermark would pass it) and the refused.
    Records above that hold are left for the read that meets them again, reports included."""
    claimed = claims.sort(downloads, late, removals=removals)
    report.counted_by_backfill += len(claimed.backfilled)
    report.unclaimed += len(claimed.unclaimed) + len(claimed.unclaimed_removals)
    waiting = [download.sequence for download in claimed.unclaimed]
    waiting += [removal.sequence for removal in claimed.unclaimed_removals]
    held = min(waiting) if waiting else None
    ours = [download for download in claimed.ours if held is None or download.sequence < held]
    refused = [
        Refused(
            reason,
            download.raw_sequence,
            {"entityId": key.entity_id, "board": key.board, "created": download.created, "keys": download.item_key},
            shard.shard_id,
            shard.stream_arn,
        )
        for download, reason in claimed.refused
        if held is None or download.sequence < held
        for key in download.keys
    ]
    return ours, [held] if held is not None else [], refused
