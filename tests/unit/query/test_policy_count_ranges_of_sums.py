"""A range by count under a rank policy on a summing deployment: the bounds are decimals (finer than a sum's six
places too), the values exact sums, negative ones included; each item ranks on the whole board."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boards import Boards
from index_reads import Layout
from tests.property_examples import examples
from tests.unit.conftest import create_table
from tests.unit.query.aggregates_on_moto import MONTH, load_boards
from tests.unit.query.test_query_verbs import Deployment
from tests.unit.query.test_rank_policies_during_a_layout_change import as_items, expected_ranks

IDS = [f"song{n:02d}" for n in range(30)] + [f"international-hit-{n}" for n in range(4)]
SUMS = [Decimal(text) for text in ("-2.5", "-0.000001", "0.000001", "1", "1.5", "1.500001", "7")]
BOUNDS = ["-3", "-2.5", "-0.0000005", "0", "0.000001", "1", "1.5", "1.5000005", "1.500001", "6.9999999", "7", "8"]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.dictionaries(st.sampled_from(IDS), st.sampled_from(SUMS), min_size=1),
    shards=st.sampled_from([1, 4]),
    policy=st.sampled_from(["ordinal", "competition", "dense"]),
    low=st.one_of(st.none(), st.sampled_from(BOUNDS)),
    high=st.one_of(st.none(), st.sampled_from(BOUNDS)),
    limit=st.integers(1, 5),
)
def test_a_count_range_of_sums_under_a_policy_ranks_each_item_on_the_whole_board(
    aws: None,
    values: dict[str, Decimal],
    shards: int,
    policy: str,
    low: str | None,
    high: str | None,
    limit: int,
) -> None:
    # given a summing board, and bounds in order
    if low is not None and high is not None and Decimal(low) > Decimal(high):
        low, high = high, low
    dynamodb = create_table(fresh=True)
    load_boards(dynamodb, {MONTH: values}, shards)
    deployment = Deployment(dynamodb, Layout(shards), Boards(summed=True))
    event: dict[str, Any] = {"month": MONTH, "limit": limit, "rankPolicy": policy}
    event |= {"minCount": low} if low is not None else {}
    event |= {"maxCount": high} if high is not None else {}
    # when the entries between the two values are read page by page
    listed = deployment.every_page(event)
    # then they are the oracle's, each with its rank on the whole board
    within = [
        entry
        for entry in expected_ranks(values, policy)
        if (low is None or entry[1] >= Decimal(low)) and (high is None or entry[1] <= Decimal(high))
    ]
    assert listed == as_items(within)
