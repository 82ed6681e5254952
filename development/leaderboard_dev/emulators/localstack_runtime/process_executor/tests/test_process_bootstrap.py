from __future__ import annotations

import decimal
import io
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from localstack_process_executor import bootstrap
from localstack_process_executor.bootstrap import (
    HandlerError,
    LambdaContext,
    LogSink,
    Tee,
    execute,
    load_handler,
    parse_handler,
    report,
)


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        ("app.handler", ("app", "handler")),
        ("pkg.module.handler", ("pkg.module", "handler")),
        ("src/lambdas/aggregate.handler", ("src.lambdas.aggregate", "handler")),
    ],
)
def test_parse_handler(handler: str, expected: tuple[str, str]) -> None:
    assert parse_handler(handler) == expected


@pytest.mark.parametrize("handler", ["handler", "", "app.", ".handler"])
def test_malformed_handler(handler: str) -> None:
    with pytest.raises(HandlerError) as error:
        parse_handler(handler)
    assert error.value.error_type == "Runtime.MalformedHandlerName"


@pytest.fixture
def task_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "good_fn.py").write_text("def handler(event, context):\n    return event\n")
    (tmp_path / "broken_fn.py").write_text("def handler(:\n")
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "deep_fn.py").write_text("def run(event, context):\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("good_fn", "broken_fn", "nested", "nested.deep_fn"):
        sys.modules.pop(name, None)


def test_load_handler(task_root: Path) -> None:
    assert load_handler("good_fn.handler")({"a": 1}, None) == {"a": 1}
    assert load_handler("nested/deep_fn.run")({}, None) == 1


@pytest.mark.parametrize(
    ("handler", "error_type", "message"),
    [
        ("missing_fn.handler", "Runtime.ImportModuleError", "Unable to import module 'missing_fn'"),
        (
            "good_fn.absent",
            "Runtime.HandlerNotFound",
            "Handler 'absent' missing on module 'good_fn'",
        ),
        ("broken_fn.handler", "Runtime.UserCodeSyntaxError", "Syntax error in module 'broken_fn'"),
    ],
)
def test_load_handler_errors(task_root: Path, handler: str, error_type: str, message: str) -> None:
    with pytest.raises(HandlerError) as error:
        load_handler(handler)
    assert error.value.error_type == error_type
    assert str(error.value).startswith(message)
    assert error.value.payload()["errorType"] == error_type


def context(timeout: float = 3.0) -> LambdaContext:
    return LambdaContext("req-1", "arn:aws:lambda:us-east-1:000000000000:function:f", time.monotonic() + timeout)


def test_execute_success_serialises_decimals_like_the_aws_runtime() -> None:
    ok, body = execute(lambda event, ctx: {"n": decimal.Decimal("5"), **event}, '{"a": 1}', context())
    assert ok
    assert json.loads(body) == {"n": 5.0, "a": 1}


def test_execute_empty_payload_is_an_empty_event() -> None:
    ok, body = execute(lambda event, ctx: event, "", context())
    assert ok
    assert json.loads(body) == {}


def test_execute_exception_becomes_error_document(capsys: pytest.CaptureFixture[str]) -> None:
    def handler(event: Any, ctx: Any) -> None:
        raise ValueError("boom")

    ok, body = execute(handler, "{}", context())
    error = json.loads(body)
    assert not ok
    assert error["errorType"] == "ValueError"
    assert error["errorMessage"] == "boom"
    assert error["requestId"] == "req-1"
    assert any("raise ValueError" in line for line in error["stackTrace"])
    assert "[ERROR] ValueError: boom" in capsys.readouterr().err


def test_execute_unserialisable_result_is_a_marshal_error() -> None:
    ok, body = execute(lambda event, ctx: {"s": {1, 2}}, "{}", context())
    assert not ok
    assert json.loads(body)["errorType"] == "Runtime.MarshalError"


def test_context_remaining_time() -> None:
    assert 1500 < context(2.0).get_remaining_time_in_millis() <= 2000
    assert context(-1.0).get_remaining_time_in_millis() == 0


def test_tee_records_and_passes_through() -> None:
    sink, stream = LogSink(), io.StringIO()
    tee = Tee(stream, sink)
    print("hello", file=tee)
    assert stream.getvalue() == "hello\n"
    assert sink.take() == "hello\n"
    assert sink.take() == ""
    assert tee.getvalue() == "hello\n"


def test_report_lines() -> None:
    lines = report("req-1", time.monotonic()).splitlines()
    assert lines[0] == "END RequestId: req-1"
    assert lines[1].startswith("REPORT RequestId: req-1\tDuration: ")
    assert "\tMax Memory Used: " in lines[1]


class FakeLocalStack(BaseHTTPRequestHandler):
    """Records what the runtime posts to LocalStack's executor endpoint."""

    posts: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.posts.append((self.path, body))
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def wait_for_posts(count: int, timeout: float = 10.0) -> list[tuple[str, bytes]]:
    deadline = time.monotonic() + timeout
    while len(FakeLocalStack.posts) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return list(FakeLocalStack.posts)


@pytest.fixture
def fake_localstack() -> Iterator[str]:
    FakeLocalStack.posts = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeLocalStack)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/_localstack_lambda/env1"
    server.shutdown()


def start_runtime(task_root: Path, endpoint: str, handler: str) -> tuple[subprocess.Popen[bytes], int]:
    listener = socket.create_server(("127.0.0.1", 0))
    env = {
        "PATH": os.environ.get("PATH", ""),
        "LOCALSTACK_RUNTIME_ENDPOINT": endpoint,
        "LOCALSTACK_RUNTIME_ID": "env1",
        "LAMBDA_TASK_ROOT": str(task_root),
        "_HANDLER": handler,
        "AWS_LAMBDA_FUNCTION_TIMEOUT": "3",
    }
    argv = [sys.executable, "-P", bootstrap.__file__, "--listen-fd", str(listener.fileno())]
    process = subprocess.Popen(
        [*argv, "--parent-pid", str(os.getpid())],
        env=env,
        pass_fds=(listener.fileno(),),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    port = listener.getsockname()[1]
    listener.close()
    return process, port


def test_protocol_against_a_fake_executor_endpoint(tmp_path: Path, fake_localstack: str) -> None:
    """The runtime as a real process: ready, then logs before the response, then errors."""
    (tmp_path / "app.py").write_text(
        textwrap.dedent(
            """
            import logging
            print("init output")
            logging.getLogger().setLevel(logging.INFO)

            def handler(event, context):
                logging.info("handling %s", event["n"])
                if event["n"] == 2:
                    raise RuntimeError("bad record")
                return {"n": event["n"], "remaining": context.get_remaining_time_in_millis() > 0}
            """
        )
    )
    process, port = start_runtime(tmp_path, fake_localstack, "app.handler")
    try:
        assert wait_for_posts(1)[0][0] == "/_localstack_lambda/env1/status/env1/ready"
        for n, request_id in ((1, "r1"), (2, "r2")):
            invoke = urllib.request.Request(
                f"http://127.0.0.1:{port}/invoke",
                data=json.dumps({"invoke-id": request_id, "payload": json.dumps({"n": n})}).encode(),
                method="POST",
            )
            with urllib.request.urlopen(invoke, timeout=5) as response:
                assert response.status == 200
        posts = wait_for_posts(5)
    finally:
        process.kill()
        process.wait()
    paths = [path.rsplit("/", 2)[-2:] for path, _ in posts[1:]]
    assert paths == [["r1", "logs"], ["r1", "response"], ["r2", "logs"], ["r2", "error"]]
    first_logs = json.loads(posts[1][1])["logs"]
    assert first_logs.startswith("init output\nSTART RequestId: r1")
    assert "[INFO]\t" in first_logs
    assert "\tr1\thandling 1" in first_logs
    assert json.loads(posts[2][1]) == {"n": 1, "remaining": True}
    second_logs = json.loads(posts[3][1])["logs"]
    assert "init output" not in second_logs
    assert "[ERROR] RuntimeError: bad record" in second_logs
    assert json.loads(posts[4][1])["errorType"] == "RuntimeError"


def test_init_failure_is_reported_as_status_error(tmp_path: Path, fake_localstack: str) -> None:
    process, _ = start_runtime(tmp_path, fake_localstack, "absent.handler")
    try:
        assert process.wait(timeout=10) == 1
    finally:
        process.kill()
    path, body = wait_for_posts(1)[0]
    assert path == "/_localstack_lambda/env1/status/env1/error"
    assert json.loads(body)["errorType"] == "Runtime.ImportModuleError"


def test_runtime_exits_when_its_parent_is_gone(tmp_path: Path, fake_localstack: str) -> None:
    (tmp_path / "app.py").write_text("def handler(event, context):\n    return 1\n")
    listener = socket.create_server(("127.0.0.1", 0))
    env = {
        "LOCALSTACK_RUNTIME_ENDPOINT": fake_localstack,
        "LOCALSTACK_RUNTIME_ID": "env1",
        "LAMBDA_TASK_ROOT": str(tmp_path),
        "_HANDLER": "app.handler",
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-P",
            bootstrap.__file__,
            "--listen-fd",
            str(listener.fileno()),
            "--parent-pid",
            "1",
        ],
        env=env,
        pass_fds=(listener.fileno(),),
    )
    listener.close()
    try:
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()
