"""Aggregates on moto's table as the aggregator writes them, and a client that fails as DynamoDB can fail: helpers of
the query function's tests (and of the tests of its policy and of the board commands), not tests.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from leaderboard_core.index_layout import leaderboard_partition, order_of
from tests.unit.conftest import TABLE

MONTH = "2018-01"
"""The month `load_month` fills."""

Catalogue = dict[str, int]
"""songID -> downloads in MONTH."""

Board_ = str
Values = dict[Board_, dict[str, int | Decimal]]
"""board id -> entity -> its value there."""


def load_month(dynamodb: Any, catalogue: Catalogue, shards: int) -> None:
    """Aggregates as the aggregator writes them, plus a raw download the sparse index must not list."""
    items = [
        {
            "songID": {"S": song},
            "SK": {"S": MONTH},
            "Month": {"S": leaderboard_partition(MONTH, song, shards)},
            "DownloadCount": {"N": str(count)},
            "LeaderboardOrder": {"N": str(order_of(count, song))},
        }
        for song, count in catalogue.items()
    ]
    items.append({"songID": {"S": "song01"}, "SK": {"S": "d1"}, "Timestamp": {"S": "2018-01-01T00:00:00Z"}})
    put_items(dynamodb, items)


def load_boards(dynamodb: Any, values: Values, shards: int) -> None:
    """As the aggregator writes them: a board holding a decimal is a summing deployment's (8-byte tie-breaker)."""
    summed = any(isinstance(value, Decimal) for entities in values.values() for value in entities.values())
    put_items(
        dynamodb,
        [
            {
                "songID": {"S": entity},
                "SK": {"S": board},
                "Month": {"S": leaderboard_partition(board, entity, shards)},
                "DownloadCount": {"N": str(value)},
                "LeaderboardOrder": {"N": str(order_of(value, entity, summed))},
            }
            for board, entities in values.items()
            for entity, value in entities.items()
        ],
    )


def put_items(dynamodb: Any, items: list[dict[str, Any]]) -> None:
    """The items, 25 a BatchWriteItem (its limit), until none is left unprocessed: moto's cost is per request."""
    for start in range(0, len(items), 25):
        requests = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        while requests:
            unprocessed = dynamodb.batch_write_item(RequestItems={TABLE: requests}).get("UnprocessedItems", {})
            requests = unprocessed.get(TABLE, [])


class FailingClient:
    """moto's client, except that one operation fails as DynamoDB can fail."""

    def __init__(self, client: Any, operation: str, code: str) -> None:
        self._client, self._operation, self._code = client, operation, code

    def __getattr__(self, name: str) -> Any:
        if name != self._operation:
            return getattr(self._client, name)

        def fail(**_: Any) -> Any:
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": self._code, "Message": "injected"}}, name)

        return fail
