"""A second review of one reader per shard (STREAM_READERS=1), after its fixes: the entity read from the image and moved
between entities, sums past 38 digits left out of their transaction and reported, readBack ending at its range's last
record, malformed records reported. Each test is named for what should hold. Those marked xfail are findings: the
reason says what happens instead and which AWS sentence it meets. The rest are angles tried that held."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from leaderboard_core.claims import BASE_CONTRIBUTION, BASE_ENTITY
from tests.unit.aggregator.handler_on_moto import client_error
from tests.unit.aggregator.ledger_on_moto import (
    CHILD,
    LEDGER_TABLE,
    OK,
    ROOT,
    TABLE,
    Interleaved,
    LedgerWorld,
    counts,
    deliver,
    delivered,
    fails_at,
    in_index,
    kinds,
    ledger_client,
    ledger_item_of,
    read_back,
    single_table,
    world,
    write,
)
from tests.unit.aggregator.rebase_on_moto import repair_world
from tests.unit.aggregator.test_one_reader_mode import OneAggregatePastThirtyEightDigits

__all__ = ["world"]  # fixtures, used by name


def past_thirty_eight_digits(world: LedgerWorld, song: str, month: str) -> None:
    """The aggregate one step short of 38 digits in its order; the ledger's writes with DynamoDB's number precision."""
    world.dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": song},
            "SK": {"S": month},
            "DownloadCount": {"N": "999999999999"},
            "LeaderboardOrder": {"N": "9" * 38},
        },
    )
    ledger_client(world, OneAggregatePastThirtyEightDigits(world.dynamodb))


# ------------------------------------------------------------------------------------------------------------ findings


def test_a_remove_without_its_old_image_of_a_counted_download_takes_it_away_or_asks_for_a_recount(
    world: LedgerWorld,
) -> None:
    # given a January download of song1, delivered and counted
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    # when its deletion is delivered without the old image
    removed = world.delete(ROOT, "song1", 1)
    assert removed is not None
    records = delivered(world, ROOT, [removed])
    del records[0]["dynamodb"]["OldImage"]
    assert deliver(world, ROOT, records) == OK
    # then the download no longer counts, or recover is asked to recount January (a refused_record naming it)
    recounted = {(report.get("entityId"), report.get("board")) for report in world.reports()}
    assert world.boards() == {} or ("song1", "2018-01") in recounted


def test_a_download_moved_across_many_entities_still_moves_and_never_blocks_its_shard(world: LedgerWorld) -> None:
    # given a single-table download counted for the 197th of 2040-byte songs, its ledger item's Decreased naming the
    # January aggregates of the 196 songs it was moved from (what 196 delivered moves leave: none is dropped)
    songs = [f"{index:04d}" + "s" * 2036 for index in range(198)]
    key, last = single_table(1, songs[196])
    inserted = write(world, "INSERT", key, None, last)
    assert deliver(world, ROOT, delivered(world, ROOT, [inserted])) == OK
    item = ledger_item_of(world, key)
    item["Decreased"] = {"L": [{"L": [{"S": song}, {"S": "2018-01"}]} for song in songs[:196]]}
    world.dynamodb.put_item(TableName=LEDGER_TABLE, Item=item)
    # when it is moved to the 198th song and the edit is delivered
    moved = {**last, "songID": {"S": songs[197]}}
    edit = write(world, "MODIFY", key, last, moved)
    response = deliver(world, ROOT, delivered(world, ROOT, [edit]))
    # then the batch succeeds and the download counts for the 198th song only
    assert response == OK
    assert counts(world, (songs[196], "2018-01"), (songs[197], "2018-01")) == [0, 1]


def test_an_overflow_is_reported_even_when_the_batch_fails_after_its_transaction_and_is_retried(
    world: LedgerWorld,
) -> None:
    # given song1's January aggregate one step short of 38 digits, and a batch of a January download of song1 and a
    # download of song2, DynamoDB failing the song2 transaction once (after song1's committed without January)
    world.dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "2018-01"},
            "DownloadCount": {"N": "999999999999"},
            "LeaderboardOrder": {"N": "9" * 38},
        },
    )

    def song2_fails_once(calls: int, send: Any, parameters: dict[str, Any]) -> Any:
        names = str(parameters["TransactItems"])
        if "song2" in names and not failed:
            failed.append(calls)
            raise client_error("InternalServerError", "TransactWriteItems")
        return send(**parameters)

    failed: list[int] = []
    ledger_client(
        world,
        Interleaved(
            OneAggregatePastThirtyEightDigits(world.dynamodb), "transact_write_items", instead=song2_fails_once
        ),
    )
    batch = [world.put(ROOT, "song1", 1, "2018-01"), world.put(ROOT, "song2", 1, "2018-01")]
    # when the invocation fails, and the mapping retries the batch
    with pytest.raises(ClientError):
        deliver(world, ROOT, delivered(world, ROOT, batch))
    assert deliver(world, ROOT, delivered(world, ROOT, batch)) == OK
    # then song2 counts its download, and January's refusal reached the failure queue for recover to recount
    assert counts(world, ("song2", "2018-01")) == [1]
    assert [(report["kind"], report["board"]) for report in world.reports()] == [("refused_record", "2018-01")]


def test_a_read_back_whose_first_records_are_gone_without_an_exception_asks_for_a_recount(world: LedgerWorld) -> None:
    # given two downloads the mapping gave up, the first trimmed between GetShardIterator and GetRecords, GetRecords
    # then answering from the next record without TrimmedDataAccessException
    first = world.put(ROOT, "song1", 1, "2018-01")
    second = world.put(ROOT, "song2", 1, "2018-01")

    def head_trimmed(_calls: int, read: Any, parameters: dict[str, Any]) -> Any:
        page = read(**parameters)
        return {
            **page,
            "Records": [record for record in page["Records"] if int(record["dynamodb"]["SequenceNumber"]) > int(first)],
        }

    world.deployed.dependencies.streams = Interleaved(world.streams, "get_records", instead=head_trimmed)
    # when recover hands the range to the function
    answer = read_back(world, ROOT, first, second)
    # then the answer asks for a recount, or both downloads count
    assert answer["recount"] or world.boards() == {("song1", "2018-01"): 1, ("song2", "2018-01"): 1}


# ------------------------------------------------------------------------------------------------ angles that held


def test_a_decreased_entry_is_dropped_once_its_aggregate_left_the_index_so_it_never_grows(world: LedgerWorld) -> None:
    # given a single-table download moved from song1 to song2 and then to song3, each edit delivered
    key, first = single_table(1, "song1")
    second, third = {**first, "songID": {"S": "song2"}}, {**first, "songID": {"S": "song3"}}
    writes = [
        write(world, "INSERT", key, None, first),
        write(world, "MODIFY", key, first, second),
        write(world, "MODIFY", key, second, third),
    ]
    for sequence in writes:
        assert deliver(world, ROOT, delivered(world, ROOT, [sequence])) == OK
    # then it counts for song3 only, both aggregates it left are out of the index, and its ledger item's Decreased
    # names neither any more (each was dropped once its aggregate had left the index)
    assert counts(world, ("song1", "2018-01"), ("song2", "2018-01"), ("song3", "2018-01")) == [0, 0, 1]
    assert [in_index(world, song, "2018-01") for song in ("song1", "song2")] == [False, False]
    assert ledger_item_of(world, key).get("Decreased", {"L": []})["L"] == []


def test_an_entity_change_whose_index_step_fails_names_the_old_entitys_aggregate_as_a_pair_for_the_retry(
    world: LedgerWorld,
) -> None:
    # given a single-table download counted for song1, and its edit to song2, whose removal of song1's aggregate from
    # the index meets another writer's transaction on the item once
    key, first = single_table(1, "song1")
    inserted = write(world, "INSERT", key, None, first)
    assert deliver(world, ROOT, delivered(world, ROOT, [inserted])) == OK
    edit = write(world, "MODIFY", key, first, {**first, "songID": {"S": "song2"}})
    conflicts_once = fails_at(1, "TransactionConflictException", "UpdateItem")
    ledger_client(world, Interleaved(world.dynamodb, "update_item", instead=conflicts_once))
    # when the invocation fails after its transaction
    with pytest.raises(ClientError):
        deliver(world, ROOT, delivered(world, ROOT, [edit]))
    # then the ledger item names song1's January as a pair (it counts for song2 now), and the retry takes it out of the
    # index and drops it
    decreased = ledger_item_of(world, key)["Decreased"]["L"]
    assert [(entry["L"][0]["S"], entry["L"][1]["S"]) for entry in decreased] == [("song1", "2018-01")]
    assert in_index(world, "song1", "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    assert counts(world, ("song1", "2018-01"), ("song2", "2018-01")) == [0, 1]
    assert not in_index(world, "song1", "2018-01")
    assert "Decreased" not in ledger_item_of(world, key)


def test_an_entity_change_and_back_within_one_batch_counts_once_where_it_began(world: LedgerWorld) -> None:
    # given a single-table download counted for song1, then edited to song2 and back to song1
    key, first = single_table(1, "song1")
    moved = {**first, "songID": {"S": "song2"}}
    inserted = write(world, "INSERT", key, None, first)
    assert deliver(world, ROOT, delivered(world, ROOT, [inserted])) == OK
    there = write(world, "MODIFY", key, first, moved)
    back = write(world, "MODIFY", key, moved, first)
    # when both edits are delivered in one batch, twice (a retry)
    assert deliver(world, ROOT, delivered(world, ROOT, [there, back])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [there, back])) == OK
    # then it counts once for song1, song2's board never counted it and is not in the index; nothing is reported
    assert counts(world, ("song1", "2018-01"), ("song2", "2018-01")) == [1, 0]
    assert [in_index(world, song, "2018-01") for song in ("song1", "song2")] == [True, False]
    assert ledger_item_of(world, key)[BASE_ENTITY] == {"S": "song1"}
    assert world.reports() == []


def test_keys_moving_both_ways_between_two_entities_in_one_batch_each_count_once(world: LedgerWorld) -> None:
    # given four single-table downloads: two counted for song1, two for song2
    downloads = [single_table(number, song) for number, song in enumerate(["song1", "song1", "song2", "song2"])]
    keys, images = [key for key, _ in downloads], [image for _, image in downloads]
    inserts = [write(world, "INSERT", key, None, image) for key, image in zip(keys, images, strict=True)]
    assert deliver(world, ROOT, delivered(world, ROOT, inserts)) == OK
    # when the first two move to song2 and the third to song1 (the same aggregates in one batch, both directions)
    targets = ["song2", "song2", "song1"]
    edits = [
        write(world, "MODIFY", key, image, {**image, "songID": {"S": target}})
        for key, image, target in zip(keys[:3], images[:3], targets, strict=True)
    ]
    sent = ledger_client(world, Interleaved(world.dynamodb, "transact_write_items"))
    assert deliver(world, ROOT, delivered(world, ROOT, edits)) == OK
    # then song1 counts one, song2 three: no transaction named an aggregate twice (DynamoDB refuses "More than one
    # action in the TransactWriteItems operation targets the same item"), each key's moves went in one transaction
    assert counts(world, ("song1", "2018-01"), ("song2", "2018-01")) == [1, 3]
    assert sent.calls == 2
    assert world.reports() == []


def test_an_entity_change_racing_another_invocation_on_the_new_entity_counts_both(world: LedgerWorld) -> None:
    # given a single-table download counted for song1, its edit to song2, and another download of song2 applied by
    # another invocation between this invocation's read of the key and its transaction
    key, first = single_table(1, "song1")
    inserted = write(world, "INSERT", key, None, first)
    assert deliver(world, ROOT, delivered(world, ROOT, [inserted])) == OK
    edit = write(world, "MODIFY", key, first, {**first, "songID": {"S": "song2"}})
    other_key, other = single_table(2, "song2")
    racing = write(world, "INSERT", other_key, None, other)
    answers: list[dict[str, Any]] = []
    ledger_client(
        world,
        Interleaved(
            world.dynamodb,
            "transact_write_items",
            lambda: answers.append(deliver(world, ROOT, delivered(world, ROOT, [racing]))),
        ),
    )
    # when this invocation applies the edit
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    # then song2 counts both downloads, song1 none, and song1 left the index
    assert answers == [OK]
    assert counts(world, ("song1", "2018-01"), ("song2", "2018-01")) == [0, 2]
    assert not in_index(world, "song1", "2018-01")


def test_an_entity_change_racing_a_newer_edit_of_the_same_key_ends_where_the_newer_says(world: LedgerWorld) -> None:
    # given a single-table download counted for song1, edited to song2 and then to song3, the song3 edit applied by
    # another invocation between this invocation's read of the key and its transaction of the song2 edit
    key, first = single_table(1, "song1")
    second, third = {**first, "songID": {"S": "song2"}}, {**first, "songID": {"S": "song3"}}
    inserted = write(world, "INSERT", key, None, first)
    assert deliver(world, ROOT, delivered(world, ROOT, [inserted])) == OK
    edit = write(world, "MODIFY", key, first, second)
    newer = write(world, "MODIFY", key, second, third)
    answers: list[dict[str, Any]] = []
    ledger_client(
        world,
        Interleaved(
            world.dynamodb,
            "transact_write_items",
            lambda: answers.append(deliver(world, ROOT, delivered(world, ROOT, [newer]))),
        ),
    )
    # when this invocation applies the song2 edit
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    # then the newer edit decides: the download counts for song3 only
    assert answers == [OK]
    assert counts(world, ("song1", "2018-01"), ("song2", "2018-01"), ("song3", "2018-01")) == [0, 0, 1]


def test_an_overflow_on_one_aggregate_counts_the_others_of_its_transaction_exactly_once(world: LedgerWorld) -> None:
    # given song1's January aggregate one step short of 38 digits, a February download of song1 counted, and then in
    # one batch: a new January download (refused), the February one moved to March, and a new February download
    past_thirty_eight_digits(world, "song1", "2018-01")
    february = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [february])) == OK
    batch = [
        world.put(ROOT, "song1", 2, "2018-01"),
        world.put(ROOT, "song1", 1, "2018-03"),
        world.put(ROOT, "song1", 3, "2018-02"),
    ]
    # when the batch is delivered, and retried
    assert deliver(world, ROOT, delivered(world, ROOT, batch)) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, batch)) == OK
    # then the others counted exactly once across the resend, and January alone was reported, once, naming its record
    assert counts(world, ("song1", "2018-01"), ("song1", "2018-02"), ("song1", "2018-03")) == [999999999999, 1, 1]
    assert [(report["kind"], report["board"], report["sequenceNumber"]) for report in world.reports()] == [
        ("refused_record", "2018-01", batch[0])
    ]


def test_an_overflowed_aggregate_repaired_and_then_moved_from_counts_right(world: LedgerWorld) -> None:
    # given song1's January aggregate one step short of 38 digits, a January download refused by it and reported
    past_thirty_eight_digits(world, "song1", "2018-01")
    january = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [january])) == OK
    assert kinds(world) == ["refused_record"]
    # when recover repairs (in this mode the rebase, then the aggregate the report names set to what the ledger counts
    # in it), and the download is then moved to February and delivered
    repair_world(world, [("song1", "2018-01")])
    edit = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    # then the download counts once, in February: the ledger item had moved with the refused record
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}


def test_a_download_rejected_as_malformed_and_fixed_by_an_edit_counts_once(world: LedgerWorld) -> None:
    # given a download with an unreadable timestamp, delivered and reported, then fixed in place
    broken = world.put(ROOT, "song1", 1, "2018-01", valid=False)
    assert deliver(world, ROOT, delivered(world, ROOT, [broken])) == OK
    assert kinds(world) == ["rejected_download"]
    fixed = world.put(ROOT, "song1", 1, "2018-01")
    # when the fix is delivered, then both again, then the fix alone (retries in any order)
    assert deliver(world, ROOT, delivered(world, ROOT, [fixed])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [broken, fixed])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [fixed])) == OK
    # then it counts once, in January
    assert world.boards() == world.recount() == {("song1", "2018-01"): 1}


def test_an_edit_to_an_oversize_entity_takes_the_old_contribution_away_and_is_reported(world: LedgerWorld) -> None:
    # given a single-table download counted for song1, then edited so its song is longer than a partition key allows
    key, first = single_table(1, "song1")
    inserted = write(world, "INSERT", key, None, first)
    assert deliver(world, ROOT, delivered(world, ROOT, [inserted])) == OK
    edit = write(world, "MODIFY", key, first, {**first, "songID": {"S": "s" * 2049}})
    # when the edit is delivered
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    # then song1 no longer counts it and left the index, and the edit is reported as a rejected download
    assert counts(world, ("song1", "2018-01")) == [0]
    assert not in_index(world, "song1", "2018-01")
    assert [(report["kind"], report["sequenceNumber"]) for report in world.reports()] == [("rejected_download", edit)]
    assert ledger_item_of(world, key)[BASE_CONTRIBUTION] == {"M": {}}


def test_a_read_back_ending_at_a_closed_shards_last_record_is_applied(world: LedgerWorld) -> None:
    # given a January download and its edit into February, the last records of a shard closed by a split, the mapping
    # having given up their batch; GetRecords answers the closed shard's end without a next iterator
    first = world.put(ROOT, "song1", 1, "2018-01")
    edit = world.put(ROOT, "song1", 1, "2018-02")
    world.split(ROOT, CHILD, 5_000_000)

    def closed(_calls: int, read: Any, parameters: dict[str, Any]) -> Any:
        page = read(**parameters)
        return page if page["Records"] else {"Records": []}

    world.deployed.dependencies.streams = Interleaved(world.streams, "get_records", instead=closed)
    # when recover hands the range to the function
    answer = read_back(world, ROOT, first, edit)
    # then the range is applied: the download counts once, in February
    assert (answer["readBack"], answer["recount"], answer["records"]) == ("applied", False, 2)
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}


def test_a_read_back_stops_at_its_end_record_and_leaves_later_records_to_the_mapping(world: LedgerWorld) -> None:
    # given a January download and its edit into February, the mapping having given up the download's batch only
    first = world.put(ROOT, "song1", 1, "2018-01")
    edit = world.put(ROOT, "song1", 1, "2018-02")
    # when recover hands the download's range to the function, and the mapping then delivers the edit
    answer = read_back(world, ROOT, first, first)
    january = world.boards()
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    # then the readBack applied the download alone, and the edit moved it on
    assert (answer["records"], january) == (1, {("song1", "2018-01"): 1})
    assert world.boards() == world.recount() == {("song1", "2018-02"): 1}


def test_a_ledger_item_whose_decreased_names_boards_leaves_them_when_the_key_moves_entity(world: LedgerWorld) -> None:
    # given a single-table download counted for song1 in February, its ledger item's Decreased naming song1's January
    # as a board (the item format before entities moved), that aggregate at 0 and still in the index (a crash between
    # the move's transaction and its removal from the index)
    key, january = single_table(1, "song1")
    inserted = write(world, "INSERT", key, None, january)
    assert deliver(world, ROOT, delivered(world, ROOT, [inserted])) == OK
    february = {**january, "Timestamp": {"S": "2018-02-15T10:00:00Z"}}
    edit = write(world, "MODIFY", key, january, february)
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    world.dynamodb.update_item(
        TableName=TABLE,
        Key={"songID": {"S": "song1"}, "SK": {"S": "2018-01"}},
        UpdateExpression="SET #month = :month, LeaderboardOrder = :order",
        ExpressionAttributeNames={"#month": "Month"},
        ExpressionAttributeValues={":month": {"S": "2018-01#0"}, ":order": {"N": "1"}},
    )
    item = ledger_item_of(world, key)
    item["Decreased"] = {"L": [{"S": "2018-01"}]}
    world.dynamodb.put_item(TableName=LEDGER_TABLE, Item=item)
    assert in_index(world, "song1", "2018-01")
    # when the download is moved to song2 and the edit delivered
    moved = write(world, "MODIFY", key, february, {**february, "songID": {"S": "song2"}})
    assert deliver(world, ROOT, delivered(world, ROOT, [moved])) == OK
    # then song1's January and February are at 0 and out of the index, song2's February counts it; the ledger item
    # names neither any more, both having left the index (a crash before that names them as pairs: the test above)
    assert counts(world, ("song1", "2018-01"), ("song1", "2018-02"), ("song2", "2018-02")) == [0, 0, 1]
    assert [in_index(world, "song1", month) for month in ("2018-01", "2018-02")] == [False, False]
    assert "Decreased" not in ledger_item_of(world, key)


def test_an_entity_change_racing_another_invocation_on_the_old_entity_keeps_the_old_entity_right(
    world: LedgerWorld,
) -> None:
    # given a single-table download counted for song1, its edit to song2, and another download of song1 applied by
    # another invocation between this invocation's read of the key and its transaction
    key, first = single_table(1, "song1")
    inserted = write(world, "INSERT", key, None, first)
    assert deliver(world, ROOT, delivered(world, ROOT, [inserted])) == OK
    edit = write(world, "MODIFY", key, first, {**first, "songID": {"S": "song2"}})
    other_key, other = single_table(2, "song1")
    racing = write(world, "INSERT", other_key, None, other)
    answers: list[dict[str, Any]] = []
    ledger_client(
        world,
        Interleaved(
            world.dynamodb,
            "transact_write_items",
            lambda: answers.append(deliver(world, ROOT, delivered(world, ROOT, [racing]))),
        ),
    )
    # when this invocation applies the edit
    assert deliver(world, ROOT, delivered(world, ROOT, [edit])) == OK
    # then song1 counts the other download and stays in the index, song2 counts the moved one
    assert answers == [OK]
    assert counts(world, ("song1", "2018-01"), ("song2", "2018-01")) == [1, 1]
    assert [in_index(world, song, "2018-01") for song in ("song1", "song2")] == [True, True]


def test_a_remove_delivered_before_a_given_up_entity_change_takes_the_download_from_where_it_counted(
    world: LedgerWorld,
) -> None:
    # given a single-table download counted for song1, its edit to song2 in a batch the mapping gave up, and then its
    # deletion delivered
    key, first = single_table(1, "song1")
    moved = {**first, "songID": {"S": "song2"}}
    inserted = write(world, "INSERT", key, None, first)
    assert deliver(world, ROOT, delivered(world, ROOT, [inserted])) == OK
    edit = write(world, "MODIFY", key, first, moved)
    removed = write(world, "REMOVE", key, moved, None)
    assert deliver(world, ROOT, delivered(world, ROOT, [removed])) == OK
    # when recover reads the given-up edit back
    answer = read_back(world, ROOT, edit, edit)
    # then the deletion took the download from song1, where the ledger said it counted, and the edit read back after
    # it moved nothing: no board counts it
    assert (answer["readBack"], answer["keysApplied"]) == ("applied", 0)
    assert counts(world, ("song1", "2018-01"), ("song2", "2018-01")) == [0, 0]
    assert [in_index(world, song, "2018-01") for song in ("song1", "song2")] == [False, False]


def test_an_expiry_delivered_before_a_given_up_entity_change_keeps_the_download_where_it_expired(
    world: LedgerWorld,
) -> None:
    # given a single-table download counted for song1, its edit to song2 in a batch the mapping gave up, and then its
    # expiry by TTL (old image: song2) delivered, twice
    key, first = single_table(1, "song1")
    moved = {**first, "songID": {"S": "song2"}}
    inserted = write(world, "INSERT", key, None, first)
    assert deliver(world, ROOT, delivered(world, ROOT, [inserted])) == OK
    edit = write(world, "MODIFY", key, first, moved)
    expired = write(world, "REMOVE", key, moved, None)
    world.shards[ROOT].records[-1]["userIdentity"] = {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}
    assert deliver(world, ROOT, delivered(world, ROOT, [expired])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [expired])) == OK
    # when recover reads the given-up edit back
    answer = read_back(world, ROOT, edit, edit)
    # then the expired download stays counted once, as its last image says (song2), and song1 no longer counts it
    assert (answer["readBack"], answer["keysApplied"]) == ("applied", 0)
    assert counts(world, ("song1", "2018-01"), ("song2", "2018-01")) == [0, 1]
    assert [in_index(world, song, "2018-01") for song in ("song1", "song2")] == [False, True]
