from __future__ import annotations

import json
import threading
import time
from concurrent.futures import Future
from datetime import UTC, datetime

import pytest

from localstack_process_executor.supervision import (
    InvocationTimedOut,
    OutputBuffer,
    RuntimeExited,
    await_result,
    exit_error,
    exit_reason,
    timeout_error,
    timeout_log,
)


def test_returns_result_reported_in_time() -> None:
    future: Future[str] = Future()
    threading.Timer(0.05, future.set_result, args=("ok",)).start()
    assert await_result(future, lambda: True, timeout=2.0) == "ok"


def test_times_out_when_no_result_arrives() -> None:
    future: Future[str] = Future()
    started = time.monotonic()
    with pytest.raises(InvocationTimedOut):
        await_result(future, lambda: True, timeout=0.2, poll_interval=0.02)
    assert 0.2 <= time.monotonic() - started < 1.0


def test_result_at_the_deadline_still_counts() -> None:
    future: Future[str] = Future()
    future.set_result("done")
    assert await_result(future, lambda: True, timeout=0.0) == "done"


def test_dead_process_is_reported_without_waiting_for_the_timeout() -> None:
    future: Future[str] = Future()
    started = time.monotonic()
    with pytest.raises(RuntimeExited):
        await_result(future, lambda: False, timeout=30.0, poll_interval=0.01)
    assert time.monotonic() - started < 1.0


def test_result_posted_just_before_exit_wins_over_the_exit() -> None:
    future: Future[str] = Future()
    future.set_result("done")
    assert await_result(future, lambda: False, timeout=1.0) == "done"


def test_no_timeout_waits_until_death() -> None:
    future: Future[str] = Future()
    alive = threading.Event()
    alive.set()
    threading.Timer(0.1, alive.clear).start()
    with pytest.raises(RuntimeExited):
        await_result(future, alive.is_set, timeout=None, poll_interval=0.01)


def test_errors_raised_by_the_endpoint_propagate() -> None:
    future: Future[str] = Future()
    future.set_exception(ValueError("init failed"))
    with pytest.raises(ValueError, match="init failed"):
        await_result(future, lambda: True, timeout=1.0)


def test_timeout_error_matches_lambda() -> None:
    assert json.loads(timeout_error("req-1", 3)) == {
        "errorType": "Sandbox.Timedout",
        "errorMessage": "RequestId: req-1 Error: Task timed out after 3.00 seconds",
    }


def test_timeout_log_line() -> None:
    now = datetime(2024, 5, 1, 12, 30, 45, 123456, tzinfo=UTC)
    assert timeout_log("req-1", 2.5, now) == ("2024-05-01T12:30:45.123Z req-1 Task timed out after 2.50 seconds\n")


def test_exit_reasons() -> None:
    assert exit_reason(1) == "Runtime exited with error: exit status 1"
    assert exit_reason(-9) == "Runtime exited with error: signal 9"
    assert exit_reason(None) == "Runtime exited without providing a reason"
    assert json.loads(exit_error("req-2", 3))["errorType"] == "Runtime.ExitError"


def test_output_buffer_marks_and_trimming() -> None:
    buffer = OutputBuffer(limit=10)
    buffer.append("init\n")
    mark = buffer.mark()
    buffer.append("abc\n")
    assert buffer.since(mark) == "abc\n"
    buffer.append("0123456789")
    assert buffer.text() == "0123456789"
    assert buffer.since(mark) == "0123456789"
    assert buffer.since(buffer.mark()) == ""
