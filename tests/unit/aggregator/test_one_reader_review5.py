"""A fifth review of one reader per shard (STREAM_READERS=1): the expiry the operator keeps (`--expired-keys`, a set of
kept versions, each keep taken once by the first expiry after it whose old image counts what it kept) and the rebase of
summed boards. Each test is named for what should hold. Those marked xfail are findings: the reason says what happens
instead, silent or loud, and the AWS sentence that allows it. The rest are angles tried that held."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from leaderboard_core.claims import CLAIM_KEY, GONE_PREFIX, claim_key
from leaderboard_core.index_layout import leaderboard_partition, order_of
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import (
    CHILD,
    LEDGER_TABLE,
    OK,
    ROOT,
    TABLE,
    Interleaved,
    LedgerWorld,
    deliver,
    delivered,
    key_of,
    ledger_client,
    plays,
    read_back,
    single_table,
    summed,
    summed_world,
    sums,
    world,
    write,
)
from tests.unit.aggregator.rebase_on_moto import (
    SINGLE_TABLE,
    deployment_of,
    kept_expired,
    rebase_world,
    single_table_deployment,
    write_items,
)

__all__ = ["summed", "world"]  # fixtures, used by name


@pytest.fixture
def sharded(dynamodb: Any, sqs_queue: tuple[Any, str]) -> LedgerWorld:
    """The summed world with each board's index spread over 4 partitions (LEADERBOARD_SHARDS=4)."""
    return summed_world(dynamodb, *sqs_queue, leaderboard_shards=4)


# ------------------------------------------------------------------------------------------------------------ findings


def test_a_key_written_again_with_the_kept_downloads_content_and_expired_again_keeps_both_expired_downloads(
    world: LedgerWorld,
) -> None:
    # given a January download delivered, its expiry by TTL trimmed (never delivered), kept by the operator; the key
    # written again with the same content (January), delivered
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    again = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # when the new item expires by TTL and its REMOVE is delivered
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    # then both expired downloads stay counted in January (retention, S12)
    assert world.boards() == {("song1", "2018-01"): 2}


def test_a_kept_version_whose_remove_is_a_deletion_takes_its_count_back_and_leaves_no_keep_to_a_later_expiry(
    world: LedgerWorld,
) -> None:
    # given a January download delivered, then a REMOVE with no service identity (the application's deletion), not
    # delivered; the repair reports the key gone and the operator names it expired
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    removal = world.delete(ROOT, "song1", 1)
    assert removal is not None
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    assert rebase(world.dynamodb, deployment_of(world), expired=[claim]).kept_expired == 1
    # when that REMOVE is delivered after all, the key is written again into January, and that item expires by TTL
    assert deliver(world, ROOT, delivered(world, ROOT, [removal])) == OK
    again = world.put(ROOT, "song1", 1, "2018-01")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [again, world.last(ROOT)])) == OK
    # then the REMOVE, a deletion (the operator's 'expired' wrong), took the kept count back; the new expired download
    # counts alone
    assert world.boards() == {("song1", "2018-01"): 1}


def test_a_kept_expiry_never_delivered_is_not_taken_by_a_later_expiry_after_other_writes(world: LedgerWorld) -> None:
    # given a January download delivered, its expiry by TTL trimmed (never delivered), kept by the operator; the key
    # written again into February and expired, both delivered
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    february = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [february, world.last(ROOT)])) == OK
    # when the key is written into January a third time and that item expires, both delivered
    january = world.put(ROOT, "song1", 1, "2018-01")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [january, world.last(ROOT)])) == OK
    # then the three expired downloads stay counted: January 2, February 1
    assert world.boards() == {("song1", "2018-01"): 2, ("song1", "2018-02"): 1}


def test_a_key_named_expired_after_its_next_write_is_reported_though_an_earlier_expiry_of_it_was_applied(
    world: LedgerWorld,
) -> None:
    # given a January download delivered and expired, its REMOVE delivered; the key written again into February,
    # delivered, that item expired with its REMOVE trimmed, and the repair reporting the key gone
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    february = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [february])) == OK
    world.expire(ROOT, "song1", 1)
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    # when the key is written again into March, delivered, before the operator names it expired
    march = world.put(ROOT, "song1", 1, "2018-03")
    assert deliver(world, ROOT, delivered(world, ROOT, [march])) == OK
    write_items(world)
    report = rebase(world.dynamodb, deployment_of(world), expired=[claim])
    # then February's expired download is counted beside January's and March's, or the run reports the key
    left = [entry["claimKey"] for entry in report.gone + report.unplaced]
    kept = world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1, ("song1", "2018-03"): 1}
    assert kept or claim in left


def test_a_key_named_expired_after_it_was_written_and_expired_again_is_reported_not_taken_for_that_expiry(
    world: LedgerWorld,
) -> None:
    # given a February download delivered, its expiry by TTL trimmed, the repair reporting the key gone; the key written
    # again into March, delivered, and that item expired by TTL, its REMOVE delivered
    february = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [february])) == OK
    world.expire(ROOT, "song1", 1)
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    march = world.put(ROOT, "song1", 1, "2018-03")
    assert deliver(world, ROOT, delivered(world, ROOT, [march])) == OK
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    # when the operator names the key expired
    write_items(world)
    report = rebase(world.dynamodb, deployment_of(world), expired=[claim])
    # then March's expiry is not taken for February's: nothing is kept and the key is reported for a recount
    assert report.kept_expired == 0
    assert [entry["claimKey"] for entry in report.unplaced] == [claim]
    assert world.boards() == {("song1", "2018-03"): 1}


def test_a_key_reported_gone_at_two_versions_keeps_the_one_still_gone_and_reports_the_other(
    world: LedgerWorld,
) -> None:
    # given a February download delivered, its expiry by TTL trimmed, reported gone; the key written again into March,
    # delivered, that item expired by TTL with its REMOVE trimmed too, reported gone again
    february = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [february])) == OK
    world.expire(ROOT, "song1", 1)
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    march = world.put(ROOT, "song1", 1, "2018-03")
    assert deliver(world, ROOT, delivered(world, ROOT, [march])) == OK
    world.expire(ROOT, "song1", 1)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    # when the operator names both reports expired (each by its label: the key has two open), twice, then (having
    # recounted) the key deleted
    items = world.dynamodb.scan(TableName=LEDGER_TABLE, ConsistentRead=True)["Items"]
    prefix = f"{GONE_PREFIX}{claim}|"
    both = sorted(
        f"{claim}@{item[CLAIM_KEY]['S'].removeprefix(prefix)}"
        for item in items
        if item[CLAIM_KEY]["S"].startswith(prefix)
    )
    assert len(both) == 2
    report = rebase(world.dynamodb, deployment_of(world), expired=both)
    again = rebase(world.dynamodb, deployment_of(world), expired=both)
    closed = rebase(world.dynamodb, deployment_of(world), deleted=[claim])
    # then March's expired download is kept and February's, no longer counted, is reported for a recount by each run
    # until the operator closes it
    assert report.kept_expired == 1
    assert [entry["claimKey"] for entry in report.unplaced] == [claim]
    assert again.kept_expired == 0
    assert [entry["claimKey"] for entry in again.unplaced] == [claim]
    assert (closed.refusals_closed, closed.differences_remain) == (1, False)
    assert world.boards() == {("song1", "2018-03"): 1}


def test_a_key_named_expired_whose_next_writes_expiry_came_before_that_write_is_reported(world: LedgerWorld) -> None:
    # given a February download delivered, its expiry by TTL trimmed, the repair reporting the key gone; the key written
    # again into March in a batch given up, and that item expired by TTL, its REMOVE delivered
    february = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [february])) == OK
    world.expire(ROOT, "song1", 1)
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    world.put(ROOT, "song1", 1, "2018-03")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    # when the operator names the key expired
    write_items(world)
    report = rebase(world.dynamodb, deployment_of(world), expired=[claim])
    # then March's expiry, which follows February's record but kept March, is not taken for February's: reported
    assert [entry["claimKey"] for entry in report.unplaced] == [claim]
    assert world.boards() == {("song1", "2018-03"): 1}


def test_a_gone_versions_expiry_delivered_before_the_keys_next_write_and_the_operators_answer_counts_once(
    world: LedgerWorld,
) -> None:
    # given a February download delivered, expired by TTL, the repair reporting it gone (its REMOVE late, not trimmed);
    # the REMOVE then delivered, and the key written again into March, delivered
    february = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [february])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    assert deliver(world, ROOT, delivered(world, ROOT, [expiry])) == OK
    march = world.put(ROOT, "song1", 1, "2018-03")
    assert deliver(world, ROOT, delivered(world, ROOT, [march])) == OK
    # when the operator names the key expired, twice
    write_items(world)
    reports = [rebase(world.dynamodb, deployment_of(world), expired=[claim]) for _ in range(2)]
    # then the expiry delivered is the one the report named: nothing more is kept, nothing is reported
    assert [(report.kept_expired, report.differences_remain) for report in reports] == [(0, False), (0, False)]
    assert world.boards() == {("song1", "2018-02"): 1, ("song1", "2018-03"): 1}


# ------------------------------------------------------------------------------------------------ angles that held


def test_two_keeps_of_one_key_at_two_versions_read_back_in_reverse_order_count_each_once(world: LedgerWorld) -> None:
    # given a January download delivered, its expiry in a given-up batch, kept by the operator; the key written again
    # into February, delivered, and that item's expiry in a given-up batch too, kept by the operator
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    january = world.last(ROOT)
    kept_expired(world, "song1", 1)
    again = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    world.expire(ROOT, "song1", 1)
    february = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when recover reads back February's expiry, then January's, each twice
    for record in (february, february, january, january):
        assert read_back(world, ROOT, record, record)["readBack"] == "applied"
    # then each expired download counts once, where its item counted
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}


def test_two_expired_keys_runs_at_once_keep_the_expired_download_once(world: LedgerWorld) -> None:
    # given a January download delivered, its expiry by TTL trimmed, the repair reporting the key gone
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    # when the operator's --expired-keys run is started twice, the second keeping the key between the first's read
    # and its transaction, and the expiry is then read back after all
    kept: list[int] = []

    def other_run() -> None:
        kept.append(rebase(world.dynamodb, deployment_of(world), expired=[claim]).kept_expired)

    first_run = rebase(
        Interleaved(world.dynamodb, "transact_write_items", other_run), deployment_of(world), expired=[claim]
    )
    assert read_back(world, ROOT, expiry, expiry)["readBack"] == "applied"
    # then one run kept it, and the expired download counts once
    assert sorted([first_run.kept_expired, *kept]) == [0, 1]
    assert world.boards() == {("song1", "2018-01"): 1}


def test_a_keep_between_the_handlers_read_and_transaction_of_the_expiry_counts_it_once(world: LedgerWorld) -> None:
    # given a January download delivered, its expiry by TTL late, the repair reporting the key gone
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    kept: list[int] = []

    def keep() -> None:
        write_items(world)
        kept.append(rebase(world.dynamodb, deployment_of(world), expired=[claim]).kept_expired)

    ledger_client(world, Interleaved(world.dynamodb, "transact_write_items", keep))
    # when the expiry is delivered and the operator's keep lands between the handler's read and its transaction
    assert deliver(world, ROOT, delivered(world, ROOT, [expiry])) == OK
    # then the expired download counts once in January
    assert kept == [1]
    assert world.boards() == {("song1", "2018-01"): 1}


def test_a_summed_amount_edited_while_the_rebase_runs_ends_at_the_edits_amount(summed: LedgerWorld) -> None:
    # given a download of 2.5 plays delivered, its edit to 4 lost; the rebase reading 4, and before its write the
    # application editing the amount to 6, delivered (a MODIFY that changes only the amount)
    first = summed.put(ROOT, "song1", 1, "2018-01", extra=plays("2.5"))
    assert deliver(summed, ROOT, delivered(summed, ROOT, [first])) == OK
    summed.put(ROOT, "song1", 1, "2018-01", extra=plays("4"))

    def edit() -> None:
        again = summed.put(ROOT, "song1", 1, "2018-01", extra=plays("6"))
        write_items(summed)
        assert deliver(summed, ROOT, delivered(summed, ROOT, [again])) == OK

    # when the repair rebases the ledger with the edit between its read and its write
    interleaved = Interleaved(summed.dynamodb, "transact_write_items", edit)
    rebase_world(summed, interleaved)
    # then January holds 6 plays
    assert interleaved.calls >= 1
    assert sums(summed) == {("song1", "2018-01"): Decimal(6)}


def test_a_summed_amount_edited_after_a_rebase_and_its_lost_edit_delivered_late_ends_at_the_last_amount(
    summed: LedgerWorld,
) -> None:
    # given a download of 2.5 plays delivered, its edit to 4 lost and rebased, then edited to 6, delivered
    first = summed.put(ROOT, "song1", 1, "2018-01", extra=plays("2.5"))
    assert deliver(summed, ROOT, delivered(summed, ROOT, [first])) == OK
    lost = summed.put(ROOT, "song1", 1, "2018-01", extra=plays("4"))
    rebase_world(summed)
    last = summed.put(ROOT, "song1", 1, "2018-01", extra=plays("6"))
    assert deliver(summed, ROOT, delivered(summed, ROOT, [last])) == OK
    # when the lost edit is delivered after all, and the repair runs again
    assert deliver(summed, ROOT, delivered(summed, ROOT, [lost])) == OK
    report = rebase_world(summed)
    # then January holds 6 plays and nothing is left to repair
    assert sums(summed) == {("song1", "2018-01"): Decimal(6)}
    assert (report.moved, report.differences_remain) == (0, False)


def test_a_summed_amount_past_what_a_sum_takes_is_moved_out_and_the_rest_repaired(
    summed: LedgerWorld,
) -> None:
    # given a download of 2.5 plays delivered, edited to 10^12 plays (past what a sum takes exactly), the edit lost, and
    # a download of 3 plays never delivered
    first = summed.put(ROOT, "song1", 1, "2018-01", extra=plays("2.5"))
    assert deliver(summed, ROOT, delivered(summed, ROOT, [first])) == OK
    summed.put(ROOT, "song1", 1, "2018-01", extra=plays("1000000000000"))
    summed.put(ROOT, "song2", 1, "2018-01", extra=plays("3"))
    # when the repair rebases the ledger
    report = rebase_world(summed)
    # then song1 counts nowhere (as the aggregator rejects it) and song2 counts its 3 plays
    assert report.differences_remain is False
    assert sums(summed) == {("song2", "2018-01"): Decimal(3)}


def test_a_keep_between_the_handlers_read_and_transaction_of_the_keys_next_write_keeps_the_expired_download(
    world: LedgerWorld,
) -> None:
    # given a January download delivered, its expiry by TTL trimmed, the repair reporting the key gone, and the key
    # written again into February
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    again = world.put(ROOT, "song1", 1, "2018-02")
    kept: list[int] = []

    def keep() -> None:
        kept.append(rebase(world.dynamodb, deployment_of(world), expired=[claim]).kept_expired)

    ledger_client(world, Interleaved(world.dynamodb, "transact_write_items", keep))
    # when the write is delivered and the operator's keep lands between the handler's read and its transaction
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # then the handler read again: the expired download stays in January, the new one counts in February
    assert kept == [1]
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}


def test_a_kept_expiry_of_a_parent_read_back_after_the_childs_write_counts_once(world: LedgerWorld) -> None:
    # given a January download delivered from the parent shard, its expiry in a given-up batch of the parent, kept by
    # the operator; a split, and the key written again into January on the child, delivered
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    world.split(ROOT, CHILD, 5_000_000)
    again = world.put(CHILD, "song1", 1, "2018-01")
    assert deliver(world, CHILD, delivered(world, CHILD, [again])) == OK
    # when recover reads the parent's expiry back, twice (a bisected batch's retry)
    assert read_back(world, ROOT, expiry, expiry)["readBack"] == "applied"
    assert read_back(world, ROOT, expiry, expiry)["readBack"] == "applied"
    # then the expired download counts once beside the new one: January 2
    assert world.boards() == {("song1", "2018-01"): 2}


def test_a_summed_aggregate_the_rebase_created_moves_its_order_by_each_later_amount(summed: LedgerWorld) -> None:
    # given a download of 1.25 plays never delivered, the rebase creating its aggregate
    summed.put(ROOT, "song2", 1, "2018-01", extra=plays("1.25"))
    rebase_world(summed)
    # when a second download of 1 play is delivered to it
    second = summed.put(ROOT, "song2", 2, "2018-01", extra=plays("1"))
    assert deliver(summed, ROOT, delivered(summed, ROOT, [second])) == OK
    # then its order is the sum's, 2.25, with the tie-breaker a sum takes, as if the aggregator had created it
    key = {"songID": {"S": "song2"}, "SK": {"S": "2018-01"}}
    aggregate = summed.dynamodb.get_item(TableName=TABLE, Key=key)["Item"]
    assert int(aggregate["LeaderboardOrder"]["N"]) == order_of(Decimal("2.25"), "song2", summed=True)


def test_an_expiry_kept_after_a_rebase_moved_its_key_is_taken_by_its_remove_read_back(world: LedgerWorld) -> None:
    # given a January download delivered, its edit into February lost and rebased (Version the rebase's), the item then
    # expired by TTL in a given-up batch, the repair reporting it gone, and the operator naming it expired
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    edit = world.put(ROOT, "song1", 1, "2018-02")
    assert rebase_world(world).moved == 1
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when recover reads back the lost edit and the expiry, and the key is then written again into March, delivered
    assert read_back(world, ROOT, edit, expiry)["readBack"] == "applied"
    again = world.put(ROOT, "song1", 1, "2018-03")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # then the expired download counts once, in February, beside the new one in March
    assert world.boards() == {("song1", "2018-02"): 1, ("song1", "2018-03"): 1}


def test_a_backfilled_key_kept_as_expired_whose_remove_comes_after_its_next_write_counts_once(
    world: LedgerWorld,
) -> None:
    # given a download the backfill counted in January (no Version), expired by TTL in a given-up batch, kept by the
    # operator, and the key written again into February, delivered
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    again = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # when recover reads the expiry back, twice
    assert read_back(world, ROOT, expiry, expiry)["readBack"] == "applied"
    assert read_back(world, ROOT, expiry, expiry)["readBack"] == "applied"
    # then the expired download counts once in January, beside the new one in February
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}


def test_a_summed_aggregate_the_rebase_creates_beside_leaderboard_shards_ties_as_the_aggregators_does(
    sharded: LedgerWorld,
) -> None:
    # given LEADERBOARD_SHARDS=4: a download of 1.25 plays of song2 never delivered, one of 1.25 of song3 delivered
    sharded.put(ROOT, "song2", 1, "2018-01", extra=plays("1.25"))
    third = sharded.put(ROOT, "song3", 1, "2018-01", extra=plays("1.25"))
    assert deliver(sharded, ROOT, delivered(sharded, ROOT, [third])) == OK
    # when the repair rebases the ledger, creating song2's aggregate
    assert rebase_world(sharded).counted == 1
    # then both sit in their shard's partition with the sum's order: the tie ranks the smaller id first
    orders = {}
    for song in ("song2", "song3"):
        key = {"songID": {"S": song}, "SK": {"S": "2018-01"}}
        aggregate = sharded.dynamodb.get_item(TableName=TABLE, Key=key)["Item"]
        assert aggregate["Month"] == {"S": leaderboard_partition("2018-01", song, 4)}
        orders[song] = int(aggregate["LeaderboardOrder"]["N"])
        assert orders[song] == order_of(Decimal("1.25"), song, summed=True)
    assert orders["song2"] > orders["song3"]


def test_a_summed_single_table_download_moved_to_another_entity_by_a_lost_edit_is_rebased_there_once(
    summed: LedgerWorld,
) -> None:
    # given a single-table download of 2.5 plays for song1, delivered; its edit to song2 with 4 plays lost
    deployment = single_table_deployment(summed)
    key, first = single_table(1, "song1")
    first = {**first, **plays("2.5")}
    inserted = write(summed, "INSERT", key, None, first)
    assert deliver(summed, ROOT, delivered(summed, ROOT, [inserted])) == OK
    moved = {**first, "songID": {"S": "song2"}, **plays("4")}
    edit = write(summed, "MODIFY", key, first, moved)
    summed.dynamodb.put_item(TableName=SINGLE_TABLE, Item=moved)
    # when the repair rebases the ledger, and the lost edit is then delivered after all, twice
    assert rebase(summed.dynamodb, deployment).moved == 1
    assert deliver(summed, ROOT, delivered(summed, ROOT, [edit])) == OK
    assert deliver(summed, ROOT, delivered(summed, ROOT, [inserted, edit])) == OK
    # then song2 holds its 4 plays once, song1 nothing, and a second repair finds nothing to do
    assert sums(summed) == {("song2", "2018-01"): Decimal(4)}
    again = rebase(summed.dynamodb, deployment)
    assert (again.moved, again.counted, again.differences_remain) == (0, 0, False)
