"""`leaderboard-tools backfill`: a table's history counted exactly once beside the stream, through the claims.

The oracle is the test's own: every download it wrote, filed by slicing its UTC timestamp (`2018-03-10T...Z`: month
`2018-03`, day `2018-03-10`, and with a genre `<bucket>@<genre>`), counted once in each board. The stream is played
by the test: a claim through `leaderboard_core.claims.stream_claim` and, when the claim is the stream's, the count
(`stream_counts`), or the shipped aggregator's store behind the same claim (`ClaimingModelAggregator`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from leaderboard_core.claims import (
    BACKFILL,
    BACKFILL_ITEM_PREFIX,
    CLAIM_KEY,
    CLAIM_OWNER,
    STREAM,
    claim_key,
    owner_of,
    stream_claim,
)
from leaderboard_tools.backfill import (
    ALREADY_DONE,
    DONE,
    DONE_ITEM,
    MAX_ATTEMPTS,
    STOPPED,
    UNFINISHED,
    Backfill,
    BackfillRefused,
    BackfillUnfinished,
    ReadPacer,
    ScannedDownload,
    chunks,
    transaction_items,
)
from leaderboard_tools.backfill.release import release_check
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile.reconciler import Reconciler
from leaderboard_tools.reconcile.refusals import RepairUnavailable
from tests.unit.conftest import moto_client
from tests.unit.tools.operator_stack import REGION, ModelAggregator, MotoStack, deploy, run

ORDER_SCALE = 10**26
GENRE = "Genre"
HISTORY_DAYS = ("2018-03-10T10:00:00Z", "2018-03-31T23:59:59Z", "2018-04-01T00:00:00Z")
SONGS = ("song1", "song2", "song3", "song4", "song5")


@pytest.fixture(autouse=True)
def one_request_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's TransactWriteItems deep-copies the tables it writes (to roll them back), which a request of another
    thread writing them meanwhile breaks; DynamoDB serves them at once. The backfill's segments are threads: moto
    here answers one DynamoDB request at a time."""
    from moto.dynamodb.responses import DynamoHandler

    lock = threading.RLock()
    call_action = DynamoHandler.call_action

    def serialized(self: Any) -> Any:
        with lock:
            return call_action(self)

    monkeypatch.setattr(DynamoHandler, "call_action", serialized)


class Killed(BaseException):
    """The operator's process killed (SIGKILL): no handler of it runs."""


# ------------------------------------------------------------------ the stack, the downloads, the oracle


@dataclass(frozen=True)
class Written:
    song: str
    sk: str
    timestamp: str
    genre: str | None = None

    @property
    def key(self) -> dict[str, Any]:
        return {"songID": {"S": self.song}, "SK": {"S": self.sk}}

    def boards(self, periods: str) -> list[str]:
        """By slicing the timestamp: every one the tests write is UTC, `Z`-suffixed."""
        buckets = [{"month": self.timestamp[:7], "day": self.timestamp[:10]}[period] for period in periods.split(",")]
        return buckets + ([f"{bucket}@{self.genre}" for bucket in buckets] if self.genre else [])


@dataclass
class Stack:
    moto: MotoStack
    aggregates: str
    claims: str
    periods: str
    marker: bool = False
    written: list[Written] = field(default_factory=list)

    @property
    def table(self) -> str:
        return self.moto.table

    def oracle(self, downloads: list[Written] | None = None) -> Counter[tuple[str, str]]:
        counts: Counter[tuple[str, str]] = Counter()
        for download in self.written if downloads is None else downloads:
            counts.update((download.song, board) for board in download.boards(self.periods))
        return counts


def dynamodb() -> Any:
    return moto_client("dynamodb")


def _create_keyed_table(name: str, key: str, sort_key: str | None = None, index: bool = False) -> None:
    definitions = [{"AttributeName": key, "AttributeType": "S"}]
    schema = [{"AttributeName": key, "KeyType": "HASH"}]
    if sort_key:
        definitions.append({"AttributeName": sort_key, "AttributeType": "S"})
        schema.append({"AttributeName": sort_key, "KeyType": "RANGE"})
    extra: dict[str, Any] = {}
    if index:
        definitions += [
            {"AttributeName": "Month", "AttributeType": "S"},
            {"AttributeName": "LeaderboardOrder", "AttributeType": "N"},
        ]
        extra["GlobalSecondaryIndexes"] = [
            {
                "IndexName": "MonthDownloadsIndex",
                "KeySchema": [
                    {"AttributeName": "Month", "KeyType": "HASH"},
                    {"AttributeName": "LeaderboardOrder", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["DownloadCount"]},
            }
        ]
    dynamodb().create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=definitions, KeySchema=schema, **extra
    )


def stack_with_claims(
    name: str = "music",
    *,
    periods: str = "month,day",
    category: bool = True,
    shards: int = 1,
    separate: bool = False,
    marker: bool = False,
    claims: bool = True,
    settings: dict[str, str] | None = None,
) -> Stack:
    """The module with backfill_claims = true: its claims table `<name>-claims` (created with the stack, before its
    progress table) named in the aggregator's CLAIMS_TABLE_NAME; `separate`: aggregates in `<name>-aggregates`."""
    aggregator = {"LEADERBOARD_PERIODS": periods} | (settings or {})
    if category:
        aggregator["CATEGORY_ATTRIBUTE"] = GENRE
    if claims:
        _create_keyed_table(f"{name}-claims", CLAIM_KEY)
        aggregator["CLAIMS_TABLE_NAME"] = f"{name}-claims"
    if separate:
        _create_keyed_table(f"{name}-aggregates", "songID", "SK", index=True)
        aggregator["AGGREGATES_TABLE_NAME"] = f"{name}-aggregates"
    if marker:
        aggregator |= {"SOURCE_ITEM_ATTRIBUTE": "type", "SOURCE_ITEM_VALUE": "DOWNLOAD"}
    moto = deploy(name=name, shards=shards, aggregator_settings=aggregator)
    return Stack(moto, f"{name}-aggregates" if separate else moto.table, f"{name}-claims", periods, marker)


def write(stack: Stack, song: str, sk: str, timestamp: str, genre: str | None = None) -> Written:
    item = {"songID": {"S": song}, "SK": {"S": sk}, "Timestamp": {"S": timestamp}, "UserID": {"S": "u1"}}
    if genre:
        item[GENRE] = {"S": genre}
    if stack.marker:
        item["type"] = {"S": "DOWNLOAD"}
    dynamodb().put_item(TableName=stack.table, Item=item)
    written = Written(song, sk, timestamp, genre)
    stack.written.append(written)
    return written


def write_history(stack: Stack, count: int, prefix: str = "h", genres: bool = True) -> list[Written]:
    """`count` downloads spread over the songs, three days (two months) and two genres (every fifth without)."""
    genres_of = ("rock", "jazz", None, "rock", "jazz") if genres else (None,)
    return [
        write(
            stack,
            SONGS[index % len(SONGS)],
            f"{prefix}{index:04d}",
            HISTORY_DAYS[index % len(HISTORY_DAYS)],
            genres_of[index % len(genres_of)],
        )
        for index in range(count)
    ]


def write_rejected(stack: Stack) -> list[dict[str, Any]]:
    """Two downloads the aggregator rejects: no timestamp, and one that is not ISO 8601."""
    keys = []
    for sk, timestamp in (("bad-none", None), ("bad-text", "yesterday")):
        item: dict[str, Any] = {"songID": {"S": "song1"}, "SK": {"S": sk}}
        if timestamp:
            item["Timestamp"] = {"S": timestamp}
        if stack.marker:
            item["type"] = {"S": "DOWNLOAD"}
        dynamodb().put_item(TableName=stack.table, Item=item)
        keys.append({"songID": {"S": "song1"}, "SK": {"S": sk}})
    return keys


def stored(stack: Stack) -> dict[tuple[str, str], int]:
    """Every aggregate's count, read back from the aggregates table (the items carrying the period attribute)."""
    items = dynamodb().scan(TableName=stack.aggregates, ConsistentRead=True)["Items"]
    return {
        (item["songID"]["S"], item["SK"]["S"]): int(item["DownloadCount"]["N"]) for item in items if "Month" in item
    }


def aggregate_items(stack: Stack) -> list[dict[str, Any]]:
    return [
        item for item in dynamodb().scan(TableName=stack.aggregates, ConsistentRead=True)["Items"] if "Month" in item
    ]


def claims_of(stack: Stack) -> dict[str, str]:
    """Claim key -> owner, the backfill's own items left out."""
    items = dynamodb().scan(TableName=stack.claims, ConsistentRead=True)["Items"]
    return {
        item[CLAIM_KEY]["S"]: item[CLAIM_OWNER]["S"]
        for item in items
        if not item[CLAIM_KEY]["S"].startswith(BACKFILL_ITEM_PREFIX)
    }


def table_snapshot(stack: Stack) -> list[Any]:
    return sorted(
        json.dumps(item, sort_keys=True)
        for table in {stack.table, stack.aggregates, stack.claims}
        for item in dynamodb().scan(TableName=table, ConsistentRead=True)["Items"]
    )


def independent_shard(song: str, shards: int) -> int:
    return int.from_bytes(hashlib.sha256(song.encode()).digest()[:8], "big") % shards


# ------------------------------------------------------------------ the stream, as the test plays it


def stream_counts(stack: Stack, download: Written) -> str | None:
    """The aggregator's side of the claims: claim, and count only a download the stream now owns."""
    client = dynamodb()
    owner = owner_of(client.update_item(**stream_claim(stack.claims, download.key)))
    if owner != STREAM:
        return owner
    for board in download.boards(stack.periods):
        client.update_item(
            TableName=stack.aggregates,
            Key={"songID": {"S": download.song}, "SK": {"S": board}},
            UpdateExpression="ADD #count :one SET #period = :board, #order = if_not_exists(#order, :zero) + :scaled",
            ExpressionAttributeNames={"#count": "DownloadCount", "#period": "Month", "#order": "LeaderboardOrder"},
            ExpressionAttributeValues={
                ":one": {"N": "1"},
                ":board": {"S": board},
                ":zero": {"N": "0"},
                ":scaled": {"N": str(ORDER_SCALE)},
            },
        )
    return owner


@dataclass
class ClaimingModelAggregator(ModelAggregator):
    """The operator tools' model of the aggregator (the shipped AggregateStore's writes), claiming each download
    before counting it as the aggregator does while backfill_claims is on; a download the backfill claimed first
    only moves the checkpoint."""

    claims_table: str = ""
    left_to_backfill: int = 0

    def _count(self, shard_id: str, record: dict[str, Any]) -> None:
        image = record["dynamodb"].get("NewImage") or {}
        if record["eventName"] == "INSERT" and self.stack.names.period not in image and "Timestamp" in image:
            owner = owner_of(self._dynamodb.update_item(**stream_claim(self.claims_table, record["dynamodb"]["Keys"])))
            if owner == BACKFILL:
                self.left_to_backfill += 1
                record = {**record, "eventName": "MODIFY"}  # counted by the backfill: only the checkpoint moves
        super()._count(shard_id, record)

    def skip_to(self, count: int) -> None:
        """The checkpoint after the shard's first `count` records: what came before is trimmed history."""
        (shard_id,) = self.shard_ids()
        self._count(shard_id, {**self._records(shard_id, None)[count - 1], "eventName": "MODIFY"})


# ------------------------------------------------------------------ the backfill, with a fake clock


class FakeTime:
    """An interval clock that only sleeps move; the sleeps are recorded."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def clock(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now += seconds


class Hooked:
    """The moto client with hooks: `before_scan(n)` before the n-th Scan (1-based), `before_transact(n, request)` and
    `after_transact(n, request)` around the n-th TransactWriteItems; everything else goes straight to moto."""

    def __init__(
        self,
        client: Any,
        before_scan: Callable[[int], None] | None = None,
        before_transact: Callable[[int, dict[str, Any]], None] | None = None,
        after_transact: Callable[[int, dict[str, Any]], None] | None = None,
        after_scan: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
    ) -> None:
        self._client = client
        self._before_scan = before_scan
        self._after_scan = after_scan
        self._before_transact = before_transact
        self._after_transact = after_transact
        self.scans = 0
        self.transactions: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def scan(self, **request: Any) -> Any:
        with self._lock:
            self.scans += 1
            number = self.scans
        if self._before_scan and "Segment" in request:
            self._before_scan(number)
        page = self._client.scan(**request)
        if self._after_scan:
            self._after_scan(request, page)
        return page

    def transact_write_items(self, **request: Any) -> Any:
        with self._lock:
            self.transactions.append(request)
            number = len(self.transactions)
        if self._before_transact:
            self._before_transact(number, request)
        answer = self._client.transact_write_items(**request)
        if self._after_transact:
            self._after_transact(number, request)
        return answer


def backfill(stack: Stack, client: Any = None, time: FakeTime | None = None, **settings: Any) -> Backfill:
    clients = operator_clients(region=REGION)
    fake = time or FakeTime()
    return Backfill(
        client or clients.dynamodb,
        discover(clients, stack.table),
        clock=fake.clock,
        sleep=fake.sleep,
        jitter=lambda: 0.0,
        **({"segments": 3, "page_size": 7, "max_read_units": 10_000.0} | settings),
    )


def claims_in(request: dict[str, Any]) -> list[str]:
    return [action["Put"]["Item"][CLAIM_KEY]["S"] for action in request["TransactItems"] if "Put" in action]


# ------------------------------------------------------------------ 1. the history, exactly, in every board


@pytest.mark.parametrize(
    ("separate", "shards", "marker"),
    [(False, 1, False), (True, 4, True)],
    ids=["aggregates-beside-one-shard", "aggregates-apart-four-shards-marked"],
)
def test_the_history_is_counted_exactly_into_every_board_and_shard(
    aws: None, separate: bool, shards: int, marker: bool
) -> None:
    # given 61 downloads over five songs, two periods (months, days) and two genres, two it cannot count, and (where
    # downloads are marked) items of other types
    stack = stack_with_claims(shards=shards, separate=separate, marker=marker)
    write_history(stack, 61)
    rejected = write_rejected(stack)
    if marker:
        for song in SONGS:
            dynamodb().put_item(
                TableName=stack.table,
                Item={"songID": {"S": song}, "SK": {"S": "meta"}, "type": {"S": "SONG"}, "Timestamp": {"S": "x"}},
            )
    # when the backfill runs (three segments, pages of 7)
    report = backfill(stack).run()
    # then every board holds exactly the downloads written in it
    assert report.status == DONE
    assert stored(stack) == stack.oracle()
    assert {board for _, board in stack.oracle()} >= {"2018-03", "2018-04", "2018-03-10@rock", "2018-04-01@jazz"}
    # and each aggregate sits in its song's leaderboard shard, ordered by its count
    for item in aggregate_items(stack):
        song, board, count = item["songID"]["S"], item["SK"]["S"], int(item["DownloadCount"]["N"])
        assert item["Month"]["S"] == (board if shards == 1 else f"{board}#{independent_shard(song, shards)}")
        assert int(item["LeaderboardOrder"]["N"]) // ORDER_SCALE == count
    # and the report says what was counted per board, and what was rejected, with why
    assert report.run.counted == 61
    assert dict(report.run.boards) == dict(
        Counter(board for download in stack.written for board in download.boards(stack.periods))
    )
    assert report.run.rejected == 2
    assert sorted(example["key"]["SK"]["S"] for example in report.run.rejected_examples) == ["bad-none", "bad-text"]
    assert all(example["reason"] for example in report.run.rejected_examples)
    # and every counted download is claimed by the backfill; the rejected and other items are not claimed
    assert claims_of(stack) == {claim_key(download.key): BACKFILL for download in stack.written}
    assert not {claim_key(key) for key in rejected} & set(claims_of(stack))
    assert report.ended_at is not None


# ------------------------------------------------------------------ 2. the stream's claims


def test_downloads_the_stream_claimed_first_are_left_to_it(aws: None) -> None:
    # given 40 downloads of which the stream delivered 8 while the claims were on: claimed and counted by it
    stack = stack_with_claims(separate=True)
    history = write_history(stack, 40)
    streamed = history[::5]
    assert [stream_counts(stack, download) for download in streamed] == [STREAM] * 8
    # when the backfill runs
    report = backfill(stack).run()
    # then each download is counted once: the 9 by the stream, the rest by the backfill
    assert stored(stack) == stack.oracle()
    assert (report.run.counted, report.run.claimed_by_stream, report.run.claimed_by_backfill) == (32, 8, 0)
    assert Counter(claims_of(stack).values()) == {STREAM: 8, BACKFILL: 32}


def test_the_aggregator_and_the_backfill_race_and_every_download_counts_once(aws: None) -> None:
    # given a guide-layout stack (months) whose aggregator claims: 30 downloads of history, of which the stream still
    # holds the last 10 (the first 20 are older than its retention), then 5 downloads written since; the aggregator
    # has read 4 records (history) so far
    stack = stack_with_claims(periods="month", category=False)
    write_history(stack, 30, genres=False)
    aggregator = ClaimingModelAggregator(stack.moto, claims_table=stack.claims)
    aggregator.skip_to(20)
    live = [write(stack, SONGS[n], f"live{n}", "2018-04-02T08:00:00Z") for n in range(5)]
    aggregator.run(limit=4)
    # and, while the backfill scans, 4 more downloads come and the aggregator reads 3 more records
    during: list[Written] = []

    def stream_meanwhile(number: int) -> None:
        if number == 3:
            during.extend(write(stack, SONGS[n], f"during{n}", "2018-04-03T09:00:00Z") for n in range(4))
            aggregator.run(limit=3)

    # when the backfill runs, and the aggregator reads the rest of the stream after it
    report = backfill(stack, Hooked(dynamodb(), before_scan=stream_meanwhile), segments=2, page_size=5).run()
    aggregator.run()
    # then every download written (history, live, during) is counted exactly once
    assert report.status == DONE
    assert len(stack.written) == 30 + len(live) + len(during)
    assert stored(stack) == stack.oracle()
    # and each was claimed by one of them: the backfill found the stream's 4 (and up to 3 more), the aggregator left
    # to the backfill what it claimed first (at least the 3 history and 5 live records it had not read)
    owners = Counter(claims_of(stack).values())
    assert owners[STREAM] + owners[BACKFILL] == len(stack.written)
    assert 4 <= report.run.claimed_by_stream <= 7
    assert aggregator.left_to_backfill >= 8


# ------------------------------------------------------------------ 3. killed, resumed, run again


def test_a_run_killed_midway_resumes_and_counts_exactly(aws: None) -> None:
    # given 50 downloads, and a backfill killed before its fourth page is read
    stack = stack_with_claims(separate=True)
    write_history(stack, 50)

    def kill_at_the_fourth_page(number: int) -> None:
        if number == 4:
            raise Killed

    with pytest.raises(Killed):
        backfill(stack, Hooked(dynamodb(), before_scan=kill_at_the_fourth_page), segments=1, page_size=6).run()
    partial = sum(stored(stack).values())
    assert 0 < partial < sum(stack.oracle().values())
    # when it is run again
    report = backfill(stack, segments=1, page_size=6).run()
    # then it went on from the saved page: every download counted once, none of the first pages read again
    assert report.status == DONE
    assert stored(stack) == stack.oracle()
    assert report.run.items_scanned == 50 - 3 * 6
    assert report.total is not None
    assert (report.total.counted, report.total.items_scanned) == (50, 50)


def test_a_run_killed_between_a_transaction_and_its_saved_place_counts_nothing_twice(aws: None) -> None:
    # given 50 downloads, and a backfill killed just after its third transaction was written, before its page's place
    # was saved
    stack = stack_with_claims(separate=True)
    write_history(stack, 50)

    def kill_after_the_third(number: int, request: dict[str, Any]) -> None:
        if number == 3:
            raise Killed

    with pytest.raises(Killed):
        backfill(stack, Hooked(dynamodb(), after_transact=kill_after_the_third), segments=2, page_size=10).run()
    # when it is run again: the page is read again
    report = backfill(stack, segments=2, page_size=10).run()
    # then what the killed run counted is found claimed, and counted nothing twice
    assert stored(stack) == stack.oracle()
    assert report.run.claimed_by_backfill > 0
    assert Counter(claims_of(stack).values()) == {BACKFILL: 50}


def test_a_finished_backfill_run_again_changes_nothing_and_without_its_places_counts_nothing_twice(aws: None) -> None:
    # given a finished backfill of 40 downloads
    stack = stack_with_claims()
    write_history(stack, 40)
    first = backfill(stack).run()
    assert first.status == DONE
    before = table_snapshot(stack)
    # when it is run again
    again = backfill(stack).run()
    # then it says it is done and changes nothing
    assert again.status == ALREADY_DONE
    assert again.ended_at == first.ended_at
    assert table_snapshot(stack) == before
    # and when its own items are deleted (every saved place and the done item) and it runs once more
    client = dynamodb()
    for item in client.scan(TableName=stack.claims)["Items"]:
        if item[CLAIM_KEY]["S"].startswith(BACKFILL_ITEM_PREFIX):
            client.delete_item(TableName=stack.claims, Key={CLAIM_KEY: item[CLAIM_KEY]})
    rescan = backfill(stack).run()
    # then the claims alone keep every count: all 40 were found claimed by the backfill
    assert rescan.status == DONE
    assert stored(stack) == stack.oracle()
    assert (rescan.run.counted, rescan.run.claimed_by_backfill) == (0, 40)


# ------------------------------------------------------------------ 4. a cancelled transaction


def test_a_transaction_cancelled_by_claims_taken_meanwhile_is_sent_again_without_them(aws: None) -> None:
    # given 20 downloads, and the stream claiming (and counting) two of those in the backfill's first transaction just
    # before it is written
    stack = stack_with_claims()
    write_history(stack, 20)
    by_claim = {claim_key(download.key): download for download in stack.written}
    taken: list[str] = []

    def stream_first(number: int, request: dict[str, Any]) -> None:
        if number == 1:
            taken.extend(claims_in(request)[1:3])
            for claim in taken:
                assert stream_counts(stack, by_claim[claim]) == STREAM

    client = Hooked(dynamodb(), before_transact=stream_first)
    # when the backfill runs
    report = backfill(stack, client, segments=1, page_size=20).run()
    # then DynamoDB cancelled the first (CancellationReasons: those two claims' conditions) and the second is the
    # same without them, written
    first, second = client.transactions[:2]
    assert claims_in(second) == [claim for claim in claims_in(first) if claim not in taken]
    assert report.run.retries == 1
    assert report.run.claimed_by_stream == 2
    # and every download is counted once
    assert stored(stack) == stack.oracle()


def cancelled(*codes: str) -> ClientError:
    reasons = [{"Code": code, "Message": code} if code != "None" else {"Code": "None"} for code in codes]
    return ClientError(
        {"Error": {"Code": "TransactionCanceledException", "Message": "cancelled"}, "CancellationReasons": reasons},
        "TransactWriteItems",
    )


class ConflictFirst:
    """TransactWriteItems cancelled by a conflict (on its first aggregate) `times` times, then written by moto."""

    def __init__(self, times: int) -> None:
        self.left = times

    def __call__(self, number: int, request: dict[str, Any]) -> None:
        if self.left:
            self.left -= 1
            codes = ["None"] * len(request["TransactItems"])
            codes[len(claims_in(request))] = "TransactionConflict"
            raise cancelled(*codes)


def test_a_transaction_cancelled_by_a_conflict_is_sent_again_after_a_growing_pause(aws: None) -> None:
    # given 10 downloads, and the first transaction cancelled by conflicts three times (botocore does not retry a
    # cancelled transaction)
    stack = stack_with_claims()
    write_history(stack, 10)
    time = FakeTime()
    client = Hooked(dynamodb(), before_transact=ConflictFirst(3))
    # when the backfill runs
    report = backfill(stack, client, time, segments=1, page_size=10).run()
    # then it was sent four times, the same each time, after growing pauses, and counted once
    assert len(client.transactions) == 4
    assert len({json.dumps(request, sort_keys=True) for request in client.transactions}) == 1
    pauses = [pause for pause in time.sleeps if pause >= 0.05]
    assert pauses == sorted(pauses)
    assert len(pauses) == 3
    assert report.run.retries == 3
    assert stored(stack) == stack.oracle()


def test_a_transaction_that_keeps_conflicting_leaves_the_run_unfinished_and_the_next_run_finishes(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given 10 downloads whose transaction conflicts more often than the backfill sends it
    stack = stack_with_claims()
    write_history(stack, 10)
    # when the backfill runs
    report = backfill(stack, Hooked(dynamodb(), before_transact=ConflictFirst(MAX_ATTEMPTS)), segments=1).run()
    # then it stops unfinished, having counted nothing of that page and saved no place past it
    assert report.status == UNFINISHED
    assert "conflicts or throttling" in (report.error or "")
    assert stored(stack) == {}
    # and the next run (the command: exit code 0) counts it all
    assert run(["backfill", "--table", stack.table, "--segments", "1", "--json"]) == 0
    assert stored(stack) == stack.oracle()
    assert json.loads(capsys.readouterr().out)["status"] == DONE


def test_a_repaired_aggregate_stops_the_backfill_rather_than_count_its_history_twice(aws: None) -> None:
    # given 10 downloads of song1 in March, whose month aggregate `reconcile --repair` already recounted (its fence)
    stack = stack_with_claims(periods="month", category=False)
    for n in range(10):
        write(stack, "song1", f"d{n}", "2018-03-10T10:00:00Z")
    dynamodb().put_item(
        TableName=stack.aggregates,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "2018-03"},
            "Month": {"S": "2018-03"},
            "DownloadCount": {"N": "10"},
            "LeaderboardOrder": {"N": str(10 * ORDER_SCALE)},
            "RecountedThrough": {"N": "1700000000"},
        },
    )
    # when the backfill runs
    report = backfill(stack).run()
    # then it stops, saying why, and the count stays the recount's
    assert report.status == STOPPED
    assert "reconcile --repair" in (report.error or "")
    assert stored(stack) == {("song1", "2018-03"): 10}
    assert claims_of(stack) == {}


# ------------------------------------------------------------------ 5. a backfill without claims double counts


def naive_backfill(stack: Stack) -> None:
    """A scan that simply adds each download to its boards: no claims."""
    client = dynamodb()
    for item in client.scan(TableName=stack.table, ConsistentRead=True)["Items"]:
        if "Month" in item or "Timestamp" not in item:
            continue
        download = Written(item["songID"]["S"], item["SK"]["S"], item["Timestamp"]["S"], item.get(GENRE, {}).get("S"))
        for board in download.boards(stack.periods):
            client.update_item(
                TableName=stack.aggregates,
                Key={"songID": {"S": download.song}, "SK": {"S": board}},
                UpdateExpression="ADD #count :one SET #period = :board",
                ExpressionAttributeNames={"#count": "DownloadCount", "#period": "Month"},
                ExpressionAttributeValues={":one": {"N": "1"}, ":board": {"S": board}},
            )


def streamed_scenario(name: str) -> Stack:
    """30 downloads of history in a separate aggregates table; the stream delivered (claimed and counted) 6 of them."""
    stack = stack_with_claims(name, separate=True)
    history = write_history(stack, 30)
    for download in history[:6]:
        assert stream_counts(stack, download) == STREAM
    return stack


def test_a_backfill_without_claims_counts_twice_what_the_stream_counted(aws: None) -> None:
    # given the same history, the stream having counted 6 of its downloads, twice
    naive, claimed = streamed_scenario("naive"), streamed_scenario("claimed")
    # when one is backfilled by a scan that simply adds, the other by the backfill
    naive_backfill(naive)
    backfill(claimed).run()
    # then the naive one counted the stream's downloads twice: it fails the oracle, by exactly those
    doubled = naive.oracle(naive.written[:6])
    assert stored(naive) != naive.oracle()
    assert Counter(stored(naive)) - naive.oracle() == doubled
    # and the backfill meets it
    assert stored(claimed) == claimed.oracle()


# ------------------------------------------------------------------ 6. refusals


def test_a_deployment_whose_aggregator_claims_nothing_is_refused(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    # given a stack without backfill_claims, and its history
    stack = stack_with_claims(claims=False)
    write_history(stack, 5)
    # when the backfill is run
    code = run(["backfill", "--table", stack.table])
    # then it is refused, saying why, and nothing was written
    assert code == 1
    assert "CLAIMS_TABLE_NAME" in capsys.readouterr().err
    assert stored(stack) == {}


def test_a_deployment_that_sums_is_refused(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    # given a stack that sums the downloads' Bytes
    stack = stack_with_claims(settings={"SUM_ATTRIBUTE": "Bytes"})
    write_history(stack, 5)
    # when the backfill is run
    code = run(["backfill", "--table", stack.table])
    # then it is refused as not supported yet, and nothing was written
    assert code == 1
    assert "not supported yet" in capsys.readouterr().err
    assert (stored(stack), claims_of(stack)) == ({}, {})


def test_a_deployment_following_retractions_is_refused(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    # given a stack whose aggregator follows edits and deletions (retractions) and claims downloads
    stack = stack_with_claims(settings={"RETRACTIONS": "true"})
    write_history(stack, 5)
    # when the backfill is run
    code = run(["backfill", "--table", stack.table])
    # then it is refused, saying why and what to do instead, and nothing was written
    assert code == 1
    error = capsys.readouterr().err
    assert "RETRACTIONS=true" in error
    assert "Apply retractions = false" in error
    assert (stored(stack), claims_of(stack)) == ({}, {})


def test_a_history_edited_and_deleted_before_the_backfill_is_counted_as_its_items_are_now(aws: None) -> None:
    # given a history whose downloads were edited across a month and across genres, some deleted, one deleted and
    # written again under its key, before the backfill (retractions off while it runs, as the refusal above asks)
    stack = stack_with_claims()
    history = write_history(stack, 12)
    moved = write(stack, history[0].song, history[0].sk, "2018-04-01T00:00:00Z", history[0].genre)
    regenred = write(stack, history[1].song, history[1].sk, history[1].timestamp, "jazz")
    for gone in history[2:6]:
        dynamodb().delete_item(TableName=stack.table, Key=gone.key)
    rewritten = write(stack, history[5].song, history[5].sk, history[5].timestamp, history[5].genre)
    # when the backfill runs
    report = backfill(stack).run()
    # then every board holds the downloads as the table holds them now: the last image of each key left
    now = {download.key["SK"]["S"]: download for download in [*history[6:], moved, regenred, rewritten]}
    assert report.status == DONE
    assert stored(stack) == stack.oracle(list(now.values()))


def claims_created_later(stack: Stack, minutes: int) -> None:
    """The claims table as a later apply would have created it: `minutes` after the progress table."""
    from moto.backends import get_backend

    from tests.unit.tools.operator_stack import DEFAULT_ACCOUNT_ID

    backend = get_backend("dynamodb")[DEFAULT_ACCOUNT_ID][REGION]
    progress = backend.get_table(stack.moto.progress_table)
    backend.get_table(stack.claims).created_at = progress.created_at + timedelta(minutes=minutes)


def test_claims_created_well_after_the_aggregator_counted_are_refused(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given claims turned on 20 minutes after the module, whose aggregator had counted a download meanwhile
    stack = stack_with_claims()
    write_history(stack, 5)
    stream_counts(stack, stack.written[0])
    dynamodb().delete_item(TableName=stack.claims, Key={CLAIM_KEY: {"S": claim_key(stack.written[0].key)}})
    claims_created_later(stack, 20)
    before = table_snapshot(stack)
    # when the backfill is run
    code = run(["backfill", "--table", stack.table])
    # then it is refused, pointing at reconcile --repair, and nothing was written
    assert code == 1
    error = capsys.readouterr().err
    assert "reconcile --repair" in error
    assert "before it claimed them" in error
    assert table_snapshot(stack) == before


def test_claims_created_later_before_any_aggregate_are_accepted(aws: None) -> None:
    # given claims turned on 20 minutes after the module, before the aggregator counted anything
    stack = stack_with_claims()
    write_history(stack, 5)
    claims_created_later(stack, 20)
    # when the backfill is run, and run again
    assert run(["backfill", "--table", stack.table]) == 0
    assert run(["backfill", "--table", stack.table]) == 0
    # then the history is counted, and the second run, finding the backfill's own aggregates, was not refused
    assert stored(stack) == stack.oracle()


def test_other_segments_than_an_unfinished_runs_are_refused(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    # given a backfill in 3 segments left unfinished
    stack = stack_with_claims()
    write_history(stack, 30)
    always = ConflictFirst(10**6)
    unfinished = backfill(stack, Hooked(dynamodb(), before_transact=always), segments=3).run()
    assert unfinished.status == UNFINISHED
    before = table_snapshot(stack)
    # when it is run again in 4
    code = run(["backfill", "--table", stack.table, "--segments", "4"])
    # then it is refused, naming the saved segments, and nothing was written
    assert code == 1
    assert "--segments 3" in capsys.readouterr().err
    assert table_snapshot(stack) == before
    with pytest.raises(BackfillRefused):
        backfill(stack, segments=2).run()
    # and in 3 it finishes
    assert run(["backfill", "--table", stack.table, "--segments", "3"]) == 0
    assert stored(stack) == stack.oracle()


# ------------------------------------------------------------------ 7. pacing


def test_the_scan_consumes_at_most_the_read_units_allowed_a_second(aws: None) -> None:
    # given 40 downloads read a page of 2 at a time by 3 segments, at most 4 read units a second
    stack = stack_with_claims()
    write_history(stack, 40)
    time = FakeTime()
    reads: list[tuple[float, float]] = []
    client = Hooked(
        dynamodb(),
        after_scan=lambda request, page: reads.append((time.clock(), page["ConsumedCapacity"]["CapacityUnits"])),
    )
    # when the backfill runs on a fake clock
    report = backfill(stack, client, time, segments=3, page_size=2, max_read_units=4.0).run()
    # then over every interval the units consumed stay within 4 a second (one second's burst at most), and on the
    # whole within 4 a second
    assert report.status == DONE
    units = [consumed for _, consumed in reads]
    started = 1000.0
    for first in range(len(reads)):
        for last in range(first, len(reads)):
            assert sum(units[first : last + 1]) <= 4.0 * (reads[last][0] - reads[first][0]) + 4.0 + max(units)
    assert sum(units) <= 4.0 * (reads[-1][0] - started) + max(units)
    assert report.run.read_units == pytest.approx(sum(units))


def test_the_pacer_keeps_pages_of_any_cost_within_the_rate() -> None:
    # given a pacer of 10 units a second, and pages whose cost is only known once read (1 to 30 units)
    time = FakeTime()
    pacer = ReadPacer(10.0, time.clock, time.sleep)
    costs = [1, 1, 30, 2, 2, 25, 0.5, 0.5, 8, 12, 3, 3, 3, 30, 1] * 4
    spent: list[tuple[float, float]] = []
    # when each page takes its estimate, is read, then settles
    for cost in costs:
        estimate = pacer.acquire()
        spent.append((time.clock(), cost))
        pacer.settle(estimate, cost)
    # then over every interval the cost stays within the rate, one second's burst and one page's surprise
    for first in range(len(spent)):
        for last in range(first, len(spent)):
            window = sum(cost for _, cost in spent[first : last + 1])
            assert window <= 10.0 * (spent[last][0] - spent[first][0]) + 10.0 + max(costs)
    assert sum(costs) <= 10.0 * (spent[-1][0] - 1000.0) + max(costs)


# ------------------------------------------------------------------ the transactions' shape, and the command


def test_a_chunk_holds_at_most_100_actions_on_distinct_items() -> None:
    # given 60 downloads of three songs, each counting in 12 boards
    downloads = [
        ScannedDownload(
            {"songID": {"S": f"song{n % 3}"}, "SK": {"S": f"d{n}"}},
            f"download#{n}",
            f"song{n % 3}",
            tuple(f"board{(n + b) % 20}" for b in range(12)),
        )
        for n in range(60)
    ]
    # when they are grouped into transactions
    grouped = list(chunks(downloads))
    # then each holds at most 100 actions, no item twice, and every download is in exactly one
    assert [download for chunk in grouped for download in chunk] == downloads
    for chunk in grouped:
        items, aggregates = transaction_items(chunk, _deployment(), "music-claims")
        assert len(items) <= 100
        keys = [json.dumps(next(iter(action.values())).get("Key") or action["Put"]["Item"]) for action in items]
        assert len(keys) == len(set(keys))
        assert len(aggregates) == len({(d.entity, board) for d in chunk for board in d.boards})


def _deployment() -> Any:
    from leaderboard_core.attributes import AttributeNames
    from leaderboard_tools.deployment import Deployment

    return Deployment(
        table="music-downloads",
        table_arn="arn",
        stream_arn=None,
        names=AttributeNames(),
        leaderboard_shards=1,
        query_leaderboard_shards=1,
        query_leaderboard_shards_previous=None,
        ttl_attribute=None,
        window_seconds=None,
        failure_queue_url=None,
        progress_table="music-progress",
        aggregator_function=None,
        query_function=None,
        mapping_uuid=None,
        mapping_state=None,
        claims_table="music-claims",
    )


def test_the_command_reports_and_says_what_the_operator_does_next(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given 12 downloads and one the aggregator rejects
    stack = stack_with_claims()
    write_history(stack, 12)
    write_rejected(stack)
    # when the backfill command runs, then again
    first = run(["backfill", "--table", stack.table, "--json"])
    report = json.loads(capsys.readouterr().out)
    second = run(["backfill", "--table", stack.table])
    text = capsys.readouterr().out
    # then the first counted and reported, as one JSON object, and says to keep the claims on until the stream passed
    # the scan's end; the second says it is done and changed nothing
    assert (first, second) == (0, 0)
    assert report["status"] == DONE
    assert (report["counted"], report["rejected"], report["itemsScanned"]) == (12, 2, 14)
    assert sum(report["countedPerBoard"].values()) == sum(stack.oracle().values())
    assert report["readUnits"] > 0
    assert report["endedAt"]
    assert report["endedAt"] in report["next"]
    assert "backfill_claims = true" in report["next"]
    assert "backfill_claims = false" in report["next"]
    assert "changed nothing" in text
    assert "next:" in text
    assert stored(stack) == stack.oracle()
    done = dynamodb().get_item(TableName=stack.claims, Key={CLAIM_KEY: {"S": DONE_ITEM}})["Item"]
    assert done["EndedAtText"]["S"] == report["endedAt"]


def test_an_unfinished_run_exits_4_with_its_report(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given 10 downloads, and every transaction cancelled by conflicts more often than the backfill sends it
    stack = stack_with_claims()
    write_history(stack, 10)
    monkeypatch.setattr("leaderboard_tools.backfill.transactions.BACKOFF_CAP_SECONDS", 0.0)
    monkeypatch.setattr(
        "leaderboard_tools.backfill.transactions.PageTransactions._transact",
        lambda self, chunk, tally, segment, read_at=None: (_ for _ in ()).throw(
            BackfillUnfinished("conflicts or throttling 10 times")
        ),
    )
    # when the backfill command runs
    code = run(["backfill", "--table", stack.table, "--json"])
    # then it exits 4 (run again), with its report, and says to run again
    report = json.loads(capsys.readouterr().out)
    assert code == 4
    assert report["status"] == UNFINISHED
    assert "again" in report["next"]
    assert stored(stack) == {}


# ------------------------------------------------------------------ 8. a repair waits for the backfill


def test_a_repair_is_refused_until_the_backfill_has_counted_the_whole_table(aws: None) -> None:
    # given a history of 10 downloads, claims on, and no backfill finished yet
    stack = stack_with_claims(periods="month", category=False)
    for n in range(10):
        write(stack, "song1", f"d{n}", "2018-03-10T10:00:00Z")
    clients = operator_clients(region=REGION)
    reconciler = Reconciler(clients, discover(clients, stack.table))
    # when a repair of the month is asked for, then it is refused, saying why, and nothing is written
    with pytest.raises(RepairUnavailable, match="backfill"):
        reconciler.run({"2018-03": None}, repair=True)
    assert stored(stack) == {}
    # when the backfill has counted the table, then the month is exact and a repair finds nothing to change
    assert backfill(stack).run().status == DONE
    assert stored(stack) == {("song1", "2018-03"): 10}
    run = Reconciler(clients, discover(clients, stack.table), clock_margin_seconds=0).run({"2018-03": None})
    assert run.exact


# ------------------------------------------------------------------ 9. when the claims may go; a later apply


def test_the_claims_may_go_only_once_the_aggregator_has_counted_past_the_backfills_end(aws: None) -> None:
    # given 10 downloads on the stream that a backfill counted first, before the aggregator read any of them
    stack = stack_with_claims(periods="month", category=False)
    write_history(stack, 10, genres=False)
    clients = operator_clients(region=REGION)
    assert release_check(clients, discover(clients, stack.table)).ended_at is None
    assert backfill(stack).run().status == DONE
    # when the release is checked, then the 10 records created before the backfill's end are still to be counted
    # past: the claims must stay (turned off now, the aggregator would count the 10 again)
    before = release_check(clients, discover(clients, stack.table))
    assert (before.waiting, before.releasable) == (10, False)
    assert run(["backfill", "--table", stack.table, "--release-check"]) == 4
    # when the aggregator has read them (each left to the backfill), then the claims may go
    aggregator = ClaimingModelAggregator(stack.moto, claims_table=stack.claims)
    aggregator.run()
    assert aggregator.left_to_backfill == 10
    after = release_check(clients, discover(clients, stack.table))
    assert (after.waiting, after.releasable) == (0, True)
    assert run(["backfill", "--table", stack.table, "--release-check"]) == 0
    assert stored(stack) == stack.oracle()


def test_claims_a_minute_newer_than_the_progress_table_are_refused_once_the_aggregator_counted(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given claims turned on by a second apply a minute after the module, whose aggregator had counted a download
    stack = stack_with_claims()
    write_history(stack, 5)
    stream_counts(stack, stack.written[0])
    dynamodb().delete_item(TableName=stack.claims, Key={CLAIM_KEY: {"S": claim_key(stack.written[0].key)}})
    claims_created_later(stack, 1)
    # when the backfill is run, then it is refused: it would count that download again
    assert run(["backfill", "--table", stack.table]) == 1
    assert "before it claimed them" in capsys.readouterr().err


def test_a_run_that_ends_after_another_makes_its_end_the_one_the_claims_must_outlive(aws: None) -> None:
    # given another run that finishes (its end in the done item) while this run is still scanning
    stack = stack_with_claims(periods="month", category=False)
    write_history(stack, 10, genres=False)

    def another_run_finishes(number: int) -> None:
        if number == 2:
            dynamodb().put_item(TableName=stack.claims, Item={CLAIM_KEY: {"S": DONE_ITEM}, "EndedAt": {"N": "1000"}})

    # when this run finishes
    report = backfill(stack, Hooked(dynamodb(), before_scan=another_run_finishes), segments=1, page_size=3).run()
    # then the done item holds this run's later end: it may have claimed downloads written after the other's end
    item = dynamodb().get_item(TableName=stack.claims, Key={CLAIM_KEY: {"S": DONE_ITEM}})["Item"]
    assert report.ended_at is not None
    assert float(item["EndedAt"]["N"]) == report.ended_at > 1000
