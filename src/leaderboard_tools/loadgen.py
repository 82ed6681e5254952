"""Synthetic downloads: a skewed (Zipf-like) spread over songs and months, reproducible from a seed."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

BATCH_WRITE_LIMIT = 25


@dataclass(frozen=True)
class Download:
    song_id: str
    download_id: str
    user_id: str
    timestamp: str

    @property
    def month(self) -> str:
        return self.timestamp[:7]

    def as_item(self) -> dict[str, Any]:
        return {
            "songID": {"S": self.song_id},
            "SK": {"S": self.download_id},
            "UserID": {"S": self.user_id},
            "Timestamp": {"S": self.timestamp},
        }


def zipf_downloads(
    count: int,
    songs: int = 100,
    months: tuple[str, ...] = ("2018-01", "2018-02"),
    seed: int = 2018,
    exponent: float = 1.1,
) -> list[Download]:
    """Song k is drawn with weight 1/k**exponent, so a few songs dominate as in a real catalogue."""
    rng = random.Random(seed)
    song_ids = [f"song{index:03d}" for index in range(1, songs + 1)]
    weights = [1 / rank**exponent for rank in range(1, songs + 1)]
    downloads = []
    for song_id in rng.choices(song_ids, weights=weights, k=count):
        month = rng.choice(months)
        day, hour, minute, second = rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)
        downloads.append(
            Download(
                song_id=song_id,
                download_id=f"download-{rng.getrandbits(96):024x}",
                user_id=f"user{rng.randint(1, 5000):05d}",
                timestamp=f"{month}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z",
            )
        )
    return downloads


def true_counts(downloads: Iterable[Download]) -> dict[str, Counter[str]]:
    """Per month, each song's number of downloads: what the aggregates must converge to."""
    counts: dict[str, Counter[str]] = {}
    for download in downloads:
        counts.setdefault(download.month, Counter())[download.song_id] += 1
    return counts


def write_items(
    dynamodb: Any,
    table_name: str,
    items: list[dict[str, Any]],
    on_progress: Callable[[int], None] = lambda written: None,
    workers: int = 4,
) -> None:
    """BatchWriteItem in chunks of 25, resending unprocessed items until every one is written."""

    def write_chunk(chunk: list[dict[str, Any]]) -> int:
        requests = {table_name: [{"PutRequest": {"Item": item}} for item in chunk]}
        for _ in range(20):
            unprocessed = dynamodb.batch_write_item(RequestItems=requests).get("UnprocessedItems") or {}
            if not unprocessed:
                return len(chunk)
            requests = unprocessed
        raise RuntimeError(f"{len(requests[table_name])} items stayed unprocessed after 20 attempts")

    chunks = [items[start : start + BATCH_WRITE_LIMIT] for start in range(0, len(items), BATCH_WRITE_LIMIT)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for written in pool.map(write_chunk, chunks):
            on_progress(written)
