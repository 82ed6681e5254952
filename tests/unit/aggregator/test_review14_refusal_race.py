"""review14: fix57's refusal marks the gone report (`Refused`) by an UpdateItem conditioned on the report's existence
only, on the report as the rebase's scan read it at the start of the run; the aggregator reports a refusal's end
(`keep_taken_unsure`, `refusal_lifted`) only for a report that already says `Refused` when it gives the taker back.
Between the two, a read-back of an INSERT below the taker (another recover run answering the failure queue at once:
recover holds no lock, and the mapping's batches are given up and read back one by one, in any order) gives the taker
back on a report not yet refused: nothing is reported; then the refusal is written on a report whose taker is gone.

AWS: a condition expression decides whether a write applies ("If the condition expression evaluates to true, the
operation succeeds; otherwise, the operation fails", Condition expressions); this one does not name the taker it judged
(`KeptBy`). TTL deletions replicated to other regions "are not identifiable in DynamoDB streams in the regions the
deletion is replicated to" (Working with expired items): hence the refusal at all.

History: review13's (G counted, expired with its record trimmed; I' written and deleted by the application, R; the key
reported gone at G; I written and expired, E delivered; I then R read back), then the operator names the key expired
while another run reads back I'. Truth: 2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from leaderboard_core.claims import CLAIM_KEY, GONE_PREFIX, REFUSED
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import ROOT, LedgerWorld, kinds, read_back, world
from tests.unit.aggregator.rebase_on_moto import deployment_of
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM
from tests.unit.aggregator.test_review14_closed_refusals import taken_by_a_provisional_taker

__all__ = ["world"]  # fixtures, used by name


class BeforeTheRefusal:
    """A DynamoDB client that runs `step` (another run's read-back) right before its first write of `Refused` on a
    gone report: after the rebase read the report, before its refusal reaches the table."""

    def __init__(self, client: Any, step: Callable[[], Any]) -> None:
        self.client, self.step = client, step

    def __getattr__(self, name: str) -> Any:
        if name != "update_item":
            return getattr(self.client, name)

        def call(**parameters: Any) -> Any:
            marking = parameters["Key"][CLAIM_KEY]["S"].startswith(GONE_PREFIX)
            if marking and REFUSED in parameters.get("ExpressionAttributeNames", {}).values() and self.step:
                step, self.step = self.step, None
                step()
            return self.client.update_item(**parameters)

        return call


def test_a_refusal_written_after_a_concurrent_read_back_gave_its_taker_back_still_ends_right_for_the_operator(
    world: LedgerWorld,
) -> None:
    # given the open report taken by R (a removal with no TTL identity), the answer not yet given
    between, _ = taken_by_a_provisional_taker(world)
    # when the operator names the key expired while another run reads back I' (between G and R), after this run read
    # the report and before its refusal is written
    other_run = BeforeTheRefusal(world.dynamodb, lambda: read_back(world, ROOT, between, between))
    answered = rebase(other_run, deployment_of(world), expired=[CLAIM])
    assert other_run.step is None, "the read-back did not land between the read and the refusal"
    # and the operator acts on what the runs say: the refusal's end reported -> answers expired again; the refusal
    # standing (R, known to be the application's delete: "the count is right as it is") -> closes it (--deleted-keys)
    if "keep_taken_unsure" in kinds(world) or not answered.unplaced:
        rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    else:
        rebase(world.dynamodb, deployment_of(world), deleted=[CLAIM])
    # then G's and I's expired downloads count
    assert world.boards() == {("song1", "2018-02"): 2}, (
        f"boards {world.boards()}; reports {kinds(world)}; the run said {answered.unplaced}"
    )
