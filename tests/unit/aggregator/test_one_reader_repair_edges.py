"""The one-reader repair (the rebase) at the edges the third review's fixes cover beyond its own tests: a take-back
killed before its index step, the keys the operator names expired, and a download whose entity cannot key an
aggregate."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from leaderboard_core.claims import claim_key
from leaderboard_tools.recover.rebase import RebaseRefused, rebase
from tests.unit.aggregator.ledger_on_moto import (
    OK,
    ROOT,
    Interleaved,
    LedgerWorld,
    deliver,
    delivered,
    fails_at,
    in_index,
    key_of,
    single_table,
    world,
)
from tests.unit.aggregator.rebase_on_moto import (
    SINGLE_TABLE,
    deployment_of,
    rebase_world,
    single_table_deployment,
    write_items,
)

__all__ = ["world"]  # fixtures, used by name


def test_a_take_back_killed_before_its_index_step_leaves_the_index_when_run_again(world: LedgerWorld) -> None:
    # given song1's only January download delivered, then deleted (its REMOVE lost), and its take-back killed after its
    # transaction, before the January aggregate at 0 left the index
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.delete(ROOT, "song1", 1)
    write_items(world)
    claim = claim_key(key_of("song1", 1))
    fails_first = fails_at(1, "InternalServerError", "UpdateItem")
    with pytest.raises(ClientError):
        rebase(Interleaved(world.dynamodb, "update_item", instead=fails_first), deployment_of(world), deleted=[claim])
    assert world.boards() == world.recount() == {}
    assert in_index(world, "song1", "2018-01")
    # when the repair runs again
    report = rebase_world(world)
    # then January at 0 is out of the index, and nothing is left to the operator
    assert not in_index(world, "song1", "2018-01")
    assert not report.differences_remain


def test_an_expiry_named_expired_whose_record_comes_after_all_counts_once(world: LedgerWorld) -> None:
    # given a January download delivered, expired by TTL (its REMOVE not yet delivered), reported gone, and named
    # expired by the operator
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    report = rebase(world.dynamodb, deployment_of(world), expired=[claim])
    assert (report.kept_expired, report.differences_remain) == (1, False)
    # when the mapping delivers the expiry's REMOVE after all, twice (a retry), and then the key written again
    assert deliver(world, ROOT, delivered(world, ROOT, [expiry])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [expiry])) == OK
    again = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # then the expired download counts once in January, beside the new one in February
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}


def test_a_key_named_both_deleted_and_expired_is_refused_with_nothing_written(world: LedgerWorld) -> None:
    # given a January download delivered, then deleted (its REMOVE lost), reported gone
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.delete(ROOT, "song1", 1)
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    # when the operator names it both deleted and expired
    with pytest.raises(RebaseRefused, match="both deleted and expired"):
        rebase(world.dynamodb, deployment_of(world), deleted=[claim], expired=[claim])
    # then nothing was written: it still counts, and is reported gone again
    assert world.boards() == {("song1", "2018-01"): 1}
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]


def test_a_download_whose_entity_cannot_key_an_aggregate_is_reported_rejected_by_the_rebase(world: LedgerWorld) -> None:
    # given a single-table download whose song is longer than a partition key, in the table, counted nowhere
    deployment = single_table_deployment(world)
    key, oversized = single_table(1, "s" * 2049)
    world.dynamodb.put_item(TableName=SINGLE_TABLE, Item=oversized)
    # when the repair rebases the ledger
    report = rebase(world.dynamodb, deployment)
    # then the download is named rejected, by its key, and counted nowhere
    assert [(entry["claimKey"], entry["key"]) for entry in report.rejected] == [(claim_key(key), key)]
    assert report.counted == 0
    assert world.boards() == {}


def test_records_after_a_delivery_that_reported_a_gap_trimmed_during_a_second_pause_are_reported(
    world: LedgerWorld,
) -> None:
    # given a download delivered, two written ten hours later, and a pause past the retention after which the mapping
    # delivers the first of the two alone (a gap reported: what came before it may have been trimmed)
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.clock += 10 * 3600
    second = world.put(ROOT, "song2", 1, "2018-01")
    world.put(ROOT, "song3", 1, "2018-01")
    world.clock += 15 * 3600
    assert deliver(world, ROOT, delivered(world, ROOT, [second])) == OK
    assert [report["checkpoint"] for report in world.reports() if report["kind"] == "records_trimmed"] == [first]
    # when the mapping pauses again, past the retention of the third download, and then delivers a later record
    world.clock += 9 * 3600 + 60
    later = world.put(ROOT, "song4", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [later])) == OK
    # then the range after the second download is reported too: the third may have been trimmed unread
    assert [report["checkpoint"] for report in world.reports() if report["kind"] == "records_trimmed"] == [second]
