from __future__ import annotations

import base64
import json
from typing import Any

import pytest

import query
from query import (
    IndexSchema,
    InvalidRequest,
    LeaderboardRequest,
    decode_token,
    encode_token,
    parse_request,
    query_leaderboard,
)
from tests.unit.conftest import TABLE

SCHEMA = IndexSchema()
JANUARY = {f"song{n:02d}": n * 3 + 1 for n in range(1, 26)}


@pytest.fixture
def leaderboard_table(dynamodb: Any) -> Any:
    """25 aggregates in January with distinct counts, 2 in February, and raw downloads that the index must not hold."""
    for month, counts in (("2018-01", JANUARY), ("2018-02", {"song01": 500, "song02": 1})):
        for song, count in counts.items():
            item = {
                "songID": {"S": song},
                "SK": {"S": month},
                "Month": {"S": month},
                "DownloadCount": {"N": str(count)},
            }
            dynamodb.put_item(TableName=TABLE, Item=item)
    dynamodb.put_item(
        TableName=TABLE, Item={"songID": {"S": "song01"}, "SK": {"S": "d1"}, "Timestamp": {"S": "2018-01-01T00:00:00Z"}}
    )
    return dynamodb


def ask(client: Any, request: dict[str, Any]) -> dict[str, Any]:
    return query_leaderboard(client, TABLE, SCHEMA, parse_request(request, SCHEMA))


def test_limit_one_is_the_top_song(leaderboard_table: Any) -> None:
    page = ask(leaderboard_table, {"month": "2018-01", "limit": 1})
    assert page["items"] == [{"songID": "song25", "downloadCount": 76}]
    assert page["month"] == "2018-01"


def test_top_ten_in_descending_order(leaderboard_table: Any) -> None:
    page = ask(leaderboard_table, {"month": "2018-01", "limit": 10})
    expected = sorted(JANUARY.items(), key=lambda item: -item[1])[:10]
    assert [(i["songID"], i["downloadCount"]) for i in page["items"]] == expected
    assert page["next_token"] is not None


def test_following_next_token_lists_every_song_once_in_order(leaderboard_table: Any) -> None:
    # given pages of 7, when next_token is followed until null
    listed: list[tuple[str, int]] = []
    request: dict[str, Any] = {"month": "2018-01", "limit": 7}
    for _ in range(10):
        page = ask(leaderboard_table, request)
        listed += [(i["songID"], i["downloadCount"]) for i in page["items"]]
        if page["next_token"] is None:
            break
        request = {**request, "next_token": page["next_token"]}
    # then all 25 January songs come back once, highest first, and nothing of February or raw downloads
    assert listed == sorted(JANUARY.items(), key=lambda item: -item[1])


def test_default_limit_returns_the_whole_small_month(leaderboard_table: Any) -> None:
    page = ask(leaderboard_table, {"month": "2018-02"})
    assert page == {
        "month": "2018-02",
        "items": [{"songID": "song01", "downloadCount": 500}, {"songID": "song02", "downloadCount": 1}],
        "next_token": None,
    }


def test_a_month_without_downloads_is_empty(leaderboard_table: Any) -> None:
    assert ask(leaderboard_table, {"month": "2019-07", "limit": 5}) == {
        "month": "2019-07",
        "items": [],
        "next_token": None,
    }


TOKEN_KEY = {"songID": {"S": "song10"}, "SK": {"S": "2018-01"}, "Month": {"S": "2018-01"}, "DownloadCount": {"N": "31"}}
VALID_TOKEN = encode_token(TOKEN_KEY)


@pytest.mark.parametrize(
    ("request_body", "message_fragment"),
    [
        ({}, "month is required"),
        ({"month": "2018-1"}, "month is required"),
        ({"month": "2018-13"}, "month is required"),
        ({"month": 201801}, "month is required"),
        ({"month": "2018-01", "limit": 0}, "limit must be"),
        ({"month": "2018-01", "limit": 1001}, "limit must be"),
        ({"month": "2018-01", "limit": "10"}, "limit must be"),
        ({"month": "2018-01", "limit": True}, "limit must be"),
        ({"month": "2018-01", "limit": 2.5}, "limit must be"),
        ({"month": "2018-01", "Limit": 3}, "unknown fields: Limit"),
        ({"month": "2018-01", "next_token": "%%%not-base64"}, "next_token"),
        ({"month": "2018-01", "next_token": base64.urlsafe_b64encode(b"[1,2]").decode()}, "next_token"),
        (
            {
                "month": "2018-01",
                "next_token": base64.urlsafe_b64encode(json.dumps({"songID": {"S": "x"}}).encode()).decode(),
            },
            "next_token",
        ),
        ({"month": "2018-01", "next_token": encode_token({**TOKEN_KEY, "DownloadCount": {"N": "3x1"}})}, "next_token"),
        ({"month": "2018-01", "next_token": encode_token({**TOKEN_KEY, "DownloadCount": {"S": "31"}})}, "next_token"),
        ({"month": "2018-02", "next_token": VALID_TOKEN}, "another month"),
        ({"month": "2018-01", "next_token": 12}, "next_token"),
        ({"month": "2018-01", "next_token": "A" * 5000}, "next_token"),
    ],
)
def test_bad_requests_are_refused_with_a_reason(request_body: dict[str, Any], message_fragment: str) -> None:
    with pytest.raises(InvalidRequest, match=message_fragment):
        parse_request(request_body, SCHEMA)


def test_a_token_round_trips_for_its_month() -> None:
    key = decode_token(VALID_TOKEN, "2018-01", SCHEMA)
    assert parse_request({"month": "2018-01", "next_token": VALID_TOKEN}, SCHEMA) == LeaderboardRequest(
        "2018-01", 100, key
    )


@pytest.mark.parametrize("event", [None, [], "2018-01", {"month": "bad"}, {"month": "2018-01", "next_token": "forged"}])
def test_the_handler_answers_bad_requests_with_an_error_object(
    event: Any, leaderboard_table: Any, monkeypatch: pytest.MonkeyPatch, lambda_context: Any
) -> None:
    # given the deployed handler, when invoked with a bad request, then it returns the error shape, not an exception
    monkeypatch.setattr(query, "_dynamodb", leaderboard_table)
    monkeypatch.setattr(query, "TABLE_NAME", TABLE)
    response = query.lambda_handler(event, lambda_context)
    assert set(response) == {"error"}
    assert response["error"]["code"] == "InvalidRequest"
    assert response["error"]["message"]


def test_the_handler_serves_a_valid_request(
    leaderboard_table: Any, monkeypatch: pytest.MonkeyPatch, lambda_context: Any
) -> None:
    monkeypatch.setattr(query, "_dynamodb", leaderboard_table)
    monkeypatch.setattr(query, "TABLE_NAME", TABLE)
    assert query.lambda_handler({"month": "2018-02", "limit": 1}, lambda_context)["items"] == [
        {"songID": "song01", "downloadCount": 500}
    ]
