"""An adversarial review of the order of each aggregate's records (issue 38): every write is conditioned on the
watermark being below its list's first record (docs/exactly-once.md, "The mechanism", rule 4), and an unwritten
aggregate holds the checkpoint below that record, so each list must be one shard's records, lowest first, whatever
order the ledger's or the claims' per-key grouping left the downloads in. Sequence numbers order records within a
shard only (S2); across shards DynamoDB documents no order, so no list may mix two shards.

Each test names the behaviour it proves; one marked xfail would be a finding (none is)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from aggregate_store import AggregateStore, ApplyOutcome
from aggregate_writes import Contribution
from delivery import ShardRef
from download_records import AggregateKey
from leaderboard_core.band_holds import shard_tag
from leaderboard_core.bookkeeping import download_id, pad_sequence
from ledger import StreamLedger
from tests.unit.aggregator.handler_on_moto import client_error
from tests.unit.aggregator.ledger_on_moto import LEDGER_TABLE, ROOT, STREAM_ARN, TABLE, LedgerWorld, key_of
from tests.unit.aggregator.test_ledger_mode import LedgerThrottledOnce
from tests.unit.aggregator.test_ledger_review import watermark_mode
from two_readers import AggregatesNotWritten

CHILD = "shardId-00000002000000000000-bbbb0000"


@pytest.fixture
def world(dynamodb: Any, sqs_queue: tuple[Any, str]) -> LedgerWorld:
    sqs, queue_url = sqs_queue
    return LedgerWorld(dynamodb, sqs, queue_url)


class OneBoardDown:
    """The aggregates' client refusing (throttled past its retries) every write of one board, once per write tried
    while `down`: the other aggregates of the step are written, as when one of them fails."""

    def __init__(self, client: Any, board: str) -> None:
        self._client = client
        self._board = board
        self.down = True

    def _refused(self, key: dict[str, Any]) -> bool:
        return self.down and key.get("SK") == {"S": self._board}

    def update_item(self, **parameters: Any) -> Any:
        if parameters.get("TableName") == TABLE and self._refused(parameters["Key"]):
            raise client_error("ProvisionedThroughputExceededException", "UpdateItem")
        return self._client.update_item(**parameters)

    def transact_write_items(self, **parameters: Any) -> Any:
        for action in parameters["TransactItems"]:
            update = action.get("Update") or {}
            if update.get("TableName") == TABLE and self._refused(update["Key"]):
                raise client_error("ProvisionedThroughputExceededException", "TransactWriteItems")
        return self._client.transact_write_items(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class WrittenLists:
    """The aggregate store, recording each list of records it is asked to write (by aggregate and shard)."""

    def __init__(self, store: AggregateStore) -> None:
        self._store = store
        self.lists: list[tuple[AggregateKey, str, list[str]]] = []

    def apply(self, key: AggregateKey, shard: ShardRef, contributions: list[Contribution]) -> ApplyOutcome:
        self.lists.append((key, shard.shard_id, [contribution.sequence for contribution in contributions]))
        return self._store.apply(key, shard, contributions)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def record_lists(world: LedgerWorld) -> WrittenLists:
    written = WrittenLists(world.deployed.dependencies.store)
    world.deployed.dependencies = dataclasses.replace(world.deployed.dependencies, store=written)  # type: ignore[arg-type]
    return written


def sequences_of(world: LedgerWorld, shard_id: str) -> set[str]:
    return {pad_sequence(record["dynamodb"]["SequenceNumber"]) for record in world.shards[shard_id].records}


def interleaved_step(world: LedgerWorld) -> tuple[str, str]:
    """A January download counted, then edited into March, a new February download of its song, and the first edited
    into February: February's records in the next step are the new download's, then the first's, while the first's
    key leads the step. Returns the new download's record and the first's edit into February."""
    world.put(ROOT, "song1", 1, "2018-01")
    world.read(ROOT)
    world.put(ROOT, "song1", 1, "2018-03")
    inserted = world.put(ROOT, "song1", 2, "2018-02")
    edited = world.put(ROOT, "song1", 1, "2018-02")
    return inserted, edited


def test_a_failed_write_of_a_list_led_by_a_later_key_holds_the_checkpoint_below_the_lists_lowest_record(
    world: LedgerWorld,
) -> None:
    # given a step whose February records interleave two download keys, the later key's record lowest
    inserted, _ = interleaved_step(world)
    # when the step is read with every write of February refused (the other boards written)
    down = OneBoardDown(world.dynamodb, "2018-02")
    world.deployed.use_store(down)
    with pytest.raises(AggregatesNotWritten):
        world.read(ROOT)
    # then the checkpoint stays below February's lowest record, the new download's
    assert (world.progress(ROOT).checkpoint or "") < pad_sequence(inserted)
    # and when the shard is read again with February writable, every download counts once where its item says
    down.down = False
    world.read(ROOT)
    assert world.recount() == {("song1", "2018-02"): 2}
    assert world.boards() == world.recount()
    assert world.reports() == []


def test_a_throttled_claim_of_the_lower_key_holds_the_checkpoint_below_it_though_the_other_key_leads_the_step(
    world: LedgerWorld,
) -> None:
    # given the interleaved step, and the new download's ledger claim refused once
    inserted, _ = interleaved_step(world)
    throttled = LedgerThrottledOnce(world.dynamodb, key_of("song1", 2))
    deps = world.deployed.dependencies
    world.deployed.dependencies = dataclasses.replace(
        deps, ledger=StreamLedger(throttled, LEDGER_TABLE, deps.executor, deps.progress)
    )
    # when the step is read
    with pytest.raises(AggregatesNotWritten):
        world.read(ROOT)
    # then nothing at or above the unclaimed record is counted: the checkpoint stays below it
    assert (world.progress(ROOT).checkpoint or "") < pad_sequence(inserted)
    assert world.boards() == {("song1", "2018-03"): 1}
    # and when it is read again (and by a reader whose progress read is stale), every download counts once
    stale = world.progress(ROOT)
    world.read(ROOT)
    world.reread(ROOT, stale)
    assert throttled.refused == 1
    assert world.recount() == {("song1", "2018-02"): 2}
    assert world.boards() == world.recount()
    assert world.reports() == []


@pytest.mark.parametrize("aggregate_writes", ["per_batch", "per_window"])
def test_a_retry_whose_failed_try_wrote_a_later_keys_list_adds_nothing_twice_in_either_write_mode(
    world: LedgerWorld, aggregate_writes: str
) -> None:
    # given the interleaved step, in either write mode, and a reader whose progress read is from before the step
    world.use_settings(dataclasses.replace(world.deployed.settings, aggregate_writes=aggregate_writes))
    inserted, _ = interleaved_step(world)
    stale = world.progress(ROOT)
    # when a try writes February through the new download only (a direct invocation through it), and the stale
    # reader then reads the whole step, and a re-delivery from the shard's start reads it all again
    world.read(ROOT, through=inserted)
    world.reread(ROOT, stale)
    world.reread(ROOT, world.unread(ROOT))
    # then each download counts once where its item says
    assert world.recount() == {("song1", "2018-02"): 2}
    assert world.boards() == world.recount()
    assert world.reports() == []


@pytest.mark.parametrize("parent_drained_by_the_child", [False, True], ids=["parent_read_apart", "parent_drained"])
def test_every_ledger_write_carries_one_shards_records_lowest_first_across_a_split_expiries_and_stale_readers(
    world: LedgerWorld, parent_drained_by_the_child: bool
) -> None:
    # given downloads whose keys interleave, edited, deleted and expired in a shard and in its child (whose sequence
    # numbers are lower than its parent's), a download from before the stream among them, and a backfill
    world.history_before_the_stream("song1", 9, "2018-01")
    world.put(ROOT, "song1", 1, "2018-01")
    world.put(ROOT, "song1", 2, "2018-02")
    world.put(ROOT, "song1", 1, "2018-02")
    world.put(ROOT, "song1", 9, "2018-02")
    world.expire(ROOT, "song1", 2)
    world.put(ROOT, "song1", 3, "2018-02")
    world.backfill()
    world.split(ROOT, CHILD, first_sequence=500)
    world.put(CHILD, "song1", 3, "2018-01")
    world.put(CHILD, "song1", 4, "2018-01")
    world.delete(CHILD, "song1", 1)
    world.put(CHILD, "song1", 4, "2018-02")
    world.put(CHILD, "song1", 3, "2018-02")
    written = record_lists(world)
    # when the child is read before its parent (or its read drains the parent first, as the lineage's reader does),
    # then the parent, then both again by readers with stale progress
    world.read(CHILD, skip_ancestors=not parent_drained_by_the_child)
    world.read(ROOT)
    world.reread(CHILD, world.unread(CHILD))
    world.reread(ROOT, world.unread(ROOT))
    # then every list written was one shard's records, lowest first, and February counts the downloads whose last
    # image is there and the expired one (an expiry keeps its count), January none
    assert {shard_id for _, shard_id, _ in written.lists} == {ROOT, CHILD}
    for _, shard_id, sequences in written.lists:
        assert sequences == sorted(sequences)
        assert set(sequences) <= sequences_of(world, shard_id)
    assert world.boards() == {("song1", "2018-02"): 4}
    assert world.reports() == []


def test_every_claims_mode_write_carries_one_shards_records_lowest_first_with_keys_written_again(
    world: LedgerWorld,
) -> None:
    # given watermark mode with backfill_claims, and downloads whose keys repeat (deleted and put again) in one step
    watermark_mode(world)
    world.put(ROOT, "song1", 1, "2018-01")
    world.put(ROOT, "song1", 2, "2018-01")
    world.delete(ROOT, "song1", 1)
    world.put(ROOT, "song1", 3, "2018-01")
    world.put(ROOT, "song1", 1, "2018-01")
    world.put(ROOT, "song1", 4, "2018-01")
    written = record_lists(world)
    # when the shard is read, and read again from its start
    world.read(ROOT)
    world.reread(ROOT, world.unread(ROOT))
    # then every list written was the shard's records, strictly ascending, and the re-put is reported, not counted
    assert written.lists
    for _, shard_id, sequences in written.lists:
        assert sequences == sorted(sequences)
        assert set(sequences) <= sequences_of(world, shard_id)
    assert world.boards() == {("song1", "2018-01"): 4}
    assert {message["kind"] for message in world.reports()} == {"refused_record"}


def open_band_on(world: LedgerWorld, board: str, count: int) -> None:
    """The aggregate as a repair leaves it: its count set to the recount, a fence past every record here, an open band
    whose deadline is far off."""
    world.dynamodb.update_item(
        TableName=TABLE,
        Key={"songID": {"S": "song1"}, "SK": {"S": board}},
        UpdateExpression="SET DownloadCount = :count, RecountedThrough = :fence, RecountBand = :band",
        ExpressionAttributeValues={
            ":count": {"N": str(count)},
            ":fence": {"N": str(world.clock + 10**6)},
            ":band": {"S": "token|4000000000"},
        },
    )


def test_a_band_holds_each_download_of_an_interleaved_list_at_its_last_record_and_a_retry_holds_nothing_again(
    world: LedgerWorld,
) -> None:
    # given the interleaved step, and February recounted by a repair (both downloads) whose band is still open
    inserted, edited = interleaved_step(world)
    open_band_on(world, "2018-02", 2)
    stale = world.progress(ROOT)
    # when the step is read, then read again by a reader whose progress read is from before it
    world.read(ROOT)
    world.reread(ROOT, stale)
    # then February keeps the repair's count and its band holds each download once, at its last record, at 1
    item = world.dynamodb.get_item(TableName=TABLE, Key={"songID": {"S": "song1"}, "SK": {"S": "2018-02"}})["Item"]
    tag = shard_tag(STREAM_ARN, ROOT)
    assert item["DownloadCount"] == {"N": "2"}
    assert set(item["RecountHeld"]["SS"]) == {
        f"{download_id('song1-d2')}|{tag}|{inserted}|1",
        f"{download_id('song1-d1')}|{tag}|{edited}|1",
    }
    assert world.boards() == {("song1", "2018-02"): 2}
