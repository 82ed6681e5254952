"""review15: angles against fix58 (answers per report, refusals on their taker, closes kept on a taker) that held, and
tests fix58's own suite lacked: with the answer's label ignored (`report_answers.touches` true for any label), a key
named both ways by label let through (`resolve_answers`), or the aggregator's report write no longer conditioned on
`Closed` as read (`FollowedExpiries.report_update`), every test of fix58 still passed.

AWS: a condition expression decides a write ("If the condition expression evaluates to true, the operation succeeds;
otherwise, the operation fails", Condition expressions); a transaction's writes apply all or none; TTL deletions
"replicated to global table regions are not identifiable in DynamoDB streams in the regions the deletion is replicated
to" (Working with expired items); "Lambda event source mappings process each event at least once, and duplicate
processing of records can occur" (event source mappings)."""

from __future__ import annotations

import pytest

from leaderboard_core.claims import CLOSED, GONE_PREFIX
from leaderboard_tools.recover.rebase import RebaseRefused, rebase
from tests.unit.aggregator.ledger_on_moto import ROOT, LedgerWorld, kinds, read_back, world
from tests.unit.aggregator.rebase_on_moto import deployment_of, write_items
from tests.unit.aggregator.test_gone_report_answers import answered_during_a_read_back
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, ledger_items
from tests.unit.aggregator.test_review13_refusal_lost_on_crash import keep_taken_by_a_delete_below_the_bound
from tests.unit.aggregator.test_review14_answers_by_key import written_again_and_gone
from tests.unit.aggregator.test_review14_closed_refusals import refused_for_a_provisional_taker

__all__ = ["world"]  # fixtures, used by name


def two_open_reports(world: LedgerWorld) -> tuple[str, str]:
    """review14's history: the key's 'expired' refused for R (G's report), then the key written again (I2, counted)
    and expired with its record given up (reported gone at I2). Returns the refused label and I2's."""
    keep_taken_by_a_delete_below_the_bound(world)
    write_items(world)
    [refused] = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM]).unplaced
    assert "the count is right as it is" in refused["why"]
    [refused_report] = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|")
    written_again_and_gone(world)
    [other_report] = set(ledger_items(world, f"{GONE_PREFIX}{CLAIM}|")) - {refused_report}
    prefix = f"{GONE_PREFIX}{CLAIM}|"
    return refused_report.removeprefix(prefix), other_report.removeprefix(prefix)


def test_closing_one_report_by_its_label_leaves_the_keys_other_report_open_and_counted(world: LedgerWorld) -> None:
    # given the key's refused report (G, taken by R) and its later report (I2), both open
    refused_label, other_label = two_open_reports(world)
    assert world.boards() == {("song1", "2018-02"): 2}
    # when the operator closes the refused one by its label
    closed = rebase(world.dynamodb, deployment_of(world), deleted=[f"{CLAIM}@{refused_label}"])
    # then only that report is closed: I2's report is open, unanswered, and I2 still counts
    assert (closed.refusals_closed, closed.taken_back) == (1, 0)
    reports = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|")
    assert CLOSED not in reports[f"{GONE_PREFIX}{CLAIM}|{other_label}"]
    assert world.boards() == {("song1", "2018-02"): 2}


def test_a_key_named_deleted_by_one_label_and_expired_by_another_refuses_the_run_with_nothing_written(
    world: LedgerWorld,
) -> None:
    # given the key's two open reports
    refused_label, other_label = two_open_reports(world)
    before, boards = ledger_items(world, ""), world.boards()
    # when the operator names one deleted and the other expired, each by its label
    with pytest.raises(RebaseRefused, match="named both deleted and expired"):
        rebase(
            world.dynamodb,
            deployment_of(world),
            deleted=[f"{CLAIM}@{refused_label}"],
            expired=[f"{CLAIM}@{other_label}"],
        )
    # then nothing was written
    assert ledger_items(world, "") == before
    assert world.boards() == boards


def test_a_lifted_refusal_answered_by_the_name_its_listing_gives_keeps_the_expired_download_once(
    world: LedgerWorld,
) -> None:
    # given the refusal for R, then I' read back: R given back, the lift reported
    between, _ = refused_for_a_provisional_taker(world)
    assert read_back(world, ROOT, between, between)["readBack"] == "applied"
    assert kinds(world) == ["keep_taken_unsure"]
    # when the operator then answers as the lift says (expired, by the report's name)
    [listed] = rebase(world.dynamodb, deployment_of(world)).unplaced
    assert f"--expired-keys {CLAIM}@" in listed["why"]
    name = listed["why"].split("--expired-keys ")[1].split(" ")[0]
    answered = rebase(world.dynamodb, deployment_of(world), expired=[name])
    # then G's and I's downloads count once each, nothing left open or listed
    assert answered.kept_expired == 1
    assert world.boards() == {("song1", "2018-02"): 2}
    assert ledger_items(world, f"{GONE_PREFIX}{CLAIM}|") == {}
    assert rebase(world.dynamodb, deployment_of(world)).unplaced == []


def test_a_close_landing_between_the_aggregators_read_and_its_giving_back_is_said_to_no_longer_hold(
    world: LedgerWorld,
) -> None:
    # given the refusal for R; a read-back of I' (between G and R) reads the report, and the operator's close
    # (--deleted-keys) lands before the read-back's write gives R back
    between, _ = refused_for_a_provisional_taker(world)
    runs = answered_during_a_read_back(world, between, deleted=[CLAIM])
    # then the close applied, and the aggregator, folding the key again on the close, says the close no longer holds
    assert [run.refusals_closed for run in runs] == [1]
    reasons = [report["reason"] for report in world.reports()]
    assert any("close of that report (--deleted-keys) no longer holds" in reason for reason in reasons), reasons
    # and the operator's answer as it says (expired: the count was left as it was) keeps G beside I
    assert rebase(world.dynamodb, deployment_of(world), expired=[CLAIM]).kept_expired == 1
    assert world.boards() == {("song1", "2018-02"): 2}
