"""review14: the twin of review13's first finding on the keep path, which fix57 leaves as it was. A keep of a version
read from the table (the operator's 'expired' answered, `backfill~<n>`) that a REMOVE with no TTL identity, created
after the read, takes is reported (`keep_taken_unsure`, `ExpiryKeeps.report_spent`): "a replica's expiry (then this is
exact) or a deletion, the operator's answer true of a later item only (then the kept download counts twice: take counts
back from entityId's aggregates by hand)". That taker is provisional: an INSERT read back later between the read and
the REMOVE proves the REMOVE was the new item's, not the read item's, and the aggregator gives the keep back
(`bound_keeps` -> `retake`), saying nothing. fix57 reports a taker given back only for a refused gone report
(`refusal_lifted`), not for a keep the report above already asked the operator to act on.

AWS: TTL deletions "replicated to global table regions are not identifiable in DynamoDB streams in the regions the
deletion is replicated to" (Working with expired items); the mapping discards a batch to its on-failure destination
after its retries and recover reads it back later ("Lambda event source mappings process each event at least once",
and a discarded batch is sent to the OnFailure destination), so the INSERT may come after the REMOVE.

History: a January download counted by the backfill (G = backfill~<n>, read at t); more than the margin later its item
expires by TTL (record trimmed, never read), the key is written again (I) and that item deleted by the application (D);
I and D given up; the repair reports the key gone at G and the operator, who knows G expired, names it expired (kept).
D is read back (it takes the keep: reported), I last. Truth: G's expired download counts (1); I was written and
deleted (0)."""

from __future__ import annotations

from tests.unit.aggregator.ledger_on_moto import OK, ROOT, LedgerWorld, deliver, delivered, read_back, world
from tests.unit.aggregator.rebase_on_moto import kept_expired
from tests.unit.aggregator.test_one_reader_read_time import version
from tests.unit.aggregator.test_read_windows_of_gone_versions import MARGIN

__all__ = ["world"]  # fixtures, used by name


def test_a_spent_keep_report_whose_taker_a_later_read_back_insert_gives_back_is_followed_by_a_report_saying_so(
    world: LedgerWorld,
) -> None:
    # given G counted by the backfill; its item expired (trimmed), the key written again (I) and deleted (D), both
    # given up; the key reported gone at G and named expired
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.pass_time(MARGIN + 10)
    world.expire(ROOT, "song1", 1)
    insert = world.put(ROOT, "song1", 1, "2018-01")
    deletion = world.delete(ROOT, "song1", 1)
    assert deletion is not None
    kept_expired(world, "song1", 1)
    # and D read back first: it spends the keep, and the operator is told to take the counts back if D was a deletion
    assert deliver(world, ROOT, delivered(world, ROOT, [deletion])) == OK
    [spent] = world.reports()
    assert (spent["kind"], spent["takenBy"]) == ("keep_taken_unsure", version(deletion))
    assert "take counts back" in spent["reason"]
    # when recover reads back I (between G's read and D) last
    assert read_back(world, ROOT, insert, insert)["readBack"] == "applied"
    # then the boards are right as they stand, and something tells the operator that D's taking was given back (the
    # operator who took the counts back on the first report, D being the application's delete, must add them again)
    assert world.boards() == {("song1", "2018-01"): 1}
    # (world.reports() receives the queue's messages: the first report, received above, is not among them again)
    later = world.reports()
    assert [(report["takenBy"], report["reason"].startswith("withdrawn")) for report in later] == [
        (version(deletion), True)
    ], (
        f"the report that D spent G's keep ('a deletion ... take counts back by hand') stands, though I proved D was "
        f"the new item's removal: {later}"
    )
