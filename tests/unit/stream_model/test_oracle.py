"""The oracle reads each image as the table stores it: a download counts by what its item holds, whichever steps
spoilt and mended it (tests/stream_model/histories.py: read_image, contribution)."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

from tests.stream_model.aws_delivery import Written
from tests.stream_model.histories import contribution, local_buckets, rejected, write_timestamps

SUMMED = "periods, a category, summed"
DOWNLOAD = Written("song1", "download-00000", "2018-01-15T12:30:00Z", genre={"S": "rock"}, plays={"N": "2.5"})


def test_a_download_with_a_mended_timestamp_and_an_amount_still_not_a_number_counts_nothing() -> None:
    # given a download whose Plays is a string and whose timestamp was spoilt, then mended
    spoilt = dataclasses.replace(DOWNLOAD, plays={"S": "12"}, malformed=2)
    mended = dataclasses.replace(spoilt, timestamp="2018-02-15T12:30:00Z", malformed=0)
    # when the oracle reads the mended image
    # then it counts nothing, and the download is one the aggregator must report
    assert contribution(mended, SUMMED) == {}
    assert rejected(mended, SUMMED)


def test_a_download_mended_of_every_defect_counts_its_amount_on_each_board() -> None:
    # given the same download once its Plays is a number again
    mended = dataclasses.replace(DOWNLOAD, timestamp="2018-02-15T12:30:00Z", plays={"N": "1000"})
    # when the oracle reads it
    counted = contribution(mended, SUMMED)
    # then it adds 1000 to each period's board and to each of its category's
    buckets = ("2018-02-15T12", "2018-02", "2018", "all")
    boards = [*buckets, *(f"{bucket}@rock" for bucket in buckets)]
    assert counted == {("song1", board): Decimal(1000) for board in boards}
    assert not rejected(mended, SUMMED)


def test_a_category_that_is_not_a_string_spoils_a_download_whose_timestamp_is_well_formed() -> None:
    # given a download with a well-formed timestamp and a numeric Genre, on boards with categories
    spoilt = dataclasses.replace(DOWNLOAD, genre={"N": "5"}, plays=None)
    # when the oracle reads it, then it counts nothing (not on its overall boards either)
    assert contribution(spoilt, "periods and a category") == {}
    assert rejected(spoilt, "periods and a category")


def test_an_item_of_another_type_is_neither_counted_nor_rejected() -> None:
    other = dataclasses.replace(DOWNLOAD, kind="PLAY", plays={"S": "12"})
    assert contribution(other, SUMMED) == {}
    assert not rejected(other, SUMMED)


def test_the_oracle_keys_new_york_s_clock_changes_as_the_contract_says() -> None:
    # given the boards on New York's clock, and the nights its clocks change (hand-made keys, not the product's code)
    boards = "local time, seasons and a category"
    periods = ("hour", "day", "month", "season", "all")
    expected = {
        "2018-03-11T06:30:00Z": ["2018-03-11T01", "2018-03-11", "2018-03", "S2018-03-05", "all"],
        "2018-03-11T07:30:00Z": ["2018-03-11T03", "2018-03-11", "2018-03", "S2018-03-05", "all"],
        "2018-03-11T03:30:00Z": ["2018-03-10T22", "2018-03-10", "2018-03", "S2018-03-05", "all"],
        "2018-11-04T05:30:00Z": ["2018-11-04T01", "2018-11-04", "2018-11", "S2018-10-29", "all"],
        "2018-11-04T06:30:00Z": ["2018-11-04T01", "2018-11-04", "2018-11", "S2018-10-29", "all"],
        "2018-11-04T07:30:00-05:00": ["2018-11-04T07", "2018-11-04", "2018-11", "S2018-10-29", "all"],
        "2018-01-31T23:30:00-05:00": ["2018-01-31T23", "2018-01-31", "2018-01", "S2018-01-22", "all"],
        "2018-01-01T00:30:00Z": ["2017-12-31T19", "2017-12-31", "2017-12", "all"],
        "2018-12-31T23:30:00Z": ["2018-12-31T18", "2018-12-31", "2018-12", "S2018-12-24", "all"],
    }
    # when the oracle buckets each timestamp a write on those boards may carry
    buckets = {timestamp: local_buckets(timestamp, periods, boards) for timestamp in write_timestamps(boards)}
    # then the skipped hour has no key, both passes of the repeated hour share one, and the rest is New York's day
    assert buckets == expected
