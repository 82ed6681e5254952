"""review15: fix58 answers per report (`<claimKey>@<label>`), but a run still skips the key of any name in
`--expired-keys` when it lists the refusals left open (`GoneKeys.check_not_kept` -> `_still_refused(self.expired -
left)`): written when an answer to a key judged all its reports, so that the key's refusals were said by the judging
itself. Now an answer to one report of a key judges only that one, and the key's other refused report, open, is
neither judged nor listed: the run ends with nothing `unplaced`, though the docs say a refused report "is listed
`unplaced` by every run and judged again on each answer" (docs/exactly-once-one-reader.md).

AWS: TTL deletions "replicated to global table regions are not identifiable in DynamoDB streams in the regions the
deletion is replicated to" (Working with expired items), so the refusal for a removal with no TTL identity is the
operator's to judge; "Lambda event source mappings process each event at least once" (event source mappings).

History (review14's): G delivered, removed with no TTL identity (R, given up), reported gone, written again (I, given
up) and expired (E, delivered); I then R read back; the operator's 'expired' refused for R (report G open, `Refused`).
The key written again (I2, counted) and expired, its record given up: reported gone at I2. The operator answers I2's
report alone (`--expired-keys <key>@<I2>`). Truth: I2's answer applies, and G's report is still open and unanswered:
the run must still say so."""

from __future__ import annotations

import pytest

from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import LedgerWorld, world
from tests.unit.aggregator.rebase_on_moto import deployment_of
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM
from tests.unit.aggregator.test_review15_held import two_open_reports

__all__ = ["world"]  # fixtures, used by name


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="review15 F3 (misleading: a refusal unsaid for a run): a run answering one report of a key by its label "
    "neither judges nor lists the key's other refused report, still open; the run ends with nothing unplaced",
)
def test_answering_one_report_by_its_label_still_lists_the_keys_other_refused_report(world: LedgerWorld) -> None:
    # given the key's refused report (G, taken by R) and its later report (I2), both open
    refused_label, other_label = two_open_reports(world)
    # when the operator answers I2's report alone: expired
    answered = rebase(world.dynamodb, deployment_of(world), expired=[f"{CLAIM}@{other_label}"])
    # then I2's answer applies, and the run still lists G's refusal, open
    assert answered.kept_expired == 1
    listed = [entry["why"] for entry in answered.unplaced if entry["claimKey"] == CLAIM]
    assert any(refused_label in why for why in listed), (
        f"G's refused report ({refused_label}) open and not listed: unplaced {answered.unplaced}, differences remain "
        f"{answered.differences_remain}"
    )
