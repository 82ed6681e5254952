"""Histories of deliveries as lists of steps, drawn by hypothesis, played on the model, judged by an oracle.

A history is a mapping configuration and a list of steps (`Write`, `Deliver`, `Direct`, `Wait`, `Pause`,
`Reshard`, `Heat`, `Land`). Any list is a valid history: a step that does not apply is a no-op,
so hypothesis can shrink a failing history to a short story of deliveries, which prints as
Python and is kept as a regression test. After the steps, Lambda catches up without faults
(`World.drain`), the oracle checks that nothing is missing without a durable failure record,
the operator's `recover` acts on every failure record, and then every aggregate must equal the
recount of the downloads written (by the oracle's own month parser, not the aggregator's).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

from tests.stream_model.aws_delivery import FAULTS, SCHEDULE_SECONDS, Delivery, MappingSettings, World, Written
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

BOARDS = {
    "month": ((), None, None),
    "periods and a category": (("day", "week", "month", "all"), "Genre", None),
    "periods, a category, summed": (("hour", "month", "year", "all"), "Genre", "Plays"),
}
"""What a history's aggregator keeps: periods (none: the guide's months), category and summed attribute."""
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
    """The application writes one download of song<song> at TIMESTAMPS[when].

    malformed: 1-3 the timestamp is wrong; 4 the summed attribute is not a number (when the boards
    sum); 5 the category is not a string (when the boards have categories); else well-formed.
    genre: GENRES[genre]; plays: PLAYS[plays] (when the boards have categories, when they sum).
    """

    song: int = 1
    when: int = 0
    malformed: int = 0
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
    """Writes use TIMESTAMPS[when % timestamps]: with one, every download lands in one month."""
    boards: str = "month"
    """A name of BOARDS: the periods, category and summed attribute the aggregator keeps."""

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
    lost: int = 0
    over: int = 0
    unreported_malformed: int = 0
    hazards: set[str] = field(default_factory=set)
    invocations: int = 0
    writes: int = 0
    drain_failures: int = 0
    failure_records: int = 0
    board_kinds: set[str] = field(default_factory=set)
    """What the truth held: `category` boards, `fractions` summed, a `week of the next year` (2018-12-31's)."""

    def problems(self) -> list[str]:
        found = []
        if self.over_before or self.over:
            found.append(f"over-counted {max(self.over_before, self.over)}")
        if self.uncovered:
            found.append(f"{self.uncovered} lost without a durable failure record")
        if self.lost:
            found.append(f"{self.lost} lost after recover")
        if self.unreported_malformed:
            found.append(f"{self.unreported_malformed} malformed downloads never reported")
        return found

    def summary(self) -> str:
        return (
            f"{self.design}: {self.downloads} downloads, lost {self.lost_before} before recover "
            f"({self.uncovered} uncovered), {self.lost} after, over-counted {max(self.over_before, self.over)}, "
            f"{self.invocations} invocations, {self.failure_records} failure records, hazards {sorted(self.hazards)}"
        )


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


def boards_of(written: Written, boards: str) -> list[str]:
    """The aggregates' sort keys a download counts in, as docs/leaderboard-shards.md names them: bucket[@category]."""
    periods, category, _ = BOARDS[boards]
    if not periods:
        return [utc_month(written.timestamp)]
    buckets = utc_buckets(written.timestamp, periods)
    genre = written.genre.get("S") if category and written.genre else None
    return buckets + ([f"{bucket}@{quote(genre, safe='')}" for bucket in buckets] if genre else [])


def amount_of(written: Written) -> Decimal:
    return Decimal(written.plays["N"]) if written.plays is not None else Decimal(1)


def truth_of(world: World) -> Counter[tuple[str, str]]:
    boards = world.config.boards
    truth: Counter[tuple[str, str]] = Counter()
    for written, _ in world.written:
        if not written.malformed:
            for board in boards_of(written, boards):
                truth[(written.song_id, board)] += amount_of(written)
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

    def covers(record: Any) -> bool:
        in_trimmed = any(low < record.sequence <= high for low, high in trimmed.get(record.shard_id, []))
        return record.sequence <= ends.get(record.shard_id, -1) or in_trimmed

    return covers


def covered_by_failure_records(world: World) -> Counter[tuple[str, str]]:
    """Per aggregate, how many of its downloads a durable failure record names."""
    covers = failure_coverage(world)
    covered: Counter[tuple[str, str]] = Counter()
    for written, record in world.written:
        if not written.malformed and covers(record):
            for board in boards_of(written, world.config.boards):
                covered[(written.song_id, board)] += amount_of(written)
    return covered


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
    counter = 0
    for step in history.steps:
        counter = apply(world, step, counter)
    world.drain()
    outcome = Outcome(history, world.design.name, downloads=sum(1 for w, _ in world.written if not w.malformed))
    truth = truth_of(world)
    counted = counted_of(world)
    outcome.lost_before, outcome.over_before = differences(truth, counted)
    covered = covered_by_failure_records(world)
    outcome.uncovered = sum(max(0, max(0, truth[key] - counted.get(key, 0)) - covered.get(key, 0)) for key in truth)
    outcome.failure_records = len(world.queue.messages)
    outcome.drain_failures = world.drain_discards
    recover(world)
    world.dynamodb.land_delayed()
    outcome.lost, outcome.over = differences(truth, counted_of(world))
    if world.design.reports_rejected:
        reported = {str(m.get("sequenceNumber")) for m in world.queue.of_kind("rejected_download")}
        covers = failure_coverage(world)
        outcome.unreported_malformed = sum(
            1
            for written, record in world.written
            if written.malformed and str(record.sequence) not in reported and not covers(record)
        )
    outcome.hazards = set(world.hazards)
    outcome.board_kinds = {
        kind
        for (_, board), value in truth.items()
        for kind, present in (
            ("category", "@" in board),
            ("fractions", value != value.to_integral_value()),
            ("week of the next year", board.startswith("2019-W01")),
        )
        if present
    }
    outcome.invocations = world.invocations
    outcome.writes = world.dynamodb.writes
    return outcome


def apply(world: World, step: Step, counter: int) -> int:
    if isinstance(step, Write):
        world.write(_written(world, step, counter))
        return counter + 1
    return _apply_other(world, step, counter)


def _written(world: World, step: Write, counter: int) -> Written:
    """The download a Write step writes: its song, month, category and summed amount as the history's boards keep."""
    config = world.config
    song = f"song{(step.song - 1) % config.songs + 1}"
    timestamp = TIMESTAMPS[step.when % config.timestamps]
    _, category, summed = BOARDS[config.boards]
    malformed = step.malformed if step.malformed <= 3 else 0
    genre = plays = None
    if category:
        genre = {"N": "5"} if step.malformed == 5 else _genre(step.genre)
        malformed = malformed or (5 if step.malformed == 5 else 0)
    if summed:
        plays = {"S": "12"} if step.malformed == 4 else {"N": PLAYS[step.plays % len(PLAYS)]}
        malformed = malformed or (4 if step.malformed == 4 else 0)
    return Written(song, f"download-{counter:05d}", timestamp, malformed, genre, plays)


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
) -> st.SearchStrategy[Config]:
    """Mapping settings; `focused`: one song in one month, so that every shard feeds the same aggregate."""
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


def histories(
    aggregate_writes: tuple[str, ...] = ("per_batch", "per_window"),
    chunk: int = 12,
    chunks_max: int = 12,
    focused: bool = False,
    boards: tuple[str, ...] = ("month",),
) -> st.SearchStrategy[History]:
    """Histories of one to about a hundred steps (chunks of steps, so that they are long yet shrink to one).

    `focused` histories feed one aggregate from many shards: where watermark pruning happens.
    """
    steps = FOCUSED_STEPS if focused else STEPS
    parts = st.lists(st.lists(steps, min_size=1, max_size=chunk), min_size=3, max_size=chunks_max)
    config = configs(aggregate_writes, focused, boards)
    return st.builds(History, config, parts.map(lambda chunks: tuple(s for c in chunks for s in c)))
