"""An eighth review of one reader per shard (STREAM_READERS=1): the read-time bound of an operator's keep of a version
read from the table (`ReadAt` on the ledger item, `ReadFrom`/`ReadUntil` on the keep, `KeptMaybeUntil`, the
`keep_taken_unsure` report). Each test is named for what should hold. Those marked xfail are findings: the reason says
what happens instead, silent or loud. The rest are angles tried that held: each fails on the defect it tried."""

from __future__ import annotations

from typing import Any

from expiry_keeps import ExpiryKeeps
from leaderboard_core.claims import READ_FROM, READ_UNTIL, claim_key
from leaderboard_tools.reconcile.clock import CLOCK_MARGIN_SECONDS
from tests.unit.aggregator.ledger_on_moto import (
    OK,
    ROOT,
    Interleaved,
    LedgerWorld,
    deliver,
    delivered,
    key_of,
    kinds,
    read_back,
    world,
)
from tests.unit.aggregator.rebase_on_moto import kept_expired, rebase_world
from tests.unit.aggregator.test_one_reader_read_time import UNSURE, keep_items, unsure_reports, version

__all__ = ["world"]  # fixtures, used by name

MARGIN = CLOCK_MARGIN_SECONDS


def in_milliseconds(world: LedgerWorld, sequence: str) -> dict[str, Any]:
    """The record at `sequence` as a Lambda event carries it from a table whose stream records carry
    ApproximateCreationDateTimePrecision (set for its Kinesis destination): the creation time in epoch milliseconds."""
    [record] = delivered(world, ROOT, [sequence])
    stream = record["dynamodb"]
    stream["ApproximateCreationDateTime"] = int(stream["ApproximateCreationDateTime"] * 1000)
    stream["ApproximateCreationDateTimePrecision"] = "MILLISECOND"
    return record


# ------------------------------------------------------------------------------------------------------------ findings


def test_a_creation_time_in_milliseconds_is_not_read_as_seconds_by_the_read_time_bound(world: LedgerWorld) -> None:
    # given a January download whose INSERT is not delivered when, more than the margin later, the backfill counts it;
    # it expires, the repair finds it gone and the operator names it expired
    insert = world.put(ROOT, "song1", 1, "2018-01")
    world.pass_time(MARGIN + 1)
    assert world.backfill() == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when the mapping delivers the item's own INSERT and its expiry, their creation times in milliseconds
    assert deliver(world, ROOT, [in_milliseconds(world, insert)]) == OK
    assert deliver(world, ROOT, [in_milliseconds(world, expiry)]) == OK
    # then the expired download counts once, or the doubt is reported
    assert world.boards() == {("song1", "2018-01"): 1} or kinds(world) != []


def test_two_keeps_of_one_key_each_taken_by_its_own_late_expiry_count_each_expired_download_once(
    world: LedgerWorld,
) -> None:
    # given a January download the backfill counted, expired by TTL (its record behind) and kept by the operator; the
    # key written again into February, counted by a rebase more than the margin later, expired and kept again
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    first_expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    world.pass_time(10)
    again = world.put(ROOT, "song1", 1, "2018-02")
    world.pass_time(MARGIN + 10)
    assert rebase_world(world).moved == 1
    world.expire(ROOT, "song1", 1)
    second_expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when the mapping catches up: the first expiry, the February INSERT, its expiry
    assert deliver(world, ROOT, delivered(world, ROOT, [first_expiry, again, second_expiry])) == OK
    # then each expired download counts once where it was, or the doubt is reported
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1} or kinds(world) != []


def no_version_order(version: str, current: str | None, stream_arn: str) -> bool:
    """A version order never to be asked: a backfill's kept labels are ordered without one."""
    raise NotImplementedError


def test_keeps_of_backfilled_versions_are_ordered_by_their_rebases_as_numbers_and_before_every_records() -> None:
    # given kept labels of one key: the backfill's after two and after ten rebases, and a record's
    order = ExpiryKeeps(client=None, ledger_table="", after=no_version_order).kept_order
    # when they are compared, then ten rebases come after two (not as text), and the record's version after both
    assert order("backfill~10", "backfill~2", "arn") == 1
    assert order("backfill~2", "backfill~10", "arn") == -1
    assert order("backfill~2", "backfill~2", "arn") == 0
    assert order("shard-1|0001", "backfill~10", "arn") == 1
    assert order("backfill~10", "shard-1|0001", "arn") == -1


def test_a_rebase_that_reads_a_new_item_equal_to_the_ledger_bounds_the_keep_by_that_read(world: LedgerWorld) -> None:
    # given a January download the backfill counted; deleted by the application and written again into January (equal
    # by value) more than the margin later, neither record delivered; a rebase more than the margin later reads the new
    # item and finds the ledger in step
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.pass_time(MARGIN + 10)
    deletion = world.delete(ROOT, "song1", 1)
    assert deletion is not None
    again = world.put(ROOT, "song1", 1, "2018-01")
    world.pass_time(MARGIN + 10)
    read = world.clock
    assert rebase_world(world).in_step == 1
    # when the new item expires, the repair finds it gone, the operator names it expired, and the mapping catches up
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [deletion, again, expiry])) == OK
    # then the expired download counts once (the deleted one nowhere), or the doubt is reported; the ledger said when
    # the item it counted was last read (the rebase's read), which the keep's window sits on
    assert world.boards() == {("song1", "2018-01"): 1} or kinds(world) != []
    [keep] = keep_items(world)
    assert (keep[READ_FROM], keep[READ_UNTIL]) == ({"N": str(read - MARGIN)}, {"N": str(read + MARGIN)})


# ------------------------------------------------------------------------------------------------ angles that held


def test_an_insert_created_exactly_at_read_from_is_the_read_items_own_and_its_expiry_takes_the_keep_reported(
    world: LedgerWorld,
) -> None:
    # given a January download whose INSERT is created exactly the margin before the backfill's read (ReadFrom, both
    # whole seconds), not delivered then; it expires, is found gone and named expired
    insert = world.put(ROOT, "song1", 1, "2018-01")
    world.pass_time(MARGIN - 1)
    assert world.backfill() == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when the mapping delivers the INSERT and the expiry
    assert deliver(world, ROOT, delivered(world, ROOT, [insert])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [expiry])) == OK
    # then the INSERT at ReadFrom is within the band (inclusive): the expiry takes the keep, once, and says so
    assert world.boards() == {("song1", "2018-01"): 1}
    assert [(report["insert"], report["takenBy"]) for report in unsure_reports(world)] == [
        (version(insert), version(expiry))
    ]


def test_a_new_items_insert_created_exactly_at_read_until_is_not_taken_for_a_bound_silently(world: LedgerWorld) -> None:
    # given a backfilled January download, expired by TTL with its record trimmed (never delivered), kept; the key
    # written again exactly the margin after the backfill's read (ReadUntil), and that item expires
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    world.pass_time(MARGIN - 1)  # the expiry's record took a second
    again = world.put(ROOT, "song1", 1, "2018-01")
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    # when the new item's INSERT and expiry are delivered
    assert deliver(world, ROOT, delivered(world, ROOT, [again, expiry])) == OK
    # then the new item's expiry took the keep (the kept one is lost to January) and that is reported, not silent
    assert [(report["insert"], report["takenBy"]) for report in unsure_reports(world)] == [
        (version(again), version(expiry))
    ]


def test_an_earlier_items_expiry_created_before_the_read_freezes_its_own_download_and_leaves_the_keep(
    world: LedgerWorld,
) -> None:
    # given a February download delivered and expired by TTL, the key written again into January, neither record
    # delivered when, more than the margin later, the rebase moves the key to January; that item expires, is kept
    first = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    earlier = world.last(ROOT)
    insert = world.put(ROOT, "song1", 1, "2018-01")
    world.pass_time(MARGIN + 1)
    assert rebase_world(world).moved == 1
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when the mapping catches up: the earlier expiry, the January INSERT, its expiry
    assert deliver(world, ROOT, delivered(world, ROOT, [earlier, insert, expiry])) == OK
    # then each expired download counts once where it was, with no report
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}
    assert kinds(world) == []


def test_a_key_rewritten_several_times_within_the_margin_counts_the_read_items_expiry_once_and_reports_the_doubt(
    world: LedgerWorld,
) -> None:
    # given a February item written and deleted by the application, then a January item, all within the margin before
    # the rebase's read, none delivered; the January item expires, is found gone and named expired
    first = world.put(ROOT, "song1", 1, "2018-02")
    deletion = world.delete(ROOT, "song1", 1)
    assert deletion is not None
    insert = world.put(ROOT, "song1", 1, "2018-01")
    assert rebase_world(world).counted == 1
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when the mapping catches up with all four records, and retries them
    assert deliver(world, ROOT, delivered(world, ROOT, [first, deletion, insert, expiry])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [first, deletion, insert, expiry])) == OK
    # then the deleted download counts nowhere, the expired one once, and the expiry's take is reported
    assert world.boards() == {("song1", "2018-01"): 1}
    assert {(report["insert"], report["takenBy"]) for report in unsure_reports(world)} == {
        (version(first), version(expiry))
    }


def test_a_later_items_deletion_within_the_margin_delivered_before_the_read_items_expiry_leaves_it_the_keep(
    world: LedgerWorld,
) -> None:
    # given a backfilled January download that expires within the margin of the read, the key written again and deleted
    # by the application, all within the margin; the repair finds the key gone and the operator names it expired
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    again = world.put(ROOT, "song1", 1, "2018-01")
    deletion = world.delete(ROOT, "song1", 1)
    assert deletion is not None
    kept_expired(world, "song1", 1)
    # when the deletion is delivered first (a later batch read before a given-up one), then the expiry, then the INSERT
    assert deliver(world, ROOT, delivered(world, ROOT, [deletion])) == OK
    assert read_back(world, ROOT, expiry, again)["readBack"] == "applied"
    # then the expired download counts once, the deleted one nowhere, and nothing is in doubt
    assert world.boards() == {("song1", "2018-01"): 1}
    assert kinds(world) == []


def test_a_read_back_insert_created_after_the_read_bounds_the_keep_from_its_datetime_creation_time(
    world: LedgerWorld,
) -> None:
    # given a backfilled January download kept expired (its expiry trimmed), and more than the margin later the key
    # written again into January and expired, in a batch the mapping gave up
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    world.pass_time(MARGIN + 1)
    again = world.put(ROOT, "song1", 1, "2018-01")
    world.expire(ROOT, "song1", 1)
    # when recover reads the range back (GetRecords: creation times as a client parses them, datetimes)
    assert read_back(world, ROOT, again, world.last(ROOT))["readBack"] == "applied"
    # then the INSERT bounds the keep: both expired downloads count, nothing reported
    assert world.boards() == {("song1", "2018-01"): 2}
    assert kinds(world) == []


def test_an_unsure_take_is_reported_again_on_each_retry_of_its_batch_never_lost(world: LedgerWorld) -> None:
    # given a backfilled download kept expired, and the key written again within the margin and expired
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    again = world.put(ROOT, "song1", 1, "2018-01")
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    # when the batch is delivered, and retried whole
    assert deliver(world, ROOT, delivered(world, ROOT, [again, expiry])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [again, expiry])) == OK
    # then the count is moved once, and the report is out (again on the retry: a duplicate, never nothing)
    assert world.boards() == {("song1", "2018-01"): 1}
    reports = unsure_reports(world)
    assert reports
    assert {(report["kind"], report["claimKey"]) for report in reports} == {(UNSURE, claim_key(key_of("song1", 1)))}


def test_a_rebase_racing_the_mapping_over_the_read_items_own_insert_leaves_the_stream_version_and_no_read_time(
    world: LedgerWorld,
) -> None:
    # given a January download whose INSERT is not delivered when the rebase reads its item; the mapping delivers that
    # INSERT between the rebase's read and its transaction
    insert = world.put(ROOT, "song1", 1, "2018-01")

    def mapping_delivers() -> None:
        assert deliver(world, ROOT, delivered(world, ROOT, [insert])) == OK

    report = rebase_world(world, Interleaved(world.dynamodb, "transact_write_items", mapping_delivers))
    # when the item expires, its expiry trimmed, the repair finds it gone and the operator names it expired; then the
    # key is written again more than the margin later and that item expires, both delivered
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    world.pass_time(MARGIN + 1)
    again = world.put(ROOT, "song1", 1, "2018-01")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [again, world.last(ROOT)])) == OK
    # then the rebase's transaction failed its condition and found the key in step (no read time on the stream's
    # version), the keep is bounded by the next INSERT as a record's version is: both expired downloads count once each
    assert (report.counted, report.in_step) == (0, 1)
    assert world.boards() == {("song1", "2018-01"): 2}
    assert kinds(world) == []
