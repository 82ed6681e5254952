"""`leaderboard-tools top|rank|all`: the request each command sends, the table it prints, --json unchanged (`all`: its
pages as one document). The verbs `range`, `range-by-count`, `card` and `score`, the output formats, paging and the
flags checked at parse time: test_query_verbs_cli.py."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

import query
from boards import Boards
from index_reads import Layout
from leaderboard_core.periods import PERIODS
from leaderboard_tools import cli, query_client
from leaderboard_tools.cli import HELP_HINT_END
from leaderboard_tools.commands import EXIT_AWS, EXIT_ERROR
from leaderboard_tools.commands.leaderboards import verbs
from leaderboard_tools.operator_aws import CREDENTIALS_FIX
from tests.unit.conftest import TABLE, FakeLambdaContext
from tests.unit.query.aggregates_on_moto import load_boards


class StubLambda:
    """A Lambda client whose invoke runs the query function's handler (on moto), recording every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, FunctionName: str, Payload: bytes) -> dict[str, Any]:  # noqa: N803 - boto3's parameter names
        request = json.loads(Payload)
        self.requests.append((FunctionName, request))
        answer = query.lambda_handler(request, FakeLambdaContext())
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}


class FailingLambda:
    def __init__(self, failure: BaseException | None = None, payload: Any = None, function_error: bool = False) -> None:
        self._failure, self._payload, self._function_error = failure, payload, function_error

    def invoke(self, **_: Any) -> dict[str, Any]:
        if self._failure is not None:
            raise self._failure
        response = {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(self._payload).encode())}
        return response | ({"FunctionError": "Unhandled"} if self._function_error else {})


DAYS = [f"2018-01-{day:02d}" for day in range(9, 16)]
JANUARY = {f"song{n}": 10 - n for n in range(1, 8)} | {"song9": 3}


@pytest.fixture
def stub(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> StubLambda:
    """A deployment keeping every period and categories, in 2 leaderboard shards, and its query function."""
    monkeypatch.setattr(query, "_dynamodb", dynamodb)
    monkeypatch.setattr(query, "AGGREGATES_TABLE_NAME", TABLE)
    monkeypatch.setattr(query, "LAYOUT", Layout(2))
    monkeypatch.setattr(query, "BOARDS", Boards(PERIODS, categories=True))
    boards = {"2018-01": JANUARY, "2018-01@rock": {"song2": 4, "song3": 4}, "all": JANUARY}
    boards |= {day: {f"song{n}": 1 + (n + index) % 3 for n in range(1, 6)} for index, day in enumerate(DAYS)}
    load_boards(dynamodb, boards, 2)
    return StubLambda()


def command(argv: list[str], client: Any, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the CLI on argv (`cli.main`, as the console script: its handling of AWS failures, a closed pipe and
    Ctrl-C included), the query function reached through `client`."""
    original = verbs.lambda_client
    verbs.lambda_client = lambda *_: client  # type: ignore[assignment]
    try:
        code = cli.main(argv)
    finally:
        verbs.lambda_client = original  # type: ignore[assignment]
    captured = capsys.readouterr()
    return code, captured.out, captured.err


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


def rows_of(table: str) -> list[str]:
    """The body rows of a printed table (rich draws them between │; the header between ┃)."""
    return [line for line in table.splitlines() if line.startswith("│")]


def test_top_of_a_month_asks_the_guides_request_of_the_tables_query_function(
    stub: StubLambda, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = command(
        ["top", "--table", "music-prod-downloads", "--month", "2018-01", "--limit", "3"], stub, capsys
    )
    assert code == 0
    assert stub.requests == [("music-prod-query", {"month": "2018-01", "limit": 3})]
    # then an aligned table: places, songs and counts in columns, the board in its title
    lines = rows_of(out)
    assert [line.split()[1:4:2] for line in lines] == [["1", "song1"], ["2", "song2"], ["3", "song3"]]
    assert "month 2018-01" in out
    assert len({line.index("│", 3) for line in lines}) == 1, out


def test_json_prints_the_query_functions_response_unchanged(
    stub: StubLambda, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["top", "--function", "f", "--period", "day", "--key", DAYS[-1], "--last", "7", "--json"]
    code, out, _ = command(argv, stub, capsys)
    expected = query.lambda_handler({"period": "day", "key": DAYS[-1], "limit": 10, "last": 7}, FakeLambdaContext())
    assert code == 0
    assert json.loads(out) == expected
    assert out == json.dumps(expected) + "\n"


@pytest.mark.parametrize(
    ("argv", "request_sent"),
    [
        (["top", "--period", "all"], {"period": "all", "limit": 10}),
        (["top", "--period", "day", "--key", "2018-01-15"], {"period": "day", "key": "2018-01-15", "limit": 10}),
        (["top", "--period", "week"], {"period": "week", "limit": 10}),
        (
            ["top", "--month", "2018-01", "--category", "rock", "--limit", "1"],
            {"month": "2018-01", "category": "rock", "limit": 1},
        ),
        (
            ["top", "--period", "day", "--key", "2018-01-15", "--last", "3"],
            {"period": "day", "key": "2018-01-15", "limit": 10, "last": 3},
        ),
        (["rank", "--month", "2018-01", "--song", "song3"], {"month": "2018-01", "songID": "song3"}),
        (
            ["rank", "--month", "2018-01", "--song", "song3", "--around", "2"],
            {"month": "2018-01", "songID": "song3", "around": 2},
        ),
        (
            ["rank", "--period", "hour", "--key", "2018-01-15T10", "--id", "p1", "--entity-attribute", "productID"],
            {"period": "hour", "key": "2018-01-15T10", "productID": "p1"},
        ),
    ],
)
def test_each_command_sends_the_query_contracts_request(
    argv: list[str], request_sent: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = FailingLambda(payload={"period": "x", "items": [], "next_token": None})
    sent: list[dict[str, Any]] = []
    original = recorder.invoke

    def record(**parameters: Any) -> dict[str, Any]:
        sent.append(json.loads(parameters["Payload"]))
        return original(**parameters)

    recorder.invoke = record  # type: ignore[method-assign]
    command([*argv, "--function", "f"], recorder, capsys)
    assert sent == [request_sent]


def test_rank_around_marks_the_song_among_its_neighbours(stub: StubLambda, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = command(
        ["rank", "--table", "t-downloads", "--month", "2018-01", "--song", "song3", "--around", "1"], stub, capsys
    )
    assert code == 0
    rows = [line.split() for line in rows_of(out)]
    assert [(row[1], row[3], row[5]) for row in rows] == [("2", "song2", "8"), ("3", "song3", "7"), ("4", "song4", "6")]
    assert "song3: 7 (rank 3)" in out


def test_all_follows_every_page(stub: StubLambda, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = command(["all", "--function", "f", "--period", "all", "--page-size", "3"], stub, capsys)
    assert code == 0
    assert len(stub.requests) == 3
    assert [line.split()[3] for line in rows_of(out)] == list(JANUARY)
    assert [line.split()[1] for line in rows_of(out)] == [str(rank) for rank in range(1, len(JANUARY) + 1)]
    # with --json, the pages' items in one document, as one page of the whole listing would hold them
    code, out, _ = command(["all", "--function", "f", "--period", "all", "--page-size", "3", "--json"], stub, capsys)
    answer = json.loads(out)
    assert [item["songID"] for item in answer["items"]] == list(JANUARY)
    assert (answer["period"], answer["next_token"]) == ("all", None)


def test_a_rolling_window_shows_its_reads(stub: StubLambda, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = command(
        ["top", "--function", "f", "--period", "day", "--key", DAYS[-1], "--last", "7"], stub, capsys
    )
    assert code == 0
    assert "last 7 days to 2018-01-15" in out
    assert "Queries" in out


def test_a_table_not_named_like_the_modules_says_what_to_give(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = command(["top", "--table", "music", "--month", "2018-01"], FailingLambda(payload={}), capsys)
    assert code == 1
    assert "not named like the module's table" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["top", "--function", "f"], "name a board"),
        (["top", "--function", "f", "--month", "2018-01", "--key", "2018-01"], "not both"),
    ],
)
def test_a_command_that_names_no_board_is_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        command(argv, FailingLambda(payload={}), capsys)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_an_error_answer_is_said_and_with_json_printed_unchanged(
    stub: StubLambda, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a category too long for a board id: what only the function knows
    argv = ["top", "--function", "f", "--period", "day", "--key", "2018-02-03", "--category", "x" * 1100]
    code, out, err = command(argv, stub, capsys)
    assert (code, out) == (1, "")
    assert "InvalidRequest: category is too long" in err
    code, out, err = command([*argv, "--json"], stub, capsys)
    assert code == 1
    assert json.loads(out)["error"]["code"] == "InvalidRequest"


@pytest.mark.parametrize(
    ("client", "message"),
    [
        (FailingLambda(ClientError({"Error": {"Code": "ResourceNotFoundException"}}, "Invoke")), "f does not exist"),
        (FailingLambda(payload={"errorMessage": "boom"}, function_error=True), "f failed"),
        (FailingLambda(payload=[1]), "not a query answer"),
    ],
)
def test_an_invocation_that_fails_is_said_plainly(
    client: FailingLambda, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = command(["top", "--function", "f", "--month", "2018-01"], client, capsys)
    assert code == EXIT_ERROR
    assert message in one_line(err)


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (NoCredentialsError(), f"no AWS credentials found (Unable to locate credentials): {CREDENTIALS_FIX}"),
        (ClientError({"Error": {"Code": "UnrecognizedClientException"}}, "Invoke"), CREDENTIALS_FIX),
        (ClientError({"Error": {"Code": "AccessDeniedException"}}, "Invoke"), "AWS denied Invoke"),
        (ClientError({"Error": {"Code": "TooManyRequestsException"}}, "Invoke"), "AWS throttled Invoke"),
        (ClientError({"Error": {"Code": "ServiceException"}}, "Invoke"), "AWS refused Invoke (ServiceException"),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:9"), "cannot reach AWS"),
    ],
    ids=["no-credentials", "refused-credentials", "access-denied", "throttled", "refused", "unreachable"],
)
def test_aws_refusing_or_unreachable_is_exit_5_in_the_operator_commands_words(
    failure: Exception, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # given AWS refusing the invocation, or not reached: then exit 5 and one line, as every command says it
    code, out, err = command(["top", "--function", "f", "--month", "2018-01"], FailingLambda(failure), capsys)
    assert (code, out) == (EXIT_AWS, "")
    assert one_line(err).startswith("error: ")
    assert message in err


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({}, "no AWS region: pass --region"),
        ({"AWS_DEFAULT_REGION": "us-east-1", "AWS_PROFILE": "nosuch"}, "the AWS profile 'nosuch' is in no AWS config"),
    ],
    ids=["no-region", "unknown-profile"],
)
def test_no_region_or_an_unknown_profile_is_exit_5(
    environment: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given no region anywhere (no flag, no variable, no config file), or a profile no config file has
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    # when a board command makes its client, then exit 5 with the operator commands' line, nothing asked
    assert cli.main(["top", "--function", "f", "--month", "2018-01"]) == EXIT_AWS
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in one_line(captured.err)


def test_the_client_is_boto3s_standard_session_at_the_given_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    aws = query_client.lambda_client(None, "eu-west-1", None)
    assert aws.meta.endpoint_url == "https://lambda.eu-west-1.amazonaws.com"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4599")
    assert query_client.lambda_client(None, "eu-west-1", None).meta.endpoint_url == "http://127.0.0.1:4599"
    assert query_client.lambda_client(None, "eu-west-1", "http://x:1").meta.endpoint_url == "http://x:1"
