"""review14: the operator answers by key (`--deleted-keys`, `--expired-keys`), the ledger keeps gone reports by version
(`gone#<key>|<label>`), and fix57 leaves a refused report open for as long as it is not answered. A key with a refused
report open and a later gone report of its own (the key written again, that item gone too, its record given up) has
two reports that one answer reaches together; a key named both ways is refused.

- Closing the refused report (`--deleted-keys`, fix57's only way to close it) also takes back the other report's
  version: the author's left item, judged here. Quiet: the run's `taken_back` counts it; no entry names the second
  report as answered by the close.
- Answering the other report `--expired-keys` judges the refused one again and applies it if its taker was given back
  since: the refusal's end report (`keep_taken_unsure`) says to name the key "unless its counts were added back to
  entityId's aggregates by hand on that refusal", a warning the operator cannot obey while the second report needs the
  same name. Double count.

AWS: TTL deletions "replicated to global table regions are not identifiable in DynamoDB streams in the regions the
deletion is replicated to" (Working with expired items): the refusal's "a replica's expiry by TTL (then add the counts
back ... by hand)" is an answer the operator may rightly take; the mapping's discarded batches are read back late and
in any order ("Lambda event source mappings process each event at least once")."""

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
    kinds,
    read_back,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of, rebase_world, write_items
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, ledger_items
from tests.unit.aggregator.test_review13_refusal_lost_on_crash import keep_taken_by_a_delete_below_the_bound
from tests.unit.aggregator.test_review14_closed_refusals import refused_for_a_provisional_taker

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
    # given G deleted by the application (R, given up), the key reported gone at G, written again (I) and expired (E);
    # I and R read back; the operator's 'expired' refused for R (a deletion: the count is right as it is)
    keep_taken_by_a_delete_below_the_bound(world)
    write_items(world)
    [refused] = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM]).unplaced
    assert "the count is right as it is" in refused["why"]
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


def test_answering_a_later_report_of_the_key_does_not_apply_a_lifted_refusal_the_operator_put_right_by_hand(
    world: LedgerWorld,
) -> None:
    # given review13's history to the refusal for R; the operator knows G expired by TTL, so R, told G's removal, can
    # only be a replica's expiry: it adds G's count back by hand, as the refusal says
    between, _ = refused_for_a_provisional_taker(world)
    added_back_by_hand(world, "2018-02", 1)
    assert world.boards() == {("song1", "2018-02"): 2}
    # and I' read back: the refusal's end reported ("name the key ... unless its counts were added back by hand")
    assert read_back(world, ROOT, between, between)["readBack"] == "applied"
    assert kinds(world) == ["keep_taken_unsure"]
    # and the key written again (I2, counted) and expired by TTL (given up): reported gone at I2
    written_again_and_gone(world)
    assert world.boards() == {("song1", "2018-02"): 3}
    # when the operator answers I2's report: expired
    rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    # then G, I and I2 count once each
    assert world.boards() == {("song1", "2018-02"): 3}, f"boards {world.boards()}: G's count applied again"
