"""An adversarial review of ledger mode (and of watermark mode's FirstWrite): histories AWS's documentation allows,
each ending with the boards compared to the test's own recount of the items' last images, or with a report checked.
Those marked xfail are findings: they fail on the reviewed code, and say why."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from botocore.exceptions import ClientError

from download_records import Schema
from leaderboard_core.claims import FIRST_REMOVAL, backfill_claim, claim_key
from leaderboard_tools.backfill.transactions import ScannedDownload, transaction_items
from ledger import StreamLedger
from stream_claims import StreamClaims
from tests.unit.aggregator.handler_on_moto import WRITERS
from tests.unit.aggregator.ledger_on_moto import (
    LEDGER_TABLE,
    MARKER,
    ROOT,
    LedgerWorld,
    backfill_update,
    key_of,
    kinds,
)
from tests.unit.tools.test_backfill import _deployment
from two_readers import AggregatesNotWritten

LEFT = "shardId-00000002000000000000-left0000"
RIGHT = "shardId-00000002000000000000-rite0000"


@pytest.fixture
def world(dynamodb: Any, sqs_queue: tuple[Any, str]) -> LedgerWorld:
    sqs, queue_url = sqs_queue
    return LedgerWorld(dynamodb, sqs, queue_url)


def shipped_backfill(world: LedgerWorld, song: str, number: int, month: str) -> None:
    """`leaderboard-tools backfill` as shipped: its claim Put exactly as transaction_items builds it, with its count."""
    scanned = ScannedDownload(key_of(song, number), "", song, (month,))
    actions, _ = transaction_items([scanned], dataclasses.replace(_deployment(), ledger=True), LEDGER_TABLE)
    claim = next(action for action in actions if "Put" in action)
    world.dynamodb.transact_write_items(TransactItems=[claim, backfill_update(song, month, 1)])


def test_a_download_the_shipped_backfill_counted_then_edited_into_another_month_moves_there(
    world: LedgerWorld,
) -> None:
    # given a January download from before the stream, counted by the backfill the operator runs
    # (src/leaderboard_tools/backfill)
    world.history_before_the_stream("song1", 1, "2018-01")
    shipped_backfill(world, "song1", 1, "2018-01")
    # when it is edited into February and the stream reads the edit
    world.put(ROOT, "song1", 1, "2018-02")
    world.read(ROOT)
    # then it counts in February only, as its item says, and nothing is refused
    assert world.recount() == {("song1", "2018-02"): 1}
    assert world.boards() == world.recount()
    assert kinds(world) == []


def test_the_shipped_backfills_claim_records_what_it_counted() -> None:
    # given one scanned January download
    scanned = ScannedDownload(key_of("song1", 1), "", "song1", ("2018-01",))
    # when the shipped backfill builds its transaction
    actions, _ = transaction_items([scanned], dataclasses.replace(_deployment(), ledger=True), LEDGER_TABLE)
    # then its claim carries the Base that docs/exactly-once-ledger.md says it holds (Entity, Contribution)
    claim = next(action["Put"]["Item"] for action in actions if "Put" in action)
    assert claim.get("Entity") == {"S": "song1"}
    assert claim.get("Contribution") == {"M": {"2018-01": {"N": "1"}}}


class LostAnswerOnce:
    """A DynamoDB client whose first UpdateItem lands but whose answer is lost (the SDK's retries spent)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.lost = 0

    def update_item(self, **request: Any) -> Any:
        answer = self._client.update_item(**request)
        if self.lost == 0:
            self.lost += 1
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "lost"}}, "UpdateItem")
        return answer


def test_a_ledger_claim_that_landed_but_whose_answer_was_lost_counts_the_download_once(world: LedgerWorld) -> None:
    # given a ledger whose first claim lands but answers with an error
    lossy = LostAnswerOnce(world.dynamodb)
    deps = world.deployed.dependencies
    world.deployed.dependencies = dataclasses.replace(
        deps, ledger=StreamLedger(lossy, LEDGER_TABLE, WRITERS, deps.progress)
    )
    world.put(ROOT, "song1", 1, "2018-01")
    world.put(ROOT, "song1", 1, "2018-02")
    # when the shard is read (the read holds its checkpoint below the unclaimed key: Lambda retries it), and again
    with pytest.raises(AggregatesNotWritten):
        world.read(ROOT)
    world.read(ROOT)
    # then the claim was made twice, and the download counts once, where its item says
    assert lossy.lost == 1
    assert world.recount() == {("song1", "2018-02"): 1}
    assert world.boards() == world.recount()


def test_a_stale_reader_reading_again_after_another_claimed_and_counted_changes_nothing(world: LedgerWorld) -> None:
    # given a download inserted, edited and deleted and put back, read by one reader through its edit
    world.put(ROOT, "song1", 1, "2018-01")
    stale = world.unread(ROOT)
    edit = world.put(ROOT, "song1", 1, "2018-02")
    world.read(ROOT, through=edit)
    world.delete(ROOT, "song1", 1)
    world.put(ROOT, "song1", 1, "2018-03")
    world.read(ROOT)
    # when a reader that saw the shard unread reads all of it again
    world.reread(ROOT, stale)
    # then the download counts once, in March
    assert world.recount() == {("song1", "2018-03"): 1}
    assert world.boards() == world.recount()
    assert kinds(world) == []


def test_a_backfill_racing_the_streams_first_claim_is_counted_by_exactly_one(world: LedgerWorld) -> None:
    # given a January download on the stream, a backfill that scanned it, and an edit into February on the stream
    world.put(ROOT, "song1", 1, "2018-01")
    world.put(ROOT, "song1", 1, "2018-02")
    # when the stream claims and counts the key before the backfill's transaction, which then finds the claim
    world.read(ROOT)
    counted = world.backfill()
    # then the backfill counted nothing, and February counts once
    assert counted == []
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}


def test_an_edit_that_moves_nothing_then_one_that_does_of_a_backfilled_download_moves_it_once(
    world: LedgerWorld,
) -> None:
    # given a January download from before the stream, counted by a backfill, then rewritten as it was (moves nothing)
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.put(ROOT, "song1", 1, "2018-01")
    world.read(ROOT)
    # when it is edited into February and that is read
    world.put(ROOT, "song1", 1, "2018-02")
    world.read(ROOT)
    # then it counts once, in February
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}
    assert kinds(world) == []


def test_a_key_whose_records_reach_sibling_shards_is_reported_not_guessed(world: LedgerWorld) -> None:
    # given a split into two children, a download counted from the left child, and an edit that reaches the right one
    world.put(ROOT, "song2", 1, "2018-01")
    world.split(ROOT, LEFT, first_sequence=500)
    world.split(ROOT, RIGHT, first_sequence=700)
    world.put(LEFT, "song1", 1, "2018-01")
    world.put(RIGHT, "song1", 1, "2018-02")
    # when every shard is read, parent first
    world.read(ROOT)
    world.read(LEFT)
    world.read(RIGHT)
    # then the edit is counted nowhere and reported for both boards it would move, for recover to recount
    refused = [message for message in world.reports() if message["kind"] == "refused_record"]
    assert sorted(message["board"] for message in refused) == ["2018-01", "2018-02"]
    assert world.boards() == {("song1", "2018-01"): 1, ("song2", "2018-01"): 1}


def test_a_remove_and_insert_of_one_key_in_one_step_after_a_split_ends_in_the_last_image(world: LedgerWorld) -> None:
    # given a download counted in the parent, and its deletion and re-put in February in the child (lower sequences)
    world.put(ROOT, "song1", 1, "2018-01")
    world.read(ROOT)
    world.split(ROOT, LEFT, first_sequence=5)
    world.delete(LEFT, "song1", 1)
    world.put(LEFT, "song1", 1, "2018-02")
    # when the child is read in one step
    world.read(LEFT)
    # then it counts once, in February
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}
    assert kinds(world) == []


def watermark_mode(world: LedgerWorld) -> None:
    """The same tables in watermark mode with backfill_claims: no ledger, no retractions, FirstWrite claims."""
    deployed = world.deployed
    deployed.configure(ledger=False, schema=Schema(marker=MARKER))
    deployed.use_store(world.dynamodb)
    deployed.dependencies = dataclasses.replace(
        deployed.dependencies, ledger=None, claims=StreamClaims(world.dynamodb, LEDGER_TABLE, WRITERS)
    )


def watermark_backfill(world: LedgerWorld, song: str, number: int, month: str) -> None:
    """The backfill with backfill_claims: its claim (owner only) and its count, in one transaction."""
    claim = backfill_claim(LEDGER_TABLE, key_of(song, number))
    world.dynamodb.transact_write_items(TransactItems=[claim, backfill_update(song, month, 1)])


def test_watermark_mode_a_backfilled_download_from_before_the_stream_put_again_in_another_month_is_reported(
    world: LedgerWorld,
) -> None:
    # given watermark mode with claims, and a January download from before the stream that the backfill counted
    watermark_mode(world)
    world.history_before_the_stream("song1", 1, "2018-01")
    watermark_backfill(world, "song1", 1, "2018-01")
    # when it is deleted and put again under the same key in February, and the stream reads that
    world.delete(ROOT, "song1", 1)
    world.put(ROOT, "song1", 1, "2018-02")
    world.read(ROOT)
    # then February counts the re-put, or the re-put is reported (as when its first write was on the stream)
    refused = [message for message in world.reports() if message["kind"] == "refused_record"]
    assert world.boards().get(("song1", "2018-02")) == 1 or [m["board"] for m in refused] == ["2018-02"]


def test_watermark_mode_a_backfilled_download_deleted_in_one_read_and_put_again_in_the_next_is_reported(
    world: LedgerWorld,
) -> None:
    # given watermark mode with claims, a January download from before the stream that the backfill counted, and its
    # deletion read on its own
    watermark_mode(world)
    world.history_before_the_stream("song1", 1, "2018-01")
    watermark_backfill(world, "song1", 1, "2018-01")
    world.delete(ROOT, "song1", 1)
    world.read(ROOT)
    # when it is put again under the same key in February, and that is read
    world.put(ROOT, "song1", 1, "2018-02")
    world.read(ROOT)
    # then January keeps the backfill's count, and the re-put is reported for February, naming ledger mode
    refused = [message for message in world.reports() if message["kind"] == "refused_record"]
    assert world.boards() == {("song1", "2018-01"): 1}
    assert [message["board"] for message in refused] == ["2018-02"]
    assert "ledger = true" in refused[0]["reason"]


def test_watermark_mode_a_download_from_before_the_stream_deleted_before_the_backfill_claimed_it_counts_its_re_put(
    world: LedgerWorld,
) -> None:
    # given watermark mode with claims, a January download from before the stream, deleted and the deletion read
    # before a backfill that scanned it earlier sends its transaction
    watermark_mode(world)
    world.history_before_the_stream("song1", 1, "2018-01")
    world.delete(ROOT, "song1", 1)
    world.read(ROOT)
    with pytest.raises(ClientError, match="TransactionCanceled"):
        watermark_backfill(world, "song1", 1, "2018-01")
    # when it is put again in February, and read
    world.put(ROOT, "song1", 1, "2018-02")
    world.read(ROOT)
    # then the re-put counts once, in February, where the item is, and nothing is reported
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}
    assert kinds(world) == []


class ThrottledRemovalClaimOnce:
    """The claims' client with its first claim of a REMOVE (the one that records FirstRemoval) throttled."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.throttled = 0

    def update_item(self, **request: Any) -> Any:
        sets_removal = "#removal = if_not_exists" in request["UpdateExpression"]
        if self.throttled == 0 and sets_removal and request["ExpressionAttributeNames"]["#removal"] == FIRST_REMOVAL:
            self.throttled += 1
            error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "throttled"}}
            raise ClientError(error, "UpdateItem")
        return self._client.update_item(**request)


def test_watermark_mode_a_deletion_whose_claim_failed_holds_the_checkpoint_below_it_until_claimed(
    world: LedgerWorld,
) -> None:
    # given watermark mode with claims, a January download from before the stream that the backfill counted, deleted
    # and put again in February, and the claim of the deletion throttled the first time
    watermark_mode(world)
    throttling = ThrottledRemovalClaimOnce(world.dynamodb)
    deps = world.deployed.dependencies
    world.deployed.dependencies = dataclasses.replace(deps, claims=StreamClaims(throttling, LEDGER_TABLE, WRITERS))
    world.history_before_the_stream("song1", 1, "2018-01")
    watermark_backfill(world, "song1", 1, "2018-01")
    removal = world.delete(ROOT, "song1", 1)
    world.put(ROOT, "song1", 1, "2018-02")
    # when the shard is read (the deletion unclaimed: the invocation does not get past it), and read again
    with pytest.raises(AggregatesNotWritten):
        world.read(ROOT)
    checkpoint = world.progress(ROOT).checkpoint
    assert throttling.throttled == 1
    assert checkpoint is None or checkpoint < str(removal).zfill(40)
    world.read(ROOT)
    # then the re-put is reported once, for February, and January keeps the backfill's count
    refused = [message["board"] for message in world.reports() if message["kind"] == "refused_record"]
    assert refused == ["2018-02"]
    assert world.boards() == {("song1", "2018-01"): 1}


def test_watermark_mode_a_retry_of_the_first_record_is_counted_once_not_refused(world: LedgerWorld) -> None:
    # given watermark mode with claims, a January download on the stream read once
    watermark_mode(world)
    world.put(ROOT, "song1", 1, "2018-01")
    stale = world.unread(ROOT)
    world.read(ROOT)
    # when a stale reader reads the same record again (its eventID the one FirstWrite names)
    world.reread(ROOT, stale)
    # then it counts once and nothing is refused
    assert world.boards() == {("song1", "2018-01"): 1}
    assert kinds(world) == []


MIDDLE = "shardId-00000002000000000000-midl0000"
GRANDCHILD = "shardId-00000003000000000000-gran0000"


def test_an_edit_two_splits_after_the_first_record_whose_middle_shard_was_trimmed_unread_is_refused_and_reported(
    world: LedgerWorld,
) -> None:
    # given a download counted from the root; the root splits into a shard that gets no download, which splits in turn
    # and is then trimmed (24 hours of a quiet table: nothing invoked it, so no progress item names its parent)
    world.put(ROOT, "song1", 1, "2018-01")
    world.read(ROOT)
    world.split(ROOT, MIDDLE, first_sequence=2_000_000)
    world.split(MIDDLE, GRANDCHILD, first_sequence=3_000_000)
    del world.shards[MIDDLE]
    # when the download is edited into February, on the grandchild, and that is read
    world.put(GRANDCHILD, "song1", 1, "2018-02")
    world.read(GRANDCHILD)
    # then nothing the stream still answers names the middle shard's parent, so no documented order places the edit
    # after the root's record (docs/exactly-once-ledger.md): it is counted nowhere and reported for both boards it
    # would move, naming the shard whose parent is unknown, beside that shard's loss, for recover to recount
    reports = world.reports()
    refused = [message for message in reports if message["kind"] == "refused_record"]
    assert sorted(message["board"] for message in refused) == ["2018-01", "2018-02"]
    assert all(f"the parent of shard {MIDDLE}" in message["reason"] for message in refused)
    lost = [message for message in reports if message["kind"] == "records_trimmed"]
    assert [(message["shardId"], message["lostAncestorOf"]) for message in lost] == [(MIDDLE, GRANDCHILD)]
    assert world.boards() == {("song1", "2018-01"): 1}


def test_watermark_mode_a_stream_claim_from_before_first_write_does_not_count_a_re_put_twice(
    world: LedgerWorld,
) -> None:
    # given watermark mode with claims, a January download the stream claimed and counted before FirstWrite was written
    watermark_mode(world)
    world.put(ROOT, "song1", 1, "2018-01")
    world.read(ROOT)
    world.dynamodb.update_item(
        TableName=LEDGER_TABLE,
        Key={"ClaimKey": {"S": claim_key(key_of("song1", 1))}},
        UpdateExpression="REMOVE FirstWrite",
    )
    # when it is deleted and put again in February, and read
    world.delete(ROOT, "song1", 1)
    world.put(ROOT, "song1", 1, "2018-02")
    world.read(ROOT)
    # then it is counted once (January, as first claimed) or the re-put is reported
    refused = [message["board"] for message in world.reports() if message["kind"] == "refused_record"]
    assert sum(world.boards().values()) == 1 or refused == ["2018-02"]


def test_a_refusal_the_failure_queue_did_not_take_holds_the_checkpoint_until_it_is_reported(world: LedgerWorld) -> None:
    # given an edit that reaches the sibling of the shard its download was first counted from, and a failure queue
    # that refuses the first send
    world.split(ROOT, LEFT, first_sequence=500)
    world.split(ROOT, RIGHT, first_sequence=700)
    world.put(LEFT, "song1", 1, "2018-01")
    world.read(LEFT)
    world.put(RIGHT, "song1", 1, "2018-02")
    deps = world.deployed.dependencies
    send, refusals = deps.send_failures, []

    def refuse_once(messages: list[dict[str, Any]]) -> bool:
        refusals.append(len(messages))
        return len(refusals) > 1 and send(messages)

    world.deployed.dependencies = dataclasses.replace(deps, send_failures=refuse_once)
    # when the sibling is read (its report unsent), and read again
    with pytest.raises(AggregatesNotWritten):
        world.read(RIGHT)
    assert world.progress(RIGHT).checkpoint is None or world.progress(RIGHT).checkpoint < world.last(RIGHT).zfill(40)
    world.read(RIGHT)
    # then the refusal reached the queue once per board, and the checkpoint passed it only then
    refused = [message["board"] for message in world.reports() if message["kind"] == "refused_record"]
    assert sorted(refused) == ["2018-01", "2018-02"]
    assert world.progress(RIGHT).checkpoint == world.last(RIGHT).zfill(40)


CHILD = "shardId-00000002000000000000-bbbb0000"


@pytest.mark.parametrize("backfilled", [True, False], ids=["backfill_counted_it", "never_counted"])
def test_an_expired_download_keeps_its_count_when_its_key_is_written_again_in_a_child_read_first(
    world: LedgerWorld, backfilled: bool
) -> None:
    # given a January download from before the stream (counted by a backfill, or not), expired by TTL in the parent,
    # and its key written again in February in the child, after a split
    world.history_before_the_stream("song1", 1, "2018-01")
    if backfilled:
        assert world.backfill() == [("song1", 1)]
    world.put(ROOT, "song2", 1, "2018-01")
    world.expire(ROOT, "song1", 1)
    world.split(ROOT, CHILD, first_sequence=500)
    world.put(CHILD, "song1", 1, "2018-02")
    # when the child is read before its parent (the docs' "a child shard read before its parent"), then the parent
    world.read(CHILD, skip_ancestors=True)
    world.read(ROOT)
    # then the expired download still counts as it was, beside the new one, as when the shards are read in order
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1, ("song2", "2018-01"): 1}
    assert kinds(world) == []
