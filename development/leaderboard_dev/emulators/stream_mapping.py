"""Lambda's delivery of one DynamoDB stream shard to a function, for emulators that lack it.

Neither emulator implements tumbling windows, and MiniStack ignores most of the stream
mapping's error handling, so both hand the records of a shard to this engine, which
follows the AWS Lambda Developer Guide (pages with-ddb, services-ddb-windows,
services-ddb-batchfailurereporting, services-ddb-params, services-dynamodb-errors); the
quotes below are from them. It knows nothing of either emulator: the caller reads and
filters the shard, and passes in how to invoke the function and where failure records go.
Retries re-send the failed batch (or its bisected halves) in order, unless an ``adversary`` is
given and switched on: then they take the further liberties the guide allows
(``adversarial_retries``). The rules it shares with the unit tier's stream model (windows, what a
batch holds, when an invocation succeeded, when records are given up, the on-failure record) are
``delivery_rules``.

Standard library only: LocalStack imports it into its own interpreter.
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from leaderboard_dev.emulators.adversarial_retries import AdversarialRetries, Adversary, Journal, Source
from leaderboard_dev.emulators.delivery_rules import (
    PAYLOAD_LIMIT_BYTES,
    Outcome,
    Record,
    batch_end,
    failure_record,
    iso_milliseconds,
    iso_seconds,
    judge,
    retries_exhausted,
    too_old,
    window_event,
    window_start,
)

LOG = logging.getLogger(__name__)

POLL_INTERVAL_SECONDS = 0.25
"""Both emulators' pollers: "Lambda polls shards in your DynamoDB stream for records at a base rate of 4
times per second" (Lambda guide, Using AWS Lambda with Amazon DynamoDB)."""

Invoke = Callable[[dict[str, Any]], tuple[bool, Any]]
"""Synchronously invoke the function with a payload; return (function error?, response payload)."""
SendFailureRecord = Callable[[dict[str, Any]], None]
InsertionTime = Callable[[Record], float | None]
"""When a record was inserted into the stream, in seconds since the epoch, or None if unknown."""

RETRY_ATTEMPTS_EXHAUSTED = "RetryAttemptsExhausted"
# The guide's example invocation record names only the retry condition; for record age this is
# the value LocalStack's stream poller sends (no AWS page at hand names it).
RECORD_AGE_EXCEEDED = "RecordAgeExceeded"
# "Your state can be a maximum of 1 MB per shard. If it exceeds that size, Lambda terminates the window early."
STATE_LIMIT_BYTES = 1024 * 1024


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch, the unit of ApproximateCreationDateTime."""
        ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class InvocationNotDelivered(Exception):
    """The batch did not reach the function (throttled, service error).

    "Retry attempts - ... This doesn't apply to service errors or throttles where the batch
    didn't reach the function": such a batch is retried until its records exceed the maximum age.
    """


@dataclass(frozen=True)
class MappingSettings:
    """The event source mapping parameters that shape delivery, with AWS's defaults (services-ddb-params)."""

    function_arn: str = ""
    batch_size: int = 100
    tumbling_window_seconds: int = 0
    bisect_batch_on_function_error: bool = False
    maximum_retry_attempts: int = -1
    maximum_record_age_seconds: int = -1
    report_batch_item_failures: bool = False
    parallelization_factor: int = 1
    maximum_batching_window_seconds: int = 0
    retry_interval_seconds: float = 0.5
    state_limit_bytes: int = STATE_LIMIT_BYTES
    payload_limit_bytes: int = PAYLOAD_LIMIT_BYTES

    @classmethod
    def from_event_source_mapping(cls, mapping: Mapping[str, Any], **overrides: Any) -> MappingSettings:
        """Read the fields of a GetEventSourceMapping response (absent or null fields take AWS's defaults)."""

        def number(key: str, default: int) -> int:
            value = mapping.get(key)
            return default if value is None else int(value)

        settings = cls(
            function_arn=str(mapping.get("FunctionArn") or ""),
            batch_size=number("BatchSize", 100),
            tumbling_window_seconds=number("TumblingWindowInSeconds", 0),
            bisect_batch_on_function_error=bool(mapping.get("BisectBatchOnFunctionError")),
            maximum_retry_attempts=number("MaximumRetryAttempts", -1),
            maximum_record_age_seconds=number("MaximumRecordAgeInSeconds", -1),
            report_batch_item_failures="ReportBatchItemFailures" in (mapping.get("FunctionResponseTypes") or []),
            parallelization_factor=number("ParallelizationFactor", 1),
            maximum_batching_window_seconds=number("MaximumBatchingWindowInSeconds", 0),
        )
        return replace(settings, **overrides)

    @property
    def windowed(self) -> bool:
        return self.tumbling_window_seconds > 0

    def retries_exhausted(self, retries: int) -> bool:
        return retries_exhausted(retries, self.maximum_retry_attempts)

    def too_old(self, age_seconds: float) -> bool:
        return too_old(age_seconds, self.maximum_record_age_seconds)


@dataclass
class _Span:
    """First and last records of a group, as a failure record describes them."""

    first_sequence: str = ""
    last_sequence: str = ""
    first_arrival: float = 0.0
    last_arrival: float = 0.0
    count: int = 0

    def add(self, record: Record, arrival: float) -> None:
        if not self.count:
            self.first_sequence, self.first_arrival = sequence_number(record), arrival
        self.last_sequence, self.last_arrival = sequence_number(record), arrival
        self.count += 1


@dataclass
class _Window:
    start: int
    end: int
    state: dict[str, Any] = field(default_factory=dict)
    records: _Span = field(default_factory=_Span)


@dataclass
class _Batch:
    """Records still to be delivered together, with what their delivery has cost so far."""

    records: list[Record]
    retries: int = 0
    invocations: int = 0
    last_function_error: bool | None = None


def sequence_number(record: Record) -> str:
    return str(record["dynamodb"]["SequenceNumber"])


def approximate_creation_time(record: Record) -> float | None:
    """The record's ApproximateCreationDateTime: epoch seconds "rounded down to the closest second" on AWS."""
    created = record.get("dynamodb", {}).get("ApproximateCreationDateTime")
    if isinstance(created, datetime.datetime):
        return created.timestamp()
    return None if created is None else float(created)


def insertion_time_within_the_minute(stamped: float, read_at: float) -> float:
    """Best estimate of when a record stamped only to the minute was inserted, given when it was read.

    DynamoDB Local rounds ApproximateCreationDateTime down to the minute. The record was inserted
    within that minute and before it was read: read promptly, its read time is within a poll
    interval of its insertion; read from a backlog, the end of its minute is the closest bound.
    """
    return max(stamped, min(read_at, stamped + 59.999))


class ShardDelivery:
    """Delivers the records of one shard to the function, one batch in flight at a time.

    Call ``deliver`` with each run of records read from the shard, already filtered, in stream
    order; call ``tick`` whenever the shard has been read up to the present, so that a window
    whose end has passed is closed even when no later record arrives.
    """

    def __init__(
        self,
        settings: MappingSettings,
        shard_id: str,
        stream_arn: str,
        invoke: Invoke,
        send_failure_record: SendFailureRecord | None = None,
        clock: Clock | None = None,
        insertion_time: InsertionTime = approximate_creation_time,
        adversary: Source | None = None,
        journal: Journal | None = None,
    ) -> None:
        """``adversary`` answers, whenever a batch starts or fails, the adversarial retries to play (None: AWS's
        ordinary retries); ``journal`` receives one entry for each liberty taken."""
        self._settings = settings
        self.shard_id = shard_id
        self.stream_arn = stream_arn
        self._invoke = invoke
        self._send_failure_record = send_failure_record
        self._clock = clock or SystemClock()
        self._insertion_time = insertion_time
        self._adversary_source = adversary
        self._adversary: Adversary | None = None
        self._journal = journal
        self._checkpoint: str | None = None
        self._window: _Window | None = None
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._warn_about_parallelization(settings)

    @property
    def settings(self) -> MappingSettings:
        return self._settings

    def update_settings(self, settings: MappingSettings) -> None:
        """UpdateEventSourceMapping: later batches follow the new settings; an open window stays open."""
        with self._lock:
            if settings != self._settings:
                self._warn_about_parallelization(settings)
                self._settings = settings

    def close(self) -> None:
        """Stop between two invocations (the mapping was deleted or disabled); an open window is kept."""
        self._closed.set()

    @property
    def open_window(self) -> tuple[int, int] | None:
        window = self._window
        return None if window is None else (window.start, window.end)

    @property
    def checkpoint(self) -> str | None:
        """The sequence number of the last record dealt with: every record up to it was in a successful
        invocation, or discarded with a failure record. A retry re-presents only records after it."""
        return self._checkpoint

    def deliver(self, records: Sequence[Record]) -> int:
        """Deliver records in order; block until each is checkpointed, discarded or folded into its window's state.

        Returns how many leading records were dealt with: all of them, unless ``close`` interrupted.
        """
        with self._lock:
            records = list(records)
            done = 0
            while done < len(records) and not self._closed.is_set():
                done = self._discard_expired_ahead(records, done)
                if done == len(records):
                    break
                end = self._batch_end(records, done)
                adversary = self._current_adversary()
                if adversary is None:
                    if not self._deliver_batch(records[done:end]):
                        break
                    done = end
                    continue
                end = done + adversary.first_delivery_size(end - done)
                taken = self._deliver_adversarially(records, done, end, adversary)
                if taken is None:
                    break
                done = taken
            return done

    def tick(self) -> bool:
        """Issue the final invocation of the open window if its end has passed; True if a window was closed.

        "At the end of the window, the flag isFinalInvokeForWindow is set to true to indicate that this
        is the final state and that it's ready for processing." Call it only when the shard has been
        read up to the present, or a record of the window still unread would open the window again.
        """
        with self._lock:
            window = self._window
            if window is None or self._clock.now() < window.end:
                return False
            return self._finish_window(terminated_early=False)

    def end_of_shard(self) -> bool:
        """Close the open window now: "Tumbling window aggregations do not support resharding. When the
        shard ends, Lambda considers the window closed, and the child shards start their own window in a
        fresh state." True if a window was closed."""
        with self._lock:
            return self._window is not None and self._finish_window(terminated_early=False)

    # -- batching ------------------------------------------------------------------------------

    def _discard_expired_ahead(self, records: Sequence[Record], start: int) -> int:
        """Report and skip the records from ``start`` on too old to be sent, before a batch is formed; return the
        index of the first one young enough.

        "MaximumRecordAgeInSeconds - Discard records older than the specified age." Discarding them first
        fills the next batch up to BatchSize with records that can be sent, and opens no window for records
        that never reach the function (as the unit tier's model does: tests/unit/stream_model/test_delivery_parity.py).
        """
        now = self._clock.now()
        end = start
        while end < len(records) and self._settings.too_old(now - self._arrival(records[end])):
            end += 1
        for first in range(start, end, self._settings.batch_size):
            self._report(RECORD_AGE_EXCEEDED, records[first : min(end, first + self._settings.batch_size)], _Batch([]))
        return end

    def _batch_end(self, records: Sequence[Record], start: int) -> int:
        """The end of the batch starting at ``start`` (delivery_rules.batch_end: BatchSize, 6 MB, one window)."""
        return batch_end(
            records,
            start,
            self._settings.batch_size,
            self._window_start_of if self._settings.windowed else lambda _record: None,
            _payload_bytes,
            self._settings.payload_limit_bytes,
        )

    def window_end_of(self, record: Record) -> float | None:
        """The end of the tumbling window the record belongs to, or None without a window."""
        if not self._settings.windowed:
            return None
        return self._window_start_of(record) + self._settings.tumbling_window_seconds

    def _arrival(self, record: Record) -> float:
        inserted = self._insertion_time(record)
        return self._clock.now() if inserted is None else inserted

    def _window_start_of(self, record: Record) -> int:
        """The start of the record's window (delivery_rules.window_start, from its arrival).

        "All records have an approximate timestamp available that Lambda uses in boundary determinations."
        """
        start = window_start(self._arrival(record), self._settings.tumbling_window_seconds)
        # A record stamped before the open window began (the timestamp is approximate) joins that window:
        # its own window has been closed already, and records are processed in order.
        if self._window is not None and start < self._window.start:
            return self._window.start
        return start

    # -- one batch -----------------------------------------------------------------------------

    def _deliver_batch(self, records: list[Record]) -> bool:
        window_start = 0
        if self._settings.windowed:
            window_start = self._window_start_of(records[0])
            # The first record of the next window: the current one is over.
            moved_on = self._window is not None and self._window.start != window_start
            if moved_on and not self._finish_window(terminated_early=False):
                return False
        pending: deque[_Batch] = deque([_Batch(records)])
        while pending:
            if self._closed.is_set():
                return False
            if self._settings.windowed and self._window is None:
                self._window = _Window(window_start, window_start + self._settings.tumbling_window_seconds)
            batch = pending[0]
            batch.records = self._discard_expired(batch)
            if not batch.records:
                pending.popleft()
                continue
            try:
                outcome = self._judge(*self._invoke(self._payload(batch.records)), batch.records)
            except InvocationNotDelivered as reason:
                LOG.warning("shard %s: batch not delivered, retrying: %s", self.shard_id, reason)
                self._pause()
                continue
            batch.invocations += 1
            batch.last_function_error = outcome.function_error
            if outcome.succeeded:
                pending.popleft()
                self._checkpoint = sequence_number(batch.records[-1])
                if self._settings.windowed and not self._absorb(outcome.state or {}, batch.records):
                    return False
                continue
            if outcome.retry_from is not None:
                # "If the batchItemFailures array contains multiple items, Lambda uses the record with the
                # lowest sequence number as the checkpoint. Lambda then retries all records starting from
                # that checkpoint." With BisectBatchOnFunctionError too: "the batch is bisected at the
                # returned sequence number and Lambda retries only the remaining records."
                if outcome.retry_from > 0:
                    self._checkpoint = sequence_number(batch.records[outcome.retry_from - 1])
                batch.records = batch.records[outcome.retry_from :]
            elif self._settings.bisect_batch_on_function_error and len(batch.records) > 1:
                # "For function errors, you can also configure the event source mapping to split a failed
                # batch into two batches ... Splitting a batch does not count towards the retry quota."
                # "If your invocation fails and BisectBatchOnFunctionError is turned on, the batch is
                # bisected regardless of your ReportBatchItemFailures setting." Any failed invocation (no
                # state, a malformed partial response) is split like a function error.
                pending.popleft()
                middle = len(batch.records) // 2
                pending.appendleft(_Batch(batch.records[middle:], retries=batch.retries))
                pending.appendleft(_Batch(batch.records[:middle], retries=batch.retries))
                continue
            batch.retries += 1
            # "If the function receives the records but returns an error, Lambda retries until the records
            # in the batch expire, exceed the maximum age, or reach the configured retry quota."
            if self._settings.retries_exhausted(batch.retries):
                self._report(RETRY_ATTEMPTS_EXHAUSTED, batch.records, batch)
                pending.popleft()
                continue
            self._pause()
        return True

    def _discard_expired(self, batch: _Batch) -> list[Record]:
        """Report and drop the records too old to be sent; return the others.

        "MaximumRecordAgeInSeconds - Discard records older than the specified age"; "Maximum age of record
        - The maximum age of a record that Lambda sends to your function". Records are in stream order, so
        the expired ones lead the batch.
        """
        now = self._clock.now()
        expired = 0
        while expired < len(batch.records) and self._settings.too_old(now - self._arrival(batch.records[expired])):
            expired += 1
        if expired:
            self._report(RECORD_AGE_EXCEEDED, batch.records[:expired], batch)
        return batch.records[expired:]

    def _payload(self, records: Sequence[Record]) -> dict[str, Any]:
        if not self._settings.windowed:
            return {"Records": list(records)}
        return self._window_payload(list(records), final=False, terminated_early=False)

    def _window_payload(
        self, records: list[Record], final: bool, terminated_early: bool, fresh_state: bool = False
    ) -> dict[str, Any]:
        window = self._window
        assert window is not None
        state = {} if fresh_state else window.state
        length = window.end - window.start
        return window_event(
            records, window.start, length, state, self.shard_id, self.stream_arn, final, terminated_early
        )

    def _judge(self, function_error: bool, response: Any, records: Sequence[Record]) -> Outcome:
        """Whether an invocation succeeded (delivery_rules.judge, under this mapping's settings)."""
        settings = self._settings
        return judge(function_error, response, records, settings.windowed, settings.report_batch_item_failures)

    def _absorb(self, state: dict[str, Any], records: Sequence[Record]) -> bool:
        """Keep the state a successful invocation returned: the next invocation of the window receives it."""
        window = self._window
        assert window is not None
        window.state = state
        for record in records:
            window.records.add(record, self._arrival(record))
        if len(json.dumps(state).encode()) > self._settings.state_limit_bytes:
            # "If it exceeds that size, Lambda terminates the window early." The final invocation flags it,
            # and the window's later records open it again with an empty state.
            return self._finish_window(terminated_early=True)
        return True

    # -- adversarial retries ---------------------------------------------------------------------

    def _current_adversary(self) -> Adversary | None:
        """The adversary of the policy the source answers now; a new policy starts a new seeded generator."""
        policy: AdversarialRetries | None = None if self._adversary_source is None else self._adversary_source()
        if policy is None:
            self._adversary = None
        elif self._adversary is None or self._adversary.policy != policy:
            self._adversary = Adversary(policy, self.shard_id)
        return self._adversary

    def _deliver_adversarially(self, records: list[Record], start: int, end: int, adversary: Adversary) -> int | None:
        """Deliver ``records[start:end]`` first in order, then retry as ``adversary`` chooses; return the index
        of the first record not dealt with (past any newer records a retry took on), None if ``close`` interrupted.

        "Records are always processed in order the first time. If records are processed more than once, they
        might be processed out of order." The checkpoint moves only over a run of records, from the checkpoint
        on, that all were in successful invocations of the current attempt (or were discarded with a failure
        record); a failed attempt leaves it, and the next one re-presents every record after it. Each failed
        attempt counts towards MaximumRetryAttempts, split or not.
        """
        window_start = 0
        if self._settings.windowed:
            window_start = self._window_start_of(records[start])
            moved_on = self._window is not None and self._window.start != window_start
            if moved_on and not self._finish_window(terminated_early=False):
                return None
        pending = list(records[start:end])
        taken = end
        episode = _Batch(pending)
        attempt = 0
        delivered: set[str] = set()
        while pending:
            if self._closed.is_set():
                return None
            self._open_window(window_start)
            pending = self._discard_expired_in_order(pending, episode)
            if not pending:
                break
            if attempt == 0:
                invocations, merged, reordered = [list(pending)], 0, False
            else:
                delivered_before = sum(1 for record in pending if sequence_number(record) in delivered)
                newer = self._mergeable(records, taken, pending, window_start)
                plan = adversary.plan_retry(pending, newer, delivered_before)
                invocations, merged, reordered = plan.invocations, plan.merged, plan.reordered
                pending += records[taken : taken + merged]
                taken += merged
                episode.records = pending
            outcome = self._attempt(pending, invocations, adversary, window_start, episode)
            if outcome is None:
                return None
            made, fresh_states, failed = outcome
            delivered.update(sequence_number(record) for invocation in made for record in invocation)
            if attempt > 0:
                self._played(
                    "retry",
                    attempt=attempt,
                    invocations=[[sequence_number(record) for record in invocation] for invocation in made],
                    freshState=fresh_states,
                    merged=[sequence_number(record) for record in records[taken - merged : taken]],
                    reordered=reordered,
                    split=len(invocations) > 1,
                    succeeded=not failed,
                )
            attempt += 1
            pending = [record for record in pending if self._checkpoint is None or _after(record, self._checkpoint)]
            if not failed:
                continue
            episode.retries += 1
            # "If the function receives the records but returns an error, Lambda retries until the records in the
            # batch expire, exceed the maximum age, or reach the configured retry quota."
            if self._settings.retries_exhausted(episode.retries):
                self._report(RETRY_ATTEMPTS_EXHAUSTED, pending, episode)
                break
            if self._settings.windowed and adversary.chance(adversary.policy.terminate_early):
                # "isWindowTerminatedEarly: ... Subsequent invoke will continue the same window with a fresh state."
                self._played("window terminated early", checkpoint=self._checkpoint)
                if not self._finish_window(terminated_early=True):
                    return None
            self._pause()
        return taken

    def _attempt(
        self,
        pending: list[Record],
        invocations: list[list[Record]],
        adversary: Adversary,
        window_start: int,
        episode: _Batch,
    ) -> tuple[list[list[Record]], list[bool], bool] | None:
        """Make the attempt's invocations until one fails; move the checkpoint over what they acknowledged.

        Returns the invocations made, whether each was handed a fresh state, and whether one failed; None if
        ``close`` interrupted.
        """
        position = {sequence_number(record): index for index, record in enumerate(pending)}
        acknowledged: set[int] = set()
        checkpointed = 0
        made: list[list[Record]] = []
        fresh_states: list[bool] = []
        for invocation in invocations:
            self._open_window(window_start)
            retry = episode.invocations > 0
            fresh = retry and self._settings.windowed and adversary.chance(adversary.policy.fresh_state)
            payload = (
                self._window_payload(list(invocation), False, False, fresh)
                if self._settings.windowed
                else {"Records": list(invocation)}
            )
            answer = self._invoke_delivered(payload)
            if answer is None:
                return None
            made.append(invocation)
            fresh_states.append(fresh)
            outcome = self._judge(*answer, invocation)
            episode.invocations += 1
            episode.last_function_error = outcome.function_error
            if outcome.succeeded:
                acknowledged.update(position[sequence_number(record)] for record in invocation)
            elif outcome.reported:
                # "Lambda uses the record with the lowest sequence number as the checkpoint": the invocation's
                # records below it are done.
                lowest = min(position[sequence_number(invocation[index])] for index in outcome.reported)
                acknowledged.update(
                    position[sequence_number(record)]
                    for record in invocation
                    if position[sequence_number(record)] < lowest
                )
            checkpointed = self._checkpoint_over(pending, acknowledged, checkpointed)
            if outcome.succeeded and self._settings.windowed:
                window = self._window
                assert window is not None
                window.state = outcome.state or {}
                # "If it exceeds that size, Lambda terminates the window early."
                over_the_limit = len(json.dumps(window.state).encode()) > self._settings.state_limit_bytes
                if over_the_limit and not self._finish_window(terminated_early=True):
                    return None
            if not outcome.succeeded:
                return made, fresh_states, True
        return made, fresh_states, False

    def _checkpoint_over(self, pending: list[Record], acknowledged: set[int], checkpointed: int) -> int:
        """Move the checkpoint over the leading run of acknowledged records; return the run's new length."""
        while checkpointed in acknowledged:
            record = pending[checkpointed]
            self._checkpoint = sequence_number(record)
            if self._window is not None:
                self._window.records.add(record, self._arrival(record))
            checkpointed += 1
        return checkpointed

    def _mergeable(self, records: list[Record], taken: int, pending: list[Record], window_start: int) -> list[Record]:
        """The newer records a retry may take on: the next ones, of the same window, within BatchSize and 6 MB."""
        room = self._settings.batch_size - len(pending)
        budget = self._settings.payload_limit_bytes - sum(_payload_bytes(record) for record in pending)
        newer: list[Record] = []
        for record in records[taken:]:
            if len(newer) >= room:
                break
            if self._settings.windowed and self._window_start_of(record) != window_start:
                break
            budget -= _payload_bytes(record)
            if budget < 0:
                break
            newer.append(record)
        return newer

    def _discard_expired_in_order(self, pending: list[Record], episode: _Batch) -> list[Record]:
        now = self._clock.now()
        expired = 0
        while expired < len(pending) and self._settings.too_old(now - self._arrival(pending[expired])):
            expired += 1
        if expired:
            self._report(RECORD_AGE_EXCEEDED, pending[:expired], episode)
        return pending[expired:]

    def _open_window(self, window_start: int) -> None:
        """The window the batch belongs to, opened again (with a fresh state) if it ended early meanwhile."""
        if self._settings.windowed and self._window is None:
            self._window = _Window(window_start, window_start + self._settings.tumbling_window_seconds)

    def _invoke_delivered(self, payload: dict[str, Any]) -> tuple[bool, Any] | None:
        """Invoke until the payload reaches the function (throttles do not count); None if ``close`` interrupted."""
        while not self._closed.is_set():
            try:
                return self._invoke(payload)
            except InvocationNotDelivered as reason:
                LOG.warning("shard %s: batch not delivered, retrying: %s", self.shard_id, reason)
                self._pause()
        return None

    def _played(self, event: str, **details: Any) -> None:
        """One journal entry for a liberty taken, and a log line."""
        window = self._window
        entry = {
            "event": event,
            "shardId": self.shard_id,
            "window": None if window is None else [iso_seconds(window.start), iso_seconds(window.end)],
            "at": iso_milliseconds(self._clock.now()),
            **details,
        }
        LOG.info("shard %s: adversarial %s: %s", self.shard_id, event, json.dumps(details))
        if self._journal is not None:
            try:
                self._journal(entry)
            except Exception:
                LOG.exception("shard %s: the journal entry could not be written", self.shard_id)

    # -- the end of a window -------------------------------------------------------------------

    def _finish_window(self, terminated_early: bool) -> bool:
        """The window's final invocation, with no records; False only if ``close`` interrupted its retries.

        "Your final processing is synchronously invoked. After successful invocation, your function
        checkpoints the sequence number and stream processing continues. If invocation is unsuccessful,
        your Lambda function suspends further processing until a successful invocation." Since "Tumbling
        windows fully support the existing retry policies maxRetryAttempts and maxRecordAge", the
        suspension ends, as for any batch, after MaximumRetryAttempts retries or once the final invocation
        is older than MaximumRecordAgeInSeconds, counted from the window's end, when it fell due.
        Then the window goes to the on-failure destination like a batch: its first and last sequence
        numbers, and as batchSize the number of its records, whose aggregate was lost.
        """
        window = self._window
        assert window is not None
        final = _Batch([])
        fresh_state = False
        while True:
            if self._closed.is_set():
                return False
            if self._settings.too_old(self._clock.now() - window.end):
                self._report_window(RECORD_AGE_EXCEEDED, window, final)
                break
            try:
                payload = self._window_payload([], True, terminated_early, fresh_state)
                outcome = self._judge(*self._invoke(payload), [])
            except InvocationNotDelivered as reason:
                LOG.warning("shard %s: final invocation not delivered, retrying: %s", self.shard_id, reason)
                self._pause()
                continue
            final.invocations += 1
            final.last_function_error = outcome.function_error
            if outcome.succeeded:
                break
            final.retries += 1
            if self._settings.retries_exhausted(final.retries):
                self._report_window(RETRY_ATTEMPTS_EXHAUSTED, window, final)
                break
            # The guide documents a retry "with the previous state" nowhere for a final invocation; a fresh
            # one is left open.
            adversary = self._current_adversary()
            fresh_state = adversary is not None and adversary.chance(adversary.policy.fresh_state)
            if adversary is not None:
                self._played("final invocation retried", freshState=fresh_state, terminatedEarly=terminated_early)
            self._pause()
        # "After processing, the window completes and your final invocation completes, and then the state is dropped."
        self._window = None
        return True

    # -- failure records -----------------------------------------------------------------------

    def _report(self, condition: str, records: Sequence[Record], batch: _Batch) -> None:
        span = _Span()
        for record in records:
            span.add(record, self._arrival(record))
            if self._window is not None:
                self._window.records.add(record, self._arrival(record))
        if records:
            self._checkpoint = sequence_number(records[-1])
        self._send(condition, span, batch)

    def _report_window(self, condition: str, window: _Window, final: _Batch) -> None:
        self._send(condition, window.records, final)

    def _send(self, condition: str, span: _Span, batch: _Batch) -> None:
        """Send the invocation record of discarded records to the on-failure destination.

        "To retain a record of discarded batches, configure a failed-event destination. Lambda sends a
        document to the destination queue or topic with details about the batch." Its shape is the
        documented example invocation record; responseContext describes the last invocation, if any.
        """
        record = failure_record(
            condition,
            self.shard_id,
            self.stream_arn,
            (span.first_sequence, span.first_arrival),
            (span.last_sequence, span.last_arrival),
            span.count,
            batch.invocations,
            self._clock.now(),
            function_arn=self._settings.function_arn,
            function_error=batch.last_function_error if batch.invocations else None,
        )
        LOG.warning(
            "shard %s: %s, discarding records %s..%s (%d)",
            self.shard_id,
            condition,
            span.first_sequence,
            span.last_sequence,
            span.count,
        )
        if self._send_failure_record is None:
            return
        try:
            self._send_failure_record(record)
        except Exception:
            LOG.exception("shard %s: the failure record could not be sent", self.shard_id)

    def _pause(self) -> None:
        self._clock.sleep(self._settings.retry_interval_seconds)

    def _warn_about_parallelization(self, settings: MappingSettings) -> None:
        if settings.parallelization_factor > 1:
            LOG.warning(
                "ParallelizationFactor %d is not emulated: shard %s is delivered one batch at a time",
                settings.parallelization_factor,
                self.shard_id,
            )


def _after(record: Record, checkpoint: str) -> bool:
    """Whether the record comes after the checkpoint in the shard (sequence numbers compare as numbers)."""
    return int(sequence_number(record)) > int(checkpoint)


def _payload_bytes(record: Record) -> int:
    """A record's share of the invocation payload, as JSON (a comma and a space between records)."""
    return len(json.dumps(record, default=str)) + 2


class Gathering:
    """MaximumBatchingWindowInSeconds for a reader that polls the shard: hold short reads back, within limits.

    "Batching window - Specify the maximum amount of time to gather records before invoking the function,
    in seconds." "Lambda reads records from the event source until it has gathered a full batch, the
    batching window expires, or the batch reaches the payload limit of 6 MB." The window runs from the
    moment the first record of the batch was read. Not documented, chosen here: gathering also stops when
    the tumbling window of the first gathered record has ended, since a batch never spans two windows.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._since: float | None = None

    def ready(self, records: Sequence[Record], delivery: ShardDelivery, read_to_present: bool) -> bool:
        """Whether the records read so far (filtered, in order) go to the function now."""
        if not records:
            self._since = None
            return False
        settings = delivery.settings
        if not read_to_present or len(records) >= settings.batch_size or settings.maximum_batching_window_seconds <= 0:
            return True
        now = self._clock.now()
        if self._since is None:
            self._since = now
        if now - self._since >= settings.maximum_batching_window_seconds:
            return True
        window_end = delivery.window_end_of(records[0])
        if window_end is not None and now >= window_end:
            return True
        return sum(_payload_bytes(record) for record in records) >= settings.payload_limit_bytes

    def delivered(self) -> None:
        """The gathered records went out: the next batch gathers from its own first record."""
        self._since = None
