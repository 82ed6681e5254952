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
PID_FILE = STATE_DIR / "emulator.json"
HEALTH_PATHS = ("/_ministack/health", "/_localstack/health")


class EmulatorError(RuntimeError):
    pass


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
    PID_FILE.write_text(json.dumps({"name": name, "pid": process.pid, "url": endpoint.url, "log": str(log_path)}))
    try:
        wait_until_ready(endpoint, process, log_path, timeout)
    except EmulatorError:
        down()
        raise
    return "started"


def started_by_us() -> dict[str, object] | None:
    try:
        return json.loads(PID_FILE.read_text())
    except (OSError, ValueError):
        return None


def down(timeout: float = 30.0) -> str:
    """Stop the emulator only if `up` started it; an endpoint that was reused is left alone."""
    record = started_by_us()
    if record is None:
        return "nothing started by make up"
    pid = int(record["pid"])  # type: ignore[arg-type]
    try:
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            os.killpg(pid, 0)
            time.sleep(0.3)
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    PID_FILE.unlink(missing_ok=True)
    return f"stopped {record['name']} (pid {pid})"
