"""Ledger mode: every INSERT, MODIFY and REMOVE of a download moves its contribution from what the ledger says to what
the new image says, so the boards end where the items' last images say, whoever counted first and however the records
are read. Each test compares the boards with a recount of the items made by the test itself."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from leaderboard_core.claims import CLAIM_KEY, claim_key
from ledger import StreamLedger
from shard_progress import LedgerTurnedOnLate
from tests.unit.aggregator.handler_on_moto import client_error
from tests.unit.aggregator.ledger_on_moto import LEDGER_TABLE, ROOT, LedgerWorld, key_of
from two_readers import AggregatesNotWritten


@pytest.fixture
def world(dynamodb: Any, sqs_queue: tuple[Any, str]) -> LedgerWorld:
    sqs, queue_url = sqs_queue
    return LedgerWorld(dynamodb, sqs, queue_url)


def test_a_modify_that_makes_a_rejected_download_valid_counts_it(world: LedgerWorld) -> None:
    # given a download written with an unreadable timestamp, read (rejected, reported), then fixed by a rewrite
    world.put(ROOT, "song1", 1, "2018-01", valid=False)
    world.read(ROOT)
    world.put(ROOT, "song1", 1, "2018-01")
    # when the fix is read
    world.read(ROOT)
    # then the download counts once, as its item now says
    assert world.recount() == {("song1", "2018-01"): 1}
    assert world.boards() == world.recount()
    assert [message["kind"] for message in world.reports()] == ["rejected_download"]


def test_a_modify_that_makes_a_download_stop_matching_the_filter_takes_it_back(world: LedgerWorld) -> None:
    # given two downloads counted, then one rewritten as another kind of item (source_item_filter no longer passes it)
    world.put(ROOT, "song1", 1, "2018-01")
    world.put(ROOT, "song1", 2, "2018-01")
    world.read(ROOT)
    world.put(ROOT, "song1", 1, "2018-01", download=False)
    # when the rewrite is read
    world.read(ROOT)
    # then only the other one counts
    assert world.recount() == {("song1", "2018-01"): 1}
    assert world.boards() == world.recount()


@pytest.mark.parametrize("backfill_first", [True, False], ids=["backfill_claims_first", "stream_claims_first"])
def test_a_download_deleted_and_put_again_in_another_month_ends_in_the_last_images_month(
    world: LedgerWorld, backfill_first: bool
) -> None:
    # given a January download on the stream, counted first by the backfill or by the stream (the other then skips it)
    world.put(ROOT, "song1", 1, "2018-01")
    if backfill_first:
        assert world.backfill() == [("song1", 1)]
        world.read(ROOT)
    else:
        world.read(ROOT)
        assert world.backfill() == []
    # when it is deleted and put again under the same key in February, and that is read
    world.delete(ROOT, "song1", 1)
    world.put(ROOT, "song1", 1, "2018-02")
    world.read(ROOT)
    # then it counts once, in February, and nothing is reported
    assert world.recount() == {("song1", "2018-02"): 1}
    assert world.boards() == world.recount()
    assert world.reports() == []


def test_a_backfill_that_counted_an_image_the_stream_has_not_read_yet_is_moved_from_exactly(world: LedgerWorld) -> None:
    # given a January download, its deletion and its re-put in February all on the stream, unread, and a backfill that
    # scanned between the deletion and the re-put (it finds nothing) and one that scanned after (it finds February)
    world.put(ROOT, "song1", 1, "2018-01")
    world.put(ROOT, "song2", 1, "2018-01")
    world.delete(ROOT, "song1", 1)
    assert world.backfill() == [("song2", 1)]
    world.put(ROOT, "song1", 1, "2018-02")
    assert world.backfill() == [("song1", 1)]
    # when the stream reads all of it
    world.read(ROOT)
    # then each download counts once where its item now says
    assert world.recount() == {("song1", "2018-02"): 1, ("song2", "2018-01"): 1}
    assert world.boards() == world.recount()
    assert world.reports() == []


@pytest.mark.parametrize("backfilled", [True, False], ids=["backfill_counted_it", "never_counted"])
@pytest.mark.parametrize("read_apart", [False, True], ids=["one_read", "read_apart"])
def test_a_download_older_than_the_stream_deleted_beside_a_new_one_of_its_song_and_month_is_exact(
    world: LedgerWorld, backfilled: bool, read_apart: bool
) -> None:
    # given a January download written before the stream, counted by a backfill or never counted
    world.history_before_the_stream("song1", 1, "2018-01")
    if backfilled:
        assert world.backfill() == [("song1", 1)]
    # when it is deleted and a new January download of its song written, read in one read or in two
    removal = world.delete(ROOT, "song1", 1)
    if read_apart:
        world.read(ROOT, through=removal)
    world.put(ROOT, "song1", 2, "2018-01")
    world.read(ROOT)
    # then the month counts the new one only, and the deletion of one never counted is no loss: nothing is reported
    assert world.recount() == {("song1", "2018-01"): 1}
    assert world.boards() == world.recount()
    assert world.reports() == []


@pytest.mark.parametrize("backfilled", [True, False], ids=["backfill_counted_it", "never_counted"])
def test_a_download_older_than_the_stream_edited_into_another_month_moves_there_whole(
    world: LedgerWorld, backfilled: bool
) -> None:
    # given a January download written before the stream, and another January download of its song on the stream
    world.history_before_the_stream("song1", 1, "2018-01")
    if backfilled:
        world.backfill()
    world.put(ROOT, "song1", 2, "2018-01")
    # when the old one is edited into February and read with the other
    world.put(ROOT, "song1", 1, "2018-02")
    world.read(ROOT)
    # then January holds the other one only, February the edited one
    assert world.recount() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}
    assert world.boards() == world.recount()


class AggregatesDown:
    """The aggregates' client failing every write (throttled past its retries): the ledger claims are made, the
    aggregates not written, as when the function dies between the two."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def update_item(self, **parameters: Any) -> Any:
        raise client_error("ProvisionedThroughputExceededException", "UpdateItem")

    def transact_write_items(self, **parameters: Any) -> Any:
        raise client_error("ProvisionedThroughputExceededException", "TransactWriteItems")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_retry_after_the_ledger_claims_but_before_the_aggregate_writes_counts_once(world: LedgerWorld) -> None:
    # given a backfilled download, then its edit, a deletion and new downloads on the stream
    world.put(ROOT, "song1", 1, "2018-01")
    world.backfill()
    world.put(ROOT, "song1", 1, "2018-02")
    world.put(ROOT, "song2", 1, "2018-01")
    world.put(ROOT, "song2", 2, "2018-01")
    world.delete(ROOT, "song2", 1)
    # when a read claims them all in the ledger and fails to write any aggregate
    world.deployed.use_store(AggregatesDown(world.dynamodb))
    with pytest.raises(AggregatesNotWritten):
        world.read(ROOT)
    assert world.boards() == {("song1", "2018-01"): 1}
    # and the retry reads them again, a reader with a stale checkpoint again, and a re-delivery again
    world.deployed.use_store(world.dynamodb)
    stale = world.progress(ROOT)
    world.read(ROOT)
    world.reread(ROOT, stale)
    world.reread(ROOT, world.unread(ROOT))
    world.read(ROOT)
    # then every download counts once where its item says
    assert world.recount() == {("song1", "2018-02"): 1, ("song2", "2018-01"): 1}
    assert world.boards() == world.recount()
    assert world.reports() == []


def test_a_retry_adds_only_what_lies_above_a_watermark_its_failed_try_left_though_its_downloads_interleave(
    world: LedgerWorld,
) -> None:
    # given a January download read, then edited into March, a new February download of its song, and the first
    # download edited into February: February's records in the step are the second download's, then the first's
    world.put(ROOT, "song1", 1, "2018-01")
    world.read(ROOT)
    stale = world.progress(ROOT)
    world.put(ROOT, "song1", 1, "2018-03")
    inserted = world.put(ROOT, "song1", 2, "2018-02")
    world.put(ROOT, "song1", 1, "2018-02")
    # when a try writes the aggregates through the new download (its invocation then fails: the checkpoint is the
    # retry's, read before), and the retry reads the whole step from that checkpoint
    world.read(ROOT, through=inserted)
    world.reread(ROOT, stale)
    # then February adds the new download once, beside the edit: every download counts once where its item says
    assert world.recount() == {("song1", "2018-02"): 2}
    assert world.boards() == world.recount()
    assert world.reports() == []


CHILD = "shardId-00000002000000000000-bbbb0000"
OTHER = "shardId-00000001000000000000-cccc0000"


def test_records_of_one_download_in_a_parent_and_its_child_read_child_first_are_exact(world: LedgerWorld) -> None:
    # given a January download in a shard that then splits, and its edit into February in the child, whose sequence
    # numbers are lower than the parent's
    world.put(ROOT, "song1", 1, "2018-01")
    world.split(ROOT, CHILD, first_sequence=500)
    world.put(CHILD, "song1", 1, "2018-02")
    world.put(CHILD, "song2", 1, "2018-01")
    assert int(world.last(CHILD)) < int(world.last(ROOT))
    # when the child is read before its parent, then the parent, then both again by stale readers
    world.read(CHILD, skip_ancestors=True)
    world.read(ROOT)
    world.reread(CHILD, world.unread(CHILD))
    world.reread(ROOT, world.unread(ROOT))
    # then the download counts once, in February
    assert world.recount() == {("song1", "2018-02"): 1, ("song2", "2018-01"): 1}
    assert world.boards() == world.recount()
    assert world.reports() == []


def test_records_of_one_download_in_two_unrelated_shards_are_refused_and_counted_nowhere(world: LedgerWorld) -> None:
    # given a January download in one shard, and its edit into February in a shard of no common lineage
    world.put(ROOT, "song1", 1, "2018-01")
    world.split(None, OTHER, first_sequence=2_000_000)
    world.put(OTHER, "song1", 1, "2018-02")
    # when both shards are read
    world.read(ROOT)
    world.read(OTHER)
    # then the edit moved nothing (January keeps what the first shard counted) and it is reported, naming both shards
    assert world.boards() == {("song1", "2018-01"): 1}
    refusals = world.reports()
    assert {message["kind"] for message in refusals} == {"refused_record"}
    assert {(message["entityId"], message["board"]) for message in refusals} == {
        ("song1", "2018-01"),
        ("song1", "2018-02"),
    }
    assert all(ROOT in message["reason"] and OTHER in message["reason"] for message in refusals)


def test_an_expiry_by_ttl_changes_no_count(world: LedgerWorld) -> None:
    # given a download counted, then deleted by Time to Live (its REMOVE names DynamoDB's service)
    world.put(ROOT, "song1", 1, "2018-01")
    world.read(ROOT)
    world.expire(ROOT, "song1", 1)
    # when the expiry is read
    world.read(ROOT)
    # then the download still counts: an expiry is retention, not a retraction
    assert world.boards() == {("song1", "2018-01"): 1}
    assert world.reports() == []


class LedgerThrottledOnce:
    """The ledger's client refusing (throttled) the first claim of one download key."""

    def __init__(self, client: Any, key: dict[str, Any]) -> None:
        self._client = client
        self._claim = claim_key(key)
        self.refused = 0

    def update_item(self, **parameters: Any) -> Any:
        if parameters["Key"].get(CLAIM_KEY) == {"S": self._claim} and not self.refused:
            self.refused += 1
            raise client_error("ProvisionedThroughputExceededException", "UpdateItem")
        return self._client.update_item(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_download_whose_ledger_claim_fails_holds_the_checkpoint_below_it_and_is_counted_later(
    world: LedgerWorld,
) -> None:
    # given three downloads, the ledger claim of the second one throttled the first time
    world.put(ROOT, "song1", 1, "2018-01")
    world.put(ROOT, "song2", 1, "2018-01")
    world.put(ROOT, "song3", 1, "2018-01")
    throttled = LedgerThrottledOnce(world.dynamodb, key_of("song2", 1))
    deps = world.deployed.dependencies
    world.deployed.dependencies = dataclasses.replace(
        deps, ledger=StreamLedger(throttled, LEDGER_TABLE, deps.executor, deps.progress)
    )
    # when the shard is read through its last record
    with pytest.raises(AggregatesNotWritten):
        world.read(ROOT)
    # then only the first is counted (nothing above the unclaimed one), and the checkpoint stays below the second
    assert world.boards() == {("song1", "2018-01"): 1}
    assert int(world.progress(ROOT).checkpoint or 0) < int(world.shards[ROOT].records[1]["dynamodb"]["SequenceNumber"])
    # when the shard is read again, then every download counts once
    world.read(ROOT)
    assert throttled.refused == 1
    assert world.boards() == world.recount()


def test_a_backfilled_download_expired_by_ttl_keeps_its_count_when_its_key_is_written_again(world: LedgerWorld) -> None:
    # given a download from before the stream, counted by the backfill, then expired by TTL: the stream's first record
    # of its key is the expiry
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    # when a new download is written under the same key, in another month, and the shard is read
    world.put(ROOT, "song1", 1, "2018-02")
    world.read(ROOT)
    # then the expired download still counts as it was, and the new one counts too
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}
    assert world.reports() == []


def test_a_download_from_before_the_stream_expired_before_any_backfill_counts_as_it_was(world: LedgerWorld) -> None:
    # given a download from before the stream that TTL deleted before a backfill could scan it
    world.history_before_the_stream("song1", 1, "2018-01")
    world.expire(ROOT, "song1", 1)
    # when the shard is read, and a backfill runs afterwards
    world.read(ROOT)
    counted_by_the_backfill = world.backfill()
    # then the expiry's old image is what it counted: once, as an expiry keeps every count (the item is gone)
    assert counted_by_the_backfill == []
    assert world.boards() == {("song1", "2018-01"): 1}
    assert world.reports() == []


def test_ledger_mode_turned_on_after_counting_without_it_counts_nothing_and_says_why(world: LedgerWorld) -> None:
    # given a progress table a deployment without ledger mode began (its genesis token drawn, unmarked)
    world.dynamodb.put_item(
        TableName="test-progress", Item={"ShardKey": {"S": "#genesis"}, "Genesis": {"S": "drawn-before-the-ledger"}}
    )
    world.put(ROOT, "song1", 1, "2018-01")
    # when the aggregator reads the shard in ledger mode
    with pytest.raises(LedgerTurnedOnLate, match="attach a new stack"):
        world.read(ROOT)
    # then nothing was counted or claimed: the edits of downloads counted before would be counted again
    assert world.boards() == {}
    assert world.dynamodb.scan(TableName=LEDGER_TABLE)["Items"] == []


def test_a_deployment_begun_in_ledger_mode_marks_its_genesis_and_counts(world: LedgerWorld) -> None:
    # given a new deployment in ledger mode
    world.put(ROOT, "song1", 1, "2018-01")
    # when it reads its shard for the first time
    world.read(ROOT)
    # then it counted, and its progress table's genesis says ledger mode began it
    genesis = world.dynamodb.get_item(TableName="test-progress", Key={"ShardKey": {"S": "#genesis"}})["Item"]
    assert "LedgerFrom" in genesis
    assert world.boards() == {("song1", "2018-01"): 1}
