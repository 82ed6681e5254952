"""The caching proxy between Terraform and the shared provider (leaderboard_dev.provider_proxy), against a fake
upstream gRPC server on a unix socket, and the shared provider's life cycle (leaderboard_dev.terraform_stack)
with a fake provider binary that serves like one in debug mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from leaderboard_dev import terraform_stack
from leaderboard_dev.provider_proxy import UNLIMITED_MESSAGES, CachingProviderProxy
from leaderboard_dev.terraform_stack import REATTACH_VARIABLE, SharedProvider, _RunningProvider

REPOSITORY = Path(__file__).resolve().parents[3]
GET_SCHEMA = "/tfplugin5.Provider/GetSchema"
VALIDATE_PROVIDER = "/tfplugin5.Provider/PrepareProviderConfig"
PLAN = "/tfplugin5.Provider/PlanResourceChange"
FAILING = "/tfplugin5.Provider/ApplyResourceChange"
SHUTDOWN = "/plugin.GRPCController/Shutdown"


class FakeProvider(grpc.GenericRpcHandler):
    """Answers method name and request, counts calls; FAILING fails with INVALID_ARGUMENT; SLOW_SECONDS delays."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.slow_seconds = 0.0
        self._lock = threading.Lock()

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method: str = handler_call_details.method  # type: ignore[attr-defined]

        def answer(request: bytes, context: grpc.ServicerContext) -> bytes:
            with self._lock:
                self.calls[method] = self.calls.get(method, 0) + 1
            time.sleep(self.slow_seconds)
            if method == FAILING:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no such resource")
            return method.encode() + b"|" + request

        return grpc.unary_unary_rpc_method_handler(answer)


@pytest.fixture
def upstream() -> Iterator[tuple[FakeProvider, str]]:
    """A unix socket in a short folder: socket paths are limited to 108 bytes, pytest's tmp_path can be longer."""
    fake = FakeProvider()
    directory = Path(tempfile.mkdtemp())
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=UNLIMITED_MESSAGES)
    server.add_generic_rpc_handlers([fake])
    server.add_insecure_port(f"unix:{directory / 'upstream.sock'}")
    server.start()
    yield fake, f"unix:{directory / 'upstream.sock'}"
    server.stop(grace=None)


@pytest.fixture
def proxy(upstream: tuple[FakeProvider, str]) -> Iterator[CachingProviderProxy]:
    served = CachingProviderProxy(upstream[1])
    yield served
    served.stop()


def call(socket_path: Path, method: str, request: bytes, timeout: float = 10) -> bytes:
    with grpc.insecure_channel(f"unix:{socket_path}", options=[("grpc.max_receive_message_length", -1)]) as channel:
        return channel.unary_unary(method)(request, timeout=timeout)


def test_the_schema_and_the_provider_validation_are_asked_upstream_once_per_request(
    upstream: tuple[FakeProvider, str], proxy: CachingProviderProxy
) -> None:
    fake, _ = upstream
    for _ in range(3):
        assert call(proxy.socket_path, GET_SCHEMA, b"") == GET_SCHEMA.encode() + b"|"
        assert call(proxy.socket_path, VALIDATE_PROVIDER, b"config-a") == VALIDATE_PROVIDER.encode() + b"|config-a"
    assert call(proxy.socket_path, VALIDATE_PROVIDER, b"config-b") == VALIDATE_PROVIDER.encode() + b"|config-b"
    assert fake.calls == {GET_SCHEMA: 1, VALIDATE_PROVIDER: 2}
    assert (proxy.hits, proxy.misses) == (4, 3)


def test_concurrent_first_asks_wait_for_one_upstream_answer(
    upstream: tuple[FakeProvider, str], proxy: CachingProviderProxy
) -> None:
    fake, _ = upstream
    fake.slow_seconds = 0.5
    with futures.ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(lambda _: call(proxy.socket_path, GET_SCHEMA, b""), range(6)))
    assert set(answers) == {GET_SCHEMA.encode() + b"|"}
    assert fake.calls == {GET_SCHEMA: 1}


def test_every_other_call_is_forwarded_each_time_with_its_bytes(
    upstream: tuple[FakeProvider, str], proxy: CachingProviderProxy
) -> None:
    fake, _ = upstream
    large = os.urandom(6 * 1024 * 1024)  # over gRPC's default 4 MB message limit, as the AWS schema is
    assert call(proxy.socket_path, PLAN, large) == PLAN.encode() + b"|" + large
    assert call(proxy.socket_path, PLAN, b"x") == PLAN.encode() + b"|x"
    assert fake.calls == {PLAN: 2}
    assert proxy.hits == 0


def test_an_upstream_error_keeps_its_code_and_is_not_cached(
    upstream: tuple[FakeProvider, str], proxy: CachingProviderProxy
) -> None:
    fake, _ = upstream
    for _ in range(2):
        with pytest.raises(grpc.RpcError) as raised:
            call(proxy.socket_path, FAILING, b"")
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert raised.value.details() == "no such resource"
    assert fake.calls == {FAILING: 2}


def test_a_dead_upstream_fails_the_call_at_once_instead_of_hanging(proxy: CachingProviderProxy) -> None:
    unreachable = CachingProviderProxy(f"unix:{tempfile.mkdtemp()}/nobody-listens.sock")
    try:
        began = time.monotonic()
        with pytest.raises(grpc.RpcError) as raised:
            call(unreachable.socket_path, GET_SCHEMA, b"", timeout=30)
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
        assert time.monotonic() - began < 10
    finally:
        unreachable.stop()


def test_go_plugins_streams_are_unimplemented_and_shutdown_never_reaches_the_shared_provider(
    upstream: tuple[FakeProvider, str], proxy: CachingProviderProxy
) -> None:
    fake, _ = upstream
    with grpc.insecure_channel(f"unix:{proxy.socket_path}") as channel:
        stdio = channel.unary_stream("/plugin.GRPCStdio/StreamStdio")(b"", timeout=5)
        with pytest.raises(grpc.RpcError) as raised:
            next(iter(stdio))
        assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
        broker = channel.stream_stream("/plugin.GRPCBroker/StartStream")(iter([]), timeout=5)
        with pytest.raises(grpc.RpcError) as raised:
            next(iter(broker))
        assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert call(proxy.socket_path, SHUTDOWN, b"") == b""
    assert fake.calls == {}
    assert proxy.calls == {"/plugin.GRPCStdio/StreamStdio": 1, "/plugin.GRPCBroker/StartStream": 1, SHUTDOWN: 1}


FAKE_PROVIDER = """\
#!{python}
# Serves like a provider started with -debug: prints TF_REATTACH_PROVIDERS, answers with its cwd and CA bundle.
import json, os, sys, tempfile, time
from concurrent import futures
import grpc
mode = os.environ.get("FAKE_PROVIDER_MODE", "serve")
if mode == "exit":
    sys.exit(3)
if mode == "silent":
    time.sleep(3600)
class Answer(grpc.GenericRpcHandler):
    def service(self, details):
        reply = json.dumps({{"cwd": os.getcwd(), "ca_bundle": os.environ.get("AWS_CA_BUNDLE")}}).encode()
        return grpc.unary_unary_rpc_method_handler(lambda request, context: reply)
socket = tempfile.mkdtemp() + "/plugin.sock"
server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
server.add_generic_rpc_handlers([Answer()])
server.add_insecure_port("unix:" + socket)
server.start()
attach = {{"registry.terraform.io/hashicorp/aws": {{"Protocol": "grpc", "ProtocolVersion": 5, "Pid": os.getpid(),
    "Test": True, "Addr": {{"Network": "unix", "String": socket}}}}}}
print("Provider started.", flush=True)
print("\\tTF_REATTACH_PROVIDERS='" + json.dumps(attach) + "'", flush=True)
server.wait_for_termination()
"""


@pytest.fixture
def fake_binary(tmp_path: Path) -> Iterator[Path]:
    """Stops only its own provider: the worker may hold shared providers of acceptance stacks."""
    binary = tmp_path / "terraform-provider-aws_v0.0.0_x5"
    binary.write_text(FAKE_PROVIDER.format(python=sys.executable))
    binary.chmod(0o755)
    yield binary
    SharedProvider.stop(tmp_path, dict(os.environ))


def running_in(working_dir: Path) -> _RunningProvider:
    return SharedProvider._running[SharedProvider.key(working_dir, dict(os.environ))]


def attached(reattach: str) -> tuple[int, Path]:
    ((_, provider),) = json.loads(reattach).items()
    return provider["Pid"], Path(provider["Addr"]["String"])


def test_the_shared_provider_runs_in_the_working_folder_without_a_ca_bundle_behind_the_proxy(
    fake_binary: Path, tmp_path: Path
) -> None:
    environment = {**os.environ, "AWS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt"}
    reattach = SharedProvider.reattach(fake_binary, tmp_path, environment)
    assert reattach is not None
    pid, socket_path = attached(reattach)
    running = running_in(tmp_path)
    assert pid == running.process.pid
    assert running.proxy is not None
    assert socket_path == running.proxy.socket_path
    assert json.loads(call(socket_path, PLAN, b"")) == {"cwd": str(tmp_path), "ca_bundle": None}
    assert SharedProvider.reattach(fake_binary, tmp_path, environment) == reattach


def test_a_shared_provider_that_died_is_started_again(fake_binary: Path, tmp_path: Path) -> None:
    first = SharedProvider.reattach(fake_binary, tmp_path, dict(os.environ))
    assert first is not None
    running = running_in(tmp_path)
    running.process.kill()
    running.process.wait()
    second = SharedProvider.reattach(fake_binary, tmp_path, dict(os.environ))
    assert second is not None
    assert attached(second)[0] != attached(first)[0]
    assert json.loads(call(attached(second)[1], PLAN, b""))["cwd"] == str(tmp_path)


@pytest.mark.parametrize("mode", ["exit", "silent"])
def test_a_provider_that_does_not_start_leaves_terraform_to_start_its_own(
    fake_binary: Path, tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(terraform_stack, "PROVIDER_START_TIMEOUT", 2.0)
    began = time.monotonic()
    with pytest.warns(UserWarning, match=REATTACH_VARIABLE):
        assert SharedProvider.reattach(fake_binary, tmp_path, {**os.environ, "FAKE_PROVIDER_MODE": mode}) is None
    assert time.monotonic() - began < 10
    assert SharedProvider.key(tmp_path, dict(os.environ)) not in SharedProvider._running


def test_the_shared_provider_dies_with_the_process_that_started_it(fake_binary: Path, tmp_path: Path) -> None:
    """os._exit skips atexit: what is left is PR_SET_PDEATHSIG."""
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from leaderboard_dev.terraform_stack import SharedProvider\n"
        f"SharedProvider.reattach(Path({str(fake_binary)!r}), Path({str(tmp_path)!r}), dict(os.environ))\n"
        "(running,) = SharedProvider._running.values()\n"
        "print(running.process.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    path = os.pathsep.join([str(REPOSITORY / "development"), os.environ.get("PYTHONPATH", "")])
    printed = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    provider_pid = int(printed.stdout.split()[-1])
    deadline = time.monotonic() + 10
    while Path(f"/proc/{provider_pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{provider_pid}").exists() or _is_zombie(provider_pid)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
