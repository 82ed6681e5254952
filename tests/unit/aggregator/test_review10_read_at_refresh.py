"""A tenth review of one reader per shard (STREAM_READERS=1), fix51: a rebase that finds a ledger item with `ReadAt` in
step with the table's item SETs `ReadAt` to its own read, conditioned on the ledger item as read (`as_read`: Version,
or none and Rebases; Contribution), and leaves a ledger item with a record's Version (no ReadAt) unwritten; the
operator's keep of such a version is bounded by ReadAt give or take the margin (`ReadFrom`, `ReadUntil`). Each test is
named for what should hold. Those marked xfail are findings: the reason says what happens instead, silent or loud. The
rest are angles tried that held: each fails on the defect it tried.

A record's time is its `ApproximateCreationDateTime`, "The approximate date and time when the stream record was
created ... rounded down to the closest second" (StreamRecord); an item's records "appear in the same sequence as the
actual modifications to the item" (S10); the mapping may deliver them late, given up (L4) or out of order (L2)."""

from __future__ import annotations

from leaderboard_core.claims import READ_AT, READ_FROM, claim_key
from leaderboard_tools.reconcile.clock import CLOCK_MARGIN_SECONDS
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import (
    OK,
    ROOT,
    Interleaved,
    LedgerWorld,
    deliver,
    delivered,
    key_of,
    kinds,
    ledger_item,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of, kept_expired, rebase_world
from tests.unit.aggregator.test_one_reader_read_time import keep_items, version

__all__ = ["world"]  # fixtures, used by name

MARGIN = CLOCK_MARGIN_SECONDS
CLAIM = claim_key(key_of("song1", 1))


def deleted_and_written_again(world: LedgerWorld) -> tuple[str, str]:
    """More than the margin on, the key's January item deleted by the application (D) and written again into January
    (N, equal by value to what the ledger counts), neither delivered; then more than the margin passes."""
    world.pass_time(MARGIN + 10)
    deletion = world.delete(ROOT, "song1", 1)
    assert deletion is not None
    again = world.put(ROOT, "song1", 1, "2018-01")
    world.pass_time(MARGIN + 10)
    return deletion, again


def new_item_expired_kept_and_delivered(world: LedgerWorld, deletion: str, again: str) -> None:
    """The new item expires by TTL (X), the repair finds the key gone, the operator names it expired, and the mapping
    then delivers D, N and X."""
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [deletion, again, expiry])) == OK


# ------------------------------------------------------------------------------------------------ angles that held


def test_two_rebases_one_after_the_other_leave_read_at_on_the_later_read(world: LedgerWorld) -> None:
    # given a January download the backfill counted; a rebase reads it in step, then another 500 s later
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.pass_time(500)
    first = world.clock
    assert rebase_world(world).in_step == 1
    assert ledger_item(world, "song1", 1)[READ_AT] == {"N": str(first)}
    world.pass_time(500)
    second = world.clock
    # when the second rebase runs
    assert rebase_world(world).in_step == 1
    # then ReadAt is the second read, nothing else moved
    assert ledger_item(world, "song1", 1)[READ_AT] == {"N": str(second)}
    assert world.boards() == {("song1", "2018-01"): 1}


def test_a_rebased_records_version_in_step_records_its_read_and_a_record_between_fails_that_refresh(
    world: LedgerWorld,
) -> None:
    # given a January download delivered, edited into February with that record not delivered, and rebased to February
    # (Version <insert>~1 with ReadAt); a second rebase 500 s later finds it in step, and between its read and its
    # refresh the mapping delivers the edit
    insert = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [insert])) == OK
    edit = world.put(ROOT, "song1", 1, "2018-02")
    world.pass_time(MARGIN + 10)
    assert rebase_world(world).moved == 1
    assert ledger_item(world, "song1", 1)["Version"] == {"S": version(insert) + "~1"}
    world.pass_time(500)
    refresh = Interleaved(world.dynamodb, "update_item", lambda: deliver(world, ROOT, delivered(world, ROOT, [edit])))
    # when the second rebase runs
    report = rebase_world(world, refresh)
    # then the refresh failed on the Version as read, the key was read again and found in step with the edit's
    # record Version, moved to that read (fix53: <edit>~1 with ReadAt, no count moved): February once
    item = ledger_item(world, "song1", 1)
    assert (report.in_step, report.retries) == (1, 1)
    assert item["Version"] == {"S": version(edit) + "~1"}
    assert item[READ_AT] == {"N": str(world.clock)}
    assert world.boards() == {("song1", "2018-02"): 1}


def test_a_delete_and_rewrite_delivered_between_the_rebases_read_and_its_refresh_leave_a_records_version(
    world: LedgerWorld,
) -> None:
    # given a January download the backfill counted; a rebase reads it in step, and before its refresh the item is
    # deleted and written again into January, both delivered
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.pass_time(500)

    def deleted_and_written_again_delivered() -> None:
        deletion = world.delete(ROOT, "song1", 1)
        again = world.put(ROOT, "song1", 1, "2018-01")
        assert deletion is not None
        assert deliver(world, ROOT, delivered(world, ROOT, [deletion, again])) == OK

    report = rebase_world(world, Interleaved(world.dynamodb, "update_item", deleted_and_written_again_delivered))
    # when the new item expires, the repair finds it gone and the operator names it expired; its expiry comes after
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [expiry])) == OK
    # then the refresh failed (a record moved the key), the key was found at the INSERT's record Version; the expired
    # download counts once, the deleted one nowhere
    assert report.retries == 1
    assert world.boards() == {("song1", "2018-01"): 1}
    assert kinds(world) == []


def test_a_clock_skew_within_the_margin_after_a_refresh_counts_the_expired_download_once_or_reports_it(
    world: LedgerWorld,
) -> None:
    # given DynamoDB's clock the margin less one second behind the stream's; a January download the backfill counted,
    # deleted and written again more than the margin later (neither delivered), a rebase more than the margin later
    # finding the new item in step
    world.date_offset = -(MARGIN - 1)
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    deletion, again = deleted_and_written_again(world)
    assert rebase_world(world).in_step == 1
    # when the new item expires, is named expired, and the mapping delivers D, N and its expiry
    new_item_expired_kept_and_delivered(world, deletion, again)
    # then the expired download counts once (the deleted one nowhere), or the doubt is reported
    assert world.boards() == {("song1", "2018-01"): 1} or kinds(world) != []


def test_a_refresh_of_a_key_named_deleted_then_found_again_leaves_it_counted_once(world: LedgerWorld) -> None:
    # given a January download the backfill counted, deleted and written again (neither delivered); a rebase finds it
    # in step and refreshes ReadAt; the operator, wrongly, names the key deleted while its item is in the table
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    deletion, again = deleted_and_written_again(world)
    assert rebase_world(world).in_step == 1
    report = rebase(world.dynamodb, deployment_of(world), deleted=[CLAIM])
    # when the mapping delivers D and N
    assert deliver(world, ROOT, delivered(world, ROOT, [deletion, again])) == OK
    # then the item in the table is counted once, nothing taken back
    assert report.taken_back == 0
    assert world.boards() == {("song1", "2018-01"): 1}


# ------------------------------------------------------------------------------------------------------------ findings


def test_a_stale_refresh_from_an_earlier_read_does_not_move_read_at_back_past_a_later_rebases_read(
    world: LedgerWorld,
) -> None:
    # given a January download the backfill counted; a rebase reads it in step at t1 and, before its refresh lands,
    # the item is deleted and written again into January (neither delivered) and a second rebase reads the new item
    # at t2 and refreshes ReadAt to t2
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.pass_time(500)
    records: list[str] = []
    reads: list[int] = []

    def second_rebase() -> None:
        records.extend(deleted_and_written_again(world))
        reads.append(world.clock)
        assert rebase_world(world).in_step == 1

    first = rebase_world(world, Interleaved(world.dynamodb, "update_item", second_rebase))
    # when the new item expires, the repair finds it gone, the operator names it expired, and the mapping catches up
    assert first.in_step == 1
    new_item_expired_kept_and_delivered(world, *records)
    # then the expired download counts once (the deleted one nowhere), or the doubt is reported; the keep's window sits
    # on the later read
    assert world.boards() == {("song1", "2018-01"): 1} or kinds(world) != []
    [keep] = keep_items(world)
    assert keep[READ_FROM] == {"N": str(reads[0] - MARGIN)}


def test_a_rebase_that_reads_a_new_item_equal_to_a_records_version_bounds_the_keep_by_that_read(
    world: LedgerWorld,
) -> None:
    # given a January download delivered (a record's Version); deleted and written again into January more than the
    # margin later, neither record delivered; a rebase more than the margin later finds the new item in step
    insert = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [insert])) == OK
    deletion, again = deleted_and_written_again(world)
    assert rebase_world(world).in_step == 1
    # when the new item expires, the repair finds it gone, the operator names it expired, and the mapping catches up
    new_item_expired_kept_and_delivered(world, deletion, again)
    # then the expired download counts once (the deleted one nowhere), or the doubt is reported
    assert world.boards() == {("song1", "2018-01"): 1} or kinds(world) != []


def test_a_deleted_item_rewritten_and_expired_before_any_rebase_read_it_counts_the_expired_download_once(
    world: LedgerWorld,
) -> None:
    # given a January download the backfill counted; deleted and written again into January more than the margin
    # later, neither record delivered, and no rebase reading the new item
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    deletion, again = deleted_and_written_again(world)
    # when the new item expires, the repair finds it gone, the operator names it expired, and the mapping catches up
    new_item_expired_kept_and_delivered(world, deletion, again)
    # then the expired download counts once (the deleted one nowhere), or the doubt is reported
    assert world.boards() == {("song1", "2018-01"): 1} or kinds(world) != []
