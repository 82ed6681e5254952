"""MODIFY and REMOVE records of downloads, with `retractions`: what each takes back from which board and adds to which.

The expected boards are written out by hand (the UTC bucket of each period, ISO weeks included), never derived with
the product's bucket code.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from download_records import AggregateKey, Change, Download, Ignored, Rejected, Schema, parse_record
from leaderboard_core.source_items import DownloadMarker
from tests.streams import stream_record

RETRACTING = Schema(retractions=True)
EVERY_PERIOD = Schema(periods=("hour", "day", "week", "month", "year", "all"), retractions=True)
TTL = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
KEYS = {"songID": {"S": "song1"}, "SK": {"S": "download-1"}}


def image(song: str = "song1", timestamp: str | None = "2018-01-15T10:00:00Z", **extra: Any) -> dict[str, Any]:
    """A download item as the application wrote it; timestamp=None leaves it out (malformed)."""
    item: dict[str, Any] = {"songID": {"S": song}, "SK": {"S": "download-1"}, "UserID": {"S": "user1"}}
    if timestamp is not None:
        item["Timestamp"] = {"S": timestamp}
    return item | extra


def modified(old: dict[str, Any] | None, new: dict[str, Any] | None, sequence: int = 50) -> dict[str, Any]:
    """A MODIFY of a stream whose view type is NEW_AND_OLD_IMAGES; None leaves an image out."""
    record = stream_record(sequence, "MODIFY", KEYS, new or {})
    record["dynamodb"]["StreamViewType"] = "NEW_AND_OLD_IMAGES"
    if new is None:
        del record["dynamodb"]["NewImage"]
    if old is not None:
        record["dynamodb"]["OldImage"] = old
    return record


def removed(old: dict[str, Any] | None, sequence: int = 60, identity: dict[str, str] | None = None) -> dict[str, Any]:
    """A REMOVE carries the old image only; TTL's deletions name DynamoDB's service in userIdentity."""
    record = modified(old, None, sequence)
    record["eventName"] = "REMOVE"
    if identity is not None:
        record["userIdentity"] = identity
    return record


def changes_of(record: dict[str, Any], schema: Schema) -> dict[tuple[str, str], tuple[int | Decimal, int | Decimal]]:
    """(entity, board) -> (what the record adds there, the download's part there after it)."""
    parsed = parse_record(record, schema)
    assert isinstance(parsed, Download), parsed
    return {(change.key.entity_id, change.key.board): (change.amount, change.value_after) for change in parsed.changes}


@pytest.mark.parametrize(
    "record",
    [
        modified(image(timestamp="2018-01-15T10:00:00Z"), image(timestamp="2018-02-15T10:00:00Z")),
        modified(image("song1"), image("song2")),
        removed(image()),
    ],
    ids=["timestamp edited", "song edited", "deleted"],
)
def test_without_retractions_a_modify_or_remove_is_ignored_and_moves_nothing(record: dict[str, Any]) -> None:
    # given the default schema (retractions off: downloads are immutable), when an edit or a deletion is parsed
    parsed = parse_record(record, Schema())
    # then it is passed over, as before retractions existed
    assert isinstance(parsed, Ignored)
    assert "is not a new download" in parsed.reason


def test_a_deletion_takes_the_download_back_from_every_board_it_counted_in() -> None:
    schema = Schema(periods=("day", "month", "all"), category="Genre", retractions=True)
    record = removed(image(timestamp="2018-01-15T10:00:00Z", Genre={"S": "rock"}))
    assert changes_of(record, schema) == {
        ("song1", "2018-01-15"): (-1, 0),
        ("song1", "2018-01"): (-1, 0),
        ("song1", "all"): (-1, 0),
        ("song1", "2018-01-15@rock"): (-1, 0),
        ("song1", "2018-01@rock"): (-1, 0),
        ("song1", "all@rock"): (-1, 0),
    }


def test_a_deletion_by_ttl_changes_no_count() -> None:
    # given a REMOVE whose userIdentity names DynamoDB's service: the table's TTL deleted an expired download
    record = removed(image(), identity=TTL)
    # when it is parsed with retractions on, then it moves nothing
    parsed = parse_record(record, EVERY_PERIOD)
    assert isinstance(parsed, Ignored)
    assert "TTL" in parsed.reason


def test_a_deletion_by_anyone_else_is_taken_back() -> None:
    record = removed(image(), identity={"type": "Service", "principalId": "backup.amazonaws.com"})
    assert changes_of(record, RETRACTING) == {("song1", "2018-01"): (-1, 0)}


def test_a_timestamp_edited_across_a_month_boundary_moves_between_the_boards_whose_bucket_changes() -> None:
    # given a download of Wednesday 2018-01-31 edited to Thursday 2018-02-01, same ISO week (2018-W05) and year
    record = modified(image(timestamp="2018-01-31T10:00:00Z"), image(timestamp="2018-02-01T10:00:00Z"))
    # then the hour, day and month boards lose it and gain it; the week, year and all-time boards see no change
    assert changes_of(record, EVERY_PERIOD) == {
        ("song1", "2018-01-31T10"): (-1, 0),
        ("song1", "2018-01-31"): (-1, 0),
        ("song1", "2018-01"): (-1, 0),
        ("song1", "2018-02-01T10"): (1, 1),
        ("song1", "2018-02-01"): (1, 1),
        ("song1", "2018-02"): (1, 1),
    }


def test_a_timestamp_edited_across_a_year_boundary_moves_between_the_boards_of_every_period_but_all_time() -> None:
    # given Sunday 2018-12-30 (ISO week 2018-W52) edited to Tuesday 2019-01-01 (ISO week 2019-W01)
    record = modified(image(timestamp="2018-12-30T12:00:00Z"), image(timestamp="2019-01-01T12:00:00+00:00"))
    assert changes_of(record, EVERY_PERIOD) == {
        ("song1", "2018-12-30T12"): (-1, 0),
        ("song1", "2018-12-30"): (-1, 0),
        ("song1", "2018-W52"): (-1, 0),
        ("song1", "2018-12"): (-1, 0),
        ("song1", "2018"): (-1, 0),
        ("song1", "2019-01-01T12"): (1, 1),
        ("song1", "2019-01-01"): (1, 1),
        ("song1", "2019-W01"): (1, 1),
        ("song1", "2019-01"): (1, 1),
        ("song1", "2019"): (1, 1),
    }


def test_a_timestamp_edited_within_its_buckets_moves_nothing() -> None:
    # given 10:00 edited to 10:59 UTC, written in another offset: the same hour, day, week, month and year
    record = modified(image(timestamp="2018-01-15T10:00:00Z"), image(timestamp="2018-01-15T11:59:00+01:00"))
    assert isinstance(parse_record(record, EVERY_PERIOD), Ignored)


def test_a_category_edit_moves_the_download_between_category_boards_and_leaves_the_overall_board() -> None:
    schema = Schema(category="Genre", retractions=True)
    record = modified(image(Genre={"S": "rock"}), image(Genre={"S": "hip hop"}))
    assert changes_of(record, schema) == {("song1", "2018-01@rock"): (-1, 0), ("song1", "2018-01@hip%20hop"): (1, 1)}


def test_a_category_removed_takes_the_download_out_of_its_category_board_only() -> None:
    schema = Schema(category="Genre", retractions=True)
    record = modified(image(Genre={"S": "rock"}), image())
    assert changes_of(record, schema) == {("song1", "2018-01@rock"): (-1, 0)}


@pytest.mark.parametrize(
    ("old", "new", "moved"),
    [
        ("12.50", "10.25", Decimal("-2.25")),
        ("0.3", "0.1", Decimal("-0.2")),
        ("999999999999.999999", "0.000001", Decimal("-999999999999.999998")),
        ("5", "-5", Decimal(-10)),
    ],
)
def test_a_summed_amount_edited_moves_the_exact_difference(old: str, new: str, moved: Decimal) -> None:
    # given a sale whose revenue is corrected (a refund, a typo)
    schema = Schema(amount="Revenue", retractions=True)
    record = modified(image(Revenue={"N": old}), image(Revenue={"N": new}))
    # when parsed, then its board gets the exact decimal difference, and the sale's part there is its new amount
    [(amount, after)] = changes_of(record, schema).values()
    assert isinstance(amount, Decimal)
    assert (amount, after) == (moved, Decimal(new))


def test_a_summed_sale_deleted_takes_its_exact_amount_back() -> None:
    schema = Schema(amount="Revenue", retractions=True)
    assert changes_of(removed(image(Revenue={"N": "19.99"})), schema) == {("song1", "2018-01"): (Decimal("-19.99"), 0)}


def test_an_entity_edit_moves_the_download_to_the_other_entitys_boards() -> None:
    record = modified(image("song1"), image("song2"))
    assert changes_of(record, RETRACTING) == {("song1", "2018-01"): (-1, 0), ("song2", "2018-01"): (1, 1)}


DOWNLOADS = DownloadMarker("type", "DOWNLOAD")
SHARED = Schema(aggregates_beside=False, marker=DOWNLOADS, retractions=True)


def test_an_item_edited_into_a_download_by_its_marker_is_counted() -> None:
    record = modified(image(type={"S": "PLAYLIST_ENTRY"}), image(type={"S": "DOWNLOAD"}))
    assert changes_of(record, SHARED) == {("song1", "2018-01"): (1, 1)}


def test_a_download_edited_out_of_its_marker_is_taken_back() -> None:
    record = modified(image(type={"S": "DOWNLOAD"}), image(type={"S": "download"}))
    assert changes_of(record, SHARED) == {("song1", "2018-01"): (-1, 0)}


def test_an_item_the_marker_never_marked_moves_nothing_when_edited_or_deleted() -> None:
    other = image(type={"S": "PLAYLIST_ENTRY"})
    assert isinstance(parse_record(modified(other, other | {"UserID": {"S": "user2"}}), SHARED), Ignored)
    assert isinstance(parse_record(removed(other), SHARED), Ignored)


@pytest.mark.parametrize(
    "new",
    [image(UserID={"S": "user2"}), image(), image(Plays={"N": "3"})],
    ids=["another user", "the same image written again", "an attribute nobody counts"],
)
def test_an_edit_of_nothing_counted_moves_nothing(new: dict[str, Any]) -> None:
    parsed = parse_record(modified(image(), new), EVERY_PERIOD)
    assert isinstance(parsed, Ignored)
    assert "moves no count" in parsed.reason


def test_an_edit_that_leaves_a_malformed_download_takes_the_old_one_back_and_reports_the_new() -> None:
    # given a download whose timestamp an edit removed
    record = modified(image(), image(timestamp=None), sequence=77)
    # when parsed
    parsed = parse_record(record, RETRACTING)
    # then what the old image counted is taken back, and the new image is reported as a malformed download
    assert isinstance(parsed, Download)
    assert parsed.changes == (Change(AggregateKey("song1", "2018-01"), -1, 0),)
    assert isinstance(parsed.rejection, Rejected)
    assert "Timestamp is missing" in parsed.rejection.reason
    assert parsed.rejection.raw_sequence == "77".zfill(21)
    assert parsed.rejection.record is record


def test_an_edit_that_fixes_a_malformed_download_counts_the_new_image_only() -> None:
    # given a download rejected when written (no timestamp: reported then, never counted), then fixed
    record = modified(image(timestamp="yesterday"), image(timestamp="2018-03-01T00:00:00Z"))
    # then the fixed image is counted, nothing is taken back, and nothing is reported again
    parsed = parse_record(record, RETRACTING)
    assert isinstance(parsed, Download)
    assert parsed.changes == (Change(AggregateKey("song1", "2018-03"), 1, 1),)
    assert parsed.rejection is None


def test_a_malformed_download_edited_into_another_malformed_one_is_reported_and_moves_nothing() -> None:
    parsed = parse_record(modified(image(timestamp=None), image(timestamp="later")), RETRACTING)
    assert isinstance(parsed, Rejected)
    assert "not an ISO 8601 timestamp" in parsed.reason


@pytest.mark.parametrize(
    "record",
    [modified(None, image(timestamp="2018-02-15T10:00:00Z")), removed(None)],
    ids=["MODIFY", "REMOVE"],
)
def test_a_change_without_its_old_image_is_rejected_naming_the_view_type_it_needs(record: dict[str, Any]) -> None:
    # given a stream whose view type is NEW_IMAGE (or KEYS_ONLY): the old image is not in the record
    parsed = parse_record(record, RETRACTING)
    # then it is reported (what it takes back is unknown), never guessed
    assert isinstance(parsed, Rejected)
    assert "NEW_AND_OLD_IMAGES" in parsed.reason


def test_a_modify_without_its_new_image_is_rejected_naming_the_view_type_it_needs() -> None:
    parsed = parse_record(modified(image(), None), RETRACTING)
    assert isinstance(parsed, Rejected)
    assert "NEW_AND_OLD_IMAGES" in parsed.reason


AGGREGATE = {"songID": {"S": "song1"}, "SK": {"S": "2018-01"}, "DownloadCount": {"N": "3"}}


@pytest.mark.parametrize(
    "record",
    [
        modified(AGGREGATE | {"Month": {"S": "2018-01"}}, AGGREGATE | {"Month": {"S": "2018-01"}}),
        modified(AGGREGATE | {"Month": {"S": "2018-01"}}, AGGREGATE | {"DownloadCount": {"N": "0"}}),
        modified(AGGREGATE | {"DownloadCount": {"N": "0"}}, AGGREGATE | {"Month": {"S": "2018-01"}}),
        removed(AGGREGATE | {"Month": {"S": "2018-01"}}),
        removed(AGGREGATE | {"DownloadCount": {"N": "0"}}),
    ],
    ids=["counted", "leaving the index", "back in the index", "deleted", "deleted out of the index"],
)
def test_the_aggregators_own_writes_beside_the_downloads_are_ignored(record: dict[str, Any]) -> None:
    # given an aggregate's image (its period attribute, or once out of the index its count) in the downloads' table
    parsed = parse_record(record, RETRACTING)
    # then it is passed over, never counted or taken back
    assert parsed == Ignored("aggregate item", record["dynamodb"]["SequenceNumber"])


MONTHS = {"2018-01-31T23:00:00Z": "2018-01", "2018-02-01T01:00:00Z": "2018-02", "2019-01-01T00:00:00Z": "2019-01"}
IMAGES = st.fixed_dictionaries(
    {
        "song": st.sampled_from(["song1", "song2"]),
        "timestamp": st.sampled_from(sorted(MONTHS)),
        "genre": st.sampled_from([None, "rock", "pop"]),
        "revenue": st.sampled_from(["1", "2.5", "0.125", "-3"]),
    }
)


def written(drawn: dict[str, Any]) -> dict[str, Any]:
    extra = {"Revenue": {"N": drawn["revenue"]}} | ({"Genre": {"S": drawn["genre"]}} if drawn["genre"] else {})
    return image(drawn["song"], drawn["timestamp"], **extra)


@given(st.lists(IMAGES, min_size=1, max_size=6), st.booleans())
def test_a_download_edited_back_and_forth_ends_where_its_last_image_says(
    images: list[dict[str, Any]], deleted: bool
) -> None:
    # given a sale written, edited through any images, and perhaps deleted at the end
    schema = Schema(category="Genre", amount="Revenue", retractions=True)
    insert = stream_record(1, "INSERT", KEYS, written(images[0]))
    records = [insert] + [modified(written(old), written(new), n + 2) for n, (old, new) in enumerate(pairwise(images))]
    if deleted:
        records.append(removed(written(images[-1]), len(records) + 1))
    # when every record's changes are added up per aggregate
    totals: Counter[tuple[str, str]] = Counter()
    for record in records:
        parsed = parse_record(record, schema)
        for change in parsed.changes if isinstance(parsed, Download) else ():
            totals[(change.key.entity_id, change.key.board)] += change.amount
    # then the sale counts only where its last image says (its month, and its genre's board), for its last amount
    last = images[-1]
    expected: dict[tuple[str, str], Decimal] = {}
    if not deleted:
        month = MONTHS[last["timestamp"]]
        expected[(last["song"], month)] = Decimal(last["revenue"])
        if last["genre"]:
            expected[(last["song"], f"{month}@{last['genre']}")] = Decimal(last["revenue"])
    assert {key: total for key, total in totals.items() if total != 0} == expected


def test_a_download_carrying_the_count_attribute_is_reported_when_written_never_counted_for_good() -> None:
    # given a download that carries the aggregates' count attribute (docs/exactly-once-retractions.md: "downloads
    # must carry neither"): its MODIFYs and REMOVEs are taken for an aggregate's, passed over by the filter and the
    # aggregator
    carrying = image(DownloadCount={"N": "7"})
    taken_back = parse_record(removed(carrying), RETRACTING)
    assert isinstance(taken_back, Ignored)
    assert taken_back.reason == "aggregate item"
    # when it is written, then it is reported, never counted: a count nothing would ever take back
    parsed = parse_record(stream_record(40, "INSERT", KEYS, carrying), RETRACTING)
    assert isinstance(parsed, Rejected), parsed
    assert "DownloadCount" in parsed.reason
