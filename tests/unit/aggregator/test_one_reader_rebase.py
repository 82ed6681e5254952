"""One-reader mode's repair (`leaderboard_tools.recover.rebase`): each key's ledger item moved to what its item counts,
with the aggregates, by conditioned transactions beside the handler (docs/exactly-once-one-reader.md). The
records lost here are those a trim or a given-up batch read back too late never applied."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError

from leaderboard_core.claims import CLAIM_KEY, STREAM_FROM, claim_key, decreased_of, decreased_value
from leaderboard_core.index_layout import FIRST_REACHED, order_of
from leaderboard_tools.recover.rebase import rebase, rebase_refusal
from tests.unit.aggregator.ledger_on_moto import (
    LEDGER_TABLE,
    OK,
    PLAYS,
    ROOT,
    TABLE,
    Interleaved,
    LedgerWorld,
    deliver,
    delivered,
    fails_at,
    in_index,
    key_of,
    ledger_client,
    ledger_item,
    plays,
    summed,
    sums,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of, rebase_world, write_items

__all__ = ["summed", "world"]  # fixtures, used by name


def ledger(world: LedgerWorld) -> dict[str, dict[str, Any]]:
    items = world.dynamodb.scan(TableName=LEDGER_TABLE, ConsistentRead=True)["Items"]
    return {item[CLAIM_KEY]["S"]: item for item in items}


def test_the_rebase_makes_the_boards_equal_the_items_recount(world: LedgerWorld) -> None:
    # given a download delivered whose edit into February was lost, one never delivered, one written before the
    # stream, and one delivered and in step
    lost = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [lost])) == OK
    world.put(ROOT, "song1", 1, "2018-02")
    world.put(ROOT, "song2", 1, "2018-01")
    world.history_before_the_stream("song3", 1, "2018-03")
    in_step = world.put(ROOT, "song4", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [in_step])) == OK
    # when the repair rebases the ledger
    report = rebase_world(world)
    # then every board equals the recount of the items, and nothing is left to the operator
    assert world.boards() == world.recount()
    assert world.recount() == {("song1", "2018-02"): 1, ("song2", "2018-01"): 1, ("song3", "2018-03"): 1,
                               ("song4", "2018-01"): 1}  # fmt: skip
    assert (report.moved, report.counted, report.in_step, report.differences_remain) == (1, 2, 1, False)
    assert not in_index(world, "song1", "2018-01")


def test_a_key_edited_after_the_rebase_counts_once_where_its_last_image_says(world: LedgerWorld) -> None:
    # given a download the backfill counted in January, its edit into February lost, and the rebase
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.put(ROOT, "song1", 1, "2018-02")
    rebase_world(world)
    # when the download is edited into March and the edit delivered
    again = world.put(ROOT, "song1", 1, "2018-03")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # then it counts once, in March
    assert world.boards() == world.recount() == {("song1", "2018-03"): 1}


def test_a_record_older_than_the_ledgers_version_delivered_after_the_rebase_changes_nothing(world: LedgerWorld) -> None:
    # given a January download delivered, an older record of it (its INSERT) retried later, and its edit into
    # February lost and rebased
    first = world.put(ROOT, "song1", 1, "2018-01")
    edit = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    world.put(ROOT, "song1", 1, "2018-03")
    rebase_world(world)
    # when the INSERT (before the ledger's Version) and the February edit (at it) are delivered after the rebase
    assert deliver(world, ROOT, delivered(world, ROOT, [first, edit])) == OK
    # then nothing moves: the download counts in March, as its item says
    assert world.boards() == world.recount() == {("song1", "2018-03"): 1}


def test_a_key_whose_item_is_gone_is_reported_not_guessed(world: LedgerWorld) -> None:
    # given a January download delivered, then deleted, its REMOVE lost (a deletion or an expiry: the table no longer
    # says which)
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.delete(ROOT, "song1", 1)
    # when the repair rebases the ledger
    report = rebase_world(world)
    # then the key is reported, and what it counts is left as it is
    assert report.differences_remain
    assert [(gone["entityId"], gone["counts"]) for gone in report.gone] == [("song1", {"2018-01": "1"})]
    assert world.boards() == {("song1", "2018-01"): 1}


def test_running_the_rebase_twice_changes_nothing_the_second_time(world: LedgerWorld) -> None:
    # given a download whose edit into February was lost, one never delivered, and a first rebase
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.put(ROOT, "song1", 1, "2018-02")
    world.put(ROOT, "song2", 1, "2018-01")
    rebase_world(world)
    boards, items = world.boards(), ledger(world)
    # when the repair runs again
    report = rebase_world(world)
    # then it writes nothing: every key is in step
    assert (report.moved, report.counted, report.in_step) == (0, 0, 2)
    assert (world.boards(), ledger(world)) == (boards, items)


def test_a_handler_transaction_between_the_rebases_read_and_write_wins_and_the_rebase_reads_again(
    world: LedgerWorld,
) -> None:
    # given a January download delivered, its edit into February lost, and an edit into March written and delivered
    # between the rebase's reads of the key and its transaction
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.put(ROOT, "song1", 1, "2018-02")

    def march() -> None:
        again = world.put(ROOT, "song1", 1, "2018-03")
        write_items(world)
        assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK

    # when the repair rebases the ledger
    report = rebase_world(world, Interleaved(world.dynamodb, "transact_write_items", march))
    # then the handler's move decided, the rebase's condition failed, and read again the key was in step
    assert (report.retries, report.moved, report.in_step) == (1, 0, 1)
    assert world.boards() == world.recount() == {("song1", "2018-03"): 1}


def test_a_rebase_between_the_handlers_read_and_transaction_makes_the_handler_read_again(world: LedgerWorld) -> None:
    # given a January download delivered, its edit into February lost, and its edit into March delivered, the rebase
    # moving the key between the handler's read of its ledger item and the handler's transaction
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.put(ROOT, "song1", 1, "2018-02")
    again = world.put(ROOT, "song1", 1, "2018-03")
    rebased: list[Any] = []
    ledger_client(
        world, Interleaved(world.dynamodb, "transact_write_items", lambda: rebased.append(rebase_world(world)))
    )
    # when the mapping delivers the March edit
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # then the rebase moved the key, the handler's condition failed, and read again it moved nothing more
    assert rebased[0].moved == 1
    assert world.boards() == world.recount() == {("song1", "2018-03"): 1}
    assert ledger_item(world, "song1", 1)["Version"]["S"].endswith(again)


def test_a_key_whose_ledger_item_was_written_with_two_readers_is_reported_and_left_as_it_is(
    world: LedgerWorld,
) -> None:
    # given a download whose ledger item names a StreamFrom and no Version (written with two readers per shard),
    # counting January while its item says February
    world.history_before_the_stream("song1", 1, "2018-02")
    claim = claim_key(key_of("song1", 1))
    item = {
        CLAIM_KEY: {"S": claim},
        STREAM_FROM: {"S": f"stream|{ROOT}|1"},
        "Contribution": {"M": {"2018-01": {"N": "1"}}},
    }
    world.dynamodb.put_item(TableName=LEDGER_TABLE, Item=item)
    # when the repair rebases the ledger
    report = rebase_world(world)
    # then the key is reported, never guessed, and its ledger item is as it was
    assert [entry["claimKey"] for entry in report.unplaced] == [claim]
    assert report.differences_remain
    assert ledger(world)[claim] == item


def test_a_rebase_keeps_the_aggregates_an_earlier_entity_move_took_from_in_the_handlers_format(
    world: LedgerWorld,
) -> None:
    # given a January download delivered, whose ledger item also names an aggregate of another song its key counted
    # for before (a single-table download moved between songs: an [entity, board] pair in Decreased), and its edit
    # into February lost
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    claim = claim_key(key_of("song1", 1))
    world.dynamodb.update_item(
        TableName=LEDGER_TABLE,
        Key={CLAIM_KEY: {"S": claim}},
        UpdateExpression="SET Decreased = :moved",
        ExpressionAttributeValues={":moved": {"L": [{"L": [{"S": "song9"}, {"S": "2018-01"}]}]}},
    )
    world.put(ROOT, "song1", 1, "2018-02")
    # when the repair rebases the ledger
    report = rebase_world(world)
    # then the key moves to February, and its ledger item names both the earlier move's aggregate and January's, each
    # under its own song, as the handler reads them
    assert (report.moved, report.differences_remain) == (1, False)
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}
    assert decreased_of(ledger(world)[claim]) == {("song9", "2018-01"), ("song1", "2018-01")}


def test_decreased_reads_plain_boards_against_the_items_entity_and_pairs_as_written() -> None:
    # given the aggregates a key took from: two of its own song's boards and one of another song's
    taken = {("song1", "2018-01"), ("song1", "2018-W03"), ("song9", "2018-01")}
    # when they are written beside Entity song1 and read back
    value = decreased_value(taken, "song1")
    # then song1's boards are plain, song9's a pair, and reading gives back exactly what was written
    assert value == {"L": [{"S": "2018-01"}, {"S": "2018-W03"}, {"L": [{"S": "song9"}, {"S": "2018-01"}]}]}
    assert decreased_of({"Entity": {"S": "song1"}, "Decreased": value}) == taken


def test_a_rebase_between_the_handlers_read_and_transaction_of_a_backfilled_key_makes_the_handler_read_again(
    world: LedgerWorld,
) -> None:
    # given a January download the backfill counted (its ledger item has no Version), its edit into February lost,
    # and its edit into March delivered, the rebase moving the key between the handler's read and its transaction
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.put(ROOT, "song1", 1, "2018-02")
    again = world.put(ROOT, "song1", 1, "2018-03")
    rebased: list[Any] = []
    ledger_client(
        world, Interleaved(world.dynamodb, "transact_write_items", lambda: rebased.append(rebase_world(world)))
    )
    # when the mapping delivers the March edit
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # then the rebase moved the key to February, the handler's condition on what it read failed, and read again it
    # moved the key from February to March: it counts once, in March
    assert rebased[0].moved == 1
    assert world.boards() == world.recount() == {("song1", "2018-03"): 1}


def test_a_summed_rebase_moves_each_key_to_its_items_amount(summed: LedgerWorld) -> None:
    # given summed boards: a download of 2.5 plays delivered whose edit to 4 was lost, one of 1.25 never delivered,
    # and one of 3 written before the stream
    first = summed.put(ROOT, "song1", 1, "2018-01", extra=plays("2.5"))
    assert deliver(summed, ROOT, delivered(summed, ROOT, [first])) == OK
    summed.put(ROOT, "song1", 1, "2018-01", extra=plays("4"))
    summed.put(ROOT, "song2", 1, "2018-01", extra=plays("1.25"))
    summed.history_before_the_stream("song3", 1, "2018-03", extra=plays("3"))
    # when the repair rebases the ledger
    report = rebase_world(summed)
    # then every board holds its items' amounts, and each ledger item the amount, as the aggregator's holds it
    assert sums(summed) == {("song1", "2018-01"): 4, ("song2", "2018-01"): Decimal("1.25"), ("song3", "2018-03"): 3}
    assert (report.moved, report.counted, report.differences_remain) == (1, 2, False)
    assert ledger_item(summed, "song1", 1)["Contribution"] == {"M": {"2018-01": {"N": "4"}}}
    assert ledger_item(summed, "song2", 1)["Contribution"] == {"M": {"2018-01": {"N": "1.25"}}}


def test_a_summed_aggregate_the_rebase_adds_is_ordered_as_the_aggregator_orders_sums(summed: LedgerWorld) -> None:
    # given a download of 1.25 plays never delivered
    summed.put(ROOT, "song2", 1, "2018-01", extra=plays("1.25"))
    # when the repair rebases the ledger
    rebase_world(summed)
    # then its aggregate's order is the sum's, with the tie-breaker a sum takes (the id's first 8 bytes)
    key = {"songID": {"S": "song2"}, "SK": {"S": "2018-01"}}
    aggregate = summed.dynamodb.get_item(TableName=TABLE, Key=key)["Item"]
    assert int(aggregate["LeaderboardOrder"]["N"]) == order_of(Decimal("1.25"), "song2", summed=True)
    assert in_index(summed, "song2", "2018-01")


def test_a_summed_key_edited_after_the_rebase_moves_on_from_the_rebased_amount(summed: LedgerWorld) -> None:
    # given a download of 2.5 plays delivered, its edit to 4 lost, and the rebase
    first = summed.put(ROOT, "song1", 1, "2018-01", extra=plays("2.5"))
    assert deliver(summed, ROOT, delivered(summed, ROOT, [first])) == OK
    summed.put(ROOT, "song1", 1, "2018-01", extra=plays("4"))
    rebase_world(summed)
    # when the download is edited to 7.5 plays in February and the edit delivered
    again = summed.put(ROOT, "song1", 1, "2018-02", extra=plays("7.5"))
    assert deliver(summed, ROOT, delivered(summed, ROOT, [again])) == OK
    # then the aggregator moved it from the rebased 4: January back at 0 and out of the index, February 7.5
    assert sums(summed) == {("song1", "2018-02"): Decimal("7.5")}
    assert not in_index(summed, "song1", "2018-01")


def test_a_summed_key_whose_amount_cannot_be_summed_is_moved_out_of_its_boards(summed: LedgerWorld) -> None:
    # given a download of 2.5 plays delivered, then edited to a Plays that is no number (the aggregator rejects such
    # a download: it counts nowhere), the edit lost
    first = summed.put(ROOT, "song1", 1, "2018-01", extra=plays("2.5"))
    assert deliver(summed, ROOT, delivered(summed, ROOT, [first])) == OK
    summed.put(ROOT, "song1", 1, "2018-01", extra={PLAYS: {"S": "12"}})
    # when the repair rebases the ledger
    report = rebase_world(summed)
    # then the key moves to nothing: January is back at 0 and out of the index
    assert (report.moved, report.differences_remain) == (1, False)
    assert sums(summed) == {}
    assert not in_index(summed, "song1", "2018-01")


def test_a_summed_key_whose_item_is_gone_is_reported_with_its_amount(summed: LedgerWorld) -> None:
    # given a download of 2.5 plays delivered, then deleted, its REMOVE lost
    first = summed.put(ROOT, "song1", 1, "2018-01", extra=plays("2.5"))
    assert deliver(summed, ROOT, delivered(summed, ROOT, [first])) == OK
    summed.delete(ROOT, "song1", 1)
    # when the repair rebases the ledger
    report = rebase_world(summed)
    # then the key is reported with the amount it counts, left as it is
    assert [(gone["entityId"], gone["counts"]) for gone in report.gone] == [("song1", {"2018-01": "2.5"})]
    assert sums(summed) == {("song1", "2018-01"): Decimal("2.5")}


def test_the_rebase_repairs_summed_boards_and_still_refuses_the_first_reached_tie_break(summed: LedgerWorld) -> None:
    # given the summed world's deployment, and the same with ties broken by first_reached
    deployment = deployment_of(summed)
    first_reached = dataclasses.replace(deployment, tie_break=FIRST_REACHED)
    # when the rebase is asked why it would refuse them
    # then it takes the sums, and refuses first_reached, naming it
    assert deployment.sum_attribute == PLAYS
    assert rebase_refusal(deployment) is None
    assert "first_reached" in (rebase_refusal(first_reached) or "")


def test_a_gone_key_whose_index_step_never_ran_has_its_aggregate_at_0_leave_the_index(world: LedgerWorld) -> None:
    # given song1's only download, delivered in January, and its edit into February, whose invocation stops after its
    # transaction and before its index step (January at 0 still listed, the ledger item's Decreased naming it); then
    # the item expires by TTL and no record of the key is delivered again (the batch given up, read back too late)
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    edit = world.put(ROOT, "song1", 1, "2018-02")
    stops = fails_at(1, "InternalServerError", "UpdateItem")
    ledger_client(world, Interleaved(world.dynamodb, "update_item", instead=stops))
    with pytest.raises(ClientError):
        deliver(world, ROOT, delivered(world, ROOT, [edit]))
    assert in_index(world, "song1", "2018-01")
    world.expire(ROOT, "song1", 1)
    # when the repair rebases the ledger
    report = rebase_world(world)
    # then the key is reported gone, counted in February still (the operator's answer decides it), and January, at 0,
    # has left the index as the handler's index step would have made it
    assert [gone["claimKey"] for gone in report.gone] == [claim_key(key_of("song1", 1))]
    assert world.boards() == {("song1", "2018-02"): 1}
    assert not in_index(world, "song1", "2018-01")


def test_an_expiry_refused_for_its_order_stays_counted_and_its_gone_report_says_the_count_is_the_expirys(
    world: LedgerWorld,
) -> None:
    # given a January download delivered in one shard, then expired by TTL, the expiry in a shard that no known lineage
    # joins to the first (a pause past the retention let the shard between them be deleted unlisted)
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    unrelated = "shardId-00000001000000000000-cccc0000"
    world.split(None, unrelated, first_sequence=2_000_000)
    world.expire(unrelated, "song1", 1)
    expiry = str(world.shards[unrelated].records[-1]["dynamodb"]["SequenceNumber"])
    # when the mapping delivers the expiry, and the repair rebases the ledger
    deliver(world, unrelated, delivered(world, unrelated, [expiry]))
    refused = world.reports()
    report = rebase_world(world)
    # then the expiry was refused for its order yet kept by its own item (the key's own count left as it was), and the
    # gone report names that item and asks for --deleted-keys; so answered, the download counts once, as it expired
    assert {message["kind"] for message in refused} == {"refused_record"}
    assert world.boards() == {("song1", "2018-01"): 2}
    claim = claim_key(key_of("song1", 1))
    (gone,) = report.gone
    assert gone["claimKey"] == claim
    assert list(gone["unorderedExpiries"].values()) == [ledger(world)[claim]["Version"]["S"]]
    assert "--deleted-keys" in gone["why"].rpartition("An expiry of this key")[2]
    assert rebase(world.dynamodb, deployment_of(world), deleted=[claim]).taken_back == 1
    assert world.boards() == {("song1", "2018-01"): 1}
