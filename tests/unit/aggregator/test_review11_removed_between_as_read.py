"""An eleventh review of one reader per shard (STREAM_READERS=1), fix54: the unfollow an INSERT between a gone version
G and the expiry E answering it makes on E's item is conditioned on `RemovedBetween` as read (its value, or its
absence), so a REMOVE between recorded by another invocation meanwhile refuses the stale fold, which is read and folded
again. Each test is named for what should hold; each fails on the defect it tried.

"the stream records appear in the same sequence as the actual modifications to the item" (S10); "If records are
processed more than once, they might be processed out of order" (L2); a transaction's actions "either all of them
succeed, or all of them fail" (D2)."""

from __future__ import annotations

from typing import Any

from leaderboard_core.claims import ANSWERS, EXPIRY_PREFIX, FOLLOWS, REMOVED_BETWEEN, claim_key
from tests.unit.aggregator.ledger_on_moto import (
    OK,
    ROOT,
    Interleaved,
    LedgerWorld,
    deliver,
    delivered,
    key_of,
    kinds,
    ledger_client,
    read_back,
    world,
)
from tests.unit.aggregator.rebase_on_moto import rebase_world
from tests.unit.aggregator.test_one_reader_read_time import version
from tests.unit.aggregator.test_one_reader_review9 import named_expired
from tests.unit.aggregator.test_review10_removed_between import answered_expiry

__all__ = ["world"]  # fixtures, used by name

CLAIM = claim_key(key_of("song1", 1))


def expiry_of_e(world: LedgerWorld, named: dict[str, str]) -> dict[str, Any]:
    """E's own item (`expired#<claim>|<E's version>`)."""
    return answered_expiry(world)[f"{EXPIRY_PREFIX}{CLAIM}|{version(named['E'])}"]


def gone_then_written_deleted_written_and_answered(world: LedgerWorld) -> dict[str, str]:
    """A February download G delivered; its expiry R given up; the repair reports the key gone at G; the key written
    again (A1, INSERT I1), deleted (D), written again (A2, INSERT I2), all given up; A2's expiry E delivered (it
    follows G) and taken by the operator's answer for G's. Truth: G and A2 expired (February 2), A1 deleted."""
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    named = {"R": world.last(ROOT)}
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    named["I1"] = world.put(ROOT, "song1", 1, "2018-02")
    deletion = world.delete(ROOT, "song1", 1)
    assert deletion is not None
    named["D"] = deletion
    named["I2"] = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    named["E"] = world.last(ROOT)
    assert deliver(world, ROOT, delivered(world, ROOT, [named["E"]])) == OK
    assert named_expired(world, "song1", 1) == (0, False)
    return named


def test_a_lower_removal_recorded_during_an_inserts_invocation_refuses_its_fold_on_the_removal_as_read(
    world: LedgerWorld,
) -> None:
    # given the history above; recover reads D back first, which records itself on E's item (RemovedBetween = D)
    named = gone_then_written_deleted_written_and_answered(world)
    assert read_back(world, ROOT, named["D"], named["D"])["readBack"] == "applied"
    assert expiry_of_e(world, named)[REMOVED_BETWEEN] == {"S": version(named["D"])}
    # when recover reads I1 back (below D: its fold keeps G), and between that invocation's read of E's item and its
    # transaction the mapping delivers R again (L2), G's own removal, below I1, which lowers RemovedBetween to R
    ledger_client(
        world,
        Interleaved(
            world.dynamodb,
            "transact_write_items",
            before=lambda: deliver(world, ROOT, delivered(world, ROOT, [named["R"]])),
        ),
    )
    assert read_back(world, ROOT, named["I1"], named["I1"])["readBack"] == "applied"
    # then I1's stale fold was refused (RemovedBetween no longer D), folded again above R and left E answering G: G
    # (by R's own image) and A2 once each, nothing reported; I2 read back last changes nothing
    e = expiry_of_e(world, named)
    assert (e[FOLLOWS], e[REMOVED_BETWEEN]) == (e[ANSWERS], {"S": version(named["R"])})
    assert world.boards() == {("song1", "2018-02"): 2}
    assert read_back(world, ROOT, named["I2"], named["I2"])["readBack"] == "applied"
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


def test_two_inserts_between_folded_by_racing_invocations_keep_the_gone_version_once_bounded_by_the_lower(
    world: LedgerWorld,
) -> None:
    # given the history above
    named = gone_then_written_deleted_written_and_answered(world)
    # when recover reads I1 back and, between that invocation's read of E's item and its transaction, the mapping
    # delivers I2 (L2), which, below every REMOVE read, unfollows E and keeps G first
    transactions = ledger_client(
        world,
        Interleaved(
            world.dynamodb,
            "transact_write_items",
            before=lambda: deliver(world, ROOT, delivered(world, ROOT, [named["I2"]])),
        ),
    )
    assert read_back(world, ROOT, named["I1"], named["I1"])["readBack"] == "applied"
    # then I1's stale fold was refused and folded again: G kept once; D (A1's deletion, above I1) read back then does
    # not take G's keep, R (G's own expiry, below I1) does: G and A2 once each, A1 nowhere, nothing reported
    assert transactions.calls >= 3
    assert world.boards() == {("song1", "2018-02"): 2}
    for record in ("D", "R"):
        assert read_back(world, ROOT, named[record], named[record])["readBack"] == "applied"
        assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []
