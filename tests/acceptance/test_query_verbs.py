"""Redis's leaderboard verbs on the emulator, through the query function and the operator CLI.

One stack keeps day, month and all-time boards, a category board per Genre, in three leaderboard shards. Downloads of
40 songs over two days (many with equal counts) are written, counted by the aggregator, and every answer is compared
with a recount of the raw records written: a range by rank (ZREVRANGE), a range by count (ZRANGEBYSCORE), a board's
size (ZCARD) and a song's count (ZSCORE), in table, JSON and text output, and listings resumed with --starting-token.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import invoke_function, poll_until
from leaderboard_dev.loadgen import write_items
from leaderboard_dev.observe import scan_all
from leaderboard_dev.settings import Endpoint, emulator_environment
from leaderboard_dev.terraform_stack import Stack
from leaderboard_tools import cli
from tests.acceptance.conftest import stack

SHARDS = 3
DAYS = ["2021-03-14", "2021-03-15"]
GENRES = ["jazz", "folk", None]
SONGS = [f"song{n:03d}" for n in range(36)] + [f"international-hit-{n}" for n in range(4)]
"""40 songs; the four international hits share the index's 10-byte tie-breaker."""

Board = tuple[str, str | None]
"""(board's bucket: a day, the month or all, the genre or None)."""


@pytest.fixture(scope="module")
def deployment(endpoint: Endpoint) -> Iterator[tuple[Stack, dict[str, Any]]]:
    with stack(
        endpoint,
        "verbs",
        batch_size=100,
        leaderboard_periods=["day", "month", "all"],
        category_attribute_name="Genre",
        leaderboard_shards=SHARDS,
    ) as deployed_stack:
        yield deployed_stack


@pytest.fixture(scope="module")
def loaded(deployment: tuple[Stack, dict[str, Any]], aws: Clients) -> dict[str, Any]:
    """360 downloads written shuffled, and their recount per board; waits until the index holds exactly the recount."""
    _, outputs = deployment
    rng = random.Random(29)
    items, recount = [], dict[Board, Counter[str]]()
    for number in range(360):
        song = SONGS[min(int(rng.expovariate(0.08)), len(SONGS) - 1)]
        day, genre = rng.choice(DAYS), rng.choice(GENRES)
        item = {
            "songID": {"S": song},
            "SK": {"S": f"download-{number:05d}"},
            "UserID": {"S": f"user{number % 17}"},
            "Timestamp": {"S": f"{day}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:00Z"},
        }
        if genre is not None:
            item["Genre"] = {"S": genre}
        items.append(item)
        for bucket in (day, day[:7], "all"):
            for board in {None, genre}:
                recount.setdefault((bucket, board), Counter())[song] += 1
    rng.shuffle(items)
    write_items(aws.dynamodb, outputs["table_name"], items)
    expected = {
        (board_id(bucket, genre), song): count
        for (bucket, genre), counts in recount.items()
        for song, count in counts.items()
    }

    def settled() -> bool:
        index = scan_all(aws, TableName=outputs["table_name"], IndexName=outputs["leaderboard_index_name"])
        return {(item["SK"]["S"], item["songID"]["S"]): int(item["DownloadCount"]["N"]) for item in index} == expected

    poll_until(settled, timeout=300, interval=3, describe=f"{len(expected)} aggregates of {len(items)} downloads")
    return {"recount": recount, "outputs": outputs}


def board_id(bucket: str, genre: str | None) -> str:
    return bucket if genre is None else f"{bucket}@{quote(genre, safe='')}"


def ranking(counts: Counter[str]) -> list[tuple[str, int]]:
    """The independent order: most downloads first, equal counts by song id (UTF-8 bytes)."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0].encode()))


def board_flags(bucket: str, genre: str | None) -> list[str]:
    if bucket == "all":
        flags = ["--period", "all"]
    elif len(bucket) == len("2021-03"):
        flags = ["--month", bucket]
    else:
        flags = ["--period", "day", "--key", bucket]
    return flags + (["--category", genre] if genre is not None else [])


def board_event(bucket: str, genre: str | None) -> dict[str, Any]:
    if bucket == "all":
        event: dict[str, Any] = {"period": "all"}
    elif len(bucket) == len("2021-03"):
        event = {"month": bucket}
    else:
        event = {"period": "day", "key": bucket}
    return event | ({"category": genre} if genre is not None else {})


BOARDS: list[Board] = [("2021-03", None), ("all", None), (DAYS[0], None), (DAYS[1], "jazz"), ("2021-03", "folk")]


@pytest.fixture
def cli_environment(endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a person sets to point boto3's standard session at the emulator."""
    for name, value in emulator_environment(endpoint).items():
        monkeypatch.setenv(name, value)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def table_rows(out: str) -> list[list[str]]:
    """A printed table's body rows, an id folded over several lines joined (its count is on its first line)."""
    rows: list[list[str]] = []
    for line in out.splitlines():
        if not line.startswith("│"):
            continue
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if rows and cells[-1] == "":
            rows[-1] = [before + after for before, after in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
    return rows


def printed(out: str, output: str) -> tuple[list[list[str]], str | None]:
    """The rows a listing printed, in any of the three formats, and the NextToken it printed (None: complete)."""
    if output == "json":
        document = json.loads(out)
        return [
            ([str(item["rank"])] if "rank" in item else []) + [item["songID"], str(item["downloadCount"])]
            for item in document["items"]
        ], document["next_token"]
    if output == "text":
        lines = [line.split("\t") for line in out.splitlines()]
        tokens = [line[1] for line in lines if line[0] == "NEXTTOKEN"]
        return [line for line in lines if line[0] != "NEXTTOKEN"], (tokens or [None])[0]
    match = re.search(r"^NextToken: (\S+)$", out, flags=re.MULTILINE)
    return table_rows(out), match[1] if match else None


# ---------------------------------------------------------------- the function: every board, every verb


@pytest.mark.parametrize(("bucket", "genre"), BOARDS)
def test_the_functions_verbs_answer_each_boards_recount(
    loaded: dict[str, Any], aws: Clients, bucket: str, genre: str | None
) -> None:
    function = loaded["outputs"]["query_function_name"]
    counts = loaded["recount"][(bucket, genre)]
    ordered = ranking(counts)
    event = board_event(bucket, genre)
    # a range by rank, read in pages of 4: the recount's places, each with its rank
    listed: list[dict[str, Any]] = []
    request = {**event, "fromRank": 3, "toRank": 17, "limit": 4}
    for _ in range(50):
        answer = invoke_function(aws.lambda_, function, request)
        assert "error" not in answer, answer
        listed += answer["items"]
        if answer["next_token"] is None:
            break
        request = {**request, "next_token": answer["next_token"]}
    assert [(item["songID"], item["downloadCount"], item["rank"]) for item in listed] == [
        (song, count, place) for place, (song, count) in enumerate(ordered, start=1)
    ][2:17]
    # a range by count: the songs of the recount with 2 to 5 downloads, most first
    answer = invoke_function(aws.lambda_, function, {**event, "minCount": 2, "maxCount": 5})
    assert [(item["songID"], item["downloadCount"]) for item in answer["items"]] == [
        (song, count) for song, count in ordered if 2 <= count <= 5
    ]
    # the board's size, and each song's count (or not on the board)
    assert invoke_function(aws.lambda_, function, {**event, "size": True})["size"] == len(counts)
    for song in (ordered[0][0], ordered[-1][0], "never-downloaded"):
        answer = invoke_function(aws.lambda_, function, {**event, "songID": song, "score": True})
        assert (answer["downloadCount"], answer["onBoard"]) == (counts.get(song, 0), song in counts)


# ---------------------------------------------------------------- the CLI: each verb in each format


@pytest.mark.parametrize("output", ["table", "json", "text"])
def test_the_cli_lists_a_range_by_rank_and_by_count_as_the_recount_in_each_format(
    loaded: dict[str, Any], cli_environment: None, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    table = loaded["outputs"]["table_name"]
    for bucket, genre in (("2021-03", None), (DAYS[1], "jazz")):
        ordered = ranking(loaded["recount"][(bucket, genre)])
        flags = ["--table", table, *board_flags(bucket, genre), "--output", output]
        # ranks 4 to 15, in pages of 5
        code, out, _ = run_cli(["range", *flags, "--from-rank", "4", "--to-rank", "15", "--page-size", "5"], capsys)
        assert code == 0
        rows, token = printed(out, output)
        assert token is None
        assert rows == [[str(place), song, str(count)] for place, (song, count) in enumerate(ordered, start=1)][3:15]
        # every song with 3 to 6 downloads
        code, out, _ = run_cli(["range-by-count", *flags, "--min-count", "3", "--max-count", "6"], capsys)
        assert code == 0
        rows, token = printed(out, output)
        assert rows == [[song, str(count)] for song, count in ordered if 3 <= count <= 6]


@pytest.mark.parametrize("output", ["table", "json", "text"])
def test_the_cli_says_a_boards_size_and_a_songs_count_in_each_format(
    loaded: dict[str, Any], cli_environment: None, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    table = loaded["outputs"]["table_name"]
    counts = loaded["recount"][("all", None)]
    flags = ["--table", table, "--period", "all", "--output", output]
    code, out, _ = run_cli(["card", *flags], capsys)
    assert code == 0
    size = {"json": lambda: json.loads(out)["size"], "text": lambda: int(out), "table": lambda: int(out.split()[-2])}
    assert size[output]() == len(counts)
    song, count = ranking(counts)[5]
    code, out, _ = run_cli(["score", *flags, "--song", song], capsys)
    assert code == 0
    if output == "json":
        assert json.loads(out) == {
            "period": "all",
            "boardStart": None,
            "boardEnd": None,
            "songID": song,
            "downloadCount": count,
            "onBoard": True,
        }
    elif output == "text":
        assert out == f"{song}\t{count}\tTrue\n"
    else:
        assert table_rows(out) == [[song, str(count)]]
    code, out, _ = run_cli(["score", *flags, "--song", "never-downloaded"], capsys)
    assert code == 0
    absent = {
        "json": lambda: json.loads(out)["onBoard"] is False,
        "text": lambda: out == "never-downloaded\t0\tFalse\n",
        "table": lambda: "never-downloaded: not on this board" in out and not table_rows(out),
    }
    assert absent[output](), out


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["all"], lambda ordered: [[str(p), s, str(c)] for p, (s, c) in enumerate(ordered, start=1)]),
        (
            ["range", "--from-rank", "6", "--to-rank", "31"],
            lambda ordered: [[str(p), s, str(c)] for p, (s, c) in enumerate(ordered, start=1)][5:31],
        ),
        (["range-by-count", "--max-count", "9"], lambda ordered: [[s, str(c)] for s, c in ordered if c <= 9]),
    ],
    ids=["all", "range", "range-by-count"],
)
@pytest.mark.parametrize("output", ["table", "json", "text"])
def test_max_items_and_starting_token_join_to_the_whole_listing(
    loaded: dict[str, Any],
    cli_environment: None,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    expected: Any,
    output: str,
) -> None:
    # given the month's overall board, listed 7 entries at a time in pages of 3
    ordered = ranking(loaded["recount"][("2021-03", None)])
    argv = [command[0], "--table", loaded["outputs"]["table_name"], "--month", "2021-03", *command[1:]]
    argv += ["--output", output, "--page-size", "3", "--max-items", "7"]
    listed: list[list[str]] = []
    token: str | None = None
    stops = 0
    for _ in range(30):
        code, out, _ = run_cli([*argv, *(["--starting-token", token] if token else [])], capsys)
        assert code == 0
        rows, token = printed(out, output)
        assert len(rows) <= 7
        listed += rows
        stops += 1
        if token is None:
            break
    # then the pieces, each resumed from the NextToken the one before printed, are the whole listing
    assert listed == expected(ordered)
    assert stops > 1


def test_the_cli_refuses_a_malformed_month_and_names_a_missing_function(
    loaded: dict[str, Any], cli_environment: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["range", "--table", loaded["outputs"]["table_name"], "--month", "2018-13"])
    assert exited.value.code == 2
    assert "not a month" in capsys.readouterr().err
    code, _, err = run_cli(["top", "--function", "nosuch", "--month", "2021-03"], capsys)
    assert code == 1
    assert "the query function nosuch does not exist" in err
