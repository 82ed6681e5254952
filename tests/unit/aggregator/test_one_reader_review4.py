"""A fourth review of one reader per shard (STREAM_READERS=1), after the third review's fixes: the expiry the operator
keeps (`--expired-keys`, `ExpiryKept`), `Rebases` on the backfill's items, ledger items written before `DownloadKey`
and `Rebases`, the index step of a key in step, and the trimmed check's vouch by a record's creation second. Each test
is named for what should hold. Those marked xfail are findings: the reason says what happens instead, silent or loud,
and the AWS sentence that allows it. The rest are angles tried that held."""

from __future__ import annotations

from typing import Any

import pytest

from leaderboard_core.claims import DOWNLOAD_KEY, REBASES, claim_key
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import (
    CHILD,
    LEDGER_TABLE,
    OK,
    ROOT,
    Interleaved,
    LedgerWorld,
    deliver,
    delivered,
    in_index,
    key_of,
    ledger_item,
    read_back,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of, kept_expired, rebase_world, write_items
from tests.unit.conftest import FakeLambdaContext

DAY = 24 * 3600

__all__ = ["world"]  # fixtures, used by name


def without(world: LedgerWorld, song: str, number: int, *names: str) -> None:
    """The key's ledger item as a release before DownloadKey and Rebases wrote it: those attributes absent."""
    item = {name: value for name, value in ledger_item(world, song, number).items() if name not in names}
    world.dynamodb.put_item(TableName=LEDGER_TABLE, Item=item)


# ------------------------------------------------------------------------------------------------------------ findings


def test_an_expiry_kept_by_the_operator_and_read_back_after_the_keys_next_write_counts_once(
    world: LedgerWorld,
) -> None:
    # given a January download delivered, its expiry by TTL in a batch the mapping gave up, the repair (run for a trim
    # elsewhere) reporting the key gone, and the operator naming it expired
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    # when the application writes the key again into February, delivered, and recover then reads the given-up batch back
    again = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    assert read_back(world, ROOT, expiry, expiry)["readBack"] == "applied"
    # then the expired download counts once in January, beside the new one in February
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}


def test_a_second_expiry_of_a_key_whose_first_the_operator_kept_stays_counted(world: LedgerWorld) -> None:
    # given a January download delivered, expired by TTL (its REMOVE trimmed), kept by the operator as expired; the key
    # written again into February in a batch the mapping gave up, and that item expired by TTL too, delivered
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    again = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    # when recover reads the given-up INSERT back
    assert read_back(world, ROOT, again, again)["readBack"] == "applied"
    # then both expired downloads stay counted (retention, S12), each once
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}


def test_a_key_named_expired_after_its_next_write_keeps_the_expired_download_or_is_reported(world: LedgerWorld) -> None:
    # given a January download delivered, its expiry by TTL trimmed, the repair reporting the key gone, and the
    # application writing the key again into February, delivered before the operator answers the report
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    again = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # when the operator names it expired
    write_items(world)
    report = rebase(world.dynamodb, deployment_of(world), expired=[claim])
    # then the expired download is counted in January beside February's, or the run says the key could not be kept
    left = [entry["claimKey"] for entry in report.gone + report.unplaced]
    kept = world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}
    assert kept or claim in left


def test_a_kept_expiry_read_back_twice_after_the_keys_next_write_retried_counts_once(world: LedgerWorld) -> None:
    # given a January download delivered, its expiry in a given-up batch, kept by the operator, the key written again
    # into February and delivered
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    again = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # when recover reads the expiry back twice, and the write's batch is retried between
    assert read_back(world, ROOT, expiry, expiry)["readBack"] == "applied"
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    assert read_back(world, ROOT, expiry, expiry)["readBack"] == "applied"
    # then the expired download counts once in January, beside the new one in February
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}


def test_a_kept_expiry_read_back_after_the_keys_later_expiry_and_write_counts_each_once(world: LedgerWorld) -> None:
    # given a January download delivered, its expiry in a given-up batch, kept by the operator; the key written again
    # into February in a batch given up too, and that item expired, delivered (twice)
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    again = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    second = world.last(ROOT)
    assert deliver(world, ROOT, delivered(world, ROOT, [second])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [second])) == OK
    # when recover reads the write back, then the kept expiry, each twice
    for record in (again, again, expiry, expiry):
        assert read_back(world, ROOT, record, record)["readBack"] == "applied"
    # then each expired download counts once, where its item counted
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}


def test_a_kept_expiry_read_back_after_a_later_expiry_in_the_same_month_counts_both(world: LedgerWorld) -> None:
    # given a January download delivered, its expiry in a given-up batch, kept by the operator; the key written again
    # into January in a batch given up too, and that item expired, delivered first
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    again = world.put(ROOT, "song1", 1, "2018-01")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    # when recover reads the write back, then the kept expiry
    assert read_back(world, ROOT, again, again)["readBack"] == "applied"
    assert read_back(world, ROOT, expiry, expiry)["readBack"] == "applied"
    # then both expired downloads count in January, each once
    assert world.boards() == {("song1", "2018-01"): 2}


def test_a_key_named_expired_again_after_its_keep_and_its_next_write_is_left_as_it_is(world: LedgerWorld) -> None:
    # given a January download delivered, expired by TTL (its REMOVE trimmed), kept by the operator, and the key
    # written again into February, delivered
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    again = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # when the operator runs the same --expired-keys repair again
    write_items(world)
    report = rebase(world.dynamodb, deployment_of(world), expired=[claim_key(key_of("song1", 1))])
    # then it keeps nothing more and reports nothing: the expired download counts once, beside the new one
    assert (report.kept_expired, report.differences_remain) == (0, False)
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}


# ------------------------------------------------------------------------------------------------ angles that held


def test_an_expiry_delivered_before_the_operator_names_it_expired_counts_once(world: LedgerWorld) -> None:
    # given a January download delivered, expired by TTL, the repair reporting it gone (its REMOVE late, not trimmed)
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    claim = claim_key(key_of("song1", 1))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    # when the REMOVE is delivered before the operator's --expired-keys run, and the key is then written again
    assert deliver(world, ROOT, delivered(world, ROOT, [expiry])) == OK
    report = rebase(world.dynamodb, deployment_of(world), expired=[claim])
    again = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # then the run has nothing left to keep, and the expired download counts once beside the new one
    assert (report.kept_expired, report.differences_remain) == (0, False)
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}


def test_a_key_kept_as_expired_written_again_and_expired_again_in_order_counts_both(world: LedgerWorld) -> None:
    # given a January download delivered, expired by TTL (its REMOVE trimmed), kept by the operator as expired
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    # when the key is written again into February and expires again, both delivered in order, then retried
    again = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    later = [again, world.last(ROOT)]
    assert deliver(world, ROOT, delivered(world, ROOT, later)) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, later)) == OK
    # then both expired downloads stay counted, each once
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}


def test_a_backfill_run_again_after_a_rebase_moved_a_backfilled_key_leaves_it_as_moved(world: LedgerWorld) -> None:
    # given a download the backfill counted in January, edited into February with the edit lost, and rebased
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    edit = world.put(ROOT, "song1", 1, "2018-02")
    assert rebase_world(world).moved == 1
    assert ledger_item(world, "song1", 1)[REBASES] == {"N": "1"}
    # when the backfill runs again, twice, and the lost edit is then delivered after all
    assert world.backfill() == []
    assert world.backfill() == []
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    # then nothing is counted again: once, in February
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}


def test_a_ledger_item_written_before_download_key_and_rebases_is_moved_and_taken_back(world: LedgerWorld) -> None:
    # given a download the backfill counted in January and one delivered, both ledger items as an earlier release wrote
    # them (no DownloadKey, no Rebases); the first edited into March (lost), the second deleted (its REMOVE lost)
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    second = world.put(ROOT, "song2", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [second])) == OK
    without(world, "song1", 1, DOWNLOAD_KEY, REBASES)
    without(world, "song2", 1, DOWNLOAD_KEY)
    edit = world.put(ROOT, "song1", 1, "2018-03")
    world.delete(ROOT, "song2", 1)
    # when the repair rebases the ledger, the operator names song2's key deleted, and the lost edit comes after all
    report = rebase_world(world)
    assert (report.moved, [gone["key"] for gone in report.gone]) == (1, [None])
    claim = claim_key(key_of("song2", 1))
    assert rebase(world.dynamodb, deployment_of(world), deleted=[claim]).taken_back == 1
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    # then each counts where its item says: song1 once in March, song2 nowhere
    assert world.boards() == world.recount() == {("song1", "2018-03"): 1}


def test_a_rebases_index_step_racing_a_download_that_raises_the_aggregate_from_0_leaves_it_in_the_index(
    world: LedgerWorld,
) -> None:
    # given song1's only January download moved into February by a rebase killed before its index step (January at 0
    # still in the index, its ledger item naming it Decreased)
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.put(ROOT, "song1", 1, "2018-02")

    def killed(calls: int, send: Any, parameters: dict[str, Any]) -> Any:
        raise RuntimeError("the rebase is killed before its index step")

    with pytest.raises(RuntimeError):
        rebase_world(world, Interleaved(world.dynamodb, "update_item", instead=killed))
    assert in_index(world, "song1", "2018-01")

    def new_download() -> None:
        assert deliver(world, ROOT, delivered(world, ROOT, [world.put(ROOT, "song1", 2, "2018-01")])) == OK
        write_items(world)

    # when the repair runs again and a new January download of song1 is delivered just before its index step
    rebase_world(world, Interleaved(world.dynamodb, "update_item", new_download))
    # then January counts 1 and stays in the index
    assert world.boards() == world.recount() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}
    assert in_index(world, "song1", "2018-01")


def test_a_record_written_in_the_second_of_a_gap_reports_highest_record_is_reported_once_it_may_have_aged(
    world: LedgerWorld,
) -> None:
    # given a download delivered, a pause past the retention, and a delivery that reports the gap, its highest record
    # written in second T; then a record written in the same second T after it ("rounded down to the closest second",
    # *StreamRecord*), never delivered
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.clock += DAY + 3600
    second_t = world.clock
    second = world.put(ROOT, "song2", 1, "2018-01")
    world.clock = second_t
    world.put(ROOT, "song3", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [second])) == OK
    assert "records_trimmed" in [report["kind"] for report in world.reports()]
    # when the shard's next record is delivered exactly 24 hours after second T
    world.clock = second_t + DAY - 1
    later = world.put(ROOT, "song4", 1, "2018-01")
    assert world.clock == second_t + DAY
    assert deliver(world, ROOT, delivered(world, ROOT, [later])) == OK
    # then the skipped record, written in second T, is reported as possibly trimmed
    trimmed = [report for report in world.reports() if report["kind"] == "records_trimmed"]
    assert [(report["checkpoint"], report["firstReadableSequence"]) for report in trimmed] == [(second, later)]


class ClosedParents:
    """DynamoDB Streams after a split: each shard with a child listed closed, with its EndingSequenceNumber ("the
    shard can no longer receive more data", *SequenceNumberRange*)."""

    def __init__(self, streams: Any) -> None:
        self.streams = streams

    def __getattr__(self, name: str) -> Any:
        return getattr(self.streams, name)

    def describe_stream(self, **parameters: Any) -> Any:
        answer = self.streams.describe_stream(**parameters)
        shards = answer["StreamDescription"]["Shards"]
        parents = {shard.get("ParentShardId") for shard in shards}
        for shard in shards:
            if shard["ShardId"] in parents:
                shard["SequenceNumberRange"]["EndingSequenceNumber"] = "99999999"
        return answer


def test_the_sweep_reports_a_parent_closed_by_a_split_during_a_pause_through_its_child_once(world: LedgerWorld) -> None:
    # given a download delivered from the parent shard, then during a pause of the mapping: a record of the parent never
    # delivered, a split closing the parent, and a record of the child
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.put(ROOT, "song2", 1, "2018-01")
    world.split(ROOT, CHILD, 5_000_000)
    world.put(CHILD, "song3", 1, "2018-01")
    notes = world.deployed.dependencies.delivery_notes
    assert notes is not None
    notes.shards.streams = ClosedParents(world.streams)
    sweep = {"lineageSweep": {"streamArn": world.deployed.stream_arn}}
    # when the schedule's sweep runs once the pause passed the retention, again an hour later, and the mapping then
    # resumes with the child's next record
    world.clock += DAY + 3600
    world.deployed.invoke(sweep, FakeLambdaContext())
    found = [(report["shardId"], report.get("lostAncestorOf")) for report in world.reports()]
    world.clock += 3600
    world.deployed.invoke(sweep, FakeLambdaContext())
    resumed = world.put(CHILD, "song4", 1, "2018-01")
    assert deliver(world, CHILD, delivered(world, CHILD, [resumed])) == OK
    # then the child's lineage was reported once, by the first sweep: the parent's record and the child's may be gone
    assert found == [(CHILD, CHILD)]
    assert world.reports() == []
