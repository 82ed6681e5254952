"""review13: fix56 refuses the operator's 'expired' to an open gone report whose keep a removal with no TTL identity
took (`KeptBy` R, `KeptByExpiry` false), and tells the operator: "a deletion (then the count is right as it is) or a
replica's expiry by TTL (then add the counts back ... by hand)". That taker is provisional: R is G's removal only while
no INSERT between G and R is known, and the aggregator gives the keep back when a lower INSERT is read back later
(`bound_gone`). The refusal deletes the report at once, on R as read, and nothing revisits it.

History: G counted (delivered); G's item expires by TTL (G_R, trimmed: never read); the key is written again (I', given
up) and that item deleted by the application (R, given up); the repair reports the key gone at G; the key is written
again (I, given up) and expires (E, delivered). recover reads back I, then R (R records itself on the open report), the
operator names the key expired (refused: R is a deletion), and recover reads back I' last (its on-failure record
received by a later run: SQS "might" deliver "out of order"; the mapping's batches are given up one by one). I' proves
R was not G's removal. Truth: G's and I's expired downloads each count (2). The operator who knows R was the
application's delete acts on the refusal as written ("the count is right as it is") and leaves 1: a lost count. Before
fix56 this history ended exact: the answer wrote G's keep taken by R and added G back; I' read back bounded the keep and
gave R's taking back (nothing to undo, R no expiry)."""

from __future__ import annotations

from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import OK, ROOT, LedgerWorld, deliver, delivered, kinds, read_back, world
from tests.unit.aggregator.rebase_on_moto import deployment_of, rebase_world, write_items
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM

__all__ = ["world"]  # fixtures, used by name


def test_a_refused_answer_whose_taker_a_later_read_back_insert_disproves_leaves_the_expired_download_counted_or_said(
    world: LedgerWorld,
) -> None:
    # given G delivered, expired by TTL with its record trimmed; the key written again (I') and deleted (R), the key
    # reported gone at G, written again (I) and expired (E, delivered); I and R read back: R is the open report's taker
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    between = world.put(ROOT, "song1", 1, "2018-02")
    removal = world.delete(ROOT, "song1", 1)
    assert removal is not None
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    insert = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert read_back(world, ROOT, insert, insert)["readBack"] == "applied"
    assert read_back(world, ROOT, removal, removal)["readBack"] == "applied"
    # and the operator names the key expired: refused, R named as a removal with no TTL identity that took G's keep
    write_items(world)
    answered = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    [unplaced] = answered.unplaced
    assert "the count is right as it is" in unplaced["why"]
    # when recover reads back I' (between G and R) last
    assert read_back(world, ROOT, between, between)["readBack"] == "applied"
    # then G's expired download counts again beside I's, or something open still says it is missing
    assert world.boards() == {("song1", "2018-02"): 2} or kinds(world) != [], (
        f"boards {world.boards()}, nothing reported: the refusal's 'a deletion (then the count is right as it is)' "
        "stands though I' proved R was not G's removal"
    )
