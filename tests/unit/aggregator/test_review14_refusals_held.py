"""review14: angles against fix57's open refusals that held. Each history ends with the boards right and the operator
told what it must act on.

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
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, ledger_items
from tests.unit.aggregator.test_review13_refusal_lost_on_crash import Killed
from tests.unit.aggregator.test_review14_closed_refusals import refused_for_a_provisional_taker

__all__ = ["world"]  # fixtures, used by name


def lifted(world: LedgerWorld) -> None:
    """review13's history to the refusal for R, then I' read back: the refusal's end reported, the report open."""
    between, _ = refused_for_a_provisional_taker(world)
    assert read_back(world, ROOT, between, between)["readBack"] == "applied"
    assert kinds(world) == ["keep_taken_unsure"]


def test_two_runs_answering_a_lifted_refusal_at_once_apply_it_once(world: LedgerWorld) -> None:
    # given a refusal whose taker a read-back gave back, the report open
    lifted(world)
    # when the operator's run names the key expired, and another run with the same answer runs whole between this
    # run's read of the report and its first transaction
    other: list[RebaseReport] = []
    interleaved = Interleaved(
        world.dynamodb,
        "transact_write_items",
        before=lambda: other.append(rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])),
    )
    this = rebase(interleaved, deployment_of(world), expired=[CLAIM])
    # then G's expired download is added back once: G and I count once each, the report closed
    assert len(other) == 1
    assert this.kept_expired + other[0].kept_expired == 1
    assert world.boards() == {("song1", "2018-02"): 2}
    assert ledger_items(world, f"{GONE_PREFIX}{CLAIM}|") == {}


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


def test_a_run_killed_after_a_lifted_refusals_answer_applied_adds_nothing_when_rerun(world: LedgerWorld) -> None:
    # given a refusal whose taker a read-back gave back, and the operator's run naming the key expired, killed right
    # after the answer's transaction applied (its report never printed)
    lifted(world)
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
    assert world.boards() == {("song1", "2018-02"): 2}
    assert ledger_items(world, f"{GONE_PREFIX}{CLAIM}|") == {}


def test_a_close_that_meets_the_report_applied_by_a_run_at_once_neither_undoes_it_nor_counts_it_closed(
    world: LedgerWorld,
) -> None:
    # given a refusal whose taker a read-back gave back, the report open (`Refused`)
    lifted(world)
    # when one run closes it (--deleted-keys) while another, run whole between the first's read of the report and its
    # close, names the key expired (the refusal lifted: applied)
    other: list[RebaseReport] = []
    interleaved = Interleaved(
        world.dynamodb,
        "transact_write_items",
        before=lambda: other.append(rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])),
    )
    closing = rebase(interleaved, deployment_of(world), deleted=[CLAIM])
    # then the answer applied stands (G and I once each), and the close, conditioned on the report as read, is not
    # counted as closing it
    assert [report.kept_expired for report in other] == [1]
    assert world.boards() == {("song1", "2018-02"): 2}
    assert closing.refusals_closed == 0
    assert ledger_items(world, f"{GONE_PREFIX}{CLAIM}|") == {}
