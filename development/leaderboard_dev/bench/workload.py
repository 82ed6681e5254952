"""The benchmark's workload and the instruments every part shares: paced writes, aggregate reads, the stream.

One generator for every stack: Zipf with exponent 1.1 over 1,000 songs, a fixed seed per load,
each load in a month of its own (so that one stack can take several loads and each is checked on
its own). Times are taken on this client with `time.monotonic()`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import NotSettled
from leaderboard_dev.loadgen import BATCH_WRITE_LIMIT, Download, true_counts, utc_month, zipf_downloads

SONGS = 1000
ZIPF_EXPONENT = 1.1
WRITER_THREADS = 4
BATCH_GET_LIMIT = 100


def downloads_for(count: int, month: str, seed: int) -> list[Download]:
    """`count` downloads of one UTC month, the same for every stack that is given the same seed."""
    return zipf_downloads(count, songs=SONGS, months=(month,), seed=seed, exponent=ZIPF_EXPONENT)


def neighbour_months(month: str) -> tuple[str, str, str]:
    """The month and the two beside it: where the guide's `Timestamp[:7]` can file a download of `month`."""
    year, number = (int(part) for part in month.split("-"))
    before = f"{year - (number == 1):04d}-{(number - 2) % 12 + 1:02d}"
    after = f"{year + (number == 12):04d}-{number % 12 + 1:02d}"
    return before, month, after


def truth_of(downloads: Iterable[Download]) -> dict[tuple[str, str], int]:
    """Per (song, UTC month), the number of downloads: the oracle, computed from the generator alone."""
    return {(song, month): count for month, counts in true_counts(downloads).items() for song, count in counts.items()}


def say(message: str) -> None:
    """One timestamped line: the stacks run in parallel processes, so lines, not a live bar."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def phase_lines(label: str, total: int) -> Callable[[int], None]:
    """A write_paced `on_phase` that says each quarter of a load written (long loads take minutes)."""
    state = {"written": 0, "next": total // 4}

    def advance(written: int) -> None:
        state["written"] += written
        if total >= 10_000 and state["written"] >= state["next"] > 0:
            say(f"{label}: {state['written']:,} of {total:,} downloads written")
            state["next"] += total // 4

    return advance


@dataclass(frozen=True)
class WriteTiming:
    downloads: int
    seconds: float
    finished_at: float
    """time.monotonic() when the last write was acknowledged: freshness counts from here."""

    @property
    def rate(self) -> float:
        return self.downloads / self.seconds if self.seconds > 0 else 0.0


def write_paced(
    aws: Clients,
    table: str,
    downloads: list[Download],
    rate: float | None = None,
    on_phase: Callable[[int], None] = lambda written: None,
) -> WriteTiming:
    """BatchWriteItem in chunks of 25 from four threads; chunk k is due at start + 25·k / `rate` (None: at once)."""
    items = [download.as_item() for download in downloads]
    chunks = [items[start : start + BATCH_WRITE_LIMIT] for start in range(0, len(items), BATCH_WRITE_LIMIT)]
    started = time.monotonic()

    def write_chunk(numbered: tuple[int, list[dict[str, Any]]]) -> int:
        number, chunk = numbered
        if rate:
            delay = started + number * BATCH_WRITE_LIMIT / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        requests = {table: [{"PutRequest": {"Item": item}} for item in chunk]}
        for _ in range(20):
            unprocessed = aws.dynamodb.batch_write_item(RequestItems=requests).get("UnprocessedItems") or {}
            if not unprocessed:
                return len(chunk)
            requests = unprocessed
        raise RuntimeError(f"{len(requests[table])} items stayed unprocessed after 20 attempts")

    with ThreadPoolExecutor(max_workers=WRITER_THREADS) as pool:
        for written in pool.map(write_chunk, enumerate(chunks)):
            on_phase(written)
    finished = time.monotonic()
    return WriteTiming(len(items), finished - started, finished)


def read_aggregates(aws: Clients, table: str, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """The count of each (song, sort key) aggregate that exists, by consistent BatchGetItem: the same reader for all."""
    wanted = sorted(set(keys))
    found: dict[tuple[str, str], int] = {}
    for start in range(0, len(wanted), BATCH_GET_LIMIT):
        request: dict[str, Any] = {
            table: {
                "Keys": [{"songID": {"S": song}, "SK": {"S": month}} for song, month in wanted[start : start + 100]],
                "ConsistentRead": True,
                "ProjectionExpression": "songID, SK, DownloadCount",
            }
        }
        for _ in range(20):
            page = aws.dynamodb.batch_get_item(RequestItems=request)
            for item in page.get("Responses", {}).get(table, []):
                if "DownloadCount" in item:
                    found[(item["songID"]["S"], item["SK"]["S"])] = int(item["DownloadCount"]["N"])
            request = page.get("UnprocessedKeys") or {}
            if not request:
                break
    return found


def wait_for(condition: Callable[[], bool], timeout: float, interval: float, describe: str) -> float:
    """Poll until `condition` holds; return time.monotonic() when the read that saw it completed."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return time.monotonic()
        if time.monotonic() >= deadline:
            raise NotSettled(f"{describe} not reached within {timeout:.0f} s")
        time.sleep(interval)


def count_error(observed: dict[tuple[str, str], int], truth: dict[tuple[str, str], int]) -> dict[str, Any]:
    """Absolute error summed over every aggregate either side knows, and its parts, against the oracle."""
    errors = [observed.get(key, 0) - truth.get(key, 0) for key in set(observed) | set(truth)]
    downloads = sum(truth.values())
    absolute = sum(abs(error) for error in errors)
    return {
        "downloads": downloads,
        "counted": sum(observed.values()),
        "absolute": absolute,
        "relative": absolute / downloads if downloads else 0.0,
        "over_counted": sum(error for error in errors if error > 0),
        "missing": -sum(error for error in errors if error < 0),
        "wrong_aggregates": sum(1 for error in errors if error),
    }


@dataclass(frozen=True)
class StreamContents:
    """What a table's stream holds: each download with its aggregate key, and each aggregate write per song."""

    download_keys: dict[int, tuple[str, str]]
    """Sequence number → (song, UTC month) of each download inserted."""
    aggregate_writes: dict[tuple[str, str], int]
    """(song, month) → successful writes of that aggregate (its INSERT and MODIFY records)."""


def read_stream(aws: Clients, stream_arn: str) -> StreamContents:
    """Every record of every shard, from the trim horizon to the present (bounded: 100,000 pages)."""
    downloads: dict[int, tuple[str, str]] = {}
    writes: Counter[tuple[str, str]] = Counter()
    shards = aws.dynamodbstreams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
    for shard in shards:
        iterator = aws.dynamodbstreams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        for _ in range(100_000):
            page = aws.dynamodbstreams.get_records(ShardIterator=iterator, Limit=1000)
            for record in page.get("Records", []):
                image = record["dynamodb"].get("NewImage") or {}
                if "Month" in image and record["eventName"] in {"INSERT", "MODIFY"}:
                    writes[(image["songID"]["S"], image["SK"]["S"])] += 1
                elif record["eventName"] == "INSERT" and "Timestamp" in image:
                    key = (image["songID"]["S"], utc_month(image["Timestamp"]["S"]))
                    downloads[int(record["dynamodb"]["SequenceNumber"])] = key
            iterator = page.get("NextShardIterator")
            if not iterator or not page.get("Records"):
                break
    return StreamContents(downloads, dict(writes))
