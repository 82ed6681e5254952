"""What a failure-queue message names, against a recount: the boards to recount, and whether it is exact now."""

from __future__ import annotations

from collections.abc import Collection

from leaderboard_tools.reconcile import RunReport
from leaderboard_tools.recover.failure_messages import Message


def boards_named(messages: list[Message]) -> dict[str, set[str] | None] | None:
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


def refusal_of(message: Message, run: RunReport | None) -> str | None:
    """Why the recount refused an aggregate the message names (TTL, or a board this recount does not cover)."""
    if run is None:
        return None
    return next((r.refused for r in run.boards if r.refused and r.board in message.aggregates), None)


def exactness(message: Message, run: RunReport | None) -> tuple[bool, bool]:
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
