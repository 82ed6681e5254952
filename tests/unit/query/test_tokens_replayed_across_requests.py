"""A next_token continues only the request it was issued for: every token of a page, a range by rank, a range by count
and a size, under each rank policy or none, is refused by every other of those requests on the same board."""

from __future__ import annotations

from typing import Any

from boards import Boards
from index_reads import Layout
from tests.unit.conftest import create_table
from tests.unit.query.aggregates_on_moto import MONTH, load_boards
from tests.unit.query.test_query_verbs import Deployment

KINDS: dict[str, dict[str, Any]] = {
    "page": {"limit": 1},
    "range by rank": {"fromRank": 1, "toRank": 6, "limit": 1},
    "range by count": {"minCount": 1, "limit": 1},
}
POLICIES = (None, "ordinal", "competition", "dense")


def requests() -> dict[tuple[str, str | None], dict[str, Any]]:
    asked = {
        (kind, policy): {"month": MONTH, **fields} | ({"rankPolicy": policy} if policy else {})
        for kind, fields in KINDS.items()
        for policy in POLICIES
    }
    return asked | {("size", None): {"month": MONTH, "size": True}}


ORDINAL_RANGES = {("range by rank", None), ("range by rank", "ordinal")}
"""A range by rank under `ordinal` and under no policy: the same ranks, the same token (rank_range.py's plain path)."""


def accepted_elsewhere() -> list[tuple[tuple[str, str | None], tuple[str, str | None]]]:
    """(source, target): a request that accepted the first-answer token of another request on the same board."""
    dynamodb = create_table(fresh=True)
    load_boards(dynamodb, {MONTH: {f"s{n}": n % 3 + 1 for n in range(8)}}, 4)
    deployment = Deployment(dynamodb, Layout(4), Boards())
    tokens = {}
    for name, event in requests().items():
        if name[0] != "size":
            answer = deployment.ask(event)
            assert answer.get("next_token"), (name, answer)
            tokens[name] = answer["next_token"]
    accepted = []
    for source, token in tokens.items():
        for target, event in requests().items():
            if target != source and "error" not in deployment.ask({**event, "next_token": token}):
                accepted.append((source, target))
    return accepted


def test_no_token_continues_another_kind_of_request_or_another_policy(aws: None) -> None:
    # given the token of each request's first answer on a board of ties in 4 shards, when each is given to every other
    # request, then none accepts it (but for a range by rank under ordinal and under none, the same ranks)
    assert [pair for pair in accepted_elsewhere() if set(pair) != ORDINAL_RANGES] == []


def test_a_range_token_of_no_policy_is_refused_under_ordinal_as_a_pages_is(aws: None) -> None:
    assert [pair for pair in accepted_elsewhere() if set(pair) == ORDINAL_RANGES] == []
