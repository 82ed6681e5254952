"""The backfill's writes: a page's downloads in chunks, each counted in one transaction with its claims, so that no
download is counted twice; a cancelled transaction's reasons say which downloads to drop, when to send again, and when
to stop."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_core.bookkeeping import RECOUNTED_THROUGH
from leaderboard_core.buckets import utc_moment
from leaderboard_core.claims import CLAIM_OWNER, backfill_claim, claim_key
from leaderboard_core.index_layout import ORDER_SCALE, leaderboard_partition, order_tiebreak
from leaderboard_core.periods import SEASON
from leaderboard_tools.backfill.report import REJECTED_EXAMPLES, Tally
from leaderboard_tools.backfill.runs import LEASE_SECONDS
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.reconcile.recount import boards_of_download

MAX_TRANSACTION_ACTIONS = 100
"""TransactWriteItems' limit: "groups up to 100 action requests" (DynamoDB API Reference)."""
MAX_ATTEMPTS = 10
"""Sends of one chunk cancelled by conflicts or throttling before the run stops, unfinished."""
BACKOFF_BASE_SECONDS = 0.05
BACKOFF_CAP_SECONDS = 5.0
RETRIED_REASONS = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "None"})
"""Cancellation reasons of an action that may succeed when sent again ("None": the action itself was fine)."""


class BackfillStopped(RuntimeError):
    """Counting met what it must not write over (a repaired or order-less aggregate, an invalid request): the run
    stopped; what it counted before stays counted and claimed."""


class BackfillUnfinished(RuntimeError):
    """A chunk kept being cancelled by conflicts or throttling: the run stopped; a later run goes on."""


@dataclass(frozen=True)
class ScannedDownload:
    key: dict[str, Any]
    """Every attribute of the item's primary key: what its claim names."""
    claim: str
    entity: str
    boards: tuple[str, ...]


def key_attributes(deployment: Deployment) -> tuple[str, ...]:
    return deployment.key_attributes or (deployment.names.entity, deployment.names.sort_key)


def item_key(item: Mapping[str, Any], deployment: Deployment) -> dict[str, Any]:
    return {name: item[name] for name in key_attributes(deployment) if name in item}


def scanned_download(item: Mapping[str, Any], deployment: Deployment) -> ScannedDownload | None:
    """A countable download, with the boards the aggregator counts it in; None when the aggregator rejects it."""
    boards = boards_of_download(item, deployment)
    if not boards:
        return None
    key = item_key(item, deployment)
    return ScannedDownload(key, claim_key(key), item[deployment.names.entity]["S"], tuple(boards))


def rejection_reason(item: Mapping[str, Any], deployment: Deployment) -> str:
    """Why the aggregator would reject a download (boards_of_download found no board for it)."""
    names = deployment.names
    for name in (names.entity, names.timestamp):
        value = item.get(name)
        if not (isinstance(value, dict) and isinstance(value.get("S"), str) and value["S"]):
            return f"no {name} (a non-empty string)"
    try:
        moment = utc_moment(item[names.timestamp]["S"])
    except ValueError as error:
        return f"{names.timestamp} {item[names.timestamp]['S']!r} is not an ISO 8601 time: {error}"
    season = deployment.calendar.season
    if season is not None and SEASON in deployment.periods and deployment.calendar.bucket_key(moment, SEASON) is None:
        return f"before the first season ({season.start.isoformat()}): no board holds it, and the aggregator ignores it"
    if deployment.category_attribute is not None and deployment.category_attribute in item:
        return f"{deployment.category_attribute} is not a non-empty string whose board ids fit the sort key"
    return "not countable"


def chunks(downloads: list[ScannedDownload], limit: int = MAX_TRANSACTION_ACTIONS) -> Iterator[list[ScannedDownload]]:
    """Downloads in the order given, grouped so that each group's claims and distinct aggregates fit one
    transaction: at most `limit` actions, each on an item of its own."""
    chunk: list[ScannedDownload] = []
    claims: set[str] = set()
    aggregates: set[tuple[str, str]] = set()
    for download in downloads:
        new = {(download.entity, board) for board in download.boards} - aggregates
        if chunk and (download.claim in claims or len(chunk) + 1 + len(aggregates) + len(new) > limit):
            yield chunk
            chunk, claims, aggregates = [], set(), set()
            new = {(download.entity, board) for board in download.boards}
        if 1 + len(new) > limit:
            raise ValueError(f"a download counts in {len(new)} boards: more than one transaction holds")
        chunk.append(download)
        claims.add(download.claim)
        aggregates |= new
    if chunk:
        yield chunk


def aggregate_counts(chunk: list[ScannedDownload]) -> dict[tuple[str, str], int]:
    """The downloads each aggregate gains, merged over the chunk, in a stable order."""
    counts: Counter[tuple[str, str]] = Counter()
    for download in chunk:
        for board in download.boards:
            counts[(download.entity, board)] += 1
    return dict(sorted(counts.items()))


def aggregate_update(deployment: Deployment, entity: str, board: str, added: int) -> dict[str, Any]:
    """The aggregator's own forms: count, index partition and order move together without a read. An aggregate
    without an order but with a count other than 0 (written before the order existed) or recounted by a repair (its
    count already holds the table's history) fails the condition: the backfill stops rather than count it. One at 0
    without an order left the index after retractions took its downloads back: it comes back with its order rebuilt
    from the tie-breaker, as the aggregator's next write would bring it."""
    names = deployment.names
    return {
        "Update": {
            "TableName": deployment.aggregates,
            "Key": {names.entity: {"S": entity}, names.sort_key: {"S": board}},
            "UpdateExpression": (
                "ADD #count :added SET #period = :partition, #order = if_not_exists(#order, :tiebreak) + :scaled"
            ),
            "ConditionExpression": (
                "(attribute_exists(#order) OR attribute_not_exists(#count) OR #count = :zero) "
                "AND attribute_not_exists(#fence)"
            ),
            "ExpressionAttributeNames": {
                "#count": names.count,
                "#period": names.period,
                "#order": names.order,
                "#fence": RECOUNTED_THROUGH,
            },
            "ExpressionAttributeValues": {
                ":added": {"N": str(added)},
                ":partition": {"S": leaderboard_partition(board, entity, deployment.shards())},
                ":tiebreak": {"N": str(order_tiebreak(entity))},
                ":scaled": {"N": str(added * ORDER_SCALE)},
                ":zero": {"N": "0"},
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def contribution(download: ScannedDownload) -> dict[str, int]:
    """What the backfill adds for a download, board id -> amount (a count: 1 in each of its boards), kept in its claim:
    in ledger mode the stream's first record of it moves the count from there; in watermark mode an INSERT of the key
    counting elsewhere is a later write, reported rather than left to the backfill."""
    return dict.fromkeys(download.boards, 1)


def transaction_items(
    chunk: list[ScannedDownload], deployment: Deployment, claims_table: str, read_at: int | None = None
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The chunk's TransactItems: its claims first (in the chunk's order, each with what it adds and, in ledger mode,
    when its item was read: `read_at`), then its aggregates' updates; and the aggregates in the order of their
    actions."""
    claims = []
    for download in chunk:
        put = backfill_claim(
            claims_table, download.key, entity=download.entity, contribution=contribution(download), read_at=read_at
        )
        put["Put"]["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        claims.append(put)
    counts = aggregate_counts(chunk)
    updates = [aggregate_update(deployment, entity, board, added) for (entity, board), added in counts.items()]
    return claims + updates, list(counts)


@dataclass
class Cancellation:
    """What a cancelled transaction's reasons say, action by action."""

    claimed: dict[int, str] = field(default_factory=dict)
    """Chunk index -> the owner of a claim that failed its condition ("unknown" when DynamoDB did not say)."""
    retry: bool = False
    """A conflict or throttling: send again after a pause."""
    refused: list[str] = field(default_factory=list)
    """Aggregates that failed their condition, and why: the backfill stops."""
    errors: list[str] = field(default_factory=list)
    """Any other reason (a validation error, an item collection too large): the backfill stops."""
    ended: bool = False
    """The run's fence is gone: it may count nothing more."""


def read_cancellation(
    chunk: list[ScannedDownload],
    aggregates: list[tuple[str, str]],
    reasons: list[dict[str, Any]],
    deployment: Deployment,
    fenced: bool = False,
) -> Cancellation:
    outcome = Cancellation()
    if len(reasons) != len(chunk) + len(aggregates) + fenced:
        outcome.retry = True  # no reasons to go by: the same transaction, after a pause
        return outcome
    if fenced:
        *reasons, fence = reasons
        code = str(fence.get("Code") or "None")
        outcome.ended = code == "ConditionalCheckFailed"
        outcome.retry = code in RETRIED_REASONS - {"None"}
    names = deployment.names
    for index, reason in enumerate(reasons):
        code = str(reason.get("Code") or "None")
        if code in RETRIED_REASONS:
            outcome.retry = outcome.retry or code != "None"
            continue
        if index < len(chunk):
            if code == "ConditionalCheckFailed":
                owner = ((reason.get("Item") or {}).get(CLAIM_OWNER) or {}).get("S")
                outcome.claimed[index] = owner or "unknown"
            else:
                outcome.errors.append(f"the claim of {json.dumps(chunk[index].key)}: {code}: {reason.get('Message')}")
            continue
        entity, board = aggregates[index - len(chunk)]
        if code != "ConditionalCheckFailed":
            outcome.errors.append(f"the aggregate {entity} {board}: {code}: {reason.get('Message')}")
            continue
        item = reason.get("Item") or {}
        if RECOUNTED_THROUGH in item:
            outcome.refused.append(
                f"the aggregate {entity} {board} was recounted by `reconcile --repair` ({RECOUNTED_THROUGH}): its "
                "count already holds the downloads the table had then, the history included, and the backfill would "
                "count them again. Apply backfill_claims = false, then recount the history with `reconcile --repair` "
                "board by board"
            )
        elif names.count in item and names.order not in item:
            outcome.refused.append(
                f"the aggregate {entity} {board} has a count but no {names.order} (written before the order "
                "existed): run `leaderboard-tools rekey` with the deployed shards, which sets it, then the backfill "
                "again"
            )
        else:
            outcome.refused.append(f"the aggregate {entity} {board} failed its condition: {item}")
    return outcome


class PageTransactions:
    """The Backfill's counting of a scanned page."""

    def _transact(self, chunk: list[ScannedDownload], tally: Tally, segment: int, read_at: int | None = None) -> None:
        """Count a chunk with its claims; downloads claimed meanwhile are dropped, conflicts are sent again. The
        segment's fence (runs.py) goes last, when the run has one."""
        fence = self._fences[segment] if self._fences else None
        attempts = 0
        while chunk:
            items, aggregates = transaction_items(chunk, self._deployment, self._claims, read_at)
            items += [fence] if fence else []
            try:
                self._dynamodb.transact_write_items(TransactItems=items)
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                    raise
                outcome = read_cancellation(
                    chunk,
                    aggregates,
                    error.response.get("CancellationReasons") or [],
                    self._deployment,
                    fence is not None,
                )
                if outcome.ended:
                    raise BackfillUnfinished(
                        "this run was ended by `backfill --release-check`, which had not heard from it within "
                        f"{LEASE_SECONDS:g} s: what it counted stays counted; run the backfill again"
                    ) from error
                if outcome.refused or outcome.errors:
                    raise BackfillStopped("; ".join(outcome.refused + outcome.errors)) from error
                for owner in outcome.claimed.values():
                    tally.claimed(owner)
                chunk = [download for index, download in enumerate(chunk) if index not in outcome.claimed]
                tally.retries += 1
                if outcome.retry or not outcome.claimed:
                    attempts += 1
                    if attempts >= MAX_ATTEMPTS:
                        raise BackfillUnfinished(
                            f"a transaction of {len(chunk)} downloads was cancelled by conflicts or throttling "
                            f"{attempts} times (the aggregator writing the same aggregates?)"
                        ) from error
                    delay = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2**attempts)
                    self._sleep(delay * (0.5 + self._jitter() / 2))
                continue
            tally.transactions += 1
            tally.counted += len(chunk)
            for download in chunk:
                tally.boards.update(download.boards)
            return

    def _page(self, items: list[dict[str, Any]], tally: Tally, segment: int, read_at: int | None = None) -> None:
        downloads = []
        for item in items:
            download = scanned_download(item, self._deployment)
            if download is None:
                tally.rejected += 1
                if len(tally.rejected_examples) < REJECTED_EXAMPLES:
                    tally.rejected_examples.append(
                        {"key": item_key(item, self._deployment), "reason": rejection_reason(item, self._deployment)}
                    )
            else:
                downloads.append(download)
        for chunk in chunks(downloads, MAX_TRANSACTION_ACTIONS - bool(self._fences)):
            self._transact(chunk, tally, segment, read_at)
