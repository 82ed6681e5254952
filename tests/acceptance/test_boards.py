"""Every board on the emulator: periods, categories, around me, rolling windows, and the CLI.

One stack keeps every period and a category board per Genre, in two leaderboard shards. Downloads
span hours, days, the ISO weeks around a new year (2019-12-30 is in 2020-W01), two months, two
years and three genres (and none); every answer is compared with a recount of the raw records.
"""

from __future__ import annotations

import json
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
from leaderboard_dev.settings import Endpoint, emulator_environment
from leaderboard_dev.terraform_stack import Stack
from leaderboard_tools import cli
from tests.acceptance.conftest import stack

PERIODS = ["hour", "day", "week", "month", "year", "all"]
GENRES = ["rock", "pop", "r&b/soul", None]
SHARDS = 2
HOURS = [
    datetime(2019, 12, 29, 22, tzinfo=UTC),  # a Sunday: 2019-W52
    datetime(2019, 12, 30, 9, tzinfo=UTC),  # a Monday: 2020-W01, in 2019
    datetime(2019, 12, 31, 23, tzinfo=UTC),
    datetime(2020, 1, 1, 0, tzinfo=UTC),
    datetime(2020, 1, 1, 1, tzinfo=UTC),
    datetime(2020, 1, 2, 12, tzinfo=UTC),
    datetime(2020, 1, 15, 8, tzinfo=UTC),
]
"""Hours with downloads: several per day, days in three ISO weeks, two months, two years."""


@pytest.fixture(scope="module")
def deployment(endpoint: Endpoint) -> Iterator[tuple[Stack, dict[str, Any]]]:
    with stack(
        endpoint,
        "boards",
        batch_size=100,
        leaderboard_periods=PERIODS,
        category_attribute_name="Genre",
        leaderboard_shards=SHARDS,
    ) as deployed_stack:
        yield deployed_stack


Recount = dict[tuple[str, str, str | None], Counter[str]]
"""(period, key, genre or None for the overall board) -> song -> downloads."""


@pytest.fixture(scope="module")
def loaded(deployment: tuple[Stack, dict[str, Any]], aws: Clients) -> dict[str, Any]:
    """Downloads with ties, some without a genre, written shuffled; waits until the all-time boards hold them all."""
    _, outputs = deployment
    rng = random.Random(16)
    songs = [f"song{n:02d}" for n in range(10)] + ["international-hit-1", "international-hit-2"]
    items, recount = [], Recount()
    for number in range(420):
        song = songs[min(int(rng.expovariate(0.35)), len(songs) - 1)]
        moment = rng.choice(HOURS) + timedelta(minutes=rng.randint(0, 59))
        genre = rng.choice(GENRES)
        item = {
            "songID": {"S": song},
            "SK": {"S": f"download-{number:05d}"},
            "UserID": {"S": f"user{number % 31}"},
            "Timestamp": {"S": moment.strftime("%Y-%m-%dT%H:%M:%SZ")},
        }
        if genre is not None:
            item["Genre"] = {"S": genre}
        items.append(item)
        for period in PERIODS:
            for board in {None, genre}:
                recount.setdefault((period, bucket(moment, period), board), Counter())[song] += 1
    write_items(aws.dynamodb, outputs["table_name"], items)
    expected = {
        (board_id(key, genre), song): count
        for (_, key, genre), counts in recount.items()
        for song, count in counts.items()
    }

    def settled() -> bool:
        index = scan_all(aws, TableName=outputs["table_name"], IndexName=outputs["leaderboard_index_name"])
        return {(item["SK"]["S"], item["songID"]["S"]): int(item["DownloadCount"]["N"]) for item in index} == expected

    poll_until(settled, timeout=300, interval=3, describe=f"{len(expected)} aggregates of {len(items)} downloads")
    return {"recount": recount, "downloads": len(items), "outputs": outputs}


def board_id(key: str, genre: str | None) -> str:
    """The layout's board id: the bucket, or `<bucket>@<genre>` percent-encoded."""
    return key if genre is None else f"{key}@{quote(genre, safe='')}"


def ranking(counts: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda item: (-item[1], item[0].encode()))


def board_event(period: str, key: str, genre: str | None) -> dict[str, Any]:
    event: dict[str, Any] = {"period": period} if period == "all" else {"period": period, "key": key}
    return event | ({"category": genre} if genre is not None else {})


def every_page(aws: Clients, function: str, event: dict[str, Any], limit: int) -> list[tuple[str, int]]:
    listed: list[tuple[str, int]] = []
    request = {**event, "limit": limit}
    for _ in range(1000):
        page = invoke_function(aws.lambda_, function, request)
        assert "error" not in page, page
        listed += [(item["songID"], item["downloadCount"]) for item in page["items"]]
        if page["next_token"] is None:
            return listed
        request = {**event, "limit": limit, "next_token": page["next_token"]}
    raise AssertionError("pagination did not end")


def test_every_board_of_every_period_and_category_is_its_recount(loaded: dict[str, Any], aws: Clients) -> None:
    function = loaded["outputs"]["query_function_name"]
    # given every board the downloads touched, when each is listed whole, then it is its recount
    for (period, key, genre), counts in loaded["recount"].items():
        assert every_page(aws, function, board_event(period, key, genre), 1000) == ranking(counts), (period, key, genre)


@pytest.mark.parametrize("limit", [1, 4])
def test_the_overall_boards_page_exactly_at_small_page_sizes(loaded: dict[str, Any], aws: Clients, limit: int) -> None:
    function = loaded["outputs"]["query_function_name"]
    for (period, key, genre), counts in loaded["recount"].items():
        if genre is None and period in ("week", "year", "all"):
            assert every_page(aws, function, board_event(period, key, genre), limit) == ranking(counts)


def test_the_iso_week_of_new_years_eve_holds_the_monday_of_2019(loaded: dict[str, Any], aws: Clients) -> None:
    # given downloads on Monday 2019-12-30 and Wednesday 2020-01-01: both in 2020-W01
    function = loaded["outputs"]["query_function_name"]
    week = every_page(aws, function, {"period": "week", "key": "2020-W01"}, 1000)
    expected = loaded["recount"][("week", "2020-W01", None)]
    assert week == ranking(expected)
    assert sum(expected.values()) > sum(loaded["recount"].get(("day", "2019-12-30", None), Counter()).values())


def test_month_requests_read_the_same_boards(loaded: dict[str, Any], aws: Clients) -> None:
    function = loaded["outputs"]["query_function_name"]
    month = every_page(aws, function, {"month": "2020-01"}, 3)
    assert month == ranking(loaded["recount"][("month", "2020-01", None)])
    page = invoke_function(aws.lambda_, function, {"month": "2020-01", "limit": 1})
    assert list(page) == ["month", "items", "next_token"]


@pytest.mark.parametrize(
    ("period", "key", "genre"),
    [("all", "all", None), ("day", "2020-01-01", None), ("week", "2020-W01", "rock"), ("hour", "2019-12-30T09", None)],
)
def test_around_me_is_the_recounts_neighbourhood(
    loaded: dict[str, Any], aws: Clients, period: str, key: str, genre: str | None
) -> None:
    function = loaded["outputs"]["query_function_name"]
    ordered = ranking(loaded["recount"][(period, key, genre)])
    for place, (song, count) in enumerate(ordered):
        for around in (0, 2):
            answer = invoke_function(
                aws.lambda_, function, {**board_event(period, key, genre), "songID": song, "around": around}
            )
            first = max(0, place - around)
            assert (answer["downloadCount"], answer["rank"]) == (count, place + 1)
            assert answer["items"] == [
                {"songID": entity, "downloadCount": value, "rank": first + offset + 1}
                for offset, (entity, value) in enumerate(ordered[first : place + around + 1])
            ]


def window_recount(loaded: dict[str, Any], period: str, keys: list[str], genre: str | None) -> list[tuple[str, int]]:
    total: Counter[str] = Counter()
    for key in keys:
        total.update(loaded["recount"].get((period, key, genre), Counter()))
    return ranking(total)


WINDOWS = [
    ("day", "2020-01-02", 3, ["2020-01-02", "2020-01-01", "2019-12-31"]),
    ("day", "2020-01-15", 7, ["2020-01-15", *[f"2020-01-{day:02d}" for day in range(9, 15)]]),
    ("day", "2020-01-01", 4, ["2020-01-01", "2019-12-31", "2019-12-30", "2019-12-29"]),
    ("hour", "2020-01-01T01", 3, ["2020-01-01T01", "2020-01-01T00", "2019-12-31T23"]),
    ("week", "2020-W01", 2, ["2020-W01", "2019-W52"]),
    ("month", "2020-01", 2, ["2020-01", "2019-12"]),
    ("year", "2020", 2, ["2020", "2019"]),
]


@pytest.mark.parametrize(("period", "key", "last", "keys"), WINDOWS)
@pytest.mark.parametrize("genre", [None, "pop"])
def test_every_rolling_window_is_the_recounts_top(
    loaded: dict[str, Any], aws: Clients, period: str, key: str, last: int, keys: list[str], genre: str | None
) -> None:
    function = loaded["outputs"]["query_function_name"]
    for limit in (1, 3, 10):
        event = {**board_event(period, key, genre), "last": last, "limit": limit}
        answer = invoke_function(aws.lambda_, function, event)
        assert answer["complete"] is True, answer
        assert [(item["songID"], item["downloadCount"]) for item in answer["items"]] == window_recount(
            loaded, period, keys, genre
        )[:limit]
        assert answer["reads"]["queries"] >= 1


def test_a_period_or_category_the_stack_does_not_keep_is_refused(loaded: dict[str, Any], aws: Clients) -> None:
    function = loaded["outputs"]["query_function_name"]
    for event in ({"period": "day", "key": "2020-02-30"}, {"period": "all", "last": 2}, {"period": "fortnight"}):
        assert invoke_function(aws.lambda_, function, event)["error"]["code"] == "InvalidRequest"


# ---------------------------------------------------------------- the CLI against the deployed stack


@pytest.fixture
def cli_environment(endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a person sets to point boto3's standard session at the emulator."""
    for name, value in emulator_environment(endpoint).items():
        monkeypatch.setenv(name, value)


def test_the_cli_prints_a_rolling_window_as_a_table_and_as_json(
    loaded: dict[str, Any], aws: Clients, cli_environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
    table = loaded["outputs"]["table_name"]
    argv = ["top", "--table", table, "--period", "day", "--key", "2020-01-02", "--last", "3", "--limit", "5"]
    # when a person asks for the top 5 of three days, as a table
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    expected = window_recount(loaded, "day", ["2020-01-02", "2020-01-01", "2019-12-31"], None)[:5]
    rows = [line.split() for line in printed.splitlines() if line.startswith("│")]
    # then each place, song and count is in its column
    assert [(row[1], row[3], row[5]) for row in rows] == [
        (str(place), song, str(count)) for place, (song, count) in enumerate(expected, start=1)
    ]
    # and with --json the function's response, unchanged
    assert cli.main([*argv, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    direct = invoke_function(
        aws.lambda_,
        loaded["outputs"]["query_function_name"],
        {"period": "day", "key": "2020-01-02", "limit": 5, "last": 3},
    )
    assert answer == direct


def test_the_cli_ranks_a_song_of_a_category_with_its_neighbours(
    loaded: dict[str, Any], cli_environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
    table = loaded["outputs"]["table_name"]
    ordered = ranking(loaded["recount"][("week", "2020-W01", "rock")])
    song, count = ordered[1]
    argv = ["rank", "--table", table, "--period", "week", "--key", "2020-W01", "--category", "rock", "--song", song]
    assert cli.main([*argv, "--around", "1", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["rank"], answer["downloadCount"]) == (2, count)
    assert [item["songID"] for item in answer["items"]] == [entity for entity, _ in ordered[:3]]
    assert cli.main([*argv, "--around", "1"]) == 0
    assert f"{song}: {count} (rank 2)" in capsys.readouterr().out
