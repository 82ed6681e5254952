"""One reader per shard (STREAM_READERS=1, ledger mode): the handler applies the mapping's events and recover's readBack
and nothing else, each record moving its download key as the key's versioned ledger item says. Each test compares the
boards with a recount of the items made by the test itself (ledger_on_moto.py), on moto's tables and queue."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from aggregator_settings import Settings
from leaderboard_core.claims import (
    CLAIM_KEY,
    CLAIM_OWNER,
    CLAIMS_TABLE_VARIABLE,
    LEDGER_VARIABLE,
    STREAM,
    STREAM_FROM,
    claim_key,
)
from one_reader import DIRECT_REFUSED
from tests.unit.aggregator.ledger_on_moto import (
    LEDGER_TABLE,
    OK,
    ROOT,
    STREAM_ARN,
    TABLE,
    LedgerWorld,
    deliver,
    delivered,
    in_index,
    key_of,
    ledger_client,
    ledger_item,
    read_back,
    trimmed_iterator,
    world,
)
from tests.unit.aggregator.test_aggregate_store import NUMBER_OVERFLOW, ThirtyEightDigits
from tests.unit.conftest import FakeLambdaContext, count_of

BASE_ENVIRONMENT = {
    "TABLE_NAME": "test-downloads",
    "TABLE_ARN": "arn:aws:dynamodb:us-east-1:000000000000:table/test-downloads",
    "PROGRESS_TABLE_NAME": "test-progress",
}

__all__ = ["world"]  # fixtures, used by name


def test_a_retry_of_an_older_record_after_a_newer_one_changes_nothing(world: LedgerWorld) -> None:
    # given a January download and its edit into February, both delivered and applied
    first = world.put(ROOT, "song1", 1, "2018-01")
    edit = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [first, edit])) == OK
    version = ledger_item(world, "song1", 1)["Version"]
    # when the mapping retries the older record alone (a retry out of order), and then both again
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [edit, first])) == OK
    # then the download counts once, in February only, and its ledger item still names the edit
    assert world.recount() == {("song1", "2018-02"): 1}
    assert world.boards() == world.recount()
    assert ledger_item(world, "song1", 1)["Version"] == version
    assert world.reports() == []


def test_a_newer_record_delivered_before_an_older_one_ends_where_the_newer_says(world: LedgerWorld) -> None:
    # given a January download and its edit into February, the edit delivered first (a bisected retry)
    first = world.put(ROOT, "song1", 1, "2018-01")
    edit = world.put(ROOT, "song1", 1, "2018-02")
    deliver(world, ROOT, delivered(world, ROOT, [edit]))
    # when the INSERT it follows is delivered after it
    deliver(world, ROOT, delivered(world, ROOT, [first]))
    # then the INSERT moves nothing: the download counts in February only
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}


def test_a_delete_then_a_put_again_in_another_month_ends_in_the_new_month(world: LedgerWorld) -> None:
    # given a January download, delivered and counted
    first = world.put(ROOT, "song1", 1, "2018-01")
    deliver(world, ROOT, delivered(world, ROOT, [first]))
    # when it is deleted and put again under the same key in February, and both are delivered
    removed = world.delete(ROOT, "song1", 1)
    again = world.put(ROOT, "song1", 1, "2018-02")
    assert removed is not None
    deliver(world, ROOT, delivered(world, ROOT, [removed, again]))
    # then it counts once, in February; January's aggregate is at 0 and out of the index; nothing is reported
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}
    assert not in_index(world, "song1", "2018-01")
    assert in_index(world, "song1", "2018-02")
    assert world.reports() == []


def test_a_download_the_backfill_counted_is_moved_from_what_it_counted(world: LedgerWorld) -> None:
    # given a January download counted by the backfill before the stream's record of it is delivered
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    # when its INSERT and then its edit into February are delivered
    deliver(world, ROOT, delivered(world, ROOT, [first]))
    edit = world.put(ROOT, "song1", 1, "2018-02")
    deliver(world, ROOT, delivered(world, ROOT, [edit]))
    # then it counts once, in February
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}


def test_a_direct_invocation_is_refused_and_counts_nothing(world: LedgerWorld) -> None:
    # given a download on the stream
    first = world.put(ROOT, "song1", 1, "2018-01")
    # when the function is invoked directly, through the record and with the record
    through = world.read(ROOT)
    event = {"shardId": ROOT, "eventSourceARN": STREAM_ARN, "Records": delivered(world, ROOT, [first])}
    carried = world.deployed.invoke(event, FakeLambdaContext())
    # then both are refused with the reason, nothing is counted, and the shard is not read
    assert through == carried == {"refused": DIRECT_REFUSED, "counted": 0}
    assert world.boards() == {}


def test_a_malformed_record_is_reported_and_the_batch_succeeds(world: LedgerWorld) -> None:
    # given a valid download, one with an unreadable timestamp, and a record with no sequence number
    valid = world.put(ROOT, "song1", 1, "2018-01")
    unreadable = world.put(ROOT, "song1", 2, "2018-01", valid=False)
    records = delivered(world, ROOT, [valid, unreadable])
    broken = {**records[0], "dynamodb": {**records[0]["dynamodb"], "SequenceNumber": "not a number"}}
    # when the mapping delivers all three
    response = deliver(world, ROOT, [*records, broken])
    # then the batch succeeds, the valid download counts, and both others are reported as rejected downloads
    assert response == OK
    assert world.boards() == world.recount() == {("song1", "2018-01"): 1}
    reports = world.reports()
    assert [report["kind"] for report in reports] == ["rejected_download", "rejected_download"]
    assert {report["sequenceNumber"] for report in reports} == {unreadable, None}


def test_a_download_without_the_image_its_change_needs_is_reported_and_the_batch_succeeds(world: LedgerWorld) -> None:
    # given an INSERT that carries no new image and a REMOVE that carries no old one (a stream view type without
    # images), beside a valid download
    valid = world.put(ROOT, "song1", 1, "2018-01")
    inserted = world.put(ROOT, "song2", 1, "2018-01")
    removed = world.delete(ROOT, "song2", 1)
    assert removed is not None
    records = delivered(world, ROOT, [valid, inserted, removed])
    del records[1]["dynamodb"]["NewImage"]
    del records[2]["dynamodb"]["OldImage"]
    # when the mapping delivers them
    response = deliver(world, ROOT, records)
    # then the batch succeeds, the valid download counts, and both others are reported with the image they lack
    assert response == OK
    assert world.boards() == {("song1", "2018-01"): 1}
    reports = world.reports()
    assert [(report["kind"], report["sequenceNumber"]) for report in reports] == [
        ("rejected_download", inserted),
        ("rejected_download", removed),
    ]
    assert ["without NewImage" in reports[0]["reason"], "without OldImage" in reports[1]["reason"]] == [True, True]


def test_a_single_table_download_edited_to_another_entity_moves_there_and_leaves_the_index_when_deleted(
    world: LedgerWorld,
) -> None:
    # given a single-table design: a download keyed by PK, its song an attribute, counted for song1 in January
    key = {"PK": {"S": "DOWNLOAD#1"}}
    first = {**key, "songID": {"S": "song1"}, "Timestamp": {"S": "2018-01-15T10:00:00Z"}, "Type": {"S": "download"}}
    moved = {**first, "songID": {"S": "song2"}}
    inserted = world._record(ROOT, "INSERT", key, None, first)["dynamodb"]["SequenceNumber"]
    assert deliver(world, ROOT, delivered(world, ROOT, [inserted])) == OK
    # when it is edited to song2, the edit delivered twice, and then deleted
    edit = world._record(ROOT, "MODIFY", key, first, moved)["dynamodb"]["SequenceNumber"]
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [inserted, edit])) == OK
    counts_after_edit = [count_of(world.dynamodb, song, "2018-01") for song in ("song1", "song2")]
    index_after_edit = [in_index(world, song, "2018-01") for song in ("song1", "song2")]
    removed = world._record(ROOT, "REMOVE", key, moved, None)["dynamodb"]["SequenceNumber"]
    assert deliver(world, ROOT, delivered(world, ROOT, [removed])) == OK
    # then the edit moved the download from song1 to song2 once, out of song1's board at 0, and the deletion took it
    # from song2, whose board left the index too; nothing is reported
    assert counts_after_edit == [0, 1]
    assert index_after_edit == [False, True]
    assert world.boards() == {}
    assert [in_index(world, song, "2018-01") for song in ("song1", "song2")] == [False, False]
    assert world.reports() == []


def test_a_single_table_download_whose_entity_cannot_key_an_aggregate_is_reported_and_the_batch_succeeds(
    world: LedgerWorld,
) -> None:
    # given a single-table design whose song attribute is longer than DynamoDB's 2048-byte partition key, beside a
    # valid download
    valid = world.put(ROOT, "song1", 1, "2018-01")
    key = {"PK": {"S": "DOWNLOAD#1"}}
    image = {**key, "songID": {"S": "s" * 2049}, "Timestamp": {"S": "2018-01-15T10:00:00Z"}, "Type": {"S": "download"}}
    long = world._record(ROOT, "INSERT", key, None, image)["dynamodb"]["SequenceNumber"]
    # when the mapping delivers both
    response = deliver(world, ROOT, delivered(world, ROOT, [valid, long]))
    # then the batch succeeds, the valid download counts, and the other is reported
    assert response == OK
    assert world.boards() == {("song1", "2018-01"): 1}
    assert [(report["kind"], report["sequenceNumber"]) for report in world.reports()] == [("rejected_download", long)]


class OneAggregatePastThirtyEightDigits(ThirtyEightDigits):
    """DynamoDB's TransactWriteItems as documented: the cancellation reason names the action refused ("If no error
    occurred for the associated item an error with a Null code and Null message will be present"), not every update
    of the transaction."""

    def transact_write_items(self, **parameters: Any) -> Any:
        actions = parameters["TransactItems"]
        refused = ["Update" in action and self._too_precise(action["Update"]) for action in actions]
        if any(refused):
            reasons = [
                {"Code": "ValidationError", "Message": NUMBER_OVERFLOW} if r else {"Code": "None"} for r in refused
            ]
            error = {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"}
            raise ClientError({"Error": error, "CancellationReasons": reasons}, "TransactWriteItems")
        return self._client.transact_write_items(**parameters)


def test_a_sum_past_38_digits_leaves_out_only_its_aggregate_and_still_moves_the_key(world: LedgerWorld) -> None:
    # given song1's January aggregate one step short of 38 digits in its order, and a January and a February download
    # of song1 delivered together (one transaction)
    world.dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "2018-01"},
            "DownloadCount": {"N": "999999999999"},
            "LeaderboardOrder": {"N": "9" * 38},
        },
    )
    ledger_client(world, OneAggregatePastThirtyEightDigits(world.dynamodb))
    january = world.put(ROOT, "song1", 1, "2018-01")
    february = world.put(ROOT, "song1", 2, "2018-02")
    # when the mapping delivers them
    response = deliver(world, ROOT, delivered(world, ROOT, [january, february]))
    # then the batch succeeds: February counts its download, January is left as it was and reported for recover, and
    # the January download's ledger item names its record, so its next edit moves from where the stream says
    assert response == OK
    assert count_of(world.dynamodb, "song1", "2018-01") == 999999999999
    assert count_of(world.dynamodb, "song1", "2018-02") == 1
    assert [(report["kind"], report["board"], report["sequenceNumber"]) for report in world.reports()] == [
        ("refused_record", "2018-01", january)
    ]
    item = ledger_item(world, "song1", 1)
    assert item["Version"]["S"].endswith(january)
    assert item["Contribution"] == {"M": {"2018-01": {"N": "1"}}}


def test_a_read_back_applies_a_given_up_range_exactly_once_even_when_run_twice(world: LedgerWorld) -> None:
    # given three downloads and an edit on the stream, the mapping having given up the range of the first two and the
    # edit of the first into February (never delivered), and delivered the third
    first = world.put(ROOT, "song1", 1, "2018-01")
    world.put(ROOT, "song2", 1, "2018-01")
    edit = world.put(ROOT, "song1", 1, "2018-02")
    third = world.put(ROOT, "song3", 1, "2018-01")
    deliver(world, ROOT, delivered(world, ROOT, [third]))
    # when recover hands the given-up range to the function, twice
    once = read_back(world, ROOT, first, edit)
    twice = read_back(world, ROOT, first, edit)
    # then the range is applied once: every board equals the recount, and the second run moves nothing
    assert world.boards() == world.recount()
    assert world.recount() == {("song1", "2018-02"): 1, ("song2", "2018-01"): 1, ("song3", "2018-01"): 1}
    assert (once["readBack"], once["recount"], once["records"], once["keysApplied"]) == ("applied", False, 3, 2)
    assert (twice["readBack"], twice["recount"], twice["records"], twice["keysApplied"]) == ("applied", False, 3, 0)
    assert world.reports() == []


def test_a_read_back_of_a_trimmed_range_asks_recover_to_recount(world: LedgerWorld) -> None:
    # given a given-up range the stream has trimmed since (GetShardIterator answers TrimmedDataAccessException)
    first = world.put(ROOT, "song1", 1, "2018-01")

    world.streams.get_shard_iterator = trimmed_iterator  # type: ignore[method-assign]
    # when recover hands it to the function
    answer = read_back(world, ROOT, first, first)
    # then nothing is counted and the answer says the range is trimmed: recover recounts
    assert (answer["readBack"], answer["recount"]) == ("trimmed", True)
    assert world.boards() == {}


def test_a_read_back_naming_another_tables_stream_is_not_read(world: LedgerWorld) -> None:
    # given an on-failure record of another table's stream
    info = {"shardId": ROOT, "startSequenceNumber": "1", "endSequenceNumber": "2", "streamArn": "arn:other/stream/x"}
    # when recover hands it to the function
    answer = world.deployed.invoke({"readBack": info}, FakeLambdaContext())
    # then it is not read, and the answer says why and asks for a recount
    assert (answer["readBack"], answer["recount"]) == ("unreadable", True)
    assert "is not a stream of" in answer["reason"]


def test_a_key_whose_ledger_item_two_readers_wrote_is_reported_not_guessed(world: LedgerWorld) -> None:
    # given a download whose ledger item was written with two readers per shard (StreamFrom, no Version)
    first = world.put(ROOT, "song1", 1, "2018-01")
    item = {
        CLAIM_KEY: {"S": claim_key(key_of("song1", 1))},
        CLAIM_OWNER: {"S": STREAM},
        STREAM_FROM: {"S": f"2018-01-01T00:00:00.000|{ROOT}|{first.zfill(40)}"},
    }
    world.dynamodb.put_item(TableName=LEDGER_TABLE, Item=item)
    # when its edit into February is delivered
    edit = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    # then nothing is counted, and each board the record touches is reported for recover to recount
    assert world.boards() == {}
    reports = world.reports()
    assert [(report["kind"], report["board"]) for report in reports] == [
        ("refused_record", "2018-01"),
        ("refused_record", "2018-02"),
    ]
    assert all("two readers" in report["reason"] for report in reports)


def test_the_schedule_reports_a_shard_silent_past_the_retention_once(world: LedgerWorld) -> None:
    # given a download delivered, and then a day and more in which the mapping delivered nothing of the shard
    first = world.put(ROOT, "song1", 1, "2018-01")
    deliver(world, ROOT, delivered(world, ROOT, [first]))
    world.clock += 25 * 3600
    sweep = {"lineageSweep": {"streamArn": STREAM_ARN}}
    # when the schedule's sweep runs, twice
    answers = [world.deployed.invoke(sweep, FakeLambdaContext()) for _ in range(2)]
    # then the first reports that records after the delivered one may have been trimmed (recover recounts), the
    # second nothing more: the first vouched for the shard until then
    reports = world.reports()
    assert [answer["trimmedReports"] for answer in answers] == [1, 0]
    assert [(report["kind"], report["shardId"], report["checkpoint"]) for report in reports] == [
        ("records_trimmed", ROOT, first)
    ]


def test_stream_readers_1_without_ledger_is_refused_at_startup() -> None:
    # given the aggregator's environment with one reader per shard, without ledger mode, and with a reader count
    # that is neither 1 nor 2
    alone = {**BASE_ENVIRONMENT, "STREAM_READERS": "1"}
    three = {**BASE_ENVIRONMENT, "STREAM_READERS": "3", LEDGER_VARIABLE: "true", CLAIMS_TABLE_VARIABLE: "claims"}
    # when the settings are read, then both are refused, naming the setting and the fix
    with pytest.raises(ValueError, match="STREAM_READERS is 1 but LEDGER is not true"):
        Settings.from_environment(alone)
    with pytest.raises(ValueError, match="STREAM_READERS is '3', not 1 or 2"):
        Settings.from_environment(three)


def test_stream_readers_default_to_two_and_take_one_in_ledger_mode() -> None:
    # given the aggregator's environment without STREAM_READERS, and with 1 in ledger mode
    ledger = {**BASE_ENVIRONMENT, LEDGER_VARIABLE: "true", CLAIMS_TABLE_VARIABLE: "claims"}
    # when the settings are read
    default, one = Settings.from_environment(ledger), Settings.from_environment({**ledger, "STREAM_READERS": "1"})
    # then the default is today's two readers, and one is taken
    assert (default.stream_readers, one.stream_readers) == (2, 1)
