"""Lambda runtime loop that the process executor runs in the function's own Python interpreter.

Standard library only: that interpreter has boto3 but none of LocalStack's packages. It speaks
LocalStack's executor protocol (what the container's init speaks): it posts
``status/<id>/ready`` after importing the handler (or ``status/<id>/error``), takes
``POST /invoke``, and posts each invocation's logs and then its response or error back to
``LOCALSTACK_RUNTIME_ENDPOINT``.
"""

from __future__ import annotations

import argparse
import decimal
import importlib
import json
import logging
import math
import os
import queue
import resource
import socket
import sys
import threading
import time
import traceback
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, TextIO

Handler = Callable[[Any, Any], Any]


class HandlerError(Exception):
    """An init failure, reported with the error type the AWS Python runtime uses."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type

    def payload(self) -> dict[str, Any]:
        return {
            "errorMessage": str(self),
            "errorType": self.error_type,
            "requestId": "",
            "stackTrace": [],
        }


def parse_handler(handler: str) -> tuple[str, str]:
    """Split ``path/to/module.function`` into an importable module name and a function name."""
    module, _, function = handler.rpartition(".")
    if not module or not function:
        raise HandlerError(
            "Runtime.MalformedHandlerName",
            f"Bad handler '{handler}': not enough values to unpack (expected 2, got 1)",
        )
    return module.replace("/", "."), function


def load_handler(handler: str) -> Handler:
    module_name, function_name = parse_handler(handler)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise HandlerError("Runtime.ImportModuleError", f"Unable to import module '{module_name}': {exc}") from exc
    except SyntaxError as exc:
        raise HandlerError("Runtime.UserCodeSyntaxError", f"Syntax error in module '{module_name}': {exc}") from exc
    function: Handler | None = getattr(module, function_name, None)
    if not callable(function):
        raise HandlerError(
            "Runtime.HandlerNotFound",
            f"Handler '{function_name}' missing on module '{module_name}'",
        )
    return function


def error_payload(exc: BaseException, request_id: str) -> dict[str, Any]:
    return {
        "errorMessage": str(exc),
        "errorType": type(exc).__name__,
        "requestId": request_id,
        "stackTrace": traceback.format_list(traceback.extract_tb(exc.__traceback__)),
    }


def _json_default(value: object) -> object:
    if isinstance(value, decimal.Decimal):
        return float(value)
    raise TypeError(f"{value!r} is not JSON serializable")


@dataclass
class LambdaContext:
    """The ``context`` argument of a handler, with the attributes the AWS runtime provides."""

    aws_request_id: str
    invoked_function_arn: str
    deadline: float
    function_name: str = field(default_factory=lambda: os.environ.get("AWS_LAMBDA_FUNCTION_NAME", ""))
    function_version: str = field(default_factory=lambda: os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"))
    memory_limit_in_mb: str = field(default_factory=lambda: os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
    log_group_name: str = field(default_factory=lambda: os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", ""))
    log_stream_name: str = field(default_factory=lambda: os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", ""))
    identity: Any = None
    client_context: Any = None

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def execute(handler: Handler, payload: str, context: LambdaContext) -> tuple[bool, bytes]:
    """Run one invocation; returns (succeeded, response or error document)."""
    try:
        result = handler(json.loads(payload) if payload else {}, context)
    except Exception as exc:
        error = error_payload(exc, context.aws_request_id)
        print(
            f"[ERROR] {error['errorType']}: {error['errorMessage']}\n"
            f"Traceback (most recent call last):\n{''.join(error['stackTrace'])}",
            end="",
            file=sys.stderr,
        )
        return False, json.dumps(error).encode()
    try:
        return True, json.dumps(result, default=_json_default).encode()
    except (TypeError, ValueError) as exc:
        error = {
            "errorMessage": f"Unable to marshal response: {exc}",
            "errorType": "Runtime.MarshalError",
            "requestId": context.aws_request_id,
            "stackTrace": [],
        }
        print(f"[ERROR] Runtime.MarshalError: {error['errorMessage']}", file=sys.stderr)
        return False, json.dumps(error).encode()


class LogSink:
    """Collects what the function writes until the invocation's logs are posted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: list[str] = []

    def add(self, text: str) -> None:
        with self._lock:
            self._parts.append(text)

    def take(self) -> str:
        with self._lock:
            text, self._parts = "".join(self._parts), []
            return text


class Tee:
    """A standard stream that also records into a ``LogSink``; the process output stays visible."""

    def __init__(self, stream: TextIO, sink: LogSink) -> None:
        self._stream = stream
        self._sink = sink

    def write(self, text: str) -> int:
        self._sink.add(text)
        self._stream.write(text)
        self._stream.flush()
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _RequestIdFilter(logging.Filter):
    request_id = ""

    def filter(self, record: logging.LogRecord) -> bool:
        record.aws_request_id = self.request_id
        return True


_REQUEST_ID = _RequestIdFilter()


def install_log_capture(sink: LogSink) -> None:
    """Capture stdout/stderr and give the root logger the AWS runtime's handler and format."""
    sys.stdout = Tee(sys.stdout, sink)
    sys.stderr = Tee(sys.stderr, sink)
    handler = logging.StreamHandler(sys.stdout)
    formatter = logging.Formatter(
        "[%(levelname)s]\t%(asctime)s.%(msecs)03dZ\t%(aws_request_id)s\t%(message)s",
        "%Y-%m-%dT%H:%M:%S",
    )
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    handler.addFilter(_REQUEST_ID)
    logging.getLogger().addHandler(handler)


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post(url: str, body: bytes) -> None:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with _NO_PROXY.open(request, timeout=30) as response:
            response.read()
    except OSError as exc:
        print(f"process executor: POST {url} failed: {exc}", file=sys.__stderr__)


class _InvokeHandler(BaseHTTPRequestHandler):
    jobs: queue.Queue[dict[str, Any]]

    def do_POST(self) -> None:
        if self.path != "/invoke":
            self.send_error(404)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.jobs.put(json.loads(body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(listen_fd: int, jobs: queue.Queue[dict[str, Any]]) -> HTTPServer:
    """Serve ``POST /invoke`` on the listening socket the executor passed down."""
    listener = socket.socket(fileno=listen_fd)
    handler = type("InvokeHandler", (_InvokeHandler,), {"jobs": jobs})
    server = HTTPServer(listener.getsockname(), handler, bind_and_activate=False)
    server.socket.close()
    server.socket = listener
    threading.Thread(target=server.serve_forever, daemon=True, name="invoke-server").start()
    return server


def watch_parent(parent_pid: int, interval: float = 1.0) -> None:
    """Exit once LocalStack is gone, so a killed LocalStack leaves no functions behind."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def peak_memory_mb() -> int:
    """Peak RSS of this process; Linux carries ``ru_maxrss`` over from LocalStack across exec."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def report(request_id: str, started: float) -> str:
    duration = (time.monotonic() - started) * 1000
    memory = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
    used = peak_memory_mb()
    return (
        f"END RequestId: {request_id}\n"
        f"REPORT RequestId: {request_id}\tDuration: {duration:.2f} ms\t"
        f"Billed Duration: {math.ceil(duration)} ms\tMemory Size: {memory} MB\t"
        f"Max Memory Used: {used} MB\n"
    )


def invoke(handler: Handler, job: dict[str, Any], endpoint: str, sink: LogSink) -> None:
    request_id = job["invoke-id"]
    started = time.monotonic()
    timeout = float(os.environ.get("AWS_LAMBDA_FUNCTION_TIMEOUT", "3"))
    context = LambdaContext(request_id, job.get("invoked-function-arn", ""), started + timeout)
    os.environ["_X_AMZN_TRACE_ID"] = job.get("trace-id", "")
    _REQUEST_ID.request_id = request_id
    print(f"START RequestId: {request_id} Version: {context.function_version}")
    succeeded, body = execute(handler, job.get("payload", ""), context)
    print(report(request_id, started), end="")
    post(f"{endpoint}/invocations/{request_id}/logs", json.dumps({"logs": sink.take()}).encode())
    outcome = "response" if succeeded else "error"
    post(f"{endpoint}/invocations/{request_id}/{outcome}", body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--listen-fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    args = parser.parse_args(argv)
    endpoint = os.environ["LOCALSTACK_RUNTIME_ENDPOINT"]
    runtime_id = os.environ["LOCALSTACK_RUNTIME_ID"]
    sink = LogSink()
    install_log_capture(sink)
    watch_parent(args.parent_pid)
    task_root = os.environ["LAMBDA_TASK_ROOT"]
    sys.path.insert(0, task_root)
    os.chdir(task_root)
    try:
        handler = load_handler(os.environ.get("_HANDLER", ""))
    except Exception as exc:
        error = exc.payload() if isinstance(exc, HandlerError) else error_payload(exc, "")
        print(f"[ERROR] {error['errorType']}: {error['errorMessage']}", file=sys.stderr)
        post(f"{endpoint}/status/{runtime_id}/error", json.dumps(error).encode())
        return 1
    jobs: queue.Queue[dict[str, Any]] = queue.Queue()
    serve(args.listen_fd, jobs)
    post(f"{endpoint}/status/{runtime_id}/ready", b"{}")
    while True:
        invoke(handler, jobs.get(), endpoint, sink)


if __name__ == "__main__":
    sys.exit(main())
