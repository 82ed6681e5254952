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
    KEPT_BY_EXPIRY,
    KEPT_UNTIL,
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


def test_an_answer_on_a_deletion_taker_a_later_read_back_insert_disproves_counts_the_expired_download_unreported(
    world: LedgerWorld,
) -> None:
    # given G delivered and expired (trimmed), the key written again (I') and deleted (R), reported gone at G, written
    # again (I) and expired (E, delivered); I then R read back; the operator's 'expired' applied (R, a deletion, took
    # G's keep: nothing added)
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
    answered = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    assert (answered.kept_expired, answered.unplaced) == (1, [])
    assert world.boards() == {("song1", "2018-02"): 1}
    # when recover reads back I' (between G and R)
    assert read_back(world, ROOT, between, between)["readBack"] == "applied"
    # then R's taking is given back with G's count: G's and I's expired downloads count, nothing reported or open
    assert kinds(world) == []
    assert world.boards() == {("song1", "2018-02"): 2}
    assert open_reports(world) == []
    assert rebase(world.dynamodb, deployment_of(world)).unplaced == []


@pytest.mark.parametrize(
    ("label", "report", "ttl"),
    [
        ("shard|100", {REFUSED: {"S": "refused"}}, False),
        ("backfill~1", {REFUSED: {"S": "refused"}, READ_FROM: {"N": "1"}}, False),
        ("backfill~1", {REFUSED: {"S": "no read window"}}, False),
        ("shard|100", {REFUSED: {"S": "refused"}}, True),
        ("shard|100", {}, False),
    ],
    ids=["refused", "read_version_with_window", "windowless", "ttl_taker", "never_refused"],
)
def test_a_taker_given_back_on_an_open_report_is_dropped_with_no_report_whatever_the_refusal(
    label: str, report: dict[str, Any], ttl: bool
) -> None:
    # given an open gone report bounded at 400 and taken by a removal (R, at 300), maybe refused
    key = {"songID": {"S": "song1"}, "SK": {"S": "1"}}
    fold = Fold(key=key, item=None)
    name = f"{GONE_PREFIX}{claim_key(key)}|{label}"
    item = {CLAIM_KEY: {"S": name}, KEPT_BY: {"S": "shard|300"}, KEPT_BY_EXPIRY: {"BOOL": ttl}}
    item |= {KEPT_UNTIL: {"S": "shard|400"}, BASE_ENTITY: {"S": "song1"}}
    item |= {BASE_CONTRIBUTION: {"M": {"2018-02": {"N": "1"}}}} | report
    # when an INSERT read back below R (at 200) bounds the report
    FollowedExpiries(None, "ledger", lambda one, other, _: one > other).bound_gone(fold, item, "shard|200", "arn")
    # then R's taking is dropped from the report and its bound lowered, with nothing reported: the answer, when it
    # comes, is judged on the report as it then is
    assert fold.gone_takers[name] == (item, None, False)
    assert fold.gone_bounds[name] == (item, "shard|200")
    assert fold.unsure == []
