"""One reader per shard: the operator's keep of a version the backfill or the rebase wrote from the table's item
(`backfill~<n>`, `<record>~<n>`), bounded by when that item was read (`ReadAt`, DynamoDB's Date header) give or take
the repair's clock margin (`ReadFrom`, `ReadUntil` on the keep). An INSERT of the key created after the read bounds the
keep, one created before it does not (the read item's own, its record still behind), one in between is reported when
an expiry above it takes the keep; a keep written before read times were recorded is bounded by none, as before."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leaderboard_core.bookkeeping import pad_sequence
from leaderboard_core.claims import (
    BASE_CONTRIBUTION,
    CLAIM_KEY,
    EXPIRY_PREFIX,
    READ_AT,
    READ_FROM,
    READ_UNTIL,
    REBASES,
    claim_key,
)
from leaderboard_tools.reconcile.clock import CLOCK_MARGIN_SECONDS
from leaderboard_tools.recover.failure_messages import classify
from leaderboard_tools.recover.ledger_versions import ReadTimeMissing
from leaderboard_tools.recover.rebase import rebase
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
    ledger_item,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of, kept_expired, rebase_world

__all__ = ["world"]  # fixtures, used by name

UNSURE = "keep_taken_unsure"


def version(sequence: str) -> str:
    """A record's version as the ledger names it: its shard and padded sequence number."""
    return f"{ROOT}|{pad_sequence(sequence)}"


def keep_items(world: LedgerWorld) -> list[dict[str, Any]]:
    """The operator's keep items (`expired#<claim key>|<version>|kept`) in the ledger."""
    items = world.dynamodb.scan(TableName=LEDGER_TABLE, ConsistentRead=True)["Items"]
    return [
        item for item in items if item[CLAIM_KEY]["S"].startswith(EXPIRY_PREFIX) and "|kept" in item[CLAIM_KEY]["S"]
    ]


def backfilled_and_kept(world: LedgerWorld, read_time: bool = True) -> None:
    """A download the backfill counted in January (no Version), its expiry by TTL trimmed, kept by the operator."""
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill(read_time=read_time) == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)


def written_again_and_expired(world: LedgerWorld) -> tuple[str, str]:
    """The key written again into January and delivered, then that item expired by TTL and delivered: both records."""
    again = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    assert deliver(world, ROOT, delivered(world, ROOT, [expiry])) == OK
    return again, expiry


def unsure_reports(world: LedgerWorld) -> list[dict[str, Any]]:
    return [report for report in world.reports() if report["kind"] == UNSURE]


# ------------------------------------------------------------------------------------------- INSERTs near the read


def test_an_insert_created_within_the_clock_margin_of_the_read_lets_the_next_expiry_take_the_keep_and_reports_it(
    world: LedgerWorld,
) -> None:
    # given a backfilled download kept expired, and the key written again within the clock margin of the backfill's
    # read: the read item's own INSERT or a new item's, not told apart
    backfilled_and_kept(world)
    # when that INSERT is delivered, and the item's expiry by TTL
    again, expiry = written_again_and_expired(world)
    # then the expiry took the keep (as if the INSERT were the read item's own), and said so, naming what may be lost
    assert world.boards() == {("song1", "2018-01"): 1}
    [report] = unsure_reports(world)
    assert (report["claimKey"], report["entityId"], report["counts"]) == (
        claim_key(key_of("song1", 1)),
        "song1",
        {"2018-01": "1"},
    )
    assert (report["insert"], report["takenBy"]) == (version(again), version(expiry))


def test_an_insert_within_the_clock_margin_delivered_after_the_expiry_that_took_the_keep_reports_it(
    world: LedgerWorld,
) -> None:
    # given a backfilled download kept expired; the key written again within the clock margin of the read and expired
    # by TTL, the batch of both bisected and its second half retried first
    backfilled_and_kept(world)
    again = world.put(ROOT, "song1", 1, "2018-01")
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    # when the expiry is delivered, then the INSERT
    assert deliver(world, ROOT, delivered(world, ROOT, [expiry])) == OK
    assert unsure_reports(world) == []
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # then the expiry took the keep, and the INSERT, once applied, made that a report
    assert world.boards() == {("song1", "2018-01"): 1}
    assert [(report["insert"], report["takenBy"]) for report in unsure_reports(world)] == [
        (version(again), version(expiry))
    ]


def test_an_insert_created_after_the_read_bounds_the_keep_with_no_report(world: LedgerWorld) -> None:
    # given a backfilled download kept expired, and more than the clock margin after the backfill's read
    backfilled_and_kept(world)
    world.pass_time(CLOCK_MARGIN_SECONDS + 1)
    # when the key is written again into January and expires, each delivered
    written_again_and_expired(world)
    # then both expired downloads stay counted, and nothing is reported
    assert world.boards() == {("song1", "2018-01"): 2}
    assert kinds(world) == []


# ------------------------------------------------------------------------------- the read item's own late records


def test_the_read_items_own_late_insert_does_not_bound_the_keep_and_its_expiry_takes_it_once(
    world: LedgerWorld,
) -> None:
    # given a download written into January, its INSERT not yet delivered when, more than the clock margin later, the
    # backfill counts the item; it then expires by TTL, the repair finds it gone and the operator names it expired
    insert = world.put(ROOT, "song1", 1, "2018-01")
    world.pass_time(CLOCK_MARGIN_SECONDS + 1)
    assert world.backfill() == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when the mapping catches up: the item's own INSERT, then its expiry
    assert deliver(world, ROOT, delivered(world, ROOT, [insert])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [expiry])) == OK
    # then the expired download counts once, and nothing is reported
    assert world.boards() == {("song1", "2018-01"): 1}
    assert kinds(world) == []


def test_an_earlier_items_late_remove_created_before_the_rebases_read_does_not_take_the_keep(
    world: LedgerWorld,
) -> None:
    # given a February download delivered, deleted by the application, and the key written again into January, neither
    # record delivered when, more than the clock margin later, the rebase moves the key to the January item; that item
    # then expires by TTL, is found gone and named expired
    first = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    deletion = world.delete(ROOT, "song1", 1)
    assert deletion is not None
    insert = world.put(ROOT, "song1", 1, "2018-01")
    world.pass_time(CLOCK_MARGIN_SECONDS + 1)
    assert rebase_world(world).moved == 1
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when the mapping catches up: the deletion, the January item's INSERT, its expiry
    assert deliver(world, ROOT, delivered(world, ROOT, [deletion, insert, expiry])) == OK
    # then the deleted download counts nowhere and the expired one once: the deletion, written before the read, was
    # not the kept item's removal
    assert world.boards() == {("song1", "2018-01"): 1}
    assert kinds(world) == []


def test_recover_keeps_an_unsure_take_report_for_the_operator_with_what_it_names(world: LedgerWorld) -> None:
    # given the report of an expiry that took a keep after an INSERT within the clock margin of the read
    backfilled_and_kept(world)
    written_again_and_expired(world)
    [report] = unsure_reports(world)
    # when recover reads it from the failure queue
    message = classify({"Body": json.dumps(report), "MessageId": "m", "ReceiptHandle": "r"}, deployment_of(world))
    # then it knows the kind, recounts nothing for it and keeps it, its note naming the key and what may be lost
    assert (message.kind, message.done, message.aggregates) == (UNSURE, False, {})
    assert report["claimKey"] in message.note
    assert "'2018-01': '1'" in message.note


def test_an_earlier_items_deletion_within_the_clock_margin_of_the_read_leaves_the_keep_to_the_read_items_expiry(
    world: LedgerWorld,
) -> None:
    # given a February download delivered, deleted by the application, and the key written again into January, neither
    # record delivered when, within the clock margin, the rebase moves the key to the January item; that item then
    # expires by TTL, is found gone and named expired
    first = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    deletion = world.delete(ROOT, "song1", 1)
    assert deletion is not None
    insert = world.put(ROOT, "song1", 1, "2018-01")
    assert rebase_world(world).moved == 1
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when the mapping catches up: the deletion, the January item's INSERT, its expiry
    assert deliver(world, ROOT, delivered(world, ROOT, [deletion, insert, expiry])) == OK
    # then the deletion did not spend the keep: the expired download counts once, and the expiry's take after an
    # INSERT no clock places is reported
    assert world.boards() == {("song1", "2018-01"): 1}
    assert [(report["insert"], report["takenBy"]) for report in unsure_reports(world)] == [
        (version(insert), version(expiry))
    ]


# ------------------------------------------------------------------------------------------ what the repairs record


def test_the_rebase_records_when_it_read_each_item_and_the_keep_that_read_give_or_take_the_margin(
    world: LedgerWorld,
) -> None:
    # given a February download delivered and edited into January (lost), and a download written before the stream
    first = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.put(ROOT, "song1", 1, "2018-01")
    world.history_before_the_stream("song2", 1, "2018-01")
    # when the rebase moves the one and counts the other, at a time DynamoDB's Date header says; the first then expires
    # and the operator keeps it with a clock margin of 30 s
    world.pass_time(500)
    read = world.clock
    report = rebase_world(world)
    counted = ledger_item(world, "song2", 1)
    world.expire(ROOT, "song1", 1)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim_key(key_of("song1", 1))]
    claim = claim_key(key_of("song1", 1))
    assert rebase(world.dynamodb, deployment_of(world), expired=[claim], clock_margin_seconds=30).kept_expired == 1
    # then each ledger item it wrote from an item records that read, and the keep the read less and plus 30 s
    assert (report.moved, report.counted) == (1, 1)
    assert counted[READ_AT] == {"N": str(read)}
    [keep] = keep_items(world)
    assert (keep[READ_FROM], keep[READ_UNTIL]) == ({"N": str(read - 30)}, {"N": str(read + 30)})
    assert keep[CLAIM_KEY]["S"].endswith("~1|kept")
    # and the key's move to nothing records no read (no item was read)
    assert READ_AT not in ledger_item(world, "song1", 1)


def test_the_world_backfill_records_its_read_and_the_keep_of_its_version_the_margin(world: LedgerWorld) -> None:
    # given a download written before the stream
    world.history_before_the_stream("song1", 1, "2018-01")
    read = world.clock
    # when the backfill counts it, it expires, and the operator keeps it
    assert world.backfill() == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    # then the keep of `backfill~0` carries the backfill's read give or take the default margin
    [keep] = keep_items(world)
    assert keep[CLAIM_KEY]["S"].endswith("|backfill~0|kept")
    margin = CLOCK_MARGIN_SECONDS
    assert (keep[READ_FROM], keep[READ_UNTIL]) == ({"N": str(read - margin)}, {"N": str(read + margin)})


def test_a_rebase_whose_read_answers_without_a_date_header_stops_before_moving_that_key(world: LedgerWorld) -> None:
    # given a download delivered in February and edited into January (lost), and DynamoDB's GetItem answers without a
    # Date header (a proxy dropping it)
    first = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK

    def without_date(parsed: dict[str, Any], **_: Any) -> None:
        parsed["ResponseMetadata"]["HTTPHeaders"].pop("date", None)

    world.put(ROOT, "song1", 1, "2018-01")
    world.dynamodb.meta.events.register("after-call.dynamodb.GetItem", without_date)
    # when the rebase runs
    with pytest.raises(ReadTimeMissing, match="no Date header"):
        rebase_world(world)
    # then the key was not moved: February still counts it
    assert world.boards() == {("song1", "2018-02"): 1}


# ------------------------------------------------------------------------------------ before this, and the limit


def test_a_keep_of_a_version_written_before_read_times_were_recorded_is_bounded_by_no_insert_as_before(
    world: LedgerWorld,
) -> None:
    # given a download a backfill counted before it recorded read times, its expiry trimmed, kept by the operator
    backfilled_and_kept(world, read_time=False)
    # when, long after, the key is written again into January and expires, each delivered
    world.pass_time(10 * CLOCK_MARGIN_SECONDS)
    written_again_and_expired(world)
    # then as before this change: the keep has no read window, the next item's expiry takes it, and the kept download
    # is lost to January (the documented gap of keeps written before read times), with no report
    [keep] = keep_items(world)
    assert READ_FROM not in keep
    assert READ_UNTIL not in keep
    assert world.boards() == {("song1", "2018-01"): 1}
    assert kinds(world) == []


def test_a_clock_skew_past_the_margin_takes_the_read_items_own_insert_for_a_bound_and_counts_it_twice(
    world: LedgerWorld,
) -> None:
    # given DynamoDB's clock (its Date header) behind the stream's creation times by more than the clock margin; a
    # download written into January, its INSERT not delivered when the backfill counts the item; it then expires, is
    # found gone and named expired
    world.date_offset = -(CLOCK_MARGIN_SECONDS + 2)
    insert = world.put(ROOT, "song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when the mapping catches up: the item's own INSERT, then its expiry
    assert deliver(world, ROOT, delivered(world, ROOT, [insert])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [expiry])) == OK
    # then the documented limit: the INSERT looks written after the read, bounds the keep, and the item's own expiry
    # counts beside it: January 2 for one expired download (a margin smaller than the true skew counts twice)
    assert world.boards() == {("song1", "2018-01"): 2}


# ------------------------------------------------------------------------------------ a key in step, read again


def test_a_rebase_that_finds_a_read_version_in_step_records_its_own_read_and_moves_nothing(world: LedgerWorld) -> None:
    # given a download the backfill counted (ReadAt its read), no record of it delivered
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    before = ledger_item(world, "song1", 1)
    # when a rebase reads it again 500 s later
    world.pass_time(500)
    read = world.clock
    report = rebase_world(world)
    # then the key is in step, its ledger item read at the rebase's read and otherwise as it was: no Version, no
    # Rebases, the same Contribution; the board as it was
    after = ledger_item(world, "song1", 1)
    assert (report.in_step, report.moved, report.retries) == (1, 0, 0)
    assert int(before[READ_AT]["N"]) < read
    assert after == {**before, READ_AT: {"N": str(read)}}
    assert REBASES not in after
    assert "Version" not in after
    assert world.boards() == {("song1", "2018-01"): 1}


def test_a_record_applied_between_the_rebases_read_and_its_read_time_refresh_fails_the_refresh(
    world: LedgerWorld,
) -> None:
    # given a download the backfill counted whose INSERT is not delivered; a rebase reads it again 500 s later and
    # finds it in step, and the mapping delivers that INSERT between the rebase's read and its refresh of ReadAt
    insert = world.put(ROOT, "song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.pass_time(500)

    def mapping_delivers() -> None:
        assert deliver(world, ROOT, delivered(world, ROOT, [insert])) == OK

    refresh = Interleaved(world.dynamodb, "update_item", mapping_delivers)
    # when the rebase runs
    report = rebase_world(world, refresh)
    # then the refresh failed its condition (the key moved by a record meanwhile), the key was read again and found in
    # step with the stream's version, and moved to that read (<insert>~1 with ReadAt), no count moved
    item = ledger_item(world, "song1", 1)
    assert refresh.calls == 1
    assert (report.in_step, report.retries) == (1, 1)
    assert item["Version"] == {"S": version(insert) + "~1"}
    assert item[READ_AT] == {"N": str(world.clock)}
    assert item[BASE_CONTRIBUTION] == {"M": {"2018-01": {"N": "1"}}}
    assert world.boards() == {("song1", "2018-01"): 1}


def test_a_key_in_step_whose_ledger_item_has_a_records_version_moves_to_the_rebases_read_and_no_count(
    world: LedgerWorld,
) -> None:
    # given a download whose INSERT the mapping delivered (a record's Version, no read time)
    insert = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [insert])) == OK
    before = ledger_item(world, "song1", 1)
    assert READ_AT not in before
    world.pass_time(500)
    # when a rebase reads it, through a client that counts its single writes and transactions
    updates = Interleaved(world.dynamodb, "update_item")
    transactions = Interleaved(updates, "transact_write_items")
    report = rebase_world(world, transactions)
    # then it is in step, and one transaction moved its ledger item to the rebase's read (a version read from the
    # table: <insert>~1 with ReadAt), the same Contribution, the board as it was
    assert (report.in_step, report.moved, report.retries) == (1, 0, 0)
    assert (updates.calls, transactions.calls) == (0, 1)
    assert ledger_item(world, "song1", 1) == {
        **before,
        "Version": {"S": version(insert) + "~1"},
        READ_AT: {"N": str(world.clock)},
    }
    assert world.boards() == {("song1", "2018-01"): 1}


def test_a_record_applied_between_the_rebases_read_and_its_move_of_a_records_version_to_its_read_fails_that_move(
    world: LedgerWorld,
) -> None:
    # given a download whose INSERT the mapping delivered, written again with the same content (a MODIFY, not
    # delivered); a rebase 500 s later finds it in step, and the mapping delivers the MODIFY between its read and its
    # move of the ledger item to that read
    insert = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [insert])) == OK
    modify = world.put(ROOT, "song1", 1, "2018-01")
    world.pass_time(500)
    move = Interleaved(
        world.dynamodb, "transact_write_items", lambda: deliver(world, ROOT, delivered(world, ROOT, [modify]))
    )
    # when the rebase runs
    report = rebase_world(world, move)
    # then the move failed on the Version as read, the key was read again, found in step at the MODIFY's Version and
    # moved to that read; the board as it was
    item = ledger_item(world, "song1", 1)
    assert (report.in_step, report.moved, report.retries) == (1, 0, 1)
    assert move.calls == 2
    assert item["Version"] == {"S": version(modify) + "~1"}
    assert item[READ_AT] == {"N": str(world.clock)}
    assert world.boards() == {("song1", "2018-01"): 1}


def test_a_refresh_refused_because_another_rebase_refreshed_first_reads_the_key_again_and_refreshes_to_that_read(
    world: LedgerWorld,
) -> None:
    # given a download the backfill counted; a rebase reads it in step 500 s later, and before its refresh lands another
    # rebase, 100 s on, reads it in step and refreshes ReadAt to its read; then 100 s more pass
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.pass_time(500)
    reads: list[int] = []

    def another_rebase() -> None:
        world.pass_time(100)
        reads.append(world.clock)
        assert rebase_world(world).in_step == 1
        assert ledger_item(world, "song1", 1)[READ_AT] == {"N": str(reads[0])}
        world.pass_time(100)

    refresh = Interleaved(world.dynamodb, "update_item", another_rebase)
    # when the first rebase's refresh lands
    report = rebase_world(world, refresh)
    # then it was refused (ReadAt no longer as read), the key was read again and ReadAt moved on to that later read
    assert (report.in_step, report.retries) == (1, 1)
    assert refresh.calls == 2
    assert ledger_item(world, "song1", 1)[READ_AT] == {"N": str(reads[0] + 100)}
    assert world.boards() == {("song1", "2018-01"): 1}


def test_a_rebase_whose_read_time_is_not_past_read_at_as_read_leaves_read_at_and_writes_nothing(
    world: LedgerWorld,
) -> None:
    # given a download the backfill counted, found in step by a rebase 500 s later (ReadAt its read); then DynamoDB's
    # Date header 200 s behind, 100 s on
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.pass_time(500)
    first = world.clock
    assert rebase_world(world).in_step == 1
    before = ledger_item(world, "song1", 1)
    assert before[READ_AT] == {"N": str(first)}
    world.date_offset = -200
    world.pass_time(100)
    # when another rebase reads it, through a client that counts its single writes
    updates = Interleaved(world.dynamodb, "update_item")
    report = rebase_world(world, updates)
    # then it is in step, ReadAt stays on the later time (it only moves forward), and nothing was written
    assert (report.in_step, report.retries) == (1, 0)
    assert updates.calls == 0
    assert ledger_item(world, "song1", 1) == before
