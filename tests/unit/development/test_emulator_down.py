"""`down` acts only at the endpoint AWS_ENDPOINT_URL names, and only on what `make up` and `make demo` did there.

A health endpoint served here stands for an emulator, a sleeping process in its own session for the one `up` started,
and a workspace folder holding a state file for the demo's stack; `terraform destroy` is recorded, not run. The same
against a real emulator: tests/acceptance/test_emulator_down.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from leaderboard_dev import cli, demo
from leaderboard_dev.emulators import lifecycle
from leaderboard_dev.settings import Endpoint
from leaderboard_dev.terraform_stack import ENDPOINT_NOTE, Stack


class Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/_ministack/health" else 404)
        self.end_headers()

    def log_message(self, *arguments: object) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[Endpoint]:
    """An endpoint that answers MiniStack's health check."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Endpoint(f"http://127.0.0.1:{server.server_address[1]}", "us-east-1")
    finally:
        server.shutdown()
        server.server_close()


def silent_endpoint() -> Endpoint:
    """A loopback port nothing listens on (taken from the kernel and given back)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return Endpoint(f"http://127.0.0.1:{port}", "us-east-1")


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "state"
    directory.mkdir()
    monkeypatch.setattr(lifecycle, "STATE_DIR", directory)
    return directory


@dataclass(frozen=True)
class Started:
    """A process group as `up` leaves one: its leader's id is the group's, and no parent waits for it."""

    group: int

    def running(self) -> bool:
        try:
            os.killpg(self.group, 0)
        except ProcessLookupError:
            return False
        return True


@pytest.fixture
def started_by_up(state_dir: Path) -> Iterator[Started]:
    """What `up` notes when it starts an emulator: here a sleeping process in a session of its own."""
    launcher = subprocess.Popen(
        ["sh", "-c", "sleep 120 >/dev/null 2>&1 &"], start_new_session=True, stdout=subprocess.DEVNULL
    )
    launcher.wait(timeout=10)
    started = Started(launcher.pid)
    try:
        yield started
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(started.group, signal.SIGKILL)


def note_started(endpoint: Endpoint, started: Started) -> Path:
    path = lifecycle.record_path(endpoint)
    path.write_text(json.dumps({"name": "ministack", "pid": started.group, "url": endpoint.url, "log": "-"}))
    return path


class DemoStack(Stack):
    """The demo's stack in a folder of the test's, its destroy recorded instead of run."""

    destroyed: list[str] = []

    def destroy(self) -> None:
        assert self.endpoint is not None
        self.destroyed.append(f"{self.workspace_name} at {self.endpoint.url}")

    def delete_workspace(self, force: bool = False) -> None:
        (self.working_dir / "terraform.tfstate.d" / self.workspace_name / "terraform.tfstate").unlink()


@pytest.fixture
def demo_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "emulator_stack"
    DemoStack.destroyed = []
    monkeypatch.setattr(
        demo,
        "demo_stack",
        lambda endpoint, workspace=demo.DEMO_STACK: DemoStack(
            demo.DEMO_STACK, endpoint, working_dir=folder, workspace=workspace
        ),
    )
    return folder


def deploy_demo(folder: Path, at: str | None, workspace_name: str = demo.DEMO_STACK) -> Path:
    """A demo workspace holding a state, and the note of the endpoint it was applied at (none: an older checkout's)."""
    workspace = folder / "terraform.tfstate.d" / workspace_name
    workspace.mkdir(parents=True)
    (workspace / "terraform.tfstate").write_text('{"version": 4, "resources": [{"type": "aws_dynamodb_table"}]}')
    if at is not None:
        (workspace / ENDPOINT_NOTE).write_text(json.dumps({"url": at}))
    return workspace


def snapshot(folder: Path) -> dict[str, str]:
    return {str(path.relative_to(folder)): path.read_text() for path in sorted(folder.rglob("*")) if path.is_file()}


def down(endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch, *arguments: str) -> int:
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint.url)
    return cli.main(["down", *arguments])


def test_down_at_an_endpoint_that_does_not_answer_refuses_with_its_address_and_touches_nothing(
    answering: Endpoint,
    started_by_up: Started,
    demo_folder: Path,
    state_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given an emulator `up` started, and the demo deployed there
    note_started(answering, started_by_up)
    deploy_demo(demo_folder, answering.url)
    before = snapshot(demo_folder), snapshot(state_dir)
    # when `down` is pointed at a port nothing listens on
    mistyped = silent_endpoint()
    code = down(mistyped, monkeypatch)
    # then it refuses, naming the address, and the demo's state, the note and the emulator are as they were
    said = capsys.readouterr()
    assert code == 1
    assert f"nothing answers at {mistyped.url}" in said.err
    assert "nothing was destroyed or stopped" in said.err
    assert said.out == ""
    assert (snapshot(demo_folder), snapshot(state_dir)) == before
    assert DemoStack.destroyed == []
    assert started_by_up.running()
    assert lifecycle.endpoint_answers(answering)


def test_down_destroys_the_demo_at_its_endpoint_and_stops_the_emulator_up_started_there(
    answering: Endpoint,
    started_by_up: Started,
    demo_folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given an emulator `up` started, and the demo deployed there
    note = note_started(answering, started_by_up)
    workspace = deploy_demo(demo_folder, answering.url)
    # when `down` is pointed at it
    code = down(answering, monkeypatch)
    # then the demo is destroyed there, the emulator stopped, and each is said
    said = capsys.readouterr().out
    assert code == 0
    assert DemoStack.destroyed == [f"demo at {answering.url}"]
    assert not (workspace / "terraform.tfstate").exists()
    assert f"destroyed the demo stack at {answering.url}" in said
    assert f"stopped ministack (pid {started_by_up.group}), which `make up` started at {answering.url}" in said
    assert not started_by_up.running()
    assert not note.exists()


def test_down_in_a_workspace_of_its_own_destroys_that_demo_and_leaves_this_checkout_s_own(
    answering: Endpoint, demo_folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given this checkout's demo elsewhere, and a second demo at this emulator whose state another workspace keeps
    own = deploy_demo(demo_folder, silent_endpoint().url)
    before = snapshot(own)
    second = deploy_demo(demo_folder, answering.url, workspace_name="readme-demo")
    # when `down` is given that workspace (`make down DEMO_WORKSPACE=readme-demo`)
    code = down(answering, monkeypatch, "--workspace", "readme-demo")
    # then that demo is destroyed there, its state gone, and this checkout's own demo state is as it was
    assert code == 0
    assert DemoStack.destroyed == [f"readme-demo at {answering.url}"]
    assert f"destroyed the demo stack at {answering.url}" in capsys.readouterr().out
    assert not (second / "terraform.tfstate").exists()
    assert snapshot(own) == before


def test_down_leaves_an_emulator_up_did_not_start_and_a_demo_deployed_elsewhere(
    answering: Endpoint,
    started_by_up: Started,
    demo_folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given the demo deployed at another endpoint, where `up` started an emulator, and an emulator answering here
    elsewhere = silent_endpoint()
    note_started(elsewhere, started_by_up)
    workspace = deploy_demo(demo_folder, elsewhere.url)
    before = snapshot(demo_folder)
    # when `down` is pointed at the emulator `up` did not start
    code = down(answering, monkeypatch)
    # then it destroys and stops nothing, and says so
    said = capsys.readouterr().out
    assert code == 0
    assert f"left the demo stack alone: it is deployed at {elsewhere.url}, not {answering.url}" in said
    assert f"left the emulator at {answering.url} running: `make up` did not start it" in said
    assert DemoStack.destroyed == []
    assert snapshot(demo_folder) == before
    assert (workspace / "terraform.tfstate").exists()
    assert started_by_up.running()


def test_down_leaves_a_demo_whose_state_does_not_say_where_it_was_deployed(
    answering: Endpoint, demo_folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a demo state from a checkout that did not note its endpoint
    deploy_demo(demo_folder, at=None)
    before = snapshot(demo_folder)
    # when `down` is pointed at an emulator that answers
    code = down(answering, monkeypatch)
    # then the state is left alone: destroying it at the wrong emulator would drop the state of the right one
    assert code == 0
    assert "left the demo stack alone: its state does not say which emulator holds it" in capsys.readouterr().out
    assert DemoStack.destroyed == []
    assert snapshot(demo_folder) == before


def test_an_applied_stack_notes_the_endpoint_it_was_applied_at(tmp_path: Path) -> None:
    # given a stack at an endpoint
    stack = Stack("noted", Endpoint("http://localhost:4573", "us-east-1"), working_dir=tmp_path)
    # when it notes where it is applied (what apply does before it runs Terraform)
    stack._note_endpoint()
    # then the note names that endpoint, which 127.0.0.1 at the same port is and another port is not
    noted = stack.deployed_at()
    assert noted == "http://localhost:4573"
    assert Endpoint("http://127.0.0.1:4573", "us-east-1").is_at(noted)
    assert not Endpoint("http://127.0.0.1:4699", "us-east-1").is_at(noted)


def test_down_where_the_emulator_up_started_no_longer_answers_names_it_and_leaves_it(
    started_by_up: Started, demo_folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given an emulator `up` started that no longer answers at its port, and the demo deployed there
    silent = silent_endpoint()
    note = note_started(silent, started_by_up)
    deploy_demo(demo_folder, silent.url)
    before = snapshot(demo_folder)
    # when `down` is pointed at it
    code = down(silent, monkeypatch)
    # then it refuses, names the process and how to stop it, and stops, destroys and deletes nothing
    said = capsys.readouterr().err
    assert code == 1
    assert f"nothing answers at {silent.url}: nothing was destroyed or stopped" in said
    assert f"`make up` started ministack there (pid {started_by_up.group}), which no longer answers" in said
    assert f"`kill -- -{started_by_up.group}`" in said
    assert started_by_up.running()
    assert note.exists()
    assert snapshot(demo_folder) == before
    assert DemoStack.destroyed == []
