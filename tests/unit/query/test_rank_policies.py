"""Rank policies (ordinal, competition, dense) and `among` over the query function, against an oracle computed here
from the stored values: pages, ranks, around-me, ranges by rank and by count, on 1 and 4 leaderboard shards, every
page size, counts and sums, boards full of ties."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import among
import rank_range
from boards import Boards
from index_reads import Layout, Position
from leaderboard_core.index_layout import order_of
from page_tokens import Scope, encode_token
from tests.property_examples import examples
from tests.unit.conftest import create_table
from tests.unit.query.aggregates_on_moto import MONTH, load_boards
from tests.unit.query.test_query_verbs import Deployment
from tests.unit.terraform.test_iam_policies import TERRAFORM_MODULE, granting, policy_documents, requested_attributes

ON_MOTO = settings(
    max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
POLICIES = ("ordinal", "competition", "dense")
IDS = [f"song{n:02d}" for n in range(40)] + [f"international-hit-{n}" for n in range(5)]
"""Songs, five of them sharing their first 10 bytes (equal in the index's own sort key when their values are)."""


class BatchingDeployment(Deployment):
    """The deployment of the verbs' tests, with BatchGetItem counted too (among)."""

    batch_gets = 0

    def batch_get_item(self, **parameters: Any) -> Any:
        self.batch_gets += 1
        return self.dynamodb.batch_get_item(**parameters)


def oracle(values: dict[str, Any], policy: str) -> list[tuple[str, Any, int]]:
    """The board's listing with each entry's rank under the policy, from the values alone."""
    listing = sorted(values.items(), key=lambda item: (-item[1], item[0].encode()))
    distinct = sorted(set(values.values()), reverse=True)
    ranks = {
        "ordinal": lambda place, value: place,
        "competition": lambda place, value: 1 + sum(1 for other in values.values() if other > value),
        "dense": lambda place, value: 1 + distinct.index(value),
    }[policy]
    return [(entity, value, ranks(place, value)) for place, (entity, value) in enumerate(listing, start=1)]


def shown(value: Any, summed: bool) -> Any:
    """A value as the answer shows it: a count an integer, a sum its exact decimal text."""
    if not summed:
        return value
    return str(int(value)) if value == value.to_integral_value() else format(value.normalize(), "f")


def items(entries: list[tuple[str, Any, int]], summed: bool) -> list[dict[str, Any]]:
    return [{"songID": entity, "downloadCount": shown(value, summed), "rank": rank} for entity, value, rank in entries]


def deployed(values: dict[str, Any], shards: int, summed: bool) -> BatchingDeployment:
    dynamodb = create_table(fresh=True)
    load_boards(dynamodb, {MONTH: values}, shards)
    return BatchingDeployment(dynamodb, Layout(shards), Boards(summed=summed))


counts = st.dictionaries(st.sampled_from(IDS), st.integers(1, 6), min_size=1, max_size=45)
sums = st.dictionaries(
    st.sampled_from(IDS), st.sampled_from([Decimal(text) for text in ("-2.5", "0.000001", "1", "1.5", "7")]), min_size=1
)
boards = st.one_of(st.tuples(counts, st.just(False)), st.tuples(sums, st.just(True)))


@ON_MOTO
@given(board=boards, shards=st.sampled_from([1, 4]), limit=st.integers(1, 46), policy=st.sampled_from(POLICIES))
def test_every_page_carries_each_items_rank_under_the_policy(
    aws: None, board: tuple[dict[str, Any], bool], shards: int, limit: int, policy: str
) -> None:
    # given a board of many ties, in 1 or 4 leaderboard shards
    values, summed = board
    deployment = deployed(values, shards, summed)
    # when it is listed a page of `limit` at a time under a rank policy
    listed = deployment.every_page({"month": MONTH, "limit": limit, "rankPolicy": policy})
    # then every item carries its rank under the policy, on every page
    assert listed == items(oracle(values, policy), summed)


@ON_MOTO
@given(
    board=boards,
    shards=st.sampled_from([1, 4]),
    limit=st.integers(1, 46),
    policy=st.sampled_from(POLICIES),
    first=st.integers(1, 12),
    span=st.one_of(st.none(), st.integers(0, 8)),
    step=st.sampled_from([1, 3, rank_range.SKIP_STEP]),
)
def test_a_range_by_rank_under_a_policy_is_the_entries_whose_rank_is_within_it(
    aws: None,
    monkeypatch: pytest.MonkeyPatch,
    board: tuple[dict[str, Any], bool],
    shards: int,
    limit: int,
    policy: str,
    first: int,
    span: int | None,
    step: int,
) -> None:
    # given a board of many ties, and a skip of at most `step` entries a round
    values, summed = board
    deployment = deployed(values, shards, summed)
    monkeypatch.setattr(rank_range, "SKIP_STEP", step)
    last = None if span is None else first + span
    event: dict[str, Any] = {"month": MONTH, "fromRank": first, "limit": limit, "rankPolicy": policy}
    if last is not None:
        event["toRank"] = last
    # when the range is read page by page
    listed = deployment.every_page(event)
    # then it is every entry whose rank under the policy is from fromRank to toRank, with that rank
    expected = [entry for entry in oracle(values, policy) if first <= entry[2] and (last is None or entry[2] <= last)]
    assert listed == items(expected, summed)


@ON_MOTO
@given(
    board=counts,
    shards=st.sampled_from([1, 4]),
    limit=st.integers(1, 46),
    policy=st.sampled_from(POLICIES),
    low=st.one_of(st.none(), st.integers(0, 7)),
    high=st.one_of(st.none(), st.integers(0, 7)),
)
def test_a_range_by_count_under_a_policy_ranks_each_item_on_the_whole_board(
    aws: None, board: dict[str, int], shards: int, limit: int, policy: str, low: int | None, high: int | None
) -> None:
    # given a board of many ties
    deployment = deployed(board, shards, False)
    event: dict[str, Any] = {"month": MONTH, "limit": limit, "rankPolicy": policy}
    if low is not None:
        event["minCount"] = low
    if high is not None:
        event["maxCount"] = high if low is None else max(low, high)
    # when the entries between two counts are read page by page
    listed = deployment.every_page(event)
    # then they are those of the listing, each with its rank on the whole board
    within = [
        entry
        for entry in oracle(board, policy)
        if ("minCount" not in event or entry[1] >= event["minCount"])
        and ("maxCount" not in event or entry[1] <= event["maxCount"])
    ]
    assert listed == items(within, False)


@ON_MOTO
@given(
    board=boards,
    shards=st.sampled_from([1, 4]),
    policy=st.sampled_from(POLICIES),
    around=st.integers(0, 6),
)
def test_a_rank_and_its_neighbours_under_a_policy_are_the_oracles(
    aws: None, board: tuple[dict[str, Any], bool], shards: int, policy: str, around: int
) -> None:
    # given a board of many ties
    values, summed = board
    deployment = deployed(values, shards, summed)
    ranked = oracle(values, policy)
    for place, (song, value, rank) in enumerate(ranked):
        # when each song's rank is asked under the policy, with `around` neighbours each side
        answer = deployment.ask({"month": MONTH, "songID": song, "around": around, "rankPolicy": policy})
        # then its rank, and every neighbour's, is the oracle's
        assert (answer["rank"], answer["downloadCount"]) == (rank, shown(value, summed)), song
        assert answer["items"] == items(ranked[max(0, place - around) : place + around + 1], summed), song
    # and without neighbours, the same rank
    song, _, rank = ranked[-1]
    alone = deployment.ask({"month": MONTH, "songID": song, "rankPolicy": policy})
    assert alone["rank"] == rank
    assert "items" not in alone


@ON_MOTO
@given(
    board=boards,
    shards=st.sampled_from([1, 4]),
    policy=st.sampled_from(POLICIES),
    data=st.data(),
)
def test_among_ranks_a_set_within_itself_from_one_batch_read(
    aws: None, board: tuple[dict[str, Any], bool], shards: int, policy: str, data: st.DataObject
) -> None:
    # given a board of many ties, and a set of songs, some not on it
    values, summed = board
    deployment = deployed(values, shards, summed)
    friends = data.draw(st.lists(st.sampled_from([*IDS, "silence", "quiet"]), min_size=1, max_size=20, unique=True))
    # when the set is ranked among itself
    answer = deployment.ask({"month": MONTH, "among": friends, "rankPolicy": policy})
    # then each friend has its value (0 off the board) and its rank within the set, read by one BatchGetItem
    zero = Decimal(0) if summed else 0
    expected = oracle({friend: values.get(friend, zero) for friend in friends}, policy)
    assert answer == {"month": MONTH, "items": items(expected, summed)}
    assert (deployment.batch_gets, deployment.queries, deployment.get_items) == (1, 0, 0)


def test_ranks_of_a_tied_board_are_the_textbook_ones(dynamodb: Any) -> None:
    # given four songs: one of 9 downloads, two of 5, one of 2
    load_boards(dynamodb, {MONTH: {"a": 9, "b": 5, "c": 5, "d": 2}}, 1)
    deployment = BatchingDeployment(dynamodb, Layout(1))
    # then ordinal is 1, 2, 3, 4, competition 1, 2, 2, 4 and dense 1, 2, 2, 3
    for policy, ranks in (("ordinal", [1, 2, 3, 4]), ("competition", [1, 2, 2, 4]), ("dense", [1, 2, 2, 3])):
        answer = deployment.ask({"month": MONTH, "limit": 10, "rankPolicy": policy})
        assert [item["rank"] for item in answer["items"]] == ranks
    # and without a policy a page is as it was: no rank
    assert "rank" not in deployment.ask({"month": MONTH})["items"][0]


def test_a_competition_range_holds_a_tie_group_whole_or_not_at_all(dynamodb: Any) -> None:
    # given ranks 1, 2, 2, 2, 5
    load_boards(dynamodb, {MONTH: {"a": 9, "b": 5, "c": 5, "d": 5, "e": 1}}, 4)
    deployment = BatchingDeployment(dynamodb, Layout(4))
    # when ranks 3 to 5 and 2 to 2 are asked under competition
    three_to_five = deployment.every_page({"month": MONTH, "fromRank": 3, "toRank": 5, "rankPolicy": "competition"})
    two = deployment.every_page({"month": MONTH, "fromRank": 2, "toRank": 2, "rankPolicy": "competition", "limit": 1})
    # then the first is e alone (no entry ranks 3 or 4), the second the three songs ranked 2
    assert [item["songID"] for item in three_to_five] == ["e"]
    assert [(item["songID"], item["rank"]) for item in two] == [("b", 2), ("c", 2), ("d", 2)]


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"rankPolicy": "olympic"}, "rankPolicy must be one of ordinal, competition, dense"),
        ({"rankPolicy": 1}, "rankPolicy must be one of"),
        ({"among": []}, "among must be a list of 1 to 100"),
        ({"among": "song1"}, "among must be a list"),
        ({"among": [f"s{n}" for n in range(101)]}, "among must be a list of 1 to 100"),
        ({"among": ["a", "a"]}, "among names each songID once"),
        ({"among": ["a", 3]}, "among holds songIDs"),
        ({"among": [""]}, "among holds songIDs"),
        ({"among": ["a"], "limit": 3}, "takes among, rankPolicy besides its board, not 'limit'"),
        ({"among": ["a"], "songID": "a"}, "not 'songID'"),
        ({"size": True, "rankPolicy": "dense"}, "not 'rankPolicy'"),
        ({"last": 7, "rankPolicy": "dense", "period": "day", "key": "2018-01-15"}, "not 'rankPolicy'"),
    ],
)
def test_a_bad_policy_or_set_is_an_invalid_request(dynamodb: Any, event: dict[str, Any], message: str) -> None:
    deployment = BatchingDeployment(dynamodb, Layout(1), Boards(periods=("month", "day")))
    answer = deployment.ask({"month": MONTH, **event} if "period" not in event else event)
    assert answer["error"]["code"] == "InvalidRequest"
    assert message in answer["error"]["message"]


def test_a_token_continues_only_its_own_rank_policy(dynamodb: Any) -> None:
    # given a page's token under dense, and one without a policy
    load_boards(dynamodb, {MONTH: {f"s{n}": n % 3 + 1 for n in range(6)}}, 4)
    deployment = BatchingDeployment(dynamodb, Layout(4))
    dense = deployment.ask({"month": MONTH, "limit": 2, "rankPolicy": "dense"})["next_token"]
    plain = deployment.ask({"month": MONTH, "limit": 2})["next_token"]
    # then each is refused by a request of another policy, or of none
    for event in (
        {"next_token": dense},
        {"next_token": dense, "rankPolicy": "competition"},
        {"next_token": plain, "rankPolicy": "dense"},
    ):
        answer = deployment.ask({"month": MONTH, "limit": 2, **event})
        assert answer["error"]["code"] == "InvalidRequest"
        assert "another rankPolicy" in answer["error"]["message"]


def test_among_retries_unprocessed_keys_a_bounded_number_of_times(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a DynamoDB that leaves all keys but one unprocessed twice (then one that always leaves them)
    load_boards(dynamodb, {MONTH: {"a": 3, "b": 5}}, 1)
    monkeypatch.setattr(among, "RETRY_DELAY_S", 0)

    class Unprocessed(BatchingDeployment):
        def batch_get_item(self, **parameters: Any) -> Any:
            self.batch_gets += 1
            ((table, asked),) = parameters["RequestItems"].items()
            if self.batch_gets <= 2 and len(asked["Keys"]) > 1:
                kept, left = asked["Keys"][:1], asked["Keys"][1:]
                answered = self.dynamodb.batch_get_item(RequestItems={table: {**asked, "Keys": kept}})
                return {**answered, "UnprocessedKeys": {table: {**asked, "Keys": left}}}
            return self.dynamodb.batch_get_item(**parameters)

    flaky = Unprocessed(dynamodb, Layout(1))
    answer = flaky.ask({"month": MONTH, "among": ["a", "b", "c"]})
    # then the answer is whole, after the retries
    assert [(item["songID"], item["downloadCount"], item["rank"]) for item in answer["items"]] == [
        ("b", 5, 1),
        ("a", 3, 2),
        ("c", 0, 3),
    ]
    assert flaky.batch_gets == 3

    class NeverDone(BatchingDeployment):
        def batch_get_item(self, **parameters: Any) -> Any:
            self.batch_gets += 1
            ((table, asked),) = parameters["RequestItems"].items()
            return {"Responses": {table: []}, "UnprocessedKeys": {table: asked}}

    stuck = NeverDone(dynamodb, Layout(1))
    answer = stuck.ask({"month": MONTH, "among": ["a", "b"]})
    assert answer["error"]["code"] == "Unavailable"
    assert stuck.batch_gets == among.BATCH_ATTEMPTS


def test_amongs_batch_read_is_what_the_query_roles_policy_allows(dynamodb: Any) -> None:
    # given the query role's statement granting BatchGetItem, and a month of aggregates
    (statement,) = granting(policy_documents(TERRAFORM_MODULE), "query", "dynamodb:BatchGetItem")
    allowed = set(statement["Condition"][("ForAllValues:StringEquals", "dynamodb:Attributes")])
    assert statement["Condition"][("StringEqualsIfExists", "dynamodb:Select")] == ["SPECIFIC_ATTRIBUTES"]
    load_boards(dynamodb, {MONTH: {"a": 3, "b": 5}}, 1)
    requests: list[dict[str, Any]] = []
    dynamodb.meta.events.register(
        "provide-client-params.dynamodb.BatchGetItem", lambda params, **_: requests.append(params)
    )
    # when the function ranks a set
    answer = BatchingDeployment(dynamodb, Layout(1)).ask({"month": MONTH, "among": ["a", "b"]})
    # then its BatchGetItem names a projection of allowed attributes only
    assert [item["songID"] for item in answer["items"]] == ["b", "a"]
    (request,) = requests
    (asked,) = request["RequestItems"].values()
    assert "ProjectionExpression" in asked
    assert requested_attributes({"Key": asked["Keys"][0], **asked}) <= allowed


def test_a_policy_token_whose_walk_no_listing_reaches_is_refused(dynamodb: Any) -> None:
    # given tokens of this board and layout whose walk is impossible: a rank above the entries listed, or no number
    load_boards(dynamodb, {MONTH: {"a": 3, "b": 5}}, 1)
    deployment = BatchingDeployment(dynamodb, Layout(1))
    cursors = {MONTH: Position(order_of(5, "b"), "b")}
    for walk in (("1", "5", "2"), ("1", "x", "1"), ("-1", "", "0")):
        token = encode_token(MONTH, Layout(1), cursors, Scope("page.dense", walk))
        # then a page continuing it is an InvalidRequest, not a misranked page
        answer = deployment.ask({"month": MONTH, "next_token": token, "rankPolicy": "dense"})
        assert answer["error"]["code"] == "InvalidRequest", walk


def test_a_ranges_token_under_a_policy_continues_only_that_range(dynamodb: Any) -> None:
    load_boards(dynamodb, {MONTH: {f"s{n}": n % 3 + 1 for n in range(8)}}, 4)
    deployment = BatchingDeployment(dynamodb, Layout(4))
    asked = {"month": MONTH, "fromRank": 1, "toRank": 3, "limit": 1, "rankPolicy": "competition"}
    token = deployment.ask(asked)["next_token"]
    assert token is not None
    for other in ({"toRank": 4}, {"rankPolicy": "dense"}, {"rankPolicy": "ordinal"}):
        answer = deployment.ask({**asked, **other, "next_token": token})
        assert answer["error"]["code"] == "InvalidRequest", other


@pytest.mark.parametrize("policy", ["competition", "dense"])
def test_a_policy_skip_past_the_read_budget_answers_no_items_and_a_token_that_continues(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    # given 60 songs of 20 values in 2 partitions, a request budget of 5 Queries and rounds of at most 4 entries
    values = {f"song{n:02d}": 1 + n % 20 for n in range(60)}
    load_boards(dynamodb, {MONTH: values}, 2)
    monkeypatch.setattr(rank_range, "request_budget", lambda partitions: 5)
    monkeypatch.setattr(rank_range, "SKIP_STEP", 4)
    deployment = BatchingDeployment(dynamodb, Layout(2))
    # when ranks 15 to 17 are read under the policy, following the tokens
    pages: list[dict[str, Any]] = []
    event = {"month": MONTH, "fromRank": 15, "toRank": 17, "rankPolicy": policy}
    listed = deployment.every_page(event, pages)
    # then pages without items carried the walk on, and the range is exact
    assert pages[0]["items"] == []
    assert pages[0]["next_token"] is not None
    assert listed == items([entry for entry in oracle(values, policy) if 15 <= entry[2] <= 17], False)
    # and a budget that cannot pass one entry is Unavailable
    monkeypatch.setattr(rank_range, "request_budget", lambda partitions: 1)
    assert deployment.ask(event)["error"]["code"] == "Unavailable"


@pytest.mark.parametrize(("policy", "most_read"), [("competition", 1200), ("dense", 1400)])
def test_a_policy_skip_reads_about_the_entries_above_the_range_not_that_many_per_partition(
    dynamodb: Any, policy: str, most_read: int
) -> None:
    # given 1,200 songs in 8 leaderboard partitions, pairs of them tied
    rng = random.Random(7)
    values = {f"song{n:04d}": rng.randint(1, 600) * 2 for n in range(1200)}
    load_boards(dynamodb, {MONTH: values}, 8)
    deployment = BatchingDeployment(dynamodb, Layout(8))
    ranked = oracle(values, policy)
    first = ranked[599][2]
    # when the ranks of the 600th entry on are asked under the policy, 6 entries a page
    event = {"month": MONTH, "fromRank": first, "toRank": first + 5, "rankPolicy": policy, "limit": 6}
    listed = deployment.every_page(event)
    # then they are the oracle's, and the walk read the 600 entries above them with margins (competition: its places
    # in one round, as the ordinal skip; dense: in rounds that estimate the entries a rank holds), and pages of 7 from
    # each partition: not 8 x 600
    assert listed == items([entry for entry in ranked if first <= entry[2] <= first + 5], False)
    assert deployment.entries_read < most_read, deployment.entries_read
