"""Requests at the calendar's edges and tokens a client rewrote: what the query function answers."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from boards import Boards
from index_reads import Layout
from leaderboard_core.buckets import Calendar
from tests.unit.conftest import create_table
from tests.unit.query.aggregates_on_moto import MONTH, load_boards
from tests.unit.query.test_query_verbs import Deployment


@pytest.mark.parametrize("event", [{"period": "year", "key": "0000"}, {"period": "month", "key": "0000-01"}])
def test_a_key_the_request_check_admits_at_the_calendars_start_answers_rather_than_failing(
    aws: None, event: dict[str, Any]
) -> None:
    # given a UTC deployment (the default) keeping months and years
    deployment = Deployment(create_table(fresh=True), Layout(1), Boards(("month", "year")))
    # when the first year or month the key format can name is asked for
    answer = deployment.ask(event)
    # then it is answered (an empty board) or refused as an invalid request, never an unhandled error
    assert answer.get("items") == [] or "error" in answer


@pytest.mark.parametrize(
    ("zone", "period", "key"),
    [
        ("Asia/Tokyo", "year", "0001"),
        ("Asia/Tokyo", "hour", "0001-01-01T00"),
        ("America/New_York", "hour", "9999-12-31T23"),
    ],
)
def test_a_bucket_at_the_calendars_edge_in_a_local_zone_answers_rather_than_failing(
    aws: None, zone: str, period: str, key: str
) -> None:
    deployment = Deployment(create_table(fresh=True), Layout(1), Boards((period,), calendar=Calendar(zone)))
    answer = deployment.ask({"period": period, "key": key})
    assert answer.get("items") == [] or "error" in answer


def rewritten(token: str, change: Any) -> str:
    text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    fields = text.split("|")
    fields[-1] = change(fields[-1])
    return base64.urlsafe_b64encode("|".join(fields).encode()).decode().rstrip("=")


@pytest.mark.xfail(
    strict=True,
    reason="a page token under a rank policy carries the walk's state (listed, value, rank) unauthenticated; a client "
    "that rewrites the rank gets every later rank shifted, silently (the scope only checks 0 <= rank <= listed)",
)
def test_a_rewritten_policy_token_is_refused_or_still_ranks_exactly(aws: None) -> None:
    # given a board of six songs, 1, 2, 2, 4, 5, 6 under competition, its first page of two read
    dynamodb = create_table(fresh=True)
    values = {"a": 9, "b": 7, "c": 7, "d": 5, "e": 4, "f": 3}
    load_boards(dynamodb, {MONTH: values}, 1)
    deployment = Deployment(dynamodb, Layout(1), Boards())
    first = deployment.ask({"month": MONTH, "limit": 2, "rankPolicy": "competition"})
    token = first["next_token"]
    scope = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode().split("|")[-1]
    assert scope.startswith("~page.competition:2:")
    # when the client rewrites the walk's state it carries (entries listed 2 -> 5, the last rank 2 -> 5)
    forged = rewritten(token, lambda field: field.replace(":2:", ":5:", 1).rsplit(":", 1)[0] + ":5")
    answer = deployment.ask({"month": MONTH, "limit": 10, "rankPolicy": "competition", "next_token": forged})
    # then the token is refused, or the ranks are still the board's
    assert "error" in answer or [item["rank"] for item in answer["items"]] == [2, 4, 5, 6]
