"""Two readers per shard (STREAM_READERS=2, the default): a delivery names a shard, the aggregator reads it itself.

The event source mapping delivers tumbling-window events that name one shard. What they carry is
a trigger and a bound, never what is counted: the aggregator reads that shard itself, in sequence
order, from its own checkpoint in the progress table, through the highest record delivered, and
writes each aggregate with one conditional UpdateItem guarded by that shard's watermark in the
aggregate. Retries out of order, larger or smaller retries, fresh states, direct invocations
ahead of the mapping and windows given up then change how much one invocation reads, never what
is counted. What cannot be counted is reported to the failure queue, never guessed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError

from aggregator_settings import PER_WINDOW, Settings
from batch_report import BatchReport, publish
from catch_up import GONE, Catchup, advance, catch_up, reading_budget
from delivery import Delivery, Refused, ShardRef, parse_delivery
from dependencies import Dependencies
from download_records import Ignored, Schema, parse_record
from failure_messages import gap_message, refused_message
from invocation_context import InvocationContext
from leaderboard_core.bookkeeping import pad_sequence
from lineage_sweep import sweep_lineages
from progress_item import Progress
from shard_lineage import count_ancestry
from shard_reader import ShardRead
from stream_description import shard_facts
from telemetry import logger
from window_state import delivered_high, window_state


class AggregatesNotWritten(Exception):
    """The shard's checkpoint did not reach what this invocation had to count: Lambda (or the caller) retries."""

    def __init__(self, message: str, report: BatchReport) -> None:
        super().__init__(message)
        self.report = report


def _sequence(record: Any) -> str | None:
    if isinstance(record, dict) and isinstance(record.get("dynamodb"), dict):
        sequence = record["dynamodb"].get("SequenceNumber")
        if isinstance(sequence, str) and sequence.isdigit() and len(sequence) <= 40:
            return pad_sequence(sequence)
    return None


def _bound_of(delivery: Delivery, state_high: str | None) -> str | None:
    """The highest sequence number this invocation must count through: delivered, named (a direct invocation's records
    and throughSequenceNumber) or remembered."""
    candidates = [sequence for sequence in (_sequence(record) for record in delivery.records) if sequence]
    if delivery.through_sequence:
        candidates.append(delivery.through_sequence)
    if state_high:
        candidates.append(state_high)
    return max(candidates) if candidates else None


def process_delivery(delivery: Delivery, invocation: InvocationContext) -> tuple[dict[str, Any], BatchReport]:
    """Count the delivery's shard from its checkpoint through what the delivery names, and answer Lambda."""
    deps, settings = invocation.deps, invocation.settings
    report = BatchReport(
        shard_id=delivery.shard_id,
        window_start=delivery.window.start if delivery.window else None,
        final=delivery.is_final,
        direct=delivery.is_direct,
        window_terminated_early=delivery.terminated_early,
        received=len(delivery.records) + len(delivery.refused),
        refused=list(delivery.refused),
    )
    for record in delivery.records:
        if _is_new_download(record, settings.schema):
            continue  # parsed once, below, when the shard is read: the whole parse (timestamp, id) is the hot path
        parsed = parse_record(record, settings.schema)
        if isinstance(parsed, Ignored):
            report.ignored_delivered[parsed.reason] = report.ignored_delivered.get(parsed.reason, 0) + 1
    delivered = sorted(sequence for sequence in (_sequence(r) for r in delivery.records) if sequence)
    report.first_sequence, report.last_sequence = (delivered[0], delivered[-1]) if delivered else (None, None)
    shard = delivery.shard
    state_high, report.state_ignored = (None, None) if delivery.is_direct else delivered_high(delivery.state, shard)
    bound = _bound_of(delivery, state_high)
    report.bound = bound
    if delivery.refused and not deps.send_failures([refused_message(item) for item in delivery.refused]):
        report.unreported += len(delivery.refused)
    if shard is None:
        return _response(delivery, None, None, report), report
    swept = BatchReport()
    sweep_lineages(invocation, shard.stream_arn, swept)
    report.trimmed = swept.trimmed or report.trimmed
    report.ancestor_lost = swept.ancestor_lost
    report.unreported += swept.unreported
    must_catch_up = delivery.is_final or delivery.is_direct or delivery.terminated_early
    highest_delivered = delivered[-1] if delivered and not delivery.is_direct else None
    if not must_catch_up and (settings.aggregate_writes == PER_WINDOW or bound is None):
        if highest_delivered is not None:
            _progress_of(deps, shard, delivery)
            deps.progress.note_delivered(shard, highest_delivered)
        report.caught_up = True
        return _response(delivery, shard, bound, report), report

    keep_reading = _step_budget(invocation)

    try:
        progress = _progress_of(deps, shard, delivery)
    except ClientError as error:
        if not delivery.is_direct or error.response.get("Error", {}).get("Code") not in GONE:
            raise
        return _gone(deps, delivery, shard, Progress(), report), report
    report.checkpoint_before = progress.checkpoint
    if not delivery.is_direct and (delivery.is_final or delivery.terminated_early) and progress.delivered_high:
        # A fresh state (a retry, an early end) forgets what the window delivered; the progress table does not.
        bound = max(bound or progress.delivered_high, progress.delivered_high)
        report.bound = bound
    elif delivery.is_direct and bound is not None and progress.delivered_high:
        # A window given up is named by its last batch alone, which a retry out of order may end below records an
        # earlier batch delivered: recover's invocation through that range reads through those too.
        bound = max(bound, progress.delivered_high)
        report.bound = bound
    count_ancestry(invocation, shard, progress, keep_reading, report)
    if bound is not None and progress.checkpoint is not None and progress.checkpoint >= bound:
        report.checkpoint_after = progress.checkpoint
        report.caught_up = True
        _report_unconfirmed(deps, delivery, progress, None, report)
        return _response(delivery, shard, bound, report), report
    try:
        catchup = _catch_up_in_steps(invocation, delivery, shard, progress, bound, keep_reading, report)
    except ClientError as error:
        if not delivery.is_direct or error.response.get("Error", {}).get("Code") not in GONE:
            raise
        return _gone(deps, delivery, shard, deps.progress.read(shard), report), report  # where its last step left it
    reached = _reached(catchup, bound, report.checkpoint_after)
    report.caught_up = catchup.held_back_from is None and (bound is None or reached)
    if not report.caught_up and highest_delivered is not None:
        deps.progress.note_delivered(shard, highest_delivered)
    named_beyond_the_tip = delivery.is_direct and catchup.read.at_tip and catchup.held_back_from is None
    if not report.caught_up and must_catch_up and not named_beyond_the_tip:
        raise AggregatesNotWritten(
            f"{shard.shard_id}: checkpoint {report.checkpoint_after} has not reached {bound}, retried",
            report,
        )
    return _response(delivery, shard, bound, report), report


def _step_budget(invocation: InvocationContext) -> Callable[[int, int], bool]:
    """One step's read budget, leaving the deadline margin and half the time then left (2 s at least) to write."""
    settings, remaining_ms = invocation.settings, invocation.remaining_ms
    write_reserve_ms = max(2000, (remaining_ms() - settings.deadline_margin_ms) // 2)
    return reading_budget(settings, remaining_ms, settings.deadline_margin_ms + write_reserve_ms)


def _reached(catchup: Catchup, bound: str | None, checkpoint: str | None) -> bool:
    return catchup.read.reached_bound or (checkpoint is not None and bound is not None and checkpoint >= bound)


def _catch_up_in_steps(
    invocation: InvocationContext,
    delivery: Delivery,
    shard: ShardRef,
    progress: Progress,
    bound: str | None,
    keep_reading: Callable[[int, int], bool],
    report: BatchReport,
) -> Catchup:
    """Read, write and advance the checkpoint in bounded steps, each step's records released before the next, until
    the bound (or the shard's tip or end), a step held back or one that left the checkpoint where it was, or no time
    for another step.

    A window longer than one step is then counted by one invocation instead of failing once per step (rule 9)."""
    deps, settings, remaining_ms = invocation.deps, invocation.settings, invocation.remaining_ms
    step_began_ms = remaining_ms()
    while True:
        catchup = catch_up(invocation, shard, progress, bound, keep_reading, report)
        _report_unconfirmed(deps, delivery, progress, catchup.read, report)
        report.checkpoint_after = advance(deps, catchup)
        report.shard_ended = catchup.read.shard_ended
        read = catchup.read
        finished = _reached(catchup, bound, report.checkpoint_after) or read.shard_ended or read.at_tip
        moved = report.checkpoint_after is not None and report.checkpoint_after != progress.checkpoint
        if finished or catchup.held_back_from is not None or not moved:
            return catchup
        step_ended_ms = remaining_ms()
        if not _time_for_another_step(settings, step_ended_ms, step_began_ms - step_ended_ms):
            return catchup
        del catchup, read  # the step's records, released before the next step reads and measures its memory
        progress = deps.progress.read(shard)
        keep_reading = _step_budget(invocation)
        step_began_ms = step_ended_ms


def _time_for_another_step(settings: Settings, left_ms: int, last_step_ms: int) -> bool:
    """Another step may take as long as the last one did (its reports too): it starts only if that much time, and
    more than 2 s, is left before the deadline margin."""
    spare_ms = left_ms - settings.deadline_margin_ms
    return spare_ms > 2000 and spare_ms >= last_step_ms


def _progress_of(deps: Dependencies, shard: ShardRef, delivery: Delivery) -> Progress:
    """The shard's progress; its item created the first time the shard is seen (first sequence, parent, genesis)."""
    progress = deps.progress.read(shard)
    if not progress.exists:
        facts = shard_facts(deps, shard)
        if not facts.listed:
            logger.error("shard not in its stream's description; read from the trim horizon", extra={"shard": shard})
        root = facts.listed and facts.parent_shard_id is None
        progress = deps.progress.first_seen(
            shard, facts.first_sequence, facts.parent_shard_id, lineage_counted=root, lineage_unknown=not facts.listed
        )
    return progress


def _gone(
    deps: Dependencies, delivery: Delivery, shard: ShardRef, progress: Progress, report: BatchReport
) -> dict[str, Any]:
    """A direct invocation of a shard the stream no longer holds: what it named cannot be read, so it is recounted."""
    gap = gap_message(shard, progress, None, None)
    gap["throughSequenceNumber"] = delivery.through_sequence
    report.trimmed = gap
    if not deps.send_failures([gap]):
        report.unreported += 1
    report.caught_up = False
    return _response(delivery, shard, None, report)


def _response(delivery: Delivery, shard: ShardRef | None, high: str | None, report: BatchReport) -> dict[str, Any]:
    if delivery.is_direct:
        return {
            "shardId": delivery.shard_id,
            "checkpoint": report.checkpoint_after,
            "reachedBound": report.caught_up,
            "summary": report.summary(),
        }
    state = {} if delivery.is_final else window_state(shard, high)
    return {"state": state, "batchItemFailures": []}


def _report_unconfirmed(
    deps: Dependencies, delivery: Delivery, progress: Progress, read: ShardRead | None, report: BatchReport
) -> None:
    """Delivered or named records beyond the checkpoint, within what was read, that the shard does not hold."""
    unconfirmed = _unconfirmed(delivery, progress, read) if read is not None else []
    report.refused.extend(unconfirmed)
    if unconfirmed and not deps.send_failures([refused_message(item) for item in unconfirmed]):
        report.unreported += len(unconfirmed)


def _unconfirmed(delivery: Delivery, progress: Progress, read: ShardRead) -> list[Refused]:
    last_read = read.last_sequence or progress.checkpoint or ""
    held = {pad_sequence(r["dynamodb"]["SequenceNumber"]): r for r in read.records}
    refused = []
    for record in delivery.records:
        sequence = _sequence(record)
        if sequence is None or (progress.checkpoint is not None and sequence <= progress.checkpoint):
            continue
        if sequence > last_read and not (read.shard_ended or read.reached_bound or read.at_tip):
            continue
        original = held.get(sequence)
        named = record.get("dynamodb", {})
        if original is None:
            reason = f"no record {sequence.lstrip('0')} in {delivery.shard_id} of {_stream_of(delivery)}"
        elif original.get("eventName") != record.get("eventName") or original["dynamodb"].get("Keys") != named.get(
            "Keys"
        ):
            reason = f"record {sequence.lstrip('0')} differs from the stream's record"
        else:
            continue
        refused.append(Refused(reason, named.get("SequenceNumber"), record, delivery.shard_id, _stream_of(delivery)))
    return refused


def _stream_of(delivery: Delivery) -> str | None:
    return delivery.shard.stream_arn if delivery.shard else None


def _is_new_download(record: Any, schema: Schema) -> bool:
    """An INSERT without the period attribute: what the mapping's filter lets through, never `Ignored`."""
    stream = record.get("dynamodb") if isinstance(record, dict) else None
    image = stream.get("NewImage") if isinstance(stream, dict) else None
    return (
        record.get("eventName") == "INSERT"
        and isinstance(image, dict)
        and (not schema.aggregates_beside or schema.period not in image)
    )


def handle_delivery(
    event: dict[str, Any], context: LambdaContext, settings: Settings, dependencies: Dependencies
) -> dict[str, Any]:
    """aggregator.handle's path for a delivery of a shard (the mapping's window or a direct invocation): the
    invocation, its log line and its metrics."""
    started = time.monotonic()
    delivery = parse_delivery(event, settings.table_arn)
    invocation = InvocationContext(settings, dependencies, context.get_remaining_time_in_millis)
    try:
        response, report = process_delivery(delivery, invocation)
    except AggregatesNotWritten as failure:
        publish(failure.report, started, succeeded=False)
        raise
    except Exception:
        logger.exception("invocation failed; Lambda retries it", extra={"shard_id": delivery.shard_id})
        raise
    publish(report, started, succeeded=True)
    return response
