"""The README's way in after `make demo`: it names the demo's table and function, and every example it gives (the
commands there, the query contract's requests, the `aws lambda invoke` lines of AWS CLI v1 and v2) asks a board the
demo's stack keeps and fills, of a song it holds."""

from __future__ import annotations

import json
import re
import shlex
from datetime import UTC, datetime
from typing import Any

import pytest

from boards import Boards
from leaderboard_core.buckets import board_id, download_boards, utc_moment
from leaderboard_dev import demo
from leaderboard_dev.loadgen import zipf_downloads
from leaderboard_dev.settings import DEFAULT_ENDPOINT, REPOSITORY, Endpoint
from request_parsing import parse_board

README = (REPOSITORY / "README.md").read_text()
TABLE = f"{demo.DEMO_STACK}-downloads"
"""The module names its table `<name>-downloads` and its query function `<name>-query` (terraform/main.tf)."""
FUNCTION = f"{demo.DEMO_STACK}-query"


def section(title: str) -> str:
    return README.split(f"\n{title}\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]


def fenced(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


AFTER_DEMO = section("### After `make demo`")


def demo_boards() -> dict[str, set[str]]:
    """Each board the demo fills (its default run: 3,000 downloads of 100 songs), and the songs counted in it."""
    filled: dict[str, set[str]] = {}
    for download in zipf_downloads(3000, songs=100, seed=2018):
        moment = utc_moment(download.timestamp)
        for board in download_boards(moment, demo.DEMO_PERIODS, demo.genre_of(download.song_id)):
            filled.setdefault(board, set()).add(download.song_id)
    return filled


FILLED = demo_boards()


def check_answers_on_the_demo(request: dict[str, Any]) -> None:
    """The request names a board the demo's deployment keeps (the query function's own parsing) and filled."""
    board = parse_board(
        request, Boards(demo.DEMO_PERIODS, categories=True), now=lambda: datetime(2018, 1, 15, tzinfo=UTC)
    )
    filled = board_id(board.key, board.category)
    assert filled in FILLED, f"{request}: the demo fills no board {filled}"
    if "songID" in request:
        assert request["songID"] in FILLED[filled], f"{request}: no download of it on {filled}"


def test_the_section_names_the_demo_s_table_function_and_endpoint() -> None:
    assert f"**`{TABLE}`**" in AFTER_DEMO
    assert f"**`{FUNCTION}`**" in AFTER_DEMO
    assert f"export AWS_ENDPOINT_URL={DEFAULT_ENDPOINT} " in AFTER_DEMO
    assert "make demo" in AFTER_DEMO
    # and how to move the emulator's port: the one variable everything reads
    assert "AWS_ENDPOINT_URL=http://127.0.0.1:4567 make demo" in AFTER_DEMO


def commands() -> list[list[str]]:
    lines = [line.split("  #", 1)[0] for block in fenced(AFTER_DEMO, "sh") for line in block.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith((".venv/bin/leaderboard-tools", "aws "))]


def test_every_command_asks_the_demo_s_stack_for_a_board_it_fills() -> None:
    found = commands()
    assert [words[0] for words in found].count(".venv/bin/leaderboard-tools") >= 4
    invokes = [words for words in found if words[:3] == ["aws", "lambda", "invoke"]]
    # the AWS CLI v1 form first (pip's), then v2's, which reads a raw payload only when told to
    assert [("--cli-binary-format" in words) for words in invokes] == [False, True]
    assert invokes[1][invokes[1].index("--cli-binary-format") + 1] == "raw-in-base64-out"
    for words in found:
        if words[0] == "aws":
            flags = dict(zip(words[3::2], words[4::2], strict=False))
            assert flags["--function-name"] == FUNCTION
            check_answers_on_the_demo(json.loads(flags["--payload"]))
            continue
        flags = dict(zip(words[2::2], words[3::2], strict=False))
        assert flags["--table"] == TABLE, words
        if "--month" in flags:
            request: dict[str, Any] = {"month": flags["--month"]}
        else:
            request = {"period": flags["--period"], "key": flags["--key"]}
        if "--category" in flags:
            request["category"] = flags["--category"]
        if "--song" in flags:
            request["songID"] = flags["--song"]
        check_answers_on_the_demo(request)


@pytest.mark.parametrize("line", fenced(section("## Query contract"), "json")[0].splitlines())
def test_every_request_of_the_query_contract_answers_on_the_demo_s_stack(line: str) -> None:
    check_answers_on_the_demo(json.loads(line))


def test_the_demo_prints_commands_the_readme_gives() -> None:
    printed = demo.next_steps(Endpoint(DEFAULT_ENDPOINT, "us-east-1"), TABLE, FUNCTION)
    for line in printed.splitlines():
        if line.strip().startswith((".venv/bin/", "export ")):
            assert line.strip() in AFTER_DEMO, line
