"""recover's run: the failure queue's messages (and the band queue's records) read, answered and deleted once exact
(the package's docstring says how each kind is answered)."""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from leaderboard_tools.deployment import Deployment
from leaderboard_tools.interruption import Interrupted
from leaderboard_tools.output_format import counted
from leaderboard_tools.reconcile import (
    BAND_MESSAGE_KIND,
    ClockDisagrees,
    Difference,
    Reconciler,
    RecountUnsupported,
    RepairUnavailable,
    RunReport,
)
from leaderboard_tools.reconcile.phases import ANSWERING_MESSAGES, READING_QUEUE
from leaderboard_tools.recover.advice import fix_for
from leaderboard_tools.recover.drift import DriftReport, settle_drift
from leaderboard_tools.recover.failed_batches import BatchAnswerer
from leaderboard_tools.recover.failure_messages import Message, answer_band, board_of, classify
from leaderboard_tools.recover.failure_queue import VISIBILITY_SECONDS, VisibilityKeeper, receive_all
from leaderboard_tools.recover.rebase import RebaseRefused, RebaseReport, rebase


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


def _targets(messages: list[Message]) -> dict[str, set[str] | None] | None:
    """Every board the messages name, at once (None: every board of the table)."""
    if any(message.every_month for message in messages):
        return None
    targets: dict[str, set[str] | None] = {}
    for message in messages:
        for board, songs in message.aggregates.items():
            if songs is None or targets.get(board, set()) is None:
                targets[board] = None
            else:
                current = targets.setdefault(board, set())
                assert current is not None
                current |= songs
    return targets


def _refusal(message: Message, run: RunReport | None) -> str | None:
    """Why the recount refused an aggregate the message names (TTL, or a board this recount does not cover)."""
    if run is None:
        return None
    return next((r.refused for r in run.boards if r.refused and r.board in message.aggregates), None)


def _exact(message: Message, run: RunReport | None) -> tuple[bool, bool]:
    """Whether everything the message names is exact now; if not, whether it waits only on the stream."""
    if run is None:
        return False, False
    reports = {report.board: report for report in run.boards}
    boards: Collection[str] = reports if message.every_month else message.aggregates
    exact, retry = True, True
    for board in boards:
        report = reports.get(board)
        if report is None:
            continue
        if report.refused:
            exact, retry = False, False
            continue
        songs = None if message.every_month else message.aggregates.get(board)
        for difference in report.differences:
            if (songs is None or difference.entity_id in songs) and not difference.repaired:
                exact = False
                retry = retry and difference.state in ("pending", "conflict", "unknown")
    return exact, not exact and retry


def recover(
    clients: Any,
    deployment: Deployment,
    reconciler: Reconciler,
    queue_url: str,
    *,
    visibility_seconds: int = VISIBILITY_SECONDS,
    answerer: BatchAnswerer | None = None,
) -> RecoveryReport:
    """Answer the queue's messages (see the module); a clock refusal of the repair stops the run, saying what it did."""
    report = RecoveryReport()
    try:
        return _recover(report, clients, deployment, reconciler, queue_url, visibility_seconds, answerer)
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


def _rebase(
    report: RecoveryReport, clients: Any, deployment: Deployment, reconciler: Reconciler, messages: list[Message]
) -> None:
    """One reader per shard: what the messages would have recounted is repaired by the rebase of every key's ledger
    item (a recount would leave those items behind), then by measuring each aggregate they name against the ledger and
    setting those whose count it does not explain (drift.py). Each message is done only once every aggregate it names
    was found equal to what the ledger counts in it, a recount that compares and writes nothing (made again after the
    drift step wrote or measured again) finds each exact, judged as the recount's repair is (`_exact`), and no key the
    rebase left (gone, unplaced) counts in them; the others are kept, saying what is left and what to do."""
    try:
        report.rebased = rebase(clients.dynamodb, deployment)
    except RebaseRefused as refused:
        for message in messages:
            message.note = str(refused)
        return
    try:
        run = reconciler.run(_targets(messages), repair=False)
        measured, boards = _measured(messages, run, report.rebased)
        if measured or boards:
            report.drift = settle_drift(clients.dynamodb, deployment, measured, boards=boards)
            if report.drift.settled or report.drift.measured_again:
                run = reconciler.run(_targets(messages), repair=False)
    except RecountUnsupported as unsupported:
        for message in messages:
            message.note = f"rebased, but what it names could not be checked: {unsupported}"
        return
    report.reconciled = [board.as_json() for board in run.boards]
    for message in messages:
        exact, _ = _exact(message, run)
        left = _left_by_rebase(message, report.rebased)
        message.done = exact and not left and not _left_by_drift(message, report.drift)
        if message.done:
            message.note = message.note or "repaired by the rebase of every key's ledger item, and checked exact"
        else:
            message.note, message.retry = _not_rebased(message, run, left, report.drift)


def _names(message: Message, entity: str, board: str) -> bool:
    """Whether the message names the aggregate (entity, board)."""
    if message.every_month:
        return True
    songs = message.aggregates.get(board, set())
    return songs is None or entity in songs


def _left_by_rebase(message: Message, rebased: RebaseReport) -> list[dict[str, Any]]:
    """The keys the rebase left (gone, unplaced) that count, or may count, in an aggregate the message names."""
    gone = [
        entry for entry in rebased.gone if any(_names(message, entry["entityId"], board) for board in entry["counts"])
    ]
    unplaced = [
        entry
        for entry in rebased.unplaced
        if message.every_month or any(_names(message, entity, board) for entity, board in entry["aggregates"])
    ]
    return gone + unplaced


def _differing(message: Message, run: RunReport) -> list[tuple[str, Difference]]:
    """The aggregates the message names whose count differs from the recount: (board, difference)."""
    return [
        (board.board, difference)
        for board in run.boards
        if not board.refused
        for difference in board.differences
        if not difference.repaired and _names(message, difference.entity_id, board.board)
    ]


def _measured(messages: list[Message], run: RunReport, rebased: RebaseReport) -> tuple[set[tuple[str, str]], set[str]]:
    """What to measure against the ledger, of the messages where the rebase left no key (a key it left makes the
    ledger no measure of the table): every aggregate they name, whether or not it differs from the table's recount (a
    download not delivered yet moves the recount, not the ledger), and the boards they name whole."""
    aggregates: set[tuple[str, str]] = set()
    boards: set[str] = set()
    recounted = [board.board for board in run.boards if not board.refused]
    for message in messages:
        if _left_by_rebase(message, rebased):
            continue
        aggregates |= {(difference.entity_id, board) for board, difference in _differing(message, run)}
        if message.every_month:
            boards.update(recounted)
            continue
        for board, songs in message.aggregates.items():
            if board not in recounted:
                continue
            if songs is None:
                boards.add(board)
            else:
                aggregates |= {(song, board) for song in songs}
    return aggregates, boards


def _left_by_drift(message: Message, drift: DriftReport | None) -> list[dict[str, Any]]:
    """The aggregates the message names that the drift step left (not found equal to what the ledger counts)."""
    if drift is None:
        return []
    return [entry for entry in drift.left if _names(message, entry["entityId"], entry["board"])]


def _not_rebased(
    message: Message, run: RunReport, left: list[dict[str, Any]], drift: DriftReport | None
) -> tuple[str, bool]:
    """What is left of what the message names after the rebase, what the operator does about it, and whether running
    recover again later is all it takes."""
    parts = []
    retry = True
    gone = [entry["claimKey"] for entry in left if "counts" in entry]
    unplaced = [entry for entry in left if "counts" not in entry]
    if gone:
        retry = False
        parts.append(
            f"the rebase found {_listed(gone)} counted with no item in the table (deleted or expired by TTL, not told "
            "apart): those the application deleted are taken back by `leaderboard-tools reconcile --repair "
            "--deleted-keys <claimKey>,...`, those Time to Live expired are kept counted by "
            "`--expired-keys <claimKey>,...`"
        )
    if unplaced:
        retry = False
        parts.append(
            "the rebase left "
            + "; ".join(f"{entry['claimKey']} as it is ({entry['why']})" for entry in unplaced[:SHOWN_DIFFERENCES])
            + (f"; and {len(unplaced) - SHOWN_DIFFERENCES} more" if len(unplaced) > SHOWN_DIFFERENCES else "")
        )
    refusal = _refusal(message, run)
    if refusal:
        retry = False
        parts.append(f"its recount was refused: {refusal}")
    differing = _differing(message, run)
    for shown, (board, difference) in enumerate(differing):
        kept = drift.left_for(difference.entity_id, board) if drift is not None else None
        retry = retry and (kept is None or kept["retry"])
        if shown >= SHOWN_DIFFERENCES:
            continue
        named = f"{difference.entity_id} in {board} (stored {difference.stored}, recounted {difference.recounted})"
        if kept is not None:
            parts.append(f"{named} differs from what the ledger counts in it and is not set: {kept['why']}")
        elif not left:
            parts.append(
                f"{named} differs from the table's recount as the ledger does: downloads written during this run, "
                "counted once the mapping delivers them; run recover again"
            )
        else:
            parts.append(f"{named} differs from the table's recount")
    differs = {(difference.entity_id, board) for board, difference in differing}
    unchecked = [
        entry for entry in _left_by_drift(message, drift) if (entry["entityId"], entry["board"]) not in differs
    ]
    for entry in unchecked:
        retry = retry and entry["retry"]
    parts += [
        f"{entry['entityId']} in {entry['board']} equals the table's recount but was not found equal to what the "
        f"ledger counts in it: {entry['why']}"
        for entry in unchecked[:SHOWN_DIFFERENCES]
    ]
    if len(differing) > SHOWN_DIFFERENCES:
        parts.append(f"and {len(differing) - SHOWN_DIFFERENCES} more aggregates differ (the report's `reconciled`)")
    return "; ".join(parts) or "not every aggregate it names is exact yet", retry and bool(parts)


SHOWN_DIFFERENCES = 10
"""Aggregates a kept message's note names, one by one; the report's `reconciled` has every one."""


def _listed(names: list[str], shown: int = SHOWN_DIFFERENCES) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _recover(
    report: RecoveryReport,
    clients: Any,
    deployment: Deployment,
    reconciler: Reconciler,
    queue_url: str,
    visibility_seconds: int,
    answerer: BatchAnswerer | None,
) -> RecoveryReport:
    sqs = clients.sqs
    answerer = answerer or BatchAnswerer(clients, deployment)
    report.rejected_fix = fix_for(deployment)
    queues = [queue_url] + [url for url in (deployment.recount_band_queue_url,) if url and url != queue_url]
    with contextlib.ExitStack() as stack:
        keepers = {url: stack.enter_context(VisibilityKeeper(sqs, url, visibility_seconds)) for url in queues}
        messages = []
        reconciler.report_phase(READING_QUEUE)
        for url in queues:
            received = [classify(raw, deployment) for raw in receive_all(sqs, url, visibility_seconds)]
            for message in received:
                message.queue_url = url
            keepers[url].hold(received)
            messages += received
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
            _rebase(report, clients, deployment, reconciler, to_recount)
            to_recount = []
        run = None
        if to_recount:
            expired = {m.expired_band for m in to_recount if m.expired_band is not None}
            try:
                run = reconciler.run(_targets(to_recount), repair=True, replace_bands=expired)
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
                message.done, message.retry = _exact(message, run)
                if not message.done:
                    message.note = message.note or _refusal(message, run) or "not every aggregate it names is exact yet"
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
