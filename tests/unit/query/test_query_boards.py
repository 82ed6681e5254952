"""The query function's boards: periods, categories, sums, "around me" and rolling windows, exact."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import types
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import entity_rank
import leaderboard_page
import query
import rolling
import rolling_window
from boards import Board, Boards
from entity_rank import RankRequest
from index_reads import Entry, IndexSchema, Layout, Position
from leaderboard_core import buckets
from leaderboard_core.index_layout import order_of
from leaderboard_core.periods import PERIODS
from leaderboard_page import PageRequest
from page_tokens import encode_token
from query_kinds import parse_request
from read_context import ReadContext
from request_parsing import InvalidRequest
from rolling_window import WindowRequest
from tests.property_examples import examples
from tests.unit.conftest import REPOSITORY, TABLE, FakeLambdaContext, create_table
from tests.unit.query.aggregates_on_moto import FailingClient, Values, load_boards

SCHEMA = IndexSchema()
EVERY_PERIOD = Boards(PERIODS, categories=True)
NOON = datetime(2018, 1, 15, 12, 30, tzinfo=UTC)
ON_MOTO = settings(
    max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

MOMENTS = st.datetimes(min_value=datetime(1, 1, 8), max_value=datetime(9999, 12, 24), timezones=st.just(UTC))


# ---------------------------------------------------------------- the layout: bucket keys
# (that the query function's keys, shards and partitions are the aggregator's: test_one_definition.py)


def test_iso_weeks_cross_the_year_as_iso_8601_says() -> None:
    assert buckets.bucket_key(datetime(2019, 12, 30, tzinfo=UTC), "week") == "2020-W01"
    assert buckets.window_keys("week", "2020-W01", 2) == ["2020-W01", "2019-W52"]
    assert buckets.window_keys("week", "2021-W01", 2) == ["2021-W01", "2020-W53"]
    assert not buckets.is_bucket_key("week", "2019-W53")


def first_moment(period: str, key: str) -> datetime | None:
    """The test's own reading of an hour, day or week key's first moment; None where it names no real one."""
    try:
        if period == "week":
            return datetime.combine(date.fromisocalendar(int(key[:4]), int(key[6:8]), 1), time(), tzinfo=UTC)
        hour = int(key[11:13]) if period == "hour" else 0
        return datetime(int(key[:4]), int(key[5:7]), int(key[8:10]), hour, tzinfo=UTC)
    except ValueError:
        return None


@settings(max_examples=examples(300), deadline=None)
@given(
    period=st.sampled_from([p for p in PERIODS if p != "all"]),
    key=st.text(alphabet="0123456789-TW", max_size=14) | st.sampled_from(["2018-W53", "2020-W53", "2018-02-29T00"]),
)
def test_a_key_is_valid_exactly_when_it_is_the_bucket_of_some_moment(period: str, key: str) -> None:
    # when any text is offered as a key, then it is accepted exactly when the bucket of its first moment is that text
    first = first_moment(period, key) if period in ("hour", "day", "week") else None
    if period in ("hour", "day", "week"):
        expected = first is not None and buckets.bucket_key(first, period) == key
    elif period == "month":
        expected = bool(re.fullmatch(r"[0-9]{4}-(0[1-9]|1[0-2])", key))
    else:
        expected = bool(re.fullmatch(r"[0-9]{4}", key))
    assert buckets.is_bucket_key(period, key) == expected


@settings(max_examples=examples(200), deadline=None)
@given(
    moment=st.datetimes(min_value=datetime(100, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)),
    period=st.sampled_from(["hour", "day", "week", "month", "year"]),
    last=st.integers(1, 48),
)
def test_a_window_is_the_last_buckets_ending_with_the_key(moment: datetime, period: str, last: int) -> None:
    # given the bucket of a moment, when the window of `last` buckets ending with it is named
    key = buckets.bucket_key(moment, period)
    keys = buckets.window_keys(period, key, last)
    # then it is the buckets of the moments walked back one bucket at a time, newest first, distinct
    walked, at = [], moment
    while len(walked) < last:
        bucket = buckets.bucket_key(at, period)
        if not walked or walked[-1] != bucket:
            walked.append(bucket)
        at -= timedelta(hours=1) if period == "hour" else timedelta(days=1)
    assert keys == walked


def test_a_window_at_the_start_of_the_calendar_has_the_buckets_that_exist() -> None:
    assert buckets.window_keys("day", "0001-01-02", 7) == ["0001-01-02", "0001-01-01"]
    assert buckets.window_keys("month", "0000-02", 7) == ["0000-02", "0000-01"]


# ---------------------------------------------------------------- requests


@pytest.mark.parametrize(
    ("event", "board"),
    [
        ({"period": "hour", "key": "2018-01-15T10"}, Board("hour", "2018-01-15T10")),
        ({"period": "day", "key": "2018-01-15"}, Board("day", "2018-01-15")),
        ({"period": "week", "key": "2020-W53"}, Board("week", "2020-W53")),
        ({"period": "month", "key": "2018-01"}, Board("month", "2018-01")),
        ({"period": "year", "key": "2018"}, Board("year", "2018")),
        ({"period": "all"}, Board("all", "all")),
        ({"period": "day"}, Board("day", "2018-01-15")),
        ({"period": "week"}, Board("week", "2018-W03")),
        ({"period": "hour", "category": "rock"}, Board("hour", "2018-01-15T12", "rock")),
        ({"month": "2018-01", "category": "a@b#c%d/e"}, Board("month", "2018-01", "a@b#c%d/e", month_form=True)),
    ],
)
def test_every_period_names_its_board_the_key_defaulting_to_the_current_bucket(
    event: dict[str, Any], board: Board
) -> None:
    request = parse_request(event, SCHEMA, Layout(2), EVERY_PERIOD, now=lambda: NOON)
    assert isinstance(request, PageRequest)
    assert request.board == board
    assert set(request.cursors) == {f"{board.id}#0", f"{board.id}#1"}


def test_a_category_board_id_is_percent_encoded() -> None:
    assert Board("day", "2018-01-15", "a@b#c%d/e é").id == "2018-01-15@a%40b%23c%25d%2Fe%20%C3%A9"


@pytest.mark.parametrize(
    ("event", "deployment", "message"),
    [
        ({"period": "day", "key": "2018-01-15"}, Boards(), "keeps no day leaderboards"),
        ({"month": "2018-01"}, Boards(("day", "all")), "keeps no month leaderboards"),
        ({"month": "2018-01", "category": "rock"}, Boards(), "keeps no category leaderboards"),
        ({"period": "fortnight"}, EVERY_PERIOD, "period must be one of"),
        ({"period": ["day"]}, EVERY_PERIOD, "period must be one of"),
        ({"period": "all", "key": "all"}, EVERY_PERIOD, "period all has no key"),
        ({"period": "day", "key": "2018-1-15"}, EVERY_PERIOD, "YYYY-MM-DD"),
        ({"period": "day", "key": "2018-02-30"}, EVERY_PERIOD, "YYYY-MM-DD"),
        ({"period": "hour", "key": "2018-01-15T24"}, EVERY_PERIOD, "YYYY-MM-DDTHH"),
        ({"period": "week", "key": "2018-W53"}, EVERY_PERIOD, "YYYY-Www"),
        ({"period": "week", "key": "2018-W3"}, EVERY_PERIOD, "YYYY-Www"),
        ({"period": "day", "key": "\uff12\uff10\uff11\uff18-01-15"}, EVERY_PERIOD, "YYYY-MM-DD"),
        ({"period": "year", "key": 2018}, EVERY_PERIOD, "YYYY"),
        ({"period": "day", "month": "2018-01"}, EVERY_PERIOD, "not both"),
        ({"month": "2018-01", "key": "2018-01"}, EVERY_PERIOD, "not both"),
        ({"key": "2018-01"}, EVERY_PERIOD, "month is required"),
        ({"period": "day", "category": ""}, EVERY_PERIOD, "non-empty string"),
        ({"period": "day", "category": 7}, EVERY_PERIOD, "non-empty string"),
        ({"period": "day", "category": "\ud800"}, EVERY_PERIOD, "valid Unicode"),
        ({"period": "day", "category": "é" * 400}, EVERY_PERIOD, "1024 bytes"),
        ({"period": "day", "around": 2}, EVERY_PERIOD, "name it"),
        ({"period": "day", "songID": "s", "around": 51}, EVERY_PERIOD, "around must be"),
        ({"period": "day", "songID": "s", "around": -1}, EVERY_PERIOD, "around must be"),
        ({"period": "day", "songID": "s", "around": True}, EVERY_PERIOD, "around must be"),
        ({"period": "day", "songID": "s", "around": 1.0}, EVERY_PERIOD, "around must be"),
        ({"period": "day", "last": 1}, EVERY_PERIOD, "last must be"),
        ({"period": "day", "last": 49}, EVERY_PERIOD, "last must be"),
        ({"period": "day", "last": "7"}, EVERY_PERIOD, "last must be"),
        ({"period": "all", "last": 7}, EVERY_PERIOD, "period all has no buckets"),
        ({"period": "day", "last": 7, "songID": "s"}, EVERY_PERIOD, "takes limit only"),
        ({"period": "day", "last": 7, "next_token": "x"}, EVERY_PERIOD, "takes limit only"),
        ({"period": "day", "last": 7, "limit": 101}, EVERY_PERIOD, "limit of a rolling window"),
        ({"period": "day", "last": 7, "limit": 0}, EVERY_PERIOD, "limit of a rolling window"),
    ],
)
def test_a_board_the_deployment_does_not_keep_or_a_malformed_one_is_invalid(
    event: dict[str, Any], deployment: Boards, message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        parse_request(event, SCHEMA, Layout(1), deployment, now=lambda: NOON)


def test_a_window_wider_than_its_read_budget_is_refused_before_any_read() -> None:
    # given 64 leaderboard shards: a window of 8 days spans 512 partitions, each read at least once
    with pytest.raises(InvalidRequest, match="spans 512 leaderboard partitions"):
        parse_request({"period": "day", "last": 8}, SCHEMA, Layout(64), EVERY_PERIOD, now=lambda: NOON)
    # then one of 7 days (448 partitions) is accepted
    request = parse_request({"period": "day", "last": 7}, SCHEMA, Layout(64), EVERY_PERIOD, now=lambda: NOON)
    assert isinstance(request, WindowRequest)
    assert [board.key for board in request.boards()][::6] == ["2018-01-15", "2018-01-09"]


def test_a_token_of_one_board_is_refused_for_another() -> None:
    # given a page token of the rock board of a day
    cursors = {"2018-01-15@rock": Position(order_of(3, "song1"), "song1")}
    token = encode_token("2018-01-15@rock", Layout(1), cursors)
    ask = {"period": "day", "key": "2018-01-15", "next_token": token}
    # then it reads that board, and neither the day's overall board nor another category's
    assert parse_request({**ask, "category": "rock"}, SCHEMA, Layout(1), EVERY_PERIOD).cursors == cursors
    for other in ({}, {"category": "pop"}):
        with pytest.raises(InvalidRequest, match="another leaderboard"):
            parse_request({**ask, **other}, SCHEMA, Layout(1), EVERY_PERIOD)


@settings(max_examples=examples(100), deadline=None)
@given(
    category=st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=100),
    order=st.integers(-(10**38) + 1, 10**38 - 1),
    shards=st.sampled_from([1, 8, 64]),
)
def test_tokens_round_trip_on_every_board_and_any_order_sign(category: str, order: int, shards: int) -> None:
    # given a category board and a cursor at any order DynamoDB holds, negative sums included
    board = Board("hour", "2018-01-15T10", category)
    assume(len(board.id.encode()) <= buckets.MAX_SORT_KEY_BYTES)
    layout = Layout(shards)
    cursors = dict.fromkeys(layout.partitions(board.id), Position(order, "é" * 1024))
    # when the function's token comes back, then it names the same cursors
    token = encode_token(board.id, layout, cursors)
    event = {"period": "hour", "key": "2018-01-15T10", "category": category, "next_token": token}
    assert parse_request(event, SCHEMA, layout, EVERY_PERIOD).cursors == cursors


# ---------------------------------------------------------------- on moto: aggregates as the aggregator writes them


def listing(entities: dict[str, Any]) -> list[tuple[str, Any]]:
    """The oracle: highest value first, equal values by id as UTF-8 bytes."""
    return sorted(entities.items(), key=lambda item: (-item[1], item[0].encode()))


def every_page(dynamodb: Any, event: dict[str, Any], layout: Layout, deployment: Boards) -> list[tuple[str, Any]]:
    listed: list[tuple[str, Any]] = []
    for _ in range(1000):
        request = parse_request(event, SCHEMA, layout, deployment)
        assert isinstance(request, PageRequest)
        page = leaderboard_page.answer(ReadContext(dynamodb, TABLE, SCHEMA, layout, summed=deployment.summed), request)
        listed += [(item["songID"], item["downloadCount"]) for item in page["items"]]
        if page["next_token"] is None:
            return listed
        event = {**event, "next_token": page["next_token"]}
    raise AssertionError("pagination did not end")


SONGS = st.one_of(
    st.sampled_from([f"song{n:02d}" for n in range(30)]),
    st.sampled_from([f"international-hit-{n}" for n in range(6)]),  # share the tie-breaker's 10 bytes
    st.text(alphabet="abé", min_size=1, max_size=3),
)


def test_every_period_and_category_board_pages_exactly(dynamodb: Any) -> None:
    # given boards of every period, overall and per category, with ties, in 3 leaderboard shards
    catalogue = {f"song{n:02d}": 1 + n % 4 for n in range(12)} | {f"international-hit-{n}": 2 for n in range(4)}
    boards_ = {
        "2018-01-15T10": catalogue,
        "2018-01-15": catalogue,
        "2018-W03": catalogue,
        "2018-01": catalogue,
        "2018": catalogue,
        "all": catalogue,
        "2018-01-15@rock%20%26%20roll": {"song01": 2, "song02": 2},
    }
    load_boards(dynamodb, boards_, 3)
    layout = Layout(3)
    asks = [
        {"period": "hour", "key": "2018-01-15T10"},
        {"period": "day", "key": "2018-01-15"},
        {"period": "week", "key": "2018-W03"},
        {"period": "month", "key": "2018-01"},
        {"month": "2018-01"},
        {"period": "year", "key": "2018"},
        {"period": "all"},
    ]
    # when each is paged through at several page sizes, then each is its exact listing
    for ask in asks:
        for limit in (1, 3, 100):
            assert every_page(dynamodb, {**ask, "limit": limit}, layout, EVERY_PERIOD) == listing(catalogue), ask
    rock = {"period": "day", "key": "2018-01-15", "category": "rock & roll", "limit": 1}
    assert every_page(dynamodb, rock, layout, EVERY_PERIOD) == [("song01", 2), ("song02", 2)]
    pop = {"period": "day", "key": "2018-01-15", "category": "pop", "limit": 1}
    assert every_page(dynamodb, pop, layout, EVERY_PERIOD) == []


def test_answers_name_their_board_as_the_request_did(dynamodb: Any) -> None:
    load_boards(dynamodb, {"2018-01-15@rock": {"song1": 2}, "all": {"song1": 5}}, 1)

    def ask(event: dict[str, Any]) -> dict[str, Any]:
        request = parse_request(event, SCHEMA, Layout(1), EVERY_PERIOD)
        if isinstance(request, RankRequest):
            return entity_rank.answer(ReadContext(dynamodb, TABLE, SCHEMA, Layout(1)), request)
        assert isinstance(request, PageRequest)
        return leaderboard_page.answer(ReadContext(dynamodb, TABLE, SCHEMA, Layout(1)), request)

    day = {"period": "day", "key": "2018-01-15", "category": "rock"}
    span = {"boardStart": "2018-01-15T00:00:00Z", "boardEnd": "2018-01-16T00:00:00Z"}
    assert list(ask(day)) == ["period", "key", "category", "boardStart", "boardEnd", "items", "next_token"]
    assert ask({**day, "songID": "song1"}) == {**day, **span, "songID": "song1", "downloadCount": 2, "rank": 1}
    assert ask({"period": "all", "limit": 1}) == {
        "period": "all",
        "boardStart": None,
        "boardEnd": None,
        "items": [{"songID": "song1", "downloadCount": 5}],
        "next_token": None,
    }


# ---------------------------------------------------------------- around me


@ON_MOTO
@given(
    catalogue=st.dictionaries(SONGS, st.integers(1, 4), min_size=1, max_size=25),
    shards=st.sampled_from([1, 3]),
    around=st.sampled_from([0, 1, 2, 5]),
    data=st.data(),
)
def test_around_lists_the_song_and_its_neighbours_in_listing_order(
    aws: None, catalogue: dict[str, int], shards: int, around: int, data: st.DataObject
) -> None:
    # given a day's board with many ties, in `shards` partitions
    dynamodb = create_table(fresh=True)
    load_boards(dynamodb, {"2018-01-15": catalogue}, shards)
    ordered = listing(catalogue)
    place = data.draw(st.integers(0, len(ordered) - 1))
    song = ordered[place][0]
    # when the rank of one song is asked with `around`
    request = parse_request(
        {"period": "day", "key": "2018-01-15", "songID": song, "around": around}, SCHEMA, Layout(shards), EVERY_PERIOD
    )
    assert isinstance(request, RankRequest)
    answer = entity_rank.answer(ReadContext(dynamodb, TABLE, SCHEMA, Layout(shards)), request)
    # then it is the song's rank, and the songs from `around` places above it to `around` below, with their ranks
    assert (answer["downloadCount"], answer["rank"]) == (ordered[place][1], place + 1)
    first = max(0, place - around)
    expected = [
        {"songID": entity, "downloadCount": count, "rank": first + offset + 1}
        for offset, (entity, count) in enumerate(ordered[first : place + around + 1])
    ]
    assert answer["items"] == expected


def test_around_a_song_without_an_aggregate_lists_nothing(dynamodb: Any) -> None:
    load_boards(dynamodb, {"2018-01": {"song1": 3}}, 1)
    request = RankRequest(Board.month("2018-01"), "silence", around=2)
    assert entity_rank.answer(ReadContext(dynamodb, TABLE, SCHEMA, Layout(1)), request) == {
        "month": "2018-01",
        "songID": "silence",
        "downloadCount": 0,
        "rank": None,
        "items": [],
    }


# ---------------------------------------------------------------- sums


def test_sums_are_exact_decimal_strings(dynamodb: Any) -> None:
    # given summed boards (values more than 1 apart: see the order test below), negative and fractional
    values = {"p1": Decimal("1234.5"), "p2": Decimal("17"), "p3": Decimal("-3.000001"), "p4": Decimal("0.000001")}
    load_boards(dynamodb, {"2018-01-15": values}, 2)
    summed = Boards(("day",), summed=True)
    # when the board is paged through and one product ranked, then every value is its exact decimal, as a string
    listed = every_page(dynamodb, {"period": "day", "key": "2018-01-15", "limit": 1}, Layout(2), summed)
    assert listed == [("p1", "1234.5"), ("p2", "17"), ("p4", "0.000001"), ("p3", "-3.000001")]
    request = RankRequest(Board("day", "2018-01-15"), "p3")
    answer = entity_rank.answer(ReadContext(dynamodb, TABLE, SCHEMA, Layout(2), summed=True), request)
    assert (answer["downloadCount"], answer["rank"]) == ("-3.000001", 4)
    absent = entity_rank.answer(
        ReadContext(dynamodb, TABLE, SCHEMA, Layout(2), summed=True), RankRequest(Board("day", "2018-01-15"), "p9")
    )
    assert absent["downloadCount"] == "0"


@settings(max_examples=examples(200), deadline=None)
@given(
    low=st.decimals(min_value=-1000, max_value=1000, places=6, allow_nan=False, allow_infinity=False),
    step=st.decimals(min_value=Decimal("0.000001"), max_value=1, places=6),
    first=SONGS,
    second=SONGS,
)
def test_the_index_order_of_a_sum_follows_its_value(low: Decimal, step: Decimal, first: str, second: str) -> None:
    # the query function's contract: a higher value has a higher order, whatever the ids (a summing deployment's
    # tie-breaker holds 8 bytes of the id, below the 10^20 a decimal's step moves the order by)
    assert order_of(low + step, first, summed=True) > order_of(low, second, summed=True)
    # and equal values list in ascending order of the ids' first 8 bytes
    if first.encode()[:8] < second.encode()[:8]:
        assert order_of(low, first, summed=True) > order_of(low, second, summed=True)


# ---------------------------------------------------------------- rolling windows

DAYS = [f"2018-01-{day:02d}" for day in range(9, 16)]


def window_truth(values: Values, keys: list[str], k: int) -> list[tuple[str, Any]]:
    totals: dict[str, Any] = {}
    for key in keys:
        for entity, value in values.get(key, {}).items():
            totals[entity] = totals.get(entity, 0) + value
    return listing(totals)[:k]


def ask_window(
    dynamodb: Any, last: int, k: int, layout: Layout, summed: bool = False, **budget: int
) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    request = parse_request(
        {"period": "day", "key": DAYS[-1], "last": last, "limit": k}, SCHEMA, layout, Boards(("day",), summed=summed)
    )
    assert isinstance(request, WindowRequest)
    answer = rolling_window.answer(ReadContext(dynamodb, TABLE, SCHEMA, layout, summed=summed), request)
    return answer, [(item["songID"], item["downloadCount"]) for item in answer["items"]]


PAGE_SIZES = st.sampled_from([(1, 2), (2, 4), (3, 1000), (40, 1000)])
"""(entries a point read is worth, most entries a page asks for): cost tuning, never correctness."""


def page_sizes(entries_per_point_read: int, max_page: int) -> Any:
    patched = mock.patch.multiple(rolling, ENTRIES_PER_POINT_READ=entries_per_point_read, MAX_PAGE=max_page)
    return patched


BUCKET_VALUES = st.dictionaries(
    st.sampled_from(DAYS), st.dictionaries(SONGS, st.integers(1, 4), max_size=12), min_size=1, max_size=7
)


@ON_MOTO
@given(
    values=BUCKET_VALUES,
    last=st.sampled_from([2, 3, 7]),
    k=st.sampled_from([1, 3, 10]),
    shards=st.sampled_from([1, 2, 4]),
    pages=PAGE_SIZES,
)
@example(values={day: {"a": 1, "b": 1, "c": 1} for day in DAYS}, last=7, k=2, shards=2, pages=(1, 2))
def test_a_rolling_window_is_the_exact_top_k_of_the_summed_buckets(
    aws: None, values: Values, last: int, k: int, shards: int, pages: tuple[int, int]
) -> None:
    # given random per-day values with many ties, in `shards` leaderboard partitions per day
    dynamodb = create_table(fresh=True)
    load_boards(dynamodb, values, shards)
    # when the top k of the last `last` days is asked, reading pages of any size
    with page_sizes(*pages):
        answer, top = ask_window(dynamodb, last, k, Layout(shards))
    # then it is the brute-force recount's top k, complete, and says what it read
    assert top == window_truth(values, DAYS[-last:], k)
    assert answer["complete"] is True
    assert answer["reads"]["queries"] >= 1
    assert answer["reads"]["queries"] <= rolling_window.WINDOW_QUERY_BUDGET
    assert answer["reads"]["getItems"] <= rolling_window.WINDOW_GET_ITEM_BUDGET


@ON_MOTO
@given(
    values=st.dictionaries(
        st.sampled_from(DAYS), st.dictionaries(SONGS, st.integers(-3, 5), max_size=10), min_size=1, max_size=7
    ),
    last=st.sampled_from([2, 7]),
    k=st.sampled_from([1, 4]),
    shards=st.sampled_from([1, 3]),
    pages=PAGE_SIZES,
)
def test_a_rolling_window_of_sums_below_zero_is_exact(
    aws: None, values: Values, last: int, k: int, shards: int, pages: tuple[int, int]
) -> None:
    # given summed values, some negative or zero (refunds): an absent song (0) may outrank a present one
    dynamodb = create_table(fresh=True)
    load_boards(dynamodb, values, shards)
    # when the window's top k is asked, then it is exact, each total an exact decimal string
    with page_sizes(*pages):
        _, top = ask_window(dynamodb, last, k, Layout(shards), summed=True)
    assert top == [(song, str(total)) for song, total in window_truth(values, DAYS[-last:], k)]


@ON_MOTO
@given(
    values=BUCKET_VALUES,
    k=st.sampled_from([2, 5]),
    shards=st.sampled_from([1, 2]),
    queries=st.integers(1, 12),
    get_items=st.integers(0, 15),
    pages=PAGE_SIZES,
)
def test_past_its_budget_a_window_answers_a_certain_prefix_flagged_incomplete(
    aws: None,
    values: Values,
    k: int,
    shards: int,
    queries: int,
    get_items: int,
    pages: tuple[int, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given a read budget too small for some windows
    dynamodb = create_table(fresh=True)
    load_boards(dynamodb, values, shards)
    monkeypatch.setattr(rolling_window, "WINDOW_QUERY_BUDGET", queries)
    monkeypatch.setattr(rolling_window, "WINDOW_GET_ITEM_BUDGET", get_items)
    # when a window is asked
    with page_sizes(*pages):
        answer, top = ask_window(dynamodb, 7, k, Layout(shards))
    truth = window_truth(values, DAYS, k)
    # then it stays within the budget, and is either the exact top k, or flagged with an exact prefix of it
    assert answer["reads"]["queries"] <= queries
    assert answer["reads"]["getItems"] <= get_items
    if answer["complete"]:
        assert top == truth
    else:
        assert top == truth[: len(top)]
        assert "exact" in answer["message"]


def test_a_window_stops_at_the_functions_clock_with_a_certain_prefix(dynamodb: Any) -> None:
    # given seven days, and a clock that runs out after the first reads
    values = {day: {f"song{n:03d}": 1 + (n * 7 + i) % 5 for n in range(200)} for i, day in enumerate(DAYS)}
    load_boards(dynamodb, values, 1)
    calls: list[str] = []
    real = dynamodb.query

    def counted(**parameters: Any) -> Any:
        calls.append("query")
        return real(**parameters)

    dynamodb.query = counted
    request = parse_request({"period": "day", "key": DAYS[-1], "last": 7, "limit": 5}, SCHEMA, Layout(1), EVERY_PERIOD)
    assert isinstance(request, WindowRequest)
    # when the window is asked
    answer = rolling_window.answer(
        ReadContext(dynamodb, TABLE, SCHEMA, Layout(1), out_of_time=lambda: len(calls) >= 7), request
    )
    # then it made no read past the clock and answers what is certain, flagged
    assert len(calls) == 7
    assert answer["complete"] is False
    truth = [{"songID": song, "downloadCount": total} for song, total in window_truth(values, DAYS, 5)]
    assert answer["items"] == truth[: len(answer["items"])]


def test_the_read_cost_of_a_week_of_a_thousand_songs(dynamodb: Any) -> None:
    # given seven days of 3,000 downloads each over 1,000 songs (Zipf 1.1, a fixed seed)
    import random

    rng = random.Random(7)
    songs = [f"song{n:04d}" for n in range(1000)]
    weights = [1 / (rank + 1) ** 1.1 for rank in range(1000)]
    values: Values = {}
    for day in DAYS:
        for song in rng.choices(songs, weights, k=3000):
            counts = values.setdefault(day, {})
            counts[song] = counts.get(song, 0) + 1
    load_boards(dynamodb, values, 1)
    # when the top 10 of the seven days is asked, then it is exact and reads a few Queries per day
    answer, top = ask_window(dynamodb, 7, 10, Layout(1))
    assert top == window_truth(values, DAYS, 10)
    assert answer["reads"]["queries"] + answer["reads"]["getItems"] <= 7 * 4, answer["reads"]


class InMemoryBoards:
    """The partition reader's and the point reader's contract over plain dicts, for many cheap examples."""

    def __init__(self, values: Values, layout: Layout) -> None:
        self.values, self.layout = values, layout
        self.partitions: dict[str, list[Entry]] = {}
        for board, entities in values.items():
            for entity, value in entities.items():
                for partition in layout.entity_partitions(board, entity)[:1]:
                    self.partitions.setdefault(partition, []).append(Entry.of(order_of(value, entity), entity, value))
        self.cursors: dict[str, Position | None] = {}

    def read_pages(self, wanted: list[tuple[str, int]]) -> dict[str, tuple[list[Entry], bool]]:
        pages = {}
        for partition, count in wanted:
            after = self.cursors.get(partition)
            rest = sorted(e for e in self.partitions.get(partition, []) if after is None or after.precedes(e))
            cut = min(count, len(rest))
            while 0 < cut < len(rest) and rest[cut].order == rest[cut - 1].order:
                cut += 1
            pages[partition] = (rest[:cut], cut == len(rest))
            if cut:
                self.cursors[partition] = Position(rest[cut - 1].order, rest[cut - 1].entity_id)
        return pages

    def read_points(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], Any]:
        return {(board, entity): self.values.get(board, {}).get(entity, 0) for board, entity in pairs}


@settings(max_examples=examples(400), deadline=None)
@given(
    values=st.dictionaries(
        st.sampled_from(DAYS), st.dictionaries(SONGS, st.integers(-2, 6), max_size=30), min_size=1, max_size=7
    ),
    last=st.integers(2, 7),
    k=st.integers(1, 12),
    layout=st.sampled_from([Layout(1), Layout(2), Layout(5), Layout(2, 3)]),
    pages=PAGE_SIZES,
)
@example(  # an unseen song reaches the threshold exactly, with a smaller id than the k-th: reading must go on
    values={"2018-01-14": {"b": 1, "d": 2, "c": 1}, "2018-01-15": {"b": 2, "c": 1, "a": 1}},
    last=2,
    k=2,
    layout=Layout(1),
    pages=(1, 2),
)
def test_the_threshold_algorithm_is_exact_over_many_windows(
    values: Values, last: int, k: int, layout: Layout, pages: tuple[int, int]
) -> None:
    # given random values (negative, zero and tied ones too) read through the readers' contract
    keys = DAYS[-last:]
    source = InMemoryBoards(values, layout)
    buckets = {key: layout.partitions(key) for key in keys}
    # when the window is merged, reading pages of any size, then it is the brute-force top k
    with page_sizes(*pages):
        answer = rolling.top_of_window(buckets, k, source.read_pages, source.read_points, layout.entity_partitions)
    assert answer.complete
    assert [(item.entity_id, item.total) for item in answer.items] == window_truth(values, keys, k)


class Rationed:
    """Readers that answer only so many partition reads and point reads, then leave the rest unread."""

    def __init__(self, source: InMemoryBoards, pages: int, points: int) -> None:
        self.source, self.pages, self.points = source, pages, points

    def read_pages(self, wanted: list[tuple[str, int]]) -> dict[str, tuple[list[Entry], bool]]:
        allowed, self.pages = wanted[: max(self.pages, 0)], self.pages - len(wanted)
        return self.source.read_pages(allowed)

    def read_points(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], Any]:
        allowed, self.points = pairs[: max(self.points, 0)], self.points - len(pairs)
        return self.source.read_points(allowed)


@settings(max_examples=examples(400), deadline=None)
@given(
    values=st.dictionaries(
        st.sampled_from(DAYS), st.dictionaries(SONGS, st.integers(-1, 4), max_size=25), min_size=1, max_size=7
    ),
    k=st.integers(1, 8),
    layout=st.sampled_from([Layout(1), Layout(3)]),
    pages=PAGE_SIZES,
    page_reads=st.integers(0, 30),
    point_reads=st.integers(0, 30),
)
@example(  # stopped where an unread song could still tie the second place with a smaller id: only d is certain
    values={
        "2018-01-13": {"d": 1},
        "2018-01-14": {"f": 2, "c": 1, "d": 1, "b": 1},
        "2018-01-15": {"e": 1, "c": 1, "a": 1, "d": 2},
    },
    k=2,
    layout=Layout(1),
    pages=(1, 2),
    page_reads=7,
    point_reads=4,
)
def test_a_window_stopped_at_any_read_answers_only_what_is_certain(
    values: Values, k: int, layout: Layout, pages: tuple[int, int], page_reads: int, point_reads: int
) -> None:
    # given readers that stop answering after some reads (the budget, the clock)
    rationed = Rationed(InMemoryBoards(values, layout), page_reads, point_reads)
    buckets = {key: layout.partitions(key) for key in DAYS}
    # when the window is merged
    with page_sizes(*pages):
        answer = rolling.top_of_window(buckets, k, rationed.read_pages, rationed.read_points, layout.entity_partitions)
    # then it is the exact top k, or flagged incomplete with an exact prefix of it
    truth = window_truth(values, DAYS, k)
    top = [(item.entity_id, item.total) for item in answer.items]
    assert top == truth if answer.complete else top == truth[: len(top)]


# ---------------------------------------------------------------- the handler


@pytest.fixture
def deployed(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(query, "_dynamodb", dynamodb)
    monkeypatch.setattr(query, "AGGREGATES_TABLE_NAME", TABLE)
    monkeypatch.setattr(query, "LAYOUT", Layout(2))
    monkeypatch.setattr(query, "BOARDS", EVERY_PERIOD)
    return dynamodb


def test_the_handler_serves_every_form(deployed: Any) -> None:
    load_boards(deployed, {day: {"song1": 2, "song2": 1} for day in DAYS} | {"all": {"song1": 14, "song2": 7}}, 2)
    context = FakeLambdaContext()
    assert query.lambda_handler({"period": "all", "limit": 1}, context)["items"] == [
        {"songID": "song1", "downloadCount": 14}
    ]
    window = query.lambda_handler({"period": "day", "key": DAYS[-1], "last": 7}, context)
    assert window["items"] == [{"songID": "song1", "downloadCount": 14}, {"songID": "song2", "downloadCount": 7}]
    assert (window["period"], window["key"], window["last"], window["complete"]) == ("day", DAYS[-1], 7, True)
    around = query.lambda_handler({"period": "all", "songID": "song2", "around": 1}, context)
    assert [item["songID"] for item in around["items"]] == ["song1", "song2"]
    refused = query.lambda_handler({"period": "day", "key": DAYS[-1], "category": 3}, context)
    assert refused["error"]["code"] == "InvalidRequest"


FIELD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 60),
    st.text(max_size=12),
    st.sampled_from(["day", "all", "hour", "2018-01-15", "2018-W03", "2018-01", "rock", "\ud800", "x" * 1100]),
    st.lists(st.integers(), max_size=2),
)
EVENTS = st.dictionaries(
    st.sampled_from(["month", "period", "key", "category", "limit", "next_token", "songID", "around", "last", "x"]),
    FIELD_VALUES,
    max_size=5,
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(event=EVENTS)
@example(event={"period": "day", "key": "2018-01-15", "last": 7, "limit": 100})
@example(event={"period": "hour", "songID": "song1", "around": 50, "category": "rock"})
def test_every_request_of_any_form_gets_an_answer(deployed: Any, event: dict[str, Any]) -> None:
    # when anything is sent, then the answer is a board's, or an InvalidRequest; JSON either way
    answer = query.lambda_handler(event, FakeLambdaContext())
    if "error" in answer:
        assert answer["error"]["code"] == "InvalidRequest", answer
    else:
        assert ("month" in answer) != ("period" in answer)
    json.dumps(answer)


def test_a_dynamodb_failure_in_a_window_or_around_is_unavailable(
    deployed: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:

    load_boards(deployed, {day: {"song1": 2, "song2": 1} for day in DAYS}, 2)
    for operation in ("query", "get_item"):
        monkeypatch.setattr(query, "_dynamodb", FailingClient(deployed, operation, "InternalServerError"))
        for event in (
            {"period": "day", "key": DAYS[-1], "last": 7},
            {"period": "day", "key": DAYS[-1], "songID": "song2", "around": 1},
        ):
            caplog.clear()
            with caplog.at_level(logging.INFO):
                answer = query.lambda_handler(event, FakeLambdaContext())
            if operation == "get_item" and "last" in event and "error" not in answer:
                continue  # these two songs need no point read
            assert answer["error"]["code"] == "Unavailable", (operation, event, answer)
            assert any(record.levelno >= logging.ERROR for record in caplog.records)


# ---------------------------------------------------------------- {"month": ...} keeps its answers, byte for byte

BEFORE_BOARDS = "f1a8221"
"""the last commit before the query function served boards beyond months."""


@pytest.fixture
def previous_query(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    shown = subprocess.run(
        ["git", "show", f"{BEFORE_BOARDS}:lambda_src/query/query.py"],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=False,
    )
    if shown.returncode != 0:
        pytest.skip(f"the repository's history does not hold {BEFORE_BOARDS}: {shown.stderr.strip()}")
    module = types.ModuleType("query_before_boards")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # its dataclasses look their module up
    exec(compile(shown.stdout, "query_before_boards.py", "exec"), module.__dict__)  # our own history
    return module


@ON_MOTO
@given(
    catalogue=st.dictionaries(SONGS, st.integers(1, 4), max_size=20),
    shards=st.sampled_from([1, 4]),
    limit=st.sampled_from([1, 3, 100]),
)
def test_month_requests_answer_what_they_answered_before_byte_for_byte(
    aws: None,
    previous_query: types.ModuleType,
    catalogue: dict[str, int],
    shards: int,
    limit: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given a month and both versions of the function on it
    dynamodb = create_table(fresh=True)
    load_boards(dynamodb, {"2018-01": catalogue, "2018-01-15": catalogue}, shards)
    for module in (query, previous_query):
        monkeypatch.setattr(module, "_dynamodb", dynamodb)
        monkeypatch.setattr(module, "AGGREGATES_TABLE_NAME" if module is query else "TABLE_NAME", TABLE)
        monkeypatch.setattr(module, "LAYOUT", Layout(shards) if module is query else module.Layout(shards))
    monkeypatch.setattr(query, "BOARDS", EVERY_PERIOD)
    events: list[dict[str, Any]] = [
        {"month": "2018-01", "songID": song} for song in [*list(catalogue)[:3], "silence"]
    ] + [{"month": "2018-13"}, {"month": "2018-01", "limit": 0}, {"month": "2018-01", "next_token": "forged"}]
    event: dict[str, Any] | None = {"month": "2018-01", "limit": limit}
    while event is not None:
        # when each page, rank and refusal is asked of both, then the answers are the same JSON text
        before = previous_query.lambda_handler(event, FakeLambdaContext())
        after = query.lambda_handler(event, FakeLambdaContext())
        assert json.dumps(after) == json.dumps(before)
        event = (
            None
            if before["next_token"] is None
            else {"month": "2018-01", "limit": limit, "next_token": before["next_token"]}
        )
    for event in events:
        assert json.dumps(query.lambda_handler(event, FakeLambdaContext())) == json.dumps(
            previous_query.lambda_handler(event, FakeLambdaContext())
        )


def test_a_category_request_to_a_month_answer_names_the_category(deployed: Any) -> None:
    load_boards(deployed, {"2018-01@rock": {"song1": 2}}, 2)
    answer = query.lambda_handler({"month": "2018-01", "category": "rock", "limit": 5}, FakeLambdaContext())
    assert answer == {
        "month": "2018-01",
        "category": "rock",
        "items": [{"songID": "song1", "downloadCount": 2}],
        "next_token": None,
    }
