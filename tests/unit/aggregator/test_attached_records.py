"""The aggregator attached to a platform's table (docs/attaching.md): the aggregates in a table of their own, so an
item carrying the period attribute is a download like any other; a marker (source_item_filter) telling downloads from
the platform's other items; and the settings that say both, as terraform/lambda.tf sets them."""

from __future__ import annotations

from typing import Any

import pytest

from aggregator_settings import Settings
from download_records import AggregateKey, Download, Ignored, Rejected, Schema, parse_record
from leaderboard_core.source_items import DownloadMarker
from tests.streams import download_record, stream_record

DOWNLOADS = DownloadMarker("type", "DOWNLOAD")
SOURCE_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/music-platform"


def platform_record(sequence: int, image: dict[str, Any]) -> dict[str, Any]:
    """An INSERT of the platform's single-table design: keyed PK/SK, the song an attribute of the item."""
    keys = {"PK": {"S": "USER#u1"}, "SK": {"S": f"ITEM#{sequence}"}}
    return stream_record(sequence, "INSERT", keys, keys | image)


def test_with_aggregates_in_their_own_table_a_download_carrying_the_period_attribute_is_counted() -> None:
    # given a download of the platform's table that happens to carry an attribute named like the period ("Month")
    record = download_record(7, "song1", "2018-01-15T10:00:00Z", extra={"Month": {"S": "January"}})
    # when it is parsed with the aggregates in a table of their own
    parsed = parse_record(record, Schema(aggregates_beside=False))
    # then it is a download of its song's January board
    assert isinstance(parsed, Download)
    assert parsed.keys == (AggregateKey("song1", "2018-01"),)


def test_with_aggregates_beside_the_downloads_the_period_attribute_marks_an_aggregate_write() -> None:
    # given the same record, in the guide's layout (the aggregator's own writes come back on the stream)
    record = download_record(7, "song1", "2018-01-15T10:00:00Z", extra={"Month": {"S": "January"}})
    # when it is parsed, then it is passed over as an aggregate item, never counted nor reported
    assert parse_record(record, Schema()) == Ignored("aggregate item", "7".zfill(21))


@pytest.mark.parametrize(
    "marking",
    [
        {},
        {"type": {"S": "PLAYLIST_ENTRY"}},
        {"type": {"S": "download"}},
        {"type": {"SS": ["DOWNLOAD"]}},
        {"type": {"S": "DOWNLOAD "}},
    ],
    ids=["unmarked", "another type", "another case", "a set", "trailing space"],
)
def test_an_item_the_marker_does_not_mark_is_ignored_not_rejected(marking: dict[str, Any]) -> None:
    # given an item of another type carrying a song and a time, as a playlist entry does
    record = platform_record(3, {"songID": {"S": "song1"}, "Timestamp": {"S": "2018-01-15T10:00:00Z"}} | marking)
    # when it is parsed with source_item_filter = {type, DOWNLOAD}
    parsed = parse_record(record, Schema(aggregates_beside=False, marker=DOWNLOADS))
    # then it is passed over (the mapping's filter drops it too): not counted, not reported as a bad download
    assert isinstance(parsed, Ignored)
    assert "not a download" in parsed.reason


@pytest.mark.parametrize(
    ("image", "reason"),
    [
        ({"songID": {"S": "song1"}}, "Timestamp is missing"),
        ({"Timestamp": {"S": "2018-01-15T10:00:00Z"}}, "songID is missing"),
        ({"songID": {"S": "song1"}, "Timestamp": {"S": "yesterday"}}, "not an ISO 8601 timestamp"),
    ],
)
def test_a_marked_item_that_cannot_be_counted_is_rejected_loudly(image: dict[str, Any], reason: str) -> None:
    # given an item marked as a download but missing what a download needs
    record = platform_record(4, image | {"type": {"S": "DOWNLOAD"}})
    # when it is parsed, then it is rejected (reported to the failure queue), with its reason
    parsed = parse_record(record, Schema(aggregates_beside=False, marker=DOWNLOADS))
    assert isinstance(parsed, Rejected)
    assert reason in parsed.reason


def test_a_marked_download_of_a_single_table_design_is_counted() -> None:
    # given a marked download whose key (PK, SK) does not hold the song
    record = platform_record(
        5, {"type": {"S": "DOWNLOAD"}, "songID": {"S": "song9"}, "Timestamp": {"S": "2018-02-01T00:00:00Z"}}
    )
    # when it is parsed, then it counts in its song's board, and its identity comes from its key
    parsed = parse_record(record, Schema(aggregates_beside=False, marker=DOWNLOADS))
    assert isinstance(parsed, Download)
    assert parsed.keys == (AggregateKey("song9", "2018-02"),)
    assert parsed.download_id is not None


def module_environment(**overrides: str) -> dict[str, str]:
    """The aggregator's environment as terraform/lambda.tf sets it with source_table_name and source_item_filter."""
    return {
        "TABLE_NAME": "music-platform",
        "TABLE_ARN": SOURCE_ARN,
        "AGGREGATES_TABLE_NAME": "music-aggregates",
        "SOURCE_ITEM_ATTRIBUTE": "type",
        "SOURCE_ITEM_VALUE": "DOWNLOAD",
        "PROGRESS_TABLE_NAME": "music-progress",
    } | overrides


def test_the_settings_of_an_attached_aggregator_name_the_aggregates_table_and_keep_the_stream_s_table() -> None:
    # given the environment of an aggregator attached to a platform's table
    # when the aggregator reads its settings
    settings = Settings.from_environment(module_environment())
    # then it writes aggregates to their own table, reads the stream of the platform's, and parses with the marker,
    # every item carrying the period attribute a download
    assert settings.aggregates_table_name == "music-aggregates"
    assert settings.table_arn == SOURCE_ARN
    assert settings.schema.aggregates_beside is False
    assert settings.schema.marker == DOWNLOADS


@pytest.mark.parametrize(
    "environment",
    [
        module_environment(AGGREGATES_TABLE_NAME="music-downloads", TABLE_NAME="music-downloads"),
        {
            name: value
            for name, value in module_environment(TABLE_NAME="music-downloads").items()
            if name != "AGGREGATES_TABLE_NAME"
        },
    ],
    ids=["the module's own table", "a deployment older than the aggregates table"],
)
def test_without_a_table_of_their_own_the_aggregates_are_written_beside_the_downloads(
    environment: dict[str, str],
) -> None:
    # given the guide's layout: AGGREGATES_TABLE_NAME naming the downloads' table, or not set at all
    settings = Settings.from_environment(environment)
    # then the aggregates go to the downloads' table, and an item with the period attribute is an aggregate write
    assert settings.aggregates_table_name == "music-downloads"
    assert settings.schema.aggregates_beside is True


def test_an_empty_source_item_attribute_means_no_marker() -> None:
    # given source_item_filter = null: terraform sets SOURCE_ITEM_ATTRIBUTE and SOURCE_ITEM_VALUE to ""
    settings = Settings.from_environment(module_environment(SOURCE_ITEM_ATTRIBUTE="", SOURCE_ITEM_VALUE=""))
    # then every item with a song and a time is a download
    assert settings.schema.marker is None
