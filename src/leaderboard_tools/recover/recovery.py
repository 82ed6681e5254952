"""recover's run: the failure queue's messages (and the band queue's records) read, answered and deleted once exact
(the package's docstring says how each kind is answered)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from leaderboard_tools.deployment import Deployment
from leaderboard_tools.interruption import Interrupted
from leaderboard_tools.output_format import counted
from leaderboard_tools.reconcile import (
    BAND_MESSAGE_KIND,
    ClockDisagrees,
    Reconciler,
    RecountUnsupported,
    RepairUnavailable,
)
from leaderboard_tools.reconcile.phases import ANSWERING_MESSAGES, READING_QUEUE
from leaderboard_tools.recover.advice import fix_for
from leaderboard_tools.recover.drift import SETTLE_SECONDS, DriftReport
from leaderboard_tools.recover.failed_batches import BatchAnswerer
from leaderboard_tools.recover.failure_messages import answer_band, board_of, classify, mark_repeated
from leaderboard_tools.recover.failure_queue import LONG_POLL_SECONDS, VISIBILITY_SECONDS, VisibilityKeeper, receive_all
from leaderboard_tools.recover.message_checks import boards_named, exactness, refusal_of
from leaderboard_tools.recover.rebase import RebaseReport
from leaderboard_tools.recover.rebase_check import rebase_and_check
from leaderboard_tools.recover.replicas_seen import refuse_if_replicas_seen
from leaderboard_tools.recover.unsure_facts import record_facts


@dataclass(frozen=True)
class Pacing:
    """How long a run waits where it waits for time to pass: the queue's last long poll, and the drift's pause
    between its two scans of the ledger."""

    long_poll_seconds: int = LONG_POLL_SECONDS
    settle_seconds: float = SETTLE_SECONDS


@dataclass
class RecoveryReport:
    messages: int = 0
    deleted: int = 0
    kept: list[dict[str, Any]] = field(default_factory=list)
    batches: list[dict[str, Any]] = field(default_factory=list)
    rejected_downloads: list[dict[str, Any]] = field(default_factory=list)
    refused_records: list[dict[str, Any]] = field(default_factory=list)
    bands: list[dict[str, Any]] = field(default_factory=list)
    reconciled: list[dict[str, Any]] = field(default_factory=list)
    rebased: RebaseReport | None = None
    """One reader per shard: the repair's rebase of every key's ledger item (rebase.py), where others recount."""
    drift: DriftReport | None = None
    """One reader per shard: the aggregates the messages name set to what the ledger counts in them (drift.py)."""
    rejected_fix: str = ""
    """How to fix the rejected downloads' items so that they count, in the deployment's mode (advice.py)."""

    @property
    def differences_remain(self) -> bool:
        """Something no run of recover settles: a message kept for good, or keys the rebase reported."""
        return (bool(self.kept) and not self.pending) or (self.rebased is not None and self.rebased.differences_remain)

    @property
    def pending(self) -> bool:
        """Everything kept waits only for the stream to catch up: run again later."""
        return bool(self.kept) and all(entry["retry"] for entry in self.kept)

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "deleted": self.deleted,
            "kept": self.kept,
            "batches": self.batches,
            "rejected_downloads": self.rejected_downloads,
            "rejected_fix": self.rejected_fix if self.rejected_downloads else None,
            "refused_records": self.refused_records,
            "bands": self.bands,
            "reconciled": self.reconciled,
            "rebased": None if self.rebased is None else self.rebased.as_json(),
            "drift": None if self.drift is None else self.drift.as_json(),
        }


def rejected_key(body: dict[str, Any]) -> dict[str, Any] | None:
    """The key of the item a `rejected_download` message names (its stream record's `Keys`, or what a record too
    large for a message kept of them), plain values for strings and numbers; None if it names none."""
    record = body.get("record")
    if not isinstance(record, dict):
        return None
    stream = record.get("dynamodb")
    keys = stream.get("Keys") if isinstance(stream, dict) else None
    if keys is None and record.get("truncated"):
        keys = record.get("keys")
    if not isinstance(keys, dict) or not keys:
        return None
    return {name: _plain(value) for name, value in keys.items()}


def _plain(value: Any) -> Any:
    """`{"S": "song1"}` as "song1", `{"N": "7"}` as "7": how an operator types the key; anything else as it is."""
    if isinstance(value, dict) and len(value) == 1:
        kind, inner = next(iter(value.items()))
        if kind in ("S", "N"):
            return inner
    return value


def recover(
    clients: Any,
    deployment: Deployment,
    reconciler: Reconciler,
    queue_url: str,
    *,
    visibility_seconds: int = VISIBILITY_SECONDS,
    answerer: BatchAnswerer | None = None,
    pacing: Pacing = Pacing(),
) -> RecoveryReport:
    """Answer the queue's messages (see the module); a clock refusal of the repair stops the run, saying what it did."""
    report = RecoveryReport()
    try:
        return _recover(report, clients, deployment, reconciler, queue_url, visibility_seconds, answerer, pacing)
    except ClockDisagrees as error:
        outcome = _stopped_outcome(error, report, visibility_seconds)
        raise ClockDisagrees(error.reason, error.repaired, outcome) from error
    except KeyboardInterrupt as error:
        raise Interrupted(_interrupted_outcome(error, report, visibility_seconds)) from error


def _invoked_batches(report: RecoveryReport) -> tuple[int, str]:
    """How many of the mapping's failed batches recover handed to the aggregator, and what that did."""
    read_back = sum(1 for batch in report.batches if "readBack" in batch)
    if read_back:
        return read_back, "which reads each range back and applies each record once, by its ledger item's version"
    return sum(1 for batch in report.batches if "aggregates" in batch), (
        "which counts their records once from the shard's checkpoint"
    )


def _interrupted_outcome(error: KeyboardInterrupt, report: RecoveryReport, visibility_seconds: int) -> str:
    """What a run stopped by Ctrl-C did: the messages it deleted, its repair's state, and that the rest come back."""
    invoked, how = _invoked_batches(report)
    parts = [
        f"recover had deleted {report.deleted} of the {counted(report.messages, 'message')} it received (each only "
        "once everything it named was exact)"
    ]
    if invoked:
        parts.append(
            f"it had invoked the aggregator for {invoked} of the mapping's failed batches ({how}: nothing to undo)"
        )
    if isinstance(error, Interrupted):
        parts.append(f"its repair: {error.outcome.removesuffix(': run the same command again to repair the rest')}")
    parts.append(
        f"the messages not deleted are visible again within {visibility_seconds} s: run `leaderboard-tools recover` "
        "again"
    )
    return "; ".join(parts)


def _stopped_outcome(error: ClockDisagrees, report: RecoveryReport, visibility_seconds: int) -> str:
    """What a run stopped by a clock refusal did: the repair's writes, the aggregator's invocations, no deletion."""
    repair = (
        f"recover stopped; its repair had repaired {', '.join(error.repaired)} (their bands closed at once) and "
        "repaired nothing else"
        if error.repaired
        else "recover stopped; it changed no aggregate"
    )
    invoked, how = _invoked_batches(report)
    batches = (
        f"; before it, recover invoked the aggregator for {invoked} of the mapping's failed batches, {how} whatever "
        "this machine's clock (nothing to undo)"
        if invoked
        else ""
    )
    return (
        f"{repair}{batches}; no message was deleted: they are visible again within {visibility_seconds} s for the "
        "next run, once this is fixed"
    )


def _recover(
    report: RecoveryReport,
    clients: Any,
    deployment: Deployment,
    reconciler: Reconciler,
    queue_url: str,
    visibility_seconds: int,
    answerer: BatchAnswerer | None,
    pacing: Pacing,
) -> RecoveryReport:
    sqs = clients.sqs
    # Before any message is received: a replica recorded by the aggregator makes every answer unjudgeable.
    refuse_if_replicas_seen(clients.dynamodb, deployment)
    answerer = answerer or BatchAnswerer(clients, deployment)
    report.rejected_fix = fix_for(deployment)
    queues = [queue_url] + [url for url in (deployment.recount_band_queue_url,) if url and url != queue_url]
    with contextlib.ExitStack() as stack:
        keepers = {url: stack.enter_context(VisibilityKeeper(sqs, url, visibility_seconds)) for url in queues}
        messages = []
        reconciler.report_phase(READING_QUEUE)
        for url in queues:
            received = [
                classify(raw, deployment)
                for raw in receive_all(sqs, url, visibility_seconds, long_poll_seconds=pacing.long_poll_seconds)
            ]
            for message in received:
                message.queue_url = url
            keepers[url].hold(received)
            messages += received
        mark_repeated(messages)
        if deployment.claims_table:
            record_facts(messages, clients.dynamodb, deployment.claims_table)
        report.messages = len(messages)
        reconciler.report_phase(ANSWERING_MESSAGES)
        for message in messages:
            if message.kind == "failed_batch":
                answerer.answer(message)
                report.batches.append(message.batch | {"done": message.done, "note": message.note})
            elif message.kind == "rejected_download":
                report.rejected_downloads.append(
                    {
                        "reason": message.body.get("reason"),
                        "sequenceNumber": message.body.get("sequenceNumber"),
                        "key": rejected_key(message.body),
                    }
                )
                message.done = True
            elif message.kind == "refused_record":
                report.refused_records.append(
                    {"reason": message.body.get("reason"), "sequenceNumber": message.body.get("sequenceNumber")}
                )
                message.done = not message.aggregates
            elif message.kind == BAND_MESSAGE_KIND:
                answer_band(message, clients, deployment, reconciler)
                report.bands.append(
                    {key: message.body.get(key) for key in ("entityId", "band", "deadline")}
                    | {"board": board_of(message.body), "done": message.done, "note": message.note}
                )
                if message.expired_band is not None:
                    message.note = ""  # what the recount leaves says why it is kept, if it is
        to_recount = [m for m in messages if not m.done and (m.aggregates or m.every_month)]
        if to_recount and deployment.one_stream_reader:
            checked = rebase_and_check(
                clients, deployment, reconciler, to_recount, settle_seconds=pacing.settle_seconds
            )
            report.rebased, report.drift = checked.rebased, checked.drift
            report.reconciled = checked.reconciled or report.reconciled
            to_recount = []
        run = None
        if to_recount:
            expired = {m.expired_band for m in to_recount if m.expired_band is not None}
            try:
                run = reconciler.run(boards_named(to_recount), repair=True, replace_bands=expired)
            except (RecountUnsupported, RepairUnavailable) as unsupported:
                # The other messages are still answered; these stay, each saying why: for a recount by hand, or for
                # after the backfill that the repair waits for.
                for message in to_recount:
                    message.note = str(unsupported)
                to_recount = []
        if run is not None:
            report.reconciled = [board.as_json() for board in run.boards]
        for message in messages:
            if message in to_recount:
                message.done, message.retry = exactness(message, run)
                if not message.done:
                    message.note = (
                        message.note or refusal_of(message, run) or "not every aggregate it names is exact yet"
                    )
            if message.done:
                sqs.delete_message(QueueUrl=message.queue_url, ReceiptHandle=message.receipt_handle)
                keepers[message.queue_url].release(message)
                report.deleted += 1
            else:
                report.kept.append(message.summary())
        # what is kept becomes visible again at once for the next run, instead of after the timeout
        for message in messages:
            if not message.done:
                keepers[message.queue_url].release(message)
                try:
                    sqs.change_message_visibility(
                        QueueUrl=message.queue_url, ReceiptHandle=message.receipt_handle, VisibilityTimeout=0
                    )
                except (ClientError, BotoCoreError):
                    continue
    return report
