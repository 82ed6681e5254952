"""With one reader per shard, recover's repair of what the failure queue's messages name: the rebase of every key's
ledger item, the drift step (drift.py), and the check that decides which message is deleted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from leaderboard_tools.deployment import Deployment
from leaderboard_tools.reconcile import Difference, Reconciler, RecountUnsupported, RunReport
from leaderboard_tools.recover.drift import SETTLE_SECONDS, DriftReport, settle_drift
from leaderboard_tools.recover.failure_messages import Message
from leaderboard_tools.recover.message_checks import boards_named, exactness, refusal_of
from leaderboard_tools.recover.rebase import RebaseRefused, RebaseReport, rebase


@dataclass
class RebaseCheck:
    """What the rebase and the drift step did, and the recounts that checked the messages (as JSON)."""

    rebased: RebaseReport | None = None
    drift: DriftReport | None = None
    reconciled: list[dict[str, Any]] = field(default_factory=list)


def rebase_and_check(
    clients: Any,
    deployment: Deployment,
    reconciler: Reconciler,
    messages: list[Message],
    settle_seconds: float = SETTLE_SECONDS,
) -> RebaseCheck:
    """One reader per shard: what the messages would have recounted is repaired by the rebase of every key's ledger
    item (a recount would leave those items behind), then by measuring each aggregate they name against the ledger and
    setting those whose count it does not explain (drift.py). Each message is done only once every aggregate it names
    was found equal to what the ledger counts in it, a recount that compares and writes nothing (made again after the
    drift step wrote or measured again) finds each exact, judged as the recount's repair is (`exactness`), and no key
    the rebase left (gone, unplaced) counts in them; the others are kept, saying what is left and what to do."""
    report = RebaseCheck()
    try:
        report.rebased = rebase(clients.dynamodb, deployment)
    except RebaseRefused as refused:
        for message in messages:
            message.note = str(refused)
        return report
    try:
        run = reconciler.run(boards_named(messages), repair=False)
        measured, boards = _measured(messages, run, report.rebased)
        if measured or boards:
            report.drift = settle_drift(
                clients.dynamodb, deployment, measured, boards=boards, settle_seconds=settle_seconds
            )
            if report.drift.settled or report.drift.measured_again:
                run = reconciler.run(boards_named(messages), repair=False)
    except RecountUnsupported as unsupported:
        for message in messages:
            message.note = f"rebased, but what it names could not be checked: {unsupported}"
        return report
    report.reconciled = [board.as_json() for board in run.boards]
    for message in messages:
        exact, _ = exactness(message, run)
        left = _left_by_rebase(message, report.rebased)
        message.done = exact and not left and not _left_by_drift(message, report.drift)
        if message.done:
            message.note = message.note or "repaired by the rebase of every key's ledger item, and checked exact"
        else:
            message.note, message.retry = _not_rebased(message, run, left, report.drift)
    return report


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
            f"the rebase found {listed(gone)} counted with no item in the table (deleted or expired by TTL, not told "
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
    refusal = refusal_of(message, run)
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


def listed(names: list[str], shown: int = SHOWN_DIFFERENCES) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
