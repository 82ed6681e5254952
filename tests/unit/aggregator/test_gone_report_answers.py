"""The operator's answers reach exactly the gone report they name (`<claim key>@<label>` where a key has more than one
open), and an answer applied on a deletion taker meets a read-back that gives that taker back and still counts once.

AWS: the mapping's discarded batches are read back late and in any order ("Lambda event source mappings process each
event at least once, and duplicate processing of records can occur")."""

from __future__ import annotations

from leaderboard_core.claims import GONE_PREFIX
from leaderboard_tools.recover.rebase import RebaseReport, rebase
from tests.unit.aggregator.ledger_on_moto import (
    ROOT,
    Interleaved,
    LedgerWorld,
    kinds,
    ledger_client,
    read_back,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of
from tests.unit.aggregator.test_deletion_takers_count_nothing import taken_by_a_deletion
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, ledger_items
from tests.unit.aggregator.test_review15_held import two_open_reports

__all__ = ["world"]  # fixtures, used by name


def answered_during_a_read_back(world: LedgerWorld, between: str, **answers: list[str]) -> list[RebaseReport]:
    """The operator's recover run (`answers`), landing after a read-back of `between` read the key and before its
    write: the read-back then applies, and the run's report is returned."""
    runs: list[RebaseReport] = []
    ledger_client(
        world,
        Interleaved(
            world.dynamodb,
            "transact_write_items",
            before=lambda: runs.append(rebase(world.dynamodb, deployment_of(world), **answers)),
        ),
    )
    assert read_back(world, ROOT, between, between)["readBack"] == "applied"
    return runs


def test_a_bare_key_with_two_open_reports_is_refused_with_their_labels_and_nothing_written(world: LedgerWorld) -> None:
    # given a key with a refused report open (G) and a later report of its own (I2)
    two_open_reports(world)
    before = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|")
    boards = world.boards()
    # when the operator names the key bare, expired
    answered = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    # then nothing is written for it, and the run names both reports for the operator to choose
    assert world.boards() == boards
    assert ledger_items(world, f"{GONE_PREFIX}{CLAIM}|").keys() == before.keys()
    [bare] = [entry for entry in answered.unplaced if "named bare" in entry["why"]]
    labels = [key.removeprefix(f"{GONE_PREFIX}{CLAIM}|") for key in sorted(before)]
    assert all(f"{CLAIM}@{label}" in bare["why"] for label in labels)


def test_an_answer_applied_between_the_aggregators_read_and_its_giving_back_of_a_deletion_taker_counts_once(
    world: LedgerWorld,
) -> None:
    # given the open report taken by R (a deletion), the answer not yet given
    between, _ = taken_by_a_deletion(world)
    # when a read-back of I' (between G and R) reads the report, and the operator's 'expired' applies (R took the keep:
    # nothing added) before the read-back's write gives R back
    runs = answered_during_a_read_back(world, between, expired=[CLAIM])
    # then the answer applied, and the read-back, folding the key again on the keep the answer wrote, gives R's taking
    # back: G's and I's expired downloads count once each, nothing reported, nothing left open
    assert [(run.kept_expired, run.unplaced) for run in runs] == [(1, [])]
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []
    assert ledger_items(world, f"{GONE_PREFIX}{CLAIM}|") == {}
