"""Requests to a deployment on New York's clock with seasons: which keys exist, the current bucket, and the board's
start and end in every kind of answer."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

import pytest

from boards import Boards, boards_from_environment
from index_reads import IndexSchema, Layout
from leaderboard_core.buckets import Calendar
from leaderboard_core.periods import Season
from query_kinds import parse_request
from request_parsing import InvalidRequest
from rolling_window import WindowRequest

SCHEMA = IndexSchema()
NEW_YORK = Boards(
    ("hour", "day", "month", "season", "all"),
    categories=True,
    calendar=Calendar("America/New_York", Season(date(2026, 1, 5), 28)),
)


def parsed(event: dict, now: datetime = datetime(2026, 3, 8, 12, tzinfo=UTC)):  # type: ignore[no-untyped-def]
    return parse_request(event, SCHEMA, Layout(1), NEW_YORK, now=lambda: now)


def test_the_module_s_environment_makes_a_local_calendar_with_seasons() -> None:
    boards = boards_from_environment(
        {
            "LEADERBOARD_PERIODS": "day,season",
            "LEADERBOARD_TIME_ZONE": "America/New_York",
            "LEADERBOARD_SEASON_START": "2026-01-05",
            "LEADERBOARD_SEASON_LENGTH_DAYS": "28",
        }
    )
    assert boards.periods == ("day", "season")
    assert boards.calendar == Calendar("America/New_York", Season(date(2026, 1, 5), 28))


@pytest.mark.parametrize(
    ("event", "refused"),
    [
        ({"period": "hour", "key": "2026-03-08T02"}, re.escape("YYYY-MM-DDTHH (America/New_York)")),
        ({"period": "season", "key": "S2026-01-06"}, "SYYYY-MM-DD"),
        ({"period": "season", "key": "2026-01-05"}, "SYYYY-MM-DD"),
        ({"period": "fortnight"}, "hour, day, week, month, year, season, all"),
    ],
)
def test_a_key_the_local_clock_or_the_seasons_never_reach_is_refused(event: dict, refused: str) -> None:
    with pytest.raises(InvalidRequest, match=refused):
        parsed(event)


def test_a_season_needs_the_deployment_s_seasons() -> None:
    with pytest.raises(InvalidRequest, match="keeps no season"):
        parse_request({"period": "season", "key": "S2026-01-05"}, SCHEMA, Layout(1), Boards(("day", "month")))


def test_the_current_bucket_is_the_local_one_and_before_the_first_season_there_is_none() -> None:
    # 2026-03-09T03:30Z is still the 8th in New York
    assert parsed({"period": "day"}, datetime(2026, 3, 9, 3, 30, tzinfo=UTC)).board.key == "2026-03-08"
    assert parsed({"period": "season"}, datetime(2026, 3, 9, 3, 30, tzinfo=UTC)).board.key == "S2026-03-02"
    with pytest.raises(InvalidRequest, match="no season has begun"):
        parsed({"period": "season"}, datetime(2026, 1, 5, 4, 59, tzinfo=UTC))


@pytest.mark.parametrize(
    ("event", "start", "end"),
    [
        (
            {"period": "day", "key": "2026-03-08", "songID": "s"},
            "2026-03-08T00:00:00-05:00",
            "2026-03-09T00:00:00-04:00",
        ),
        (
            {"period": "hour", "key": "2026-03-08T03", "limit": 5},
            "2026-03-08T03:00:00-04:00",
            "2026-03-08T04:00:00-04:00",
        ),
        ({"period": "month", "key": "2026-03", "size": True}, "2026-03-01T00:00:00-05:00", "2026-04-01T00:00:00-04:00"),
        (
            {"period": "season", "key": "S2026-03-02", "fromRank": 2},
            "2026-03-02T00:00:00-05:00",
            "2026-03-30T00:00:00-04:00",
        ),
        ({"period": "all", "songID": "s", "score": True}, None, None),
    ],
)
def test_every_kind_of_answer_names_when_its_board_begins_and_ends(
    event: dict, start: str | None, end: str | None
) -> None:
    board = parsed(event).board
    assert board.named() == {
        **{name: event[name] for name in ("period", "key") if name in event},
        "boardStart": start,
        "boardEnd": end,
    }


def test_the_guide_s_month_form_answers_unchanged() -> None:
    assert parsed({"month": "2026-03"}).board.named() == {"month": "2026-03"}


def test_a_rolling_window_of_hours_passes_over_the_hour_the_clocks_skipped() -> None:
    request = parsed({"period": "hour", "key": "2026-03-08T04", "last": 3})
    assert isinstance(request, WindowRequest)
    assert [board.key for board in request.boards()] == ["2026-03-08T04", "2026-03-08T03", "2026-03-08T01"]
    # three buckets of an hour each, the skipped one passed over: from 01:00 EST to 05:00 EDT
    assert request.span() == {"boardStart": "2026-03-08T01:00:00-05:00", "boardEnd": "2026-03-08T05:00:00-04:00"}
    seasons = parsed({"period": "season", "key": "S2026-02-02", "last": 3})
    assert [board.key for board in seasons.boards()] == ["S2026-02-02", "S2026-01-05"]  # type: ignore[union-attr]
