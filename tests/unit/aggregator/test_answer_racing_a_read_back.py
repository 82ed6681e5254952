"""review14 refusal_race (and review15 close_race), under the keep invariant: the operator's 'expired' to an open
report taken by a deletion R is applied on the report as read (`KeptUntil`, `KeptBy`), while another run reads back an
INSERT below R (I') that gives R's taking back (recover holds no lock, and the mapping's batches are given up and read
back one by one, in any order).

AWS: a condition expression decides whether a write applies ("If the condition expression evaluates to true, the
operation succeeds; otherwise, the operation fails", Condition expressions), and a transaction's writes apply all or
none.

History: review13's (G counted, expired with its record trimmed; I' written and deleted by the application, R; the key
reported gone at G; I written and expired, E delivered; I then R read back), then the operator names the key expired
while another run reads back I'. Truth: 2."""

from __future__ import annotations

from leaderboard_core.claims import GONE_PREFIX
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import ROOT, Interleaved, LedgerWorld, kinds, read_back, world
from tests.unit.aggregator.rebase_on_moto import deployment_of
from tests.unit.aggregator.test_deletion_takers_count_nothing import taken_by_a_deletion
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, ledger_items

__all__ = ["world"]  # fixtures, used by name


def test_an_answer_whose_transaction_meets_a_read_back_giving_its_deletion_taker_back_counts_the_expired_download(
    world: LedgerWorld,
) -> None:
    # given the open report taken by R (a deletion), the answer not yet given
    between, _ = taken_by_a_deletion(world)
    # when the operator names the key expired while another run reads back I' (between G and R), after this run read
    # the report and before its first transaction
    interleaved = Interleaved(
        world.dynamodb, "transact_write_items", before=lambda: read_back(world, ROOT, between, between)
    )
    answered = rebase(interleaved, deployment_of(world), expired=[CLAIM])
    assert interleaved.before is None, "the read-back did not land between the read and the transaction"
    # then the answer, judged again on the report as it now is, keeps G: G and I count once each, nothing open, nothing
    # reported
    assert (answered.kept_expired, answered.unplaced) == (1, [])
    assert world.boards() == {("song1", "2018-02"): 2}
    assert ledger_items(world, f"{GONE_PREFIX}{CLAIM}|") == {}
    assert kinds(world) == []
