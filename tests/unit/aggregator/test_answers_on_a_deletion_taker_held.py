"""review14 refusals_held, under the keep invariant: the operator's 'expired' to an open report whose keep a deletion R
took (review13's history), answered by two runs at once or by a run killed after its transaction, applied once and
keeping nothing until I', read back later, gives R's taking back. Each history ends exact with nothing reported.

AWS: "Lambda event source mappings process each event at least once, and duplicate processing of records can occur"
(event source mappings); a condition expression decides a write ("If the condition expression evaluates to true, the
operation succeeds; otherwise, the operation fails", Condition expressions), and a transaction's writes apply all or
none; DeleteItem and TransactWriteItems apply at the table whatever becomes of their caller afterwards."""

from __future__ import annotations

from typing import Any

from leaderboard_core.claims import CLAIM_KEY, GONE_PREFIX
from leaderboard_tools.recover.rebase import RebaseReport, rebase
from tests.unit.aggregator.ledger_on_moto import ROOT, Interleaved, LedgerWorld, kinds, read_back, world
from tests.unit.aggregator.rebase_on_moto import deployment_of
from tests.unit.aggregator.test_deletion_takers_count_nothing import taken_by_a_deletion
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, ledger_items
from tests.unit.aggregator.test_review13_refusal_lost_on_crash import Killed

__all__ = ["world"]  # fixtures, used by name


def taken(world: LedgerWorld) -> str:
    """review13's history to the open report taken by R (a deletion). Returns I' (still given up)."""
    between, _ = taken_by_a_deletion(world)
    return between


def test_two_runs_answering_a_report_taken_by_a_deletion_at_once_apply_it_once(world: LedgerWorld) -> None:
    # given the open report taken by R, a deletion
    between = taken(world)
    # when the operator's run names the key expired, and another run with the same answer runs whole between this
    # run's read of the report and its first transaction
    other: list[RebaseReport] = []
    interleaved = Interleaved(
        world.dynamodb,
        "transact_write_items",
        before=lambda: other.append(rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])),
    )
    this = rebase(interleaved, deployment_of(world), expired=[CLAIM])
    # then the answer applies once, keeping nothing (R took it): I counts, the report closed
    assert len(other) == 1
    assert this.kept_expired + other[0].kept_expired == 1
    assert world.boards() == {("song1", "2018-02"): 1}
    assert ledger_items(world, f"{GONE_PREFIX}{CLAIM}|") == {}
    # and when I' is read back, G's expired download counts once beside I's, nothing reported
    assert read_back(world, ROOT, between, between)["readBack"] == "applied"
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


class KilledAfterTheAnswer:
    """A DynamoDB client whose run stops right after its first transaction that deletes a gone report applied."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        if name != "transact_write_items":
            return getattr(self.client, name)

        def call(**parameters: Any) -> Any:
            response = self.client.transact_write_items(**parameters)
            deletes = [
                action["Delete"]["Key"][CLAIM_KEY]["S"] for action in parameters["TransactItems"] if "Delete" in action
            ]
            if any(key.startswith(GONE_PREFIX) for key in deletes):
                raise Killed("recover killed after the answer's transaction applied")
            return response

        return call


def test_a_run_killed_after_its_answer_on_a_deletion_taker_applied_adds_nothing_when_rerun(world: LedgerWorld) -> None:
    # given the open report taken by R, a deletion, and the operator's run naming the key expired, killed right after
    # the answer's transaction applied (its report never printed)
    between = taken(world)
    try:
        rebase(KilledAfterTheAnswer(world.dynamodb), deployment_of(world), expired=[CLAIM])
    except Killed:
        pass
    else:
        raise AssertionError("the answer wrote no transaction deleting the report")
    # when the operator reruns it with the same answer
    rerun = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    # then nothing is added again, and nothing is left open
    assert rerun.kept_expired == 0
    assert world.boards() == {("song1", "2018-02"): 1}
    assert ledger_items(world, f"{GONE_PREFIX}{CLAIM}|") == {}
    # and when I' is read back, G's expired download counts once beside I's, nothing reported
    assert read_back(world, ROOT, between, between)["readBack"] == "applied"
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []
