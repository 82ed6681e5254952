"""MiniStack, the embedded default: a pure-Python emulator installed in the project's own venv."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from leaderboard_dev.emulators.adversarial_retries import ADVERSARIAL_RETRIES_VARIABLE, DIRECTORY_NAME


def prepare(cache_dir: Path) -> None:
    """Nothing to provision: `make venv` installs MiniStack (the `emulator` extra) beside boto3."""
    if importlib.util.find_spec("ministack") is None:
        raise RuntimeError("MiniStack is not installed in this interpreter; run `make venv`")


LOOPBACK_ONLY = {
    "BIND_HOST": "127.0.0.1",
    # MiniStack opens IoT's MQTT listener at boot on 0.0.0.0:8883 (its bind address is fixed); nothing here uses IoT.
    "IOT_MTLS_ENABLED": "0",
    # Transfer Family's SFTP listener binds SFTP_HOST (0.0.0.0) when a server exists; nothing here uses it either.
    "SFTP_ENABLED": "0",
}
"""What keeps the emulator on loopback: the gateway bound to 127.0.0.1, and the listeners that have no bind option off
(tests/unit/development/test_emulator_listeners.py lists the sockets a started MiniStack listens on)."""


def launch_spec(cache_dir: Path, port: int, state_dir: Path) -> tuple[list[str], dict[str, str]]:
    """MiniStack runs each Python Lambda with this interpreter, which has the pinned boto3."""
    environment = {
        **os.environ,
        "GATEWAY_PORT": str(port),
        **LOOPBACK_ONLY,
        "LAMBDA_EXECUTOR": "local",
        "TMPDIR": str(state_dir),
        # Where tests switch the stream mapping's adversarial retries on, per function.
        ADVERSARIAL_RETRIES_VARIABLE: str(state_dir.resolve() / DIRECTORY_NAME),
    }
    return [sys.executable, "-m", "leaderboard_dev.emulators.ministack_server"], environment
