"""`make up` and `make demo` bind nothing beyond loopback: MiniStack's gateway on 127.0.0.1, its IoT MQTT listener
(0.0.0.0:8883 by default, no bind option) and SFTP listener off."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from leaderboard_dev.emulators import ministack

LISTEN = "0A"
"""A TCP socket's state in /proc/net/tcp while it listens."""


def test_the_launch_binds_the_gateway_to_loopback_and_turns_the_other_listeners_off(tmp_path: Path) -> None:
    argv, environment = ministack.launch_spec(tmp_path, 4599, tmp_path)
    assert argv[-2:] == ["-m", "leaderboard_dev.emulators.ministack_server"]
    assert environment["GATEWAY_PORT"] == "4599"
    assert environment["BIND_HOST"] == "127.0.0.1"
    assert environment["IOT_MTLS_ENABLED"] == "0"
    assert environment["SFTP_ENABLED"] == "0"


def test_the_launch_overrides_an_environment_that_turns_the_listeners_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in (("BIND_HOST", "0.0.0.0"), ("IOT_MTLS_ENABLED", "1"), ("SFTP_ENABLED", "1")):
        monkeypatch.setenv(name, value)
    _, environment = ministack.launch_spec(tmp_path, 4599, tmp_path)
    assert {name: environment[name] for name in ministack.LOOPBACK_ONLY} == ministack.LOOPBACK_ONLY


def listening_addresses(pid: int) -> list[tuple[str, int]]:
    """(address, port) of each TCP socket the process listens on, and of each UDP socket it holds, from /proc."""
    inodes = set()
    for descriptor in Path(f"/proc/{pid}/fd").iterdir():
        try:
            found = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(descriptor))
        except OSError:
            continue
        if found:
            inodes.add(found[1])
    addresses = []
    for table in ("tcp", "tcp6", "udp", "udp6"):
        for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if inode in inodes and (state == LISTEN or table.startswith("udp")):
                address, port = local.split(":")
                raw = bytes.fromhex(address)
                # /proc prints each 32-bit word of the address in host (little-endian) order
                words = b"".join(raw[index : index + 4][::-1] for index in range(0, len(raw), 4))
                family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
                addresses.append((socket.inet_ntop(family, words), int(port, 16)))
    return addresses


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def started_ministack(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = free_port()
    argv, environment = ministack.launch_spec(tmp_path, port, tmp_path)
    process = subprocess.Popen(
        argv, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        yield process, port
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until_ready(process: subprocess.Popen[bytes], port: int, timeout: float = 60) -> dict[str, object]:
    """MiniStack's readiness, which waits for its listeners (the MQTT one binds after the gateway)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"MiniStack exited with {process.returncode}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_ministack/ready", timeout=2) as response:
                ready: dict[str, object] = json.loads(response.read())
                return ready
        except (urllib.error.URLError, OSError):
            time.sleep(0.3)
    raise AssertionError(f"MiniStack did not get ready on port {port} within {timeout:.0f} s")


@pytest.mark.skipif(not Path("/proc/self/net/tcp").is_file(), reason="reads the sockets from Linux's /proc")
def test_a_started_ministack_listens_on_loopback_only(started_ministack: tuple[subprocess.Popen[bytes], int]) -> None:
    # given MiniStack started as `make up` starts it, once ready
    process, port = started_ministack
    ready = wait_until_ready(process, port)
    # then it listens on its gateway's port on 127.0.0.1 and on nothing else
    assert listening_addresses(process.pid) == [("127.0.0.1", port)]
    assert ready["iot_mtls"] == "disabled"
