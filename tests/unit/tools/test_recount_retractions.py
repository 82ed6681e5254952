"""`reconcile`'s recount with retractions: it counts the table's items as they are now, the truth the aggregator
follows, so a deleted download is not counted and an edited one counts where its current image says.

The oracle is the test's own: the download items left in the table, each filed by slicing its UTC timestamp (`Z`:
month `2018-12`, year `2018`) and with its genre `<bucket>@<genre>`. Played on moto with the shipped aggregator's
parse and store (operator_stack.ModelAggregator), its stream carrying old and new images.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import boto3

from tests.unit.tools.operator_stack import REGION, ModelAggregator, MotoStack, deploy, reconciler

GENRE = "Genre"
PERIODS = "month,year"


def client() -> Any:
    return boto3.client("dynamodb", region_name=REGION)


def put(stack: MotoStack, song: str, sort_key: str, timestamp: str, genre: str) -> None:
    item = {"songID": {"S": song}, "SK": {"S": sort_key}, "Timestamp": {"S": timestamp}, GENRE: {"S": genre}}
    client().put_item(TableName=stack.table, Item=item)


def edit(stack: MotoStack, song: str, sort_key: str, attribute: str, value: str) -> None:
    client().update_item(
        TableName=stack.table,
        Key={"songID": {"S": song}, "SK": {"S": sort_key}},
        UpdateExpression="SET #a = :v",
        ExpressionAttributeNames={"#a": attribute},
        ExpressionAttributeValues={":v": {"S": value}},
    )


def delete(stack: MotoStack, song: str, sort_key: str) -> None:
    client().delete_item(TableName=stack.table, Key={"songID": {"S": song}, "SK": {"S": sort_key}})


def oracle(stack: MotoStack) -> Counter[tuple[str, str]]:
    items = client().scan(
        TableName=stack.table,
        FilterExpression="attribute_exists(#t)",
        ExpressionAttributeNames={"#t": "Timestamp"},
        ConsistentRead=True,
    )["Items"]
    counts: Counter[tuple[str, str]] = Counter()
    for item in items:
        song, timestamp, genre = item["songID"]["S"], item["Timestamp"]["S"], item[GENRE]["S"]
        buckets = [timestamp[:7], timestamp[:4]]
        counts.update((song, board) for board in [*buckets, *(f"{bucket}@{genre}" for bucket in buckets)])
    return counts


def edited_history() -> MotoStack:
    """Downloads of two songs across December and January and two genres, then edited across a month and a year
    boundary and across genres, some deleted, one deleted and written again under its key."""
    stack = deploy(retractions=True, aggregator_settings={"LEADERBOARD_PERIODS": PERIODS, "CATEGORY_ATTRIBUTE": GENRE})
    days = ("2018-12-10T10:00:00Z", "2018-12-31T23:59:59Z", "2019-01-01T00:00:00Z")
    for index in range(12):
        put(stack, f"song{index % 2 + 1}", f"d{index}", days[index % 3], ("rock", "jazz")[index % 4 // 2])
    edit(stack, "song1", "d0", "Timestamp", "2019-01-02T10:00:00Z")
    edit(stack, "song2", "d1", "Timestamp", "2018-11-30T10:00:00Z")
    edit(stack, "song1", "d2", GENRE, "jazz")
    edit(stack, "song2", "d3", GENRE, "rock")
    delete(stack, "song1", "d4")
    delete(stack, "song2", "d5")
    delete(stack, "song1", "d6")
    put(stack, "song1", "d6", "2018-12-10T10:00:00Z", "rock")
    return stack


def test_the_recount_counts_each_download_where_its_current_image_says(aws: None) -> None:
    # given downloads edited across months, a year and genres, some deleted, one deleted and written again, none of it
    # counted yet (no aggregate exists)
    stack = edited_history()
    # when every board of the table is recounted
    report = reconciler(stack).run(None)
    # then each aggregate's recount is the table's items as they are now
    recounted = {
        (difference.entity_id, board.board): difference.recounted
        for board in report.boards
        for difference in board.differences
    }
    assert recounted == dict(oracle(stack))


def test_the_aggregator_and_the_recount_follow_the_same_truth(aws: None) -> None:
    # given the same history, every record of it counted by the aggregator as it came (retractions followed)
    stack = edited_history()
    ModelAggregator(stack).run()
    # when every board of the table is recounted
    report = reconciler(stack).run(None)
    # then nothing differs: every board's count is what its recount (and the oracle) says
    assert [board.differences for board in report.boards if board.differences] == []
    assert {board.board: board.downloads for board in report.boards} == {
        board: sum(count for (_, each), count in oracle(stack).items() if each == board)
        for board in {board for _, board in oracle(stack)}
    }
