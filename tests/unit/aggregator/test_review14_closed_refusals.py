"""review14: fix57 keeps a refused 'expired' open (`Refused`) so that a record read back later can still make the answer
exact, and gives the operator one way to close it: naming the key `--deleted-keys` ("the count right as it is, or put
right by hand", docs/exactly-once-one-reader.md). The refusal for a removal with no TTL identity says "a deletion (then
the count is right as it is) or a replica's expiry by TTL (then add the counts back ... by hand)", and nothing in it
says that the taker is provisional (R is G's removal only while no INSERT between G and R is known).

AWS: TTL deletions "replicated to global table regions are not identifiable in DynamoDB streams in the regions the
deletion is replicated to" (Working with expired items), so a REMOVE with no TTL identity may be either; the mapping
gives up a batch to its on-failure destination and recover reads it back later, in any order ("Lambda event source
mappings process each event at least once, and duplicate processing of records can occur"; an SQS standard queue
"might" deliver "out of order"), so an INSERT between G and R may be read back after the operator has judged.

History (review13's, on fix57): G counted; G's item expires by TTL (trimmed); the key is written again (I') and that
item deleted by the application (R); the repair reports the key gone at G; the key is written again (I) and expires (E,
delivered); I then R read back; the operator names the key expired: refused for R. Truth: G's and I's expired
downloads each count (2)."""

from __future__ import annotations

from leaderboard_core.claims import GONE_PREFIX, REFUSED
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import OK, ROOT, LedgerWorld, deliver, delivered, kinds, read_back, world
from tests.unit.aggregator.rebase_on_moto import deployment_of, rebase_world, write_items
from tests.unit.aggregator.test_one_reader_read_time import version
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, ledger_items

__all__ = ["world"]  # fixtures, used by name


def taken_by_a_provisional_taker(world: LedgerWorld) -> tuple[str, str]:
    """review13's history up to the operator's answer: the open report of G bounded by I and taken by R. Returns I'
    (still given up) and R."""
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
    write_items(world)
    return between, removal


def refused_for_a_provisional_taker(world: LedgerWorld) -> tuple[str, str]:
    """review13's history up to the operator's refused 'expired'. Returns I' (still given up) and R."""
    between, removal = taken_by_a_provisional_taker(world)
    [refused] = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM]).unplaced
    assert "the count is right as it is" in refused["why"]
    return between, removal


def test_a_refusal_the_operator_closes_as_directed_is_said_again_when_a_later_read_back_disproves_its_taker(
    world: LedgerWorld,
) -> None:
    # given the refusal for R, and the operator, who knows R was the application's delete, judging the count right as
    # it is and closing the report the one way fix57 offers (--deleted-keys)
    between, _ = refused_for_a_provisional_taker(world)
    closed = rebase(world.dynamodb, deployment_of(world), deleted=[CLAIM])
    assert closed.refusals_closed == 1
    assert world.boards() == {("song1", "2018-02"): 1}
    # when recover reads back I' (between G and R) last
    assert read_back(world, ROOT, between, between)["readBack"] == "applied"
    # then G's expired download counts again beside I's, or something says the judgement rested on a taker disproved
    assert world.boards() == {("song1", "2018-02"): 2} or kinds(world) != [], (
        f"boards {world.boards()}, nothing reported: the closed refusal stands though I' proved R was not G's removal"
    )


def test_a_refusal_whose_taker_was_given_back_is_not_listed_again_with_the_disproved_reason(
    world: LedgerWorld,
) -> None:
    # given the refusal for R, then I' read back (between G and R): the aggregator reports the refusal's end
    between, removal = refused_for_a_provisional_taker(world)
    assert read_back(world, ROOT, between, between)["readBack"] == "applied"
    assert kinds(world) == ["keep_taken_unsure"]
    [report] = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|").values()
    assert REFUSED in report
    # when the operator runs recover again, answering nothing yet
    later = rebase(world.dynamodb, deployment_of(world))
    # then no entry still tells the operator that R took G's keep and the count may be right as it is
    stale = [entry["why"] for entry in later.unplaced if version(removal) in entry["why"]]
    assert stale == [], f"listed with the disproved taker: {stale}"
