"""The Redis verbs against an independent oracle: ranges by rank, by count, sizes and scores checked against an
independent oracle (sort every aggregate by value desc, id asc by UTF-8 bytes, and slice), on distributions the
skip's "expected share plus a margin" does not expect: every top entity in one shard, skewed counts, ties across
shards, ids sharing their 10-byte (8-byte for sums) tie-breaker, sums with decimals, zeros and negatives, ranges past
the end, tokens resumed across pages and request budgets."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import rank_range
from boards import Boards
from index_reads import Layout
from leaderboard_core.index_layout import leaderboard_shard
from tests.unit.conftest import create_table
from tests.unit.query.aggregates_on_moto import MONTH, load_boards
from tests.unit.query.test_query_verbs import Deployment

pytestmark = pytest.mark.slow  # adversarial boards at length against the oracle: CI runs them, make check does not

SETTINGS = settings(
    max_examples=int(__import__("os").environ.get("R29_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def oracle(values: dict[str, Any]) -> list[tuple[str, Any]]:
    return sorted(values.items(), key=lambda item: (-Decimal(item[1]), item[0].encode()))


def ids_in_shard(shard: int, shards: int, stem: str, n: int) -> list[str]:
    out, i = [], 0
    while len(out) < n:
        candidate = f"{stem}{i}"
        if leaderboard_shard(candidate, shards) == shard:
            out.append(candidate)
        i += 1
    return out


PREFIX_IDS = ["aaaaaaaaaa", "aaaaaaaaaa\x00", "aaaaaaaaaab", "aaaaaaaaaa-\u00e9", "aaaaaaaaaa\U0001f600", "aaaaaaaa"]
"""Ids sharing their first 10 bytes (8 for sums), a NUL, a shorter one padded as NUL bytes, non-ASCII."""


@st.composite
def boards(draw: Any) -> tuple[dict[str, Any], int, bool]:
    shards = draw(st.sampled_from([1, 2, 3, 5, 8]))
    summed = draw(st.booleans())
    skewed_shard = draw(st.integers(0, shards - 1))
    top = ids_in_shard(skewed_shard, shards, draw(st.sampled_from(["top", "t\u00f6p-", "international-hit-"])), 25)
    rest = [f"song{n:03d}" for n in range(40)] + PREFIX_IDS
    n_top = draw(st.integers(0, 25))
    n_rest = draw(st.integers(0, len(rest)))
    if summed:
        low_values = st.sampled_from(
            [Decimal("0"), Decimal("-3"), Decimal("-3.000001"), Decimal("2.5"), Decimal("2.500001"), Decimal("7")]
        )
        high_values = st.sampled_from([Decimal("1000"), Decimal("1000.000001"), Decimal("999999.999999")])
    else:
        low_values = st.integers(0, 4)
        high_values = st.integers(100, 102)
    values: dict[str, Any] = {}
    for entity in top[:n_top]:
        values[entity] = draw(high_values)
    for entity in draw(st.permutations(rest))[:n_rest]:
        values[entity] = draw(low_values)
    return values, shards, summed


def shown(value: Any, summed: bool) -> Any:
    if not summed:
        return value
    number = Decimal(value)
    return str(int(number)) if number == number.to_integral_value() else format(number.normalize(), "f")


def every_page(deployment: Deployment, event: dict[str, Any], allow_unavailable: bool) -> list[dict[str, Any]]:
    """Following next_token to the end; with an artificially small request budget, a request that could not pass one
    entry of a skip round (the contract's Unavailable) discards the example rather than failing it."""
    items: list[dict[str, Any]] = []
    request = dict(event)
    for _ in range(10_000):
        answer = deployment.ask(request)
        if allow_unavailable and answer.get("error", {}).get("code") == "Unavailable":
            assume(False)
        assert "error" not in answer, (request, answer)
        items += answer["items"]
        if answer["next_token"] is None:
            return items
        request = {**event, "next_token": answer["next_token"]}
    raise AssertionError("pagination did not end")


@SETTINGS
@given(
    board=boards(),
    first=st.integers(1, 80),
    span=st.one_of(st.none(), st.integers(0, 40)),
    limit=st.sampled_from([1, 2, 7, 1000]),
    step=st.sampled_from([1, 3, rank_range.SKIP_STEP]),
    budget=st.sampled_from([None, 6, 10]),
)
def test_rank_range_is_the_oracles_slice_on_adversarial_boards(
    aws: None, monkeypatch: pytest.MonkeyPatch, board: Any, first: int, span: Any, limit: int, step: int, budget: Any
) -> None:
    values, shards, summed = board
    dynamodb = create_table(fresh=True)
    load_boards(dynamodb, {MONTH: values}, shards)
    # set by hand: hypothesis runs every example in one function-scoped monkeypatch
    saved = (rank_range.SKIP_STEP, rank_range.request_budget)
    rank_range.SKIP_STEP = step
    if budget is not None:  # per partition: enough for one page (two limited, two tie-group Queries), short of skips
        rank_range.request_budget = lambda partitions: budget * partitions
    try:
        check_rank_range(dynamodb, values, shards, summed, first, span, limit, budget)
    finally:
        rank_range.SKIP_STEP, rank_range.request_budget = saved


def check_rank_range(
    dynamodb: Any, values: dict[str, Any], shards: int, summed: bool, first: int, span: Any, limit: int, budget: Any
) -> None:
    deployment = Deployment(dynamodb, Layout(shards), Boards(summed=summed))
    last = None if span is None else first + span
    event: dict[str, Any] = {"month": MONTH, "fromRank": first, "limit": limit}
    if last is not None:
        event["toRank"] = last
    items = every_page(deployment, event, allow_unavailable=budget is not None)
    expected = [
        {"songID": song, "downloadCount": shown(value, summed), "rank": place}
        for place, (song, value) in enumerate(oracle(values), start=1)
        if place >= first and (last is None or place <= last)
    ]
    assert items == expected
    # consistent with the page listing and with the rank of each song
    if not budget:
        listed = deployment.every_page({"month": MONTH, "limit": limit})
        assert [i["songID"] for i in listed][first - 1 : last] == [i["songID"] for i in items]
        for item in items[:3]:
            rank = deployment.ask({"month": MONTH, "songID": item["songID"]})
            assert rank["rank"] == item["rank"], (rank, item)


@SETTINGS
@given(
    board=boards(),
    low=st.one_of(
        st.none(),
        st.sampled_from([-4, "-3.000001", "-3.0000005", 0, "0.0", "2.5", "2.5000001", 3, 7, 100, "1000.000001"]),
    ),
    high=st.one_of(
        st.none(), st.sampled_from([-3, "-3.000001", 0, "2.5", "2.500001", 4, "7.0", 101, "1000", "999999.999999"])
    ),
    limit=st.sampled_from([1, 3, 1000]),
)
def test_count_range_is_the_oracles_filter(aws: None, board: Any, low: Any, high: Any, limit: int) -> None:
    values, shards, summed = board
    if low is not None and high is not None and Decimal(low) > Decimal(high):
        return
    dynamodb = create_table(fresh=True)
    load_boards(dynamodb, {MONTH: values}, shards)
    deployment = Deployment(dynamodb, Layout(shards), Boards(summed=summed))
    event: dict[str, Any] = {"month": MONTH, "limit": limit}
    if low is not None:
        event["minCount"] = low
    if high is not None:
        event["maxCount"] = high
    items = deployment.every_page(event)
    lo = Decimal(-(10**40)) if low is None else Decimal(low)
    hi = Decimal(10**40) if high is None else Decimal(high)
    assert [(i["songID"], i["downloadCount"]) for i in items] == [
        (song, shown(value, summed)) for song, value in oracle(values) if lo <= Decimal(value) <= hi
    ]
    assert deployment.ask({"month": MONTH, "size": True})["size"] == len(values)


def _skewed() -> dict[str, Any]:
    top = ids_in_shard(3, 8, "hot-", 600)
    values: dict[str, Any] = {entity: 1000 + n % 37 for n, entity in enumerate(top)}
    values |= {f"cold-{n:04d}": 1 + n % 500 for n in range(600)}
    return values


def _one_tie_group() -> dict[str, Any]:
    return {f"international-hit-{n}": 7 for n in range(400)} | {f"x{n}": 9 for n in range(5)}


@pytest.mark.parametrize(
    ("name", "shards", "first", "last", "limit"),
    [
        ("skewed", 8, 590, 610, 7),
        ("skewed", 8, 600, 601, 1),
        ("skewed", 8, 1, 5, 1),
        ("skewed", 8, 1199, 1300, 1000),
        ("skewed", 8, 1201, None, 3),
        ("tied", 4, 150, 160, 3),
        ("tied", 4, 399, 405, 1),
        ("tied", 4, 6, 6, 1),
    ],
)
def test_rank_range_on_large_skewed_and_tied_boards(
    dynamodb: Any, name: str, shards: int, first: int, last: Any, limit: int
) -> None:
    values = _skewed() if name == "skewed" else _one_tie_group()
    load_boards(dynamodb, {MONTH: values}, shards)
    deployment = Deployment(dynamodb, Layout(shards))
    event: dict[str, Any] = {"month": MONTH, "fromRank": first, "limit": limit}
    if last is not None:
        event["toRank"] = last
    items = deployment.every_page(event)
    assert items == [
        {"songID": song, "downloadCount": value, "rank": place}
        for place, (song, value) in enumerate(oracle(values), start=1)
        if place >= first and (last is None or place <= last)
    ]
    assert deployment.ask({"month": MONTH, "size": True})["size"] == len(values)


def test_tokens_replayed_in_another_kind_or_range_are_refused_and_scores_are_per_board(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {f"song{n:02d}": 1 + n % 3 for n in range(20)}
    load_boards(dynamodb, {MONTH: values, "2018-02": {"only-feb": 4}}, 2)
    monkeypatch.setattr(rank_range, "SKIP_STEP", 2)
    monkeypatch.setattr(rank_range, "request_budget", lambda partitions: 6)
    deployment = Deployment(dynamodb, Layout(2))
    skipping = deployment.ask({"month": MONTH, "fromRank": 15})
    assert skipping["items"] == [], skipping
    assert skipping["next_token"], skipping  # a token issued mid-skip
    size = board_size_token(deployment, monkeypatch)
    counts = deployment.ask({"month": MONTH, "minCount": 1, "limit": 1})["next_token"]
    page = deployment.ask({"month": MONTH, "limit": 1})["next_token"]
    for event in (
        {"month": MONTH, "fromRank": 15, "toRank": 20, "next_token": skipping["next_token"]},
        {"month": MONTH, "fromRank": 14, "next_token": skipping["next_token"]},
        {"month": MONTH, "limit": 5, "next_token": skipping["next_token"]},
        {"month": MONTH, "size": True, "next_token": skipping["next_token"]},
        {"month": MONTH, "minCount": 1, "next_token": skipping["next_token"]},
        {"month": MONTH, "fromRank": 15, "next_token": size},
        {"month": MONTH, "minCount": 1, "next_token": size},
        {"month": MONTH, "limit": 1, "next_token": size},
        {"month": MONTH, "size": True, "next_token": counts},
        {"month": MONTH, "fromRank": 1, "next_token": counts},
        {"month": MONTH, "minCount": 1, "maxCount": 3, "next_token": counts},
        {"month": MONTH, "size": True, "next_token": page},
        {"month": MONTH, "fromRank": 2, "next_token": page},
        {"month": MONTH, "songID": "song01", "score": True, "next_token": page},
    ):
        assert deployment.ask(event)["error"]["code"] == "InvalidRequest", event
    # the skip's token resumed with another limit is the same range
    resumed = deployment.every_page({"month": MONTH, "fromRank": 15, "limit": 2, "next_token": skipping["next_token"]})
    assert [i["rank"] for i in resumed][-1] == 20
    assert resumed[0]["rank"] <= 15
    assert deployment.ask({"month": MONTH, "songID": "only-feb", "score": True})["onBoard"] is False
    assert deployment.ask({"month": "2018-02", "songID": "only-feb", "score": True})["downloadCount"] == 4


def board_size_token(deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> str:
    import board_size

    monkeypatch.setattr(board_size, "COUNT_PAGE_LIMIT", 2)
    monkeypatch.setattr(board_size, "partition_budget", lambda partitions: 1)
    answer = deployment.ask({"month": MONTH, "size": True})
    monkeypatch.undo()
    assert answer["size"] is None, answer
    assert answer["next_token"], answer
    return str(answer["next_token"])
