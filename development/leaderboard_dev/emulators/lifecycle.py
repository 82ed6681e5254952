"""Start and stop the local AWS emulator, reusing any LocalStack-compatible endpoint that already answers."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from leaderboard_dev.settings import STATE_DIR, Endpoint

BACKENDS = ("ministack", "localstack")
HEALTH_PATHS = ("/_ministack/health", "/_localstack/health")


class EmulatorError(RuntimeError):
    pass


def record_path(endpoint: Endpoint) -> Path:
    """Where `up` notes the emulator it started at this endpoint: one note per port, so that `down` at one endpoint
    never stops what `up` started at another."""
    return STATE_DIR / f"emulator-{endpoint.port}.json"


def cache_root() -> Path:
    """Outside the work tree, so a fresh clone on the same machine reuses what an earlier one provisioned."""
    return Path(os.environ.get("LEADERBOARD_TOOLS_CACHE", Path.home() / ".cache" / "leaderboard-tools"))


def _health_ok(url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def endpoint_answers(endpoint: Endpoint, timeout: float = 2.0) -> bool:
    return any(_health_ok(endpoint.url + path, timeout) for path in HEALTH_PATHS)


def identify(endpoint: Endpoint, timeout: float = 2.0) -> str | None:
    """Which emulator answers: MiniStack also serves LocalStack's health path, so its own is asked first."""
    if _health_ok(endpoint.url + "/_ministack/health", timeout):
        return "ministack"
    if _health_ok(endpoint.url + "/_localstack/health", timeout):
        return "localstack"
    return None


def wait_until_ready(endpoint: Endpoint, process: subprocess.Popen[bytes], log_path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if endpoint_answers(endpoint):
            return
        if process.poll() is not None:
            raise EmulatorError(f"the emulator exited with {process.returncode}; last log lines:\n{tail(log_path)}")
        time.sleep(0.5)
    raise EmulatorError(f"the emulator did not answer at {endpoint.url} within {timeout:.0f} s; log: {log_path}")


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def up(name: str, endpoint: Endpoint, timeout: float = 180.0) -> str:
    """Make the endpoint answer; return what was done ('reused' or 'started')."""
    if name not in BACKENDS:
        raise EmulatorError(f"unknown emulator {name!r}; choose one of {', '.join(BACKENDS)}")
    if endpoint_answers(endpoint):
        return "reused"
    if not endpoint.is_loopback:
        raise EmulatorError(f"nothing answers at {endpoint.url}, and only a loopback endpoint can be started here")
    backend = importlib.import_module(f"leaderboard_dev.emulators.{name}")
    cache_dir = cache_root() / name
    state_dir = STATE_DIR / name
    for directory in (cache_dir, state_dir):
        directory.mkdir(parents=True, exist_ok=True)
    backend.prepare(cache_dir)
    argv, environment = backend.launch_spec(cache_dir, endpoint.port, state_dir)
    log_path = STATE_DIR / f"{name}.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(argv, env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    record_path(endpoint).write_text(
        json.dumps({"name": name, "pid": process.pid, "url": endpoint.url, "log": str(log_path)})
    )
    try:
        wait_until_ready(endpoint, process, log_path, timeout)
    except EmulatorError:
        stop(endpoint)
        raise
    return "started"


def started_by_us(endpoint: Endpoint) -> dict[str, object] | None:
    """What `up` noted when it started the emulator at this endpoint, if that process still runs."""
    try:
        record = json.loads(record_path(endpoint).read_text())
        os.killpg(int(record["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record if endpoint.is_loopback else None


def not_answering(endpoint: Endpoint) -> str:
    """Why `down` refuses an endpoint that does not answer, and what the user may have meant."""
    said = f"nothing answers at {endpoint.url}: nothing was destroyed or stopped"
    record = started_by_us(endpoint)
    if record is not None:
        pid = record["pid"]
        return (
            f"{said}; `make up` started {record['name']} there (pid {pid}), which no longer answers: `kill -- -{pid}`"
        )
    return f"{said}; is AWS_ENDPOINT_URL the address `make up` printed?"


def stop(endpoint: Endpoint, timeout: float = 30.0) -> str:
    """Stop the emulator `up` started at this endpoint; one it did not start is left alone. Says which it was."""
    record = started_by_us(endpoint)
    record_path(endpoint).unlink(missing_ok=True)
    if record is None:
        return f"left the emulator at {endpoint.url} running: `make up` did not start it"
    pid = int(record["pid"])  # type: ignore[call-overload]
    try:
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            os.killpg(pid, 0)
            time.sleep(0.3)
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return f"stopped {record['name']} (pid {pid}), which `make up` started at {endpoint.url}"
