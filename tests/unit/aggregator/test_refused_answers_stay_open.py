"""An 'expired' answer recover does not apply leaves its gone report open, marked with why (`Refused`): every later run
lists it, and judges it again when the key is named again, so that a record read back later (which moves the report's
bound and taker) can still make the answer exact, and a run whose output is lost loses nothing."""

from __future__ import annotations

from typing import Any

import pytest

from followed_expiries import FollowedExpiries
from leaderboard_core.claims import (
    BASE_CONTRIBUTION,
    BASE_ENTITY,
    CLAIM_KEY,
    GONE_PREFIX,
    KEPT_BY,
    READ_FROM,
    REFUSED,
    claim_key,
)
from leaderboard_tools.recover.rebase import rebase
from ledger_fold import Fold
from tests.unit.aggregator.ledger_on_moto import OK, ROOT, LedgerWorld, deliver, delivered, kinds, read_back, world
from tests.unit.aggregator.rebase_on_moto import deployment_of, rebase_world, write_items
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, ledger_items

__all__ = ["world"]  # fixtures, used by name


def open_reports(world: LedgerWorld) -> list[dict]:
    return list(ledger_items(world, f"{GONE_PREFIX}{CLAIM}|").values())


def test_an_answer_to_a_report_a_record_moved_since_is_refused_the_report_kept_open_and_listed_by_the_next_run(
    world: LedgerWorld,
) -> None:
    # given G delivered, its item deleted (R, not yet delivered), the key reported gone, then R delivered
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    removal = world.delete(ROOT, "song1", 1)
    assert removal is not None
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    assert deliver(world, ROOT, delivered(world, ROOT, [removal])) == OK
    # when the operator names the key expired, then runs recover again naming nothing
    write_items(world)
    answered = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    later = rebase(world.dynamodb, deployment_of(world))
    # then the answer is refused, its report left open with why, and the next run lists it again
    assert [entry["claimKey"] for entry in answered.unplaced] == [CLAIM]
    assert "a record of the key was applied since" in answered.unplaced[0]["why"]
    [report] = open_reports(world)
    assert "a record of the key was applied since" in report[REFUSED]["S"]
    assert [entry["claimKey"] for entry in later.unplaced] == [CLAIM]
    assert "answered expired before, not applied" in later.unplaced[0]["why"]
    assert answered.kept_expired == later.kept_expired == 0


def test_a_refusal_for_a_taker_a_later_read_back_insert_disproves_is_reported_and_the_answer_then_applies(
    world: LedgerWorld,
) -> None:
    # given G delivered and expired (trimmed), the key written again (I') and deleted (R), reported gone at G, written
    # again (I) and expired (E, delivered); I then R read back; the operator's 'expired' refused (R took G's keep)
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
    assert rebase(world.dynamodb, deployment_of(world), expired=[CLAIM]).unplaced
    # when recover reads back I' (between G and R), then the operator names the key expired again
    assert read_back(world, ROOT, between, between)["readBack"] == "applied"
    reported = kinds(world)
    again = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    # then the refusal's end was reported once, and the answer applies: G's and I's expired downloads count, the report
    # closed
    assert reported == ["keep_taken_unsure"]
    assert (again.kept_expired, again.unplaced) == (1, [])
    assert world.boards() == {("song1", "2018-02"): 2}
    assert open_reports(world) == []


@pytest.mark.parametrize(
    ("label", "report", "ttl", "reported"),
    [
        ("shard|100", {REFUSED: {"S": "refused"}}, False, 1),
        ("backfill~1", {REFUSED: {"S": "refused"}, READ_FROM: {"N": "1"}}, False, 1),
        ("backfill~1", {REFUSED: {"S": "no read window"}}, False, 0),
        ("shard|100", {REFUSED: {"S": "refused"}}, True, 0),
        ("shard|100", {}, False, 0),
    ],
    ids=["refused", "read_version_with_window", "windowless", "ttl_taker", "never_refused"],
)
def test_a_taker_given_back_is_reported_only_where_the_answer_was_refused_for_that_taker(
    label: str, report: dict[str, Any], ttl: bool, reported: int
) -> None:
    # given an open gone report taken by a removal (R) and maybe refused; a windowless read version's refusal holds
    # whatever its taker
    key = {"songID": {"S": "song1"}, "SK": {"S": "1"}}
    fold = Fold(key=key, item=None)
    item = {CLAIM_KEY: {"S": f"{GONE_PREFIX}{claim_key(key)}|{label}"}, KEPT_BY: {"S": "shard|300"}}
    item |= {BASE_ENTITY: {"S": "song1"}, BASE_CONTRIBUTION: {"M": {"2018-02": {"N": "1"}}}} | report
    # when an INSERT read back below R gives R's taking back
    FollowedExpiries.refusal_lifted(fold, item, ("shard|300", ttl), "shard|200")
    # then the refusal's end is reported only where the refusal rested on that taker
    assert len(fold.unsure) == reported
