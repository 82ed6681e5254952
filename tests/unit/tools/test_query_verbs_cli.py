"""`leaderboard-tools range|range-by-count|card|score`, and what every board command now shares: `--output
json|table|text`, the AWS CLI's paging (`--max-items`, `--starting-token`), listings printed as their pages arrive,
flags checked before anything is asked (exit 2), a missing function named as missing, a closed pipe and Ctrl-C."""

from __future__ import annotations

import io
import json
import re
import sys
from typing import Any

import pytest
from botocore.exceptions import ClientError

import board_size
import entity_rank
import leaderboard_page
import query
import rank_range
import rolling_window
from boards import Boards
from index_reads import Layout
from leaderboard_core.periods import PERIODS
from leaderboard_tools import cli
from leaderboard_tools.commands import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, leaderboards
from tests.unit.conftest import TABLE
from tests.unit.query.aggregates_on_moto import load_boards
from tests.unit.tools.test_board_commands import FailingLambda, StubLambda, command, rows_of

SONGS = {
    **{f"song{n:02d}": 1 + (n * 7) % 9 for n in range(1, 24)},
    "a-song-with-a-rather-long-identifier": 5,
    "international-hit-1": 4,
    "international-hit-2": 4,
}
"""26 songs, counts 1-9 with ties, ids of several lengths (two sharing the tie-breaker's 10 bytes)."""
LISTING = sorted(SONGS.items(), key=lambda item: (-item[1], item[0].encode()))
DAY = "2018-01-15"


@pytest.fixture
def stub(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> StubLambda:
    """A deployment keeping every period and categories, in 3 leaderboard shards, and its query function."""
    monkeypatch.setattr(query, "_dynamodb", dynamodb)
    monkeypatch.setattr(query, "AGGREGATES_TABLE_NAME", TABLE)
    monkeypatch.setattr(query, "LAYOUT", Layout(3))
    monkeypatch.setattr(query, "BOARDS", Boards(PERIODS, categories=True))
    load_boards(dynamodb, {"2018-01": SONGS, f"{DAY}@rock": {"song01": 3, "song02": 2}}, 3)
    return StubLambda()


def table_rows(out: str) -> list[list[str]]:
    """The cells of a printed table's body rows, a cell folded over several lines joined (its count: on its first)."""
    rows: list[list[str]] = []
    for line in rows_of(out):
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if rows and cells[-1] == "":
            rows[-1] = [before + after for before, after in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
    return rows


def ranked(first: int, last: int) -> list[list[str]]:
    return [[str(place), song, str(count)] for place, (song, count) in enumerate(LISTING, start=1)][first - 1 : last]


# ---------------------------------------------------------------- the verbs, in each format


def test_range_prints_the_ranks_asked_as_a_table_json_and_text(
    stub: StubLambda, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["range", "--function", "f", "--month", "2018-01", "--from-rank", "5", "--to-rank", "12"]
    # as a table: each rank, song and count in its column
    code, out, _ = command([*argv, "--page-size", "3"], stub, capsys)
    assert code == 0
    assert table_rows(out) == ranked(5, 12)
    assert "ranks 5 to 12 · month 2018-01" in out
    assert stub.requests[0] == ("f", {"month": "2018-01", "fromRank": 5, "toRank": 12, "limit": 3})
    # as JSON: one document, the range's answer with every item
    code, out, _ = command([*argv, "--output", "json"], stub, capsys)
    document = json.loads(out)
    assert document["month"] == "2018-01"
    assert (document["fromRank"], document["toRank"], document["next_token"]) == (5, 12, None)
    assert [[str(i["rank"]), i["songID"], str(i["downloadCount"])] for i in document["items"]] == ranked(5, 12)
    # as text: a line per entry, tab-separated
    code, out, _ = command([*argv, "--output", "text"], stub, capsys)
    assert [line.split("\t") for line in out.splitlines()] == ranked(5, 12)


def test_range_by_count_prints_the_entries_within_the_bounds(
    stub: StubLambda, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["range-by-count", "--function", "f", "--month", "2018-01", "--min-count", "4", "--max-count", "6"]
    expected = [[song, str(count)] for song, count in LISTING if 4 <= count <= 6]
    code, out, _ = command([*argv, "--page-size", "2"], stub, capsys)
    assert code == 0
    assert table_rows(out) == expected
    assert stub.requests[0][1] == {"month": "2018-01", "minCount": 4, "maxCount": 6, "limit": 2}
    code, out, _ = command([*argv, "--json"], stub, capsys)
    assert [[i["songID"], str(i["downloadCount"])] for i in json.loads(out)["items"]] == expected
    code, out, _ = command([*argv, "--output", "text"], stub, capsys)
    assert [line.split("\t") for line in out.splitlines()] == expected
    # a decimal bound travels as a string: exact
    command(["range-by-count", "--function", "f", "--month", "2018-01", "--min", "4.5"], stub, capsys)
    assert stub.requests[-1][1] == {"month": "2018-01", "minCount": "4.5", "limit": 1000}


def test_card_prints_the_boards_size_counted_over_as_many_invocations_as_it_takes(
    stub: StubLambda, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a function that counts 2 pages of 4 entries per partition and invocation
    monkeypatch.setattr(board_size, "COUNT_PAGE_LIMIT", 4)
    monkeypatch.setattr(board_size, "partition_budget", lambda partitions: 2)
    code, out, _ = command(["card", "--function", "f", "--month", "2018-01"], stub, capsys)
    assert code == 0
    assert len(stub.requests) > 1
    assert "card · month 2018-01" in out
    assert f"{len(SONGS)} entries" in out
    code, out, _ = command(["card", "--function", "f", "--month", "2018-01", "--output", "text"], stub, capsys)
    assert out == f"{len(SONGS)}\n"
    code, out, _ = command(["card", "--function", "f", "--month", "2018-01", "--json"], stub, capsys)
    assert json.loads(out) == {"month": "2018-01", "size": len(SONGS), "next_token": None}
    argv = ["card", "--function", "f", "--period", "day", "--key", DAY, "--category", "rock"]
    code, out, _ = command(argv, stub, capsys)
    assert "2 entries" in out


def test_score_prints_a_songs_count_or_that_it_is_not_on_the_board(
    stub: StubLambda, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["score", "--function", "f", "--month", "2018-01"]
    code, out, _ = command([*argv, "--song", "song03"], stub, capsys)
    assert code == 0
    assert table_rows(out) == [["song03", str(SONGS["song03"])]]
    assert stub.requests[-1][1] == {"month": "2018-01", "songID": "song03", "score": True}
    code, out, _ = command([*argv, "--song", "silence"], stub, capsys)
    assert (code, table_rows(out)) == (0, [])
    assert "silence: not on this board" in out
    code, out, _ = command([*argv, "--song", "silence", "--output", "text"], stub, capsys)
    assert out == "silence\t0\tFalse\n"
    code, out, _ = command([*argv, "--song", "song03", "--json"], stub, capsys)
    expected = {"month": "2018-01", "songID": "song03", "downloadCount": SONGS["song03"], "onBoard": True}
    assert json.loads(out) == expected


def test_top_and_rank_print_text_too(stub: StubLambda, capsys: pytest.CaptureFixture[str]) -> None:
    board = ["--function", "f", "--month", "2018-01", "--output", "text"]
    code, out, _ = command(["top", *board, "--limit", "3"], stub, capsys)
    assert code == 0
    assert [line.split("\t") for line in out.splitlines()] == ranked(1, 3)
    code, out, _ = command(["rank", *board, "--song", LISTING[4][0], "--around", "1"], stub, capsys)
    assert code == 0
    assert [line.split("\t") for line in out.splitlines()] == ranked(4, 6)
    _, out, _ = command(["rank", *board, "--song", "silence"], stub, capsys)
    assert out == "None\tsilence\t0\n"


# ---------------------------------------------------------------- paging as the AWS CLI pages


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["all"], ranked(1, len(LISTING))),
        (["range", "--from-rank", "3", "--to-rank", "20"], ranked(3, 20)),
        (["range-by-count", "--min-count", "2", "--max-count", "8"], [[s, str(c)] for s, c in LISTING if 2 <= c <= 8]),
    ],
    ids=["all", "range", "range-by-count"],
)
@pytest.mark.parametrize("output", ["table", "text", "json"])
def test_max_items_and_starting_token_join_to_the_whole_listing(
    stub: StubLambda, capsys: pytest.CaptureFixture[str], argv: list[str], expected: list[list[str]], output: str
) -> None:
    base = [argv[0], "--function", "f", "--month", "2018-01", *argv[1:], "--output", output, "--page-size", "3"]
    listed: list[list[str]] = []
    token: str | None = None
    for _ in range(20):
        resume = ["--starting-token", token] if token else []
        code, out, _ = command([*base, "--max-items", "5", *resume], stub, capsys)
        assert code == 0
        rows, token = printed(out, output)
        assert len(rows) <= 5
        listed += rows
        if token is None:
            break
    assert listed == expected
    # each invocation asked for no more than the entries still wanted: no page was cut
    assert all(request["limit"] <= 3 for _, request in stub.requests)


def printed(out: str, output: str) -> tuple[list[list[str]], str | None]:
    """The rows a listing printed and the NextToken it printed, in any format."""
    if output == "json":
        document = json.loads(out)
        rows = [
            ([str(item["rank"])] if "rank" in item else []) + [item["songID"], str(item["downloadCount"])]
            for item in document["items"]
        ]
        return rows, document["next_token"]
    if output == "text":
        lines = [line.split("\t") for line in out.splitlines()]
        tokens = [line[1] for line in lines if line[0] == "NEXTTOKEN"]
        return [line for line in lines if line[0] != "NEXTTOKEN"], (tokens or [None])[0]
    match = re.search(r"^NextToken: (\S+)$", out, flags=re.MULTILINE)
    return table_rows(out), match[1] if match else None


class Watching(StubLambda):
    """The stub, noting at each invocation what the command had printed by then."""

    def __init__(self, out: io.StringIO) -> None:
        super().__init__()
        self.out = out
        self.printed_before: list[str] = []

    def invoke(self, FunctionName: str, Payload: bytes) -> dict[str, Any]:  # noqa: N803
        self.printed_before.append(self.out.getvalue())
        return super().invoke(FunctionName, Payload)


@pytest.mark.parametrize("output", ["table", "text", "json"])
def test_a_listing_prints_each_page_before_it_asks_for_the_next(
    stub: StubLambda, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    # given a command printing to a buffer the function's stub looks at before each page
    out = io.StringIO()
    watching = Watching(out)
    parsed = parse(["all", "--function", "f", "--month", "2018-01", "--page-size", "4", "--output", output])
    # when every page is listed
    assert leaderboards.run(parsed, client=watching, out=out) == 0
    # then by the time each page after the first was asked for, the entries before it were printed
    for page, before in enumerate(watching.printed_before[1:], start=1):
        assert entries_in(before, output) == [song for song, _ in LISTING[: 4 * page]], (page, before)
    # and the table's columns line up across pages, a long id folded within its column
    if output == "table":
        lines = rows_of(out.getvalue())
        assert len({tuple(match.start() for match in re.finditer("│", line)) for line in lines}) == 1, out.getvalue()


def entries_in(out: str, output: str) -> list[str]:
    """The ids printed so far, in any format (JSON: a document still being written)."""
    if output == "table":
        return [cells[1] for cells in table_rows(out)]
    if output == "text":
        return [line.split("\t")[1] for line in out.splitlines()]
    return re.findall(r'"songID": "([^"]+)"', out)


def test_a_long_id_on_a_later_page_folds_within_its_column(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(query, "_dynamodb", dynamodb)
    monkeypatch.setattr(query, "AGGREGATES_TABLE_NAME", TABLE)
    monkeypatch.setattr(query, "LAYOUT", Layout(1))
    long_id = "the-last-song-" + "x" * 80
    load_boards(dynamodb, {"2018-01": {"s1": 9, "s2": 8, long_id: 1}}, 1)
    code, out, _ = command(["all", "--function", "f", "--month", "2018-01", "--page-size", "2"], StubLambda(), capsys)
    assert code == 0
    lines = rows_of(out)
    assert len({len(line) for line in lines}) == 1, out
    assert "".join(cells[1] for cells in table_rows(out)[2:]) == long_id


def parse(argv: list[str]) -> Any:
    parsed: dict[str, Any] = {}
    original = leaderboards.run
    leaderboards.run = lambda arguments: parsed.setdefault("arguments", arguments) and 0  # type: ignore[assignment]
    try:
        cli.main(argv)
    finally:
        leaderboards.run = original  # type: ignore[assignment]
    return parsed["arguments"]


# ---------------------------------------------------------------- errors: said plainly, exit codes


@pytest.mark.parametrize(
    "argv",
    [
        ["top", "--month", "2018-13"],
        ["all", "--month", "2018-1"],
        ["top", "--period", "month", "--key", "2018-13"],
        ["top", "--period", "day", "--key", "2018-02-30"],
        ["top", "--month", "2018-01", "--limit", "0"],
        ["top", "--month", "2018-01", "--limit", "1001"],
        ["top", "--period", "day", "--last", "1"],
        ["top", "--period", "day", "--last", "49"],
        ["rank", "--month", "2018-01", "--song", "s", "--around", "51"],
        ["rank", "--month", "2018-01", "--song", ""],
        ["score", "--month", "2018-01"],
        ["range", "--month", "2018-01", "--from-rank", "0"],
        ["range", "--month", "2018-01", "--to-rank", "x"],
        ["range-by-count", "--month", "2018-01", "--min-count", "1e3"],
        ["all", "--month", "2018-01", "--max-items", "0"],
        ["all", "--month", "2018-01", "--page-size", "1001"],
    ],
)
def test_malformed_flags_are_refused_as_they_are_parsed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main([*argv, "--function", "f"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["top", "--period", "day", "--key", "2018-01"], "is not a day"),
        (["top", "--period", "all", "--key", "2018"], "takes no --key"),
        (["top", "--key", "2018-01-15"], "give --period too"),
        (["top", "--period", "day", "--last", "3", "--limit", "101"], "--limit of a rolling window"),
        (["range", "--month", "2018-01", "--from-rank", "5", "--to-rank", "4"], "at least --from-rank"),
        (["range-by-count", "--month", "2018-01", "--min", "5", "--max", "4.5"], "at most --max-count"),
        (["range-by-count", "--month", "2018-01"], "give --min-count, --max-count"),
    ],
)
def test_flags_that_contradict_each_other_are_a_usage_error_before_any_request(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    client = FailingLambda(payload={"items": [], "next_token": None})
    with pytest.raises(SystemExit) as exited:
        command([*argv, "--function", "f"], client, capsys)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_function_that_does_not_exist_is_said_to_be_missing(capsys: pytest.CaptureFixture[str]) -> None:
    missing = FailingLambda(ClientError({"Error": {"Code": "ResourceNotFoundException"}}, "Invoke"))
    code, _, err = command(["top", "--function", "nosuch", "--month", "2018-01"], missing, capsys)
    assert code == 1
    assert "the query function nosuch does not exist" in err
    assert "check --table" not in err
    code, _, err = command(["top", "--table", "music-downloads", "--month", "2018-01"], missing, capsys)
    assert "music-query does not exist" in err
    assert "--table music-downloads" in err


class ClosedPipe(io.StringIO):
    """Output whose reader went away after its first line."""

    def write(self, text: str) -> int:
        if "\n" in self.getvalue():
            raise BrokenPipeError
        return super().write(text)


def test_a_closed_pipe_ends_a_listing_quietly_with_141(
    stub: StubLambda, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given `all ... | head -1`: the reader of the output gone after its first line
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    # when the listing prints its pages, then it stops: nothing said, 128 + SIGPIPE as for every command
    code, _, err = command(
        ["all", "--function", "f", "--month", "2018-01", "--page-size", "2", "--output", "text"], stub, capsys
    )
    assert (code, err) == (EXIT_BROKEN_PIPE, "")


class Interrupted(StubLambda):
    """The stub, interrupted (Ctrl-C) when the third page is asked for."""

    def invoke(self, FunctionName: str, Payload: bytes) -> dict[str, Any]:  # noqa: N803
        if len(self.requests) == 2:
            raise KeyboardInterrupt
        return super().invoke(FunctionName, Payload)


def test_ctrl_c_in_a_listing_is_one_line_saying_where_to_resume(
    stub: StubLambda, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["range", "--function", "f", "--month", "2018-01", "--from-rank", "2", "--page-size", "3"]
    argv += ["--output", "text"]
    code, out, err = command(argv, Interrupted(), capsys)
    # then exit 130 and one line, as every command: how far it got and the token to resume from
    assert code == EXIT_INTERRUPTED
    token = re.fullmatch(
        r"interrupted: after 6 entries: resume with --starting-token (\S+) \(and the same flags\)\n", err
    )
    assert token is not None, err
    code, rest, _ = command([*argv, "--starting-token", token[1]], stub, capsys)
    assert [line.split("\t") for line in (out + rest).splitlines()] == ranked(2, len(LISTING))


@pytest.mark.parametrize("argv", [["top"], ["all", "--starting-token", "T"]], ids=["top", "all-resumed"])
def test_ctrl_c_before_any_answer_is_one_line_too(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # given Ctrl-C while the first invocation waits (`top`, or a listing resumed from a token)
    interrupted = FailingLambda(KeyboardInterrupt())
    code, out, err = command([*argv, "--function", "f", "--month", "2018-01"], interrupted, capsys)
    # then exit 130 and one line: nothing was printed, nothing written (the same command runs again as it was)
    assert (code, out, err) == (EXIT_INTERRUPTED, "", f"interrupted: nothing was written ({argv[0]} only reads)\n")


def test_the_commands_limits_are_the_query_functions() -> None:
    assert leaderboards.MAX_LIMIT == leaderboard_page.MAX_LIMIT
    assert leaderboards.MAX_WINDOW_LIMIT == rolling_window.MAX_WINDOW_LIMIT
    assert leaderboards.LAST_BUCKETS == (2, rolling_window.MAX_LAST)
    assert leaderboards.MAX_AROUND == entity_rank.MAX_AROUND
    assert leaderboards.MAX_RANK == rank_range.MAX_RANK
