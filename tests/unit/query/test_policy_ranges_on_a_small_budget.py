"""A range by rank under `competition` or `dense` whose skip runs out of the request's read budget again and again:
following its tokens still lists exactly the entries whose rank is within the range, on boards of large tie groups."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import rank_range
from boards import Boards
from index_reads import Layout
from tests.property_examples import examples
from tests.unit.conftest import create_table
from tests.unit.query.aggregates_on_moto import MONTH, load_boards
from tests.unit.query.test_query_verbs import Deployment
from tests.unit.query.test_rank_policies_during_a_layout_change import as_items, expected_ranks

IDS = [f"song{n:02d}" for n in range(60)]


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.dictionaries(st.sampled_from(IDS), st.integers(1, 4), min_size=1, max_size=60),
    shards=st.sampled_from([1, 2, 4]),
    policy=st.sampled_from(["competition", "dense"]),
    budget=st.integers(4, 12),
    step=st.integers(1, 6),
    first=st.integers(1, 30),
    span=st.integers(0, 20),
    limit=st.integers(1, 7),
)
def test_a_policy_range_on_a_small_budget_is_exact_once_its_tokens_are_followed(
    aws: None,
    monkeypatch: pytest.MonkeyPatch,
    values: dict[str, int],
    shards: int,
    policy: str,
    budget: int,
    step: int,
    first: int,
    span: int,
    limit: int,
) -> None:
    # given a board of large tie groups, a request budget of a few Queries and a skip of a few entries a round
    dynamodb = create_table(fresh=True)
    load_boards(dynamodb, {MONTH: values}, shards)
    monkeypatch.setattr(rank_range, "request_budget", lambda partitions: max(budget, 2 * partitions))
    monkeypatch.setattr(rank_range, "SKIP_STEP", step)
    deployment = Deployment(dynamodb, Layout(shards), Boards())
    event = {"month": MONTH, "fromRank": first, "toRank": first + span, "limit": limit, "rankPolicy": policy}
    # when the range is read, following every token
    items: list[dict[str, Any]] = []
    request = dict(event)
    for _ in range(500):
        answer = deployment.ask(request)
        assume("error" not in answer)  # a budget that cannot pass one entry is Unavailable, as documented
        items += answer["items"]
        if answer["next_token"] is None:
            break
        request = {**event, "next_token": answer["next_token"]}
    else:
        raise AssertionError("the range's tokens never ended")
    # then it is every entry ranked within the range under the policy, with its rank
    assert items == as_items([e for e in expected_ranks(values, policy) if first <= e[2] <= first + span])
