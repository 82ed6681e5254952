"""Waiting on a function process: results, timeouts, crashes, and the output it leaves behind.

The process reports results over HTTP, so a hung or dead process would otherwise leave LocalStack
waiting for 15 minutes; these helpers turn both cases into the errors AWS Lambda reports.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import TypeVar

T = TypeVar("T")


class InvocationTimedOut(Exception):
    """The deadline passed before the process reported a result."""


class RuntimeExited(Exception):
    """The process ended before it reported a result."""

    def __init__(self, returncode: int | None) -> None:
        super().__init__(f"runtime exited with {returncode}")
        self.returncode = returncode


def await_result(
    future: Future[T],
    is_alive: Callable[[], bool],
    timeout: float | None,
    poll_interval: float = 0.05,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Wait for ``future`` unless the process dies first or ``timeout`` seconds pass."""
    deadline = None if timeout is None else clock() + timeout
    while True:
        wait = poll_interval
        if deadline is not None:
            remaining = deadline - clock()
            if remaining <= 0:
                if future.done():
                    return future.result()
                raise InvocationTimedOut()
            wait = min(wait, remaining)
        try:
            return future.result(timeout=wait)
        except TimeoutError:
            if not is_alive() and not future.done():
                raise RuntimeExited(None) from None


def _error(error_type: str, message: str) -> bytes:
    return json.dumps({"errorType": error_type, "errorMessage": message}).encode()


def timeout_error(request_id: str, timeout: float) -> bytes:
    return _error(
        "Sandbox.Timedout",
        f"RequestId: {request_id} Error: Task timed out after {timeout:.2f} seconds",
    )


def timeout_log(request_id: str, timeout: float, now: datetime | None = None) -> str:
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return f"{stamp} {request_id} Task timed out after {timeout:.2f} seconds\n"


def exit_reason(returncode: int | None) -> str:
    if returncode is None:
        return "Runtime exited without providing a reason"
    if returncode < 0:
        return f"Runtime exited with error: signal {-returncode}"
    return f"Runtime exited with error: exit status {returncode}"


def exit_error(request_id: str, returncode: int | None) -> bytes:
    return _error("Runtime.ExitError", f"RequestId: {request_id} Error: {exit_reason(returncode)}")


class OutputBuffer:
    """Thread-safe record of a process's output, addressable by absolute offsets.

    Only the newest ``limit`` characters are kept, so a chatty function cannot exhaust memory.
    """

    def __init__(self, limit: int = 1 << 20) -> None:
        self._lock = threading.Lock()
        self._text = ""
        self._start = 0
        self._limit = limit

    def append(self, text: str) -> None:
        with self._lock:
            self._text += text
            excess = len(self._text) - self._limit
            if excess > 0:
                self._text = self._text[excess:]
                self._start += excess

    def mark(self) -> int:
        with self._lock:
            return self._start + len(self._text)

    def since(self, mark: int) -> str:
        with self._lock:
            return self._text[max(0, mark - self._start) :]

    def text(self) -> str:
        with self._lock:
            return self._text
