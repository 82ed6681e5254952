"""Boards on New York's local clock, with seasons, on the emulator: every board is its recount by local time.

One stack keeps day, month and season boards (28-day seasons from 2026-01-05) overall and per Genre, with
leaderboard_time_zone = "America/New_York". Downloads span the night the clocks went forward (2026-03-08),
local month ends that are another UTC day, season boundaries and the hour before the first season. The
recount reads New York's clock from the test's own table (the offsets before and after 2026-03-08T07:00Z),
not from the product's buckets; every answer's boardStart and boardEnd are the test's own too.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest

from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import invoke_function, poll_until
from leaderboard_dev.loadgen import write_items
from leaderboard_dev.observe import scan_all
from leaderboard_dev.settings import Endpoint
from leaderboard_dev.terraform_stack import Stack
from tests.acceptance.conftest import stack

PERIODS = ["day", "month", "season"]
GENRES = ["rock", "r&b/soul", None]
SEASON_START, SEASON_DAYS = date(2026, 1, 5), 28
CLOCKS_FORWARD = datetime(2026, 3, 8, 7, tzinfo=UTC)
"""New York's clocks went from 02:00 EST to 03:00 EDT then; every moment here is in 2026, before November's change."""
EST, EDT = timedelta(hours=-5), timedelta(hours=-4)
MOMENTS = [
    datetime(2026, 1, 5, 4, 30, tzinfo=UTC),  # 2026-01-04 23:30 local: before the first season
    datetime(2026, 1, 5, 5, 30, tzinfo=UTC),  # the first season's first hour
    datetime(2026, 2, 1, 3, 0, tzinfo=UTC),  # 2026-01-31 22:00 local: January, though February in UTC
    datetime(2026, 3, 1, 4, 30, tzinfo=UTC),  # 2026-02-28 23:30 local: February and season S2026-02-02
    datetime(2026, 3, 2, 5, 30, tzinfo=UTC),  # the third season's first hour
    datetime(2026, 3, 8, 4, 30, tzinfo=UTC),  # 2026-03-07 23:30 EST
    datetime(2026, 3, 8, 6, 30, tzinfo=UTC),  # 01:30 EST, the last hour before the change
    datetime(2026, 3, 8, 7, 30, tzinfo=UTC),  # 03:30 EDT, the first after it
    datetime(2026, 3, 9, 3, 30, tzinfo=UTC),  # 2026-03-08 23:30 EDT: the 23-hour day's last hour
    datetime(2026, 3, 9, 4, 30, tzinfo=UTC),  # 2026-03-09 00:30 EDT
    datetime(2026, 3, 30, 3, 30, tzinfo=UTC),  # 2026-03-29 23:30 EDT: the third season's last hour
    datetime(2026, 4, 1, 3, 30, tzinfo=UTC),  # 2026-03-31 23:30 EDT: March, though April in UTC
    datetime(2026, 4, 1, 4, 30, tzinfo=UTC),  # 2026-04-01 00:30 EDT
]


def new_york_offset(moment: datetime) -> timedelta:
    return EST if moment < CLOCKS_FORWARD else EDT


def local_keys(moment: datetime) -> dict[str, str | None]:
    """The test's own New York buckets of a moment: its local day and month, and its season (none before the first)."""
    wall = moment + new_york_offset(moment)
    seasons_begun = (wall.date() - SEASON_START).days // SEASON_DAYS
    season = f"S{SEASON_START + timedelta(days=seasons_begun * SEASON_DAYS)}" if seasons_begun >= 0 else None
    return {"day": wall.strftime("%Y-%m-%d"), "month": wall.strftime("%Y-%m"), "season": season}


def local_midnight(day: date) -> str:
    """Midnight of a local day as the contract writes it: its offset is EST's up to the day of the change."""
    return f"{day.isoformat()}T00:00:00{'-05:00' if day <= date(2026, 3, 8) else '-04:00'}"


def expected_span(period: str, key: str) -> dict[str, str]:
    if period == "day":
        first = date.fromisoformat(key)
        after = first + timedelta(days=1)
    elif period == "month":
        first = date(int(key[:4]), int(key[5:7]), 1)
        after = date(first.year + first.month // 12, first.month % 12 + 1, 1)
    else:
        first = date.fromisoformat(key[1:])
        after = first + timedelta(days=SEASON_DAYS)
    return {"boardStart": local_midnight(first), "boardEnd": local_midnight(after)}


@pytest.fixture(scope="module")
def deployment(endpoint: Endpoint) -> Iterator[tuple[Stack, dict[str, Any]]]:
    with stack(
        endpoint,
        "localtime",
        batch_size=100,
        leaderboard_periods=PERIODS,
        leaderboard_time_zone="America/New_York",
        leaderboard_season={"start": SEASON_START.isoformat(), "length_days": SEASON_DAYS},
        category_attribute_name="Genre",
    ) as deployed_stack:
        yield deployed_stack


Recount = dict[tuple[str, str, str | None], Counter[str]]
"""(period, key, genre or None for the overall board) -> song -> downloads."""


@pytest.fixture(scope="module")
def loaded(deployment: tuple[Stack, dict[str, Any]], aws: Clients) -> dict[str, Any]:
    """Downloads at every moment above (some written with New York's offset), shuffled; waits until the index holds
    the recount's aggregates."""
    _, outputs = deployment
    rng = random.Random(40)
    songs = [f"song{n}" for n in range(6)]
    items, recount = [], Recount()
    for number in range(240):
        song = songs[min(int(rng.expovariate(0.6)), len(songs) - 1)]
        moment = rng.choice(MOMENTS) + timedelta(seconds=rng.randint(0, 1799))
        genre = rng.choice(GENRES)
        written = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        if number % 3 == 0:
            written = (moment + new_york_offset(moment)).strftime("%Y-%m-%dT%H:%M:%S") + (
                "-05:00" if new_york_offset(moment) == EST else "-04:00"
            )
        item = {"songID": {"S": song}, "SK": {"S": f"download-{number:05d}"}, "Timestamp": {"S": written}}
        if genre is not None:
            item["Genre"] = {"S": genre}
        items.append(item)
        for period, key in local_keys(moment).items():
            if key is not None:
                for board in {None, genre}:
                    recount.setdefault((period, key, board), Counter())[song] += 1
    rng.shuffle(items)
    write_items(aws.dynamodb, outputs["table_name"], items)
    expected = {
        (key if genre is None else f"{key}@{quote(genre, safe='')}", song): count
        for (_, key, genre), counts in recount.items()
        for song, count in counts.items()
    }

    def settled() -> bool:
        index = scan_all(aws, TableName=outputs["table_name"], IndexName=outputs["leaderboard_index_name"])
        return {(item["SK"]["S"], item["songID"]["S"]): int(item["DownloadCount"]["N"]) for item in index} == expected

    poll_until(settled, timeout=300, interval=3, describe=f"{len(expected)} aggregates of {len(items)} downloads")
    return {"recount": recount, "function": outputs["query_function_name"]}


def ranking(counts: Counter[str]) -> list[dict[str, Any]]:
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0].encode()))
    return [{"songID": song, "downloadCount": count} for song, count in ordered]


def board_event(period: str, key: str, genre: str | None) -> dict[str, Any]:
    return {"period": period, "key": key} | ({"category": genre} if genre is not None else {})


def test_every_local_board_is_its_recount_by_new_york_time_and_names_when_it_begins_and_ends(
    loaded: dict[str, Any], aws: Clients
) -> None:
    # given every board the downloads touched by the recount's own New York clock
    recount: Recount = loaded["recount"]
    assert {("day", "2026-03-08", None), ("month", "2026-03", None), ("season", "S2026-03-02", None)} <= set(recount)
    for (period, key, genre), counts in recount.items():
        # when the query function lists it whole
        answer = invoke_function(aws.lambda_, loaded["function"], {**board_event(period, key, genre), "limit": 1000})
        # then it is its recount, and names the local midnights it runs between
        assert answer["items"] == ranking(counts), (period, key, genre)
        assert {name: answer[name] for name in ("boardStart", "boardEnd")} == expected_span(period, key), answer


def test_the_day_clocks_went_forward_is_23_hours_and_the_local_month_end_is_not_the_utc_one(
    loaded: dict[str, Any], aws: Clients
) -> None:
    recount: Recount = loaded["recount"]
    day = invoke_function(aws.lambda_, loaded["function"], {"period": "day", "key": "2026-03-08", "limit": 1})
    assert (day["boardStart"], day["boardEnd"]) == ("2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00")
    # 2026-03-31 23:30 EDT is in March's board, and in no April board: April's holds only its own local day
    assert sum(recount[("month", "2026-04", None)].values()) == sum(recount[("day", "2026-04-01", None)].values())
    march = invoke_function(aws.lambda_, loaded["function"], {"period": "month", "key": "2026-03", "limit": 1000})
    assert march["items"] == ranking(recount[("month", "2026-03", None)])
    # a rolling window of days across the change is the sum of the three local days
    window = invoke_function(aws.lambda_, loaded["function"], {"period": "day", "key": "2026-03-09", "last": 3})
    total: Counter[str] = Counter()
    for key in ("2026-03-09", "2026-03-08", "2026-03-07"):
        total.update(recount.get(("day", key, None), Counter()))
    assert window["items"] == ranking(total)[:10]
    assert window["complete"] is True
    assert (window["boardStart"], window["boardEnd"]) == ("2026-03-07T00:00:00-05:00", "2026-03-10T00:00:00-04:00")


def test_a_download_before_the_first_season_is_in_no_season_board(loaded: dict[str, Any], aws: Clients) -> None:
    recount: Recount = loaded["recount"]
    seasons = sum(
        sum(counts.values()) for (period, _, genre), counts in recount.items() if period == "season" and not genre
    )
    months = sum(
        sum(counts.values()) for (period, _, genre), counts in recount.items() if period == "month" and not genre
    )
    # the recount's downloads in no season are exactly those of 2026-01-04, the local day before the first season;
    # the index held exactly the recount's aggregates (loaded), so the aggregator counted them in no season board
    assert 0 < recount[("day", "2026-01-04", None)].total() == months - seasons
    # and a season key is its first local day: one that begins no season is refused, the first season ranks
    refused = invoke_function(aws.lambda_, loaded["function"], {"period": "season", "key": "S2026-01-06"})
    assert refused["error"]["code"] == "InvalidRequest"
    first = ranking(recount[("season", "S2026-01-05", None)])[0]
    rank = invoke_function(
        aws.lambda_, loaded["function"], {"period": "season", "key": "S2026-01-05", "songID": first["songID"]}
    )
    assert (rank["downloadCount"], rank["rank"]) == (first["downloadCount"], 1)
    assert (rank["boardStart"], rank["boardEnd"]) == ("2026-01-05T00:00:00-05:00", "2026-02-02T00:00:00-05:00")
