from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from download_records import (
    AggregateKey,
    Download,
    Ignored,
    Rejected,
    Schema,
    coalesce,
    creation_second,
    parse_record,
)
from leaderboard_core.bookkeeping import download_id, pad_sequence
from leaderboard_core.buckets import bucket_key, month_of, utc_moment
from leaderboard_core.periods import PERIODS
from tests.streams import CREATED, aggregate_record, download_record, expired_download_record

SCHEMA = Schema()


@pytest.mark.parametrize(
    ("timestamp", "month"),
    [
        ("2018-01-15T10:00:00Z", "2018-01"),
        ("2018-01-15T10:00:00.123456Z", "2018-01"),
        ("2018-01-31T23:30:00-05:00", "2018-02"),
        ("2018-02-01T00:30:00+01:00", "2018-01"),
        ("2018-12-31T23:59:59+00:00", "2018-12"),
        ("2018-03-04T05:06:07", "2018-03"),
        ("2018-03-04", "2018-03"),
    ],
)
def test_month_is_the_utc_month_of_the_timestamp(timestamp: str, month: str) -> None:
    # given an ISO 8601 timestamp, when its month is derived, then it is the month in UTC
    assert month_of(timestamp) == month


@pytest.mark.parametrize("timestamp", ["yesterday", "2018-13-01T00:00:00Z", "", "2018/01/15"])
def test_month_of_an_unparsable_timestamp_raises(timestamp: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - fromisoformat gives no finer type
        month_of(timestamp)


def milliseconds_since_year_one(timestamp: str) -> int:
    """The first_reached tie-break's instant of a timestamp with its offset, by datetime arithmetic."""
    elapsed = datetime.fromisoformat(timestamp) - datetime(1, 1, 1, tzinfo=UTC)
    return round(elapsed.total_seconds() * 1000)


def test_a_new_download_is_parsed_into_its_aggregate_key() -> None:
    # given a download INSERT, when parsed, then its song, UTC month, padded sequence, creation second and identity
    # (its sort key's digest) are kept
    parsed = parse_record(download_record(42, "song7", "2018-02-03T04:05:06Z", download_id="d-42"), SCHEMA)
    assert parsed == Download(
        AggregateKey("song7", "2018-02"),
        pad_sequence("000000000000000000042"),
        "000000000000000000042",
        CREATED,
        download_id=download_id("d-42"),
        instant=milliseconds_since_year_one("2018-02-03T04:05:06+00:00"),
    )
    assert len(parsed.sequence) == 40


@given(st.text(min_size=1, max_size=300), st.text(min_size=1, max_size=300))
def test_a_download_id_is_short_and_differs_for_different_sort_keys(first: str, second: str) -> None:
    # given two sort keys, when their ids are taken, then each is 22 characters and equal ids mean equal keys
    assert len(download_id(first)) == len(download_id(second)) == 22
    assert (download_id(first) == download_id(second)) == (first == second)


@pytest.mark.parametrize(("value", "second"), [(1516000000.75, 1516000000), (1516000000, 1516000000), ("x", None)])
def test_the_creation_time_is_kept_in_whole_seconds(value: object, second: int | None) -> None:
    record = download_record(42, "song7")
    record["dynamodb"]["ApproximateCreationDateTime"] = value
    assert parse_record(record, SCHEMA).created == second


@pytest.mark.parametrize(
    ("record", "reason_fragment"),
    [
        (download_record(1, "song1", timestamp=None), "Timestamp is missing"),
        (download_record(2, "song1", timestamp="not a date"), "is not an ISO 8601 timestamp"),
        (download_record(3, "song1", extra={"Timestamp": {"N": "1516000000"}}), "Timestamp is missing or not"),
        (download_record(4, "song1", extra={"songID": {"N": "17"}}), "songID is missing or not"),
        (download_record(5, "", timestamp="2018-01-01T00:00:00Z"), "songID is missing or not"),
    ],
)
def test_malformed_downloads_are_rejected_with_a_reason(record: dict, reason_fragment: str) -> None:
    # given a download with a missing or wrongly typed attribute, when parsed, then it is rejected, not dropped
    parsed = parse_record(record, SCHEMA)
    assert isinstance(parsed, Rejected)
    assert reason_fragment in parsed.reason
    assert parsed.raw_sequence == record["dynamodb"]["SequenceNumber"]
    assert parsed.record is record


@pytest.mark.parametrize(
    "record",
    [
        {"eventName": "INSERT"},
        {"eventName": "INSERT", "dynamodb": {"NewImage": {}}},
        {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "12a", "NewImage": {}}},
        {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "1" * 41, "NewImage": {}}},
        "not a record",
    ],
)
def test_records_without_a_usable_sequence_number_are_rejected(record: object) -> None:
    parsed = parse_record(record, SCHEMA)  # type: ignore[arg-type]
    assert isinstance(parsed, Rejected)
    assert parsed.raw_sequence is None


def test_insert_without_new_image_is_rejected() -> None:
    record = download_record(9, "song1")
    del record["dynamodb"]["NewImage"]
    assert isinstance(parse_record(record, SCHEMA), Rejected)


@pytest.mark.parametrize(
    "record",
    [
        aggregate_record(10, "song1", "2018-01", 3),
        aggregate_record(11, "song1", "2018-01", 4, event_name="MODIFY"),
        download_record(12, "song1", event_name="MODIFY"),
        download_record(13, "song1", event_name="REMOVE"),
        expired_download_record(14, "song1"),
    ],
)
def test_aggregates_and_non_inserts_are_ignored_not_counted(record: dict) -> None:
    assert isinstance(parse_record(record, SCHEMA), Ignored)


def test_custom_attribute_names_are_honoured() -> None:
    schema = Schema(entity="productID", sort_key="OrderLine", timestamp="At", period="Day")
    record = download_record(1, "ignored")
    record["dynamodb"]["Keys"] = {"productID": {"S": "p1"}, "OrderLine": {"S": "line-9"}}
    record["dynamodb"]["NewImage"] = {
        "productID": {"S": "p1"},
        "OrderLine": {"S": "line-9"},
        "At": {"S": "2020-05-06T07:08:09Z"},
    }
    assert parse_record(record, schema) == Download(
        AggregateKey("p1", "2020-05"),
        pad_sequence("000000000000000000001"),
        "000000000000000000001",
        CREATED,
        download_id=download_id("line-9"),
        instant=milliseconds_since_year_one("2020-05-06T07:08:09+00:00"),
    )


def test_coalesce_groups_by_aggregate_in_stream_order_and_drops_duplicates() -> None:
    # given interleaved downloads of two songs and months, one record delivered twice in the batch
    records = [
        download_record(5, "song1", "2018-01-02T00:00:00Z"),
        download_record(3, "song2", "2018-01-02T00:00:00Z"),
        download_record(4, "song1", "2018-02-02T00:00:00Z"),
        download_record(1, "song1", "2018-01-09T00:00:00Z"),
        download_record(5, "song1", "2018-01-02T00:00:00Z"),
    ]
    downloads = [parse_record(record, SCHEMA) for record in records]
    # when coalesced
    groups = coalesce(downloads)  # type: ignore[arg-type]
    # then each aggregate has its records once, lowest sequence first
    assert {key: [d.raw_sequence[-1] for d in group] for key, group in groups.items()} == {
        AggregateKey("song1", "2018-01"): ["1", "5"],
        AggregateKey("song2", "2018-01"): ["3"],
        AggregateKey("song1", "2018-02"): ["4"],
    }


def test_padded_sequences_order_like_numbers() -> None:
    numbers = [9, 10, 99, 100, 10**39, 123456789012345678901]
    assert sorted(pad_sequence(str(n)) for n in numbers) == [pad_sequence(str(n)) for n in sorted(numbers)]


# ---------------------------------------------------------------- periods, categories, sums


def iso_week_oracle(day: date) -> str:
    """ISO 8601: a week belongs to the year of its Thursday, and is numbered from that year's first Thursday."""
    thursday = day + timedelta(days=3 - day.weekday())
    return f"{thursday.year:04d}-W{(thursday.timetuple().tm_yday - 1) // 7 + 1:02d}"


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2099, 12, 31), timezones=st.just(UTC)))
def test_every_period_files_a_moment_in_its_utc_bucket(moment: datetime) -> None:
    keys = {period: bucket_key(moment, period) for period in PERIODS}
    assert set(keys) == {"hour", "day", "week", "month", "year", "all"}  # a new period needs its oracle here
    assert keys["hour"] == moment.strftime("%Y-%m-%dT%H")
    assert keys["day"] == moment.strftime("%Y-%m-%d")
    assert keys["week"] == iso_week_oracle(moment.date())
    assert keys["month"] == moment.strftime("%Y-%m")
    assert keys["year"] == moment.strftime("%Y")
    assert keys["all"] == "all"


@pytest.mark.parametrize(
    ("timestamp", "week"),
    [
        ("2018-01-15T10:00:00Z", "2018-W03"),
        ("2019-12-30T00:00:00Z", "2020-W01"),
        ("2021-01-03T23:59:59Z", "2020-W53"),
        ("2021-01-04T00:00:00+01:00", "2020-W53"),
    ],
)
def test_weeks_crossing_a_year_boundary_belong_to_the_iso_week_year(timestamp: str, week: str) -> None:
    assert bucket_key(utc_moment(timestamp), "week") == week


def test_a_download_counts_in_every_maintained_period_and_in_its_categorys_boards() -> None:
    schema = Schema(periods=("day", "month", "all"), category="Genre")
    record = download_record(7, "song1", "2018-01-31T23:30:00-05:00", extra={"Genre": {"S": "rock & roll"}})
    parsed = parse_record(record, schema)
    assert isinstance(parsed, Download)
    assert [key.board for key in parsed.keys] == [
        "2018-02-01",
        "2018-02",
        "all",
        "2018-02-01@rock%20%26%20roll",
        "2018-02@rock%20%26%20roll",
        "all@rock%20%26%20roll",
    ]
    assert {key.entity_id for key in parsed.keys} == {"song1"}


def test_a_download_without_the_category_counts_in_the_overall_boards_only() -> None:
    parsed = parse_record(download_record(7, "song1"), Schema(periods=("day",), category="Genre"))
    assert isinstance(parsed, Download)
    assert [key.board for key in parsed.keys] == ["2018-01-15"]


@pytest.mark.parametrize("genre", [{"S": ""}, {"N": "5"}, {"L": []}])
def test_a_category_that_is_not_a_non_empty_string_is_rejected(genre: dict[str, Any]) -> None:
    parsed = parse_record(download_record(7, "song1", extra={"Genre": genre}), Schema(category="Genre"))
    assert isinstance(parsed, Rejected)
    assert "Genre" in parsed.reason


@pytest.mark.parametrize(
    ("value", "amount"),
    [("12", Decimal(12)), ("12.50", Decimal("12.5")), ("-3", Decimal(-3)), ("0.000001", Decimal("0.000001"))],
)
def test_a_summed_attribute_adds_its_exact_value(value: str, amount: Decimal) -> None:
    parsed = parse_record(download_record(7, "p1", extra={"Revenue": {"N": value}}), Schema(amount="Revenue"))
    assert isinstance(parsed, Download)
    assert parsed.amount == amount


@pytest.mark.parametrize(
    "revenue",
    [None, {"S": "12"}, {"N": "1.0000001"}, {"N": "1000000000000"}, {"N": "NaN"}, {"N": "Infinity"}, {"N": "x"}],
)
def test_a_summed_attribute_missing_or_not_an_exact_number_is_rejected_never_counted_as_zero(revenue: Any) -> None:
    extra = {} if revenue is None else {"Revenue": revenue}
    parsed = parse_record(download_record(7, "p1", extra=extra), Schema(amount="Revenue"))
    assert isinstance(parsed, Rejected)
    assert "Revenue" in parsed.reason


@pytest.mark.parametrize("timestamp", ["0001-01-01T00:30:00+01:00", "9999-12-31T23:30:00-01:00"])
def test_a_timestamp_whose_utc_moment_is_past_the_calendar_is_rejected_not_raised(timestamp: str) -> None:
    # given a download whose timestamp parses but whose UTC moment falls before year 1 or after 9999
    with pytest.raises(OverflowError):
        datetime.fromisoformat(timestamp).astimezone(UTC)  # the oracle: no UTC moment, so no bucket, exists for it
    # when the aggregator parses it (a raise would fail every invocation that reads the shard from its checkpoint)
    parsed = parse_record(download_record(1, "song1", timestamp), Schema(periods=("day", "month", "all")))
    # then it is a rejected download: reported, never counted, and the shard goes on
    assert isinstance(parsed, Rejected)
    assert "outside the years 1 to 9999" in parsed.reason


@pytest.mark.parametrize(
    "identity",
    [
        {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
        {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"},
    ],
    ids=["as Lambda delivers it", "as GetRecords returns it"],
)
def test_an_expiry_by_ttl_takes_nothing_back_in_either_spelling_of_its_identity(identity: dict[str, str]) -> None:
    # given the REMOVE of a counted download by Time to Live, its userIdentity as the Developer Guide's JSON spells it
    # (what Lambda delivers) or in the API's Identity members (what GetRecords returns, and the aggregator reads)
    record = download_record(7, "song1")
    record["eventName"] = "REMOVE"
    record["dynamodb"]["OldImage"] = record["dynamodb"].pop("NewImage")
    record["dynamodb"]["StreamViewType"] = "NEW_AND_OLD_IMAGES"
    record["userIdentity"] = identity
    # when it is parsed with retractions on
    parsed = parse_record(record, Schema(retractions=True))
    # then nothing is taken back: an expiry never changes a count
    assert isinstance(parsed, Ignored)


def test_a_deletion_by_the_application_takes_the_download_back() -> None:
    # given the REMOVE of a counted download by anyone but Time to Live
    record = download_record(7, "song1")
    record["eventName"] = "REMOVE"
    record["dynamodb"]["OldImage"] = record["dynamodb"].pop("NewImage")
    record["dynamodb"]["StreamViewType"] = "NEW_AND_OLD_IMAGES"
    # when it is parsed with retractions on
    parsed = parse_record(record, Schema(retractions=True))
    # then its month's count is taken back by one
    assert isinstance(parsed, Download)
    assert [(change.key, change.amount) for change in parsed.changes] == [(AggregateKey("song1", "2018-01"), -1)]


@pytest.mark.parametrize(
    ("stream", "second"),
    [
        ({"ApproximateCreationDateTime": 1517443200.75}, 1517443200),
        ({"ApproximateCreationDateTime": datetime(2018, 2, 1, tzinfo=UTC)}, 1517443200),
        (
            {"ApproximateCreationDateTime": 1517443200750, "ApproximateCreationDateTimePrecision": "MILLISECOND"},
            1517443200,
        ),
        (
            {"ApproximateCreationDateTime": 1517443200750123, "ApproximateCreationDateTimePrecision": "MICROSECOND"},
            1517443200,
        ),
        ({"ApproximateCreationDateTime": 1517443200, "ApproximateCreationDateTimePrecision": "FORTNIGHT"}, None),
        ({"ApproximateCreationDateTime": 1517443200750}, None),
        ({"ApproximateCreationDateTime": "1517443200"}, None),
        ({}, None),
    ],
    ids=[
        "seconds",
        "datetime",
        "milliseconds said",
        "microseconds said",
        "unit unknown",
        "milliseconds unsaid",
        "text",
        "absent",
    ],
)
def test_a_creation_time_is_read_in_the_units_its_record_names_and_is_unknown_in_any_other(
    stream: dict[str, Any], second: int | None
) -> None:
    # given a stream record's creation time, in seconds as DynamoDB Streams documents, or in the units the record says
    # when it is read, then it is that second, or unknown: never a time ~1000 times later
    assert creation_second(stream) == second
