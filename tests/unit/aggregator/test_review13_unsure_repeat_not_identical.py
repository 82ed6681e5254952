"""review13: fix56 reads a `keep_taken_unsure` report as a repeat only when its body is identical (`mark_repeated`,
and the aggregator's once-per-apply `sent`). One taking of a keep can be reported twice with different bodies: the
report names the lowest INSERT that may bound the keep (`insert`, the keep's `KeptMaybeUntil` as that batch leaves it),
and a given-up batch read back later, with a lower such INSERT, lowers it and reports the same taking again. Each
report says "add counts back to entityId's aggregates by hand": the operator, acting on both as written, adds the
expired download back twice.

"If records are processed more than once, they might be processed out of order" (Lambda, DynamoDB event source); the
mapping gives up a batch and goes on ("Discard records after the specified number of retries", MaximumRetryAttempts),
recover reads it back afterwards; an item's records "appear in the same sequence as the actual modifications to the
item" (DynamoDB Streams), so the read-back INSERT is the lower."""

from __future__ import annotations

from leaderboard_tools.recover.failure_messages import KEEP_TAKEN_UNSURE, Message, mark_repeated
from tests.unit.aggregator.ledger_on_moto import OK, ROOT, LedgerWorld, deliver, delivered, read_back, world
from tests.unit.aggregator.rebase_on_moto import kept_expired, rebase_world
from tests.unit.aggregator.test_one_reader_read_time import unsure_reports, version

__all__ = ["world"]  # fixtures, used by name


def test_one_taking_of_a_keep_is_one_report_to_act_on_when_a_lower_insert_within_the_margin_is_read_back_later(
    world: LedgerWorld,
) -> None:
    # given a February item written and deleted by the application, then a January item, all within the margin before
    # the rebase's read; the January item expires, is found gone and named expired (as in review8's test of a key
    # rewritten several times within the margin, which delivers all four records at once: one report)
    first = world.put(ROOT, "song1", 1, "2018-02")
    deletion = world.delete(ROOT, "song1", 1)
    assert deletion is not None
    insert = world.put(ROOT, "song1", 1, "2018-01")
    assert rebase_world(world).counted == 1
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when the mapping gives up the batch of the first two records and delivers the next (the January INSERT and its
    # expiry), and recover then reads the given-up batch back
    assert deliver(world, ROOT, delivered(world, ROOT, [insert, expiry])) == OK
    assert read_back(world, ROOT, first, deletion)["readBack"] == "applied"
    # then the expired download counts once, and the one taking is one fact for the operator to act on (whichever
    # INSERT it names), not two
    assert world.boards() == {("song1", "2018-01"): 1}
    facts = {(report["takenBy"], report["insert"]) for report in unsure_reports(world)}
    assert len(facts) == 1, f"one taking by {version(expiry)} reported as {len(facts)} facts: {sorted(facts)}"


def test_a_batch_retried_whole_after_a_crash_reports_its_unsure_take_identically_and_recover_keeps_one(
    world: LedgerWorld,
) -> None:
    # given a backfilled download kept expired, the key written again within the margin and expired
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    again = world.put(ROOT, "song1", 1, "2018-01")
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    # when the batch is delivered, and retried whole (Lambda "process each event at least once")
    assert deliver(world, ROOT, delivered(world, ROOT, [again, expiry])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [again, expiry])) == OK
    # then every report of the take is the same body, and recover keeps exactly one of them for the operator
    reports = unsure_reports(world)
    assert reports
    messages = [Message(f"m{n}", f"r{n}", report, kind=KEEP_TAKEN_UNSURE) for n, report in enumerate(reports)]
    mark_repeated(messages)
    assert [message.message_id for message in messages if not message.done] == ["m0"]
    assert world.boards() == {("song1", "2018-01"): 1}
