"""An 'expired' answer recover does not apply leaves its gone report open, marked with why (`Refused`): every later run
lists it, and judges it again when the key is named again, so that a record read back later (which moves the report's
bound and taker) can still make the answer exact, and a run whose output is lost loses nothing."""

from __future__ import annotations

from leaderboard_core.claims import GONE_PREFIX, REFUSED
from leaderboard_tools.recover.rebase import rebase
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
