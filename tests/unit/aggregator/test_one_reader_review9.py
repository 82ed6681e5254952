"""A ninth review of one reader per shard (STREAM_READERS=1): fix50's gone versions' expiries (`GoneAt`, `Follows`,
`Answers`, followed_expiries.py), the keeps tried latest first (`kept_by_operator`, `kept_order`) and creation times in
the units their record names (`creation_second`). Each test is named for what should hold. Those marked xfail are
findings: the reason says what happens instead, silent or loud. The rest are angles tried that held: each fails on the
defect it tried."""

from __future__ import annotations

import datetime

import pytest
from botocore.exceptions import ClientError

from download_records import creation_second
from leaderboard_core.claims import claim_key
from leaderboard_tools.reconcile.clock import CLOCK_MARGIN_SECONDS
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import (
    LEDGER_TABLE,
    OK,
    ROOT,
    Interleaved,
    LedgerWorld,
    deliver,
    delivered,
    fails_at,
    in_index,
    key_of,
    kinds,
    ledger_client,
    read_back,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of, kept_expired, rebase_world, write_items

__all__ = ["world"]  # fixtures, used by name

MARGIN = CLOCK_MARGIN_SECONDS
DAY = 24 * 3600
"""DynamoDB Streams' retention: "Stream records whose age exceeds this limit are subject to removal" (S5)."""


def named_expired(world: LedgerWorld, song: str, number: int) -> tuple[int, bool]:
    """The operator names the key expired (`reconcile --repair --expired-keys`): what the run kept, and whether it left
    anything for the operator (gone, unplaced)."""
    write_items(world)
    report = rebase(world.dynamodb, deployment_of(world), expired=[claim_key(key_of(song, number))])
    return report.kept_expired, report.differences_remain


def gone_then_written_deleted_written_and_expired(world: LedgerWorld, expired: bool) -> tuple[str, str]:
    """A February download delivered, its expiry by TTL trimmed during a pause past the retention, the repair reporting
    the key gone; the key then written again into February (A1), A1 removed (deleted by the application, or expired
    by TTL), written again into February (A2), all in a range the mapping gave up; A2's expiry delivered (it says it
    follows the gone version). Returns A1's INSERT and its removal."""
    february = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [february])) == OK
    world.expire(ROOT, "song1", 1)
    world.clock += DAY + 3600
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim_key(key_of("song1", 1))]
    first = world.put(ROOT, "song1", 1, "2018-02")
    if expired:
        world.expire(ROOT, "song1", 1)
        removal = world.last(ROOT)
    else:
        removal = world.delete(ROOT, "song1", 1)
        assert removal is not None
    world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert "records_trimmed" in kinds(world)
    return first, removal


# ------------------------------------------------------------------------------------------------------------ findings
# (the two below were strict xfails, silent losses; fix52 fixed them: a REMOVE between records itself, RemovedBetween)


def test_a_delete_between_read_back_before_the_insert_before_it_keeps_the_answered_gone_version(
    world: LedgerWorld,
) -> None:
    # given a gone February version, the key written again (A1), deleted, written again and expired, its expiry
    # delivered; the operator names the key expired (the expiry taken for the gone version's own)
    first, deletion = gone_then_written_deleted_written_and_expired(world, expired=False)
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads the given-up ranges back out of order: the delete first, then A1's INSERT
    assert read_back(world, ROOT, deletion, deletion)["readBack"] == "applied"
    assert read_back(world, ROOT, first, first)["readBack"] == "applied"
    # then both expired downloads stay counted in February (A1, deleted, nowhere), or the doubt is reported
    assert world.boards() == {("song1", "2018-02"): 2} or kinds(world) != []


# ------------------------------------------------------------------------------------------------ angles that held


def test_a_delete_between_read_back_after_the_insert_before_it_keeps_the_answered_gone_version(
    world: LedgerWorld,
) -> None:
    # given a gone February version, the key written again (A1), deleted, written again and expired, its expiry
    # delivered; the operator names the key expired
    first, deletion = gone_then_written_deleted_written_and_expired(world, expired=False)
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads the given-up range back in order, twice
    answers = [read_back(world, ROOT, first, deletion)["readBack"] for _ in range(2)]
    # then both expired downloads count in February, each once (A1, deleted, nowhere)
    assert answers == ["applied", "applied"]
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


def test_a_creation_time_is_read_in_the_units_its_record_names() -> None:
    # given one instant as seconds, milliseconds, microseconds and a parsed datetime, and in units no record names
    second = 1_517_443_200
    # when each is read, then each is that second; unnamed units or a number too large to be seconds are unknown
    assert creation_second({"ApproximateCreationDateTime": second + 0.9}) == second
    milliseconds = {
        "ApproximateCreationDateTime": second * 1000 + 999,
        "ApproximateCreationDateTimePrecision": "MILLISECOND",
    }
    assert creation_second(milliseconds) == second
    micro = {
        "ApproximateCreationDateTime": second * 1_000_000 + 1,
        "ApproximateCreationDateTimePrecision": "MICROSECOND",
    }
    assert creation_second(micro) == second
    parsed = datetime.datetime.fromtimestamp(second, datetime.UTC)
    assert (
        creation_second({"ApproximateCreationDateTime": parsed, "ApproximateCreationDateTimePrecision": "MILLISECOND"})
        == second
    )
    assert creation_second({"ApproximateCreationDateTime": second * 1000}) is None
    assert (
        creation_second({"ApproximateCreationDateTime": second, "ApproximateCreationDateTimePrecision": "NANOSECOND"})
        is None
    )
    assert creation_second({"ApproximateCreationDateTime": True}) is None


def test_an_expiry_between_read_back_before_the_insert_before_it_keeps_the_answered_gone_version(
    world: LedgerWorld,
) -> None:
    # given a gone February version, the key written again (A1), expired, written again and expired, the last expiry
    # delivered; the operator names the key expired
    first, expiry = gone_then_written_deleted_written_and_expired(world, expired=True)
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads the given-up ranges back out of order: A1's expiry first, then A1's INSERT
    assert read_back(world, ROOT, expiry, expiry)["readBack"] == "applied"
    assert read_back(world, ROOT, first, first)["readBack"] == "applied"
    # then the three expired downloads count in February, each once, or the doubt is reported
    assert world.boards() == {("song1", "2018-02"): 3} or kinds(world) != []


def test_a_delete_between_read_back_out_of_order_before_the_operator_answers_is_reported_not_guessed(
    world: LedgerWorld,
) -> None:
    # given a gone February version, the key written again (A1), deleted, written again and expired, its expiry
    # delivered; recover reads the given-up ranges back out of order before the operator answers
    first, deletion = gone_then_written_deleted_written_and_expired(world, expired=False)
    assert read_back(world, ROOT, deletion, deletion)["readBack"] == "applied"
    assert read_back(world, ROOT, first, first)["readBack"] == "applied"
    # when the operator names the key expired
    kept, remain = named_expired(world, "song1", 1)
    # then the gone version is kept (February 2), or left to the operator, loudly: never lost in silence
    assert (kept, world.boards()) == (1, {("song1", "2018-02"): 2}) or remain


def test_a_later_items_expiry_created_before_a_keeps_read_takes_the_earlier_keep_only_until_its_insert_is_read_back(
    world: LedgerWorld,
) -> None:
    # given a January download the backfill counted, expired (its record behind) and kept by the operator; the key
    # written into March and expired, then written into February, counted by a rebase more than the margin later,
    # expired and kept again
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.pass_time(MARGIN + 10)
    world.expire(ROOT, "song1", 1)
    january_expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    world.pass_time(10)
    march = world.put(ROOT, "song1", 1, "2018-03")
    world.pass_time(10)
    world.expire(ROOT, "song1", 1)
    march_expiry = world.last(ROOT)
    world.pass_time(10)
    february = world.put(ROOT, "song1", 1, "2018-02")
    world.pass_time(MARGIN + 10)
    assert rebase_world(world).moved == 1
    world.expire(ROOT, "song1", 1)
    february_expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when the mapping delivers March's expiry first (created before the February keep's read: the fallback tries
    # the January keep, unbounded yet), recover reads January's expiry and March's INSERT back, and the rest comes
    assert deliver(world, ROOT, delivered(world, ROOT, [march_expiry])) == OK
    assert read_back(world, ROOT, january_expiry, march)["readBack"] == "applied"
    assert deliver(world, ROOT, delivered(world, ROOT, [february, february_expiry])) == OK
    # then each expired download counts once where it was
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-03"): 1, ("song1", "2018-02"): 1}


def test_a_later_items_expiry_that_took_the_earlier_keep_gives_it_back_when_its_insert_is_read_back(
    world: LedgerWorld,
) -> None:
    # given a January download the backfill counted, expired (its record to be trimmed) and kept by the operator; the
    # key written into March and expired, then written into February, counted by a rebase more than the margin
    # later, expired and kept again
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.pass_time(MARGIN + 10)
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    world.pass_time(10)
    march = world.put(ROOT, "song1", 1, "2018-03")
    world.pass_time(10)
    world.expire(ROOT, "song1", 1)
    march_expiry = world.last(ROOT)
    world.pass_time(10)
    february = world.put(ROOT, "song1", 1, "2018-02")
    world.pass_time(MARGIN + 10)
    assert rebase_world(world).moved == 1
    world.expire(ROOT, "song1", 1)
    february_expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when the mapping delivers March's expiry first, recover reads March's INSERT back (January's expiry trimmed,
    # never read), and the rest comes
    assert deliver(world, ROOT, delivered(world, ROOT, [march_expiry])) == OK
    assert read_back(world, ROOT, march, march)["readBack"] == "applied"
    assert deliver(world, ROOT, delivered(world, ROOT, [february, february_expiry])) == OK
    # then the March INSERT bounds the January keep below the expiry that took it, which gives it back (retake):
    # each expired download counts once where it was
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-03"): 1, ("song1", "2018-02"): 1}


def test_an_expiry_following_a_gone_version_with_other_content_is_not_taken_for_its_removal(
    world: LedgerWorld,
) -> None:
    # given a February download delivered, its expiry trimmed, the repair reporting the key gone; the key written
    # again into March in a range the mapping gave up, and that item's expiry delivered (it follows the gone version)
    february = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [february])) == OK
    world.expire(ROOT, "song1", 1)
    world.clock += DAY + 3600
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim_key(key_of("song1", 1))]
    march = world.put(ROOT, "song1", 1, "2018-03")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert "records_trimmed" in kinds(world)
    # when the operator names the key expired, and recover reads the March write back
    kept, remain = named_expired(world, "song1", 1)
    assert read_back(world, ROOT, march, march)["readBack"] == "applied"
    # then February is kept (never March twice), or left to the operator loudly
    assert world.boards().get(("song1", "2018-03")) == 1
    assert (kept, world.boards()) == (1, {("song1", "2018-02"): 1, ("song1", "2018-03"): 1}) or remain


def test_an_answered_expiry_delivered_again_between_two_read_backs_keeps_the_gone_version_once(
    world: LedgerWorld,
) -> None:
    # given a gone February version, the key written again (A1), deleted, written again and expired, its expiry
    # delivered; the operator names the key expired
    first, _ = gone_then_written_deleted_written_and_expired(world, expired=False)
    expiry = world.last(ROOT)
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads A1 back, the mapping delivers the expiry again, the operator answers again, and recover reads
    # the whole range back
    assert read_back(world, ROOT, first, first)["readBack"] == "applied"
    assert deliver(world, ROOT, delivered(world, ROOT, [expiry])) == OK
    assert named_expired(world, "song1", 1) == (0, False)
    assert read_back(world, ROOT, first, expiry)["readBack"] == "applied"
    # then both expired downloads count in February, each once
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


@pytest.mark.parametrize("dies_at", [1, 2])
def test_a_keep_taken_below_version_whose_invocation_dies_at_any_index_step_is_redone_by_the_retry(
    world: LedgerWorld, dies_at: int
) -> None:
    # given a January download delivered, edited into February and expired by TTL in a batch the mapping gave up, kept
    # by the operator; the key written again into March, delivered
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    edit = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    march = world.put(ROOT, "song1", 1, "2018-03")
    assert deliver(world, ROOT, delivered(world, ROOT, [march])) == OK
    # when recover reads the given-up batch back, the invocation dying at the `dies_at`-th UpdateItem after its
    # transaction, and reads it back again
    dies = ledger_client(
        world,
        Interleaved(world.dynamodb, "update_item", instead=fails_at(dies_at, "InternalServerError", "UpdateItem")),
    )
    with pytest.raises(ClientError):
        read_back(world, ROOT, edit, expiry)
    dies.instead = None
    assert read_back(world, ROOT, edit, expiry)["readBack"] == "applied"
    # then the expired download counts in February beside March, January is out of the index, nothing left named
    assert world.boards() == {("song1", "2018-02"): 1, ("song1", "2018-03"): 1}
    assert not in_index(world, "song1", "2018-01")
    items = world.dynamodb.scan(TableName=LEDGER_TABLE, ConsistentRead=True)["Items"]
    assert [item["ClaimKey"]["S"] for item in items if item.get("Decreased", {}).get("L")] == []


def test_a_gone_mark_written_between_the_expirys_read_and_its_transaction_is_followed_on_the_retry(
    world: LedgerWorld,
) -> None:
    # given a February download delivered, its expiry trimmed during a pause past the retention; the key written
    # again into February in a range the mapping gave up, and expired
    february = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [february])) == OK
    world.expire(ROOT, "song1", 1)
    world.clock += DAY + 3600
    again = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    gone: list[str] = []
    # when the repair reports the key gone (marking GoneAt) between the handler's read of the ledger item and its
    # transaction applying the expiry, then the operator names the key expired and recover reads the write back
    ledger_client(
        world,
        Interleaved(
            world.dynamodb,
            "transact_write_items",
            before=lambda: gone.extend(entry["claimKey"] for entry in rebase_world(world).gone),
        ),
    )
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert gone == [claim_key(key_of("song1", 1))]
    assert named_expired(world, "song1", 1) == (0, False)
    assert read_back(world, ROOT, again, again)["readBack"] == "applied"
    # then the expiry, retried on the mark, followed the gone version: both expired downloads count once each
    assert world.boards() == {("song1", "2018-02"): 2}


def test_a_key_reported_gone_by_three_repairs_around_the_read_back_is_kept_once(world: LedgerWorld) -> None:
    # given a February download delivered, its expiry trimmed, the repair reporting the key gone twice; the key written
    # again into February in a range the mapping gave up, and that item's expiry delivered
    february = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [february])) == OK
    world.expire(ROOT, "song1", 1)
    world.clock += DAY + 3600
    claim = claim_key(key_of("song1", 1))
    assert [[gone["claimKey"] for gone in rebase_world(world).gone] for _ in range(2)] == [[claim], [claim]]
    again = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    # when recover reads the write back, the repair runs again, and the operator names the key expired, twice
    assert read_back(world, ROOT, again, again)["readBack"] == "applied"
    rebase_world(world)
    answers = [named_expired(world, "song1", 1) for _ in range(2)]
    # then the gone version is kept once, bounded by the write: both expired downloads count once each
    assert answers == [(1, False), (0, False)]
    assert world.boards() == {("song1", "2018-02"): 2}


def test_a_read_items_expiry_created_within_the_margin_before_its_read_takes_its_own_keep_not_the_earlier(
    world: LedgerWorld,
) -> None:
    # given DynamoDB's clock (its responses' Date) the margin ahead of the stream's; a January download the backfill
    # counted, expired (its record behind) and kept; the key written into February, counted by a rebase more than
    # the margin later, expired at once and kept again
    world.date_offset = MARGIN
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
    # when the mapping delivers February's expiry first (created the margin before the read, by DynamoDB's clock),
    # then recover reads the rest back
    assert deliver(world, ROOT, delivered(world, ROOT, [second_expiry])) == OK
    assert read_back(world, ROOT, first_expiry, again)["readBack"] == "applied"
    # then each expired download counts once where it was
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}


@pytest.mark.parametrize(
    "order",
    [
        "second insert, first insert, delete",
        "second insert, delete, first insert",
        "delete, second insert, first insert",
        "delete, first insert, second insert",
    ],
)
def test_the_writes_between_read_back_from_the_last_keep_the_answered_gone_version_once(
    world: LedgerWorld, order: str
) -> None:
    # given a gone February version, the key written again (A1), deleted, written again (A2) and expired, its expiry
    # delivered; the operator names the key expired
    first, deletion = gone_then_written_deleted_written_and_expired(world, expired=False)
    second = str(int(deletion) + 100)
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads the given-up writes back one by one, A2's INSERT first
    named = {"first insert": first, "delete": deletion, "second insert": second}
    answers = [read_back(world, ROOT, named[step], named[step])["readBack"] for step in order.split(", ")]
    # then both expired downloads count in February, each once (A1, deleted, nowhere), or the doubt is reported
    assert answers == ["applied"] * 3
    assert world.boards() == {("song1", "2018-02"): 2} or kinds(world) != []
