"""Retractions on the emulator: deletions and edits of downloads move every board they were counted in.

One stack keeps day, month and year boards and a board per Genre, in two leaderboard shards, with
`retractions` on. Downloads around a new year and a month's end are written and counted; then a
tenth are deleted, a tenth have their Timestamp moved (across the year's or the month's boundary
for some) or their Genre changed, some are deleted and written again under the same key, some are
edited back and forth, and some have only their UserID changed. Every board, rank and rolling
window must then equal the recount of the downloads as the test last wrote them (computed here,
from the test's own writes), and no aggregate whose count fell to 0 stays in the index.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest

from leaderboard_dev.aws import Clients
from leaderboard_dev.bench.boards import bucket
from leaderboard_dev.leaderboard import invoke_function, poll_until
from leaderboard_dev.loadgen import write_items
from leaderboard_dev.observe import scan_all
from leaderboard_dev.settings import Endpoint
from leaderboard_dev.terraform_stack import Stack
from tests.acceptance.conftest import stack

PERIODS = ["day", "month", "year"]
GENRES = ["rock", "pop", None]
MOMENTS = [
    datetime(2019, 12, 31, 22, tzinfo=UTC),
    datetime(2020, 1, 1, 1, tzinfo=UTC),
    datetime(2020, 1, 31, 23, tzinfo=UTC),
    datetime(2020, 2, 1, 0, tzinfo=UTC),
]
"""Two boundaries: a year's (2019-12-31 / 2020-01-01) and a month's (2020-01-31 / 2020-02-01)."""

Item = dict[str, Any]
Boards = dict[tuple[str, str, str | None], Counter[str]]
"""(period, bucket, genre or None for the overall board) -> song -> downloads."""


def download(song: str, number: int, moment: datetime, genre: str | None) -> Item:
    item = {
        "songID": {"S": song},
        "SK": {"S": f"download-{number:04d}"},
        "UserID": {"S": f"user{number % 17}"},
        "Timestamp": {"S": moment.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }
    return item | ({"Genre": {"S": genre}} if genre is not None else {})


def key_of(item: Item) -> Item:
    return {"songID": item["songID"], "SK": item["SK"]}


def boards_of(items: list[Item]) -> Boards:
    """The recount: every board of every period, overall and per genre, from the items themselves."""
    boards: Boards = {}
    for item in items:
        moment = datetime.strptime(item["Timestamp"]["S"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        genre = item.get("Genre", {}).get("S")
        for period in PERIODS:
            for board in {None, genre}:
                boards.setdefault((period, bucket(moment, period), board), Counter())[item["songID"]["S"]] += 1
    return boards


def board_id(key: str, genre: str | None) -> str:
    return key if genre is None else f"{key}@{quote(genre, safe='')}"


def indexed(aws: Clients, outputs: dict[str, Any]) -> dict[tuple[str, str], int]:
    """(board id, song) -> count, for every aggregate in the leaderboard index."""
    index = scan_all(aws, TableName=outputs["table_name"], IndexName=outputs["leaderboard_index_name"])
    return {(item["SK"]["S"], item["songID"]["S"]): int(item["DownloadCount"]["N"]) for item in index}


def expected_index(boards: Boards) -> dict[tuple[str, str], int]:
    return {
        (board_id(key, genre), song): count
        for (_, key, genre), counts in boards.items()
        for song, count in counts.items()
        if count
    }


def ranking(counts: Counter[str]) -> list[tuple[str, int]]:
    return sorted(((song, count) for song, count in counts.items() if count), key=lambda i: (-i[1], i[0].encode()))


def board_event(period: str, key: str, genre: str | None) -> dict[str, Any]:
    return {"period": period, "key": key} | ({"category": genre} if genre is not None else {})


def listing(aws: Clients, function: str, event: dict[str, Any]) -> list[tuple[str, int]]:
    page = invoke_function(aws.lambda_, function, {**event, "limit": 1000})
    assert "error" not in page, page
    assert page["next_token"] is None, page
    return [(item["songID"], item["downloadCount"]) for item in page["items"]]


@pytest.fixture(scope="module")
def deployment(endpoint: Endpoint) -> Iterator[tuple[Stack, dict[str, Any]]]:
    with stack(
        endpoint,
        "retract",
        batch_size=100,
        retractions=True,
        leaderboard_periods=PERIODS,
        category_attribute_name="Genre",
        leaderboard_shards=2,
    ) as deployed_stack:
        yield deployed_stack


@pytest.fixture(scope="module")
def retracted(deployment: tuple[Stack, dict[str, Any]], aws: Clients) -> dict[str, Any]:
    """Downloads written and counted, then deleted, edited and re-written; waits until the index is the recount."""
    _, outputs = deployment
    table, rng = outputs["table_name"], random.Random(28)
    songs = [f"song{n:02d}" for n in range(8)]
    current: dict[str, Item] = {}
    for number in range(200):
        song = songs[min(int(rng.expovariate(0.4)), len(songs) - 1)]
        moment = rng.choice(MOMENTS) + timedelta(minutes=rng.randint(0, 59))
        current[f"download-{number:04d}"] = download(song, number, moment, rng.choice(GENRES))
    # a song whose every download of a day is deleted: its day board's aggregate falls to 0
    for number in range(200, 203):
        current[f"download-{number:04d}"] = download("vanishing", number, datetime(2020, 1, 1, 5, tzinfo=UTC), "pop")
    write_items(aws.dynamodb, table, list(current.values()))
    poll_until(
        lambda: indexed(aws, outputs) == expected_index(boards_of(list(current.values()))),
        timeout=300,
        interval=3,
        describe="the downloads counted before any retraction",
    )

    # when a tenth are deleted (and every download of 'vanishing')
    numbers = sorted(name for name in current if current[name]["songID"]["S"] != "vanishing")
    rng.shuffle(numbers)
    deleted, moved, regenred, rewritten, flipped, untouched = (
        numbers[:20],
        numbers[20:40],
        numbers[40:50],
        numbers[50:60],
        numbers[60:66],
        numbers[66:76],
    )
    for name in [*deleted, "download-0200", "download-0201", "download-0202"]:
        aws.dynamodb.delete_item(TableName=table, Key=key_of(current.pop(name)))
    # and a tenth have their Timestamp moved, across the year's or the month's boundary for those near one
    for name in moved:
        item = current[name]
        moment = datetime.strptime(item["Timestamp"]["S"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        shifted = (moment + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
        aws.dynamodb.update_item(
            TableName=table,
            Key=key_of(item),
            UpdateExpression="SET #t = :t",
            ExpressionAttributeNames={"#t": "Timestamp"},
            ExpressionAttributeValues={":t": {"S": shifted}},
        )
        item["Timestamp"] = {"S": shifted}
    # and some change genre (or lose it)
    for name in regenred:
        item = current[name]
        genre = "pop" if item.get("Genre", {}).get("S") == "rock" else "rock"
        if name in regenred[:3]:
            aws.dynamodb.update_item(TableName=table, Key=key_of(item), UpdateExpression="REMOVE Genre")
            item.pop("Genre", None)
        else:
            aws.dynamodb.update_item(
                TableName=table,
                Key=key_of(item),
                UpdateExpression="SET Genre = :g",
                ExpressionAttributeValues={":g": {"S": genre}},
            )
            item["Genre"] = {"S": genre}
    # and some are deleted and written again under the same key, in another month
    for name in rewritten:
        item = current[name]
        aws.dynamodb.delete_item(TableName=table, Key=key_of(item))
        again = download(item["songID"]["S"], int(name.split("-")[1]), MOMENTS[3] + timedelta(hours=2), "rock")
        aws.dynamodb.put_item(TableName=table, Item=again)
        current[name] = again
    # and some are edited back and forth, ending where they started
    for name in flipped:
        item = current[name]
        for timestamp in ("2021-06-01T00:00:00Z", item["Timestamp"]["S"]):
            aws.dynamodb.update_item(
                TableName=table,
                Key=key_of(item),
                UpdateExpression="SET #t = :t",
                ExpressionAttributeNames={"#t": "Timestamp"},
                ExpressionAttributeValues={":t": {"S": timestamp}},
            )
    # and some only change what no board counts
    for name in untouched:
        aws.dynamodb.update_item(
            TableName=table,
            Key=key_of(current[name]),
            UpdateExpression="SET UserID = :u",
            ExpressionAttributeValues={":u": {"S": "someone-else"}},
        )
    truth = boards_of(list(current.values()))
    poll_until(
        lambda: indexed(aws, outputs) == expected_index(truth),
        timeout=300,
        interval=3,
        describe="every board the recount of the downloads as last written",
    )
    return {"outputs": outputs, "truth": truth, "items": list(current.values())}


def test_every_board_after_deletions_and_edits_is_the_recount_of_the_table(
    retracted: dict[str, Any], aws: Clients
) -> None:
    # given the downloads deleted, moved, re-written and edited back and forth
    outputs, truth = retracted["outputs"], retracted["truth"]
    # then the table's own items recount to the same boards (the test's model is the table)
    items = scan_all(
        aws,
        TableName=outputs["table_name"],
        FilterExpression="attribute_exists(#t)",
        ExpressionAttributeNames={"#t": "Timestamp"},
        ConsistentRead=True,
    )
    assert expected_index(boards_of(items)) == expected_index(truth)
    # and every board, listed by the query function, is its recount, ties ordered as without retractions
    function = outputs["query_function_name"]
    for (period, key, genre), counts in truth.items():
        assert listing(aws, function, board_event(period, key, genre)) == ranking(counts), (period, key, genre)


def test_an_aggregate_whose_downloads_were_all_deleted_leaves_the_index_and_is_not_ranked(
    retracted: dict[str, Any], aws: Clients
) -> None:
    outputs = retracted["outputs"]
    table = outputs["table_name"]
    # given every download of 'vanishing' deleted
    aggregate = aws.dynamodb.get_item(
        TableName=table, Key={"songID": {"S": "vanishing"}, "SK": {"S": "2020-01-01"}}, ConsistentRead=True
    )["Item"]
    # then its day aggregate holds 0 and carries neither the index's partition nor its order
    assert aggregate["DownloadCount"] == {"N": "0"}
    assert "Month" not in aggregate
    assert "LeaderboardOrder" not in aggregate
    # and no aggregate anywhere is in the index with a count of 0 or less
    assert all(count > 0 for count in indexed(aws, outputs).values())
    # and a rank request answers it as it answers a song never downloaded
    answer = invoke_function(
        aws.lambda_, outputs["query_function_name"], {"period": "day", "key": "2020-01-01", "songID": "vanishing"}
    )
    assert (answer["downloadCount"], answer["rank"]) == (0, None), answer


@pytest.mark.parametrize(
    ("period", "keys"), [("day", ["2020-02-01", "2020-01-31", "2020-01-30"]), ("month", ["2020-02", "2020-01"])]
)
def test_ranks_and_rolling_windows_after_retractions_are_the_recounts(
    retracted: dict[str, Any], aws: Clients, period: str, keys: list[str]
) -> None:
    outputs, truth = retracted["outputs"], retracted["truth"]
    function = outputs["query_function_name"]
    # given the window's boards as the recount has them
    window: Counter[str] = Counter()
    for key in keys:
        window.update(truth.get((period, key, None), Counter()))
    # when the top of the rolling window is asked for, then it is the recount's
    answer = invoke_function(aws.lambda_, function, {"period": period, "key": keys[0], "last": len(keys), "limit": 5})
    assert answer["complete"] is True, answer
    assert [(item["songID"], item["downloadCount"]) for item in answer["items"]] == ranking(window)[:5]
    # and each song's rank on the board is its place in the recount
    ordered = ranking(truth[(period, keys[0], None)])
    for place, (song, count) in enumerate(ordered, start=1):
        answer = invoke_function(aws.lambda_, function, {"period": period, "key": keys[0], "songID": song})
        assert (answer["downloadCount"], answer["rank"]) == (count, place)
