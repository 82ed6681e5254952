"""Every error is one line and an exit code from one table; flags are checked as they are parsed, against the module's
own limits; the AWS CLI's connection conventions (AWS_REGION, --cli-connect-timeout/--cli-read-timeout, retries said,
--debug, --version); --dry-run writes nothing; recover keeps what an operator needs to fix a malformed download; every
operator command prints --output json|table|text (issue 29).

The commands run through `leaderboard_tools.cli.main` against the module's deployment in moto (operator_stack.py), or
in a child process where a real pipe, a real port or the real environment matters.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import boto3
import botocore.handlers
import pytest
from botocore.awsrequest import AWSResponse

from leaderboard_tools.argument_types import LEADERBOARD_SHARDS
from leaderboard_tools.cli import HELP_HINT_END, build_parser
from leaderboard_tools.commands import EXIT_AWS, EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE, leaderboards
from leaderboard_tools.interruption import WORKERS_STOP, WorkerStopped
from leaderboard_tools.operator_aws import CREDENTIALS_FIX, operator_clients
from leaderboard_tools.reconcile import Reconciler
from tests.terraform_config import hcl_document
from tests.unit.tools.operator_stack import (
    MONTH,
    QUICK_BANDS,
    REGION,
    ModelAggregator,
    MotoStack,
    aggregate_item,
    deploy,
    drifted_song,
    on_every_new_client,
    once_the_band_opens,
    run,
    stored_count,
    write_download,
)

REPOSITORY = Path(__file__).resolve().parents[3]
OPERATOR_COMMANDS = ("reconcile", "recover", "rekey", "backfill", "readers")
BOARD_COMMANDS = tuple(leaderboards.SUMMARIES)
"""top, rank, all, range, range-by-count, card, score."""
WRITES = {
    "UpdateItem",
    "PutItem",
    "DeleteItem",
    "BatchWriteItem",
    "TransactWriteItems",
    "SendMessage",
    "SendMessageBatch",
    "DeleteMessage",
    "DeleteMessageBatch",
    "Invoke",
}
"""Every request that changes something the tools reach: DynamoDB items, the queues, the aggregator."""


@pytest.fixture(autouse=True)
def quick_bands(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = Reconciler.__init__.__kwdefaults__
    monkeypatch.setitem(defaults, "band_settle_seconds", QUICK_BANDS["band_settle_seconds"])
    monkeypatch.setitem(defaults, "band_poll_seconds", QUICK_BANDS["band_poll_seconds"])
    monkeypatch.setitem(defaults, "band_seconds", QUICK_BANDS["band_seconds"])


@pytest.fixture
def operations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every operation any botocore client calls from now on (moto still answers them)."""
    called: list[str] = []

    def record(model: Any, **_: Any) -> None:
        called.append(model.name)

    monkeypatch.setattr(
        botocore.handlers, "BUILTIN_HANDLERS", [("before-call", record), *botocore.handlers.BUILTIN_HANDLERS]
    )
    return called


def one_line(text: str) -> str:
    """stderr holds exactly one line (a usage error's usage line and --help hint aside), and no traceback."""
    assert "Traceback" not in text, text
    lines = [
        line
        for line in text.splitlines()
        if line.strip() and not line.startswith(("usage:", " ")) and not line.endswith(HELP_HINT_END)
    ]
    assert len(lines) == 1, text
    return lines[0]


def child_environment(**settings: str) -> dict[str, str]:
    """This interpreter's environment for a child, without AWS settings of the machine, with these."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("AWS_") or name in ("AWS_DEFAULT_REGION",)
    }
    paths = [str(REPOSITORY / part) for part in ("src", "development", "lambda_src", "lambda_src/aggregator")]
    environment["PYTHONPATH"] = os.pathsep.join([*paths, str(REPOSITORY), environment.get("PYTHONPATH", "")])
    environment.update(
        AWS_CONFIG_FILE="/nonexistent",
        AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
        AWS_EC2_METADATA_DISABLED="true",
        AWS_DEFAULT_REGION=REGION,
    )
    return environment | settings


def tools(*arguments: str, **environment: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "leaderboard_tools", *arguments],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPOSITORY,
        env=child_environment(**environment),
        timeout=120,
    )


# ---------------------------------------------------------------- 1. no traceback: input, pipe, Ctrl-C


@pytest.mark.parametrize(
    "argv",
    [
        ["reconcile", "--table", "music-downloads", "--month", MONTH],
        ["recover", "--table", "music-downloads"],
        ["rekey", "--table", "music-downloads", "--shards", "2"],
        ["backfill", "--table", "music-downloads"],
        ["readers", "--table", "music-downloads"],
        ["top", "--table", "music-downloads", "--month", MONTH],
    ],
    ids=lambda argv: argv[0],
)
def test_an_endpoint_that_is_not_a_url_is_a_usage_error(
    argv: list[str], aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given --endpoint-url notaurl, then AWS_ENDPOINT_URL=notaurl (which botocore reads itself, and refused with a
    # ValueError traceback)
    flag = run([*argv, "--endpoint-url", "notaurl"])
    flag_error = capsys.readouterr().err
    monkeypatch.setenv("AWS_ENDPOINT_URL", "notaurl")
    variable = run(argv)
    variable_error = capsys.readouterr().err
    # then each is a usage error: exit code 2, one line naming the setting to fix
    assert (flag, variable) == (EXIT_USAGE, EXIT_USAGE)
    assert "--endpoint-url" in one_line(flag_error)
    assert "AWS_ENDPOINT_URL=notaurl" in one_line(variable_error)


CLOSED_PIPE_CHILD = """
import sys
from moto import mock_aws
with mock_aws():
    from tests.unit.tools.operator_stack import MONTH, ModelAggregator, deploy, write_download
    stack = deploy()
    for number in range(50):
        write_download(stack, f"song{number}", f"d{number}")
    from leaderboard_tools.cli import main
    code = main(["reconcile", "--table", stack.table, "--month", MONTH, "--json", "--clock-margin-seconds", "0"])
sys.exit(code)
"""


def test_a_closed_pipe_ends_the_command_quietly() -> None:
    # given `reconcile --json | head -0`: the reader of its output gone before it prints
    child = subprocess.Popen(
        [sys.executable, "-c", CLOSED_PIPE_CHILD],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPOSITORY,
        env=child_environment(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing"),
    )
    assert child.stdout is not None
    assert child.stderr is not None
    child.stdout.close()
    # when it prints its report
    error = child.stderr.read().decode()
    code = child.wait(timeout=120)
    # then it ends quietly (no BrokenPipeError, no "Exception ignored"), with 128 + SIGPIPE as a shell reports it
    assert (code, error) == (EXIT_BROKEN_PIPE, "")


def test_ctrl_c_during_a_repair_says_what_it_repaired_and_what_to_run(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a drifted song (2 downloads, stored 5), and Ctrl-C once the repair has opened its band
    stack = drifted_song()

    def ctrl_c() -> None:
        raise KeyboardInterrupt

    at_the_first_wait = once_the_band_opens(stack, ctrl_c)
    monkeypatch.setitem(Reconciler.__init__.__kwdefaults__, "sleep", at_the_first_wait)
    # (a loaded machine may reach the band's first look with no pause before it: the look is a wait too)
    looking = Reconciler._in_flight

    def in_flight(self: Reconciler, *arguments: Any, **keywords: Any) -> Any:
        at_the_first_wait(0)
        return looking(self, *arguments, **keywords)

    monkeypatch.setattr(Reconciler, "_in_flight", in_flight)
    # when reconcile --repair runs
    code = run(["reconcile", "--table", stack.table, "--month", MONTH, "--repair"])
    # then it exits 130 with one line: what it repaired, that its band is closed, and what to run
    line = one_line(capsys.readouterr().err)
    assert code == EXIT_INTERRUPTED
    assert line.startswith("interrupted: the repair had repaired song1 in 2018-03;")
    assert "are closed" in line
    assert "leaderboard-tools recover" in line
    assert "run the same command again" in line
    # and that is the state it left: the count exact, the band gone
    assert stored_count(stack, "song1", MONTH) == 2
    assert "RecountBand" not in (aggregate_item(stack, "song1", MONTH) or {})


def test_ctrl_c_before_the_repair_writes_says_nothing_was_written(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a drifted song and Ctrl-C during the recount (the long part of a repair: the scan)
    stack = drifted_song()

    def interrupted_scan(*_: Any, **__: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(Reconciler, "_recount", interrupted_scan)
    # when reconcile --repair runs, then it exits 130 saying that nothing was written, which is so
    code = run(["reconcile", "--table", stack.table, "--month", MONTH, "--repair"])
    assert code == EXIT_INTERRUPTED
    assert one_line(capsys.readouterr().err).startswith("interrupted: nothing was written")
    assert stored_count(stack, "song1", MONTH) == 5


def test_ctrl_c_during_recover_says_what_it_deleted_and_that_the_rest_comes_back(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a failure queue holding a refused record, and Ctrl-C during recover's recount
    stack = deploy()
    write_download(stack, "song1", "d1")
    send(stack, {"kind": "refused_record", "reason": "overflow", "entityId": "song1", "board": MONTH})

    def interrupted(*_: Any, **__: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(Reconciler, "run", interrupted)
    # when recover runs, then it exits 130 saying what it deleted and that the message comes back for the next run
    code = run(["recover", "--table", stack.table])
    line = one_line(capsys.readouterr().err)
    assert code == EXIT_INTERRUPTED
    assert "recover had deleted 0 of the 1 message it received" in line
    assert "visible again within 120 s" in line
    assert "run `leaderboard-tools recover` again" in line


def test_ctrl_c_while_waiting_on_aws_is_one_line_and_exit_130() -> None:
    # given a command waiting on an endpoint that accepted its connection and never answers (no read timeout)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        child = subprocess.Popen(
            [sys.executable, "-m", "leaderboard_tools", "reconcile", "--table", "music-downloads", "--month", MONTH],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPOSITORY,
            env=child_environment(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
            | {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{server.getsockname()[1]}"},
        )
        server.settimeout(60)
        connection, _ = server.accept()
        # when the operator presses Ctrl-C (SIGINT)
        with connection:
            time.sleep(0.5)  # the request sent: the command waits for its answer
            child.send_signal(signal.SIGINT)
            out, error = child.communicate(timeout=30)
    # then it exits 130 at once with one line saying what state it left, and no traceback
    assert child.returncode == EXIT_INTERRUPTED
    assert one_line(error) == (
        "interrupted: nothing was written (reconcile writes only with --repair, after its recount and its in-flight "
        "check): run the same command again"
    )
    assert out == ""


def test_ctrl_c_stops_the_worker_threads_requests_not_the_main_thread_s(aws: None) -> None:
    # given a client, and the run interrupted (what stopping_workers' SIGINT handler sets)
    clients = operator_clients(region=REGION, endpoint_url="http://127.0.0.1:9")
    outcome: list[BaseException] = []

    def worker() -> None:
        try:
            clients.dynamodb.describe_table(TableName="music-downloads")
        except BaseException as error:
            outcome.append(error)

    WORKERS_STOP.set()
    try:
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    finally:
        WORKERS_STOP.clear()
    # then a worker thread's next request is not sent (a scan segment stops at once, its pool does not wait on it)
    assert [type(error) for error in outcome] == [WorkerStopped]


def test_an_unexpected_error_is_one_line_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a command whose work raises what no command expects (a bug)
    from leaderboard_tools.commands import readers

    monkeypatch.setattr(readers, "run", lambda arguments: 1 / 0)
    # when it runs, then one line says so, exit code 1, and --debug would show where
    assert run(["readers", "--table", "music-downloads"]) == 1
    assert "unexpected ZeroDivisionError" in one_line(capsys.readouterr().err)


# ---------------------------------------------------------------- 2. AWS refused or unreachable: exit code 5


def refused_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every request answered as AWS answers an unknown access key."""

    def answer(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        error = {
            "Code": "UnrecognizedClientException",
            "Message": "The security token included in the request is invalid.",
        }
        return AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 400, {}, None), {
            "Error": error,
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }

    on_every_new_client(monkeypatch, "before-call", answer)


def test_no_or_refused_credentials_exit_5_with_one_wording(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given credentials AWS refuses
    refused_credentials(monkeypatch)
    refused = run(["reconcile", "--table", "music-downloads", "--month", MONTH])
    refused_line = one_line(capsys.readouterr().err)
    # and, in a child, no credentials at all
    missing = tools("rekey", "--table", "music-downloads", "--shards", "2", "--endpoint-url", "http://127.0.0.1:9")
    # then both exit 5, each with the same words for what fixes it
    assert (refused, missing.returncode) == (EXIT_AWS, EXIT_AWS), missing.stderr
    assert "AWS refused the credentials (UnrecognizedClientException" in refused_line
    assert "no AWS credentials found" in one_line(missing.stderr)
    assert CREDENTIALS_FIX in refused_line
    assert CREDENTIALS_FIX in missing.stderr


def test_an_unreachable_endpoint_fails_in_seconds_saying_each_retry() -> None:
    # given an endpoint nothing listens on
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # when a command reaches it
    began = time.monotonic()
    result = tools(
        "reconcile",
        *("--table", "music-downloads", "--month", MONTH, "--endpoint-url", f"http://127.0.0.1:{port}"),
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
    )
    took = time.monotonic() - began
    # then it gives up after 3 attempts (not 10 with backoff: 50-77 s), each retry said on a line, and exits 5
    retries = [line for line in result.stderr.splitlines() if line.startswith("retrying DescribeTable")]
    assert result.returncode == EXIT_AWS, result.stderr
    assert len(retries) == 2
    assert "(attempt 3 of 3)" in retries[1]
    assert "cannot reach AWS" in result.stderr.splitlines()[-1]
    assert "--endpoint-url" in result.stderr
    assert took < 20


class RawBody:
    """What botocore reads an HTTP response's body from (urllib3's `stream()`)."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def test_a_throttled_request_is_retried_and_each_retry_said(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    # given DynamoDB throttling a request once (then moto answers it)
    clients = operator_clients(region=REGION)
    throttled = [True]

    def throttle(request: Any, **_: Any) -> AWSResponse | None:
        if not throttled:
            return None
        throttled.pop()
        body = b'{"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException", "message": "Rate exceeded"}'
        return AWSResponse(request.url, 400, {"Content-Type": "application/x-amz-json-1.0"}, RawBody(body))

    clients.dynamodb.meta.events.register_first("before-send.dynamodb.ListTables", throttle)
    # when the request is made, then it is retried (up to 10 attempts on throttling), and the retry said on stderr
    assert clients.dynamodb.list_tables()["TableNames"] == []
    assert capsys.readouterr().err == (
        "retrying ListTables at dynamodb.us-east-1.amazonaws.com (attempt 2 of 10) after: ThrottlingException: "
        "Rate exceeded\n"
    )


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """An endpoint that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


def test_cli_read_timeout_bounds_a_silent_endpoint(silent_endpoint: str) -> None:
    # given an endpoint that never answers, and --cli-read-timeout 0.5 (the AWS CLI's option)
    began = time.monotonic()
    result = tools(
        "rekey",
        *("--table", "music-downloads", "--shards", "2", "--endpoint-url", silent_endpoint),
        "--cli-read-timeout",
        "0.5",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
    )
    # then the command gives up after 3 timed-out attempts, within seconds, with exit code 5
    assert result.returncode == EXIT_AWS, result.stderr
    assert "Read timeout" in result.stderr.splitlines()[-1]
    assert time.monotonic() - began < 20


def test_aws_region_is_honoured_before_aws_default_region(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # given AWS_REGION alone (the SDKs' variable, which the pinned botocore does not read)
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert operator_clients().dynamodb.meta.region_name == "eu-west-1"
    # and with both: AWS_REGION wins, as the AWS CLI documents; --region wins over both
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert operator_clients().dynamodb.meta.region_name == "eu-west-1"
    assert operator_clients(region="ap-south-1").dynamodb.meta.region_name == "ap-south-1"


def test_a_command_runs_with_aws_region_alone(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = drifted_song()
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_REGION", REGION)
    assert run(["reconcile", "--table", stack.table, "--month", MONTH]) == 3, capsys.readouterr().err


# ---------------------------------------------------------------- 3. parse-time validation


@pytest.mark.parametrize(
    "argv",
    [["rekey", "--table", "music-downloads", "--shards", value] for value in ("0", "-1", "65", "2.5", "x")]
    + [
        ["reconcile", "--table", "music-downloads", "--month", MONTH, "--songs", value]
        for value in ("", ",,", "song1,,song2", "song1,")
    ]
    + [
        ["reconcile", "--table", "music-downloads", "--month", MONTH, "--repair", flag, value]
        for flag in ("--band-seconds", "--stream-budget-seconds")
        for value in ("nan", "inf", "0", "-5")
    ]
    + [
        ["reconcile", "--table", "music-downloads", "--month", MONTH, "--clock-margin-seconds", value]
        for value in ("nan", "-1")
    ]
    + [
        ["reconcile", "--table", "music-downloads", "--month", "2018-13"],
        ["reconcile", "--table", "music-downloads", "--board", "2018-13"],
        ["reconcile", "--table", "music-downloads", "--month", MONTH, "--shards", "65"],
        ["recover", "--table", "music-downloads", "--shards", "0"],
        ["recover", "--table", "music-downloads", "--queue-url", "queue"],
        ["reconcile", "--table", "", "--month", MONTH],
        ["backfill", "--table", "music-downloads", "--max-read-units", "nan"],
        ["backfill", "--table", "music-downloads", "--max-read-units", "inf"],
        ["backfill", "--table", "music-downloads", "--segments", "0"],
        ["readers", "--table", "music-downloads", "--cli-connect-timeout", "-1"],
        ["rekey", "--table", "music-downloads", "--shards", "2", "--cli-read-timeout", "nan"],
        ["reconcile", "--table", "music-downloads", "--month", MONTH, "--dry-run"],
    ],
)
def test_a_value_outside_the_module_s_limits_is_refused_before_anything_is_sent(
    argv: list[str], aws: None, operations: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(argv) == EXIT_USAGE
    assert "error:" in one_line(capsys.readouterr().err)
    assert operations == []


def test_the_shards_limit_is_the_module_s(terraform_variables: dict[str, Any]) -> None:
    # given the module's validation of leaderboard_shards, then the tools accept the same whole numbers
    condition = terraform_variables["leaderboard_shards"]["validation"][0]["condition"]
    bounds = [int(match) for match in re.findall(r"(?:>=|<=)\s*(\d+)", condition)]
    assert (min(bounds), max(bounds)) == (LEADERBOARD_SHARDS.start, LEADERBOARD_SHARDS.stop - 1)


@pytest.fixture
def terraform_variables() -> dict[str, Any]:
    document = hcl_document(REPOSITORY / "terraform" / "variables.tf")
    return {name.strip('"'): body for block in document["variable"] for name, body in block.items()}


# ---------------------------------------------------------------- 4. --version, --help, --debug


def test_version_is_the_installed_distribution_s(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"leaderboard-tools {metadata.version('leaderboard-tools')}"


def test_every_operator_command_has_a_description_and_every_flag_help() -> None:
    _, commands = build_parser()
    missing = []
    for name in (*OPERATOR_COMMANDS, *BOARD_COMMANDS):
        parser = commands.choices[name]
        if not parser.description:
            missing.append(f"{name}: no description")
        if "exit codes" not in (parser.epilog or ""):
            missing.append(f"{name}: no exit codes")
        missing += [
            f"{name} {action.option_strings[0]}"
            for action in parser._actions
            if action.option_strings and not action.help
        ]
    assert missing == []


def test_help_names_every_command_registered() -> None:
    # given every command the modules register (the board commands, size, the operator commands, any added later)
    parser, commands = build_parser()
    assert {*BOARD_COMMANDS, *OPERATOR_COMMANDS, "size"} <= set(commands.choices)
    # then --help's description names each of them, as a word of its own (`range` apart from `range-by-count`)
    description = " ".join((parser.description or "").split())
    named = [name for name in commands.choices if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", description)]
    assert named == list(commands.choices), description


def test_debug_logs_botocore_s_requests_on_stderr(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    stack = drifted_song()
    # --debug after the command, or before it (as the AWS CLI takes it)
    after = run(["readers", "--table", stack.table, "--debug"])
    after_error = capsys.readouterr().err
    before = run(["--debug", "readers", "--table", stack.table])
    before_error = capsys.readouterr().err
    quiet = run(["readers", "--table", stack.table])
    assert (after, before, quiet) == (0, 0, 0)
    for error in (after_error, before_error):
        assert "botocore.endpoint - DEBUG - Making request for OperationModel(name=DescribeTable)" in error
    assert "DEBUG" not in capsys.readouterr().err


# ---------------------------------------------------------------- 5. --dry-run writes nothing


def test_a_dry_run_repair_says_what_it_would_repair_and_writes_nothing(
    aws: None, operations: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # given a drifted song: 2 downloads, stored 5
    stack = drifted_song()
    operations.clear()
    capsys.readouterr()
    # when reconcile --repair --dry-run runs
    code = run(["reconcile", "--table", stack.table, "--month", MONTH, "--repair", "--dry-run", "--json"])
    # then it reports the repair it would make, exits 3 (the difference remains), and sent no write of any kind
    report = json.loads(capsys.readouterr().out)
    assert [(d["songID"], d["stored"], d["recounted"], d["state"]) for d in report["differences"]] == [
        ("song1", 5, 2, "would_repair")
    ]
    assert code == 3
    assert "Scan" in operations or "Query" in operations
    assert WRITES.isdisjoint(operations), operations
    assert stored_count(stack, "song1", MONTH) == 5


def test_a_dry_run_rekey_counts_what_it_would_move_and_writes_nothing(
    aws: None, operations: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # given four leaderboard shards, and song1's aggregate still in the one-shard layout's partition
    stack = deploy(shards=4)
    write_download(stack, "song1", "d1")
    write_download(stack, "song2", "d2")
    ModelAggregator(stack).run()
    old_layout(stack, "song1")
    operations.clear()
    capsys.readouterr()
    # when rekey --dry-run runs
    code = run(["rekey", "--table", stack.table, "--shards", "4", "--dry-run", "--output", "json"])
    report = json.loads(capsys.readouterr().out)
    # then it counts the move, and wrote nothing: song1 is where it was
    assert (code, report["moved"], report["unchanged"], report["dry_run"]) == (0, 1, 1, True)
    assert WRITES.isdisjoint(operations), operations
    assert (aggregate_item(stack, "song1", MONTH) or {})["Month"]["S"] == MONTH
    # and the same rekey without --dry-run moves it
    assert run(["rekey", "--table", stack.table, "--shards", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["moved"] == 1
    assert (aggregate_item(stack, "song1", MONTH) or {})["Month"]["S"] != MONTH


def old_layout(stack: MotoStack, song: str) -> None:
    boto3.client("dynamodb", region_name=REGION).update_item(
        TableName=stack.table,
        Key={"songID": {"S": song}, "SK": {"S": MONTH}},
        UpdateExpression="SET #period = :old",
        ExpressionAttributeNames={"#period": "Month"},
        ExpressionAttributeValues={":old": {"S": MONTH}},
    )


# ---------------------------------------------------------------- 6. recover keeps the key; --output everywhere


def send(stack: MotoStack, body: dict[str, Any]) -> None:
    boto3.client("sqs", region_name=REGION).send_message(QueueUrl=stack.queue_url, MessageBody=json.dumps(body))


def rejected_download(stack: MotoStack) -> dict[str, Any]:
    """The aggregator's message for a download it cannot parse: the stream record, whose Keys name the item."""
    return {
        "kind": "rejected_download",
        "reason": "Timestamp 'yesterday' is not an ISO 8601 timestamp",
        "sequenceNumber": "700",
        "shardId": "shardId-1",
        "streamArn": stack.stream_arn,
        "record": {
            "eventName": "INSERT",
            "dynamodb": {
                "Keys": {"songID": {"S": "song7"}, "SK": {"S": "download-42"}},
                "NewImage": {"songID": {"S": "song7"}, "SK": {"S": "download-42"}, "Timestamp": {"S": "yesterday"}},
                "SequenceNumber": "700",
            },
        },
    }


def test_recover_reports_the_key_of_a_malformed_download_it_deletes(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a malformed download's message in the failure queue
    stack = deploy()
    send(stack, rejected_download(stack))
    # when recover answers it (deleting it: it is never countable)
    code = run(["recover", "--table", stack.table, "--output", "json"])
    report = json.loads(capsys.readouterr().out)
    # then the report keeps the item's key, so the operator knows which item to fix
    assert code == 0
    assert report["deleted"] == 1
    assert report["rejected_downloads"] == [
        {
            "reason": "Timestamp 'yesterday' is not an ISO 8601 timestamp",
            "sequenceNumber": "700",
            "key": {"songID": "song7", "SK": "download-42"},
        }
    ]


def test_recover_prints_a_table_by_default_and_text_on_request(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    stack = deploy()
    send(stack, rejected_download(stack))
    send(stack, rejected_download(stack) | {"sequenceNumber": "701"})
    # by default: for a person, the key to fix on the line
    assert run(["recover", "--table", stack.table]) == 0
    table = capsys.readouterr().out
    assert "recover: 2 messages received, 2 deleted, 0 kept" in table
    assert "songID=song7, SK=download-42: Timestamp 'yesterday' is not an ISO 8601 timestamp" in table
    # --output text: one tab-separated line per record, its kind first
    send(stack, rejected_download(stack))
    assert run(["recover", "--table", stack.table, "--output", "text"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split("\t") == [
        "rejected_download",
        "songID=song7, SK=download-42",
        "700",
        "Timestamp 'yesterday' is not an ISO 8601 timestamp",
    ]


@pytest.mark.matrix
@pytest.mark.parametrize("command", OPERATOR_COMMANDS)
def test_every_operator_command_takes_output_json_table_text(
    command: str, aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a deployment (with the claims a backfill needs), a drifted song and a malformed download reported
    from tests.unit.tools.test_backfill import stack_with_claims, write_history

    stack = stack_with_claims()
    write_history(stack, 3)
    argv = {
        "reconcile": ["reconcile", "--table", stack.table, "--month", "2018-03"],
        "recover": ["recover", "--table", stack.table],
        "rekey": ["rekey", "--table", stack.table, "--shards", "1"],
        "backfill": ["backfill", "--table", stack.table, "--segments", "1"],  # moto's backends are not thread-safe
        "readers": ["readers", "--table", stack.table],
    }[command]
    outputs = {}
    for output in ("json", "table", "text"):
        capsys.readouterr()
        if command == "recover":
            send(stack.moto, rejected_download(stack.moto))
        code = run([*argv, "--output", output])
        outputs[output] = (code, capsys.readouterr())
    # when each output is asked for, then each answers alike: one JSON document, a table for a person, tab-separated
    codes = {code for code, _ in outputs.values()}
    assert len(codes) == 1, outputs
    assert isinstance(next(iter(codes)), int), outputs
    json.loads(outputs["json"][1].out)
    with pytest.raises(json.JSONDecodeError):
        json.loads(outputs["table"][1].out)
    assert "\t" in outputs["text"][1].out


def test_interrupt_handler_is_put_back_after_a_command(aws: None) -> None:
    before = signal.getsignal(signal.SIGINT)
    run(["reconcile", "--table", "music-downloads", "--month", MONTH])
    assert signal.getsignal(signal.SIGINT) is before
