"""The README's commands, run. `leaderboard-tools size` as the installed command: each prints the number of shards its
comment gives. The board commands after `make demo`, and the payload of both `aws lambda invoke` lines, through the
query function's own handler on moto holding the boards the demo fills (test_demo_readme.py checks that each names a
board the demo keeps). The acceptance suite's test_readme_demo.py runs the section itself as written: `make demo`, the
export line, every command (reconcile too) and the AWS CLI v1 line, on the deployed demo; the v2 line's payload is
answered only here (the project installs AWS CLI v1, which refuses v2's flag)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

import query
from boards import Boards
from index_reads import Layout
from leaderboard_core.buckets import download_boards, utc_moment
from leaderboard_dev import demo
from leaderboard_dev.loadgen import zipf_downloads
from leaderboard_dev.settings import REPOSITORY
from tests.unit.conftest import TABLE, FakeLambdaContext, create_table
from tests.unit.query.aggregates_on_moto import load_boards
from tests.unit.tools.test_board_commands import StubLambda, command

README = (REPOSITORY / "README.md").read_text()
LEADERBOARD_TOOLS = Path(sys.executable).with_name("leaderboard-tools")
"""The command `make venv` installs beside this interpreter, as the README's `.venv/bin/leaderboard-tools`."""
NEEDS_A_DEPLOYMENT = {"reconcile"}
"""Commands that read the deployment's stream, mapping and functions from AWS: run by the acceptance suite on a
deployed stack (the README's line on the demo: test_readme_demo.py; test_existing_table.py, test_recovery.py), not
here."""


def section(title: str) -> str:
    return README.split(f"\n{title}\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]


def shell_lines(text: str) -> list[tuple[list[str], str]]:
    """Each line of the section's `sh` blocks: its words, and its comment (after two spaces and `#`)."""
    lines = [line for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL) for line in block.splitlines()]
    return [(shlex.split(line.split("  #", 1)[0]), line.partition("  #")[2].strip()) for line in lines]


SIZING = [
    (words, comment)
    for words, comment in shell_lines(section("## Sizing"))
    if words[:2] == ["leaderboard-tools", "size"]
]
AFTER_DEMO = [words for words, _ in shell_lines(section("### After `make demo`"))]
TOOLS = [words[1:] for words in AFTER_DEMO if words[0] == ".venv/bin/leaderboard-tools"]
BOARD_COMMANDS = [argv for argv in TOOLS if argv[0] not in NEEDS_A_DEPLOYMENT]
INVOKES = [words for words in AFTER_DEMO if words[:3] == ["aws", "lambda", "invoke"]]


def test_every_command_after_the_demo_is_run_here_or_named_as_needing_a_deployment() -> None:
    # given the sections' shell lines
    sizing = shell_lines(section("## Sizing"))

    # then each is one these tests run, the environment the others need, or a command that needs a deployment
    assert len(SIZING) == len(sizing) == 2
    assert [words[0] for words in AFTER_DEMO if words[0] not in (".venv/bin/leaderboard-tools", "aws")] == ["export"]
    assert len(BOARD_COMMANDS) >= 4
    assert len(INVOKES) == 2
    assert {argv[0] for argv in TOOLS} - {argv[0] for argv in BOARD_COMMANDS} <= NEEDS_A_DEPLOYMENT


@pytest.mark.parametrize(("words", "comment"), SIZING, ids=[" ".join(words[2:]) for words, _ in SIZING])
def test_each_size_command_prints_the_number_of_shards_its_comment_gives(words: list[str], comment: str) -> None:
    # given the number the README's comment ends with
    promised = re.findall(r"\d+", comment)[-1]

    # when the installed command runs it
    done = subprocess.run([str(LEADERBOARD_TOOLS), *words[1:]], capture_output=True, text=True, timeout=60, check=False)

    # then
    assert done.returncode == 0, done.stderr
    assert f"leaderboard_shards = {promised}\n" in done.stdout


def demo_boards() -> dict[str, dict[str, int]]:
    """Each board the demo fills (its default run: 3,000 downloads of 100 songs) and its songs' counts."""
    counts: dict[str, Counter[str]] = {}
    for download in zipf_downloads(3000, songs=100, seed=2018):
        moment = utc_moment(download.timestamp)
        for board in download_boards(moment, demo.DEMO_PERIODS, demo.genre_of(download.song_id)):
            counts.setdefault(board, Counter())[download.song_id] += 1
    return {board: dict(songs) for board, songs in counts.items()}


@pytest.fixture(scope="module")
def demo_table() -> Iterator[Any]:
    """The table on moto holding the January boards the demo fills, once for the module (loading is the slow part)."""
    with pytest.MonkeyPatch.context() as environment, mock_aws():
        environment.delenv("AWS_ENDPOINT_URL", raising=False)
        for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
            environment.setenv(name, value)
        dynamodb = create_table(stream_view_type=None)
        january = {board: songs for board, songs in demo_boards().items() if board.startswith("2018-01")}
        load_boards(dynamodb, january, 1)
        yield dynamodb


@pytest.fixture
def demo_stack(demo_table: Any, monkeypatch: pytest.MonkeyPatch) -> StubLambda:
    """The demo's deployment (day and month boards, overall and per genre, one leaderboard shard) and its query
    function, reading the demo's table."""
    monkeypatch.setattr(query, "_dynamodb", demo_table)
    monkeypatch.setattr(query, "AGGREGATES_TABLE_NAME", TABLE)
    monkeypatch.setattr(query, "LAYOUT", Layout(1))
    monkeypatch.setattr(query, "BOARDS", Boards(demo.DEMO_PERIODS, categories=True))
    return StubLambda()


@pytest.mark.parametrize("argv", BOARD_COMMANDS, ids=lambda argv: " ".join(argv[:1] + argv[3:]))
def test_each_board_command_after_the_demo_answers_from_the_demo_s_query_function(
    argv: list[str], demo_stack: StubLambda, capsys: pytest.CaptureFixture[str]
) -> None:
    # when the command runs as the README gives it
    code, out, err = command(argv, demo_stack, capsys)

    # then the demo's query function answered it, and it printed the answer
    assert code == 0, err
    assert [function for function, _ in demo_stack.requests] == [f"{demo.DEMO_STACK}-query"] * len(demo_stack.requests)
    assert demo_stack.requests, "no request reached the query function"
    assert out.strip(), "nothing printed"
    if argv[0] == "among":
        # and every song it names is on the board, counted, and ranked among them
        answer = query.lambda_handler(demo_stack.requests[-1][1], FakeLambdaContext())
        named = [argv[index + 1] for index, flag in enumerate(argv) if flag == "--song"]
        assert sorted(item["songID"] for item in answer["items"]) == sorted(named), answer
        assert all(item["downloadCount"] > 0 and item["rank"] >= 1 for item in answer["items"]), answer
        assert all(song in out for song in named)
    elif "--song" in argv:
        # and the song it names is on the board, counted
        answer = query.lambda_handler(demo_stack.requests[-1][1], FakeLambdaContext())
        assert answer.get("rank") is not None or answer.get("onBoard") is True, answer
        assert answer["downloadCount"] > 0
        assert argv[argv.index("--song") + 1] in out


@pytest.mark.parametrize("words", INVOKES, ids=["aws-cli-v1", "aws-cli-v2"])
def test_each_invoke_line_s_payload_is_answered_by_the_demo_s_query_function(
    words: list[str], demo_stack: StubLambda
) -> None:
    # given the function and the payload the line sends (v1 sends it as written, v2 with raw-in-base64-out too)
    function = words[words.index("--function-name") + 1]
    payload = words[words.index("--payload") + 1]

    # when the function is invoked with it
    response = demo_stack.invoke(FunctionName=function, Payload=payload.encode())
    answer = json.loads(response["Payload"].read())

    # then the demo's query function answers a page of the month's top songs
    assert demo_stack.requests == [(f"{demo.DEMO_STACK}-query", json.loads(payload))]
    assert "error" not in answer, answer
    assert len(answer["items"]) == json.loads(payload)["limit"]
