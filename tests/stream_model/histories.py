"""Histories of deliveries as lists of steps, drawn by hypothesis, played on the model, judged by an oracle.

A history is a mapping configuration and a list of steps (`Write`, `Deliver`, `Direct`, `Wait`, `Pause`,
`Reshard`, `Heat`, `Land`; with `retractions`, also `Delete`, `Edit` and `Rewrite`; in ledger mode, also `Backfill`,
on a table with downloads from before its stream). Any list is a valid history: a
step that does not apply is a no-op, so hypothesis can shrink a failing history to a short story of deliveries, which
prints as Python and is kept as a regression test. After the steps, Lambda catches up without faults
(`World.drain`), the oracle checks that nothing is missing (or, for a retraction, left over) without a durable failure
record, the operator's `recover` acts on every failure record, and then every aggregate must equal the recount of the
table's downloads as they are at the end, plus those Time to Live deleted as they were (an expiry never changes a
count), by the oracle's own parser, not the aggregator's; an aggregate the shipped design keeps must sit in the
index as that recount ranks it, and out of it at 0. A design whose repair reads only the tables (one reader per
shard: the rebase) may miss a download written and expired within a range the stream trimmed before delivery, which
no repair can know, only where a report names that range (`reachable_truth`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

from tests.stream_model.aws_delivery import (
    FAULTS,
    MARKER,
    RETENTION_SECONDS,
    SCHEDULE_SECONDS,
    Delivery,
    MappingSettings,
    StreamRecord,
    World,
    Written,
    image_of,
)
from tests.stream_model.environment import TABLE, Design, Environment

TIMESTAMPS = (
    "2018-01-15T12:30:00Z",
    "2018-02-15T12:30:00Z",
    "2018-01-31T23:30:00-05:00",
    "2018-02-01T01:30:00+02:00",
    "2018-01-01T00:30:00Z",
    "2018-02-28T23:30:00Z",
    "2018-03-01T00:30:00+02:00",
    "2018-12-31T23:30:00Z",
    "2019-01-01T00:30:00+02:00",
)
"""Near month ends, some with offsets that move the UTC month; the last two in ISO week 2019-W01 of 2018."""
EDIT_TIMESTAMPS = (
    *TIMESTAMPS,
    "2019-01-01T00:30:00Z",
    "2018-01-01T00:30:00+02:00",
    "2018-12-31T22:00:00-05:00",
    "2019-01-01T01:30:00+03:00",
)
"""What an edit or a rewrite may set: TIMESTAMPS, and four across a year boundary: UTC 2019, 2017 by its offset, 2019
by its offset, and 2018 (ISO week 2019-W01) though written in 2019."""
NEW_YORK_TIMESTAMPS = (
    "2018-03-11T06:30:00Z",
    "2018-03-11T07:30:00Z",
    "2018-03-11T03:30:00Z",
    "2018-11-04T05:30:00Z",
    "2018-11-04T06:30:00Z",
    "2018-11-04T07:30:00-05:00",
    "2018-01-31T23:30:00-05:00",
    "2018-01-01T00:30:00Z",
    "2018-12-31T23:30:00Z",
)
"""TIMESTAMPS of the boards on New York's clock (as many): the nights its clocks change, each side of the change (01:30
EST, then 03:30 EDT after the skipped hour; 01:30 EDT and 01:30 EST in the repeated hour, then 07:30 EST), a local
day that UTC has already ended, a local month end in another UTC month, the day before the first season and a local
year end that is UTC's next year."""

BOARDS = {
    "month": ((), None, None),
    "periods and a category": (("day", "week", "month", "all"), "Genre", None),
    "periods, a category, summed": (("hour", "month", "year", "all"), "Genre", "Plays"),
    "local time, seasons and a category": (("hour", "day", "month", "season", "all"), "Genre", None),
}
"""What a history's aggregator keeps: periods (none: the guide's months), category and summed attribute."""
LOCAL_TIME = {"local time, seasons and a category": ("America/New_York", date(2018, 1, 8), 14)}
"""The boards kept on a local clock (leaderboard_time_zone) and their seasons (leaderboard_season: first day, days);
the others are UTC's. 2018-01-01T00:30Z is the last day of 2017 in New York, before the first season."""
NEW_YORK_CHANGES = (
    (datetime(2017, 11, 5, 6, tzinfo=UTC), timedelta(hours=-5)),
    (datetime(2018, 3, 11, 7, tzinfo=UTC), timedelta(hours=-4)),
    (datetime(2018, 11, 4, 6, tzinfo=UTC), timedelta(hours=-5)),
    (datetime(2019, 3, 10, 7, tzinfo=UTC), timedelta(hours=-4)),
)
"""The oracle's New York: the instants its clocks changed (the US rule: 02:00 local on the second Sunday of March and
the first of November) and the offset after each, over every timestamp the histories write."""
GENRES = (None, "rock", "r&b/soul")
"""Write.genre: none (the overall boards only), a plain one, one the board id must percent-encode."""
PLAYS = ("1", "2.5", "0.000001", "1000")
"""Write.plays: what a download adds when the boards sum."""


class Step:
    """A step prints as the Python that builds it, without the fields left at their defaults."""

    def __repr__(self) -> str:
        fields = [
            f"{item.name}={getattr(self, item.name)!r}"
            for item in dataclasses.fields(self)  # type: ignore[arg-type]
            if getattr(self, item.name) != item.default
        ]
        return f"{type(self).__name__}({', '.join(fields)})"


@dataclass(frozen=True, repr=False)
class Write(Step):
    """The application writes one download of song<song> at write_timestamps(boards)[when].

    malformed: 1-3 the timestamp is wrong; 4 the summed attribute is not a number (when the boards
    sum); 5 the category is not a string (when the boards have categories); else well-formed.
    genre: GENRES[genre]; plays: PLAYS[plays] (when the boards have categories, when they sum).
    """

    song: int = 1
    when: int = 0
    malformed: int = 0
    genre: int = 0
    plays: int = 0
    other: bool = False
    """An item of another type (its marker not DOWNLOAD), where the history's table has a marker."""


@dataclass(frozen=True, repr=False)
class Delete(Step):
    """The application deletes the pick-th download still in the table (one REMOVE); with `ttl`, Time to Live does."""

    pick: int = 0
    ttl: bool = False


EDITS = ("when", "genre", "plays", "song", "user", "marker", "malformed", "back")
"""What an Edit changes: the timestamp (to another of EDIT_TIMESTAMPS), the category (another of GENRES), the summed
amount (another of PLAYS), the entity (song: the partition key, which no update changes, so the application deletes
the item and writes it under the other song), the UserID (nothing counted), the marker (DOWNLOAD or not), one
attribute spoilt (malformed: the timestamp, or the summed amount or the category where the boards read them), or back
to the image before the item's last edit. One that does not apply to the history's table and boards makes the next
one that does."""
RETRACTION_KINDS = (
    "deletion",
    "expiry",
    "moved across a month",
    "moved across a year",
    "category changed",
    "amount changed",
    "entity changed",
    "left the downloads",
    "became a download",
    "nothing counted changed",
    "spoilt",
    "mended",
    "edited back",
    "rewritten under its key",
    "a count back at 0",
)
"""What histories with retractions do, as the oracle sees it (Outcome.board_kinds): the suite asks for each."""


@dataclass(frozen=True, repr=False)
class Edit(Step):
    """The application updates the pick-th download still in the table (for `back`, the pick-th of those last
    edited): one MODIFY with both images."""

    pick: int = 0
    change: str = "when"
    to: int = 0


@dataclass(frozen=True, repr=False)
class Rewrite(Step):
    """The application writes again, under its key, the pick-th download deleted (by it or by TTL): one INSERT."""

    pick: int = 0
    when: int = 0
    genre: int = 0
    plays: int = 0


@dataclass(frozen=True, repr=False)
class Deliver(Step):
    """The mapping invokes the function for the lane-th shard that has work (see aws_delivery.Delivery).

    fault: none; killed (at the at-th call to AWS and after); lost_response (done, reported failed);
    throttled (writes of song<at % 4 + 1> and one more song); throttled_progress (progress writes);
    deadline (the function runs out of time); late_write (writes held back, landing later);
    write_timeout (writes applied, responses lost); queue_refuses (the failure queue fails some sends, whole or
    entry by entry); interleave (a direct invocation of the same shard
    runs at the at-th call).
    """

    lane: int = 0
    size: int = 10
    fault: str = "none"
    at: int = 0
    part: int = 0
    order: int = 0
    extend: int = 0
    fresh: bool = False
    early: bool = False
    final_records: bool = False


@dataclass(frozen=True, repr=False)
class Direct(Step):
    """An operator invokes the function directly for the lane-th shard: ahead, behind, invented or through.

    fault: as Deliver's, or pause (it stops at its at-th call to AWS until a Resume step or the drain).
    """

    lane: int = 0
    kind: str = "ahead"
    count: int = 1
    fault: str = "none"
    at: int = 0
    pick: int = -1
    """Claim the ahead/behind candidates from this index on (-1: a random sample)."""


@dataclass(frozen=True, repr=False)
class Resume(Step):
    """A direct invocation paused by fault='pause' goes on to its end."""

    index: int = 0


@dataclass(frozen=True, repr=False)
class Wait(Step):
    """Time passes with the mapping stalled (throttled, failing, or simply behind)."""

    seconds: int = 30


@dataclass(frozen=True, repr=False)
class Reshard(Step):
    """The lane-th open shard ends: one child (rollover) or two (split); the first child may number lower."""

    lane: int = 0
    children: int = 1
    lower: bool = False


@dataclass(frozen=True, repr=False)
class Heat(Step):
    """song<song>'s partition splits for heat: its items spread over two shards by sort key."""

    song: int = 1


@dataclass(frozen=True, repr=False)
class Pause(Step):
    """The mapping is disabled while the application writes on and every open shard rolls over `rollovers` times,
    `hours` apart; then it is enabled again (mapping-paused).

    Before each rollover four downloads (song1..song4) go to the open shards; with `early`, four more go to the
    newest shards right after the last rollover, before the last wait (past 24 hours they are trimmed too). After
    the pause one fresh download goes to every open shard (a lineage that never gets another record is never read
    again: `tests/unit/stream_model/test_paused_mapping.py` keeps that case).
    """

    rollovers: int = 1
    hours: int = 25
    early: bool = False
    writes_after: bool = True
    """False: no download is written after the pause (see `tests/unit/stream_model/test_paused_mapping.py`)."""
    sweeps: int = 0
    """Scheduled invocations that come in each wait, SCHEDULE_SECONDS apart from its start (scheduled-invocation:
    none may come at all); the last of them Lambda hands over twice."""
    faulted_sweeps: bool = False
    """The scheduled invocations meet faults as any invocation may (killed, out of time, a refusing queue...)."""


@dataclass(frozen=True, repr=False)
class Land(Step):
    """One write held back by a late_write fault lands now, long after its invocation gave up on it."""

    index: int = 0


@dataclass(frozen=True, repr=False)
class Backfill(Step):
    """Ledger mode: backfill run `run` (two may run at once) reads the next `items` downloads of its scan, each as the
    table holds it at that moment, and counts each in one transaction with its ledger item (design.backfill). A run
    that reaches the end of the table ends; `kill` ends it where it is. The run's next step starts it again from the
    table's beginning (a rerun)."""

    run: int = 0
    items: int = 3
    kill: bool = False


@dataclass(frozen=True)
class Config:
    window_seconds: int = 5
    batch_size: int = 10
    maximum_retry_attempts: int | None = 2
    maximum_record_age: int | None = 3600
    aggregate_writes: str = "per_batch"
    seed: int = 0
    songs: int = 4
    """Writes of song<n> go to song<(n - 1) % songs + 1>: with one song, every shard feeds the same aggregates."""
    timestamps: int = len(TIMESTAMPS)
    """Writes use write_timestamps(boards)[when % timestamps]: with one, every download lands in one month."""
    boards: str = "month"
    """A name of BOARDS: the periods, category and summed attribute the aggregator keeps."""
    retractions: bool = False
    """Deletions and edits are followed (the stream has both images; the module's retractions)."""
    marker: bool = False
    """The table holds other items too: downloads carry MARKER (source_item_filter)."""
    ledger: bool = False
    """Ledger mode: the design keeps a ledger item per download, the table has downloads written before its stream
    (`history`), Backfill steps count them, and an operator's backfill runs to its end once the steps are over."""
    history: int = 0
    """Downloads in the table before its stream was enabled: no record of them, until they are edited or deleted."""

    def mapping(self, windowed: bool) -> MappingSettings:
        return MappingSettings(
            window_seconds=self.window_seconds if windowed else None,
            batch_size=self.batch_size,
            maximum_retry_attempts=self.maximum_retry_attempts,
            maximum_record_age=self.maximum_record_age,
        )


@dataclass(frozen=True)
class History:
    config: Config
    steps: tuple[Step, ...]

    def __repr__(self) -> str:
        lines = ",\n".join(f"        {step!r}" for step in self.steps)
        return f"History(\n    {self.config!r},\n    (\n{lines},\n    ),\n)"


DesignFactory = Callable[[Environment, Config], Design]


# ---------------------------------------------------------------------------------------------- the oracle


def utc_month(timestamp: str) -> str:
    """The oracle's own month: independent of the aggregator's parser."""
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m")


@dataclass
class Outcome:
    history: History
    design: str
    downloads: int = 0
    lost_before: int = 0
    over_before: int = 0
    uncovered: int = 0
    """Downloads missing before recover that no durable failure record covers."""
    over_uncovered: int = 0
    """Over-counted before recover beyond what retractions named by a durable failure record would take back."""
    lost: int = 0
    over: int = 0
    unreported_malformed: int = 0
    retractions: int = 0
    """Records of deletions and edits (MODIFY, REMOVE) of downloads."""
    index: list[str] = field(default_factory=list)
    """How the sparse index differs from the recount: a count below 0, a 0 still in it, a count out of it, ranks."""
    false_alarms: int = 0
    """Reports that a retraction took a count below 0 (a download never counted) where every download was read: the
    retraction was counted before its download, which an ancestor shard holds (tracked, not yet a problem)."""
    hazards: set[str] = field(default_factory=set)
    invocations: int = 0
    writes: int = 0
    drain_failures: int = 0
    failure_records: int = 0
    board_kinds: set[str] = field(default_factory=set)
    """What the truth held: `category` boards, `fractions` summed, a `week of the next year` (2018-12-31's)."""
    beyond_the_tables: Decimal = Decimal(0)
    """A design whose repair reads only the tables (`Design.repair_reads_only_the_tables`): what its boards miss or
    hold over, after recover, of downloads whose expiry the stream trimmed and a report names (`reachable_truth`):
    known to the omniscient recount only, allowed."""
    silent_trims: int = 0
    """Expiries the stream trimmed that no report names, where the boards differ (`reachable_truth`): never allowed."""

    def problems(self) -> list[str]:
        found = []
        if self.over_uncovered or self.over:
            found.append(f"over-counted {max(self.over_before, self.over)}")
        if self.uncovered:
            found.append(f"{self.uncovered} lost without a durable failure record")
        if self.lost:
            found.append(f"{self.lost} lost after recover")
        if self.silent_trims:
            found.append(f"{self.silent_trims} expiries trimmed before delivery, no report naming their range")
        if self.unreported_malformed:
            found.append(f"{self.unreported_malformed} malformed downloads never reported")
        return found + [f"index: {problem}" for problem in self.index]

    def summary(self) -> str:
        return (
            f"{self.design}: {self.downloads} downloads, {self.retractions} edits and deletions, lost "
            f"{self.lost_before} before recover "
            f"({self.uncovered} uncovered), {self.lost} after, over-counted {max(self.over_before, self.over)}, "
            f"{self.invocations} invocations, {self.failure_records} failure records, hazards {sorted(self.hazards)}"
            + (f", beyond the tables {self.beyond_the_tables}" if self.beyond_the_tables else "")
        )


def new_york_wall(moment: datetime) -> datetime:
    """The oracle's own New York wall clock: the moment plus the offset of the last change before it. In the hour the
    clocks repeat, both passes read the same wall hour: one bucket of two hours, as the contract keys it."""
    offsets = [after for changed, after in NEW_YORK_CHANGES if changed <= moment]
    assert offsets, moment
    return (moment + offsets[-1]).replace(tzinfo=UTC)


def write_timestamps(boards: str) -> tuple[str, ...]:
    """What a write may set on these boards: New York's clock changes for the local boards, TIMESTAMPS for UTC's."""
    return NEW_YORK_TIMESTAMPS if boards in LOCAL_TIME else TIMESTAMPS


def edit_timestamps(boards: str) -> tuple[str, ...]:
    """What an edit or a rewrite may set on these boards: the writes' timestamps and four across a year boundary."""
    return (*write_timestamps(boards), *EDIT_TIMESTAMPS[len(TIMESTAMPS) :])


def local_buckets(timestamp: str, periods: tuple[str, ...], boards: str) -> list[str]:
    """The oracle's own buckets of a moment on the boards' clock (UTC, or LOCAL_TIME's): a season's key is S and its
    first day, and a moment before the first season is in none."""
    if boards not in LOCAL_TIME:
        return utc_buckets(timestamp, periods)
    zone, first_day, days = LOCAL_TIME[boards]
    assert zone == "America/New_York"
    wall = new_york_wall(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(UTC))
    buckets = utc_buckets(wall.isoformat(), tuple(period for period in periods if period != "season"))
    seasons_begun = (wall.date() - first_day).days // days
    if "season" in periods and seasons_begun >= 0:
        buckets.insert(periods.index("season"), "S" + (first_day + timedelta(days=seasons_begun * days)).isoformat())
    return buckets


def utc_buckets(timestamp: str, periods: tuple[str, ...]) -> list[str]:
    """The oracle's own buckets of a UTC moment: hour, day, ISO week, month, year, all."""
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(UTC)
    iso_year, iso_week, _ = moment.isocalendar()
    names = {
        "hour": moment.strftime("%Y-%m-%dT%H"),
        "day": moment.strftime("%Y-%m-%d"),
        "week": f"{iso_year}-W{iso_week:02d}",
        "month": moment.strftime("%Y-%m"),
        "year": moment.strftime("%Y"),
        "all": "all",
    }
    return [names[period] for period in periods]


@dataclass(frozen=True)
class Reading:
    """What the oracle reads in one image of a download: its UTC moment, category and amount."""

    moment: datetime
    genre: str | None
    amount: Decimal


def read_image(written: Written | None, boards: str) -> Reading | None:
    """The oracle's own parse of the item as stored (image_of), never of how a step meant it: None when the item is
    no download (another marker) or is malformed (Timestamp missing, not a string or no date with an offset; the
    category present but not a non-empty string; the summed attribute missing or not a number). Read from the image,
    so that any sequence of edits, each spoiling or mending one attribute, is judged by what the item holds."""
    if written is None:
        return None
    image = image_of(written)
    if image.get(MARKER[0], {"S": MARKER[1]}) != {"S": MARKER[1]}:
        return None
    _, category, summed = BOARDS[boards]
    moment = _moment_of(image.get("Timestamp"))
    genre = image.get(category) if category else None
    amount = _amount_in(image.get(summed)) if summed else Decimal(1)
    if moment is None or amount is None or (genre is not None and not _non_empty_string(genre)):
        return None
    return Reading(moment, genre["S"] if genre is not None else None, amount)


def _moment_of(value: dict[str, str] | None) -> datetime | None:
    if value is None or set(value) != {"S"}:
        return None
    try:
        moment = datetime.fromisoformat(value["S"].replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo is not None else None


def _amount_in(value: dict[str, str] | None) -> Decimal | None:
    if value is None or set(value) != {"N"}:
        return None
    try:
        return Decimal(value["N"])
    except ArithmeticError:
        return None


def _non_empty_string(value: dict[str, str]) -> bool:
    return set(value) == {"S"} and bool(value["S"])


def boards_of(reading: Reading, boards: str) -> list[str]:
    """The aggregates' sort keys a download counts in, as docs/leaderboard-shards.md names them: bucket[@category]."""
    periods, _, _ = BOARDS[boards]
    if not periods:
        return [reading.moment.strftime("%Y-%m")]
    buckets = local_buckets(reading.moment.isoformat(), periods, boards)
    genre = reading.genre
    return buckets + ([f"{bucket}@{quote(genre, safe='')}" for bucket in buckets] if genre else [])


def counts(written: Written | None, boards: str) -> bool:
    """A download that counts: well-formed by the oracle's reading and, where the table holds other items, marked."""
    return read_image(written, boards) is not None


def rejected(written: Written | None, boards: str) -> bool:
    """A download (marked as one where the table holds other items) the oracle reads as malformed."""
    if written is None or written.kind not in (None, MARKER[1]):
        return False
    return read_image(written, boards) is None


def contribution(written: Written | None, boards: str) -> dict[tuple[str, str], Decimal]:
    """What one image of an item adds to each aggregate (nothing when it does not count)."""
    reading = read_image(written, boards)
    if reading is None:
        return {}
    assert written is not None
    return {(written.song_id, board): reading.amount for board in boards_of(reading, boards)}


def delta_of(record: StreamRecord, boards: str) -> dict[tuple[str, str], Decimal]:
    """What a record of a download changes, per aggregate: the new image's part less the old one's; an expiry by TTL
    changes nothing."""
    if record.by_ttl:
        return {}
    delta = dict(contribution(record.written, boards))
    for key, amount in contribution(record.old_written, boards).items():
        delta[key] = delta.get(key, Decimal(0)) - amount
    return {key: amount for key, amount in delta.items() if amount}


def truth_of(world: World) -> Counter[tuple[str, str]]:
    """The recount: the table's downloads as they are now, and those TTL deleted as they were."""
    truth: Counter[tuple[str, str]] = Counter()
    for written in [*world.table.values(), *world.expired]:
        for key, amount in contribution(written, world.config.boards).items():
            truth[key] += amount
    return truth


def counted_of(world: World) -> dict[tuple[str, str], Decimal]:
    counted = {}
    for (table, key), item in world.dynamodb.items.items():
        entry = dict(key)
        if table == TABLE and "DownloadCount" in item:
            counted[(entry.get("songID", ""), entry.get("SK", ""))] = Decimal(item["DownloadCount"]["N"])
    return counted


def differences(truth: Counter[tuple[str, str]], counted: dict[tuple[str, str], Decimal]) -> tuple[int, int]:
    """Lost and over-counted, summed over aggregates (downloads, or what they add when the boards sum)."""
    keys = set(truth) | set(counted)
    lost = sum(max(0, truth.get(key, 0) - counted.get(key, 0)) for key in keys)
    over = sum(max(0, counted.get(key, 0) - truth.get(key, 0)) for key in keys)
    return lost, over


def failure_coverage(world: World) -> Callable[[Any], bool]:
    """Whether a durable failure record names a stream record: a recover can find it.

    The mapping's record names a shard and a range ending at `endSequenceNumber`: recover reads
    that shard from its checkpoint through that end, and, since "an application must always process
    a parent shard before it processes a child shard" (DynamoDB Developer Guide, S7), every ancestor
    of that shard to its end. It also reaches the highest record the mapping had handed the function
    on that shard when it wrote the failure record: a window given up after a retry out of order names
    its last batch, which can end below a record an earlier batch of the window delivered (L2), and
    the function was handed that record, so a design can keep what it saw (the shipped one keeps
    `DeliveredHigh`); a design that does not is caught by "lost after recover". `records_trimmed`
    names a shard and the range between the checkpoint and the first readable record: recover recounts.
    """
    ends: dict[str, int] = {}
    for info in world.queue.batch_infos():
        ends[info["shardId"]] = max(ends.get(info["shardId"], 0), int(info["endSequenceNumber"]))
    for shard_id, reached in world.failure_reach:
        ends[shard_id] = max(ends.get(shard_id, 0), reached)
        ancestor = world.stream.shards.get(shard_id)
        while ancestor is not None and ancestor.parent_id is not None:
            ends[ancestor.parent_id] = 10**40
            ancestor = world.stream.shards.get(ancestor.parent_id)
    trimmed = trimmed_ranges(world)

    def covers(record: Any) -> bool:
        in_trimmed = any(low < record.sequence <= high for low, high in trimmed.get(record.shard_id, []))
        return record.sequence <= ends.get(record.shard_id, -1) or in_trimmed

    return covers


def trimmed_ranges(world: World) -> dict[str, list[tuple[int, int]]]:
    """Per shard, the ranges (low, high] the design's `records_trimmed` reports name: after the checkpoint through
    the first readable record (or on), and every record of the ancestors of a shard reported with lost ancestors."""
    trimmed: dict[str, list[tuple[int, int]]] = {}
    for message in world.queue.of_kind("records_trimmed"):
        low = int(message.get("checkpoint") or 0)
        high = int(message.get("firstReadableSequence") or 10**40)
        trimmed.setdefault(message["shardId"], []).append((low, high))
        if message.get("lostAncestorOf"):
            # an ancestor deleted unread: it and every shard above it, as far as the true lineage goes
            ancestor = world.stream.shards.get(message["shardId"])
            while ancestor is not None and ancestor.parent_id is not None:
                trimmed.setdefault(ancestor.parent_id, []).append((0, 10**40))
                ancestor = world.stream.shards.get(ancestor.parent_id)
    return trimmed


def reachable_truth(
    world: World, truth: Counter[tuple[str, str]], counted: dict[tuple[str, str], Decimal]
) -> tuple[Counter[tuple[str, str]], Decimal, int]:
    """The truth as a repair that reads only the tables (the table's items, the ledger) can reach it, what it cannot
    (summed over aggregates), and how many expiries the stream trimmed unreported where the boards differ.

    "In DynamoDB Streams, there is a 24 hour limit on data retention. Stream records whose age exceeds this limit are
    subject to removal (trimming) from the stream." (DynamoDB Streams API Reference, GetShardIterator.) In ledger mode
    an expiry by TTL never changes a count, so the truth counts an expired download as it was; once the stream trims
    its expiry undelivered, nothing but the omniscient recount knows it: its item is gone, and its key's ledger item
    says what the key counted before (or nothing, its INSERT trimmed too; or the key's next item, written again).
    No repair can know it. What the design promises is that such a trimmed range is reported: a `records_trimmed`
    naming the shard and a range holding the expiry, or the mapping's on-failure record naming it (whose read-back
    then finds it trimmed). So the boards must equal the truth, or differ from it only on the aggregates of expiries
    the stream no longer holds when recover runs and each named by a report: by at most their expired images
    missing, and at most what an earlier image of their key counted held over. An expiry the stream trimmed that no
    report names, where the boards differ, is never allowed: the loss would be silent."""
    boards = world.config.boards
    named = reported_trims(world)
    missing: Counter[tuple[str, str]] = Counter()
    held_over: Counter[tuple[str, str]] = Counter()
    silent: list[StreamRecord] = []
    for index, record in enumerate(world.changes):
        if not (record.by_ttl and trimmed_at_the_end(world, record)):
            continue
        if not named(record):
            silent.append(record)
            continue
        missing.update(contribution(record.old_written, boards))
        earlier: dict[tuple[str, str], Decimal] = {}
        for before in world.changes[:index]:
            if before.keys == record.keys:
                for image in (before.written, before.old_written):
                    for aggregate, amount in contribution(image, boards).items():
                        earlier[aggregate] = max(earlier.get(aggregate, Decimal(0)), amount)
        held_over.update(earlier)
    reachable = Counter(truth)
    for aggregate in set(missing) | set(held_over):
        difference = counted.get(aggregate, 0) - truth.get(aggregate, 0)
        if -missing[aggregate] <= difference <= held_over[aggregate]:
            reachable[aggregate] = counted.get(aggregate, Decimal(0))
    beyond = sum((abs(reachable[aggregate] - truth[aggregate]) for aggregate in reachable), Decimal(0))
    differs = {
        aggregate for aggregate in set(reachable) | set(counted) if reachable[aggregate] != counted.get(aggregate, 0)
    }
    unreported = sum(1 for record in silent if differs & set(contribution(record.old_written, boards)))
    return reachable, beyond, unreported


def trimmed_at_the_end(world: World, record: StreamRecord) -> bool:
    """Whether the stream no longer holds the record when recover runs: older than the retention, or its shard gone."""
    shard = world.stream.shards[record.shard_id]
    return record.inserted <= world.now - RETENTION_SECONDS or shard.gone(world.now)


def reported_trims(world: World) -> Callable[[StreamRecord], bool]:
    """Whether a report names the record's shard and a range that holds it: a `records_trimmed` (`trimmed_ranges`),
    or an on-failure record of the mapping (its DDBStreamBatchInfo's first and last sequence numbers)."""
    ranges = trimmed_ranges(world)
    for info in world.queue.batch_infos():
        first, last = int(info["startSequenceNumber"]), int(info["endSequenceNumber"])
        ranges.setdefault(info["shardId"], []).append((first - 1, last))

    def named(record: StreamRecord) -> bool:
        return any(low < record.sequence <= high for low, high in ranges.get(record.shard_id, []))

    return named


def covered_by_failure_records(world: World) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """Per aggregate, what the records a durable failure record names add (downloads) and take back (retractions)."""
    covers = failure_coverage(world)
    added: Counter[tuple[str, str]] = Counter()
    taken: Counter[tuple[str, str]] = Counter()
    whole = moved_whole(world) if world.design.first_record_moves_from_base else set()
    for index, record in enumerate(world.changes):
        if covers(record):
            delta = delta_of(record, world.config.boards)
            if index in whole:
                delta = dict(contribution(record.written, world.config.boards))
            for key, amount in delta.items():
                added[key] += max(amount, 0)
                taken[key] += max(-amount, 0)
            if record.by_ttl and world.design.expiry_moves_its_key:
                for key, amount in contribution(record.old_written, world.config.boards).items():
                    added[key] += amount
    return added, taken


def moved_whole(world: World) -> set[int]:
    """Ledger mode: the records (their places in `world.changes`) that move their download from nothing to the new
    image: a download from before the stream that no backfill read, whose first stream record this is (StreamFrom,
    Base nothing). A failure record naming it covers the whole new image, not the edit's difference."""
    seen: set[tuple[str, str]] = set()
    whole: set[int] = set()
    for index, record in enumerate(world.changes):
        key = (record.keys["songID"]["S"], record.keys["SK"]["S"])
        first, never_backfilled = key not in seen, key not in world.backfill_read
        seen.add(key)
        if first and never_backfilled and record.old_written is not None and record.written is not None:
            whole.add(index)
    return whole


def refused_aggregates(world: World) -> set[tuple[str, str]]:
    """Ledger mode: the aggregates a `refused_record` names (a record no order placed, counted nowhere): reported, so
    whatever they miss or hold over is covered, and recover recounts them."""
    return {
        (message["entityId"], message["board"])
        for message in world.queue.of_kind("refused_record")
        if message.get("entityId") and message.get("board")
    }


def index_problems(world: World, truth: Counter[tuple[str, str]]) -> list[str]:
    """Where the sparse index differs from the recount: every aggregate with a count above 0 in it under its board,
    none at 0 or below (a count is never below 0), and each board's entries ranked as docs/leaderboard-shards.md says,
    count descending then id ascending, by the order attribute alone (the model's ids never share a tie-breaker)."""
    problems = []
    listed: dict[str, list[tuple[int, str]]] = {}
    for (table, key), item in world.dynamodb.items.items():
        if table != TABLE or "DownloadCount" not in item:
            continue
        entry = dict(key)
        song, board = entry.get("songID", ""), entry.get("SK", "")
        count = Decimal(item["DownloadCount"]["N"])
        if count < 0:
            problems.append(f"{song} {board}: count {count} below 0")
        elif count == 0 and "Month" in item:
            problems.append(f"{song} {board}: count 0 still in the index")
        elif count > 0 and item.get("Month") != {"S": board}:
            problems.append(f"{song} {board}: count {count} not in the index under its board")
        if "Month" in item and "LeaderboardOrder" not in item:
            problems.append(f"{song} {board}: in the index without an order")
        elif "Month" in item:
            listed.setdefault(item["Month"]["S"], []).append((int(Decimal(item["LeaderboardOrder"]["N"])), song))
    for board in sorted(set(listed) | {board for (_, board), amount in truth.items() if amount > 0}):
        entries = listed.get(board, [])
        if len({order for order, _ in entries}) < len(entries):
            problems.append(f"{board}: two entries share an order (the model's ids differ in their first bytes)")
        ranked = [song for _, song in sorted(entries, key=lambda entry: -entry[0])]
        recounted = sorted(
            (song for (song, other), amount in truth.items() if other == board and amount > 0),
            key=lambda song: (-truth[(song, board)], song),
        )
        if ranked != recounted:
            problems.append(f"{board} ranks {ranked}, the recount {recounted}")
    return problems


def recount(world: World, keys: set[tuple[str, str]] | None) -> None:
    """The operator's recount from the raw downloads (the whole table when keys is None)."""
    truth = truth_of(world)
    chosen = set(truth) | set(counted_of(world)) if keys is None else keys
    world.design.recount(world.env, {key: truth.get(key, 0) for key in sorted(chosen)})


def recover(world: World) -> None:
    """The operator's `recover`: each durable failure message as the design's procedure says.

    Recounts asked for are done once, at the end of the run, after every replay: a recount that
    ran while a replay was still to count records of the same aggregate would count them twice.
    """
    wanted: dict[str, Any] = {"keys": set(), "all": False}

    def ask(keys: set[tuple[str, str]] | None) -> None:
        if keys is None:
            wanted["all"] = True
        else:
            wanted["keys"] |= keys

    handled = 0
    for _ in range(10):  # recover receives until the queue is empty: its own replays may report more
        if handled == len(world.queue.messages):
            break
        for message in world.queue.messages[handled:]:
            handled += 1
            world.design.recover(message, lambda event: world.invoke(event), ask)
    if wanted["all"] or wanted["keys"]:
        recount(world, None if wanted["all"] else wanted["keys"])


# ---------------------------------------------------------------------------------------------- playing a history


def _genre(index: int) -> dict[str, str] | None:
    name = GENRES[index % len(GENRES)]
    return None if name is None else {"S": name}


def play(history: History, make_design: DesignFactory) -> Outcome:
    config = history.config
    holder: dict[str, Any] = {}

    def factory(env: Environment) -> Design:
        holder["design"] = make_design(env, config)
        return holder["design"]

    world = World(factory, config.mapping(windowed=True), seed=config.seed)
    world.config = config
    world.stream.retractions = config.retractions
    world.stream.marker = MARKER if config.marker else None
    counter = _write_history(world) if config.ledger else 0
    for step in history.steps:
        counter = apply(world, step, counter)
    if config.ledger:
        _backfill_to_the_end(world)
    world.drain()
    outcome = Outcome(
        history, world.design.name, downloads=sum(1 for w, _ in world.written if counts(w, config.boards))
    )
    outcome.retractions = sum(1 for record in world.changes if record.event_name != "INSERT")
    truth = truth_of(world)
    counted = counted_of(world)
    outcome.lost_before, outcome.over_before = differences(truth, counted)
    added, taken = covered_by_failure_records(world)
    keys = set(truth) | set(counted)
    if config.ledger:
        keys -= refused_aggregates(world)
    outcome.uncovered = sum(max(0, max(0, truth[key] - counted.get(key, 0)) - added[key]) for key in keys)
    outcome.over_uncovered = sum(max(0, max(0, counted.get(key, 0) - truth[key]) - taken[key]) for key in keys)
    outcome.failure_records = len(world.queue.messages)
    outcome.drain_failures = world.drain_discards
    if not world.queue.of_kind("records_trimmed"):
        below = [message for message in world.queue.of_kind("refused_record") if "count is -" in message["reason"]]
        outcome.false_alarms = len(below)
    recover(world)
    world.dynamodb.land_delayed()
    after, reachable = counted_of(world), truth
    if world.design.repair_reads_only_the_tables:
        reachable, outcome.beyond_the_tables, outcome.silent_trims = reachable_truth(world, truth, after)
    outcome.lost, outcome.over = differences(reachable, after)
    if world.design.keeps_index:
        outcome.index = index_problems(world, reachable)
    if world.design.reports_rejected:
        reported = {str(m.get("sequenceNumber")) for m in world.queue.of_kind("rejected_download")}
        covers = failure_coverage(world)
        outcome.unreported_malformed = sum(
            1
            for record in world.changes
            if rejected(record.written, config.boards) and str(record.sequence) not in reported and not covers(record)
        )
    outcome.hazards = set(world.hazards)
    outcome.board_kinds = world.retraction_kinds | {
        kind
        for (_, board), value in truth.items()
        for kind, present in (
            ("category", "@" in board),
            ("fractions", value != value.to_integral_value()),
            ("week of the next year", board.startswith("2019-W01")),
            ("a local day before the UTC day", board.startswith("2017-12-31")),
            ("a season", board.startswith("S")),
            ("an hour of a night the clocks change", board.startswith(("2018-03-11T", "2018-11-04T01"))),
        )
        if present
    }
    if any(value == 0 for value in counted_of(world).values()):
        outcome.board_kinds.add("a count back at 0")
    outcome.invocations = world.invocations
    outcome.writes = world.dynamodb.writes
    return outcome


def apply(world: World, step: Step, counter: int) -> int:
    if isinstance(step, Backfill):
        _backfill(world, step)
        return counter
    if isinstance(step, Write):
        world.write(_written(world, step, counter))
        return counter + 1
    if isinstance(step, Delete | Edit | Rewrite):
        _retract(world, step)
        return counter
    return _apply_other(world, step, counter)


def _written(world: World, step: Write, counter: int) -> Written:
    """The download a Write step writes: its song, month, category and summed amount as the history's boards keep."""
    config = world.config
    song = f"song{(step.song - 1) % config.songs + 1}"
    timestamp = write_timestamps(config.boards)[step.when % config.timestamps]
    _, category, summed = BOARDS[config.boards]
    malformed = step.malformed if step.malformed <= 3 else 0
    genre = plays = None
    if category:
        genre = {"N": "5"} if step.malformed == 5 else _genre(step.genre)
        malformed = malformed or (5 if step.malformed == 5 else 0)
    if summed:
        plays = {"S": "12"} if step.malformed == 4 else {"N": PLAYS[step.plays % len(PLAYS)]}
        malformed = malformed or (4 if step.malformed == 4 else 0)
    kind = None if not config.marker else "PLAY" if step.other else MARKER[1]
    return Written(song, f"download-{counter:05d}", timestamp, malformed, genre, plays, kind=kind)


# ---------------------------------------------------------------------------------------------- deletions and edits


def _retract(world: World, step: Delete | Edit | Rewrite) -> None:
    """A deletion, an edit or a rewrite as the application (or TTL) makes it; a no-op when nothing applies."""
    if isinstance(step, Rewrite):
        _rewrite(world, step)
        return
    if not world.table:
        return
    keys = list(world.table)
    if isinstance(step, Edit) and step.change == "back":
        keys = [key for key in keys if _previous(world, world.table[key]) is not None] or keys
    old = world.table[keys[step.pick % len(keys)]]
    key = old.key
    if isinstance(step, Delete):
        if step.ttl and world.config.ledger and not _seen(world, key):
            return  # expired before the stream or a backfill read it: nothing could count it, the recount neither
        world.remove(key, by_ttl=step.ttl)
        if counts(old, world.config.boards):
            world.retraction_kinds.add("expiry" if step.ttl else "deletion")
        return
    change = _applicable(world, step.change, old)
    if change == "song":
        _move_to_song(world, old, step.to)
        return
    new = _edited(world, old, change, step.to)
    if new == old:
        return  # an update that changes nothing writes no stream record
    world.modify(new)
    world.retraction_kinds |= _kinds_of_edit(world, old, new, change)


def _applicable(world: World, change: str, old: Written) -> str:
    """The change itself or, where it does not apply to the history's table and boards, the next one in EDITS that
    does (so that every history edits what its boards count)."""
    _, category, summed = BOARDS[world.config.boards]
    unavailable = {
        "genre": not category,
        "plays": not summed,
        "marker": not world.config.marker,
        "song": world.config.songs == 1,
        "back": _previous(world, old) is None,
    }
    start = EDITS.index(change)
    return next(other for other in EDITS[start:] + EDITS[:start] if not unavailable.get(other, False))


def _previous(world: World, current: Written) -> Written | None:
    """The image before the item's last edit, if its last record was an edit."""
    for record in reversed(world.changes):
        if (record.keys["songID"]["S"], record.keys["SK"]["S"]) == current.key:
            return record.old_written if record.event_name == "MODIFY" else None
    return None


def _other(values: list[Any], current: Any, to: int) -> Any:
    """The to-th of the values other than the current one: an edit always changes what it names."""
    others = [value for value in values if value != current]
    return others[to % len(others)]


def _edited(world: World, old: Written, change: str, to: int) -> Written:
    if change == "when":
        timestamp = _other(list(edit_timestamps(world.config.boards)), old.timestamp, to)
        return dataclasses.replace(old, timestamp=timestamp, malformed=0 if old.malformed <= 3 else old.malformed)
    if change == "genre":
        genre = _other([_genre(index) for index in range(len(GENRES))], old.genre, to)
        return dataclasses.replace(old, genre=genre, malformed=0 if old.malformed == 5 else old.malformed)
    if change == "plays":
        plays = _other([{"N": amount} for amount in PLAYS], old.plays, to)
        return dataclasses.replace(old, plays=plays, malformed=0 if old.malformed == 4 else old.malformed)
    if change == "marker":
        return dataclasses.replace(old, kind="PLAY" if old.kind == MARKER[1] else MARKER[1])
    if change == "malformed":
        return _spoilt(world, old, to)
    if change == "back":
        previous = _previous(world, old)
        assert previous is not None
        return previous
    user = f"user{to + 2}"
    return dataclasses.replace(old, user=user if user != old.user else f"user{to + 3}")


def _spoilt(world: World, old: Written, to: int) -> Written:
    """One attribute spoilt: the timestamp (1-3, as Write's malformed), or where the boards read them the summed
    attribute (4) or the category (5). What else the item holds stays as it is, spoilt or not: the oracle reads the
    image, so a download spoilt twice and mended once stays malformed."""
    _, category, summed = BOARDS[world.config.boards]
    ways = [1, 2, 3] + ([4] if summed else []) + ([5] if category else [])
    way = ways[to % len(ways)]
    if way == 4:
        return dataclasses.replace(old, plays={"S": "12"}, malformed=old.malformed or 4)
    if way == 5:
        return dataclasses.replace(old, genre={"N": "5"}, malformed=old.malformed or 5)
    return dataclasses.replace(old, malformed=way)


def _move_to_song(world: World, old: Written, to: int) -> None:
    """The entity is the table's partition key: the application deletes the item and writes it under the other song
    (two items, maybe in two shards: no order between their records)."""
    songs = [f"song{index + 1}" for index in range(world.config.songs) if f"song{index + 1}" != old.song_id]
    new = dataclasses.replace(old, song_id=songs[to % len(songs)])
    if new.key in world.table:
        return
    world.remove(old.key, by_ttl=False)
    world.write(new)
    if counts(old, world.config.boards) or counts(new, world.config.boards):
        world.retraction_kinds.add("entity changed")


def _kinds_of_edit(world: World, old: Written, new: Written, change: str) -> set[str]:
    """What the oracle sees an edit do (its own parser): which boards it leaves and enters."""
    before = contribution(old, world.config.boards)
    after = contribution(new, world.config.boards)
    kinds = {"edited back"} if change == "back" else set()
    if before and after:
        moved = {board for _, board in set(before) ^ set(after)}
        if before.keys() == after.keys() and before != after:
            kinds.add("amount changed")
        if any("@" in board for board in moved):
            kinds.add("category changed")
        if utc_buckets(old.timestamp, ("year",)) != utc_buckets(new.timestamp, ("year",)):
            kinds.add("moved across a year")
        elif utc_month(old.timestamp) != utc_month(new.timestamp):
            kinds.add("moved across a month")
    elif before or after:
        if old.kind != new.kind:
            kinds.add("left the downloads" if before else "became a download")
        else:
            kinds.add("spoilt" if before else "mended")
    elif old.malformed == new.malformed and old.kind == new.kind:
        kinds.add("nothing counted changed")
    if before and before == after:
        kinds.add("nothing counted changed")
    return kinds


def _rewrite(world: World, step: Rewrite) -> None:
    deleted = [key for key in world.deleted if key not in world.table]
    if not deleted:
        return
    song, download_id = deleted[step.pick % len(deleted)]
    _, category, summed = BOARDS[world.config.boards]
    written = Written(
        song,
        download_id,
        edit_timestamps(world.config.boards)[step.when % len(EDIT_TIMESTAMPS)],
        genre=_genre(step.genre) if category else None,
        plays={"N": PLAYS[step.plays % len(PLAYS)]} if summed else None,
        kind=MARKER[1] if world.config.marker else None,
    )
    world.write(written)
    world.retraction_kinds.add("rewritten under its key")


# ---------------------------------------------------------------------------------------------- ledger mode


def _write_history(world: World) -> int:
    """The table's downloads from before its stream: in the table, in no shard; some malformed, some of other types."""
    config = world.config
    for index in range(config.history):
        step = Write(
            song=index % 4 + 1,
            when=index * 5 % len(write_timestamps(config.boards)),
            malformed=5 if index % 7 == 6 else 2 if index % 5 == 4 else 0,
            genre=index % len(GENRES),
            plays=index % len(PLAYS),
            other=index % 6 == 5,
        )
        written = _written(world, step, index)
        world.table[written.key] = written
    return config.history


def _seen(world: World, key: tuple[str, str]) -> bool:
    """Whether the stream holds a record of the key, or a backfill has read it."""
    return key in world.backfill_read or any(
        (record.keys["songID"]["S"], record.keys["SK"]["S"]) == key for record in world.changes
    )


def _backfill(world: World, step: Backfill) -> None:
    """One page of a backfill run: the next downloads after its place in the scan (by key), as they are now."""
    runs: dict[int, tuple[str, str] | None] = world.backfills
    if step.kill:
        if runs.pop(step.run, None) is not None:
            world.hazards.add("backfill killed")
        return
    if any(run != step.run for run in runs):
        world.hazards.add("two backfills at once")
    place = runs.get(step.run)
    keys = sorted(key for key in world.table if place is None or key > place)[: max(1, step.items)]
    for key in keys:
        world.design.backfill(image_of(world.table[key]))
        world.backfill_read.add(key)
        world.now += 0.05
    if len(keys) < max(1, step.items):
        runs.pop(step.run, None)
    else:
        runs[step.run] = keys[-1]


def _backfill_to_the_end(world: World) -> None:
    """The operator's backfill after attaching: one run over the whole table, to its end."""
    world.backfills.pop(-1, None)
    while True:
        _backfill(world, Backfill(run=-1, items=10))
        if -1 not in world.backfills:
            return


def _apply_other(world: World, step: Step, counter: int) -> int:
    if isinstance(step, Deliver):
        width = world.settings.window_seconds or 1
        lanes = [lane for lane in world.runnable() if not lane.idle(world.now, width)]
        if not lanes:
            world.wait(1)
            return counter
        lane = lanes[step.lane % len(lanes)]
        world.deliver(
            lane,
            Delivery(
                size=step.size,
                fault=step.fault,
                at=step.at,
                part=step.part,
                order=step.order,
                extend=step.extend,
                fresh=step.fresh,
                early=step.early,
                final_records=step.final_records,
            ),
        )
    elif isinstance(step, Direct):
        lanes = world.sync_lanes()
        if lanes:
            world.direct(lanes[step.lane % len(lanes)], step.kind, step.count, step.fault, step.at, step.pick)
    elif isinstance(step, Wait):
        world.wait(step.seconds)
    elif isinstance(step, Reshard):
        open_lanes = [lane for lane in world.sync_lanes() if not lane.shard.closed]
        if open_lanes:
            world.stream.reshard(open_lanes[step.lane % len(open_lanes)].shard, step.children, step.lower)
    elif isinstance(step, Heat):
        world.stream.heat(f"song{step.song}")
    elif isinstance(step, Land):
        world.land_one(step.index)
    elif isinstance(step, Resume):
        world.resume(step.index)
    elif isinstance(step, Pause):
        counter = _pause(world, step, counter)
    return counter


def _pause(world: World, step: Pause, counter: int) -> int:
    for rollover in range(max(1, step.rollovers)):
        for song in range(1, 5):
            counter = apply(world, Write(song=song, when=rollover), counter)
        for lane in [lane for lane in world.sync_lanes() if not lane.shard.closed]:
            world.stream.reshard(lane.shard, 1, lower=False)
        if step.early and rollover == max(1, step.rollovers) - 1:
            for song in range(1, 5):
                counter = apply(world, Write(song=song, when=rollover + 1), counter)
        for sweep in range(step.sweeps):
            world.wait(SCHEDULE_SECONDS)
            world.scheduled_sweep(twice=sweep == step.sweeps - 1, during_pause=True, faulted=step.faulted_sweeps)
        world.wait(step.hours * 3600 - step.sweeps * SCHEDULE_SECONDS)
    world.resume_mapping()
    # The application writes on: one fresh download in every open shard, so that each lineage is read again.
    for index, lane in enumerate([lane for lane in world.sync_lanes() if not lane.shard.closed and step.writes_after]):
        world.write(_written(world, Write(song=index + 1), counter), into=lane.shard)
        counter += 1
    return counter


# ---------------------------------------------------------------------------------------------- drawing histories


def configs(
    aggregate_writes: tuple[str, ...] = ("per_batch", "per_window"),
    focused: bool = False,
    boards: tuple[str, ...] = ("month",),
    retractions: bool = False,
    ledger: bool = False,
) -> st.SearchStrategy[Config]:
    """Mapping settings; `focused`: one song in one month, so that every shard feeds the same aggregate; with
    `retractions`, deletions and edits are followed, and in some histories the table holds other items too; with
    `ledger`, retractions in ledger mode, most often on a table with downloads from before its stream."""
    return st.builds(
        Config,
        window_seconds=st.sampled_from([5, 1, 60]),
        batch_size=st.sampled_from([10, 3, 100]),
        maximum_retry_attempts=st.sampled_from([3, 10, None, 0, 1]),
        maximum_record_age=st.sampled_from([3600, 60, None]),
        aggregate_writes=st.sampled_from(aggregate_writes),
        seed=st.integers(0, 2**16),
        songs=st.just(1) if focused else st.sampled_from([4, 1, 2]),
        timestamps=st.just(1) if focused else st.sampled_from([len(TIMESTAMPS), 1]),
        boards=st.sampled_from(boards),
        retractions=st.just(retractions or ledger),
        marker=st.booleans() if retractions or ledger else st.just(False),
        ledger=st.just(ledger),
        history=st.sampled_from([6, 12, 0]) if ledger else st.just(0),
    )


_LANES = st.integers(0, 3)
WRITES = st.builds(
    Write,
    song=st.integers(1, 4),
    when=st.integers(0, len(TIMESTAMPS) - 1),
    malformed=st.sampled_from((0,) * 20 + (1, 2, 3, 4, 5)),
    genre=st.integers(0, len(GENRES) - 1),
    plays=st.integers(0, len(PLAYS) - 1),
)
DELIVERY_FAULTS = ("none",) * 5 + FAULTS[1:] + ("interleave",)


@st.composite
def _deliveries(draw: st.DrawFn) -> Deliver:
    """Packed draws (fewer choices per step, so histories generate fast); each shrinks towards the plain case."""
    shape = draw(st.integers(0, 4 * 4 * 6 * 2 - 1))
    part, order, extend, fresh = shape % 4, shape // 4 % 4, shape // 16 % 6, bool(shape // 96)
    flags = draw(st.integers(0, 13))
    return Deliver(
        lane=draw(_LANES),
        size=draw(st.sampled_from([10, 1, 3, 100])),
        fault=draw(st.sampled_from(DELIVERY_FAULTS)),
        at=draw(st.integers(0, 8)),
        part=part,
        order=order,
        extend=extend,
        fresh=fresh,
        early=flags % 7 == 6,
        final_records=flags >= 7,
    )


DELIVERIES = _deliveries()
DIRECTS = st.builds(
    Direct,
    lane=_LANES,
    kind=st.sampled_from(["ahead", "behind", "invented", "through"]),
    count=st.integers(1, 3),
    fault=st.sampled_from(("none",) * 3 + ("killed", "lost_response", "throttled", "late_write", "pause", "pause")),
    at=st.integers(0, 6),
)
WAITS = st.builds(Wait, seconds=st.sampled_from([2, 2, 30, 30, 120, 900, 3700, 90000]))
RESHARDS = st.builds(Reshard, lane=_LANES, children=st.sampled_from([1, 2]), lower=st.booleans())
HEATS = st.builds(Heat, song=st.integers(1, 4))
LANDS = st.builds(Land, index=st.integers(0, 5))
RESUMES = st.builds(Resume, index=st.integers(0, 3))
PAUSES = st.builds(
    Pause,
    rollovers=st.integers(1, 3),
    hours=st.sampled_from([25, 13, 2]),
    early=st.booleans(),
    sweeps=st.sampled_from([0, 0, 1, 2]),
    writes_after=st.sampled_from([True, True, False]),
    faulted_sweeps=st.booleans(),
)
STRATEGIES = {
    "write": WRITES,
    "deliver": DELIVERIES,
    "direct": DIRECTS,
    "wait": WAITS,
    "land": LANDS,
    "reshard": RESHARDS,
    "heat": HEATS,
    "resume": RESUMES,
    "pause": PAUSES,
}
WEIGHTS = (
    ("write",) * 6
    + ("deliver",) * 8
    + ("direct",) * 2
    + ("wait",) * 2
    + ("reshard",) * 3
    + ("land", "heat", "resume", "pause")
)
"""Weighted by repetition: mostly writes and deliveries, now and then the rest."""
FOCUSED_WEIGHTS = WEIGHTS + ("reshard", "heat", "direct", "resume") * 3
"""More shards, so that more than four of them feed one aggregate and its watermarks are pruned; more direct
invocations paused and resumed, so that readers overtake one another around a prune."""
STEPS = st.sampled_from(WEIGHTS).flatmap(STRATEGIES.__getitem__)
FOCUSED_STEPS = st.sampled_from(FOCUSED_WEIGHTS).flatmap(STRATEGIES.__getitem__)
RETRACTION_STRATEGIES = {
    **STRATEGIES,
    "write": st.builds(
        Write,
        song=st.integers(1, 4),
        when=st.integers(0, len(TIMESTAMPS) - 1),
        malformed=st.sampled_from((0,) * 20 + (1, 2, 3, 4, 5)),
        genre=st.integers(0, len(GENRES) - 1),
        plays=st.integers(0, len(PLAYS) - 1),
        other=st.sampled_from((False, False, True)),
    ),
    "delete": st.builds(Delete, pick=st.integers(0, 15), ttl=st.sampled_from((False, False, True))),
    "edit": st.builds(Edit, pick=st.integers(0, 15), change=st.sampled_from(EDITS), to=st.integers(0, 10)),
    "rewrite": st.builds(
        Rewrite,
        pick=st.integers(0, 5),
        when=st.integers(0, len(EDIT_TIMESTAMPS) - 1),
        genre=st.integers(0, len(GENRES) - 1),
        plays=st.integers(0, len(PLAYS) - 1),
    ),
}
RETRACTIONS = ("delete",) * 4 + ("edit",) * 4 + ("rewrite",)
"""With retractions: about one step in four deletes, edits or rewrites a download, so that counts often end at 0."""
RETRACTION_STEPS = st.sampled_from(WEIGHTS + RETRACTIONS).flatmap(RETRACTION_STRATEGIES.__getitem__)
FOCUSED_RETRACTION_STEPS = st.sampled_from(FOCUSED_WEIGHTS + RETRACTIONS).flatmap(RETRACTION_STRATEGIES.__getitem__)
LEDGER_STRATEGIES = {
    **RETRACTION_STRATEGIES,
    "backfill": st.builds(
        Backfill, run=st.integers(0, 1), items=st.sampled_from([3, 1, 10]), kill=st.sampled_from((False,) * 4 + (True,))
    ),
}
LEDGER_EDITS = ("delete",) * 3 + ("edit",) * 6 + ("rewrite",) * 2 + ("backfill",) * 4
"""Ledger mode: more edits (of the history too) and rewrites under one key, and backfill pages among them."""
LEDGER_STEPS = st.sampled_from(WEIGHTS + LEDGER_EDITS).flatmap(LEDGER_STRATEGIES.__getitem__)
FOCUSED_LEDGER_STEPS = st.sampled_from(FOCUSED_WEIGHTS + LEDGER_EDITS).flatmap(LEDGER_STRATEGIES.__getitem__)
LEDGER_KINDS = ("backfill killed", "two backfills at once")
"""What ledger histories do besides retractions (Outcome.hazards): the suite asks for each."""


def histories(
    aggregate_writes: tuple[str, ...] = ("per_batch", "per_window"),
    chunk: int = 12,
    chunks_max: int = 12,
    focused: bool = False,
    boards: tuple[str, ...] = ("month",),
    retractions: bool = False,
    ledger: bool = False,
) -> st.SearchStrategy[History]:
    """Histories of one to about a hundred steps (chunks of steps, so that they are long yet shrink to one).

    `focused` histories feed one aggregate from many shards: where watermark pruning happens (and, with retractions,
    where a count most often ends back at 0). With `retractions`, downloads are also deleted, edited and written again,
    and Time to Live deletes some; with `ledger`, the same in ledger mode, with a history and backfills.
    """
    if ledger:
        steps = FOCUSED_LEDGER_STEPS if focused else LEDGER_STEPS
    elif retractions:
        steps = FOCUSED_RETRACTION_STEPS if focused else RETRACTION_STEPS
    else:
        steps = FOCUSED_STEPS if focused else STEPS
    parts = st.lists(st.lists(steps, min_size=1, max_size=chunk), min_size=3, max_size=chunks_max)
    config = configs(aggregate_writes, focused, boards, retractions, ledger)
    return st.builds(History, config, parts.map(lambda chunks: tuple(s for c in chunks for s in c)))
