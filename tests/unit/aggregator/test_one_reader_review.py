"""A review of one reader per shard (STREAM_READERS=1) against AWS's documentation (the sentences are labelled in
docs/exactly-once.md's table). Each test is named for what should hold. Those marked xfail are findings: the reason
says what happens instead and which sentence it meets. The rest are angles tried that held."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from leaderboard_core.claims import CLAIM_KEY, claim_key
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
    fails_at,
    in_index,
    key_of,
    kinds,
    ledger_client,
    read_back,
    trimmed_iterator,
    world,
)
from tests.unit.aggregator.rebase_on_moto import rebase_world
from tests.unit.aggregator.test_aggregate_store import ThirtyEightDigits
from tests.unit.conftest import count_of

DAY = 24 * 3600
GRANDCHILD = "shardId-00000003000000000000-cccc0000"

__all__ = ["world"]  # fixtures, used by name


# ------------------------------------------------------------------------------------------------------------ findings


def test_a_read_back_of_a_range_ending_at_the_open_shards_last_record_is_applied(world: LedgerWorld) -> None:
    # given two downloads on an open shard, the mapping having given up the batch of both (nothing written since)
    first = world.put(ROOT, "song1", 1, "2018-01")
    last = world.put(ROOT, "song2", 1, "2018-01")
    pages = Interleaved(world.streams, "get_records")
    world.deployed.dependencies.streams = pages
    # when recover hands the range to the function
    answer = read_back(world, ROOT, first, last)
    # then the range is applied, after a page or two of reading
    assert (answer["readBack"], answer["recount"]) == ("applied", False)
    assert world.boards() == world.recount()
    assert pages.calls <= 2


def test_a_download_keyed_without_its_entity_counts_under_the_entity_its_image_names(world: LedgerWorld) -> None:
    # given a single-table design: the download is keyed by PK, its song is an attribute of the item
    key = {"PK": {"S": "DOWNLOAD#1"}}
    image = {**key, "songID": {"S": "song1"}, "Timestamp": {"S": "2018-01-15T10:00:00Z"}, "Type": {"S": "download"}}
    record = world._record(ROOT, "INSERT", key, None, image)
    # when the mapping delivers its INSERT
    response = deliver(world, ROOT, delivered(world, ROOT, [record["dynamodb"]["SequenceNumber"]]))
    # then it counts once, on its song's January board
    assert response == OK
    assert count_of(world.dynamodb, "song1", "2018-01") == 1


def test_a_key_edited_after_the_recount_of_a_trim_counts_once_where_its_last_image_says(world: LedgerWorld) -> None:
    # given a January download delivered, its edit into February trimmed during a pause past the retention, and the
    # shard's next delivery reporting records_trimmed
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.put(ROOT, "song1", 1, "2018-02")
    world.clock += DAY + 3600
    other = world.put(ROOT, "song2", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [other])) == OK
    assert "records_trimmed" in kinds(world)
    # when recover answers it with its one-reader repair (the rebase), and the download is then edited into March and
    # delivered
    rebase_world(world)
    again = world.put(ROOT, "song1", 1, "2018-03")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # then every board equals the recount: the download counts once, in March
    assert world.boards() == world.recount() == {("song1", "2018-03"): 1, ("song2", "2018-01"): 1}


def test_a_key_of_a_given_up_range_read_back_too_late_counts_once_after_the_recount(world: LedgerWorld) -> None:
    # given a January download delivered, and its edit into February in a batch the mapping gave up, read back by
    # recover after the stream trimmed it
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    edit = world.put(ROOT, "song1", 1, "2018-02")
    reading = world.streams.get_shard_iterator

    world.streams.get_shard_iterator = trimmed_iterator  # type: ignore[method-assign]
    assert read_back(world, ROOT, edit, edit)["readBack"] == "trimmed"
    world.streams.get_shard_iterator = reading  # type: ignore[method-assign]
    # when recover repairs (the rebase), and the download is then edited into March and delivered
    rebase_world(world)
    again = world.put(ROOT, "song1", 1, "2018-03")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # then the download counts once, in March
    assert world.boards() == world.recount() == {("song1", "2018-03"): 1}


@pytest.mark.xfail(
    strict=True,
    reason="AWS documents nothing that proves an invocation's caller: the tumbling-window event carries window, "
    "state, shardId and eventSourceARN, which any caller can write (L1), and the context's identity and client_context "
    "serve Cognito and mobile SDK callers only. An invocation shaped like the mapping's, by a principal allowed "
    "lambda:InvokeFunction on the aggregator, is applied as the stream's truth, and a record it names with a sequence "
    "number the shard never reached becomes the key's Version, so the key's genuine records are ignored from then on "
    "(silent). Only a read of the shard (GetRecords) could check it, the second reader this mode exists to avoid: "
    "docs/exactly-once-one-reader.md says who can do this",
)
def test_a_window_shaped_invocation_not_sent_by_the_mapping_cannot_hide_the_streams_records(
    world: LedgerWorld,
) -> None:
    # given a January download, and an invocation shaped like the mapping's naming it with a sequence number beyond
    # anything the shard holds
    first = world.put(ROOT, "song1", 1, "2018-01")
    forged = delivered(world, ROOT, [first])
    forged[0]["dynamodb"]["SequenceNumber"] = "9" * 30
    assert deliver(world, ROOT, forged) == OK
    # when the download's edit into February is delivered by the mapping
    edit = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    # then the download counts where the stream says: February
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}


def test_a_record_with_untyped_keys_is_reported_and_the_batch_succeeds(world: LedgerWorld) -> None:
    # given a valid download, and a record whose Keys are not attribute values
    valid = world.put(ROOT, "song1", 1, "2018-01")
    records = delivered(world, ROOT, [valid])
    untyped = {**records[0], "dynamodb": {**records[0]["dynamodb"], "Keys": {"songID": "song1", "SK": "d2"}}}
    untyped["dynamodb"]["SequenceNumber"] = str(int(valid) + 1)
    # when the mapping delivers both
    response = deliver(world, ROOT, [records[0], untyped])
    # then the batch succeeds, the valid download counts, and the other is reported
    assert response == OK
    assert world.boards() == {("song1", "2018-01"): 1}
    assert kinds(world) == ["rejected_download"]


def test_a_modify_without_a_readable_new_image_is_reported(world: LedgerWorld) -> None:
    # given a January download, delivered and counted, and a MODIFY of it whose NewImage is not an attribute map
    first = world.put(ROOT, "song1", 1, "2018-01")
    deliver(world, ROOT, delivered(world, ROOT, [first]))
    edit = world.put(ROOT, "song1", 1, "2018-02")
    records = delivered(world, ROOT, [edit])
    records[0]["dynamodb"]["NewImage"] = ["not", "a", "map"]
    # when the mapping delivers it
    assert deliver(world, ROOT, records) == OK
    # then whatever it does to the count, the record is reported
    assert "rejected_download" in kinds(world)


def test_a_download_past_38_digits_is_reported_and_the_batch_succeeds(world: LedgerWorld) -> None:
    # given song1's January aggregate one step short of 38 digits in its order, with DynamoDB's number precision
    world.dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "2018-01"},
            "DownloadCount": {"N": "999999999999"},
            "LeaderboardOrder": {"N": "9" * 38},
        },
    )
    ledger_client(world, ThirtyEightDigits(world.dynamodb))
    first = world.put(ROOT, "song1", 1, "2018-01")
    # when the mapping delivers another January download of song1
    response = deliver(world, ROOT, delivered(world, ROOT, [first]))
    # then the batch succeeds and the download is reported for recover, not retried for ever
    assert response == OK
    assert "refused_record" in kinds(world)


def test_a_record_dated_in_the_future_does_not_silence_the_trimmed_check(world: LedgerWorld) -> None:
    # given a download whose record's creation time reads ten years ahead (milliseconds read as seconds, a bad clock),
    # delivered; then a record written and not delivered, and a pause of the mapping past the retention
    first = world.put(ROOT, "song1", 1, "2018-01")
    records = delivered(world, ROOT, [first])
    records[0]["dynamodb"]["ApproximateCreationDateTime"] = float(world.clock + 10 * 365 * DAY)
    assert deliver(world, ROOT, records) == OK
    world.put(ROOT, "song2", 1, "2018-01")
    world.clock += DAY + 3600
    later = world.put(ROOT, "song3", 1, "2018-01")
    # when the shard's next record is delivered
    assert deliver(world, ROOT, delivered(world, ROOT, [later])) == OK
    # then the record skipped between them is reported as possibly trimmed
    assert "records_trimmed" in kinds(world)


# ------------------------------------------------------------------------------------------------ angles that held


def test_a_backfill_committed_between_the_read_and_the_transaction_is_moved_from_not_counted_twice(
    world: LedgerWorld,
) -> None:
    # given a January download, and the backfill counting it between the handler's read of its ledger item (none)
    # and the handler's transaction
    first = world.put(ROOT, "song1", 1, "2018-01")
    counted: list[Any] = []
    ledger_client(world, Interleaved(world.dynamodb, "transact_write_items", lambda: counted.append(world.backfill())))
    # when the mapping delivers its INSERT
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    # then the backfill counted it, the transaction's condition failed, and the fold again moved it from what the
    # backfill counted: once in January, its ledger item naming the INSERT
    assert counted == [[("song1", 1)]]
    assert world.boards() == world.recount() == {("song1", "2018-01"): 1}
    key = {CLAIM_KEY: {"S": claim_key(key_of("song1", 1))}}
    item = world.dynamodb.get_item(TableName=LEDGER_TABLE, Key=key, ConsistentRead=True)["Item"]
    assert item["Version"]["S"].endswith(first)


def test_a_newer_record_committed_by_another_invocation_between_the_read_and_the_transaction_decides(
    world: LedgerWorld,
) -> None:
    # given a January download and its edit into February, and a second invocation (a readBack, or a concurrent batch
    # of the shard) applying the edit between this invocation's read of the key and its transaction
    first = world.put(ROOT, "song1", 1, "2018-01")
    edit = world.put(ROOT, "song1", 1, "2018-02")
    other: list[dict[str, Any]] = []
    ledger_client(
        world,
        Interleaved(
            world.dynamodb,
            "transact_write_items",
            lambda: other.append(deliver(world, ROOT, delivered(world, ROOT, [edit]))),
        ),
    )
    # when this invocation applies the INSERT
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    # then the edit decides: its condition failed the INSERT's transaction, and the INSERT read again moves nothing
    assert other == [OK]
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}


def test_a_transaction_sent_twice_changes_nothing_the_second_time(world: LedgerWorld) -> None:
    # given an SDK that sends each transaction twice (a retry after a lost response), with no ClientRequestToken
    def twice(_calls: int, send: Callable[..., Any], parameters: dict[str, Any]) -> Any:
        send(**parameters)
        return send(**parameters)

    ledger_client(world, Interleaved(world.dynamodb, "transact_write_items", instead=twice))
    first = world.put(ROOT, "song1", 1, "2018-01")
    edit = world.put(ROOT, "song1", 1, "2018-02")
    # when the mapping delivers a download and its edit, one invocation each
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    # then each move counted once: the second send failed its ledger Put's condition, all or nothing (D2)
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}


def test_a_batch_failing_after_one_entitys_transaction_committed_is_retried_without_counting_twice(
    world: LedgerWorld,
) -> None:
    # given two songs' downloads in one batch, and DynamoDB failing the second song's transaction once
    second_fails = fails_at(2, "InternalServerError", "TransactWriteItems")
    ledger_client(world, Interleaved(world.dynamodb, "transact_write_items", instead=second_fails))
    records = [world.put(ROOT, "song1", 1, "2018-01"), world.put(ROOT, "song2", 1, "2018-01")]
    # when the invocation fails, and the mapping retries the whole batch
    with pytest.raises(ClientError):
        deliver(world, ROOT, delivered(world, ROOT, records))
    assert deliver(world, ROOT, delivered(world, ROOT, records)) == OK
    # then each download counts once
    assert world.boards() == world.recount() == {("song1", "2018-01"): 1, ("song2", "2018-01"): 1}


def test_one_entitys_batch_beyond_100_actions_is_split_and_counts_each_download_once(world: LedgerWorld) -> None:
    # given 150 downloads of one song in one batch (151 actions: more than one TransactWriteItems holds)
    records = [world.put(ROOT, "song1", number, "2018-01") for number in range(150)]
    sent = ledger_client(world, Interleaved(world.dynamodb, "transact_write_items"))
    # when the mapping delivers them
    assert deliver(world, ROOT, delivered(world, ROOT, records)) == OK
    # then the same aggregate was added to in two transactions, and counts each download once
    assert sent.calls == 2
    assert world.boards() == world.recount() == {("song1", "2018-01"): 150}


def test_an_aggregate_readded_while_it_leaves_the_index_at_0_stays_in_the_index(world: LedgerWorld) -> None:
    # given song1's only January download, delivered; then its deletion, and another January download of song1
    # delivered between the deletion's transaction and its removal from the index
    first = world.put(ROOT, "song1", 1, "2018-01")
    deliver(world, ROOT, delivered(world, ROOT, [first]))
    removed = world.delete(ROOT, "song1", 1)
    readded = world.put(ROOT, "song1", 2, "2018-01")
    assert removed is not None
    ledger_client(
        world,
        Interleaved(world.dynamodb, "update_item", lambda: deliver(world, ROOT, delivered(world, ROOT, [readded]))),
    )
    # when the deletion is delivered
    assert deliver(world, ROOT, delivered(world, ROOT, [removed])) == OK
    # then January counts the new download and is in the index
    assert world.boards() == world.recount() == {("song1", "2018-01"): 1}
    assert in_index(world, "song1", "2018-01")


def test_an_expiry_read_back_after_its_keys_rewrite_keeps_the_expired_download_counted(world: LedgerWorld) -> None:
    # given a January download, its expiry by TTL given up by the mapping, and the key written again in February and
    # delivered before recover reads the expiry back
    first = world.put(ROOT, "song1", 1, "2018-01")
    deliver(world, ROOT, delivered(world, ROOT, [first]))
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    again = world.put(ROOT, "song1", 1, "2018-02")
    deliver(world, ROOT, delivered(world, ROOT, [again]))
    # when recover reads the expiry back, twice
    answers = [read_back(world, ROOT, expiry, expiry)["expiriesKept"] for _ in range(2)]
    # then the expired download stays counted in January (retention, S12), once, beside the February one
    assert answers == [1, 0]
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}


def test_a_read_back_of_a_parents_range_after_the_child_moved_the_key_changes_nothing(world: LedgerWorld) -> None:
    # given a January download, its edit into February in the parent shard (given up; a record follows it there), and
    # its edit into March in the child shard (numbered lower than the parent's) delivered first
    first = world.put(ROOT, "song1", 1, "2018-01")
    deliver(world, ROOT, delivered(world, ROOT, [first]))
    edit = world.put(ROOT, "song1", 1, "2018-02")
    world.put(ROOT, "song2", 1, "2018-02")
    world.split(ROOT, CHILD, 100)
    march = world.put(CHILD, "song1", 1, "2018-03")
    assert deliver(world, CHILD, delivered(world, CHILD, [march])) == OK
    # when recover reads the parent's given-up range back
    answer = read_back(world, ROOT, edit, edit)
    # then the parent's edit is before the key's Version (S7): the download counts in March
    assert (answer["readBack"], answer["keysApplied"]) == ("applied", 0)
    assert world.boards() == {("song1", "2018-03"): 1}


def test_records_of_an_invocation_killed_before_a_pause_past_the_retention_are_reported(world: LedgerWorld) -> None:
    # given a download delivered, then a batch of two whose invocation died after noting them (its transaction
    # failed), and then a pause of the mapping past the retention, after which the shard's next record is delivered
    first = world.put(ROOT, "song1", 1, "2018-01")
    deliver(world, ROOT, delivered(world, ROOT, [first]))
    lost = [world.put(ROOT, "song2", 1, "2018-01"), world.put(ROOT, "song3", 1, "2018-01")]
    dies = fails_at(None, "InternalServerError", "TransactWriteItems")
    interleaved = ledger_client(world, Interleaved(world.dynamodb, "transact_write_items", instead=dies))
    with pytest.raises(ClientError):
        deliver(world, ROOT, delivered(world, ROOT, lost))
    interleaved.instead = None
    world.clock += DAY + 3600
    later = world.put(ROOT, "song4", 1, "2018-01")
    # when it is delivered
    assert deliver(world, ROOT, delivered(world, ROOT, [later])) == OK
    # then records_trimmed names the unfinished records: recover recounts
    trimmed = [report for report in world.reports() if report["kind"] == "records_trimmed"]
    assert trimmed
    assert any(int(report["checkpoint"]) < int(lost[0]) for report in trimmed)


def test_a_grandchilds_first_delivery_reports_its_never_delivered_parent_trimmed(world: LedgerWorld) -> None:
    # given a download delivered from the root shard, a child shard whose only record was never delivered, and a
    # grandchild written to more than a day later
    first = world.put(ROOT, "song1", 1, "2018-01")
    deliver(world, ROOT, delivered(world, ROOT, [first]))
    world.split(ROOT, CHILD, 5_000_000)
    world.put(CHILD, "song2", 1, "2018-01")
    world.split(CHILD, GRANDCHILD, 9_000_000)
    world.clock += DAY + 3600
    later = world.put(GRANDCHILD, "song3", 1, "2018-01")
    # when the grandchild's first record is delivered
    assert deliver(world, GRANDCHILD, delivered(world, GRANDCHILD, [later])) == OK
    # then records_trimmed says its lineage's records may have been lost: the root's delivered record bounds them
    trimmed = [report for report in world.reports() if report["kind"] == "records_trimmed"]
    assert [(report["shardId"], report.get("lostAncestorOf")) for report in trimmed] == [(GRANDCHILD, GRANDCHILD)]


def test_a_batch_cut_short_between_its_transaction_and_its_notes_applies_nothing_twice(world: LedgerWorld) -> None:
    # given the progress table failing the note that the batch finished, once (the Lambda timing out there)
    notes = world.deployed.dependencies.delivery_notes
    assert notes is not None
    notes.client = Interleaved(world.dynamodb, "put_item", instead=fails_at(2, "InternalServerError", "PutItem"))
    records = [world.put(ROOT, "song1", 1, "2018-01"), world.put(ROOT, "song1", 1, "2018-02")]
    # when the invocation fails after its transaction, and the mapping retries it
    with pytest.raises(ClientError):
        deliver(world, ROOT, delivered(world, ROOT, records))
    assert deliver(world, ROOT, delivered(world, ROOT, records)) == OK
    # then the download counts once, in February, and nothing is left unfinished
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}
    note = notes.note_of(ROOT)
    assert note is not None
    assert note["Unfinished"]["M"] == {}


def test_records_skipped_after_the_highest_delivered_during_a_pause_past_the_retention_are_reported(
    world: LedgerWorld,
) -> None:
    # given a download delivered, then a record written and not delivered, and a pause of the mapping past the
    # retention (the mapping resumes at the trim horizon without a word, L6)
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.put(ROOT, "song2", 1, "2018-01")
    world.clock += DAY + 3600
    later = world.put(ROOT, "song3", 1, "2018-01")
    # when the shard's next record is delivered
    assert deliver(world, ROOT, delivered(world, ROOT, [later])) == OK
    # then the range after the highest record delivered, up to this one, is reported as possibly trimmed
    trimmed = [report for report in world.reports() if report["kind"] == "records_trimmed"]
    assert [(report["checkpoint"], report["firstReadableSequence"]) for report in trimmed] == [(first, later)]


def test_an_expiry_spelled_as_a_lambda_event_spells_it_keeps_the_download_counted(world: LedgerWorld) -> None:
    # given a January download, delivered, and its expiry by TTL as the mapping's event spells userIdentity (S12)
    first = world.put(ROOT, "song1", 1, "2018-01")
    deliver(world, ROOT, delivered(world, ROOT, [first]))
    world.expire(ROOT, "song1", 1)
    records = delivered(world, ROOT, [world.last(ROOT)])
    records[0]["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    # when the mapping delivers it, twice
    assert deliver(world, ROOT, records) == OK
    assert deliver(world, ROOT, records) == OK
    # then the expired download stays counted, once
    assert world.boards() == {("song1", "2018-01"): 1}


def test_an_aggregate_whose_removal_from_the_index_failed_leaves_it_on_the_retry(world: LedgerWorld) -> None:
    # given song1's only January download, delivered; then its deletion, whose removal of the aggregate from the index
    # meets another writer's transaction on the item once (TransactionConflictException)
    first = world.put(ROOT, "song1", 1, "2018-01")
    deliver(world, ROOT, delivered(world, ROOT, [first]))
    removed = world.delete(ROOT, "song1", 1)
    assert removed is not None
    conflicts_once = fails_at(1, "TransactionConflictException", "UpdateItem")
    ledger_client(world, Interleaved(world.dynamodb, "update_item", instead=conflicts_once))
    # when the invocation fails after its transaction, and the mapping retries it
    with pytest.raises(ClientError):
        deliver(world, ROOT, delivered(world, ROOT, [removed]))
    assert in_index(world, "song1", "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [removed])) == OK
    # then the aggregate is at 0 and out of the index: the ledger item's Decreased named it to the retry
    assert world.boards() == world.recount() == {}
    assert not in_index(world, "song1", "2018-01")
