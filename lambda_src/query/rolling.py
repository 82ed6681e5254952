"""Rolling windows: the exact top k of the sum over N buckets, merged at query time.

Each bucket's board is a list sorted by value, highest first, spread over its leaderboard
partitions. This is Fagin's threshold algorithm with lazy point reads:

- sorted access: the partitions are read from the top down, a page at a time; what a page shows
  is an entity's exact value in that bucket. A partition's last value read bounds every entry
  below it, so an entity not yet seen in a bucket has at most the highest such bound of the
  bucket's partitions, or 0 if it is absent (every partition read to its end: 0 exactly);
- point reads: an entity whose window total could still reach the top k is completed by reading
  its value in each bucket where it was not seen (one GetItem each; absent is 0);
- stop: the k best complete totals are certain when every incomplete entity's upper bound is
  below the k-th (or equal with a larger id) and the threshold (the sum of the buckets' bounds:
  the most an unseen entity can have) is below the k-th. Order: total descending, then id
  ascending by UTF-8 bytes, as every listing.

This module reads nothing itself: the caller passes the page and point readers (DynamoDB, with
the read budget and the clock) and learns from a missing result that a read was refused; the
answer is then the prefix of the top k that is already certain, flagged incomplete.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol

Value = int | Decimal
MAX_PAGE = 1000
"""Most entries a partition is asked for at once (each read doubles its partition's page, up to this)."""
ENTRIES_PER_POINT_READ = 40
"""Index entries (about 100 bytes each) one Query returns for the read units of one GetItem: DynamoDB rounds a
GetItem's item, and the total of a Query's items, up to the next 4 KB (Developer Guide, "Capacity unit
consumption for read operations"). Where reading on costs less than completing the contenders, it reads on."""


class Listed(Protocol):
    """What sorted access yields: an index entry of one bucket."""

    @property
    def entity_id(self) -> str: ...

    @property
    def count(self) -> Value: ...


PageReads = Callable[[list[tuple[str, int]]], dict[str, tuple[Sequence[Listed], bool]]]
"""[(partition, wanted)] -> {partition: (next entries, highest first; exhausted?)}; a partition missing was not read."""
PointReads = Callable[[list[tuple[str, str]]], dict[tuple[str, str], Value]]
"""[(bucket, entity)] -> {(bucket, entity): value, 0 if absent}; a pair missing was not read."""


@dataclass(frozen=True)
class Total:
    entity_id: str
    total: Value

    @property
    def sort_key(self) -> tuple[Value, bytes]:
        return (-self.total, self.entity_id.encode())


@dataclass
class Cursor:
    """How far sorted access went in one partition."""

    bucket: str
    last: Value | None = None
    """The value of the last entry read: a bound on every entry below it. None: nothing read yet."""
    exhausted: bool = False
    reads: int = 0


@dataclass
class Answer:
    items: list[Total]
    complete: bool
    """False: the budget or the clock stopped the reads; `items` is the certain prefix of the top k."""


@dataclass
class _Window:
    buckets: dict[str, list[str]]
    partitions_of: Callable[[str, str], list[str]]
    cursors: dict[str, Cursor] = field(init=False)
    known: dict[str, dict[str, Value]] = field(default_factory=dict)
    """entity -> bucket -> its exact value there."""

    def __post_init__(self) -> None:
        self.cursors = {p: Cursor(bucket) for bucket, partitions in self.buckets.items() for p in partitions}

    def bucket_bound(self, bucket: str, partitions: Iterable[str] | None = None) -> Value | None:
        """The most an entity not seen in `bucket` can have there (in these partitions); None: unbounded."""
        bound: Value = 0
        for partition in self.buckets[bucket] if partitions is None else partitions:
            cursor = self.cursors[partition]
            if cursor.exhausted:
                continue
            if cursor.last is None:
                return None
            bound = max(bound, cursor.last)
        return bound

    def threshold(self) -> Value | None:
        """The most an entity seen nowhere yet can total."""
        total: Value = 0
        for bucket in self.buckets:
            bound = self.bucket_bound(bucket)
            if bound is None:
                return None
            total += bound
        return total

    def settle_absences(self) -> None:
        """An entity not seen in a bucket whose partitions that can hold it are read to the end is absent: 0."""
        for entity, values in self.known.items():
            for bucket in self.buckets:
                if bucket not in values and all(
                    self.cursors[p].exhausted for p in self.partitions_of(bucket, entity) if p in self.cursors
                ):
                    values[bucket] = 0

    def upper(self, entity: str) -> Value | None:
        values = self.known[entity]
        total: Value = 0
        for bucket in self.buckets:
            if bucket in values:
                total += values[bucket]
                continue
            bound = self.bucket_bound(bucket, [p for p in self.partitions_of(bucket, entity) if p in self.cursors])
            if bound is None:
                return None
            total += bound
        return total

    def complete(self) -> list[Total]:
        done = [
            Total(entity, sum((values[b] for b in self.buckets), start=0))
            for entity, values in self.known.items()
            if len(values) == len(self.buckets)
        ]
        return sorted(done, key=lambda item: item.sort_key)

    def incomplete(self) -> list[tuple[str, Value | None]]:
        """Entities seen but not complete, with their upper bounds, highest (unbounded) first."""
        pending = [(e, self.upper(e)) for e, values in self.known.items() if len(values) < len(self.buckets)]
        return sorted(pending, key=lambda pair: (pair[1] is not None, -(pair[1] or 0), pair[0].encode()))

    def all_exhausted(self) -> bool:
        return all(cursor.exhausted for cursor in self.cursors.values())

    def apply(self, partition: str, entries: Sequence[Listed], exhausted: bool) -> None:
        cursor = self.cursors[partition]
        cursor.reads += 1
        for entry in entries:
            self.known.setdefault(entry.entity_id, {})[cursor.bucket] = entry.count
        if entries:
            cursor.last = entries[-1].count
        cursor.exhausted = exhausted

    def to_read(self, k: int) -> list[tuple[str, int]]:
        """The partitions whose reads lower the threshold most: per bucket, the upper half by last value."""
        wanted = []
        for partitions in self.buckets.values():
            open_ = [p for p in partitions if not self.cursors[p].exhausted]
            unread = [p for p in open_ if self.cursors[p].last is None]
            if unread:
                chosen = unread
            else:
                ranked = sorted(open_, key=lambda p: self.cursors[p].last or 0, reverse=True)
                chosen = ranked[: (len(ranked) + 1) // 2]
            first = max(k + 1, ENTRIES_PER_POINT_READ)  # fewer entries would cost the same read units
            wanted += [(p, min(MAX_PAGE, first * 2 ** self.cursors[p].reads)) for p in chosen]
        return wanted


def _units(wanted: list[tuple[str, int]]) -> int:
    """What reading these pages costs, in GetItems: each Query at least one, one more per 40 entries."""
    return sum(-(-count // ENTRIES_PER_POINT_READ) for _, count in wanted)


def _beats(upper: Value | None, entity: str, kth: Total) -> bool:
    """Whether an entity whose total is at most `upper` could list at or before the k-th."""
    return upper is None or upper > kth.total or (upper == kth.total and entity.encode() < kth.entity_id.encode())


def top_of_window(
    buckets: dict[str, list[str]],
    k: int,
    read_pages: PageReads,
    read_points: PointReads,
    partitions_of: Callable[[str, str], list[str]],
) -> Answer:
    """The exact top k of the window's totals; `buckets` maps each bucket's board to its partitions.

    `partitions_of(bucket, entity)` names the partitions of a bucket that can hold the entity (its
    leaderboard shard; two during a layout change), so that its bound there is its own partition's.
    """
    window = _Window(buckets, partitions_of)
    while True:
        window.settle_absences()
        ranked = window.complete()
        kth = ranked[k - 1] if len(ranked) >= k else None
        contenders = [entity for entity, upper in window.incomplete() if kth is None or _beats(upper, entity, kth)]
        missing = sum(len(buckets) - len(window.known[e]) for e in contenders)
        wanted = [] if window.all_exhausted() else window.to_read(k)
        if contenders and (not wanted or missing <= _units(wanted)):
            pairs = [(b, e) for e in contenders[:k] for b in buckets if b not in window.known[e]]
            values = read_points(pairs)
            for (bucket, entity), value in values.items():
                window.known[entity][bucket] = value
            if len(values) < len(pairs):
                return Answer(_certain(window, k), complete=False)
            continue
        threshold = window.threshold()
        if not contenders and (
            window.all_exhausted() or (kth is not None and threshold is not None and threshold < kth.total)
        ):
            return Answer(ranked[:k], complete=True)
        pages = read_pages(wanted)
        for partition, (entries, exhausted) in pages.items():
            window.apply(partition, entries, exhausted)
        if len(pages) < len(wanted):
            window.settle_absences()
            return Answer(_certain(window, k), complete=False)


def _certain(window: _Window, k: int) -> list[Total]:
    """The longest prefix of the complete totals that no other entity, seen or not, can precede."""
    threshold = window.threshold()
    pending = window.incomplete()
    certain = []
    for item in window.complete()[:k]:
        if not window.all_exhausted() and (threshold is None or threshold >= item.total):
            break
        if any(_beats(upper, entity, item) for entity, upper in pending):
            break
        certain.append(item)
    return certain
