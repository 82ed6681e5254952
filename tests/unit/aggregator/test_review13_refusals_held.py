"""review13: angles tried against fix56's refusals that held. A windowless read version's report refused, then every
given-up record read back in any order: each expired download counts once, nothing reported (the refusal lost nothing
the read-backs do not settle). And an open report's taker that is an expiry by TTL (applied, adding nothing), given back
by a lower INSERT read back after the answer: each expired download counts once ("If records are processed more than
once, they might be processed out of order"; an item's records "appear in the same sequence as the actual
modifications to the item")."""

from __future__ import annotations

import pytest

from leaderboard_core.claims import CLAIM_KEY, GONE_PREFIX
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import (
    LEDGER_TABLE,
    OK,
    ROOT,
    LedgerWorld,
    deliver,
    delivered,
    kinds,
    read_back,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of, rebase_world, write_items
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, ledger_items
from tests.unit.aggregator.test_review11_record_version_read_label import deleted_rewritten_read_gone_and_answered
from tests.unit.aggregator.test_review12_read_windows import read_back_in

__all__ = ["world"]  # fixtures, used by name


@pytest.mark.parametrize(
    "order", ["D..I", "R, I, D..N", "I, D..R", "I, N, D, R", "N, I, R, D", "D..N, R..I", "R, D, N, I"]
)
def test_a_refused_windowless_answer_then_every_record_read_back_in_any_order_counts_each_expired_download_once(
    world: LedgerWorld, order: str
) -> None:
    # given G = r1~1 (r1 deleted by D, N its new item read), G's item expired (R), the key written again (I) and expired
    # (E, delivered, following G); the gone report as written before read windows; the operator's 'expired' refused
    named = deleted_rewritten_read_gone_and_answered(world)
    [report] = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|").values()
    world.dynamodb.update_item(
        TableName=LEDGER_TABLE, Key={CLAIM_KEY: report[CLAIM_KEY]}, UpdateExpression="REMOVE ReadFrom, ReadUntil"
    )
    write_items(world)
    answered = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    assert [entry["claimKey"] for entry in answered.unplaced] == [CLAIM]
    # when recover reads the given-up records back in `order`
    read_back_in(world, named, order)
    # then N's and I's expired downloads count once each, r1's deleted one not, nothing reported
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


def test_an_answer_applied_on_a_ttl_taker_that_a_later_read_back_insert_gives_back_counts_each_expired_download_once(
    world: LedgerWorld,
) -> None:
    # given G delivered and expired (trimmed), the key written again (I') and expired by TTL (R, given up), reported
    # gone at G, written again (I, given up) and expired (E, delivered); I then R read back (R the open report's taker)
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    between = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    removal = world.last(ROOT)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    insert = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert read_back(world, ROOT, insert, insert)["readBack"] == "applied"
    assert read_back(world, ROOT, removal, removal)["readBack"] == "applied"
    # and the operator names the key expired: applied (a TTL taker), adding nothing
    write_items(world)
    answered = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    assert (answered.kept_expired, answered.unplaced) == (1, [])
    assert world.boards() == {("song1", "2018-02"): 2}
    # when recover reads back I' (between G and R) last
    assert read_back(world, ROOT, between, between)["readBack"] == "applied"
    # then G's, I''s and I's expired downloads count once each, nothing reported
    assert world.boards() == {("song1", "2018-02"): 3}
    assert kinds(world) == []
