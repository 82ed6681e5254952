"""fix55: a gone version read from the table (`backfill~<n>`, `<record>~<n>`) carries its read's window (`ReadFrom`,
`ReadUntil`: `ReadAt` less and plus the repair's clock margin) on its gone report, on the answer an expiry takes for
it, and on every keep written from either; the aggregator orders a record of the key against such a version by the
record's creation time within that window, on the answered branch and on the open report's; a removal below an open
report's bound takes the keep the answer writes; a keep of a version read from the table spent by a REMOVE with no TTL
identity is reported.

A record's time is its `ApproximateCreationDateTime`, "rounded down to the closest second" (StreamRecord); an item's
records "appear in the same sequence as the actual modifications to the item" (S10); the mapping may deliver them late,
given up (L4), or out of order (L2)."""

from __future__ import annotations

from typing import Any

from leaderboard_core.claims import (
    ANSWERS,
    CLAIM_KEY,
    EXPIRY_PREFIX,
    FOLLOWS,
    GONE_PREFIX,
    KEPT_BY,
    KEPT_BY_EXPIRY,
    KEPT_UNTIL,
    READ_FROM,
    READ_UNTIL,
    claim_key,
)
from leaderboard_tools.reconcile.clock import CLOCK_MARGIN_SECONDS
from tests.unit.aggregator.ledger_on_moto import (
    LEDGER_TABLE,
    OK,
    ROOT,
    LedgerWorld,
    deliver,
    delivered,
    key_of,
    kinds,
    read_back,
    world,
)
from tests.unit.aggregator.rebase_on_moto import kept_expired, rebase_world
from tests.unit.aggregator.test_one_reader_read_time import version
from tests.unit.aggregator.test_one_reader_review9 import named_expired

__all__ = ["world"]  # fixtures, used by name

CLAIM = claim_key(key_of("song1", 1))
MARGIN = CLOCK_MARGIN_SECONDS


def ledger_items(world: LedgerWorld, prefix: str) -> dict[str, dict[str, Any]]:
    """The ledger table's items of the world's one key whose key starts with `prefix`."""
    items = world.dynamodb.scan(TableName=LEDGER_TABLE, ConsistentRead=True)["Items"]
    return {item[CLAIM_KEY]["S"]: item for item in items if item[CLAIM_KEY]["S"].startswith(prefix)}


def expiry_items(world: LedgerWorld) -> list[dict[str, Any]]:
    """The expiries' own items of the key (not the operator's keeps)."""
    return [item for key, item in ledger_items(world, f"{EXPIRY_PREFIX}{CLAIM}|").items() if not key.endswith("|kept")]


def backfilled_gone_and_followed(world: LedgerWorld, insert_within_the_margin: bool = False) -> dict[str, Any]:
    """A February download whose INSERT (I_G) is not delivered when the backfill counts it (G = backfill~<n>, read at
    `read`; I_G created more than the margin before, or within it); more than the margin later it expires (R), the
    key is written again (I) and that item expires (E); R and I given up, the repair (run after R) reports the key
    gone at G, and E is delivered: it follows G. Returns the records by name, and the read's time."""
    insert = world.put(ROOT, "song1", 1, "2018-02")
    if not insert_within_the_margin:
        world.pass_time(MARGIN + 10)
    read = world.clock
    assert world.backfill() == [("song1", 1)]
    world.pass_time(MARGIN + 10)
    world.expire(ROOT, "song1", 1)
    named: dict[str, Any] = {"I_G": insert, "R": world.last(ROOT), "read": read}
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    named["I"] = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    named["E"] = world.last(ROOT)
    assert deliver(world, ROOT, delivered(world, ROOT, [named["E"]])) == OK
    return named


# ------------------------------------------------------------------------------------------ the window's carriers


def test_a_gone_report_of_a_version_read_from_the_table_carries_the_reads_window(world: LedgerWorld) -> None:
    # given a download the backfill counted, read at `read`, its item then expired and the expiry given up
    # when the repair reports the key gone
    named = backfilled_gone_and_followed(world)
    # then the gone report names the read's window: the read's time less and plus the margin
    [report] = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|").values()
    assert report[READ_FROM] == {"N": str(named["read"] - MARGIN)}
    assert report[READ_UNTIL] == {"N": str(named["read"] + MARGIN)}


def test_the_answer_an_expiry_takes_for_a_version_read_from_the_table_carries_the_reads_window(
    world: LedgerWorld,
) -> None:
    # given the key gone at a version read from the table and an expiry E delivered that follows it
    named = backfilled_gone_and_followed(world)
    # when the operator names the key expired
    assert named_expired(world, "song1", 1) == (0, False)
    # then E's item answers the version, with the read's window
    [expiry] = expiry_items(world)
    assert expiry[ANSWERS] == expiry[FOLLOWS]
    assert (expiry[READ_FROM], expiry[READ_UNTIL]) == (
        {"N": str(named["read"] - MARGIN)},
        {"N": str(named["read"] + MARGIN)},
    )


def test_the_keep_an_insert_after_the_read_writes_for_an_answered_version_read_from_the_table_carries_the_window(
    world: LedgerWorld,
) -> None:
    # given the key gone at a version read from the table, E following it and taken by the operator's answer
    named = backfilled_gone_and_followed(world)
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads back I, a new item's INSERT created after the read's window
    assert read_back(world, ROOT, named["I"], named["I"])["readBack"] == "applied"
    # then the keep of the version it writes is bounded by I and carries the read's window, as the operator's keep of
    # the same version would
    [keep] = ledger_items(world, f"{EXPIRY_PREFIX}{CLAIM}|backfill~").values()
    assert keep[KEPT_UNTIL] == {"S": version(named["I"])}
    assert (keep[READ_FROM], keep[READ_UNTIL]) == (
        {"N": str(named["read"] - MARGIN)},
        {"N": str(named["read"] + MARGIN)},
    )
    assert world.boards() == {("song1", "2018-02"): 2}


# ------------------------------------------------------------------------------------------ between, by the read time


def test_the_read_items_own_insert_created_before_the_read_leaves_the_answered_expiry_following(
    world: LedgerWorld,
) -> None:
    # given the key gone at a version read from the table, E following it and taken by the operator's answer
    named = backfilled_gone_and_followed(world)
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads back the read item's own INSERT, created before the read's window
    assert read_back(world, ROOT, named["I_G"], named["I_G"])["readBack"] == "applied"
    # then it is not a write between: E still follows and answers the version, nothing kept again, nothing reported
    [expiry] = expiry_items(world)
    assert expiry[ANSWERS] == expiry[FOLLOWS]
    assert ledger_items(world, f"{EXPIRY_PREFIX}{CLAIM}|backfill~") == {}
    assert kinds(world) == []


def test_the_read_items_own_insert_created_before_the_read_does_not_bound_the_open_report(world: LedgerWorld) -> None:
    # given the key gone at a version read from the table, E following it, the report still open
    named = backfilled_gone_and_followed(world)
    # when recover reads back the read item's own INSERT, created before the read's window
    assert read_back(world, ROOT, named["I_G"], named["I_G"])["readBack"] == "applied"
    # then the report has no bound and E still follows the version
    [report] = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|").values()
    assert KEPT_UNTIL not in report
    assert [FOLLOWS in expiry for expiry in expiry_items(world)] == [True]


def test_an_insert_created_within_the_margin_of_the_gone_versions_read_is_reported_not_taken_for_a_write_between(
    world: LedgerWorld,
) -> None:
    # given a download the backfill counted within the margin of its INSERT (I_G, not delivered), the key gone at that
    # read, E following it and taken by the operator's answer
    named = backfilled_gone_and_followed(world, insert_within_the_margin=True)
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads I_G back
    assert read_back(world, ROOT, named["I_G"], named["I_G"])["readBack"] == "applied"
    # then no clock places it against the read: reported (naming it and E), E left answering, nothing kept again
    [report] = world.reports()
    assert (report["kind"], report["insert"], report["takenBy"]) == (
        "keep_taken_unsure",
        version(named["I_G"]),
        version(named["E"]),
    )
    [expiry] = expiry_items(world)
    assert expiry[ANSWERS] == expiry[FOLLOWS]


# ------------------------------------------------------------------------------------ a removal below an open bound


def test_a_removal_below_an_open_reports_bound_takes_the_keep_the_answer_writes(world: LedgerWorld) -> None:
    # given G delivered, its own expiry R given up, the key reported gone, A1 written (I, given up), A1's expiry E
    # delivered; recover reads I back (it bounds the open report) and then R
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    r = world.last(ROOT)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    i = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert read_back(world, ROOT, i, i)["readBack"] == "applied"
    assert read_back(world, ROOT, r, r)["readBack"] == "applied"
    [report] = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|").values()
    assert (report[KEPT_UNTIL], report[KEPT_BY], report[KEPT_BY_EXPIRY]) == (
        {"S": version(i)},
        {"S": version(r)},
        {"BOOL": True},
    )
    # when the operator names the key expired
    kept, _ = named_expired(world, "song1", 1)
    # then the answer's keep is written taken by R, and adds nothing: G (by R's old image) and A1 once each
    [keep] = ledger_items(world, f"{EXPIRY_PREFIX}{CLAIM}|{version(g)}|kept").values()
    assert (kept, keep[KEPT_BY], keep[KEPT_UNTIL]) == (1, {"S": version(r)}, {"S": version(i)})
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


# ------------------------------------------------------------------------ a read version's keep spent by a delete


def test_a_delete_after_the_read_takes_a_read_versions_keep_back_with_no_report(world: LedgerWorld) -> None:
    # given a January download the backfill counted; more than the margin later it is deleted (D) and written again
    # (N), neither delivered; the new item expires (X), the repair finds the key gone, the operator names it expired
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.pass_time(MARGIN + 10)
    deletion = world.delete(ROOT, "song1", 1)
    assert deletion is not None
    again = world.put(ROOT, "song1", 1, "2018-01")
    world.pass_time(MARGIN + 10)
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when the mapping delivers D, N and X
    assert deliver(world, ROOT, delivered(world, ROOT, [deletion, again, expiry])) == OK
    # then D, a REMOVE with no TTL identity created after the read, is the read item's deletion: it takes the keep and
    # its count back (the operator's 'expired' was true of the later item only), which X's expiry keeps; nothing is
    # reported
    assert world.boards() == {("song1", "2018-01"): 1}
    assert world.reports() == []
