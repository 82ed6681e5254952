"""A third review of one reader per shard (STREAM_READERS=1): the repair (the rebase of the ledger) racing the handler,
itself and the operator, and the trimmed check at the retention's edge. Each test is named for what should hold. Those
marked xfail are findings: the reason says what happens instead, silent or loud, and the AWS sentence that allows it.
The rest are angles tried that held."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from leaderboard_core.claims import backfill_claim, claim_key
from leaderboard_tools.recover.rebase import RebaseReport, rebase
from tests.unit.aggregator.ledger_on_moto import (
    CHILD,
    LEDGER_TABLE,
    OK,
    ROOT,
    Interleaved,
    LedgerWorld,
    backfill_update,
    counts,
    deliver,
    delivered,
    fails_at,
    in_index,
    key_of,
    kinds,
    ledger_client,
    ledger_item,
    ledger_item_of,
    on_call,
    single_table,
    world,
    write,
)
from tests.unit.aggregator.rebase_on_moto import (
    SINGLE_TABLE,
    deployment_of,
    rebase_world,
    single_table_deployment,
    write_items,
)
from tests.unit.conftest import FakeLambdaContext

DAY = 24 * 3600

__all__ = ["world"]  # fixtures, used by name


def backfilled(world: LedgerWorld, key: dict[str, Any], image: dict[str, Any]) -> None:
    """The item as the backfill finds it, in the table and counted (its ledger item has no Version)."""
    song, month = image["songID"]["S"], image["Timestamp"]["S"][:7]
    world.dynamodb.put_item(TableName=SINGLE_TABLE, Item=image)
    put = backfill_claim(LEDGER_TABLE, key, song, {month: 1})
    world.dynamodb.transact_write_items(TransactItems=[put, backfill_update(song, month, 1)])


# ------------------------------------------------------------------------------------------------------------ findings


def test_a_backfilled_download_the_rebase_moves_to_another_entity_makes_the_handler_read_again(
    world: LedgerWorld,
) -> None:
    # given a single-table download the backfill counted for song1, edited to song2, and a rebase (recover's answer to
    # a trim elsewhere) moving it between the handler's read of the key and the handler's transaction
    deployment = single_table_deployment(world)
    key, first = single_table(1, "song1")
    backfilled(world, key, first)
    moved = {**first, "songID": {"S": "song2"}}
    edit = write(world, "MODIFY", key, first, moved)
    world.dynamodb.put_item(TableName=SINGLE_TABLE, Item=moved)
    rebased: list[RebaseReport] = []
    ledger_client(
        world,
        Interleaved(world.dynamodb, "transact_write_items", lambda: rebased.append(rebase(world.dynamodb, deployment))),
    )
    # when the mapping delivers the edit
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    # then the rebase moved the key, and the handler, its condition failed, read it again: song2 counts it once
    assert rebased[0].moved == 1
    assert counts(world, ("song1", "2018-01"), ("song2", "2018-01")) == [0, 1]
    assert ledger_item_of(world, key)["Entity"] == {"S": "song2"}


def test_two_rebases_at_once_move_a_backfilled_download_to_another_entity_once(world: LedgerWorld) -> None:
    # given a single-table download the backfill counted for song1, edited to song2 (the edit's record lost), and a
    # second rebase running between the first's reads of the key and its transaction
    deployment = single_table_deployment(world)
    key, first = single_table(1, "song1")
    backfilled(world, key, first)
    world.dynamodb.put_item(TableName=SINGLE_TABLE, Item={**first, "songID": {"S": "song2"}})
    other: list[RebaseReport] = []
    racing = Interleaved(
        world.dynamodb, "transact_write_items", lambda: other.append(rebase(world.dynamodb, deployment))
    )
    # when the first rebase commits
    report = rebase(racing, deployment)
    # then the key moved once: song2 counts it, song1 nothing
    assert counts(world, ("song1", "2018-01"), ("song2", "2018-01")) == [0, 1]
    assert other[0].moved + report.moved == 1


def test_a_key_named_deleted_but_written_again_while_the_rebase_runs_keeps_its_new_download(
    world: LedgerWorld,
) -> None:
    # given a January download delivered, then deleted (its REMOVE lost), which a first rebase reported gone
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.delete(ROOT, "song1", 1)
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]

    def written_again() -> None:
        again = world.put(ROOT, "song1", 1, "2018-02")
        write_items(world)
        assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK

    # when the operator names it deleted, and the application writes the key again into February, delivered after the
    # rebase's scan and before it reads the key's ledger item
    report = rebase(Interleaved(world.dynamodb, "get_item", written_again), deployment_of(world), deleted=[claim])
    # then the key counts its new download, in February
    assert not report.differences_remain
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}


def test_an_expiry_whose_record_was_trimmed_stays_counted_after_its_key_is_written_again(world: LedgerWorld) -> None:
    # given a January download delivered, its expiry by TTL trimmed during a pause past the retention (reported at the
    # shard's next delivery), and the rebase reporting the key gone, which the operator names expired (to keep counted)
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    world.clock += DAY + 3600
    other = world.put(ROOT, "song2", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [other])) == OK
    assert "records_trimmed" in kinds(world)
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim_key(key_of("song1", 1))]
    assert rebase(world.dynamodb, deployment_of(world), expired=[claim_key(key_of("song1", 1))]).kept_expired == 1
    # when the application writes the key again, in February, and the mapping delivers it
    again = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # then the expired download stays counted in January beside the new one in February
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1, ("song2", "2018-01"): 1}


def test_a_rebase_killed_before_its_index_step_leaves_the_index_when_run_again(world: LedgerWorld) -> None:
    # given song1's only January download delivered, its edit into February lost, and a rebase killed after its move's
    # transaction, before the January aggregate at 0 left the index
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.put(ROOT, "song1", 1, "2018-02")
    fails_first = fails_at(1, "InternalServerError", "UpdateItem")
    with pytest.raises(ClientError):
        rebase_world(world, Interleaved(world.dynamodb, "update_item", instead=fails_first))
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}
    # when the repair runs again
    rebase_world(world)
    # then January at 0 is out of the index
    assert not in_index(world, "song1", "2018-01")


def test_a_key_reported_gone_names_the_download_it_counted(world: LedgerWorld) -> None:
    # given a January download delivered, then deleted, its REMOVE lost
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.delete(ROOT, "song1", 1)
    # when the repair rebases the ledger
    report = rebase_world(world)
    # then the report names the download by its key, for the operator to look up
    assert len(report.gone) == 1
    assert "song1-d1" in json.dumps(report.gone[0])


def test_a_rebase_leaves_a_download_whose_entity_cannot_key_an_aggregate_uncounted_and_repairs_the_rest(
    world: LedgerWorld,
) -> None:
    # given a single-table download whose song is longer than a partition key (delivered: rejected, counted nowhere),
    # and a download of song1 delivered in January whose edit into February was lost
    deployment = single_table_deployment(world)
    oversized_key, oversized = single_table(1, "s" * 2049)
    assert deliver(world, ROOT, delivered(world, ROOT, [write(world, "INSERT", oversized_key, None, oversized)])) == OK
    key, january = single_table(2, "song1")
    assert deliver(world, ROOT, delivered(world, ROOT, [write(world, "INSERT", key, None, january)])) == OK
    february = {**january, "Timestamp": {"S": "2018-02-15T10:00:00Z"}}
    write(world, "MODIFY", key, january, february)
    for item in (oversized, february):
        world.dynamodb.put_item(TableName=SINGLE_TABLE, Item=item)
    # when the repair rebases the ledger
    report = rebase(world.dynamodb, deployment)
    # then song1's download moved to February, and the oversized one still counts nowhere
    assert report.moved == 1
    assert counts(world, ("song1", "2018-01"), ("song1", "2018-02")) == [0, 1]


def test_a_childs_records_trimmed_after_a_sweep_reported_its_parents_unfinished_batch_are_reported(
    world: LedgerWorld,
) -> None:
    # given the parent shard's batch whose invocation died (its records unfinished), the parent's next record delivered
    # 23 hours later (the mapping gave the batch up), then a split and a record of the child
    lost = world.put(ROOT, "song1", 1, "2018-01")
    dies = fails_at(None, "InternalServerError", "TransactWriteItems")
    interleaved = ledger_client(world, Interleaved(world.dynamodb, "transact_write_items", instead=dies))
    with pytest.raises(ClientError):
        deliver(world, ROOT, delivered(world, ROOT, [lost]))
    interleaved.instead = None
    world.clock += 23 * 3600
    later = world.put(ROOT, "song2", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [later])) == OK
    world.split(ROOT, CHILD, 5_000_000)
    world.clock += 1800
    world.put(CHILD, "song3", 1, "2018-01")
    # when the schedule's sweep runs once the unfinished batch is a day old (it reports the parent's range), the mapping
    # is paused past the child record's retention, and the child's next record is its first delivery
    world.clock += 3600
    sweep = {"lineageSweep": {"streamArn": world.deployed.stream_arn}}
    world.deployed.invoke(sweep, FakeLambdaContext())
    assert [report["shardId"] for report in world.reports() if report["kind"] == "records_trimmed"] == [ROOT, ROOT]
    world.clock += DAY - 1800
    first = world.put(CHILD, "song4", 1, "2018-01")
    assert deliver(world, CHILD, delivered(world, CHILD, [first])) == OK
    # then records_trimmed names the child: its record written before the pause may be gone unread
    assert CHILD in [report["shardId"] for report in world.reports() if report["kind"] == "records_trimmed"]


# ------------------------------------------------------------------------------------------------ angles that held


def test_a_key_named_deleted_whose_new_write_is_delivered_after_the_rebase_counts_its_new_download(
    world: LedgerWorld,
) -> None:
    # given a January download delivered, then deleted (its REMOVE lost) and reported gone, then written again into
    # February while the rebase runs, not yet delivered when the rebase reads the key
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.delete(ROOT, "song1", 1)
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    again: list[str] = []

    def written_again() -> None:
        again.append(world.put(ROOT, "song1", 1, "2018-02"))
        write_items(world)

    # when the operator names it deleted, and the new write is delivered after the rebase
    report = rebase(Interleaved(world.dynamodb, "get_item", written_again), deployment_of(world), deleted=[claim])
    assert report.taken_back == 1
    assert deliver(world, ROOT, delivered(world, ROOT, again)) == OK
    # then the deletion was taken back and the new write counts: once, in February
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}


def test_two_rebases_at_once_move_each_versioned_and_backfilled_key_once(world: LedgerWorld) -> None:
    # given a download delivered whose edit into February was lost, one the backfill counted whose edit into March was
    # lost, and a second rebase running between the first's reads and its first transaction
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.put(ROOT, "song1", 1, "2018-02")
    world.history_before_the_stream("song2", 1, "2018-01")
    assert world.backfill() == [("song2", 1)]
    world.put(ROOT, "song2", 1, "2018-03")
    write_items(world)
    other: list[RebaseReport] = []
    racing = Interleaved(
        world.dynamodb, "transact_write_items", lambda: other.append(rebase(world.dynamodb, deployment_of(world)))
    )
    # when the first rebase commits
    report = rebase(racing, deployment_of(world))
    # then each key moved once, by one of them: the boards equal the recount
    assert other[0].moved + report.moved == 2
    assert report.retries == 1
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1, ("song2", "2018-03"): 1}


def test_a_handler_transaction_held_by_a_contribution_two_rebases_restored_ends_where_the_later_records_say(
    world: LedgerWorld,
) -> None:
    # given a download the backfill counted in January, edited into February (delivered), and while the handler holds
    # its read (no Version, January): an edit into March and a rebase to it, an edit back into January and a rebase to
    # it, so the ledger item is again as the handler read it (the same Contribution, from another history)
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    february = world.put(ROOT, "song1", 1, "2018-02")
    later: list[str] = []

    def there_and_back() -> None:
        later.append(world.put(ROOT, "song1", 1, "2018-03"))
        assert rebase_world(world).moved == 1
        later.append(world.put(ROOT, "song1", 1, "2018-01"))
        assert rebase_world(world).moved == 1

    ledger_client(world, Interleaved(world.dynamodb, "transact_write_items", there_and_back))
    # when the handler commits the February edit, and the mapping then delivers the two later edits
    assert deliver(world, ROOT, delivered(world, ROOT, [february])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, later)) == OK
    # then the later records, after the February edit in the shard (S10), bring it back: once, in January
    assert world.boards() == world.recount() == {("song1", "2018-01"): 1}


def test_a_key_deleted_and_written_again_between_the_rebases_reads_ends_where_its_last_record_says(
    world: LedgerWorld,
) -> None:
    # given a January download delivered, its edit into February lost, and between the rebase's read of the ledger
    # item and its read of the item: the item deleted and written again into April (both records still to come)
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.put(ROOT, "song1", 1, "2018-02")
    records: list[str | None] = []

    def deleted_and_put() -> None:
        records.append(world.delete(ROOT, "song1", 1))
        records.append(world.put(ROOT, "song1", 1, "2018-04"))
        write_items(world)

    # when the rebase moves the key, and the mapping then delivers the deletion and the new write
    report = rebase_world(world, Interleaved(world.dynamodb, "get_item", instead=on_call(2, deleted_and_put)))
    assert report.moved == 1
    assert deliver(world, ROOT, delivered(world, ROOT, [str(record) for record in records])) == OK
    # then the download counts once, in April
    assert world.boards() == world.recount() == {("song1", "2018-04"): 1}
    assert ledger_item(world, "song1", 1)["Version"]["S"].endswith(str(records[-1]))


def test_a_child_shards_record_after_a_rebase_of_a_key_versioned_in_its_parent_moves_it_on(world: LedgerWorld) -> None:
    # given a January download delivered from the parent shard, its edit into February lost and rebased (the Version
    # names the parent's record with a suffix), then a split, the child numbered below the parent
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.put(ROOT, "song1", 1, "2018-02")
    assert rebase_world(world).moved == 1
    world.split(ROOT, CHILD, 100)
    march = world.put(CHILD, "song1", 1, "2018-03")
    # when the child's edit into March is delivered, and the parent's first record retried after it
    assert deliver(world, CHILD, delivered(world, CHILD, [march])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    # then the child's record moved the key on from the rebase (S7), the parent's retry nothing: once, in March
    assert world.boards() == world.recount() == {("song1", "2018-03"): 1}
    version = ledger_item(world, "song1", 1)["Version"]["S"]
    assert (version.startswith(f"{CHILD}|"), version.endswith(march)) == (True, True)


def test_a_bisected_batch_straddling_a_rebase_counts_once(world: LedgerWorld) -> None:
    # given a January download delivered, then a batch of its edits into February and March that failed and was
    # bisected: the first half applied, a rebase (to March, the item now), the second half applied
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    batch = [world.put(ROOT, "song1", 1, "2018-02"), world.put(ROOT, "song1", 1, "2018-03")]
    assert deliver(world, ROOT, delivered(world, ROOT, batch[:1])) == OK
    assert rebase_world(world).moved == 1
    assert deliver(world, ROOT, delivered(world, ROOT, batch[1:])) == OK
    # when the whole batch is retried after its halves (out of order, L2)
    assert deliver(world, ROOT, delivered(world, ROOT, batch)) == OK
    # then the download counts once, in March
    assert world.boards() == world.recount() == {("song1", "2018-03"): 1}


def test_a_record_skipped_exactly_the_retention_ago_is_reported(world: LedgerWorld) -> None:
    # given a download delivered, and a record written in the same second and not delivered
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    created = world.clock - 1
    world.clock = created
    world.put(ROOT, "song2", 1, "2018-01")
    later = world.put(ROOT, "song3", 1, "2018-01")
    # when the shard's next record is delivered exactly 24 hours after them ("Stream records whose age exceeds this
    # limit are subject to removal": a moment later the skipped one may be gone)
    world.clock = created + DAY
    assert deliver(world, ROOT, delivered(world, ROOT, [later])) == OK
    # then the range after the highest record delivered is reported as possibly trimmed
    trimmed = [report for report in world.reports() if report["kind"] == "records_trimmed"]
    assert [(report["checkpoint"], report["firstReadableSequence"]) for report in trimmed] == [(first, later)]


def test_a_pause_a_second_short_of_the_retention_reports_nothing(world: LedgerWorld) -> None:
    # given a download delivered, and a record written in the same second and not delivered (still in the stream)
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    created = world.clock - 1
    world.clock = created
    skipped = world.put(ROOT, "song2", 1, "2018-01")
    # when the mapping delivers it and the next one a second short of 24 hours later
    world.clock = created + DAY - 1
    later = world.put(ROOT, "song3", 1, "2018-01")
    world.clock = created + DAY - 1
    assert deliver(world, ROOT, delivered(world, ROOT, [skipped, later])) == OK
    # then nothing is reported: no record can have aged past the retention, and every download counts
    assert world.reports() == []
    assert world.boards() == world.recount()


def test_a_key_named_deleted_whose_item_is_in_the_table_keeps_counting_its_item(world: LedgerWorld) -> None:
    # given a January download delivered and still in the table, its edit into February lost
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.put(ROOT, "song1", 1, "2018-02")
    # when the operator names its key deleted by mistake
    write_items(world)
    report = rebase(world.dynamodb, deployment_of(world), deleted=[claim_key(key_of("song1", 1))])
    # then the name is ignored: the key moves to what its item counts, and nothing is taken back
    assert (report.moved, report.taken_back) == (1, 0)
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}
