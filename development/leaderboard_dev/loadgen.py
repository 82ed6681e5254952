"""Synthetic downloads: a skewed (Zipf-like) spread over songs and months, reproducible from a seed."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from leaderboard_core.buckets import month_of

BATCH_WRITE_LIMIT = 25


ZONES = (
    UTC,
    UTC,
    timezone(timedelta(hours=2)),
    timezone(timedelta(hours=-5)),
    timezone(timedelta(hours=5, minutes=30)),
)
"""Offsets writers put in their timestamps; near a month's edge the local month is not the UTC month."""


def utc_month(timestamp: str) -> str:
    """The UTC month a download counts in (no offset: UTC), as the aggregator derives it."""
    return month_of(timestamp)


@dataclass(frozen=True)
class Download:
    song_id: str
    download_id: str
    user_id: str
    timestamp: str

    @property
    def month(self) -> str:
        return utc_month(self.timestamp)

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
    """Song k is drawn with weight 1/k**exponent, so a few songs dominate as in a real catalogue.

    Each download happens at a random moment of one of `months` (UTC), a quarter of them in the
    first or last hours of the month, and is written with a random offset: the guide's
    `Timestamp[:7]` files some of them under the wrong month, the UTC month does not.
    """
    rng = random.Random(seed)
    song_ids = [f"song{index:03d}" for index in range(1, songs + 1)]
    weights = [1 / rank**exponent for rank in range(1, songs + 1)]
    downloads = []
    for song_id in rng.choices(song_ids, weights=weights, k=count):
        year, month = (int(part) for part in rng.choice(months).split("-"))
        start = datetime(year, month, 1, tzinfo=UTC)
        end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
        span = (end - start).total_seconds()
        offset = (
            rng.uniform(0, span)
            if rng.random() < 0.75
            else rng.choice([rng.uniform(0, 7200), span - rng.uniform(1, 7200)])
        )
        moment = (start + timedelta(seconds=int(offset))).astimezone(rng.choice(ZONES))
        downloads.append(
            Download(
                song_id=song_id,
                download_id=f"download-{rng.getrandbits(96):024x}",
                user_id=f"user{rng.randint(1, 5000):05d}",
                timestamp=moment.isoformat().replace("+00:00", "Z"),
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
    on_phase: Callable[[int], None] = lambda written: None,
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
            on_phase(written)
