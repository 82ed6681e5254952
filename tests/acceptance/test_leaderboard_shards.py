"""Leaderboard shards on the emulator: one and four index partitions per month list the same leaderboard.

Two stacks from the same module, one with `leaderboard_shards = 1` (the guide's layout) and one
with 4, are fed the same downloads, with ties: equal counts, and ids that share their first
ten bytes (they tie in the index's own sort key). Through the query function both must return
the one sorted listing at every page size, and every rank must be the song's place in it; under
the competition and dense rank policies every page, rank and range, and `among`, must rank as a
recount of the raw downloads does. Last, the one-shard stack changes to four while it keeps answering.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import index_ranking, invoke_function, poll_until, query_all_pages
from leaderboard_dev.loadgen import Download, write_items
from leaderboard_dev.observe import scan_all
from leaderboard_dev.settings import Endpoint
from leaderboard_dev.terraform_stack import Stack
from leaderboard_tools.rekey import rekey
from tests.acceptance.conftest import stack

MONTH = "2018-04"
CATALOGUE = {
    "hit-a": 12,
    "hit-b": 12,
    "international-hit-1": 7,
    "international-hit-2": 7,
    "international-hit-3": 7,
    **{f"song{n:02d}": 1 + n % 4 for n in range(16)},
}
"""Downloads per song: ties at 12, 7 (in the index itself), 4, 3, 2 and 1."""


def downloads_of(catalogue: dict[str, int], seed: int, prefix: str) -> list[Download]:
    played = [song for song, count in catalogue.items() for _ in range(count)]
    random.Random(seed).shuffle(played)
    return [
        Download(song, f"{prefix}-{number:04d}", "user1", f"{MONTH}-{number % 28 + 1:02d}T12:00:00Z")
        for number, song in enumerate(played)
    ]


def oracle(catalogue: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(catalogue.items(), key=lambda item: (-item[1], item[0].encode()))


def listed(aws: Clients, outputs: dict[str, Any], page_size: int) -> list[tuple[str, int]]:
    return query_all_pages(aws.lambda_, outputs["query_function_name"], MONTH, page_size=page_size)


def wait_for(aws: Clients, outputs: dict[str, Any], catalogue: dict[str, int]) -> None:
    poll_until(
        lambda: listed(aws, outputs, 1000) == oracle(catalogue),
        timeout=240,
        interval=3,
        describe=f"the {outputs['leaderboard_shards']}-shard leaderboard",
    )


@pytest.fixture(scope="module")
def stacks(endpoint: Endpoint, aws: Clients) -> Iterator[dict[int, tuple[Stack, dict[str, Any]]]]:
    with ExitStack() as deployed:
        result = {
            shards: deployed.enter_context(stack(endpoint, f"shards{shards}", batch_size=25, leaderboard_shards=shards))
            for shards in (1, 4)
        }
        for _, outputs in result.values():
            write_items(aws.dynamodb, outputs["table_name"], [d.as_item() for d in downloads_of(CATALOGUE, 4, "d")])
        for _, outputs in result.values():
            wait_for(aws, outputs, CATALOGUE)
        yield result


@pytest.mark.parametrize("page_size", [1, 3, 10])
def test_one_and_four_shards_list_the_same_leaderboard_at_every_page_size(
    stacks: dict[int, tuple[Stack, dict[str, Any]]], aws: Clients, page_size: int
) -> None:
    # given the same downloads in both stacks, when every page is followed, then both give the sorted listing
    for shards, (_, outputs) in stacks.items():
        assert listed(aws, outputs, page_size) == oracle(CATALOGUE), f"{shards} shards"


def test_the_top_song_and_the_top_ten_are_the_same_with_one_or_four_shards(
    stacks: dict[int, tuple[Stack, dict[str, Any]]], aws: Clients
) -> None:
    for _, outputs in stacks.values():
        top = invoke_function(aws.lambda_, outputs["query_function_name"], {"month": MONTH, "limit": 1})
        ten = invoke_function(aws.lambda_, outputs["query_function_name"], {"month": MONTH, "limit": 10})
        assert top["items"] == [{"songID": "hit-a", "downloadCount": 12}]
        assert [(i["songID"], i["downloadCount"]) for i in ten["items"]] == oracle(CATALOGUE)[:10]


def test_four_shards_spread_the_month_over_four_index_partitions(
    stacks: dict[int, tuple[Stack, dict[str, Any]]], aws: Clients
) -> None:
    _, outputs = stacks[4]
    table, index = outputs["table_name"], outputs["leaderboard_index_name"]
    for shard in range(4):
        partition = index_ranking(aws.dynamodb, table, index, f"{MONTH}#{shard}")
        assert partition, f"{MONTH}#{shard} is empty"
    assert index_ranking(aws.dynamodb, table, index, MONTH) == []
    assert index_ranking(aws.dynamodb, table, index, MONTH, shards=4) == oracle(CATALOGUE)


def test_every_rank_is_the_songs_place_in_the_listing(
    stacks: dict[int, tuple[Stack, dict[str, Any]]], aws: Clients
) -> None:
    for shards, (_, outputs) in stacks.items():
        for place, (song, count) in enumerate(oracle(CATALOGUE), start=1):
            answer = invoke_function(aws.lambda_, outputs["query_function_name"], {"month": MONTH, "songID": song})
            assert answer == {"month": MONTH, "songID": song, "downloadCount": count, "rank": place}, shards
        silent = invoke_function(aws.lambda_, outputs["query_function_name"], {"month": MONTH, "songID": "silent"})
        assert (silent["downloadCount"], silent["rank"]) == (0, None)


def test_bad_ranks_and_tokens_get_invalid_request(
    stacks: dict[int, tuple[Stack, dict[str, Any]]], aws: Clients
) -> None:
    one, four = stacks[1][1]["query_function_name"], stacks[4][1]["query_function_name"]
    token_of_one = invoke_function(aws.lambda_, one, {"month": MONTH, "limit": 2})["next_token"]
    token_of_four = invoke_function(aws.lambda_, four, {"month": MONTH, "limit": 2})["next_token"]
    bad = [
        (four, {"month": MONTH, "songID": 3}),
        (four, {"month": MONTH, "songID": ""}),
        (four, {"month": MONTH, "songID": "hit-a", "limit": 1}),
        (four, {"month": MONTH, "limit": 2, "next_token": token_of_one}),
        (one, {"month": MONTH, "limit": 2, "next_token": token_of_four}),
        (four, {"month": "2018-05", "limit": 2, "next_token": token_of_four}),
        (four, {"month": MONTH, "limit": 2, "next_token": token_of_four[:-4] + "AAAA"}),
    ]
    for function, request in bad:
        response = invoke_function(aws.lambda_, function, request)
        assert response.get("error", {}).get("code") == "InvalidRequest", request


def recount(aws: Clients, outputs: dict[str, Any]) -> dict[str, int]:
    """The month's downloads per song, counted from the raw records the table holds (not the aggregates)."""
    downloads = scan_all(aws, TableName=outputs["table_name"], FilterExpression="attribute_exists(UserID)")
    return dict(Counter(item["songID"]["S"] for item in downloads if item["Timestamp"]["S"].startswith(MONTH)))


def policy_ranked(counts: dict[str, int], policy: str) -> list[dict[str, Any]]:
    """The oracle: every song in listing order with its rank under the policy, from the counts alone."""
    values = sorted(set(counts.values()), reverse=True)
    return [
        {
            "songID": song,
            "downloadCount": count,
            "rank": {
                "ordinal": place,
                "competition": 1 + sum(1 for other in counts.values() if other > count),
                "dense": 1 + values.index(count),
            }[policy],
        }
        for place, (song, count) in enumerate(oracle(counts), start=1)
    ]


def every_item(aws: Clients, function: str, request: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = None
    for _ in range(100):
        answer = invoke_function(aws.lambda_, function, {**request, **({"next_token": token} if token else {})})
        assert "error" not in answer, (request, answer)
        items += answer["items"]
        token = answer["next_token"]
        if token is None:
            return items
    raise AssertionError("pagination did not end")


@pytest.mark.parametrize("policy", ["competition", "dense"])
def test_competition_and_dense_ranks_are_the_recounts_on_one_and_four_shards(
    stacks: dict[int, tuple[Stack, dict[str, Any]]], aws: Clients, policy: str
) -> None:
    for shards, (_, outputs) in stacks.items():
        # given the month's recount from its raw downloads, ranked under the policy
        function = outputs["query_function_name"]
        expected = policy_ranked(recount(aws, outputs), policy)
        # then every page of 3 carries each song's rank under it
        assert every_item(aws, function, {"month": MONTH, "limit": 3, "rankPolicy": policy}) == expected, shards
        # and each song's rank, and its neighbours', are the recount's
        for place, entry in enumerate(expected):
            request = {"month": MONTH, "songID": entry["songID"], "around": 1, "rankPolicy": policy}
            answer = invoke_function(aws.lambda_, function, request)
            assert (answer["rank"], answer["downloadCount"]) == (entry["rank"], entry["downloadCount"]), shards
            assert answer["items"] == expected[max(0, place - 1) : place + 2], shards
        # and a range by rank lists the songs whose rank under the policy is within it, a range by count ranks on
        ranks = every_item(
            aws, function, {"month": MONTH, "fromRank": 2, "toRank": 4, "rankPolicy": policy, "limit": 2}
        )
        assert ranks == [entry for entry in expected if 2 <= entry["rank"] <= 4], shards
        counts = every_item(aws, function, {"month": MONTH, "minCount": 2, "maxCount": 7, "rankPolicy": policy})
        assert counts == [entry for entry in expected if 2 <= entry["downloadCount"] <= 7], shards


@pytest.mark.parametrize("policy", ["ordinal", "competition", "dense"])
def test_among_ranks_friends_among_themselves_as_the_recount(
    stacks: dict[int, tuple[Stack, dict[str, Any]]], aws: Clients, policy: str
) -> None:
    friends = ["song07", "international-hit-2", "hit-b", "silent", "song03", "international-hit-3"]
    for shards, (_, outputs) in stacks.items():
        # given the friends' counts recounted from the raw downloads (0 for a song never downloaded)
        counts = recount(aws, outputs)
        expected = policy_ranked({friend: counts.get(friend, 0) for friend in friends}, policy)
        # when they are ranked among themselves
        answer = invoke_function(
            aws.lambda_, outputs["query_function_name"], {"month": MONTH, "among": friends, "rankPolicy": policy}
        )
        # then each has its recount and its rank within the set
        assert answer == {"month": MONTH, "items": expected}, shards


def test_changing_one_shard_to_four_keeps_the_leaderboard_answering(
    stacks: dict[int, tuple[Stack, dict[str, Any]]], aws: Clients
) -> None:
    deployment, outputs = stacks[1]
    function, table = outputs["query_function_name"], outputs["table_name"]
    # given the one-shard stack applied with four shards, the previous layout still read
    deployment.variables.update(leaderboard_shards=4, leaderboard_shards_previous=1)
    outputs = deployment.apply()
    # then it answers the same listing at once, all of it still in the old partition
    assert listed(aws, outputs, 3) == oracle(CATALOGUE)
    # when new downloads arrive (the aggregator moves the aggregates it updates) and the rekey pass moves the rest
    more = {"hit-b": 2, "song03": 9, "newcomer": 5}
    write_items(aws.dynamodb, table, [d.as_item() for d in downloads_of(more, 5, "m")])
    expected = dict(Counter(CATALOGUE) + Counter(more))
    wait_for(aws, outputs, expected)
    report = rekey(aws.dynamodb, table, 4)
    assert report.failed == []
    assert report.moved > 0
    # then the listing is unchanged by the move, and with the old layout dropped it is still the same
    assert listed(aws, outputs, 3) == oracle(expected)
    deployment.variables.update(leaderboard_shards_previous=None)
    outputs = deployment.apply()
    assert outputs["query_function_name"] == function
    assert listed(aws, outputs, 3) == oracle(expected)
    assert index_ranking(aws.dynamodb, table, outputs["leaderboard_index_name"], MONTH) == []
