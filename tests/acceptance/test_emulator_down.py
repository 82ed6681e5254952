"""`make down` (`python -m leaderboard_dev down`) acts only at the endpoint AWS_ENDPOINT_URL names: a mistyped port
is refused with its address and touches nothing, and the right one stops what `up` started there, saying so."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from leaderboard_dev.demo import DEMO_STACK
from leaderboard_dev.emulators.lifecycle import endpoint_answers, record_path
from leaderboard_dev.leaderboard import poll_until
from leaderboard_dev.settings import EMULATOR_STACK, REPOSITORY, Endpoint


def free_endpoint() -> Endpoint:
    """A loopback port nothing listens on (taken from the kernel and given back)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return Endpoint(f"http://127.0.0.1:{port}", "us-east-1")


def development(command: str, endpoint: Endpoint, *arguments: str) -> subprocess.CompletedProcess[str]:
    """What `make up` and `make down` run, at the endpoint given."""
    return subprocess.run(
        [sys.executable, "-m", "leaderboard_dev", command, *arguments],
        cwd=REPOSITORY,
        env={**os.environ, "AWS_ENDPOINT_URL": endpoint.url},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(path): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def what_down_could_touch(endpoint: Endpoint, mistyped: Endpoint) -> dict[str, bytes]:
    """The demo's workspace (its state and the note of its endpoint), and the notes `up` keeps of the emulator at the
    endpoint and at the mistyped one (not of others: `make test` runs a suite per emulator at once, each starting and
    stopping its own)."""
    notes = (record_path(endpoint), record_path(mistyped))
    return {
        **files_under(EMULATOR_STACK / "terraform.tfstate.d" / DEMO_STACK),
        **{str(path): path.read_bytes() if path.is_file() else b"(none)" for path in notes},
        "answers": str(endpoint_answers(endpoint)).encode(),
    }


@pytest.fixture
def own_emulator() -> Iterator[Endpoint]:
    """A MiniStack `up` starts at a port of its own, stopped afterwards whatever the test did."""
    endpoint = free_endpoint()
    started = development("up", endpoint, "--emulator", "ministack")
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield endpoint
    finally:
        development("down", endpoint)
        record_path(endpoint).unlink(missing_ok=True)


def test_down_at_a_mistyped_port_refuses_with_the_address_and_leaves_the_running_emulator_and_the_demo(
    endpoint: Endpoint,
) -> None:
    # given the emulator the suite runs on, answering, and whatever demo state this checkout holds
    mistyped = free_endpoint()
    before = what_down_could_touch(endpoint, mistyped)
    # when `down` is pointed at a port nothing listens on
    result = development("down", mistyped)
    # then it refuses with that address, and the emulator still answers, the demo's state and the notes unchanged
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"nothing answers at {mistyped.url}: nothing was destroyed or stopped" in result.stderr
    assert result.stdout == ""
    assert endpoint_answers(endpoint)
    assert what_down_could_touch(endpoint, mistyped) == before


def test_down_at_the_endpoint_up_started_stops_that_emulator_and_says_so(own_emulator: Endpoint) -> None:
    # given an emulator `up` started at a port of its own, and no demo deployed there
    assert endpoint_answers(own_emulator)
    demo_state = EMULATOR_STACK / "terraform.tfstate.d" / DEMO_STACK / "terraform.tfstate"
    about_the_demo = "left the demo stack alone" if demo_state.exists() else "no demo stack to destroy at"
    # when `down` is pointed at it
    result = development("down", own_emulator)
    # then it says what it did there and what it left, and the emulator no longer answers
    assert result.returncode == 0, result.stdout + result.stderr
    assert about_the_demo in result.stdout
    assert "stopped ministack (pid " in result.stdout
    assert f"which `make up` started at {own_emulator.url}" in result.stdout
    poll_until(lambda: not endpoint_answers(own_emulator), timeout=30, describe=f"{own_emulator.url} stopped")
    assert not record_path(own_emulator).exists()
