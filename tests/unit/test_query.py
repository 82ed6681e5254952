"""The query function: exact pages for any number of leaderboard shards and any page size, ties, rank, bad requests."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import query
from leaderboard_order import leaderboard_partition, order_of
from query import (
    Entry,
    IndexSchema,
    InvalidRequest,
    Layout,
    PageRequest,
    Position,
    RankRequest,
    decode_token,
    encode_token,
    leaderboard_page,
    merge_page,
    parse_request,
    rank_of,
)
from tests.unit.conftest import TABLE

SCHEMA = IndexSchema()
MONTH = "2018-01"

Catalogue = dict[str, int]
"""songID -> downloads in MONTH."""


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


@settings(max_examples=150, deadline=None)
@given(catalogue=CATALOGUES, shards=st.sampled_from([1, 2, 4, 7]), limit=st.sampled_from([1, 2, 3, 10, 1000]))
def test_paging_through_any_number_of_shards_gives_the_one_sorted_listing(
    catalogue: Catalogue, shards: int, limit: int
) -> None:
    # given songs with many equal counts, spread over `shards` index partitions
    # when every page is requested in turn, each from the previous page's token
    listed = page_through(in_memory_reader(catalogue, shards), Layout(shards), limit)
    # then the pages together are the listing one sorted list gives
    assert listed == listing(catalogue)


@settings(max_examples=60, deadline=None)
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


def token_payload(token: str) -> dict[str, Any]:
    return json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))


def forge(payload: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


GOOD = {"v": 1, "m": MONTH, "l": [4, None], "c": {f"{MONTH}#1": ["300000000000000000000000000", "song1"]}}


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("forged", "not a token issued"),
        (forge({**GOOD, "m": "2018-02"}), "another month"),
        (forge({**GOOD, "l": [1, None]}), "another leaderboard layout"),
        (forge({**GOOD, "v": 2}), "not a token issued"),
        (forge({**GOOD, "c": {}}), "not a token issued"),
        (forge({**GOOD, "c": {"2018-01#9": []}}), "not a token issued"),
        (forge({**GOOD, "c": {f"{MONTH}#1": ["12x", "song1"]}}), "not a token issued"),
        (forge({**GOOD, "c": {f"{MONTH}#1": ["12", ""]}}), "not a token issued"),
        (forge({**GOOD, "c": {f"{MONTH}#1": ["12", "song1", "extra"]}}), "not a token issued"),
        (forge({**GOOD, "c": {f"{MONTH}#1": "12"}}), "not a token issued"),
        (forge({**GOOD, "extra": 1}), "not a token issued"),
        ("", "not a token issued"),
        (12, "not a token issued"),
    ],
)
def test_a_token_not_issued_for_this_month_and_layout_is_refused(token: Any, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        decode_token(token, MONTH, Layout(4))


def test_an_issued_token_round_trips() -> None:
    cursors = {f"{MONTH}#0": None, f"{MONTH}#3": Position(order_of(12, "sång"), "sång")}
    assert decode_token(encode_token(MONTH, Layout(4), cursors), MONTH, Layout(4)) == cursors


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"month": "2018-13"},
        {"month": "2018-01", "limit": 0},
        {"month": "2018-01", "limit": 1001},
        {"month": "2018-01", "limit": True},
        {"month": "2018-01", "limit": "10"},
        {"month": "2018-01", "colour": "red"},
        {"month": "2018-01", "songID": ""},
        {"month": "2018-01", "songID": 3},
        {"month": "2018-01", "songID": "x" * 1025},
        {"month": "2018-01", "songID": "song1", "limit": 3},
        {"month": "2018-01", "songID": "song1", "next_token": "x"},
        [],
    ],
)
def test_bad_requests_are_invalid(event: Any) -> None:
    with pytest.raises(InvalidRequest):
        parse_request(event, SCHEMA, Layout(1))


def test_a_rank_request_is_recognised() -> None:
    assert parse_request({"month": MONTH, "songID": "song3"}, SCHEMA, Layout(4)) == RankRequest(MONTH, "song3")


# ---------------------------------------------------------------- on moto: the DynamoDB reader, pages, ranks


def load(dynamodb: Any, catalogue: Catalogue, shards: int) -> None:
    """Aggregates as the aggregator writes them, plus a raw download the sparse index must not list."""
    for song, count in catalogue.items():
        dynamodb.put_item(
            TableName=TABLE,
            Item={
                "songID": {"S": song},
                "SK": {"S": MONTH},
                "Month": {"S": leaderboard_partition(MONTH, song, shards)},
                "DownloadCount": {"N": str(count)},
                "LeaderboardOrder": {"N": str(order_of(count, song))},
            },
        )
    dynamodb.put_item(
        TableName=TABLE, Item={"songID": {"S": "song01"}, "SK": {"S": "d1"}, "Timestamp": {"S": "2018-01-01T00:00:00Z"}}
    )


def pages_on(dynamodb: Any, layout: Layout, limit: int) -> list[tuple[str, int]]:
    listed: list[tuple[str, int]] = []
    event: dict[str, Any] = {"month": MONTH, "limit": limit}
    for _ in range(10_000):
        request = parse_request(event, SCHEMA, layout)
        assert isinstance(request, PageRequest)
        page = leaderboard_page(dynamodb, TABLE, SCHEMA, layout, request)
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
    load(dynamodb, TIED, shards)
    # when every page is read through DynamoDB's Query, then the listing is exact
    assert pages_on(dynamodb, Layout(shards), limit) == listing(TIED)


@pytest.mark.parametrize("shards", [1, 4])
def test_the_rank_of_each_song_is_its_place_in_the_listing(dynamodb: Any, shards: int) -> None:
    load(dynamodb, TIED, shards)
    for place, (song, count) in enumerate(listing(TIED), start=1):
        answer = rank_of(dynamodb, TABLE, SCHEMA, Layout(shards), RankRequest(MONTH, song))
        assert answer == {"month": MONTH, "songID": song, "downloadCount": count, "rank": place}


def test_a_song_without_downloads_has_no_rank(dynamodb: Any) -> None:
    load(dynamodb, TIED, 1)
    assert rank_of(dynamodb, TABLE, SCHEMA, Layout(1), RankRequest(MONTH, "silence")) == {
        "month": MONTH,
        "songID": "silence",
        "downloadCount": 0,
        "rank": None,
    }


def test_past_its_read_budget_a_rank_is_a_lower_bound(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    load(dynamodb, TIED, 1)
    monkeypatch.setattr(query, "RANK_PAGE_BUDGET", 1)
    real_query = dynamodb.query

    def one_item_pages(**parameters: Any) -> Any:
        return real_query(**{**parameters, "Limit": 1})

    monkeypatch.setattr(dynamodb, "query", one_item_pages)
    last = listing(TIED)[-1][0]
    answer = rank_of(dynamodb, TABLE, SCHEMA, Layout(1), RankRequest(MONTH, last))
    assert (answer["rank"], answer["rankAtLeast"]) == (None, 2)


def test_near_its_timeout_a_rank_is_a_lower_bound(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a month read one entry per page, and a clock that runs out after the first page
    load(dynamodb, TIED, 1)
    real_query = dynamodb.query
    pages: list[int] = []

    def one_item_pages(**parameters: Any) -> Any:
        pages.append(1)
        return real_query(**{**parameters, "Limit": 1})

    monkeypatch.setattr(dynamodb, "query", one_item_pages)
    last = listing(TIED)[-1][0]
    # when the rank of the last song is asked
    answer = rank_of(dynamodb, TABLE, SCHEMA, Layout(1), RankRequest(MONTH, last), out_of_time=lambda: bool(pages))
    # then it stops after one page and answers the places it counted as a lower bound
    assert (answer["rank"], answer["rankAtLeast"], len(pages)) == (None, 2, 1)


def test_the_handler_answers_pages_ranks_and_errors(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    load(dynamodb, TIED, 4)
    monkeypatch.setattr(query, "_dynamodb", dynamodb)
    monkeypatch.setattr(query, "TABLE_NAME", TABLE)
    monkeypatch.setattr(query, "LAYOUT", Layout(4))
    from tests.unit.conftest import FakeLambdaContext

    top = query.lambda_handler({"month": MONTH, "limit": 1}, FakeLambdaContext())
    assert top["items"] == [{"songID": "zz-top", "downloadCount": 9}]
    assert query.lambda_handler({"month": MONTH, "songID": "zz-top"}, FakeLambdaContext())["rank"] == 1
    assert query.lambda_handler({"month": "2018-99"}, FakeLambdaContext())["error"]["code"] == "InvalidRequest"
    empty = query.lambda_handler({"month": "2019-01", "limit": 5}, FakeLambdaContext())
    assert empty == {"month": "2019-01", "items": [], "next_token": None}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(catalogue=CATALOGUES, shards=st.sampled_from([1, 3]), limit=st.sampled_from([1, 4]))
def test_random_catalogues_page_exactly_on_moto(aws: None, catalogue: Catalogue, shards: int, limit: int) -> None:
    from tests.unit.conftest import create_table

    dynamodb = create_table(fresh=True)
    load(dynamodb, catalogue, shards)
    assert pages_on(dynamodb, Layout(shards), limit) == listing(catalogue)
