"""The query function: exact pages for any number of leaderboard shards and any page size, ties, rank, bad requests."""

from __future__ import annotations

import base64
import importlib
import importlib.util
import json
import logging
import random
import re
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import entity_rank
import index_reads
import leaderboard_page
import query
from boards import Board
from entity_rank import RankRequest
from index_reads import Entry, IndexSchema, Layout, Position
from leaderboard_core.index_layout import leaderboard_partition, order_of
from leaderboard_page import PageRequest, merge_page
from page_tokens import decode_token, encode_token
from query_kinds import parse_request
from read_context import ReadContext
from request_parsing import InvalidRequest
from tests.property_examples import examples
from tests.unit.conftest import TABLE, FakeLambdaContext, create_table
from tests.unit.query.aggregates_on_moto import MONTH, Catalogue, FailingClient, load_month

SCHEMA = IndexSchema()
BOARD = Board.month(MONTH)


def listing(catalogue: Catalogue) -> list[tuple[str, int]]:
    """The oracle: every song, most downloads first, equal counts by song id (as UTF-8 bytes)."""
    return sorted(catalogue.items(), key=lambda item: (-item[1], item[0].encode()))


def in_memory_reader(catalogue: Catalogue, shards: int) -> Callable[[str, Position | None, int], Any]:
    """The partition reader's contract over plain lists: the next entries after a cursor, whole order groups."""
    partitions: dict[str, list[Entry]] = {}
    for song, count in catalogue.items():
        partitions.setdefault(leaderboard_partition(MONTH, song, shards), []).append(
            Entry.of(order_of(count, song), song, count)
        )

    def read(partition: str, after: Position | None, wanted: int) -> tuple[list[Entry], bool]:
        entries = sorted(e for e in partitions.get(partition, []) if after is None or after.precedes(e))
        if len(entries) <= wanted:
            return entries, True
        cut = wanted
        while cut < len(entries) and entries[cut].order == entries[cut - 1].order:
            cut += 1
        return entries[:cut], cut == len(entries)

    return read


def page_through(read: Any, layout: Layout, limit: int) -> list[tuple[str, int]]:
    listed: list[tuple[str, int]] = []
    event: dict[str, Any] = {"month": MONTH, "limit": limit}
    for _ in range(10_000):
        request = parse_request(event, SCHEMA, layout)
        assert isinstance(request, PageRequest)
        entries, cursors = merge_page(request, read)
        listed += [(entry.entity_id, entry.count) for entry in entries]
        if not cursors:
            return listed
        event = {"month": MONTH, "limit": limit, "next_token": encode_token(MONTH, layout, cursors)}
    raise AssertionError("pagination did not end")


# Song ids that share their first 10 bytes tie in the index itself when their counts tie too.
SONG_IDS = st.one_of(
    st.sampled_from([f"song{n:03d}" for n in range(40)]),
    st.sampled_from([f"international-hit-{n}" for n in range(8)]),
    st.text(alphabet="abcé", min_size=1, max_size=3),
)
CATALOGUES = st.dictionaries(SONG_IDS, st.integers(1, 6), max_size=40)


@settings(max_examples=examples(150), deadline=None)
@given(catalogue=CATALOGUES, shards=st.sampled_from([1, 2, 4, 7]), limit=st.sampled_from([1, 2, 3, 10, 1000]))
def test_paging_through_any_number_of_shards_gives_the_one_sorted_listing(
    catalogue: Catalogue, shards: int, limit: int
) -> None:
    # given songs with many equal counts, spread over `shards` index partitions
    # when every page is requested in turn, each from the previous page's token
    listed = page_through(in_memory_reader(catalogue, shards), Layout(shards), limit)
    # then the pages together are the listing one sorted list gives
    assert listed == listing(catalogue)


@settings(max_examples=examples(60), deadline=None)
@given(catalogue=CATALOGUES, old=st.sampled_from([1, 3]), new=st.sampled_from([1, 4]), moved=st.floats(0, 1))
def test_during_a_layout_change_every_song_is_listed_once_in_order(
    catalogue: Catalogue, old: int, new: int, moved: float
) -> None:
    # given some songs already in the new layout's partitions and the rest in the old one's
    rng = random.Random(len(catalogue))
    new_songs = {song for song in catalogue if rng.random() < moved}
    layout = Layout(new, old if old != new else None)
    old_reader, new_reader = (
        in_memory_reader({s: c for s, c in catalogue.items() if s not in new_songs}, old),
        in_memory_reader({s: c for s, c in catalogue.items() if s in new_songs}, new),
    )

    def read(partition: str, after: Position | None, wanted: int) -> tuple[list[Entry], bool]:
        first, first_done = old_reader(partition, after, wanted)
        second, second_done = new_reader(partition, after, wanted)
        return sorted(first + second), first_done and second_done

    # then the listing is the same as without the move
    assert page_through(read, layout, 3) == listing(catalogue)


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def forge(*fields: str) -> str:
    """A token of the function's shape (version, month, shards, previous shards, cursors) with chosen fields."""
    return b64("|".join(fields))


SONG1 = b64("song1")
NOT_UTF8 = base64.urlsafe_b64encode(b"\xff\xfe").decode()
GOOD = ("2", MONTH, "4", "-", f"{MONTH}#1=300000000000000000000000000:{SONG1}")


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("forged", "not a token issued"),
        (forge("2", "2018-02", "4", "-", f"2018-02#1=12:{SONG1}"), "another month"),
        (forge("2", MONTH, "1", "-", f"{MONTH}=12:{SONG1}"), "another leaderboard layout"),
        (forge("2", MONTH, "4", "1", f"{MONTH}#1=12:{SONG1}"), "another leaderboard layout"),
        (forge("1", *GOOD[1:]), "not a token issued"),
        (forge(*GOOD[:4]), "not a token issued"),
        (forge(*GOOD[:4], f"{MONTH}#9="), "not a token issued"),
        (forge(*GOOD[:4], f"{MONTH}#1=12x:{SONG1}"), "not a token issued"),
        (forge(*GOOD[:4], f"{MONTH}#1=12:"), "not a token issued"),
        (forge(*GOOD[:4], f"{MONTH}#1=12:{SONG1}:extra"), "not a token issued"),
        (forge(*GOOD[:4], f"{MONTH}#1=12"), "not a token issued"),
        (forge(*GOOD[:4], f"{MONTH}#1=1{'0' * 38}:{SONG1}"), "not a token issued"),
        (forge(*GOOD[:4], f"{MONTH}#1=12:{b64('x' * 2049)}"), "not a token issued"),
        (forge(*GOOD[:4], f"{MONTH}#1=12:{NOT_UTF8}"), "not a token issued"),
        (forge(*GOOD[:4], f"{MONTH}#1=", f"{MONTH}#1="), "not a token issued"),
        (forge(*GOOD, ""), "not a token issued"),
        (b64(json.dumps({"v": 1, "m": MONTH, "l": [4, None], "c": {f"{MONTH}#1": []}})), "not a token issued"),
        (GOOD[4] + "!", "not a token issued"),
        ("", "not a token issued"),
        ("a", "not a token issued"),
        (12, "not a token issued"),
        ("A" * 10_000_000, "not a token issued"),
    ],
)
def test_a_token_not_issued_for_this_month_and_layout_is_refused(token: Any, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        decode_token(token, MONTH, Layout(4))


def test_a_well_formed_token_is_accepted() -> None:
    assert decode_token(forge(*GOOD), MONTH, Layout(4)) == {f"{MONTH}#1": Position(3 * 10**26, "song1")}


def test_an_issued_token_round_trips() -> None:
    cursors = {f"{MONTH}#0": None, f"{MONTH}#3": Position(order_of(12, "sång"), "sång")}
    assert decode_token(encode_token(MONTH, Layout(4), cursors), MONTH, Layout(4)) == cursors


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"month": "2018-13"},
        {"month": "2018-01\n"},
        {"month": "\uff12\uff10\uff11\uff18-01"},
        {"month": "2018-01", "limit": 0},
        {"month": "2018-01", "limit": 1001},
        {"month": "2018-01", "limit": True},
        {"month": "2018-01", "limit": "10"},
        {"month": "2018-01", "colour": "red"},
        {"month": "2018-01", "songID": ""},
        {"month": "2018-01", "songID": 3},
        {"month": "2018-01", "songID": "x" * 2049},
        {"month": "2018-01", "songID": "\ud800"},
        {"month": "2018-01", "\ud800": 1},
        {"month": "2018-01", "songID": "song1", "limit": 3},
        {"month": "2018-01", "songID": "song1", "next_token": "x"},
        [],
    ],
)
def test_bad_requests_are_invalid(event: Any) -> None:
    with pytest.raises(InvalidRequest):
        parse_request(event, SCHEMA, Layout(1))


def test_a_rank_request_is_recognised() -> None:
    assert parse_request({"month": MONTH, "songID": "song3"}, SCHEMA, Layout(4)) == RankRequest(BOARD, "song3")


# ---------------------------------------------------------------- on moto: the DynamoDB reader, pages, ranks


def pages_on(dynamodb: Any, layout: Layout, limit: int) -> list[tuple[str, int]]:
    listed: list[tuple[str, int]] = []
    event: dict[str, Any] = {"month": MONTH, "limit": limit}
    for _ in range(10_000):
        request = parse_request(event, SCHEMA, layout)
        assert isinstance(request, PageRequest)
        page = leaderboard_page.answer(ReadContext(dynamodb, TABLE, SCHEMA, layout), request)
        listed += [(item["songID"], item["downloadCount"]) for item in page["items"]]
        if page["next_token"] is None:
            return listed
        event = {"month": MONTH, "limit": limit, "next_token": page["next_token"]}
    raise AssertionError("pagination did not end")


TIED = {
    **{f"song{n:02d}": 1 + n % 4 for n in range(30)},
    **{f"international-hit-{n}": 3 for n in range(5)},
    "zz-top": 9,
}


@pytest.mark.parametrize("shards", [1, 4])
@pytest.mark.parametrize("limit", [1, 3, 10])
def test_pages_from_dynamodb_are_the_sorted_listing(dynamodb: Any, shards: int, limit: int) -> None:
    # given 36 aggregates with many equal counts, five of them equal in the index's own sort key
    load_month(dynamodb, TIED, shards)
    # when every page is read through DynamoDB's Query, then the listing is exact
    assert pages_on(dynamodb, Layout(shards), limit) == listing(TIED)


@pytest.mark.parametrize("shards", [1, 4])
def test_the_rank_of_each_song_is_its_place_in_the_listing(dynamodb: Any, shards: int) -> None:
    load_month(dynamodb, TIED, shards)
    for place, (song, count) in enumerate(listing(TIED), start=1):
        answer = entity_rank.answer(ReadContext(dynamodb, TABLE, SCHEMA, Layout(shards)), RankRequest(BOARD, song))
        assert answer == {"month": MONTH, "songID": song, "downloadCount": count, "rank": place}


def test_a_song_without_downloads_has_no_rank(dynamodb: Any) -> None:
    load_month(dynamodb, TIED, 1)
    assert entity_rank.answer(ReadContext(dynamodb, TABLE, SCHEMA, Layout(1)), RankRequest(BOARD, "silence")) == {
        "month": MONTH,
        "songID": "silence",
        "downloadCount": 0,
        "rank": None,
    }


def test_past_its_read_budget_a_rank_is_a_lower_bound(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    load_month(dynamodb, TIED, 1)
    monkeypatch.setattr(index_reads, "READ_BUDGET_PAGES", 1)
    monkeypatch.setattr(index_reads, "MIN_PARTITION_PAGES", 1)
    real_query = dynamodb.query

    def one_item_pages(**parameters: Any) -> Any:
        return real_query(**{**parameters, "Limit": 1})

    monkeypatch.setattr(dynamodb, "query", one_item_pages)
    last = listing(TIED)[-1][0]
    answer = entity_rank.answer(ReadContext(dynamodb, TABLE, SCHEMA, Layout(1)), RankRequest(BOARD, last))
    assert (answer["rank"], answer["rankAtLeast"]) == (None, 2)


def test_near_its_timeout_a_rank_is_a_lower_bound(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a month read one entry per page, and a clock that runs out after the first page
    load_month(dynamodb, TIED, 1)
    real_query = dynamodb.query
    pages: list[int] = []

    def one_item_pages(**parameters: Any) -> Any:
        pages.append(1)
        return real_query(**{**parameters, "Limit": 1})

    monkeypatch.setattr(dynamodb, "query", one_item_pages)
    last = listing(TIED)[-1][0]
    # when the rank of the last song is asked
    answer = entity_rank.answer(
        ReadContext(dynamodb, TABLE, SCHEMA, Layout(1), out_of_time=lambda: bool(pages)), RankRequest(BOARD, last)
    )
    # then it stops after one page and answers the places it counted as a lower bound
    assert (answer["rank"], answer["rankAtLeast"], len(pages)) == (None, 2, 1)


def test_the_handler_answers_pages_ranks_and_errors(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    load_month(dynamodb, TIED, 4)
    monkeypatch.setattr(query, "_dynamodb", dynamodb)
    monkeypatch.setattr(query, "AGGREGATES_TABLE_NAME", TABLE)
    monkeypatch.setattr(query, "LAYOUT", Layout(4))

    top = query.lambda_handler({"month": MONTH, "limit": 1}, FakeLambdaContext())
    assert top["items"] == [{"songID": "zz-top", "downloadCount": 9}]
    assert query.lambda_handler({"month": MONTH, "songID": "zz-top"}, FakeLambdaContext())["rank"] == 1
    assert query.lambda_handler({"month": "2018-99"}, FakeLambdaContext())["error"]["code"] == "InvalidRequest"
    empty = query.lambda_handler({"month": "2019-01", "limit": 5}, FakeLambdaContext())
    assert empty == {"month": "2019-01", "items": [], "next_token": None}


@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(catalogue=CATALOGUES, shards=st.sampled_from([1, 3]), limit=st.sampled_from([1, 4]))
def test_random_catalogues_page_exactly_on_moto(aws: None, catalogue: Catalogue, shards: int, limit: int) -> None:

    dynamodb = create_table(fresh=True)
    load_month(dynamodb, catalogue, shards)
    assert pages_on(dynamodb, Layout(shards), limit) == listing(catalogue)


# ---------------------------------------------------------------- every request answered, bounded, any id

ON_MOTO = settings(
    max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@settings(max_examples=examples(30), deadline=None)
@given(depth=st.integers(2_000, 40_000), opener=st.sampled_from(["[", '{"c":', '{"v":[']))
def test_a_token_of_nested_brackets_is_an_invalid_request(depth: int, opener: str) -> None:
    # given a well-encoded token whose payload nests deeper than any parser's recursion limit
    token = b64(opener * depth)
    # when it is parsed, then it is refused as a request, never a RecursionError
    with pytest.raises(InvalidRequest):
        parse_request({"month": MONTH, "limit": 10, "next_token": token}, SCHEMA, Layout(4))


@settings(max_examples=examples(200), deadline=None)
@given(
    month=st.text(max_size=12)
    | st.sampled_from(["2018-01\n", "2018-01\r\n", " 2018-01", "\uff12\uff10\uff11\uff18-01", "2018-1"])
)
def test_only_an_exact_year_and_month_is_a_month(month: str) -> None:
    exact = len(month) == 7 and month[4] == "-" and month[:4].isascii() and month[:4].isdigit()
    exact = exact and month[5:] in {f"{m:02d}" for m in range(1, 13)}
    # when any text is given as the month, then it is accepted exactly when it is YYYY-MM
    if exact:
        assert parse_request({"month": month}, SCHEMA, Layout(1)).board == Board.month(month)
    else:
        with pytest.raises(InvalidRequest):
            parse_request({"month": month}, SCHEMA, Layout(1))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
FIELD_VALUES = JSON | st.sampled_from(["2018-01", "2018-01\n", "\ud800", "song\udfff", "x" * 3000, 10, 0, 2**70])
EVENTS = JSON | st.dictionaries(
    st.sampled_from(["month", "limit", "next_token", "songID", "colour", "\ud800"]), FIELD_VALUES, max_size=4
)


@ON_MOTO
@given(event=EVENTS)
@example(event={"month": MONTH, "songID": "\ud800"})
@example(event={"month": MONTH, "limit": 3, "next_token": b64("[" * 30_000)})
@example(event={"month": "2018-01\n", "limit": 3})
def test_every_request_however_malformed_gets_an_answer(aws: None, event: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # given the handler on a table
    monkeypatch.setattr(query, "_dynamodb", create_table(fresh=True))
    monkeypatch.setattr(query, "AGGREGATES_TABLE_NAME", TABLE)
    monkeypatch.setattr(query, "LAYOUT", Layout(4))
    # when anything JSON can carry is sent, then it answers: a page, a rank, or an error it names
    answer = query.lambda_handler(event, FakeLambdaContext())
    assert isinstance(answer, dict)
    if "error" in answer:
        assert answer["error"]["code"] == "InvalidRequest"
    else:
        assert re.fullmatch(r"[0-9]{4}-(0[1-9]|1[0-2])", answer["month"])
        assert answer["month"] == event["month"]
    json.dumps(answer)  # what the runtime does with it


@ON_MOTO
@given(
    request=st.sampled_from([{"month": MONTH, "limit": 3}, {"month": MONTH, "songID": "song1"}]),
    operation=st.sampled_from(["query", "get_item"]),
    code=st.sampled_from(["ProvisionedThroughputExceededException", "InternalServerError", "AccessDeniedException"]),
)
def test_a_dynamodb_failure_is_answered_unavailable_and_logged(
    aws: None,
    request: dict[str, Any],
    operation: str,
    code: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # given aggregates, and DynamoDB failing one kind of read
    dynamodb = create_table(fresh=True)
    load_month(dynamodb, {"song1": 3, "song2": 2}, 4)
    monkeypatch.setattr(query, "_dynamodb", FailingClient(dynamodb, operation, code))
    monkeypatch.setattr(query, "AGGREGATES_TABLE_NAME", TABLE)
    monkeypatch.setattr(query, "LAYOUT", Layout(4))
    caplog.clear()
    # when a page or a rank is asked
    with caplog.at_level(logging.INFO):
        answer = query.lambda_handler(request, FakeLambdaContext())
    # then a page needs no GetItem; every other case is a structured Unavailable, logged at error level
    if operation == "get_item" and "limit" in request:
        assert "items" in answer
        return
    assert answer["error"]["code"] == "Unavailable", answer
    assert any(record.levelno >= logging.ERROR for record in caplog.records)


class CountingClient:
    def __init__(self, client: Any) -> None:
        self._client, self.queries = client, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def query(self, **parameters: Any) -> Any:
        self.queries += 1
        return self._client.query(**parameters)


TIED_PREFIX = "tied-song-"  # 10 bytes: the tie-breaker's whole width


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(group=st.integers(40, 300), shards=st.sampled_from([1, 3]), limit=st.sampled_from([1, 10]))
def test_a_page_costs_a_few_queries_per_partition_whatever_the_ties(
    aws: None, group: int, shards: int, limit: int
) -> None:
    # given `group` songs with equal counts whose ids share the tie-breaker's 10 bytes, and a few others
    dynamodb = create_table(fresh=True)
    catalogue = {f"{TIED_PREFIX}{n:04d}": 5 for n in range(group)} | {"alpha": 9, "omega": 1}
    load_month(dynamodb, catalogue, shards)
    counting = CountingClient(dynamodb)
    layout = Layout(shards)
    expected = sorted(catalogue.items(), key=lambda item: (-item[1], item[0].encode()))
    # when the first pages are read
    listed: list[tuple[str, int]] = []
    event: dict[str, Any] = {"month": MONTH, "limit": limit}
    for _ in range(3):
        counting.queries = 0
        request = parse_request(event, SCHEMA, layout)
        assert isinstance(request, PageRequest)
        page = leaderboard_page.answer(ReadContext(counting, TABLE, SCHEMA, layout), request)
        # then each costs at most four Queries per partition, and the listing stays exact
        assert counting.queries <= 4 * shards, counting.queries
        listed += [(item["songID"], item["downloadCount"]) for item in page["items"]]
        event = {"month": MONTH, "limit": limit, "next_token": page["next_token"]}
    assert listed == expected[: 3 * limit]


def test_the_rank_stops_counting_a_tie_group_at_the_clock(dynamodb: Any) -> None:
    # given the last of 300 songs that tie in the index, read one entry per Query page
    load_month(dynamodb, {f"{TIED_PREFIX}{n:04d}": 5 for n in range(300)}, 1)
    counting = CountingClient(dynamodb)
    real_query = dynamodb.query

    def one_item_pages(**parameters: Any) -> Any:
        counting.queries += 1
        return real_query(**{**parameters, "Limit": 1})

    counting.query = one_item_pages  # type: ignore[method-assign]
    # when its rank is asked with a clock that has run out after the first Query
    answer = entity_rank.answer(
        ReadContext(counting, TABLE, SCHEMA, Layout(1), out_of_time=lambda: counting.queries >= 1),
        RankRequest(BOARD, f"{TIED_PREFIX}0299"),
    )
    # then it answers a lower bound after a bounded number of Queries instead of reading the whole group
    assert answer["rank"] is None
    assert answer["rankAtLeast"] >= 1
    assert counting.queries <= 2, counting.queries


IDS = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=2048).filter(
    lambda text: len(text.encode()) <= 2048
) | st.sampled_from(["a" * 2048, "\u00e9" * 1024, "\U0001d11e" * 512, "\x01" * 2048, '"\\' * 1024])


@settings(max_examples=examples(60), deadline=None)
@given(
    layout=st.sampled_from([Layout(1), Layout(4), Layout(64), Layout(64, 1), Layout(8, 64)]),
    data=st.data(),
)
def test_the_functions_own_tokens_round_trip_for_any_id_dynamodb_accepts(layout: Layout, data: st.DataObject) -> None:
    # given cursors at ids of up to 2,048 UTF-8 bytes (DynamoDB's partition key limit), in any partition
    partitions = layout.partitions(MONTH)
    chosen = data.draw(st.lists(st.sampled_from(partitions), min_size=1, max_size=4, unique=True))
    ids = data.draw(st.lists(IDS, min_size=len(chosen), max_size=len(chosen)))
    cursors: dict[str, Any] = {p: None for p in partitions}
    cursors.update({p: Position(order_of(7, song), song) for p, song in zip(chosen, ids, strict=True)})
    # when the function's token for them comes back as next_token
    token = encode_token(MONTH, layout, cursors)
    request = parse_request({"month": MONTH, "limit": 5, "next_token": token}, SCHEMA, layout)
    # then it is accepted and names the same cursors
    assert isinstance(request, PageRequest)
    assert request.cursors == cursors


def test_the_longest_token_the_function_can_issue_is_accepted() -> None:
    # given every partition of the widest layout at a cursor on a 2,048-byte id of characters JSON escapes
    layout = Layout(64, 1)
    worst = "\x01" * 2048
    cursors = {p: Position(10**38 - 1, worst) for p in layout.partitions(MONTH)}
    token = encode_token(MONTH, layout, cursors)
    request = parse_request({"month": MONTH, "limit": 5, "next_token": token}, SCHEMA, layout)
    assert isinstance(request, PageRequest)
    assert request.cursors == cursors


def test_a_rank_is_answered_for_an_id_of_2048_bytes(dynamodb: Any) -> None:
    longest = "é" * 1024  # 2,048 UTF-8 bytes
    load_month(dynamodb, {longest: 3, "song1": 5}, 1)
    request = parse_request({"month": MONTH, "songID": longest}, SCHEMA, Layout(1))
    assert entity_rank.answer(ReadContext(dynamodb, TABLE, SCHEMA, Layout(1)), request)["rank"] == 2


def test_pages_of_one_over_ids_of_2048_bytes_list_every_song(dynamodb: Any) -> None:
    catalogue = {c * 2048: n for n, c in enumerate("abcde", start=1)}
    load_month(dynamodb, catalogue, 4)
    listed, event = [], {"month": MONTH, "limit": 1}
    for _ in range(10):
        request = parse_request(event, SCHEMA, Layout(4))
        page = leaderboard_page.answer(ReadContext(dynamodb, TABLE, SCHEMA, Layout(4)), request)
        listed += [item["songID"] for item in page["items"]]
        if page["next_token"] is None:
            break
        event = {"month": MONTH, "limit": 1, "next_token": page["next_token"]}
    assert listed == sorted(catalogue, key=lambda song: -catalogue[song])


@pytest.mark.parametrize("shards", ["1", "8", "32", "64"])
def test_the_connection_pool_holds_a_connection_for_every_reader_thread(
    shards: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given the function loaded for a layout of `shards` partitions (a copy: the other tests keep theirs)
    monkeypatch.setenv("LEADERBOARD_SHARDS", shards)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    spec = importlib.util.spec_from_file_location("query_loaded_again", query.__file__)
    assert spec is not None
    assert spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, loaded)  # its dataclasses look their module up
    spec.loader.exec_module(loaded)
    # then botocore's pool has a connection for each thread that can read at once
    assert loaded._dynamodb.meta.config.max_pool_connections >= loaded._READERS._max_workers
