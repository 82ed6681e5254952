"""fix56: the operator's 'expired' answers that recover cannot apply exactly are reported, not applied: a gone report
of a version read from the table written with no read window (before read windows existed), and an open report whose
keep a removal with no TTL identity below its bound took ("TTL deletions that are replicated to global table regions
are not identifiable in DynamoDB streams in the regions the deletion is replicated to": a replica's expiry looks like a
delete). A TTL taker stays exact and applied (test_review12_read_windows.py)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from leaderboard_core.claims import ANSWERS, CLAIM_KEY, EXPIRY_PREFIX, GONE_PREFIX, KEPT_BY, KEPT_BY_EXPIRY, REFUSED
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import (
    LEDGER_TABLE,
    OK,
    ROOT,
    Interleaved,
    LedgerWorld,
    deliver,
    delivered,
    kinds,
    ledger_client,
    read_back,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of, rebase_world, write_items
from tests.unit.aggregator.test_one_reader_read_time import version
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, expiry_items, ledger_items
from tests.unit.aggregator.test_review11_record_version_read_label import deleted_rewritten_read_gone_and_answered
from tests.unit.aggregator.test_review12_read_windows import deleted_after_the_read, read_back_in
from versioned_ledger import StillInConflict

__all__ = ["world"]  # fixtures, used by name


def test_an_expired_answer_to_a_read_versions_gone_report_without_a_window_is_refused_naming_the_aggregates(
    world: LedgerWorld,
) -> None:
    # given a gone report of a version read from the table (G = r1~1) as the release before read windows wrote it,
    # the key's next item's expiry (E) following G
    named = deleted_rewritten_read_gone_and_answered(world)
    [report] = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|").values()
    world.dynamodb.update_item(
        TableName=LEDGER_TABLE, Key={CLAIM_KEY: report[CLAIM_KEY]}, UpdateExpression="REMOVE ReadFrom, ReadUntil"
    )
    # when the operator names the key expired
    write_items(world)
    answered = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    # then nothing is applied (E answers nothing, no keep), the report stays open marked with why, and the run says
    # why and which aggregates to recount
    assert answered.kept_expired == 0
    [unplaced] = answered.unplaced
    assert "no read window" in unplaced["why"]
    assert "not applied" in unplaced["why"]
    assert unplaced["aggregates"] == [["song1", "2018-02"]]
    [expiry] = expiry_items(world)
    assert ANSWERS not in expiry
    [report] = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|").values()
    assert "no read window" in report[REFUSED]["S"]
    # and reading back the given-up records in the order that double counted with the answer: each expired download
    # counts once (R, the read item's own expiry, keeps G's), nothing reported
    read_back_in(world, named, "I, N, D, R")
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


def test_an_expired_answer_whose_keep_a_delete_below_the_bound_took_applies_keeping_nothing(
    world: LedgerWorld,
) -> None:
    # given G delivered, deleted by the application (R, no TTL identity, given up), the key reported gone, written
    # again (I, given up) and expired (E, delivered, following G); I read back bounds the open report, R read back
    # records itself on it as the keep's taker
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    removal = world.delete(ROOT, "song1", 1)
    assert removal is not None
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    insert = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert read_back(world, ROOT, insert, insert)["readBack"] == "applied"
    assert read_back(world, ROOT, removal, removal)["readBack"] == "applied"
    # when the operator names the key expired
    write_items(world)
    answered = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    # then the answer applies: G's keep is written taken by R, a deletion, which keeps nothing (G's count not added
    # back); the report is closed, nothing listed, nothing reported
    assert (answered.kept_expired, answered.unplaced) == (1, [])
    assert world.boards() == {("song1", "2018-02"): 1}
    [keep] = ledger_items(world, f"{EXPIRY_PREFIX}{CLAIM}|{version(g)}|kept").values()
    assert (keep[KEPT_BY]["S"], keep[KEPT_BY_EXPIRY]["BOOL"]) == (version(removal), False)
    assert ledger_items(world, f"{GONE_PREFIX}{CLAIM}|") == {}
    assert kinds(world) == []


def conflicts_always(calls: int, send: Any, parameters: dict[str, Any]) -> Any:
    """Every transaction is cancelled by another writer's conflict (TransactionConflict)."""
    error = {"Code": "TransactionCanceledException", "Message": "cancelled"}
    reasons = [{"Code": "TransactionConflict"} for _ in parameters["TransactItems"]]
    raise ClientError({"Error": error, "CancellationReasons": reasons}, "TransactWriteItems")


def test_a_read_keep_taken_by_a_delete_sends_no_report_while_every_attempt_conflicts(
    world: LedgerWorld,
) -> None:
    # given a read version's keep, D a delete created after the read, N and X; every transaction conflicts
    named = deleted_after_the_read(world, expired=False)
    ledger_client(world, Interleaved(world.dynamodb, "transact_write_items", instead=conflicts_always))
    # when the mapping delivers D, N and X (the invocation fails: the mapping retries the batch)
    with pytest.raises(StillInConflict):
        deliver(world, ROOT, delivered(world, ROOT, [named["D"], named["N"], named["X"]]))
    # then nothing is committed and nothing is reported: a deletion taking a keep is exact, no report to lose
    assert kinds(world) == []
