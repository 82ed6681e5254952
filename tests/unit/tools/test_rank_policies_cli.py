"""`--rank-policy` on the board commands that rank, and `leaderboard-tools among`: the request each makes, and the ranks
printed as a table, JSON and text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.tools.test_board_commands import StubLambda, command, one_line
from tests.unit.tools.test_query_verbs_cli import LISTING, SONGS, printed, stub, table_rows

__all__ = ["stub"]  # the fixture, used by name

BOARD = ["--function", "f", "--month", "2018-01"]


def policy_ranks(policy: str) -> list[list[str]]:
    """The oracle: every song of the month with its rank under the policy, as printed rows."""
    values = sorted(set(SONGS.values()), reverse=True)
    rank = {
        "ordinal": lambda place, count: place,
        "competition": lambda place, count: 1 + sum(1 for other in SONGS.values() if other > count),
        "dense": lambda place, count: 1 + values.index(count),
    }[policy]
    return [[str(rank(place, count)), song, str(count)] for place, (song, count) in enumerate(LISTING, start=1)]


@pytest.mark.parametrize("policy", ["ordinal", "competition", "dense"])
@pytest.mark.parametrize("output", ["table", "text", "json"])
def test_all_with_a_rank_policy_prints_each_entrys_rank_under_it(
    stub: StubLambda, capsys: pytest.CaptureFixture[str], policy: str, output: str
) -> None:
    # when every entry is listed under a policy, 4 an invocation
    code, out, _ = command(
        ["all", *BOARD, "--rank-policy", policy, "--output", output, "--page-size", "4"], stub, capsys
    )
    # then each row carries its rank under the policy, and every request asked for it
    assert code == 0
    rows, token = printed(out, output)
    assert (rows, token) == (policy_ranks(policy), None)
    assert {request.get("rankPolicy") for _, request in stub.requests} == {policy}


def test_top_range_and_rank_send_the_policy_and_print_its_ranks(
    stub: StubLambda, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = policy_ranks("dense")
    # top: the first 5 entries with their dense ranks
    code, out, _ = command(["top", *BOARD, "--limit", "5", "--rank-policy", "dense"], stub, capsys)
    assert (code, table_rows(out)) == (0, expected[:5])
    assert stub.requests[-1][1] == {"month": "2018-01", "limit": 5, "rankPolicy": "dense"}
    # range: the entries whose dense rank is 2 to 3
    code, out, _ = command(
        ["range", *BOARD, "--from-rank", "2", "--to-rank", "3", "--rank-policy", "dense", "--output", "text"],
        stub,
        capsys,
    )
    assert [line.split("\t") for line in out.splitlines()] == [row for row in expected if row[0] in ("2", "3")]
    # range-by-count: its entries ranked on the whole board
    argv = ["range-by-count", *BOARD, "--min-count", "4", "--max-count", "6", "--rank-policy", "competition"]
    code, out, _ = command(argv, stub, capsys)
    assert table_rows(out) == [row for row in policy_ranks("competition") if 4 <= int(row[2]) <= 6]
    # rank: a song and its neighbours under competition
    song = LISTING[6][0]
    code, out, _ = command(
        ["rank", *BOARD, "--song", song, "--around", "1", "--rank-policy", "competition"], stub, capsys
    )
    assert table_rows(out) == policy_ranks("competition")[5:8]


def test_among_prints_the_songs_ranked_among_themselves(stub: StubLambda, capsys: pytest.CaptureFixture[str]) -> None:
    # given three songs of the month, two of them tied, and one without downloads
    tied = [song for song, count in LISTING if count == 4][:2]
    top = LISTING[0][0]
    argv = ["among", *BOARD, "--song", tied[1], "--song", "silence", "--id", top, "--song", tied[0]]
    # when they are ranked among themselves under competition
    code, out, _ = command([*argv, "--rank-policy", "competition"], stub, capsys)
    # then the table lists them in the board's order, the tied two sharing rank 2, the silent one last with 0
    assert code == 0
    assert table_rows(out) == [
        ["1", top, str(SONGS[top])],
        ["2", tied[0], "4"],
        ["2", tied[1], "4"],
        ["4", "silence", "0"],
    ]
    assert "among 4 entities (competition ranks) · month 2018-01" in out
    assert stub.requests[-1][1] == {
        "month": "2018-01",
        "among": [tied[1], "silence", top, tied[0]],
        "rankPolicy": "competition",
    }
    # as text, ordinal by default
    code, out, _ = command([*argv, "--output", "text"], stub, capsys)
    assert [line.split("\t")[0] for line in out.splitlines()] == ["1", "2", "3", "4"]
    # as JSON, the function's answer
    code, out, _ = command([*argv, "--json"], stub, capsys)
    answer: dict[str, Any] = json.loads(out)
    assert [item["songID"] for item in answer["items"]] == [top, tied[0], tied[1], "silence"]


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["among", *BOARD, "--song", "a", "--song", "a"], "--song: name each entity once"),
        (["among", *BOARD, *[arg for n in range(101) for arg in ("--song", f"s{n}")]], "at most 100 entities"),
        (["among", *BOARD], "the following arguments are required: --song"),
        (["top", *BOARD, "--rank-policy", "olympic"], "invalid choice: 'olympic'"),
        (["card", *BOARD, "--rank-policy", "dense"], "unrecognized arguments: --rank-policy"),
        (
            ["top", "--function", "f", "--period", "day", "--last", "7", "--rank-policy", "dense"],
            "not a rolling window's (--last)",
        ),
    ],
)
def test_bad_among_or_policy_flags_exit_2_before_asking(
    stub: StubLambda, capsys: pytest.CaptureFixture[str], argv: list[str], reason: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        command(argv, stub, capsys)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert reason in one_line(err)
    assert stub.requests == []
