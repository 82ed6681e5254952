"""The query role's BatchGetItem (among) decided by IAM's documented rules, as test_query_role_conditions.py decides
its GetItems and Queries: the among request the function really sends is allowed, a batch read of a download's
attributes is not, under both readings of dynamodb:Select."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import query
from boards import Boards
from index_reads import Layout
from tests.unit.conftest import TABLE, FakeLambdaContext
from tests.unit.query.aggregates_on_moto import load_boards
from tests.unit.terraform.iam_conditions import decide
from tests.unit.terraform.test_query_role_conditions import A_DOWNLOAD, READINGS, query_policy, request_of


def as_one_table_request(parameters: dict[str, Any]) -> dict[str, Any]:
    """A BatchGetItem's read of its table, shaped as request_of reads a GetItem (its keys' names are the same)."""
    ((table, asked),) = parameters["RequestItems"].items()
    return {"TableName": table, "Key": asked["Keys"][0]} | {
        name: asked[name] for name in ("ProjectionExpression", "ExpressionAttributeNames") if name in asked
    }


@pytest.fixture
def among_batch_reads(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    load_boards(dynamodb, {"2018-01": {"song01": 3, "song02": 5}}, 1)
    sent: list[dict[str, Any]] = []

    class Recording:
        def batch_get_item(self, **parameters: Any) -> Any:
            sent.append(copy.deepcopy(parameters))
            return dynamodb.batch_get_item(**parameters)

    monkeypatch.setattr(query, "_dynamodb", Recording())
    monkeypatch.setattr(query, "AGGREGATES_TABLE_NAME", TABLE)
    monkeypatch.setattr(query, "LAYOUT", Layout(1))
    monkeypatch.setattr(query, "BOARDS", Boards())
    answer = query.lambda_handler({"month": "2018-01", "among": ["song01", "song02", "song03"]}, FakeLambdaContext())
    assert [item["songID"] for item in answer["items"]] == ["song02", "song01", "song03"]
    return sent


@pytest.mark.parametrize("reading", READINGS)
def test_the_among_batch_read_the_function_sends_is_allowed(
    among_batch_reads: list[dict[str, Any]], reading: str
) -> None:
    (sent,) = among_batch_reads
    request = request_of("BatchGetItem", as_one_table_request(sent), reading)
    assert decide(query_policy(), request) == "Allow", request


@pytest.mark.parametrize("reading", READINGS)
@pytest.mark.parametrize("projection", [["UserID"], ["DownloadCount", "Timestamp"], None], ids=str)
def test_a_batch_read_of_a_downloads_attributes_is_denied(projection: list[str] | None, reading: str) -> None:
    parameters: dict[str, Any] = {"TableName": TABLE, "Key": {"songID": {"S": "song01"}, "SK": {"S": "d1"}}}
    if projection is not None:
        names = {f"#a{n}": name for n, name in enumerate(projection)}
        parameters |= {"ProjectionExpression": ", ".join(names), "ExpressionAttributeNames": names}
    request = request_of("BatchGetItem", parameters, reading, A_DOWNLOAD)
    assert decide(query_policy(), request) == "ImplicitDeny", request
