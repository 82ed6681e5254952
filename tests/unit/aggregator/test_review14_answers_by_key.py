"""review14: the operator answers by key (`--deleted-keys`, `--expired-keys`), the ledger keeps gone reports by version
(`gone#<key>|<label>`), and fix57 leaves a refused report open for as long as it is not answered. A key with a refused
report open and a later gone report of its own (the key written again, that item gone too, its record given up) has
two reports that one answer reaches together; a key named both ways is refused.

- Closing the refused report (`--deleted-keys`, fix57's only way to close it) also takes back the other report's
  version: the author's left item, judged here. Quiet: the run's `taken_back` counts it; no entry names the second
  report as answered by the close.

The refused report here is a windowless read version's (a refusal for a removal with no TTL identity is none any more:
test_deletion_takers_count_nothing.py).

AWS: the mapping's discarded batches are read back late and in any order ("Lambda event source mappings process each
event at least once")."""

from __future__ import annotations

from leaderboard_core.claims import GONE_PREFIX
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import (
    OK,
    ROOT,
    TABLE,
    LedgerWorld,
    deliver,
    delivered,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of, rebase_world, write_items
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, ledger_items
from tests.unit.aggregator.test_review13_refusal_lost_on_crash import windowless_read_version_report

__all__ = ["world"]  # fixtures, used by name


def written_again_and_gone(world: LedgerWorld) -> str:
    """The key written again (I2, delivered) and that item expired by TTL (its record given up); the repair reports the
    key gone at I2 beside the refused report still open. Returns I2."""
    again = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    world.expire(ROOT, "song1", 1)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    assert len(ledger_items(world, f"{GONE_PREFIX}{CLAIM}|")) == 2
    return again


def added_back_by_hand(world: LedgerWorld, month: str, amount: int) -> None:
    """The operator adds a count to an aggregate by hand, as a refusal tells it to."""
    world.dynamodb.update_item(
        TableName=TABLE,
        Key={"songID": {"S": "song1"}, "SK": {"S": month}},
        UpdateExpression="ADD DownloadCount :amount",
        ExpressionAttributeValues={":amount": {"N": str(amount)}},
    )


def test_closing_a_refused_report_leaves_the_keys_other_open_report_unanswered(world: LedgerWorld) -> None:
    # given a version read from the table reported gone with no read window, the operator's 'expired' to it refused
    windowless_read_version_report(world)
    write_items(world)
    [refused] = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM]).unplaced
    assert "has no read window" in refused["why"]
    [refused_report] = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|")
    refused_label = refused_report.removeprefix(f"{GONE_PREFIX}{CLAIM}|")
    # and the key written again (I2, counted) and expired by TTL (given up): reported gone at I2
    written_again_and_gone(world)
    assert world.boards() == {("song1", "2018-02"): 2}
    # when the operator closes the refused report, named as the key's other report is open too (--deleted-keys
    # <claim key>@<label>)
    closed = rebase(world.dynamodb, deployment_of(world), deleted=[f"{CLAIM}@{refused_label}"])
    assert closed.refusals_closed == 1
    # then I2's expired download still counts, or its report is still open for the operator's answer
    open_reports = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|")
    assert world.boards() == {("song1", "2018-02"): 2} or open_reports, (
        f"boards {world.boards()}, no report open: I2 taken back by a close meant for G's refusal "
        f"(taken_back {closed.taken_back})"
    )
