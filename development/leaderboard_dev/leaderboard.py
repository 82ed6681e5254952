"""Reading leaderboards back: through the query Lambda, straight from the index, and waiting until they settle."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from leaderboard_core.attributes import COUNT_FIELD, GUIDE_NAMES
from leaderboard_core.index_layout import leaderboard_partitions


class NotSettled(AssertionError):
    pass


def invoke_function(lambda_client: Any, function_name: str, request: dict[str, Any]) -> dict[str, Any]:
    response = lambda_client.invoke(FunctionName=function_name, Payload=json.dumps(request).encode())
    payload = json.loads(response["Payload"].read() or b"null")
    if response.get("FunctionError"):
        raise RuntimeError(f"{function_name} failed: {payload}")
    return payload


def query_all_pages(lambda_client: Any, function_name: str, month: str, page_size: int = 10) -> list[tuple[str, int]]:
    """Every song of the month, following next_token until it is null."""
    ranking: list[tuple[str, int]] = []
    request: dict[str, Any] = {"month": month, "limit": page_size}
    for _ in range(10_000):
        page = invoke_function(lambda_client, function_name, request)
        ranking.extend((item[GUIDE_NAMES.entity], item[COUNT_FIELD]) for item in page["items"])
        if page["next_token"] is None:
            return ranking
        request = {"month": month, "limit": page_size, "next_token": page["next_token"]}
    raise RuntimeError("pagination did not end")


def index_ranking(
    dynamodb: Any, table_name: str, index_name: str, month: str, shards: int = 1
) -> list[tuple[str, int]]:
    """The month's partitions of the sparse index, read directly and merged: highest count first, then by song id.

    With one leaderboard shard this is the guide's own query (Month = :month, descending).
    """
    ranking: list[tuple[str, int]] = []
    for partition in leaderboard_partitions(month, shards):
        parameters: dict[str, Any] = {
            "TableName": table_name,
            "IndexName": index_name,
            "KeyConditionExpression": "#month = :month",
            "ExpressionAttributeNames": {"#month": GUIDE_NAMES.period},
            "ExpressionAttributeValues": {":month": {"S": partition}},
            "ScanIndexForward": False,
        }
        for page in dynamodb.get_paginator("query").paginate(**parameters):
            ranking.extend(
                (item[GUIDE_NAMES.entity]["S"], int(item[GUIDE_NAMES.count]["N"])) for item in page.get("Items", [])
            )
    return sorted(ranking, key=lambda entry: (-entry[1], entry[0].encode()))


def poll_until(condition: Callable[[], Any], timeout: float, interval: float = 1.0, describe: str = "condition") -> Any:
    """Bounded poll: the first truthy result of `condition`, or NotSettled after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise NotSettled(f"{describe} not reached within {timeout:.0f} s")
        time.sleep(interval)


def wait_until_totals(
    dynamodb: Any,
    table_name: str,
    index_name: str,
    expected_totals: dict[str, int],
    timeout: float,
    shards: int = 1,
) -> dict[str, int]:
    """Wait until each month's counts in the index add up to the expected number of downloads."""
    observed: dict[str, int] = {}

    def settled() -> bool:
        for month in expected_totals:
            ranking = index_ranking(dynamodb, table_name, index_name, month, shards)
            observed[month] = sum(count for _, count in ranking)
        if any(observed[month] > expected for month, expected in expected_totals.items()):
            raise AssertionError(f"over-counted: observed {observed}, expected {expected_totals}")
        return observed == expected_totals

    try:
        poll_until(settled, timeout, describe=f"totals {expected_totals}")
    except NotSettled as error:
        raise NotSettled(f"{error}; last observed {observed}") from None
    return observed
