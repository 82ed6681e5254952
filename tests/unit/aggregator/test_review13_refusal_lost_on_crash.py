"""review13: fix56's refusal of the operator's 'expired' to a windowless gone report of a version read from the table,
tried against a recover killed midway. (Its other half, an open report whose keep a removal with no TTL identity took,
is no refusal any more: such a removal is a deletion, and the answer applies, test_deletion_takers_count_nothing.py.)

The refusal is kept in the run's report (memory, printed at the end) and the gone report it refuses is deleted at once
(gone_keys.check_not_kept). A run that stops after that delete and before its report is printed (a later call failing
for good, the operator's machine going away) leaves nothing for the rerun to say: the gone report is gone, the ledger
item counts nothing, and the rerun's report does not name the key. The operator, who asked for 'expired', is told
neither that it was not applied nor what to add back by hand: a replica's expiry's count (TTL deletions "replicated to
global table regions are not identifiable in DynamoDB streams in the regions the deletion is replicated to") is then
lost with nothing said. DeleteItem is applied at the table when it returns, whatever becomes of its caller ("Deletes a
single item in a table by primary key").

Fixed: a refusal deletes nothing; it marks the gone report (`Refused`) and leaves it open, for every run to list and
judge again. The killers stop the run at its write to the gone report, whichever write that is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from leaderboard_core.claims import CLAIM_KEY, GONE_PREFIX
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import (
    LEDGER_TABLE,
    OK,
    ROOT,
    LedgerWorld,
    deliver,
    delivered,
    read_back,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of, rebase_world, write_items
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, ledger_items
from tests.unit.aggregator.test_review11_record_version_read_label import deleted_rewritten_read_gone_and_answered

__all__ = ["world"]  # fixtures, used by name


class Killed(Exception):
    """recover's process gone right after a call returned (the call applied at the table)."""


class KilledAtAGoneReport:
    """A DynamoDB client whose run stops at its first write (DeleteItem or UpdateItem) to a gone report: `after` it
    applied (its report never printed), or before it reaches the table."""

    def __init__(self, client: Any, after: bool) -> None:
        self.client, self.after = client, after

    def __getattr__(self, name: str) -> Any:
        if name not in ("delete_item", "update_item"):
            return getattr(self.client, name)

        def call(**parameters: Any) -> Any:
            if not parameters["Key"][CLAIM_KEY]["S"].startswith(GONE_PREFIX):
                return getattr(self.client, name)(**parameters)
            if self.after:
                getattr(self.client, name)(**parameters)
            raise Killed(f"recover killed {'after' if self.after else 'before'} its {name} of a gone report")

        return call


def windowless_read_version_report(world: LedgerWorld) -> None:
    """G = r1~1, a version read from the table, reported gone; its report as written before read windows."""
    deleted_rewritten_read_gone_and_answered(world)
    [report] = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|").values()
    world.dynamodb.update_item(
        TableName=LEDGER_TABLE, Key={CLAIM_KEY: report[CLAIM_KEY]}, UpdateExpression="REMOVE ReadFrom, ReadUntil"
    )


def keep_taken_by_a_delete_below_the_bound(world: LedgerWorld) -> None:
    """G delivered, removed with no TTL identity (R, given up), reported gone, written again (I, given up) and expired
    (E, delivered); I then R read back: the open report bounded by I, R recorded on it as its keep's taker."""
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


@pytest.mark.parametrize("refused", [windowless_read_version_report], ids=["windowless"])
def test_a_refused_expired_answer_is_still_reported_by_the_rerun_after_recover_stops_past_the_gone_reports_delete(
    world: LedgerWorld, refused: Callable[[LedgerWorld], None]
) -> None:
    # given an open gone report whose 'expired' answer fix56 refuses
    refused(world)
    write_items(world)
    # and the operator's first run, naming the key expired, killed right after its write to the gone report returns
    # (its report, holding the refusal, never printed)
    with pytest.raises(Killed):
        rebase(KilledAtAGoneReport(world.dynamodb, after=True), deployment_of(world), expired=[CLAIM])
    assert list(ledger_items(world, f"{GONE_PREFIX}{CLAIM}|")), "the refusal deleted the gone report"
    # when the operator runs recover again with the same answer
    rerun = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    # then the rerun still says the answer was not applied, and names the aggregates to judge by hand
    named = [entry for entry in rerun.unplaced + rerun.gone if entry["claimKey"] == CLAIM]
    assert named, f"the rerun names {CLAIM} nowhere: kept {rerun.kept_expired}, unplaced {rerun.unplaced}"
    assert rerun.kept_expired == 0


@pytest.mark.parametrize("refused", [windowless_read_version_report], ids=["windowless"])
def test_a_recover_killed_before_the_refused_reports_delete_refuses_it_again_on_the_rerun(
    world: LedgerWorld, refused: Callable[[LedgerWorld], None]
) -> None:
    # given an open gone report whose 'expired' answer fix56 refuses, and a first run killed as it is about to delete it
    refused(world)
    write_items(world)
    before = world.boards()
    with pytest.raises(Killed):
        rebase(KilledAtAGoneReport(world.dynamodb, after=False), deployment_of(world), expired=[CLAIM])
    # when the operator runs recover again with the same answer
    rerun = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    # then the refusal is made again (nothing of the first run was written), the aggregates as they were
    [unplaced] = rerun.unplaced
    assert unplaced["claimKey"] == CLAIM
    assert "not applied" in unplaced["why"]
    assert rerun.kept_expired == 0
    assert world.boards() == before
