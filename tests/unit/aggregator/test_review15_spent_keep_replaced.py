"""review15: fix58's rule 6 ("a spent keep whose taker is given back sends a new report whose reason starts
'withdrawn'") covers a taker given back by an INSERT read back below it (`ExpiryKeeps.bound_keeps`), not a taker
replaced by a lower REMOVE read back later (`ExpiryKeeps.take` -> `retake`, then `report_spent` for the new taker).
The first taker's report ("a deletion ... take counts back from entityId's aggregates by hand") then stands unwithdrawn,
though the lower REMOVE proves the first one was not the kept version's removal.

AWS: TTL deletions "replicated to global table regions are not identifiable in DynamoDB streams in the regions the
deletion is replicated to" (Working with expired items), so a REMOVE with no TTL identity is a deletion or a replica's
expiry; "Lambda event source mappings process each event at least once, and duplicate processing of records can occur"
(event source mappings) and a batch given up goes to the on-failure destination, read back by recover later and in
any order; an item's stream records "appear in the same sequence as the actual modifications to the item" (DynamoDB
Streams), so a second REMOVE of the key after D0 removed a later item (an INSERT lies between them, given up).

History: a January download counted by the backfill (G = backfill~<n>, read at t); more than the margin later G's item
is removed with no TTL identity (D0: a replica's expiry in this region), the key written again (I) and that item
deleted by the application (D1); D0 and I given up (I's record later trimmed, never read back); the repair reports the
key gone at G and the operator, who knows G expired, names it expired (kept). D1 is delivered first: it spends the keep,
reported ("a deletion ... take counts back by hand"); the operator, who knows D1 was the application's delete, takes
G's count back by hand, as told. D0 is read back last and takes the keep from D1, reported for D0 alone.
Truth: G's expired download counts (1); I was written and deleted (0). Nothing tells the operator that D1's report no
longer holds, so the count it took back by hand stays taken (0): silent for an operator following the messages."""

from __future__ import annotations

import pytest

from tests.unit.aggregator.ledger_on_moto import OK, ROOT, LedgerWorld, deliver, delivered, read_back, world
from tests.unit.aggregator.rebase_on_moto import kept_expired
from tests.unit.aggregator.test_one_reader_read_time import version
from tests.unit.aggregator.test_read_windows_of_gone_versions import MARGIN
from tests.unit.aggregator.test_review14_answers_by_key import added_back_by_hand

__all__ = ["world"]  # fixtures, used by name


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="review15 F2 (silent for an operator following the messages): a spent keep's taker replaced by a lower "
    "REMOVE read back later is not withdrawn (rule 6 covers only an INSERT giving it back): the count the operator "
    "took back by hand on the first taker's report stays taken",
)
def test_a_spent_keep_whose_taker_a_lower_removal_read_back_replaces_withdraws_the_first_takers_report(
    world: LedgerWorld,
) -> None:
    # given G counted by the backfill; its item removed with no TTL identity (D0), the key written again (I) and
    # deleted by the application (D1), D0 and I given up; the key reported gone at G and named expired
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.pass_time(MARGIN + 10)
    first_removal = world.delete(ROOT, "song1", 1)
    world.put(ROOT, "song1", 1, "2018-01")
    later_removal = world.delete(ROOT, "song1", 1)
    assert first_removal is not None
    assert later_removal is not None
    kept_expired(world, "song1", 1)
    # and D1 delivered first: it spends the keep, reported; the operator, who knows D1 was the application's delete,
    # takes G's count back by hand, as the report says
    assert deliver(world, ROOT, delivered(world, ROOT, [later_removal])) == OK
    [spent] = world.reports()
    assert (spent["kind"], spent["takenBy"]) == ("keep_taken_unsure", version(later_removal))
    assert "take counts back" in spent["reason"]
    added_back_by_hand(world, "2018-01", -1)
    # when recover reads back D0 (below D1) last
    assert read_back(world, ROOT, first_removal, first_removal)["readBack"] == "applied"
    # then something withdraws D1's report, naming D1, so that the count taken back on it is added back
    later = world.reports()
    assert any(
        report["takenBy"] == version(later_removal) and report["reason"].startswith("withdrawn") for report in later
    ), f"D1's report stands unwithdrawn; boards {world.boards()} (truth 1); later reports: {later}"
