"""Changing the number of leaderboard shards: the rekey pass moves every aggregate, once, without racing updates."""

from __future__ import annotations

from typing import Any

from leaderboard_core.index_layout import leaderboard_partition, order_of
from leaderboard_tools.rekey import rekey
from tests.unit.conftest import TABLE

SONGS = {f"song{n:02d}": n + 1 for n in range(20)}


def put_aggregate(dynamodb: Any, song: str, count: int, partition: str, with_order: bool = True) -> None:
    item = {
        "songID": {"S": song},
        "SK": {"S": "2018-01"},
        "Month": {"S": partition},
        "DownloadCount": {"N": str(count)},
    }
    if with_order:
        item["LeaderboardOrder"] = {"N": str(order_of(count, song))}
    dynamodb.put_item(TableName=TABLE, Item=item)


def aggregates(dynamodb: Any) -> dict[str, tuple[str, int, int | None]]:
    items = dynamodb.scan(TableName=TABLE, ConsistentRead=True)["Items"]
    return {
        item["songID"]["S"]: (
            item["Month"]["S"],
            int(item["DownloadCount"]["N"]),
            int(item["LeaderboardOrder"]["N"]) if "LeaderboardOrder" in item else None,
        )
        for item in items
        if "Month" in item
    }


def test_rekey_moves_every_aggregate_to_the_new_layout_and_a_second_run_changes_nothing(dynamodb: Any) -> None:
    # given 20 aggregates in the one-shard layout, five of them written before the index order existed
    for index, (song, count) in enumerate(SONGS.items()):
        put_aggregate(dynamodb, song, count, "2018-01", with_order=index % 4 != 0)
    dynamodb.put_item(TableName=TABLE, Item={"songID": {"S": "song00"}, "SK": {"S": "d1"}, "Timestamp": {"S": "x"}})
    # when the pass moves them to four shards
    report = rekey(dynamodb, TABLE, 4, segments=3)
    # then each sits in its new partition, with its count untouched and an order from it
    assert (report.aggregates, report.moved + report.ordered, report.failed) == (20, 20, [])
    assert report.ordered == 5
    assert aggregates(dynamodb) == {
        song: (leaderboard_partition("2018-01", song, 4), count, order_of(count, song)) for song, count in SONGS.items()
    }
    # and the raw download was not touched, and running it again changes nothing
    again = rekey(dynamodb, TABLE, 4)
    assert (again.unchanged, again.moved, again.ordered) == (20, 0, 0)


class CountChangesUnderTheFirstMove:
    """An aggregator still on the old layout adds to song03 between the pass's scan and its update."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.raced = False

    def update_item(self, **parameters: Any) -> Any:
        if not self.raced and parameters["Key"]["songID"]["S"] == "song03":
            self.raced = True
            self._client.update_item(
                TableName=TABLE,
                Key=parameters["Key"],
                UpdateExpression="ADD DownloadCount :one",
                ExpressionAttributeValues={":one": {"N": "1"}},
            )
        return self._client.update_item(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_move_that_races_an_update_reads_again_and_loses_nothing(dynamodb: Any) -> None:
    # given song03 without an order yet, whose count changes between the pass's scan and its write
    for song, count in SONGS.items():
        put_aggregate(dynamodb, song, count, "2018-01", with_order=song != "song03")
    racing = CountChangesUnderTheFirstMove(dynamodb)
    # when the pass moves it, then its condition fails, it reads again, and the order follows the new count
    report = rekey(racing, TABLE, 4, segments=1)
    assert racing.raced
    assert report.failed == []
    assert aggregates(dynamodb)["song03"] == (leaderboard_partition("2018-01", "song03", 4), 5, order_of(5, "song03"))
