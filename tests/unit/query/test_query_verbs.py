"""Redis's leaderboard verbs over the query function: a range by rank (ZREVRANGE), a range by count (ZRANGEBYSCORE,
highest first), a board's size (ZCARD) and an entity's value (ZSCORE), each checked against the one sorted listing, for
any number of leaderboard shards, page size, period, category and summed values; their reads bounded, their tokens
their own, every malformed request an InvalidRequest."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import board_size
import count_range
import index_reads
import query
import rank_range
from boards import Board, Boards
from index_reads import Layout
from leaderboard_core.index_layout import leaderboard_partition, order_of
from leaderboard_core.periods import PERIODS
from tests.property_examples import examples
from tests.unit.conftest import TABLE, FakeLambdaContext, create_table
from tests.unit.query.aggregates_on_moto import MONTH, Catalogue, load_boards, load_month

ON_MOTO = settings(
    max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

TIED = {
    **{f"song{n:02d}": 1 + n % 4 for n in range(30)},
    **{f"international-hit-{n}": 3 for n in range(5)},
    "zz-top": 9,
}
"""36 songs, many with equal counts, five of them equal in the index's own sort key (ids sharing 10 bytes)."""


def listing(catalogue: dict[str, Any]) -> list[tuple[str, Any]]:
    """The oracle: most first, equal values by id (UTF-8 bytes)."""
    return sorted(catalogue.items(), key=lambda item: (-item[1], item[0].encode()))


class Deployment:
    """The query function's handler on moto's table, in a layout, counting what it reads."""

    def __init__(self, dynamodb: Any, layout: Layout, boards: Boards = Boards()) -> None:  # noqa: B008
        self.dynamodb, self.layout, self.boards = dynamodb, layout, boards
        self.queries = self.entries_read = self.get_items = 0

    def query(self, **parameters: Any) -> Any:
        self.queries += 1
        page = self.dynamodb.query(**parameters)
        self.entries_read += page.get("Count", len(page.get("Items", [])))
        return page

    def get_item(self, **parameters: Any) -> Any:
        self.get_items += 1
        return self.dynamodb.get_item(**parameters)

    def ask(self, event: dict[str, Any], remaining_ms: int = 60_000) -> dict[str, Any]:
        saved = (query._dynamodb, query.AGGREGATES_TABLE_NAME, query.LAYOUT, query.BOARDS)
        query._dynamodb, query.AGGREGATES_TABLE_NAME, query.LAYOUT, query.BOARDS = self, TABLE, self.layout, self.boards
        try:
            answer = query.lambda_handler(event, FakeLambdaContext(remaining_ms))
        finally:
            query._dynamodb, query.AGGREGATES_TABLE_NAME, query.LAYOUT, query.BOARDS = saved
        json.dumps(answer)  # what the runtime does with it
        return answer

    def every_page(self, event: dict[str, Any], pages: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Every item of a listing, following next_token until null (the answers kept in `pages`)."""
        items: list[dict[str, Any]] = []
        request = dict(event)
        for _ in range(10_000):
            answer = self.ask(request)
            assert "error" not in answer, (request, answer)
            if pages is not None:
                pages.append(answer)
            items += answer["items"]
            if answer["next_token"] is None:
                return items
            request = {**event, "next_token": answer["next_token"]}
        raise AssertionError("pagination did not end")


def ranked(catalogue: dict[str, Any], first: int, last: int | None) -> list[dict[str, Any]]:
    return [
        {"songID": song, "downloadCount": count, "rank": place}
        for place, (song, count) in enumerate(listing(catalogue), start=1)
        if first <= place and (last is None or place <= last)
    ]


# ---------------------------------------------------------------- a range by rank (ZREVRANGE)


@pytest.mark.parametrize("shards", [1, 3])
@pytest.mark.parametrize("limit", [1, 4, 100])
@pytest.mark.parametrize(("first", "last"), [(1, 5), (10, 20), (30, None), (36, 36), (35, 50), (40, 50)])
def test_a_range_by_rank_is_the_listings_places_with_their_ranks(
    dynamodb: Any, shards: int, limit: int, first: int, last: int | None
) -> None:
    # given 36 songs with many ties, in `shards` leaderboard partitions
    load_month(dynamodb, TIED, shards)
    deployment = Deployment(dynamodb, Layout(shards))
    event: dict[str, Any] = {"month": MONTH, "fromRank": first, "limit": limit}
    if last is not None:
        event["toRank"] = last
    # when the range is read page by page, then it is those places of the listing, each with its rank
    pages: list[dict[str, Any]] = []
    assert deployment.every_page(event, pages) == ranked(TIED, first, last)
    assert all(len(page["items"]) <= limit for page in pages)
    assert {(page["month"], page["fromRank"], page["toRank"]) for page in pages} == {(MONTH, first, last)}


@ON_MOTO
@given(
    catalogue=st.dictionaries(
        st.sampled_from([f"song{n:03d}" for n in range(60)] + [f"international-hit-{n}" for n in range(6)]),
        st.integers(1, 5),
        max_size=60,
    ),
    shards=st.sampled_from([1, 2, 5]),
    first=st.integers(1, 70),
    span=st.one_of(st.none(), st.integers(0, 30)),
    limit=st.sampled_from([1, 3, 1000]),
    step=st.sampled_from([1, 2, 7, rank_range.SKIP_STEP]),
)
def test_random_ranges_by_rank_skip_exactly_in_rounds_of_any_size(
    aws: None,
    monkeypatch: pytest.MonkeyPatch,
    catalogue: Catalogue,
    shards: int,
    first: int,
    span: int | None,
    limit: int,
    step: int,
) -> None:
    # given any songs, and a skip that passes over at most `step` entries a round
    dynamodb = create_table(fresh=True)
    load_month(dynamodb, catalogue, shards)
    monkeypatch.setattr(rank_range, "SKIP_STEP", step)
    last = None if span is None else first + span
    event: dict[str, Any] = {"month": MONTH, "fromRank": first, "limit": limit}
    if last is not None:
        event["toRank"] = last
    # then the range is the listing's places, whatever the rounds
    assert Deployment(dynamodb, Layout(shards)).every_page(event) == ranked(catalogue, first, last)


def test_skipping_to_a_rank_reads_about_the_entries_above_it_not_that_many_per_partition(dynamodb: Any) -> None:
    # given 1,200 songs in 8 leaderboard partitions
    rng = random.Random(7)
    catalogue = {f"song{n:04d}": rng.randint(1, 10_000) for n in range(1200)}
    load_month(dynamodb, catalogue, 8)
    deployment = Deployment(dynamodb, Layout(8))
    # when ranks 600-610 are asked
    answer = deployment.ask({"month": MONTH, "fromRank": 600, "toRank": 610})
    # then they are the listing's, read in a few Queries per partition, and the entries read are about 610 plus a
    # margin per partition: not 8 x 600, which reading the head of every partition for each place would take
    assert answer["items"] == ranked(catalogue, 600, 610)
    assert answer["next_token"] is None
    assert deployment.entries_read < 1200, deployment.entries_read
    assert deployment.queries <= 4 * 8, deployment.queries


def test_a_skip_past_the_read_budget_answers_no_items_and_a_token_that_continues(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given 40 songs of distinct counts in 2 partitions (a round of the skip: one or two Queries of each), a request
    # budget of 5 Queries, and rounds of 4 entries: rank 30 is out of one request's reach
    catalogue = {f"song{n:02d}": n for n in range(1, 41)}
    load_month(dynamodb, catalogue, 2)
    monkeypatch.setattr(rank_range, "request_budget", lambda partitions: 5)
    monkeypatch.setattr(rank_range, "SKIP_STEP", 4)
    deployment = Deployment(dynamodb, Layout(2))
    # when ranks 30-33 are read, following the tokens
    pages: list[dict[str, Any]] = []
    items = deployment.every_page({"month": MONTH, "fromRank": 30, "toRank": 33}, pages)
    # then pages without items carried the skip on, and the range is exact
    assert pages[0]["items"] == []
    assert pages[0]["next_token"] is not None
    assert len(pages) > 2
    assert items == ranked(catalogue, 30, 33)


def test_a_range_that_cannot_pass_one_entry_is_unavailable(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    load_month(dynamodb, TIED, 2)
    monkeypatch.setattr(rank_range, "request_budget", lambda partitions: 1)
    answer = Deployment(dynamodb, Layout(2)).ask({"month": MONTH, "fromRank": 20})
    assert answer["error"]["code"] == "Unavailable"


def test_a_range_by_rank_during_a_layout_change_lists_each_song_once(dynamodb: Any) -> None:
    # given half the songs moved to 4 leaderboard shards and half still in the previous 2
    rng = random.Random(3)
    moved = {song for song in TIED if rng.random() < 0.5}
    load_month(dynamodb, {song: count for song, count in TIED.items() if song in moved}, 4)
    load_month(dynamodb, {song: count for song, count in TIED.items() if song not in moved}, 2)
    # then a range reads both layouts as one listing
    deployment = Deployment(dynamodb, Layout(4, 2))
    assert deployment.every_page({"month": MONTH, "fromRank": 5, "toRank": 30, "limit": 7}) == ranked(TIED, 5, 30)


# ---------------------------------------------------------------- a range by count (ZRANGEBYSCORE, highest first)


@pytest.mark.parametrize("shards", [1, 4])
@pytest.mark.parametrize("limit", [1, 5, 1000])
@pytest.mark.parametrize(
    "bounds",
    [
        {"minCount": 2, "maxCount": 3},
        {"minCount": 3, "maxCount": 3},
        {"minCount": 4},
        {"maxCount": 2},
        {"minCount": "1.5", "maxCount": "3.99"},
        {"minCount": 10},
        {"minCount": -5, "maxCount": 0},
        {"minCount": 0, "maxCount": 10**20},
    ],
)
def test_a_range_by_count_is_the_listing_between_its_bounds(
    dynamodb: Any, shards: int, limit: int, bounds: dict[str, Any]
) -> None:
    load_month(dynamodb, TIED, shards)
    deployment = Deployment(dynamodb, Layout(shards))
    low, high = Decimal(bounds.get("minCount", -(10**30))), Decimal(bounds.get("maxCount", 10**30))
    pages: list[dict[str, Any]] = []
    items = deployment.every_page({"month": MONTH, **bounds, "limit": limit}, pages)
    assert [(item["songID"], item["downloadCount"]) for item in items] == [
        (song, count) for song, count in listing(TIED) if low <= count <= high
    ]
    assert all({key: page[key] for key in bounds} == bounds for page in pages)


def test_a_range_by_count_reads_nothing_outside_its_bounds(dynamodb: Any) -> None:
    # given songs of every count from 1 to 100
    catalogue = {f"song{n:03d}": n for n in range(1, 101)}
    load_month(dynamodb, catalogue, 3)
    seen: list[int] = []
    deployment = Deployment(dynamodb, Layout(3))
    real_query = dynamodb.query

    def recording(**parameters: Any) -> Any:
        page = real_query(**parameters)
        seen.extend(int(item["DownloadCount"]["N"]) for item in page["Items"])
        return page

    deployment.dynamodb = type("Recording", (), {"query": staticmethod(recording), "get_item": dynamodb.get_item})()
    items = deployment.every_page({"month": MONTH, "minCount": 40, "maxCount": 49, "limit": 4})
    # then it lists counts 49 down to 40, and the only entries read were within the bounds
    assert [item["downloadCount"] for item in items] == list(range(49, 39, -1))
    assert seen
    assert all(40 <= count <= 49 for count in seen), sorted(set(seen))


SUMS = {
    "alpha": Decimal("2.5"),
    "beta": Decimal("2.500001"),
    "gamma": Decimal("0"),
    "delta": Decimal("-3.000001"),
    "epsilon": Decimal("-3"),
    "tied-sums-a": Decimal("7"),
    "tied-sums-b": Decimal("7"),
    "zeta": Decimal("1234.5"),
}
"""A summing deployment's board: decimals, zero, negatives, and two ids sharing the 8-byte tie-breaker."""


@pytest.mark.parametrize(
    "bounds",
    [
        {"minCount": "2.5", "maxCount": "2.5"},
        {"minCount": "2.5000005"},
        {"maxCount": "-3"},
        {"minCount": "-3.000001", "maxCount": 0},
        {"minCount": 7, "maxCount": "7.000000"},
        {"minCount": "-1000000000000"},
    ],
)
def test_a_range_by_count_of_sums_is_exact_to_their_decimals(dynamodb: Any, bounds: dict[str, Any]) -> None:
    load_boards(dynamodb, {MONTH: SUMS}, 2)
    deployment = Deployment(dynamodb, Layout(2), Boards(summed=True))
    low, high = Decimal(bounds.get("minCount", -(10**30))), Decimal(bounds.get("maxCount", 10**30))
    items = deployment.every_page({"month": MONTH, **bounds, "limit": 2})
    assert [(item["songID"], Decimal(item["downloadCount"])) for item in items] == [
        (song, value) for song, value in listing(SUMS) if low <= value <= high
    ]
    assert all(isinstance(item["downloadCount"], str) for item in items)


@pytest.mark.parametrize("shards", [1, 3])
def test_a_range_by_rank_and_a_size_of_sums_are_the_listings(dynamodb: Any, shards: int) -> None:
    load_boards(dynamodb, {MONTH: SUMS}, shards)
    deployment = Deployment(dynamodb, Layout(shards), Boards(summed=True))
    items = deployment.every_page({"month": MONTH, "fromRank": 2, "toRank": 7, "limit": 2})
    assert [(item["songID"], Decimal(item["downloadCount"]), item["rank"]) for item in items] == [
        (song, value, place) for place, (song, value) in enumerate(listing(SUMS), start=1)
    ][1:7]
    assert deployment.ask({"month": MONTH, "size": True})["size"] == len(SUMS)


def test_a_range_by_count_below_every_order_or_above_reads_nothing(dynamodb: Any) -> None:
    load_month(dynamodb, TIED, 2)
    deployment = Deployment(dynamodb, Layout(2))
    for bounds in ({"minCount": 10**37}, {"maxCount": -(10**37)}, {"minCount": "2.2", "maxCount": "2.8"}):
        answer = deployment.ask({"month": MONTH, **bounds})
        assert (answer["items"], answer["next_token"]) == ([], None), answer


# ---------------------------------------------------------------- a board's size (ZCARD)


@pytest.mark.parametrize("shards", [1, 4])
def test_the_size_of_a_board_is_how_many_entries_it_lists(dynamodb: Any, shards: int) -> None:
    load_month(dynamodb, TIED, shards)
    deployment = Deployment(dynamodb, Layout(shards))
    assert deployment.ask({"month": MONTH, "size": True}) == {"month": MONTH, "size": len(TIED), "next_token": None}
    assert deployment.ask({"month": "2019-01", "size": True}) == {"month": "2019-01", "size": 0, "next_token": None}
    # it counts: one COUNT Query per partition (the board fits a 1 MB page), no entry returned
    assert deployment.queries == 2 * shards


def test_a_size_past_the_read_budget_counts_on_with_its_token(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # given COUNT pages of 4 entries, and 2 pages per partition and request
    load_month(dynamodb, TIED, 3)
    monkeypatch.setattr(board_size, "COUNT_PAGE_LIMIT", 4)
    monkeypatch.setattr(board_size, "partition_budget", lambda partitions: 2)
    deployment = Deployment(dynamodb, Layout(3))
    # when the size is asked, then the first answer is a lower bound with a token
    answer = deployment.ask({"month": MONTH, "size": True})
    assert answer["size"] is None
    assert 0 < answer["sizeAtLeast"] < len(TIED)
    # and the same request with each token counts on, to the exact size
    answers = [answer]
    while answers[-1]["next_token"] is not None:
        answers.append(deployment.ask({"month": MONTH, "size": True, "next_token": answers[-1]["next_token"]}))
    assert answers[-1] == {"month": MONTH, "size": len(TIED), "next_token": None}
    assert [a["sizeAtLeast"] for a in answers[:-1]] == sorted({a["sizeAtLeast"] for a in answers[:-1]})


# ---------------------------------------------------------------- an entity's value (ZSCORE)


def test_a_score_is_the_entitys_value_or_not_on_this_board(dynamodb: Any) -> None:
    load_month(dynamodb, TIED, 4)
    deployment = Deployment(dynamodb, Layout(4))
    for song, count in TIED.items():
        assert deployment.ask({"month": MONTH, "songID": song, "score": True}) == {
            "month": MONTH,
            "songID": song,
            "downloadCount": count,
            "onBoard": True,
        }
    assert deployment.ask({"month": MONTH, "songID": "silence", "score": True}) == {
        "month": MONTH,
        "songID": "silence",
        "downloadCount": 0,
        "onBoard": False,
    }
    # one GetItem each, no Query
    assert (deployment.get_items, deployment.queries) == (len(TIED) + 1, 0)


def test_a_sum_of_zero_is_on_the_board(dynamodb: Any) -> None:
    load_boards(dynamodb, {MONTH: SUMS}, 1)
    deployment = Deployment(dynamodb, Layout(1), Boards(summed=True))
    answer = deployment.ask({"month": MONTH, "songID": "gamma", "score": True})
    assert (answer["downloadCount"], answer["onBoard"]) == ("0", True)
    assert deployment.ask({"month": MONTH, "songID": "delta", "score": True})["downloadCount"] == "-3.000001"


# ---------------------------------------------------------------- every board: periods and categories


DAY = "2018-01-15"
BOARDS_OF = {
    (("period", "day"), ("key", DAY)): DAY,
    (("period", "day"), ("key", DAY), ("category", "rock & roll")): f"{DAY}@rock%20%26%20roll",
    (("period", "all"),): "all",
    (("period", "week"), ("key", "2018-W03")): "2018-W03",
    (("month", MONTH), ("category", "pop")): f"{MONTH}@pop",
}


@pytest.mark.parametrize("named", list(BOARDS_OF), ids=[board for board in BOARDS_OF.values()])
def test_every_verb_reads_any_period_and_category(dynamodb: Any, named: tuple[tuple[str, str], ...]) -> None:
    # given boards of several periods and categories, each its own catalogue, in 3 leaderboard shards
    catalogues = {
        board: {f"song{n:02d}": 1 + (n * (index + 3)) % 7 for n in range(25)}
        for index, board in enumerate(BOARDS_OF.values())
    }
    load_boards(dynamodb, catalogues, 3)
    deployment = Deployment(dynamodb, Layout(3), Boards(PERIODS, categories=True))
    board = dict(named)
    catalogue = catalogues[BOARDS_OF[named]]
    # then each verb answers from that board only
    assert deployment.every_page({**board, "fromRank": 4, "toRank": 19, "limit": 6}) == ranked(catalogue, 4, 19)
    counted = deployment.every_page({**board, "minCount": 3, "maxCount": 5, "limit": 6})
    assert [(i["songID"], i["downloadCount"]) for i in counted] == [x for x in listing(catalogue) if 3 <= x[1] <= 5]
    assert deployment.ask({**board, "size": True})["size"] == len(catalogue)
    assert deployment.ask({**board, "songID": "song07", "score": True})["downloadCount"] == catalogue["song07"]
    assert list(deployment.ask({**board, "size": True}))[: len(board)] == list(board)


# ---------------------------------------------------------------- tokens and bad requests


def test_a_token_continues_only_the_request_it_was_issued_for(dynamodb: Any) -> None:
    load_month(dynamodb, TIED, 2)
    deployment = Deployment(dynamodb, Layout(2))
    page = deployment.ask({"month": MONTH, "limit": 2})["next_token"]
    ranks = deployment.ask({"month": MONTH, "fromRank": 3, "toRank": 9, "limit": 2})["next_token"]
    counts = deployment.ask({"month": MONTH, "minCount": 1, "maxCount": 3, "limit": 2})["next_token"]
    refused = [
        {"month": MONTH, "fromRank": 3, "toRank": 9, "next_token": page},
        {"month": MONTH, "limit": 2, "next_token": ranks},
        {"month": MONTH, "fromRank": 3, "toRank": 10, "next_token": ranks},
        {"month": MONTH, "fromRank": 4, "toRank": 9, "next_token": ranks},
        {"month": MONTH, "minCount": 1, "maxCount": 3, "next_token": ranks},
        {"month": MONTH, "minCount": 1, "maxCount": 4, "next_token": counts},
        {"month": MONTH, "minCount": 1, "next_token": counts},
        {"month": MONTH, "size": True, "next_token": counts},
        {"month": "2018-02", "fromRank": 3, "toRank": 9, "next_token": ranks},
    ]
    for event in refused:
        assert deployment.ask(event)["error"]["code"] == "InvalidRequest", event
    # the same range in another spelling is the same range
    assert "error" not in deployment.ask({"month": MONTH, "minCount": "1.0", "maxCount": "3", "next_token": counts})


@pytest.mark.parametrize(
    "event",
    [
        {"month": MONTH, "fromRank": 0},
        {"month": MONTH, "fromRank": -1},
        {"month": MONTH, "fromRank": True},
        {"month": MONTH, "fromRank": "5"},
        {"month": MONTH, "fromRank": 1.0},
        {"month": MONTH, "fromRank": 2**53},
        {"month": MONTH, "fromRank": 10, "toRank": 9},
        {"month": MONTH, "toRank": 0},
        {"month": MONTH, "fromRank": 1, "limit": 0},
        {"month": MONTH, "fromRank": 1, "songID": "song1"},
        {"month": MONTH, "fromRank": 1, "minCount": 3},
        {"month": MONTH, "fromRank": 1, "next_token": "x"},
        {"month": MONTH, "fromRank": 1, "around": 2},
        {"month": MONTH, "fromRank": 1, "last": 2},
        {"month": MONTH, "minCount": 1.5},
        {"month": MONTH, "minCount": "1e3"},
        {"month": MONTH, "minCount": " 1"},
        {"month": MONTH, "minCount": "1."},
        {"month": MONTH, "minCount": None},
        {"month": MONTH, "minCount": False},
        {"month": MONTH, "maxCount": 10**38},
        {"month": MONTH, "minCount": 5, "maxCount": 4},
        {"month": MONTH, "minCount": 1, "size": True},
        {"month": MONTH, "size": False},
        {"month": MONTH, "size": 1},
        {"month": MONTH, "size": True, "limit": 5},
        {"month": MONTH, "size": True, "songID": "song1"},
        {"month": MONTH, "score": True},
        {"month": MONTH, "score": False, "songID": "song1"},
        {"month": MONTH, "score": True, "songID": ""},
        {"month": MONTH, "score": True, "songID": "song1", "limit": 1},
        {"month": MONTH, "score": True, "songID": "song1", "size": True},
        {"month": "2018-13", "fromRank": 1},
        {"period": "fortnight", "size": True},
        {"month": MONTH, "category": "rock", "size": True},
        {"period": "day", "key": DAY, "size": True},
    ],
)
def test_malformed_verbs_are_invalid_requests(dynamodb: Any, event: dict[str, Any]) -> None:
    answer = Deployment(dynamodb, Layout(2)).ask(event)
    assert answer["error"]["code"] == "InvalidRequest", answer


FIELD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(["1.5", "-0", "0.000001", "99999999999999999999999999999999999999.9", "song1", "x" * 3000]),
)
EVENTS = st.dictionaries(
    st.sampled_from(["fromRank", "toRank", "minCount", "maxCount", "size", "score", "songID", "limit", "next_token"]),
    FIELD_VALUES,
    max_size=4,
).map(lambda event: {"month": MONTH, **event})


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(event=EVENTS)
def test_any_verb_however_malformed_gets_an_answer(aws: None, event: dict[str, Any]) -> None:
    dynamodb = create_table(fresh=True)
    load_month(dynamodb, {"song1": 3, "song2": 2, "song3": 2}, 2)
    answer = Deployment(dynamodb, Layout(2)).ask(event)
    assert "error" not in answer or answer["error"]["code"] == "InvalidRequest", answer


def test_the_verbs_read_the_index_as_its_key_condition_allows(dynamodb: Any) -> None:
    # given the index's layout of orders: the count scaled, and a tie-breaker below one count
    load_month(dynamodb, TIED, 1)
    order = order_of(3, "international-hit-0")
    assert leaderboard_partition(MONTH, "international-hit-0", 1) == MONTH
    # then a range of one count holds every song of that count, whatever its tie-breaker
    request = count_range.parse({"minCount": 3, "maxCount": 3}, Board.month(MONTH), "songID", Layout(1))
    low, high = request.orders(summed=False)
    assert low <= order <= high
    assert (low, high) == (3 * 10**26, 4 * 10**26 - 1)
    assert index_reads.order_condition(("<", low), low) is index_reads.NOTHING
