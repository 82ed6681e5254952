"""The stream model and the emulators' engine deliver a shard by the same rules.

Lambda's stream delivery has two drivers: the unit tier's model (`tests/stream_model/aws_delivery.py`,
adversarial, several shards, steps chosen by the history) and the emulators' engine
(`leaderboard_dev/emulators/stream_mapping.py`, one shard, a blocking loop the emulators' readers call).
The rules both apply are one definition (`leaderboard_dev/emulators/delivery_rules.py`: a record's window,
what a batch holds, the windowed event, whether an invocation succeeded, the retry quota, the on-failure
record); what each driver does with them is its own: when it invokes, what it retries and with which state,
when a window closes, where the checkpoint goes, which records a given-up batch or window names. This test
holds the two drivers to one trace. Hypothesis draws one history (records written to one shard in phases,
a mapping configuration, the function's answer to each invocation) and plays it through both: the model
with every adversarial liberty off (`Delivery(size=BatchSize)`, as its drain plays it), the engine with
its adversary off. Both traces (every invocation: its records, window, state, flags; every on-failure
record) must agree on every rule both implement. What only one implements is listed in `ONE_SIDED`, with
the reason.

Time is the model's: a write takes 0.25 s, an invocation 0.05 s (a timeout 60 s more), a failed
invocation backs off min(2^k, 60) s after the k-th failure in a row (AWS documents no backoff; the
engine's own pause is a setting, here replaced by the model's so that record ages agree).
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, event, example, given, seed, settings
from hypothesis import strategies as st

from leaderboard_dev.emulators import stream_mapping as engine
from tests.property_examples import examples
from tests.stream_model import aws_delivery as model
from tests.stream_model.environment import STREAM_ARN, Design, Environment
from tests.stream_model.fake_dynamodb import Killed

ONE_SIDED: dict[str, str] = {
    "adversarial liberties": "The model's retries out of order, split, merged with newer records, with a fresh "
    "state; windows ended early (isWindowTerminatedEarly on a batch); a final invocation carrying records; first "
    "deliveries shorter than BatchSize. All are off here (Delivery(size=BatchSize)). The engine's own adversary "
    "(adversarial_retries.py) takes a subset of them with its own draws, so no history can play the same liberty "
    "through both; it is off here too.",
    "several shards": "Splits, rollovers, splits for heat, parent before child, retention trimming and deleted "
    "shards are the model's: the engine delivers the one shard its reader hands it (the readers, not the engine, "
    "order parents before children).",
    "GetRecords and the filter": "The model reads its own stream (empty pages, throttles, expired iterators, the "
    "event filter); the engine is handed records already read and filtered. Here every record passes the filter.",
    "faults inside the function": "Killed functions, lost responses, throttled, late or lost writes and direct "
    "invocations happen inside the model's invocation; to the engine they are an invocation that failed, which "
    "the scripted function's 'error' and 'timeout' answers stand for.",
    "bisect on function error": "BisectBatchOnFunctionError is the engine's only (the model's deployment, like "
    "the module's, does not set it): not drawn.",
    "batching window": "MaximumBatchingWindowInSeconds is the engine readers' Gathering, before ShardDelivery; "
    "the model lets the history choose any batch up to BatchSize instead. Here both take every record at hand.",
    "payload and state limits": "The 1 MB window state (terminated early when exceeded) is the engine's; the 6 MB "
    "invocation payload is delivery_rules.batch_end's, which the model applies without record sizes (its records "
    "and states are small, and it ends windows early at will).",
    "throttled invocations": "InvocationNotDelivered (retried without counting towards MaximumRetryAttempts) is "
    "the engine's; the model's invocations always reach the function.",
    "records stamped before the open window": "The engine puts a record whose approximate time falls before the "
    "open window into that window; the model inserts with a monotonic clock, so it never happens here.",
    "a partial batch response to a retry": "After a failure the model keeps every record of the retry pending until "
    "one invocation of them succeeds, so a partial response to a retry re-presents records below the reported "
    "one (at-least-once allows it); the engine checkpoints below the lowest reported record, as the guide's "
    "checkpoint rule says. The scripted function answers a retry with an error instead.",
    "ParallelizationFactor, UpdateEventSourceMapping, close": "The engine's alone; the model's mapping settings "
    "are fixed for a history.",
}
"""Rules only one side implements, and why the parity test does not compare them. (A partial batch response beside
a window's state is one rule, delivery_rules.judge, but no design of the model reports batch item failures under a
window: partial batch responses are drawn only without one.)"""

RELAXED: dict[str, str] = {
    "how records given up between two invocations are grouped": "AWS says only that records older than the "
    "maximum age are discarded and that the destination gets 'details about the batch'. The model names every "
    "expired record of the shard in one on-failure record; the engine one record per BatchSize of them. Compared "
    "(GivenUp): per condition, the records the ranges name, their total batchSize and the highest invoke count.",
    "what a given-up window's record names": "AWS documents nothing for a window whose final invocation is "
    "given up. The engine names every record of the window; the model, more adversarially, only the window's "
    "last successful batch (the least a reader may count on, exactly-once.md), and nothing when none succeeded; "
    "a window too old while one of its batches is retried goes in one record with that batch (model) or in a "
    "record after the batch's (engine). Compared: shard, condition, invoke count; the model names at least the "
    "batches the engine gave up and at most those and the window's records; where the model names nothing, the "
    "engine's window record names only records already given up.",
}
"""Rules both implement where AWS leaves a choice and the two choose differently: compared in their common part."""

SONG = "song1"
TIMEOUT_SECONDS = 60.0
INVOCATION_SECONDS = 0.05
WRITE_SECONDS = 0.25
ANSWERS_WINDOWED = ("ok", "ok", "error", "timeout", "no state")
ANSWERS_PLAIN = ("ok", "ok", "error", "timeout", "partial 0", "partial 1", "partial 2")


@dataclass(frozen=True)
class PhaseOfWrites:
    gaps: tuple[float, ...]
    """Seconds before each record is written (one record per gap)."""
    pause: float
    """Seconds after the last write before the mapping reads the shard."""


@dataclass(frozen=True)
class ParityHistory:
    window_seconds: int | None
    batch_size: int
    maximum_retry_attempts: int | None
    maximum_record_age: int | None
    report_batch_item_failures: bool
    phases: tuple[PhaseOfWrites, ...]
    answers: tuple[str, ...]
    """The function's answer to each invocation in turn; every later invocation succeeds."""
    ending: str
    """After the last phase: 'shard ends' (the window closes with the shard) or 'time passes' (by one window)."""
    seed: int


@st.composite
def parity_histories(draw: st.DrawFn) -> ParityHistory:
    window = draw(st.one_of(st.none(), st.sampled_from([1, 2, 5, 30])))
    partial = window is None and draw(st.booleans())
    answers = ANSWERS_PLAIN if partial else ANSWERS_WINDOWED
    phase = st.builds(
        PhaseOfWrites,
        gaps=st.lists(st.sampled_from([0.0, 0.1, 0.5, 1.0, 3.0, 7.0]), min_size=1, max_size=7).map(tuple),
        pause=st.sampled_from([0.0, 1.0, 5.0, 40.0]),
    )
    return ParityHistory(
        window_seconds=window,
        batch_size=draw(st.integers(1, 5)),
        maximum_retry_attempts=draw(st.one_of(st.none(), st.integers(0, 3))),
        maximum_record_age=draw(st.one_of(st.none(), st.sampled_from([1, 10, 60, 200]))),
        report_batch_item_failures=partial,
        phases=tuple(draw(st.lists(phase, min_size=1, max_size=4))),
        answers=tuple(draw(st.lists(st.sampled_from(answers), max_size=20))),
        ending=draw(st.sampled_from(["shard ends", "time passes"])),
        seed=draw(st.integers(0, 2**16)),
    )


# ---------------------------------------------------------------------------------------------- the traces


@dataclass
class Trace:
    """What one implementation delivered: invocations and on-failure records, in the order they happened."""

    entries: list[tuple[Any, ...]] = field(default_factory=list)
    window_records: set[int] = field(default_factory=set)
    """Indexes of the entries that are a given-up window's record (the engine's only: it tells them apart)."""

    def invocation(self, event: dict[str, Any]) -> None:
        sequences = tuple(int(record["dynamodb"]["SequenceNumber"]) for record in event["Records"])
        if "window" not in event:
            self.entries.append(("invoke", sequences))
            return
        window = (event["window"]["start"], event["window"]["end"])
        self.entries.append(
            (
                "invoke",
                sequences,
                window,
                copy.deepcopy(event["state"]),
                event["isFinalInvokeForWindow"],
                event["isWindowTerminatedEarly"],
            )
        )

    def failure(self, message: dict[str, Any], window: bool = False) -> None:
        if window:
            self.window_records.add(len(self.entries))
        info = message["DDBStreamBatchInfo"]
        self.entries.append(
            (
                "failure",
                message["requestContext"]["condition"],
                info["shardId"],
                int(info["startSequenceNumber"]),
                int(info["endSequenceNumber"]),
                info["batchSize"],
                message["requestContext"]["approximateInvokeCount"],
            )
        )


class Function:
    """The function both implementations invoke: answers from the history's script, a state that lists records."""

    def __init__(self, answers: tuple[str, ...], trace: Trace) -> None:
        self._answers = list(answers)
        self.trace = trace
        self._seen: set[str] = set()

    def answer(self, event: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        """The scripted answer and the response a successful invocation returns."""
        self.trace.invocation(event)
        answer = self._answers.pop(0) if self._answers else "ok"
        sequences = [record["dynamodb"]["SequenceNumber"] for record in event["Records"]]
        retried = not self._seen.isdisjoint(sequences)
        self._seen.update(sequences)
        if answer.startswith("partial") and retried:
            answer = "error"  # ONE_SIDED: "a partial batch response to a retry"
        if answer.startswith("partial"):
            if not sequences:
                return "ok", {}
            failed = sequences[int(answer.split()[1]) % len(sequences)]
            return answer, {"batchItemFailures": [{"itemIdentifier": failed}]}
        if answer == "no state":
            return answer, {}
        if "window" in event:
            return answer, {"state": {"seen": [*event["state"].get("seen", []), *sequences]}}
        return answer, {}


# ---------------------------------------------------------------------------------------------- the model


class ScriptedDesign(Design):
    name = "scripted"

    def __init__(self, env: Environment, function: Function, windowed: bool, partial: bool) -> None:
        self.env = env
        self.function = function
        self.uses_windows = windowed
        self.reports_batch_item_failures = partial

    def invoke(self, event: dict[str, Any], remaining_ms: Any) -> dict[str, Any] | None:
        answer, response = self.function.answer(event)
        if answer == "error":
            raise RuntimeError("the function failed")
        if answer == "timeout":
            self.env.sleep(TIMEOUT_SECONDS)
            raise Killed("Lambda ended the invocation at its timeout")
        return response


def play_model(history: ParityHistory) -> tuple[Trace, list[list[model.StreamRecord]]]:
    """The model's drain, phase by phase: every liberty off, each step a full batch."""
    trace = Trace()
    function = Function(history.answers, trace)
    world = model.World(
        lambda env: ScriptedDesign(
            env, function, history.window_seconds is not None, history.report_batch_item_failures
        ),
        model.MappingSettings(
            window_seconds=history.window_seconds,
            batch_size=history.batch_size,
            maximum_retry_attempts=history.maximum_retry_attempts,
            maximum_record_age=history.maximum_record_age,
        ),
        history.seed,
    )
    world.queue.messages = FailureRecords(trace)
    width = history.window_seconds or 1
    written: list[list[model.StreamRecord]] = []
    lane: model.Lane | None = None

    def catch_up() -> None:
        assert lane is not None
        for _ in range(10_000):
            if lane.idle(world.now, width):
                return
            world.deliver(lane, model.Delivery(size=history.batch_size))
        raise AssertionError("the model did not catch up")

    for phase in history.phases:
        records = []
        for gap in phase.gaps:
            world.wait(gap)
            world.write(model.Written(SONG, f"download-{len(world.written)}", "2018-01-15T12:30:00Z"))
            records.append(world.written[-1][1])
        written.append(records)
        world.wait(phase.pause)
        lane = lane or world.sync_lanes()[0]
        catch_up()
    assert lane is not None
    if history.ending == "shard ends":
        world.stream.reshard(lane.shard, 1, lower=False)
    else:
        world.wait(width)
    catch_up()
    assert len(world.stream.shards) == 1 or history.ending == "shard ends", "the history wrote to one shard"
    return trace, written


class FailureRecords(list[dict[str, Any]]):
    """The model's failure queue, each on-failure record traced as it arrives (between invocations)."""

    def __init__(self, trace: Trace) -> None:
        super().__init__()
        self._trace = trace

    def append(self, message: dict[str, Any]) -> None:
        self._trace.failure(message)
        super().append(message)


# ---------------------------------------------------------------------------------------------- the engine


class ModelTime:
    """The engine's clock, advanced as the model's: its own pause is nothing, the backoff follows a failure."""

    def __init__(self, now: float) -> None:
        self.moment = now

    def now(self) -> float:
        return self.moment

    def sleep(self, seconds: float) -> None:
        """The engine's pause between retries; the model's backoff has already passed (`backoff`)."""


def play_engine(history: ParityHistory, written: list[list[model.StreamRecord]]) -> Trace:
    """The same records, read phase by phase as the emulators' readers hand them over, adversary off."""
    trace = Trace()
    function = Function(history.answers, trace)
    clock = ModelTime(model.START)
    inserted = {str(record.sequence): record.inserted for records in written for record in records}
    failures_in_a_row = 0
    failed_last: set[str] | None = None
    """The records of the last failed invocation (empty: a final one); None after a success."""

    def invoke(payload: dict[str, Any]) -> tuple[bool, Any]:
        nonlocal failures_in_a_row, failed_last
        answer, response = function.answer(payload)
        if answer == "timeout":
            clock.moment += TIMEOUT_SECONDS
        clock.moment += INVOCATION_SECONDS
        failed = answer in ("error", "timeout") or (answer == "no state" and "window" in payload)
        failed = failed or answer.startswith("partial")
        if failed:
            # the model's backoff counts the failures of one batch (or one final invocation) in a row
            records = {engine.sequence_number(record) for record in payload["Records"]}
            same = failed_last is not None and (records & failed_last or records == failed_last == set())
            failures_in_a_row = failures_in_a_row + 1 if same else 1
            failed_last = records
            clock.moment += min(2.0 ** min(failures_in_a_row, 6), 60.0)
        else:
            failures_in_a_row, failed_last = 0, None
        if answer == "error":
            return True, {"errorMessage": "the function failed"}
        if answer == "timeout":
            return True, {"errorMessage": "Task timed out after 60.00 seconds"}
        return False, response

    reporting_a_window = False

    def send_failure_record(message: dict[str, Any]) -> None:
        trace.failure(message, window=reporting_a_window)

    shard_id = written[0][0].shard_id
    delivery = engine.ShardDelivery(
        engine.MappingSettings(
            function_arn="arn:aws:lambda:us-east-1:000000000000:function:parity",
            batch_size=history.batch_size,
            tumbling_window_seconds=history.window_seconds or 0,
            maximum_retry_attempts=-1 if history.maximum_retry_attempts is None else history.maximum_retry_attempts,
            maximum_record_age_seconds=-1 if history.maximum_record_age is None else history.maximum_record_age,
            report_batch_item_failures=history.report_batch_item_failures,
        ),
        shard_id,
        STREAM_ARN,
        invoke,
        send_failure_record,
        clock,
        insertion_time=lambda record: inserted[engine.sequence_number(record)],
    )
    report_window = delivery._report_window

    def report_a_window(*arguments: Any) -> None:
        """Tag the given-up windows' records (RELAXED); the engine sends them as it sends any other."""
        nonlocal reporting_a_window
        reporting_a_window = True
        try:
            report_window(*arguments)
        finally:
            reporting_a_window = False

    delivery._report_window = report_a_window  # type: ignore[method-assign]
    for phase, records in zip(history.phases, written, strict=True):
        for gap in phase.gaps:
            clock.moment += gap + WRITE_SECONDS
        clock.moment += phase.pause
        assert delivery.deliver([record.lambda_form() for record in records]) == len(records)
        delivery.tick()
    if history.ending == "shard ends":
        delivery.end_of_shard()
    else:
        clock.moment += history.window_seconds or 1
        delivery.tick()
    return trace


# ---------------------------------------------------------------------------------------------- the comparison


@dataclass
class GivenUp:
    """The on-failure records sent between two invocations, by condition: the records they name (by range), their
    total batchSize and highest approximateInvokeCount, and what given-up windows' records name (engine only)."""

    named: dict[str, set[int]] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    windows: dict[str, set[int]] = field(default_factory=dict)
    shards: set[str] = field(default_factory=set)

    def add(self, entry: tuple[Any, ...], window: bool, sequences: list[int]) -> None:
        condition = entry[1]
        self.shards.add(entry[2])
        named = {number for number in sequences if entry[3] <= number <= entry[4]}
        (self.windows if window else self.named).setdefault(condition, set()).update(named)
        if not window:
            self.sizes[condition] = self.sizes.get(condition, 0) + entry[5]
        self.counts[condition] = max(self.counts.get(condition, 0), entry[6])

    def __bool__(self) -> bool:
        return bool(self.named or self.windows)


def normalized(trace: Trace, sequences: list[int]) -> list[tuple[Any, ...] | GivenUp]:
    """The invocations as they are; the on-failure records between two invocations as one GivenUp."""
    items: list[tuple[Any, ...] | GivenUp] = []
    gap = GivenUp()
    for index, entry in enumerate(trace.entries):
        if entry[0] == "failure":
            gap.add(entry, index in trace.window_records, sequences)
            continue
        if gap:
            items.append(gap)
            gap = GivenUp()
        items.append(entry)
    if gap:
        items.append(gap)
    return items


def agree(mine: GivenUp, other: GivenUp) -> bool:
    """RELAXED: the same records given up for the same condition; where the engine gave a window up, the model
    may name less (its last batch) and give the window up with the batch being retried in one record."""
    if mine.shards != other.shards:
        return False
    for condition in {*mine.named, *other.named, *mine.windows, *other.windows}:
        ours = mine.named.get(condition, set())
        theirs = other.named.get(condition, set())
        windows = other.windows.get(condition, set())
        if mine.counts.get(condition) != other.counts.get(condition):
            return False
        if not windows and (ours != theirs or mine.sizes.get(condition) != other.sizes.get(condition)):
            return False
        if windows and not theirs <= ours <= theirs | windows:
            return False
    return True


def compared(model_trace: Trace, engine_trace: Trace, sequences: list[int]) -> str | None:
    """The first item where the traces disagree on a shared rule, described; None if they agree.

    `sequences` are the shard's records, to tell which a failure record's range names.
    """
    ours = normalized(model_trace, sequences)
    theirs = normalized(engine_trace, sequences)
    given_up: set[int] = set()
    i = j = 0
    while i < len(ours) or j < len(theirs):
        mine = ours[i] if i < len(ours) else None
        other = theirs[j] if j < len(theirs) else None
        if isinstance(other, GivenUp):
            given_up.update(*other.named.values())
        if mine == other or (isinstance(mine, GivenUp) and isinstance(other, GivenUp) and agree(mine, other)):
            i, j = i + 1, j + 1
            continue
        if isinstance(other, GivenUp) and not other.named and set().union(*other.windows.values()) <= given_up:
            # RELAXED: the model names nothing for a window none of whose batches succeeded
            j += 1
            continue
        lines = [f"  model  {item}" for item in ours[max(0, i - 4) : i + 1]]
        lines += [f"  engine {item}" for item in theirs[max(0, j - 4) : j + 1]]
        return f"model item {i} / engine item {j} differ (the last five of each):\n" + "\n".join(lines)
    return None


@settings(
    max_examples=examples(400),
    deadline=None,
    database=None,
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    suppress_health_check=list(HealthCheck),
)
@seed(17)
@given(history=parity_histories())
@example(  # the first record exactly as old as the maximum age when it is read: not older, so sent
    history=ParityHistory(
        window_seconds=None,
        batch_size=1,
        maximum_retry_attempts=None,
        maximum_record_age=1,
        report_batch_item_failures=False,
        phases=(PhaseOfWrites(gaps=(0.0, 0.0, 0.0, 0.0), pause=0.0),),
        answers=(),
        ending="shard ends",
        seed=0,
    )
)
def test_the_model_and_the_engine_deliver_the_same_history_alike(history: ParityHistory) -> None:
    # given a history of one shard and the function's answers
    # when the model and the engine each deliver it
    model_trace, written = play_model(history)
    engine_trace = play_engine(history, written)
    # then every invocation and every on-failure record agree on the rules both implement
    sequences = [record.sequence for records in written for record in records]
    difference = compared(model_trace, engine_trace, sequences)
    assert difference is None, difference
    for kind in played(model_trace, engine_trace):
        event(kind)


def played(model_trace: Trace, engine_trace: Trace) -> set[str]:
    """The rules a history exercised (`pytest --hypothesis-show-statistics` counts them)."""
    kinds = {entry[1] for entry in model_trace.entries if entry[0] == "failure"}
    kinds |= {"window given up" for _ in engine_trace.window_records}
    invocations = [entry for entry in model_trace.entries if entry[0] == "invoke"]
    kinds |= {"final invocation" for entry in invocations if len(entry) > 2 and entry[4]}
    kinds |= {"retry" for a, b in itertools.pairwise(invocations) if a[1] and set(a[1]) & set(b[1])}
    return kinds
