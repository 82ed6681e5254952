"""review15: angles against fix58 (answers per report) that held, and tests fix58's own suite lacked: with the answer's
label ignored (`report_answers.touches` true for any label), or a key named both ways by label let through
(`resolve_answers`), every test of fix58 still passed. The refused report is a windowless read version's (a refusal
or close on a taker is none any more: test_deletion_takers_count_nothing.py holds those histories).

AWS: a condition expression decides a write ("If the condition expression evaluates to true, the operation succeeds;
otherwise, the operation fails", Condition expressions); a transaction's writes apply all or none."""

from __future__ import annotations

import pytest

from leaderboard_core.claims import CLOSED, GONE_PREFIX
from leaderboard_tools.recover.rebase import RebaseRefused, rebase
from tests.unit.aggregator.ledger_on_moto import LedgerWorld, world
from tests.unit.aggregator.rebase_on_moto import deployment_of, write_items
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, ledger_items
from tests.unit.aggregator.test_review13_refusal_lost_on_crash import windowless_read_version_report
from tests.unit.aggregator.test_review14_answers_by_key import written_again_and_gone

__all__ = ["world"]  # fixtures, used by name


def two_open_reports(world: LedgerWorld) -> tuple[str, str]:
    """The key's 'expired' refused (G's report, a version read from the table with no read window), then the key
    written again (I2, counted) and expired with its record given up (reported gone at I2). Returns the refused label
    and I2's."""
    windowless_read_version_report(world)
    write_items(world)
    [refused] = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM]).unplaced
    assert "has no read window" in refused["why"]
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
