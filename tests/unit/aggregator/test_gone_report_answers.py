"""The operator's answers reach exactly the gone report they name (`<claim key>@<label>` where a key has more than one
open), and a close that rests on a provisional taker is reopened, loudly, when a record read back later gives that taker
back.

AWS: the mapping's discarded batches are read back late and in any order ("Lambda event source mappings process each
event at least once, and duplicate processing of records can occur"); TTL deletions replicated to other regions "are
not identifiable in DynamoDB streams in the regions the deletion is replicated to" (Working with expired items)."""

from __future__ import annotations

from leaderboard_core.claims import CLOSED, GONE_PREFIX
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
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, ledger_items
from tests.unit.aggregator.test_review14_answers_by_key import written_again_and_gone
from tests.unit.aggregator.test_review14_closed_refusals import (
    refused_for_a_provisional_taker,
    taken_by_a_provisional_taker,
)

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
    refused_for_a_provisional_taker(world)
    written_again_and_gone(world)
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


def test_a_closed_refusal_whose_taker_a_read_back_gives_back_is_reopened_and_listed_again(world: LedgerWorld) -> None:
    # given a refusal for a provisional taker, closed by the operator (--deleted-keys): kept, marked closed, unlisted
    between, _ = refused_for_a_provisional_taker(world)
    assert rebase(world.dynamodb, deployment_of(world), deleted=[CLAIM]).refusals_closed == 1
    [report] = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|").values()
    assert CLOSED in report
    assert rebase(world.dynamodb, deployment_of(world)).unplaced == []
    # when a record read back later gives the taker back
    assert read_back(world, ROOT, between, between)["readBack"] == "applied"
    # then the aggregator says the close no longer holds, and the next run lists the report again, by its name
    [reopened] = world.reports()
    assert "close of that report (--deleted-keys) no longer holds" in reopened["reason"]
    [listed] = rebase(world.dynamodb, deployment_of(world)).unplaced
    assert f"--expired-keys {CLAIM}@" in listed["why"]
    # and the answer it asks for keeps G's expired download beside I's
    assert rebase(world.dynamodb, deployment_of(world), expired=[CLAIM]).kept_expired == 1
    assert world.boards() == {("song1", "2018-02"): 2}


def test_a_refusal_written_between_the_aggregators_read_and_its_giving_back_of_the_taker_is_lifted_loudly(
    world: LedgerWorld,
) -> None:
    # given the open report taken by R (a removal with no TTL identity), the answer not yet given
    between, _ = taken_by_a_provisional_taker(world)
    # when a read-back of I' (between G and R) reads the report, and the operator's run refuses 'expired' for R before
    # the read-back's write gives R back
    runs = answered_during_a_read_back(world, between, expired=[CLAIM])
    # then the refusal was made, and its end is reported, not left unseen
    assert [len(run.unplaced) for run in runs] == [1]
    assert kinds(world) == ["keep_taken_unsure"]
    # and the answer it asks for keeps G's expired download beside I's
    assert rebase(world.dynamodb, deployment_of(world), expired=[CLAIM]).kept_expired == 1
    assert world.boards() == {("song1", "2018-02"): 2}
