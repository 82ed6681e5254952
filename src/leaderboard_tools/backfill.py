"""The backfill: a table's history (the downloads it held before the module was attached) counted exactly once beside
the stream, through the claims of `leaderboard_core.claims`.

While `backfill_claims = true` the aggregator claims every download it reads before counting it, and leaves those
the backfill claimed first. The backfill scans the downloads' table (a parallel Scan, consistent reads, paced on the
read units it consumes) and counts each page in transactions: for a chunk of downloads, one Put of each download's
claim (written only where nobody has claimed it) and one Update of each aggregate they count in, at most
MAX_TRANSACTION_ACTIONS actions on distinct items. A transaction cancelled because a claim was taken meanwhile (by the
stream, or by an earlier run of the backfill) is sent again without those downloads; one cancelled by a conflict or
by throttling is sent again after a pause. After each page, the segment's place in the scan is saved in the claims
table, so a run resumes where the last stopped; and since every count is made with its claim, a page counted again
counts nothing twice.

DynamoDB API Reference, TransactWriteItems: "a synchronous write operation that groups up to 100 action requests
... no two actions can target the same item ... The aggregate size of the items in the transaction cannot exceed
4 MB." botocore's standard retries do not retry a TransactionCanceledException (its throttled codes name
TransactionInProgressException, not this), so its reasons are read here.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from leaderboard_core.bookkeeping import RECOUNTED_THROUGH
from leaderboard_core.buckets import utc_moment
from leaderboard_core.claims import (
    BACKFILL,
    BACKFILL_DONE,
    BACKFILL_ITEM_PREFIX,
    CLAIM_KEY,
    CLAIM_OWNER,
    backfill_claim,
    claim_key,
)
from leaderboard_core.index_layout import ORDER_SCALE, leaderboard_partition, order_tiebreak
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.reconcile.clock import DynamoClock, ServerClock, interval_clock
from leaderboard_tools.reconcile.recount import boards_of_download, download_scan_parameters

MAX_TRANSACTION_ACTIONS = 100
"""TransactWriteItems' limit: "groups up to 100 action requests" (DynamoDB API Reference)."""
PAGE_SIZE = 100
SEGMENTS = 4
MAX_READ_UNITS = 100.0
LATE_CLAIMS = timedelta(minutes=15)
"""A claims table created this much later than the progress table came with a later apply than the aggregator's
first: the aggregator may have counted downloads before it claimed them."""
MAX_ATTEMPTS = 10
"""Sends of one chunk cancelled by conflicts or throttling before the run stops, unfinished."""
BACKOFF_BASE_SECONDS = 0.05
BACKOFF_CAP_SECONDS = 5.0
REJECTED_EXAMPLES = 10
START_ITEM = BACKFILL_ITEM_PREFIX + "start"
DONE_ITEM = BACKFILL_DONE
SEGMENTS_ATTRIBUTE, STARTED_AT, ENDED_AT, ENDED_AT_TEXT = "Segments", "StartedAt", "EndedAt", "EndedAtText"
LAST_KEY, SEGMENT_DONE = "LastKey", "Done"
"""The backfill's own items: `start` (Segments, StartedAt), `segment#<i>of<N>` (LastKey: the scan's place after the
last page counted, Done, the counters), `done` (EndedAt: the scan's end on DynamoDB's clock, the counters)."""
RETRIED_REASONS = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "None"})
"""Cancellation reasons of an action that may succeed when sent again ("None": the action itself was fine)."""
UNFINISHED_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TransactionInProgressException",
        "InternalServerError",
        "ServiceUnavailable",
    }
)
"""Errors botocore retried until it gave up: the run stops unfinished, and a later run goes on."""


class BackfillRefused(RuntimeError):
    """The backfill cannot count this deployment's history exactly: nothing was written."""


class BackfillStopped(RuntimeError):
    """Counting met what it must not write over (a repaired or order-less aggregate, an invalid request): the run
    stopped; what it counted before stays counted and claimed."""


class BackfillUnfinished(RuntimeError):
    """A chunk kept being cancelled by conflicts or throttling: the run stopped; a later run goes on."""


def segment_item(index: int, segments: int) -> str:
    return f"{BACKFILL_ITEM_PREFIX}segment#{index}of{segments}"


# ------------------------------------------------------------------ pure parts: downloads, chunks, transactions


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
        utc_moment(item[names.timestamp]["S"])
    except ValueError as error:
        return f"{names.timestamp} {item[names.timestamp]['S']!r} is not an ISO 8601 time: {error}"
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
    without an order but with a count (written before the order existed) or recounted by a repair (its count already
    holds the table's history) fails the condition: the backfill stops rather than count it."""
    names = deployment.names
    return {
        "Update": {
            "TableName": deployment.aggregates,
            "Key": {names.entity: {"S": entity}, names.sort_key: {"S": board}},
            "UpdateExpression": (
                "ADD #count :added SET #period = :partition, #order = if_not_exists(#order, :tiebreak) + :scaled"
            ),
            "ConditionExpression": (
                "(attribute_exists(#order) OR attribute_not_exists(#count)) AND attribute_not_exists(#fence)"
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
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def transaction_items(
    chunk: list[ScannedDownload], deployment: Deployment, claims_table: str
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The chunk's TransactItems: its claims first (in the chunk's order), then its aggregates' updates; and the
    aggregates in the order of their actions."""
    claims = []
    for download in chunk:
        put = backfill_claim(claims_table, download.key)
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


def read_cancellation(
    chunk: list[ScannedDownload],
    aggregates: list[tuple[str, str]],
    reasons: list[dict[str, Any]],
    deployment: Deployment,
) -> Cancellation:
    outcome = Cancellation()
    if len(reasons) != len(chunk) + len(aggregates):
        outcome.retry = True  # no reasons to go by: the same transaction, after a pause
        return outcome
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
                "count them again. Recount the history with `reconcile --repair` board by board instead"
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


# ------------------------------------------------------------------ tallies and the report


@dataclass
class Tally:
    """What a page, a segment or a run did; the counters are kept in each segment's item across runs."""

    items_scanned: int = 0
    downloads_read: int = 0
    counted: int = 0
    claimed_by_stream: int = 0
    claimed_by_backfill: int = 0
    claimed_unknown: int = 0
    rejected: int = 0
    read_units: float = 0.0
    transactions: int = 0
    retries: int = 0
    boards: Counter[str] = field(default_factory=Counter)
    rejected_examples: list[dict[str, Any]] = field(default_factory=list)

    COUNTERS = {
        "items_scanned": "ItemsScanned",
        "downloads_read": "DownloadsRead",
        "counted": "Counted",
        "claimed_by_stream": "ClaimedByStream",
        "claimed_by_backfill": "ClaimedByBackfill",
        "claimed_unknown": "ClaimedUnknown",
        "rejected": "Rejected",
        "read_units": "ReadUnits",
    }
    """Kept in each segment's item (the rest is this run's only)."""

    def claimed(self, owner: str) -> None:
        if owner == BACKFILL:
            self.claimed_by_backfill += 1
        elif owner == "stream":
            self.claimed_by_stream += 1
        else:
            self.claimed_unknown += 1

    def add(self, other: Tally) -> None:
        for item in fields(self):
            mine, theirs = getattr(self, item.name), getattr(other, item.name)
            if isinstance(mine, Counter):
                mine.update(theirs)
            elif isinstance(mine, list):
                mine.extend(theirs[: max(0, REJECTED_EXAMPLES - len(mine))])
            else:
                setattr(self, item.name, mine + theirs)

    def counters_json(self) -> dict[str, Any]:
        return {
            "readUnits": round(self.read_units, 1),
            "itemsScanned": self.items_scanned,
            "downloadsRead": self.downloads_read,
            "counted": self.counted,
            "alreadyClaimed": {
                "stream": self.claimed_by_stream,
                "backfill": self.claimed_by_backfill,
                "unknown": self.claimed_unknown,
            },
            "rejected": self.rejected,
        }


def _number(item: Mapping[str, Any], name: str) -> float:
    value = (item.get(name) or {}).get("N")
    return float(value) if value is not None else 0.0


def tally_of_item(item: Mapping[str, Any]) -> Tally:
    tally = Tally()
    for name, attribute in Tally.COUNTERS.items():
        value = _number(item, attribute)
        setattr(tally, name, value if name == "read_units" else int(value))
    return tally


DONE, ALREADY_DONE, UNFINISHED, INTERRUPTED, STOPPED = "done", "already_done", "unfinished", "interrupted", "stopped"


@dataclass
class BackfillReport:
    table: str
    segments: int
    status: str = UNFINISHED
    run: Tally = field(default_factory=Tally)
    """This run's work."""
    total: Tally | None = None
    """Every run's, once the backfill is done."""
    segments_done: int = 0
    started_at: float | None = None
    ended_at: float | None = None
    """The scan's end on DynamoDB's clock (epoch seconds): the stream's records created before it must be read while
    the claims are on."""
    error: str | None = None
    aggregator_function: str | None = None

    @property
    def finished(self) -> bool:
        return self.status in (DONE, ALREADY_DONE)

    def next_step(self) -> str:
        if not self.finished:
            return (
                "run `leaderboard-tools backfill` again (same --segments): it goes on from each segment's saved place; "
                "keep backfill_claims = true"
            )
        end = iso(self.ended_at)
        function = (self.aggregator_function or "the aggregator").split(":function:")[-1]
        return (
            f"keep backfill_claims = true until the aggregator has read every stream record created before {end} "
            f"(DynamoDB's clock): once {function}'s IteratorAge (AWS/Lambda) is below the time since {end} less "
            "60 s, and the failure queue is empty (`leaderboard-tools recover`), apply backfill_claims = false. "
            "Turned off sooner, the aggregator would count again a download the backfill counted whose record it had "
            "not read yet"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "status": self.status,
            "segments": self.segments,
            "segmentsDone": self.segments_done,
            **self.run.counters_json(),
            "countedPerBoard": dict(sorted(self.run.boards.items())),
            "rejectedExamples": self.run.rejected_examples,
            "transactions": self.run.transactions,
            "retries": self.run.retries,
            "total": self.total.counters_json() if self.total is not None else None,
            "startedAt": iso(self.started_at),
            "endedAt": iso(self.ended_at),
            "error": self.error,
            "next": self.next_step(),
        }


def iso(moment: float | None) -> str | None:
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# ------------------------------------------------------------------ pacing


class ReadPacer:
    """A token bucket on read units, shared by the segments: `rate` units a second, one second's worth at most in
    the bucket, empty at the start.

    A Scan's cost is known only from its answer (ConsumedCapacity), so each request first takes what the last page
    cost (`acquire`) and then settles the difference (`settle`): the bucket may go into debt, which the next requests
    wait off. Over any interval of T seconds the scan consumes at most rate x (T + 1) units, plus what the pages in
    flight cost beyond their estimates.
    """

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = interval_clock,
        sleep: Callable[[float], None] = time.sleep,
        first_estimate: float = 1.0,
    ) -> None:
        if rate <= 0:
            raise ValueError("the read rate must be positive")
        self._rate = rate
        self._capacity = rate
        self._clock = clock
        self._sleep = sleep
        self._tokens = 0.0
        self._updated = clock()
        self._estimate = first_estimate
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self._capacity, self._tokens + (now - self._updated) * self._rate)
        self._updated = now

    def acquire(self) -> float:
        """Wait until the next page's estimated cost may be spent; returns the estimate to settle with. The lock is
        held while waiting: segments are served one after another."""
        with self._lock:
            estimate = self._estimate
            needed = min(estimate, self._capacity)
            self._refill()
            while needed - self._tokens > 1e-9:  # a float short of it, not worth a pause (nor able to end one)
                self._sleep(max((needed - self._tokens) / self._rate, 0.001))
                self._refill()
            self._tokens -= estimate
            return estimate

    def settle(self, estimate: float, consumed: float) -> None:
        with self._lock:
            self._tokens += estimate - consumed
            self._estimate = max(consumed, 0.5)


def consumed_units(page: Mapping[str, Any]) -> float:
    capacity = page.get("ConsumedCapacity") or {}
    if isinstance(capacity, list):
        return sum(float(entry.get("CapacityUnits") or 0) for entry in capacity)
    return float(capacity.get("CapacityUnits") or 0)


# ------------------------------------------------------------------ DynamoDB's clock


class DynamoTime(DynamoClock):
    """DynamoDB's clock from its Date headers (reconcile's DynamoClock); this machine's clock is not relied on, so
    no margin is checked against it."""

    def __init__(self, dynamodb: Any, table: str, monotonic: Callable[[], float] = interval_clock) -> None:
        self._dynamodb = dynamodb
        self._table = table
        self._monotonic = monotonic
        self._clock = time.time
        self._margin = math.inf
        self._server = ServerClock()

    def latest(self) -> float:
        """The latest DynamoDB's clock can be now: every request answered before this call was served by then."""
        return self._dynamodb_latest()


# ------------------------------------------------------------------ the run


def claims_table_of(deployment: Deployment) -> str:
    """The claims table, or BackfillRefused saying why no backfill can run beside this aggregator."""
    claims = deployment.claims_table
    if not claims:
        function = deployment.aggregator_function or "no aggregator of the module reads the table's stream, so it"
        raise BackfillRefused(
            f"the aggregator {function} claims nothing (no CLAIMS_TABLE_NAME in its environment): a backfill beside "
            "it would count twice the downloads the stream also delivers. Apply the module with "
            "backfill_claims = true, then run the backfill; nothing was written"
        )
    if deployment.sum_attribute:
        raise BackfillRefused(
            f"the deployment sums {deployment.sum_attribute} (SUM_ATTRIBUTE): the backfill counts downloads, a "
            "backfill of sums is not supported yet; nothing was written"
        )
    if not deployment.progress_table:
        raise BackfillRefused(
            "the aggregator keeps no progress table (PROGRESS_TABLE_NAME): not a module this backfill knows; "
            "nothing was written"
        )
    deployment.shards()
    return claims


def check_history(dynamodb: Any, deployment: Deployment, claims: str) -> None:
    """Before a backfill's first run: BackfillRefused when the aggregator may have counted downloads it did not claim
    (its claims came in a later apply than the aggregator, and aggregates exist). A resumed run is not checked again:
    its own aggregates would refuse it."""
    assert deployment.progress_table
    try:
        claims_created = dynamodb.describe_table(TableName=claims)["Table"]["CreationDateTime"]
        progress_created = dynamodb.describe_table(TableName=deployment.progress_table)["Table"]["CreationDateTime"]
    except ClientError as error:
        raise BackfillRefused(f"cannot read the claims or the progress table: {error}; nothing was written") from error
    if claims_created - progress_created > LATE_CLAIMS and any_aggregate(dynamodb, deployment):
        raise BackfillRefused(
            f"the claims table {claims} was created at {claims_created.isoformat()}, later than the progress table "
            f"{deployment.progress_table} ({progress_created.isoformat()}) by more than "
            f"{int(LATE_CLAIMS.total_seconds() // 60)} minutes, and {deployment.aggregates} holds aggregates: the "
            "aggregator counted downloads before it claimed them, and the backfill would count those again. Count "
            "the history with `leaderboard-tools reconcile --repair` (board by board) instead; nothing was written"
        )


def any_aggregate(dynamodb: Any, deployment: Deployment) -> bool:
    """Whether the aggregates table holds an aggregate: one item of its sparse leaderboard index (keyed by the period
    attribute, which only aggregates carry), else a scan for an item carrying that attribute."""
    names = deployment.names
    description = dynamodb.describe_table(TableName=deployment.aggregates)["Table"]
    for index in description.get("GlobalSecondaryIndexes") or []:
        hash_key = next((key["AttributeName"] for key in index["KeySchema"] if key["KeyType"] == "HASH"), None)
        if hash_key == names.period:
            page = dynamodb.scan(TableName=deployment.aggregates, IndexName=index["IndexName"], Limit=1)
            return bool(page.get("Items"))
    parameters: dict[str, Any] = {
        "TableName": deployment.aggregates,
        "FilterExpression": "attribute_exists(#period)",
        "ExpressionAttributeNames": {"#period": names.period},
        "ProjectionExpression": "#period",
    }
    return any(page.get("Items") for page in dynamodb.get_paginator("scan").paginate(**parameters))


class Backfill:
    """One run of the backfill over `deployment`'s table; the clients, the clock and the pauses are injected."""

    def __init__(
        self,
        dynamodb: Any,
        deployment: Deployment,
        *,
        segments: int = SEGMENTS,
        max_read_units: float = MAX_READ_UNITS,
        page_size: int = PAGE_SIZE,
        clock: Callable[[], float] = interval_clock,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
        on_progress: Callable[[int], None] = lambda scanned: None,
        dynamo_time: Callable[[], float] | None = None,
    ) -> None:
        if segments < 1 or page_size < 1:
            raise ValueError("segments and page size must be at least 1")
        self._dynamodb = dynamodb
        self._deployment = deployment
        self._segments = segments
        self._page_size = page_size
        self._sleep = sleep
        self._jitter = jitter
        self._on_progress = on_progress
        self._pacer = ReadPacer(max_read_units, clock, sleep)
        self._dynamo_time = dynamo_time or DynamoTime(dynamodb, deployment.table).latest
        self._claims = ""
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._report = BackfillReport(deployment.table, segments, aggregator_function=deployment.aggregator_function)

    # -------------------------------------------------------------- the claims table's own items

    def _get(self, name: str) -> dict[str, Any] | None:
        return self._dynamodb.get_item(TableName=self._claims, Key={CLAIM_KEY: {"S": name}}, ConsistentRead=True).get(
            "Item"
        )

    def _begin(self) -> dict[str, Any] | None:
        """The done item when the backfill is done; else the run's start is recorded (or found, with the same
        segments: a different --segments would scan other ranges than the saved places name)."""
        done = self._get(DONE_ITEM)
        if done is not None:
            return done
        start = self._get(START_ITEM)
        if start is None:
            check_history(self._dynamodb, self._deployment, self._claims)
            item = {
                CLAIM_KEY: {"S": START_ITEM},
                SEGMENTS_ATTRIBUTE: {"N": str(self._segments)},
                STARTED_AT: {"N": str(self._dynamo_time())},
            }
            try:
                self._dynamodb.put_item(
                    TableName=self._claims,
                    Item=item,
                    ConditionExpression="attribute_not_exists(#key)",
                    ExpressionAttributeNames={"#key": CLAIM_KEY},
                )
                start = item
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
                start = self._get(START_ITEM) or item  # another run started at once
        saved = int(_number(start, SEGMENTS_ATTRIBUTE))
        if saved != self._segments:
            raise BackfillRefused(
                f"an unfinished backfill of {self._deployment.table} scans in {saved} segments: run it with "
                f"--segments {saved} (its saved places name those segments' ranges); nothing was written"
            )
        self._report.started_at = _number(start, STARTED_AT) or None
        return None

    def _segment_state(self, index: int) -> tuple[bool, dict[str, Any] | None]:
        item = self._get(segment_item(index, self._segments)) or {}
        return bool((item.get(SEGMENT_DONE) or {}).get("BOOL")), (item.get(LAST_KEY) or {}).get("M")

    def _save(self, index: int, last_key: dict[str, Any] | None, page: Tally) -> None:
        """The segment's place after a page all of whose transactions succeeded, and its counters."""
        names = {"#done": SEGMENT_DONE, "#last": LAST_KEY}
        values: dict[str, Any] = {":done": {"BOOL": last_key is None}}
        additions = []
        for name, attribute in Tally.COUNTERS.items():
            names[f"#{name}"] = attribute
            values[f":{name}"] = {"N": str(getattr(page, name))}
            additions.append(f"#{name} :{name}")
        update = "SET #done = :done"
        if last_key is None:
            tail = " REMOVE #last"
        else:
            update += ", #last = :last"
            values[":last"] = {"M": last_key}
            tail = ""
        self._dynamodb.update_item(
            TableName=self._claims,
            Key={CLAIM_KEY: {"S": segment_item(index, self._segments)}},
            UpdateExpression=f"{update} ADD {', '.join(additions)}{tail}",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def _finish(self) -> None:
        """Every segment done: the scan's end on DynamoDB's clock and every run's totals, in the done item."""
        total = Tally()
        for index in range(self._segments):
            total.add(tally_of_item(self._get(segment_item(index, self._segments)) or {}))
        ended = self._dynamo_time()
        item = {
            CLAIM_KEY: {"S": DONE_ITEM},
            SEGMENTS_ATTRIBUTE: {"N": str(self._segments)},
            ENDED_AT: {"N": str(ended)},
            ENDED_AT_TEXT: {"S": iso(ended) or ""},
            **{attribute: {"N": str(getattr(total, name))} for name, attribute in Tally.COUNTERS.items()},
        }
        try:
            self._dynamodb.put_item(
                TableName=self._claims,
                Item=item,
                ConditionExpression="attribute_not_exists(#key)",
                ExpressionAttributeNames={"#key": CLAIM_KEY},
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            item = self._get(DONE_ITEM) or item  # another run finished first: its end is the one to wait for
        self._report.ended_at = _number(item, ENDED_AT)
        self._report.total = tally_of_item(item)

    # -------------------------------------------------------------- counting

    def _transact(self, chunk: list[ScannedDownload], tally: Tally) -> None:
        """Count a chunk with its claims; downloads claimed meanwhile are dropped, conflicts are sent again."""
        attempts = 0
        while chunk:
            items, aggregates = transaction_items(chunk, self._deployment, self._claims)
            try:
                self._dynamodb.transact_write_items(TransactItems=items)
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                    raise
                outcome = read_cancellation(
                    chunk, aggregates, error.response.get("CancellationReasons") or [], self._deployment
                )
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

    def _page(self, items: list[dict[str, Any]], tally: Tally) -> None:
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
        for chunk in chunks(downloads):
            self._transact(chunk, tally)

    def _segment(self, index: int) -> None:
        done, last_key = self._segment_state(index)
        parameters = {
            "TableName": self._deployment.table,
            "Segment": index,
            "TotalSegments": self._segments,
            "Limit": self._page_size,
            "ReturnConsumedCapacity": "TOTAL",
            **download_scan_parameters(self._deployment, with_key=True),
        }
        while not done and not self._stop.is_set():
            estimate = self._pacer.acquire()
            page = self._dynamodb.scan(**parameters, **({"ExclusiveStartKey": last_key} if last_key else {}))
            tally = Tally(
                items_scanned=int(page.get("ScannedCount", 0)),
                downloads_read=int(page.get("Count", 0)),
                read_units=consumed_units(page),
            )
            self._pacer.settle(estimate, tally.read_units)
            self._page(page.get("Items", []), tally)
            last_key = page.get("LastEvaluatedKey") or None
            self._save(index, last_key, tally)
            done = last_key is None
            with self._lock:
                self._report.run.add(tally)
            self._on_progress(tally.items_scanned)

    def run(self) -> BackfillReport:
        """Scan every unfinished segment, or say the backfill is done. Refusals raise before anything is written;
        a run stopped by an error reports what it did, with the error."""
        report = self._report
        self._claims = claims_table_of(self._deployment)
        done = self._begin()
        if done is not None:
            report.status, report.segments = ALREADY_DONE, int(_number(done, SEGMENTS_ATTRIBUTE))
            report.segments_done = report.segments
            report.ended_at, report.total = _number(done, ENDED_AT), tally_of_item(done)
            return report
        failure: BaseException | None = None
        with ThreadPoolExecutor(max_workers=self._segments, thread_name_prefix="backfill-segment") as pool:
            futures = [pool.submit(self._segment, index) for index in range(self._segments)]
            try:
                while True:
                    finished, pending = wait(futures, timeout=0.5, return_when=FIRST_EXCEPTION)
                    failure = next((f.exception() for f in finished if f.exception() is not None), None)
                    if failure is not None or not pending:
                        break
            except KeyboardInterrupt:
                report.status = INTERRUPTED
            self._stop.set()
            wait(futures)
        failure = failure or next((f.exception() for f in futures if f.exception() is not None), None)
        report.segments_done = sum(self._segment_state(index)[0] for index in range(self._segments))
        if failure is not None:
            self._classify(failure)
        elif report.status != INTERRUPTED and report.segments_done == self._segments:
            self._finish()
            report.status = DONE
        return report

    def _classify(self, failure: BaseException) -> None:
        report = self._report
        if not isinstance(failure, Exception):
            raise failure  # the process is going down (a test's kill): nothing more is written
        report.error = str(failure)
        code = failure.response.get("Error", {}).get("Code") if isinstance(failure, ClientError) else None
        if isinstance(failure, BackfillUnfinished | BotoCoreError) or code in UNFINISHED_CODES:
            report.status = UNFINISHED
        elif isinstance(failure, BackfillStopped | ClientError):
            report.status = STOPPED
        else:
            raise failure
