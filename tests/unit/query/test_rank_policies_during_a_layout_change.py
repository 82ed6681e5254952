"""Rank policies while a board's leaderboard shards change: every aggregate sits in its shard of the new layout or
of the previous one (the aggregator moves them as it writes), and the query reads both. Ranks are checked against
an oracle computed here from the stored values alone."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boards import Boards
from index_reads import Layout
from leaderboard_core.index_layout import leaderboard_partition, order_of
from tests.property_examples import examples
from tests.unit.conftest import create_table
from tests.unit.query.aggregates_on_moto import MONTH, put_items
from tests.unit.query.test_query_verbs import Deployment

ON_MOTO = settings(
    max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
POLICIES = ("ordinal", "competition", "dense")
IDS = [f"song{n:02d}" for n in range(30)]


def expected_ranks(values: dict[str, Any], policy: str) -> list[tuple[str, Any, int]]:
    listing = sorted(values.items(), key=lambda item: (-item[1], item[0].encode()))
    out = []
    for place, (entity, value) in enumerate(listing, start=1):
        higher = [other for other in values.values() if other > value]
        rank = {"ordinal": place, "competition": len(higher) + 1, "dense": len(set(higher)) + 1}[policy]
        out.append((entity, value, rank))
    return out


def shown(value: Any) -> Any:
    if isinstance(value, int):
        return value
    return str(int(value)) if value == value.to_integral_value() else format(value.normalize(), "f")


def as_items(entries: list[tuple[str, Any, int]]) -> list[dict[str, Any]]:
    return [{"songID": entity, "downloadCount": shown(value), "rank": rank} for entity, value, rank in entries]


def mid_change(values: dict[str, Any], moved: set[str], shards: int, previous: int) -> Deployment:
    """The board with the moved entities in their new shard, the rest still in their previous one."""
    summed = any(isinstance(value, Decimal) for value in values.values())
    dynamodb = create_table(fresh=True)
    put_items(
        dynamodb,
        [
            {
                "songID": {"S": entity},
                "SK": {"S": MONTH},
                "Month": {"S": leaderboard_partition(MONTH, entity, shards if entity in moved else previous)},
                "DownloadCount": {"N": str(value)},
                "LeaderboardOrder": {"N": str(order_of(value, entity, summed))},
            }
            for entity, value in values.items()
        ],
    )
    return Deployment(dynamodb, Layout(shards, previous), Boards(summed=summed))


counts = st.dictionaries(st.sampled_from(IDS), st.integers(1, 5), min_size=1, max_size=30)
sums = st.dictionaries(
    st.sampled_from(IDS), st.sampled_from([Decimal(t) for t in ("-1.5", "0.5", "2", "2.000001")]), min_size=1
)
layouts = st.sampled_from([(4, 1), (1, 4), (4, 2), (2, 4)])


@ON_MOTO
@given(
    values=st.one_of(counts, sums),
    layout=layouts,
    policy=st.sampled_from(POLICIES),
    limit=st.integers(1, 31),
    data=st.data(),
)
def test_every_page_ranks_exactly_while_the_shards_change(
    aws: None, values: dict[str, Any], layout: tuple[int, int], policy: str, limit: int, data: st.DataObject
) -> None:
    # given a board half moved to a new shard layout
    moved = set(data.draw(st.lists(st.sampled_from(sorted(values)), unique=True)))
    deployment = mid_change(values, moved, *layout)
    # when it is listed page by page under a rank policy
    listed = deployment.every_page({"month": MONTH, "limit": limit, "rankPolicy": policy})
    # then every item has the oracle's rank
    assert listed == as_items(expected_ranks(values, policy))


@ON_MOTO
@given(
    values=st.one_of(counts, sums),
    layout=layouts,
    policy=st.sampled_from(POLICIES),
    limit=st.integers(1, 31),
    first=st.integers(1, 8),
    span=st.integers(0, 6),
    data=st.data(),
)
def test_a_range_by_rank_and_each_rank_are_exact_while_the_shards_change(
    aws: None,
    values: dict[str, Any],
    layout: tuple[int, int],
    policy: str,
    limit: int,
    first: int,
    span: int,
    data: st.DataObject,
) -> None:
    # given a board half moved to a new shard layout
    moved = set(data.draw(st.lists(st.sampled_from(sorted(values)), unique=True)))
    deployment = mid_change(values, moved, *layout)
    ranked = expected_ranks(values, policy)
    # when a range by rank is read, then it is the entries whose rank is within it, with their ranks
    event = {"month": MONTH, "fromRank": first, "toRank": first + span, "limit": limit, "rankPolicy": policy}
    within = [entry for entry in ranked if first <= entry[2] <= first + span]
    assert deployment.every_page(event) == as_items(within)
    # and each song's own rank with one neighbour each side is the oracle's
    for place, (song, value, rank) in enumerate(ranked):
        answer = deployment.ask({"month": MONTH, "songID": song, "around": 1, "rankPolicy": policy})
        assert (answer["rank"], answer["downloadCount"]) == (rank, shown(value)), song
        assert answer["items"] == as_items(ranked[max(0, place - 1) : place + 2]), song


@ON_MOTO
@given(values=counts, layout=layouts, policy=st.sampled_from(POLICIES), low=st.integers(0, 5), data=st.data())
def test_a_range_by_count_ranks_on_the_whole_board_while_the_shards_change(
    aws: None, values: dict[str, int], layout: tuple[int, int], policy: str, low: int, data: st.DataObject
) -> None:
    moved = set(data.draw(st.lists(st.sampled_from(sorted(values)), unique=True)))
    deployment = mid_change(values, moved, *layout)
    listed = deployment.every_page(
        {"month": MONTH, "minCount": low, "maxCount": low + 1, "limit": 3, "rankPolicy": policy}
    )
    assert listed == as_items([e for e in expected_ranks(values, policy) if low <= e[1] <= low + 1])
