"""review12: fix55 (read windows on gone reports, answers and unfollow's keeps; between by a record's creation time; a
removal below an open report's bound; a read version's keep spent by a REMOVE with no TTL identity reported) tried
adversarially: reports written before the window existed, the window's exact edges, the answer racing a removal below
an open bound, a conflict retry of a batch that reports a spent keep, a TTL expiry taking a read version's keep.

A record's `ApproximateCreationDateTime` is "rounded down to the closest second" (StreamRecord); an item's records
"appear in the same sequence as the actual modifications to the item" (S10), nothing across items; "If records are
processed more than once, they might be processed out of order" (L2)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from leaderboard_core.claims import ANSWERS, CLAIM_KEY, EXPIRY_PREFIX, FOLLOWS, GONE_PREFIX, KEPT_BY, KEPT_UNTIL
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import (
    LEDGER_TABLE,
    OK,
    ROOT,
    Interleaved,
    LedgerWorld,
    deliver,
    delivered,
    kinds,
    ledger_client,
    read_back,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of, kept_expired, rebase_world, write_items
from tests.unit.aggregator.test_one_reader_read_time import version
from tests.unit.aggregator.test_one_reader_review9 import named_expired
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, MARGIN, expiry_items, ledger_items
from tests.unit.aggregator.test_review11_record_version_read_label import deleted_rewritten_read_gone_and_answered

__all__ = ["world"]  # fixtures, used by name


def read_back_in(world: LedgerWorld, named: dict[str, Any], order: str) -> None:
    """recover reads the named records back in `order` ("A..B": one range)."""
    for step in order.split(", "):
        first, _, last = step.partition("..")
        assert read_back(world, ROOT, named[first], named[last or first])["readBack"] == "applied"


def gone_read_then_followed(world: LedgerWorld, insert_after_read: int, removal_after_read: int) -> dict[str, Any]:
    """A February download (I_G, not delivered) the backfill counts more than the margin later (read at `read`);
    `removal_after_read` seconds after the read it expires (R, given up), the repair reports the key gone, and the key
    is written again (I, given up) `insert_after_read` seconds after the read and expires (E, delivered: it follows
    the read version)."""
    named: dict[str, Any] = {"I_G": world.put(ROOT, "song1", 1, "2018-02")}
    world.pass_time(MARGIN + 10)
    named["read"] = world.clock
    assert world.backfill() == [("song1", 1)]
    world.pass_time(removal_after_read)
    world.expire(ROOT, "song1", 1)
    named["R"] = world.last(ROOT)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    world.clock = named["read"] + insert_after_read
    named["I"] = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    named["E"] = world.last(ROOT)
    assert deliver(world, ROOT, delivered(world, ROOT, [named["E"]])) == OK
    return named


# ------------------------------------------------------------------------------ reports written before the window


@pytest.mark.parametrize("order", ["I, D..R", "I, N, D, R", "N, I, R, D"])
def test_a_gone_report_written_before_read_windows_still_orders_the_read_items_own_insert_before_the_read(
    world: LedgerWorld, order: str
) -> None:
    # given G = r1~1 (the ledger item read at ReadAt, behind it the old item's deletion D and the new item's INSERT N),
    # G's item expired (R), the key written again (I) and expired (E, delivered, following G); the gone report is as
    # the release before fix55 wrote it (no read window); the operator names the key expired
    named = deleted_rewritten_read_gone_and_answered(world)
    [report] = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|").values()
    world.dynamodb.update_item(
        TableName=LEDGER_TABLE, Key={CLAIM_KEY: report[CLAIM_KEY]}, UpdateExpression="REMOVE ReadFrom, ReadUntil"
    )
    _, remain = named_expired(world, "song1", 1)
    # when recover reads D, N, R and I back in `order`
    read_back_in(world, named, order)
    # then the two expired downloads count once each, or the doubt is left to the operator
    assert world.boards() == {("song1", "2018-02"): 2} or remain or kinds(world) != []


def test_the_read_windows_absence_is_what_the_double_count_above_depends_on(world: LedgerWorld) -> None:
    # given the same history with the report as fix55 writes it (with its window), answered
    named = deleted_rewritten_read_gone_and_answered(world)
    assert named_expired(world, "song1", 1)[1] is False
    # when recover reads back the records in the order that double counts without the window
    read_back_in(world, named, "I, N, D, R")
    # then each expired download counts once, silently exact
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


# ------------------------------------------------------------------------------------------ the window's edges


def test_the_read_items_own_insert_created_in_the_second_of_read_from_is_reported_not_placed(
    world: LedgerWorld,
) -> None:
    # given a download (I_G) the backfill counts exactly the margin after it: I_G created in ReadFrom's second; its
    # item expired, the key reported gone, written again and expired (E, following it), the operator's answer taken
    world.put(ROOT, "song1", 1, "2018-02")
    insert = world.last(ROOT)
    world.pass_time(MARGIN - 1)
    assert world.backfill() == [("song1", 1)]
    world.pass_time(MARGIN + 10)
    world.expire(ROOT, "song1", 1)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads I_G back
    assert read_back(world, ROOT, insert, insert)["readBack"] == "applied"
    # then the window cannot place it: reported, E left answering, nothing kept again (a `<` that became `<=` at
    # ReadFrom would take it silently for one before the read)
    assert [(report["kind"], report["insert"]) for report in world.reports()] == [
        ("keep_taken_unsure", version(insert))
    ]
    [expiry] = expiry_items(world)
    assert expiry[ANSWERS] == expiry[FOLLOWS]


def test_the_read_items_own_insert_created_the_second_before_read_from_is_placed_before_the_read_silently(
    world: LedgerWorld,
) -> None:
    # given I_G created one second before ReadFrom, the rest as above
    world.put(ROOT, "song1", 1, "2018-02")
    insert = world.last(ROOT)
    world.pass_time(MARGIN)
    assert world.backfill() == [("song1", 1)]
    world.pass_time(MARGIN + 10)
    world.expire(ROOT, "song1", 1)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads I_G back
    assert read_back(world, ROOT, insert, insert)["readBack"] == "applied"
    # then it is before the read: nothing reported, E answering, the count unchanged
    assert kinds(world) == []
    [expiry] = expiry_items(world)
    assert expiry[ANSWERS] == expiry[FOLLOWS]
    assert world.boards() == {("song1", "2018-02"): 1}


def test_a_new_insert_created_in_the_second_of_read_until_is_reported_not_taken_for_a_write_between(
    world: LedgerWorld,
) -> None:
    # given the read version gone, its item expired (R) just before, and a new item's INSERT I created in ReadUntil's
    # second; E follows the version, the operator's answer taken
    named = gone_read_then_followed(world, insert_after_read=MARGIN, removal_after_read=MARGIN - 2)
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads I back
    assert read_back(world, ROOT, named["I"], named["I"])["readBack"] == "applied"
    # then reported (a `>=` at ReadUntil would take it silently for one after the read), nothing kept
    assert [(report["kind"], report["insert"]) for report in world.reports()] == [
        ("keep_taken_unsure", version(named["I"]))
    ]
    assert ledger_items(world, f"{EXPIRY_PREFIX}{CLAIM}|backfill~") == {}


def test_a_new_insert_created_the_second_after_read_until_is_a_write_between(world: LedgerWorld) -> None:
    # given I created one second after ReadUntil, the rest as above
    named = gone_read_then_followed(world, insert_after_read=MARGIN + 1, removal_after_read=MARGIN - 2)
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads I back
    assert read_back(world, ROOT, named["I"], named["I"])["readBack"] == "applied"
    # then the version's download is kept, bounded by I: both expired downloads count, nothing reported
    [keep] = ledger_items(world, f"{EXPIRY_PREFIX}{CLAIM}|backfill~").values()
    assert keep[KEPT_UNTIL] == {"S": version(named["I"])}
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


# ------------------------------------------------------------------- a removal below an open bound, the answer racing


def gone_bounded_with_removal_given_up(world: LedgerWorld) -> dict[str, str]:
    """G delivered, its own expiry R given up, the key reported gone, A1 written (I, given up) and expired (E,
    delivered, following G); recover reads I back, which bounds the open report (`KeptUntil`)."""
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    named = {"G": g, "R": world.last(ROOT)}
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    named["I"] = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert read_back(world, ROOT, named["I"], named["I"])["readBack"] == "applied"
    return named


def test_an_answer_written_between_the_removals_read_of_the_open_report_and_its_write_refuses_it_and_r_takes_the_keep(
    world: LedgerWorld,
) -> None:
    # given the open report bounded by I; recover reads R back, and between the aggregator's read of the report and
    # its transaction the operator names the key expired (the keep written without KeptBy, G's count added back)
    named = gone_bounded_with_removal_given_up(world)
    answered: list[tuple[int, bool]] = []
    ledger_client(
        world,
        Interleaved(world.dynamodb, "transact_write_items", lambda: answered.append(named_expired(world, "song1", 1))),
    )
    # when the read-back goes on
    assert read_back(world, ROOT, named["R"], named["R"])["readBack"] == "applied"
    # then its write on the report was refused (the report deleted), the fold read again: R, G's expiry, takes the
    # keep the answer wrote (its old image for the keep's): G and A1 once each, nothing reported
    assert answered == [(1, False)]
    [keep] = ledger_items(world, f"{EXPIRY_PREFIX}{CLAIM}|{version(named['G'])}|kept").values()
    assert keep[KEPT_BY] == {"S": version(named["R"])}
    assert ledger_items(world, f"{GONE_PREFIX}{CLAIM}|") == {}
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


def test_the_answer_written_after_r_recorded_itself_on_the_open_report_adds_nothing(world: LedgerWorld) -> None:
    # given the open report bounded by I, and R read back (it records itself on the report as the keep's taker)
    named = gone_bounded_with_removal_given_up(world)
    assert read_back(world, ROOT, named["R"], named["R"])["readBack"] == "applied"
    # when the operator names the key expired, and recover reads R back again (a retry of the range)
    assert named_expired(world, "song1", 1) == (1, False)
    assert read_back(world, ROOT, named["R"], named["R"])["readBack"] == "applied"
    # then G and A1 count once each
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


def test_a_delete_below_an_open_reports_bound_taking_the_answers_keep_is_reported_or_left_to_the_operator(
    world: LedgerWorld,
) -> None:
    # given G delivered, then deleted by the application (R: no TTL identity, given up), the key reported gone, A1
    # written (I, given up) and expired (E, delivered, following G); recover reads I back (it bounds the open report)
    # and then R (it records itself on the report)
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    removal = world.delete(ROOT, "song1", 1)
    assert removal is not None
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    insert = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert read_back(world, ROOT, insert, insert)["readBack"] == "applied"
    assert read_back(world, ROOT, removal, removal)["readBack"] == "applied"
    # when the operator names the key expired
    _, remain = named_expired(world, "song1", 1)
    # then the deleted download does not count silently: February 1 (A1's), or the doubt reported or left over
    assert world.boards() == {("song1", "2018-02"): 1} or remain or kinds(world) != []


# ------------------------------------------------------------------------ a read version's keep spent or taken


def deleted_after_the_read(world: LedgerWorld, expired: bool) -> dict[str, str]:
    """A January download the backfill counted; more than the margin later it is removed (D: deleted, or expired by
    TTL) and written again (N), neither delivered; the new item expires (X), the repair finds the key gone and the
    operator names it expired."""
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.pass_time(MARGIN + 10)
    if expired:
        world.expire(ROOT, "song1", 1)
    else:
        assert world.delete(ROOT, "song1", 1) is not None
    named = {"D": world.last(ROOT), "N": world.put(ROOT, "song1", 1, "2018-01")}
    world.pass_time(MARGIN + 10)
    world.expire(ROOT, "song1", 1)
    named["X"] = world.last(ROOT)
    kept_expired(world, "song1", 1)
    return named


def conflicts_once(calls: int, send: Any, parameters: dict[str, Any]) -> Any:
    """The first transaction is cancelled by another writer's conflict (TransactionConflict); the rest go through."""
    if calls == 1:
        error = {"Code": "TransactionCanceledException", "Message": "cancelled"}
        reasons = [{"Code": "TransactionConflict"} for _ in parameters["TransactItems"]]
        raise ClientError({"Error": error, "CancellationReasons": reasons}, "TransactWriteItems")
    return send(**parameters)


def test_a_read_versions_keep_taken_by_a_delete_ends_exact_with_no_report_when_its_transaction_conflicts_once(
    world: LedgerWorld,
) -> None:
    # given a read version's keep, and D, a delete created after the read, N and X given to the mapping; the first
    # transaction conflicts with another writer
    named = deleted_after_the_read(world, expired=False)
    ledger_client(world, Interleaved(world.dynamodb, "transact_write_items", instead=conflicts_once))
    # when the mapping delivers D, N and X
    assert deliver(world, ROOT, delivered(world, ROOT, [named["D"], named["N"], named["X"]])) == OK
    # then D takes the keep and its count back (X's expiry counts), once, with nothing reported
    assert world.boards() == {("song1", "2018-01"): 1}
    assert kinds(world) == []


def test_a_ttl_expiry_after_the_read_that_takes_a_read_versions_keep_is_exact_and_not_reported(
    world: LedgerWorld,
) -> None:
    # given a read version's keep, and D, now an expiry by TTL (its identity on the record) created after the read
    named = deleted_after_the_read(world, expired=True)
    # when the mapping delivers D, N and X
    assert deliver(world, ROOT, delivered(world, ROOT, [named["D"], named["N"], named["X"]])) == OK
    # then D takes the keep as the read item's removal (its old image in the keep's place): both expired downloads
    # count, nothing reported (a report on every taker, not only those with no TTL identity, would show here)
    assert world.boards() == {("song1", "2018-01"): 2}
    assert kinds(world) == []


def test_a_removal_recorded_on_the_open_report_after_recovers_read_of_it_has_the_answer_judged_on_the_report_as_it_is(
    world: LedgerWorld,
) -> None:
    # given the open report bounded by I; the operator's run reads it (no KeptBy), and before its answer's transaction
    # recover's read-back of R records R on the report
    named = gone_bounded_with_removal_given_up(world)

    def read_back_r_first(calls: int, send: Any, parameters: dict[str, Any]) -> Any:
        deletes = [item["Delete"]["Key"][CLAIM_KEY]["S"] for item in parameters["TransactItems"] if "Delete" in item]
        if any(key.startswith(GONE_PREFIX) for key in deletes) and not ran:
            ran.append(read_back(world, ROOT, named["R"], named["R"])["readBack"])
        return send(**parameters)

    ran: list[str] = []
    write_items(world)
    client = Interleaved(world.dynamodb, "transact_write_items", instead=read_back_r_first)
    # when the operator names the key expired
    report = rebase(client, deployment_of(world), expired=[CLAIM])
    # then the answer, written on the report as read, was cancelled, not written untaken beside R's record (which
    # would count G again when R is read back no more), and judged again on the report as it now is: R, an expiry by
    # TTL below its bound, took G's keep, written taken by R and adding nothing: G and A1 once each, nothing left
    assert ran == ["applied"]
    assert (report.kept_expired, report.differences_remain) == (1, False)
    [keep] = ledger_items(world, f"{EXPIRY_PREFIX}{CLAIM}|{version(named['G'])}|kept").values()
    assert keep[KEPT_BY] == {"S": version(named["R"])}
    assert world.boards() == {("song1", "2018-02"): 2}
