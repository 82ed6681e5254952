"""A tenth review of one reader per shard (STREAM_READERS=1), fix52: a REMOVE between a gone version G and the expiry E
answering it (`Answers`) records itself on E's item (`RemovedBetween`, the lowest) instead of undoing the answer, and
only an INSERT below every such REMOVE keeps G (followed_expiries.py). Each test is named for what should hold. Those
marked xfail are findings: the reason says what happens instead, silent or loud. The rest are angles tried that held:
each fails on the defect it tried.

The records' order is AWS's: "For each item that is modified in a DynamoDB table, the stream records appear in the
same sequence as the actual modifications to the item" (S10), and the mapping's is not: "If records are processed more
than once, they might be processed out of order" (L2), a batch given up goes to the on-failure destination (L4) and
`recover` reads it back whenever it runs."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from leaderboard_core.claims import ANSWERS, CLAIM_KEY, EXPIRY_PREFIX, FOLLOWS, REMOVED_BETWEEN, claim_key
from leaderboard_tools.reconcile.clock import CLOCK_MARGIN_SECONDS
from tests.unit.aggregator.ledger_on_moto import (
    LEDGER_TABLE,
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

__all__ = ["world"]  # fixtures, used by name

CLAIM = claim_key(key_of("song1", 1))
MARGIN = CLOCK_MARGIN_SECONDS


def answered_expiry(world: LedgerWorld) -> dict[str, dict[str, Any]]:
    """The expiries' own items (`expired#<claim>|<version>`, not the operator's keeps) of the world's one key."""
    items = world.dynamodb.scan(TableName=LEDGER_TABLE, ConsistentRead=True)["Items"]
    return {
        item[CLAIM_KEY]["S"]: item
        for item in items
        if item[CLAIM_KEY]["S"].startswith(f"{EXPIRY_PREFIX}{CLAIM}|") and not item[CLAIM_KEY]["S"].endswith("|kept")
    }


def gone_expired_rewritten_and_expired(world: LedgerWorld, removal: str = "expiry") -> dict[str, str]:
    """A February download G delivered; its item then removed (R, by TTL unless `removal` says "delete"), a batch the
    mapping gave up; the repair, run meanwhile, reports the key gone at G. The key written again into February (A1,
    its INSERT I, given up too), A1 expired (E) and E delivered: E follows G. The operator names the key expired, and
    E answers G. So R is G's own removal and E is A1's. Returns the records by name."""
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    if removal == "expiry":
        world.expire(ROOT, "song1", 1)
        r = world.last(ROOT)
    else:
        deleted = world.delete(ROOT, "song1", 1)
        assert deleted is not None
        r = deleted
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    i = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    e = world.last(ROOT)
    assert deliver(world, ROOT, delivered(world, ROOT, [e])) == OK
    assert named_expired(world, "song1", 1) == (0, False)
    [expiry_item] = answered_expiry(world).values()
    assert expiry_item[ANSWERS] == expiry_item[FOLLOWS]
    return {"G": g, "R": r, "I": i, "E": e}


# ---------------------------------------------------------------------------- the case fix52's author left untested


def test_an_expiry_that_is_the_gone_versions_removal_read_back_after_the_insert_after_it_keeps_the_version_once(
    world: LedgerWorld,
) -> None:
    # given G, its own expiry R given up, the key reported gone, A1 written (I, given up), A1's expiry E delivered and
    # taken by the operator's answer for G's
    named = gone_expired_rewritten_and_expired(world)
    # when recover reads the INSERT after R back first (it keeps G, bounded by I), then R (G's removal)
    assert read_back(world, ROOT, named["I"], named["I"])["readBack"] == "applied"
    assert world.boards() == {("song1", "2018-02"): 2}
    assert read_back(world, ROOT, named["R"], named["R"])["readBack"] == "applied"
    # then R takes G's keep (its old image in place of the keep's): G and A1 expired, each counted once, silently right
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


@pytest.mark.parametrize("order", ["R, I", "I, R", "R..I", "I, R, R..I, E"])
def test_an_expiry_that_is_the_gone_versions_removal_keeps_it_once_in_any_read_back_order(
    world: LedgerWorld, order: str
) -> None:
    # given G, its own expiry R given up, the key reported gone, A1 written (I, given up), A1's expiry E delivered and
    # taken by the operator's answer for G's
    named = gone_expired_rewritten_and_expired(world)
    # when recover reads R and I back in `order` ("R..I": the given-up range whole; E delivered again after)
    for step in order.split(", "):
        if step == "E":
            assert deliver(world, ROOT, delivered(world, ROOT, [named["E"]])) == OK
            continue
        first, _, last = step.partition("..")
        assert read_back(world, ROOT, named[first], named[last or first])["readBack"] == "applied"
    # then the two expired downloads count once each in February, nothing reported
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


def test_an_expiry_of_the_gone_version_applied_after_the_insert_after_it_is_counted_once_or_left_loudly(
    world: LedgerWorld,
) -> None:
    # given G delivered, its expiry E (G's own removal) given up, the key reported gone; the key written again (A1's
    # INSERT I, after E in the stream) and delivered before E is read back
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    e = world.last(ROOT)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    i = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [i])) == OK
    # when recover reads E back, and the operator names the key expired
    assert read_back(world, ROOT, e, e)["readBack"] == "applied"
    kept, remain = named_expired(world, "song1", 1)
    # then G's expired download counts once beside the live A1 (E keeps its old image: it follows no gone version as
    # applied below I), and the answer keeps nothing more: at most it is left to the operator, loudly
    assert kept == 0
    assert world.boards() == {("song1", "2018-02"): 2}
    assert remain or kinds(world) == []


# ------------------------------------------------------------------------------------------------ angles that held


@pytest.mark.parametrize(
    ("order", "kind"),
    [
        *((order, "delete") for order in itertools.permutations(["R1", "I1", "R2", "I2"])),
        *((order, kind) for order in itertools.permutations(["I1", "R2", "I2"]) for kind in ("delete", "expiry")),
        *(
            (order, "expiry")
            for order in [("R1", "R2", "I1", "I2"), ("R2", "R1", "I2", "I1"), ("I2", "R2", "R1", "I1")]
        ),
    ],
    ids=lambda value: "-".join(value) if isinstance(value, tuple) else value,
)
def test_two_removals_and_two_inserts_between_keep_the_gone_version_once_in_every_read_back_order(
    world: LedgerWorld, order: tuple[str, ...], kind: str
) -> None:
    # given G, its own expiry R1 given up, the key reported gone; A1 written (I1), removed (R2, a delete or an expiry),
    # A2 written (I2), all given up; A2's expiry E delivered, taken by the operator's answer for G's
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    named = {"R1": world.last(ROOT)}
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    named["I1"] = world.put(ROOT, "song1", 1, "2018-02")
    if kind == "expiry":
        world.expire(ROOT, "song1", 1)
        named["R2"] = world.last(ROOT)
    else:
        deleted = world.delete(ROOT, "song1", 1)
        assert deleted is not None
        named["R2"] = deleted
    named["I2"] = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads them back one by one in `order` (all 24 with a delete, a sample with an expiry; without R1:
    # G's removal never read back, its range trimmed)
    answers = [read_back(world, ROOT, named[step], named[step])["readBack"] for step in order]
    # then G, A2 (and A1 if it expired) count once each in February, nothing reported
    assert answers == ["applied"] * len(order)
    assert world.boards() == {("song1", "2018-02"): 3 if kind == "expiry" else 2}
    assert kinds(world) == []


@pytest.mark.parametrize("halves", ["first half first", "second half first"])
def test_a_bisected_read_back_of_the_writes_between_keeps_the_gone_version_once(
    world: LedgerWorld, halves: str
) -> None:
    # given G, its own expiry R given up, the key reported gone, A1 written (I) and deleted (D), A2 written (J), all
    # given up; A2's expiry delivered and taken by the operator's answer for G's
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    r = world.last(ROOT)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    i = world.put(ROOT, "song1", 1, "2018-02")
    d = world.delete(ROOT, "song1", 1)
    assert d is not None
    j = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert named_expired(world, "song1", 1) == (0, False)
    # when the range R..J comes back as the two halves of a bisected batch, in either order
    first, second = (r, i), (d, j)
    for start, end in (first, second) if halves == "first half first" else (second, first):
        assert read_back(world, ROOT, start, end)["readBack"] == "applied"
    # then G and A2 count once each (A1 deleted), nothing reported
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


@pytest.mark.parametrize("order", ["R first", "I first"])
def test_a_modify_before_the_gone_versions_expiry_keeps_the_expired_image_not_the_versions(
    world: LedgerWorld, order: str
) -> None:
    # given G (February) delivered, the item edited into March (M) and expired (R), both given up; the key reported
    # gone at G; A1 written into February (I, given up), expired and that expiry delivered, answered for G
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    m = world.put(ROOT, "song1", 1, "2018-03")
    world.expire(ROOT, "song1", 1)
    r = world.last(ROOT)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    i = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads M and R back, and I, in `order`
    steps = [(m, r), (i, i)] if order == "R first" else [(i, i), (m, r)]
    for start, end in steps:
        assert read_back(world, ROOT, start, end)["readBack"] == "applied"
    # then G's item counts where it expired (March), A1 in February, nothing reported
    assert world.boards() == {("song1", "2018-03"): 1, ("song1", "2018-02"): 1}
    assert kinds(world) == []


def test_a_removal_between_read_back_then_the_answer_repeated_then_the_insert_keeps_the_version_once(
    world: LedgerWorld,
) -> None:
    # given G, its own expiry R given up, the key reported gone; A1 written (I), deleted (D), A2 written, all given
    # up; A2's expiry delivered and taken by the operator's answer for G's
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    r = world.last(ROOT)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    i = world.put(ROOT, "song1", 1, "2018-02")
    d = world.delete(ROOT, "song1", 1)
    assert d is not None
    world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads D back (it records itself), the operator answers again, then recover reads I and R back
    assert read_back(world, ROOT, d, d)["readBack"] == "applied"
    [expiry_item] = answered_expiry(world).values()
    assert expiry_item[REMOVED_BETWEEN] == {"S": version(d)}
    assert named_expired(world, "song1", 1) == (0, False)
    assert read_back(world, ROOT, i, i)["readBack"] == "applied"
    assert read_back(world, ROOT, r, r)["readBack"] == "applied"
    # then G and A2 count once each (A1 deleted), nothing reported
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


def test_the_gone_versions_own_expiry_read_back_before_the_answer_is_counted_once_and_the_answer_left_loudly(
    world: LedgerWorld,
) -> None:
    # given G, its own expiry R given up, the key reported gone, A1 written (I, given up), A1's expiry E delivered
    # (it follows G); recover reads R back before the operator answers
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    r = world.last(ROOT)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    i = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert read_back(world, ROOT, r, r)["readBack"] == "applied"
    # when the operator names the key expired, then recover reads I back
    kept, remain = named_expired(world, "song1", 1)
    assert read_back(world, ROOT, i, i)["readBack"] == "applied"
    # then G counts once (by R's own old image) beside A1, and the answer keeps nothing more (left to the operator)
    assert kept == 0
    assert world.boards() == {("song1", "2018-02"): 2}
    assert remain or kinds(world) == []


def test_an_insert_between_committed_during_a_removals_invocation_fails_its_stale_fold_which_reads_again(
    world: LedgerWorld,
) -> None:
    # given G, its own expiry R given up, the key reported gone, A1 written (I, given up), A1's expiry E delivered and
    # taken by the operator's answer for G's
    named = gone_expired_rewritten_and_expired(world)
    # when recover reads R back, and between that invocation's read of E's item and its transaction the mapping
    # delivers I (out of order, L2), which keeps G bounded by I
    transactions = ledger_client(
        world,
        Interleaved(
            world.dynamodb,
            "transact_write_items",
            before=lambda: deliver(world, ROOT, delivered(world, ROOT, [named["I"]])),
        ),
    )
    assert read_back(world, ROOT, named["R"], named["R"])["readBack"] == "applied"
    # then R's transaction failed its condition on E's item (Follows gone), was folded again and took G's keep: G and
    # A1 count once each in February, nothing reported
    assert transactions.calls >= 3
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


# ------------------------------------------------------------------------------------------------------------ findings


def test_a_removal_between_committed_during_an_inserts_invocation_is_not_overtaken_by_its_stale_fold(
    world: LedgerWorld,
) -> None:
    # given G, its own expiry R given up, the key reported gone, A1 written (I, given up), A1's expiry E delivered and
    # taken by the operator's answer for G's
    named = gone_expired_rewritten_and_expired(world)
    # when recover reads I back, and between that invocation's read of E's item and its transaction the mapping
    # delivers R again (a retry, out of order: L2), which records itself on E's item and keeps its own old image
    ledger_client(
        world,
        Interleaved(
            world.dynamodb,
            "transact_write_items",
            before=lambda: deliver(world, ROOT, delivered(world, ROOT, [named["R"]])),
        ),
    )
    assert read_back(world, ROOT, named["I"], named["I"])["readBack"] == "applied"
    # then G and A1 count once each in February (or the doubt is reported)
    assert world.boards() == {("song1", "2018-02"): 2} or kinds(world) != []


def test_a_removal_above_the_insert_committed_during_its_invocation_fails_its_stale_fold_which_still_keeps_the_version(
    world: LedgerWorld,
) -> None:
    # given G, its own expiry R given up, the key reported gone; A1 written (I), deleted (D), A2 written, all given
    # up; A2's expiry delivered and taken by the operator's answer for G's
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    r = world.last(ROOT)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    i = world.put(ROOT, "song1", 1, "2018-02")
    d = world.delete(ROOT, "song1", 1)
    assert d is not None
    world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads I back, and between that invocation's read of E's item and its transaction the mapping
    # delivers D (out of order, L2), which records itself on E's item (RemovedBetween)
    transactions = ledger_client(
        world,
        Interleaved(
            world.dynamodb, "transact_write_items", before=lambda: deliver(world, ROOT, delivered(world, ROOT, [d]))
        ),
    )
    assert read_back(world, ROOT, i, i)["readBack"] == "applied"
    # then I's transaction failed its condition on E's item (RemovedBetween changed), was folded again, found D above
    # I and still kept G, which R, read back last, takes: G and A2 count once each (A1 deleted), nothing reported
    assert transactions.calls >= 3
    assert FOLLOWS not in next(iter(answered_expiry(world).values()))
    assert world.boards() == {("song1", "2018-02"): 2}
    assert read_back(world, ROOT, r, r)["readBack"] == "applied"
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


@pytest.mark.parametrize("order", ["I_G..I", "I_G, R, I", "R, I_G, I"])
def test_the_read_items_own_insert_read_back_after_its_answered_expiry_is_not_taken_for_a_write_between(
    world: LedgerWorld, order: str
) -> None:
    # given a February download whose INSERT (I_G) is not delivered when, more than the margin later, the backfill
    # counts it (a version read from the table); its expiry R, the key written again (A1's INSERT I), all in a batch
    # the mapping gave up; the repair, run after R, reports the key gone; A1's expiry E delivered (it follows the
    # backfill's version) and taken by the operator's answer for G's
    insert = world.put(ROOT, "song1", 1, "2018-02")
    world.pass_time(MARGIN + 10)
    assert world.backfill() == [("song1", 1)]
    world.pass_time(MARGIN + 10)
    world.expire(ROOT, "song1", 1)
    named = {"I_G": insert, "R": world.last(ROOT)}
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    named["I"] = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads the given-up records back in `order` ("I_G..I": the range whole)
    for step in order.split(", "):
        first, _, last = step.partition("..")
        assert read_back(world, ROOT, named[first], named[last or first])["readBack"] == "applied"
    # then G and A1, both expired, count once each in February, or the doubt is reported
    assert world.boards() == {("song1", "2018-02"): 2} or kinds(world) != []


@pytest.mark.parametrize("order", ["I, R", "R, I", "I..R"])
def test_the_gone_versions_own_expiry_read_back_with_the_insert_after_it_before_the_answer_keeps_it_once(
    world: LedgerWorld, order: str
) -> None:
    # given G, its own expiry R given up, the key reported gone, A1 written (I, given up), A1's expiry E delivered (it
    # follows G); recover reads I and R back in `order` before the operator answers ("I..R": R then I, one range)
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    named = {"R": world.last(ROOT)}
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    named["I"] = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    for step in order.split(", "):
        if step == "I..R":
            assert read_back(world, ROOT, named["R"], named["I"])["readBack"] == "applied"
            continue
        assert read_back(world, ROOT, named[step], named[step])["readBack"] == "applied"
    # when the operator names the key expired
    _, remain = named_expired(world, "song1", 1)
    # then G (by R's own old image) and A1 count once each in February, or the doubt is left to the operator
    assert world.boards() == {("song1", "2018-02"): 2} or remain or kinds(world) != []
