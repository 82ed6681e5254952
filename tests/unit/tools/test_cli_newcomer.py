"""What a newcomer meets first, run as they run it: the installed `leaderboard-tools` in a child process, against
moto's server on a free port (AWS_ENDPOINT_URL in the child's environment), or with no AWS at all where none is needed.

`--table` takes either table of a deployment for every command that reads boards; a closed pipe ends every command
with 141 and nothing on stderr; `--debug` and the connection options are taken after every command; a usage error is
three lines; a table with no deployment of the module is said to be one; counts read "1 leaderboard shard".
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from leaderboard_tools.cli import build_parser
from leaderboard_tools.commands import EXIT_BROKEN_PIPE, EXIT_ERROR, EXIT_EXACT, EXIT_USAGE, leaderboards
from tests.unit.tools.operator_stack import MONTH, REGION, SingleTable, deploy

REPOSITORY = Path(__file__).resolve().parents[3]
BOARD_COMMANDS: dict[str, list[str]] = {
    "top": [],
    "rank": ["--song", "song1"],
    "all": [],
    "range": ["--from-rank", "1", "--to-rank", "3"],
    "range-by-count": ["--min-count", "1"],
    "card": [],
    "score": ["--song", "song1"],
    "among": ["--song", "song1", "--song", "song2"],
}
"""Every command that reads boards, with the flags of its request."""
assert set(BOARD_COMMANDS) == set(leaderboards.SUMMARIES)
DEPLOYMENT_COMMANDS: dict[str, list[str]] = {
    "reconcile": ["--month", MONTH],
    "recover": [],
    "rekey": ["--shards", "2", "--dry-run"],
    "backfill": [],
}
"""Every command that reads the deployment around --table (`readers` runs before a deployment too)."""
SIZE = ["size", "--downloads-per-second", "100", "--songs", "1000"]
CONNECTION_FLAGS = ("--debug", "--cli-connect-timeout", "--cli-read-timeout")
"""The options the top-level --help says are taken before or after the command."""


def installed_command() -> str:
    """The console script of this environment, as a newcomer runs it after `make venv`."""
    beside = Path(sys.executable).parent / "leaderboard-tools"
    found = str(beside) if beside.exists() else shutil.which("leaderboard-tools")
    assert found, "leaderboard-tools is not installed in this environment"
    return found


def child_environment(**settings: str) -> dict[str, str]:
    """This environment without the machine's AWS settings: no config files, test credentials, one region."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    return (
        environment
        | {
            "AWS_CONFIG_FILE": "/nonexistent",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
        }
        | settings
    )


def tools(*arguments: str, endpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    settings = {"AWS_ENDPOINT_URL": endpoint} if endpoint else {}
    return subprocess.run(
        [installed_command(), *arguments],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPOSITORY,
        env=child_environment(**settings),
        timeout=120,
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def moto_api(endpoint: str, path: str, body: object) -> None:
    request = urllib.request.Request(
        f"{endpoint}/moto-api/{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30):
        pass


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's server on a free port, its Lambda without Docker (an invocation answers its request, or the answer
    queued); this process's boto3 clients reach it too."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    address = f"http://127.0.0.1:{server._port}"
    moto_api(address, "config", {"lambda": {"use_docker": False}})
    for name, value in child_environment(AWS_ENDPOINT_URL=address).items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    try:
        yield address
    finally:
        moto_api(address, "reset", {})
        moto_api(address, "config", {"lambda": {"use_docker": True}})
        server.stop()


@pytest.fixture
def attached(endpoint: str) -> str:
    """A deployment attached to a platform's own table `music-platform` (source_table_name), its aggregates in
    `music-aggregates`, its query function `music-query`."""
    deploy(single_table=SingleTable())
    return endpoint


def invoked_functions(debug_log: str) -> set[str]:
    """The functions a command invoked, from botocore's debug log of its requests."""
    marker = "/functions/"
    return {
        line.split(marker, 1)[1].split("/invocations", 1)[0]
        for line in debug_log.splitlines()
        if marker in line and "/invocations" in line
    }


def usage_error_lines(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 3, stderr
    return lines


# ---------------------------------------------------------------- a. --table: either table of a deployment


@pytest.mark.matrix
@pytest.mark.parametrize("command", BOARD_COMMANDS)
@pytest.mark.parametrize("table", ["music-platform", "music-aggregates"])
def test_every_board_command_takes_either_table_of_an_attached_deployment(
    command: str, table: str, attached: str
) -> None:
    # given a deployment attached to a platform's own table, when a board command names either of its tables
    result = tools(command, "--table", table, "--month", MONTH, *BOARD_COMMANDS[command], "--debug", endpoint=attached)
    # then it asks the deployment's query function, and answers
    assert result.returncode == EXIT_EXACT, result.stderr[-2000:]
    assert invoked_functions(result.stderr) == {"music-query"}


def test_top_on_the_source_table_prints_what_its_query_function_answers(attached: str) -> None:
    # given the query function's answer for the month
    answer = {"month": MONTH, "items": [{"songID": "song7", "downloadCount": 3}]}
    moto_api(attached, "static/lambda-simple/response", {"results": [json.dumps(answer)], "region": REGION})
    # when top names the platform's table
    result = tools("top", "--table", "music-platform", "--month", MONTH, "--output", "text", endpoint=attached)
    # then it prints that answer
    assert (result.returncode, result.stdout, result.stderr) == (EXIT_EXACT, "1\tsong7\t3\n", "")


def test_reconcile_reads_the_same_deployment_from_either_table(attached: str) -> None:
    # when reconcile names the platform's table, then the aggregates'
    source = tools("reconcile", "--table", "music-platform", "--month", MONTH, "--json", endpoint=attached)
    aggregates = tools("reconcile", "--table", "music-aggregates", "--month", MONTH, "--json", endpoint=attached)
    # then each reads the deployment, and they report the same
    assert (source.returncode, source.stderr) == (EXIT_EXACT, "")
    assert (aggregates.returncode, aggregates.stderr) == (EXIT_EXACT, "")
    assert json.loads(source.stdout) == json.loads(aggregates.stdout)


@pytest.mark.matrix
@pytest.mark.parametrize(
    "argv", [["readers"], ["recover", "--output", "text"], ["rekey", "--shards", "1", "--dry-run"]], ids=" ".join
)
def test_every_command_that_reads_the_deployment_finds_the_same_from_either_table(
    argv: list[str], attached: str
) -> None:
    command, *flags = argv
    source = tools(command, "--table", "music-platform", *flags, endpoint=attached)
    aggregates = tools(command, "--table", "music-aggregates", *flags, endpoint=attached)
    assert (source.returncode, source.stderr) == (EXIT_EXACT, "")
    assert (aggregates.returncode, aggregates.stderr) == (EXIT_EXACT, "")
    assert source.stdout == aggregates.stdout


def test_a_board_command_on_a_table_of_no_deployment_says_so(endpoint: str) -> None:
    # given a table the module is not attached to
    boto3.client("dynamodb", region_name=REGION).create_table(
        TableName="plain",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    result = tools("top", "--table", "plain", "--month", MONTH, endpoint=endpoint)
    assert result.returncode == EXIT_ERROR
    assert result.stderr.startswith("error: no deployment of the module found for table plain: "), result.stderr
    assert "--function" in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr


# ---------------------------------------------------------------- b. a closed pipe: 141, nothing on stderr


@pytest.mark.parametrize(
    "argv",
    [
        SIZE,
        [*SIZE, "--output", "json"],
        [*SIZE, "--output", "text"],
        ["completion", "bash"],
        ["--help"],
        ["reconcile", "--help"],
    ],
    ids=" ".join,
)
def test_a_closed_stdout_ends_every_command_with_141_and_nothing_on_stderr(argv: list[str]) -> None:
    # given `leaderboard-tools ... | head -0`: the output's reader gone before anything is written
    reader, writer = os.pipe()
    os.close(reader)
    try:
        child = subprocess.Popen(
            [installed_command(), *argv],
            stdout=writer,
            stderr=subprocess.PIPE,
            cwd=REPOSITORY,
            env=child_environment(),
        )
    finally:
        os.close(writer)
    _, error = child.communicate(timeout=120)
    # then 128 + SIGPIPE, as a shell reports a tool the pipe stopped, and not a word
    assert (child.returncode, error.decode()) == (EXIT_BROKEN_PIPE, "")


def test_size_piped_to_head_ends_with_141_as_its_help_promises() -> None:
    pipeline = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"'{installed_command()}' {' '.join(SIZE)} | head -c 1 >/dev/null"],
        capture_output=True,
        text=True,
        check=False,
        env=child_environment(),
        timeout=120,
    )
    assert pipeline.stderr == ""
    assert pipeline.returncode in (EXIT_EXACT, EXIT_BROKEN_PIPE)  # 0 only if it all fit the pipe before head left


# ---------------------------------------------------------------- c. --debug after every command


def test_debug_after_size_is_taken() -> None:
    result = tools(*SIZE, "--output", "text", "--debug")
    assert (result.returncode, result.stderr) == (EXIT_EXACT, "")
    assert "leaderboard_shards\t1" in result.stdout


def test_debug_after_completion_is_taken() -> None:
    result = tools("completion", "bash", "--debug")
    assert result.returncode == EXIT_EXACT, result.stderr
    assert "leaderboard-tools" in result.stdout


def test_every_command_takes_the_connection_options_after_it() -> None:
    _, commands = build_parser()
    for name, command in commands.choices.items():
        for flag in CONNECTION_FLAGS:
            assert flag in command._option_string_actions, f"{name} refuses {flag}"


# ---------------------------------------------------------------- d. a usage error: three lines, exit 2


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["top"], "one of the arguments --table --function is required"),
        (["top", "--table", "music-downloads"], "name a board"),
        (["rank", "--table", "music-downloads", "--month", MONTH], "--song"),
        (["size"], "--downloads-per-second"),
        ([*SIZE, "--zipf-exponent", "-1"], "--zipf-exponent"),
        (["reconcile", "--table", "music-downloads", "--month", "2018-13"], "--month"),
        (["nosuch"], "invalid choice: 'nosuch'"),
        ([], "the following arguments are required: command"),
        (["completion", "bash", "--bogus"], "unrecognized arguments: --bogus"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_a_usage_error_is_the_usage_line_the_error_and_a_help_hint(argv: list[str], error: str) -> None:
    result = tools(*argv)
    assert result.returncode == EXIT_USAGE
    usage, said, hint = usage_error_lines(result.stderr)
    assert usage.startswith("usage: leaderboard-tools")
    assert "error: " in said
    assert error in said
    assert "--help" in hint


@pytest.mark.parametrize("command", sorted(build_parser()[1].choices))
def test_every_command_says_an_unknown_flag_in_three_lines(command: str) -> None:
    result = tools(command, "--no-such-flag")
    assert result.returncode == EXIT_USAGE
    usage, said, hint = usage_error_lines(result.stderr)
    assert usage.startswith("usage: leaderboard-tools")
    assert "error: " in said
    assert "--help" in hint


# ---------------------------------------------------------------- e. no deployment: said plainly


@pytest.mark.matrix
@pytest.mark.parametrize("command", DEPLOYMENT_COMMANDS)
@pytest.mark.parametrize("stream", [False, True], ids=["no stream", "a stream no aggregator reads"])
def test_a_command_on_a_table_with_no_deployment_says_there_is_none(command: str, stream: bool, endpoint: str) -> None:
    # given a table the module is not attached to
    boto3.client("dynamodb", region_name=REGION).create_table(
        TableName="plain",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        **({"StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}} if stream else {}),
    )
    # when an operator command names it
    result = tools(command, "--table", "plain", *DEPLOYMENT_COMMANDS[command], endpoint=endpoint)
    # then it says there is no deployment there, in one line, and suggests no flag to stand in for one
    assert result.returncode == EXIT_ERROR
    assert result.stderr.startswith("error: no deployment of the module found for table plain: "), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "pass --" not in result.stderr


def test_a_table_that_does_not_exist_is_said_to_have_no_deployment(endpoint: str) -> None:
    result = tools("reconcile", "--table", "nosuch", "--month", MONTH, endpoint=endpoint)
    assert result.returncode == EXIT_ERROR
    assert result.stderr.startswith("error: no deployment of the module found for table nosuch: there is no such")


# ---------------------------------------------------------------- f. one, or more


def test_size_says_1_leaderboard_shard_not_shards() -> None:
    result = tools(*SIZE)
    assert result.returncode == EXIT_EXACT
    assert "1 leaderboard shard)" in " ".join(result.stdout.split())
    assert "1 leaderboard shards" not in result.stdout


def test_reconcile_says_each_count_in_the_singular_for_one(attached: str) -> None:
    result = tools("reconcile", "--table", "music-platform", "--month", MONTH, endpoint=attached)
    assert result.returncode == EXIT_EXACT, result.stderr
    assert "0 aggregates, 0 downloads recounted" in result.stdout
    assert "1 leaderboard shard)" in result.stdout
