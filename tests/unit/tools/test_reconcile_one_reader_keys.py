"""`reconcile --repair` with one reader per shard, from the command line: the gone keys the operator names expired,
and the dry run it does not have."""

from __future__ import annotations

import json

import pytest

from leaderboard_tools.cli import main
from leaderboard_tools.commands import EXIT_DIFFERENCES, EXIT_EXACT
from tests.unit.tools.operator_stack import MONTH, stored_count
from tests.unit.tools.test_recover_read_back import delete_download, one_reader_stack, stale_ledger_item


def test_with_one_reader_a_gone_key_the_operator_names_expired_stays_counted_and_is_no_longer_reported(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a one-reader deployment with a download its ledger counts whose item is gone, reported by the rebase with
    # the download's key
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    delete_download(stack, "song1", "d1")
    assert main(["reconcile", "--table", stack.table, "--month", MONTH, "--repair", "--json"]) == EXIT_DIFFERENCES
    (gone,) = json.loads(capsys.readouterr().out)["gone"]
    # when the operator, who knows Time to Live deleted it, names it expired
    expired = ["--expired-keys", gone["claimKey"]]
    code = main(["reconcile", "--table", stack.table, "--month", MONTH, "--repair", *expired, "--json"])
    # then it stays counted, and nothing is left: a repair run again reports it no more
    answer = json.loads(capsys.readouterr().out)
    assert (code, answer["kept_expired"], answer["taken_back"], answer["gone"]) == (EXIT_EXACT, 1, 0, [])
    assert stored_count(stack, "song1", MONTH) == 1
    assert main(["reconcile", "--table", stack.table, "--month", MONTH, "--repair", "--json"]) == EXIT_EXACT
    assert json.loads(capsys.readouterr().out)["gone"] == []


def test_with_one_reader_a_key_named_both_deleted_and_expired_is_a_usage_error(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a one-reader deployment
    stack = one_reader_stack()
    claim = "download#abc"
    # when a key is named both deleted and expired
    named = ["--deleted-keys", claim, "--expired-keys", claim]
    code = main(["reconcile", "--table", stack.table, "--month", MONTH, "--repair", *named])
    # then the command refuses, naming the key
    assert code == 2
    assert "either deleted or expired" in capsys.readouterr().err


def test_with_one_reader_a_repairs_dry_run_is_refused_saying_what_the_repair_does(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a one-reader deployment with a download counted in February by its ledger item, its item in March
    stack = one_reader_stack()
    stale_ledger_item(stack, "2018-02")
    # when the operator asks for a dry run of the repair
    code = main(["reconcile", "--table", stack.table, "--month", MONTH, "--repair", "--dry-run"])
    # then it is refused, naming the rebase, and nothing was written
    assert code == 2
    assert "the rebase" in capsys.readouterr().err
    assert (stored_count(stack, "song1", "2018-02"), stored_count(stack, "song1", MONTH)) == (1, None)
