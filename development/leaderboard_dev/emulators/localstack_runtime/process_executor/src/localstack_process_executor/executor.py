"""LocalStack ``RuntimeExecutor`` that runs each execution environment as a host process.

It stands in for LocalStack's Docker executor on machines without a Docker engine: the same
executor endpoint protocol, with ``bootstrap.py`` in a separate Python interpreter (one that has
boto3 but not LocalStack) in place of the container's init. Timeouts and crashes are detected here,
because a process that hangs or dies cannot report them itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
from concurrent.futures import Future
from pathlib import Path

import requests
from localstack import config
from localstack.aws.api.lambda_ import PackageType
from localstack.services.lambda_.invocation.executor_endpoint import (
    ExecutorEndpoint,
    InvokeSendError,
)
from localstack.services.lambda_.invocation.lambda_models import FunctionVersion, InvocationResult
from localstack.services.lambda_.invocation.runtime_executor import (
    LambdaRuntimeException,
    RuntimeExecutor,
)

from localstack_process_executor import PYTHON_ENV_VAR, bootstrap
from localstack_process_executor.environment import (
    function_environment,
    is_python_runtime,
    reachable_host,
)
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

LOG = logging.getLogger(__name__)
BOOTSTRAP = Path(bootstrap.__file__).resolve()
STOP_GRACE_SECONDS = 2.0
NO_PROXY = {"http": "", "https": ""}


def is_supported(function_version: FunctionVersion) -> bool:
    fn_config = function_version.config
    return fn_config.package_type == PackageType.Zip and is_python_runtime(fn_config.runtime)


def describe(function_version: FunctionVersion) -> str:
    fn_config = function_version.config
    kind = fn_config.runtime or fn_config.package_type
    return f"{function_version.id.function_name} ({kind}): it runs zip-packaged Python functions only"


def runtime_python() -> Path | None:
    value = os.environ.get(PYTHON_ENV_VAR)
    return Path(value) if value else None


class ProcessRuntimeExecutor(RuntimeExecutor):
    """One function process per execution environment, restarted after a timeout or crash."""

    def __init__(self, id: str, function_version: FunctionVersion) -> None:
        super().__init__(id=id, function_version=function_version)
        self.executor_endpoint = ExecutorEndpoint(id, container_address="127.0.0.1")
        self._workdir = Path(config.dirs.tmp) / "lambda-process" / id
        self._python = runtime_python()
        self._env: dict[str, str] = {}
        self._task_root: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._output = OutputBuffer()

    def start(self, env_vars: dict[str, str]) -> None:
        if self._python is None:
            raise LambdaRuntimeException(f"{PYTHON_ENV_VAR} is not set")
        if not is_supported(self.function_version):
            raise LambdaRuntimeException(f"The process executor cannot run {describe(self.function_version)}")
        self._task_root = self._unpack_code()
        tmp_dir = self._workdir / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        self._env = function_environment(
            env_vars,
            python=self._python,
            task_root=self._task_root,
            runtime_dir=BOOTSTRAP.parent,
            tmp_dir=tmp_dir,
        )
        self._spawn(init_timeout=None)

    def _unpack_code(self) -> Path:
        """Give every environment its own copy of the code, as each container gets /var/task."""
        code = self.function_version.config.code
        if code is None:
            raise LambdaRuntimeException("The process executor needs a zip-packaged function")
        source = Path(code.get_unzipped_code_location())
        if code.is_hot_reloading():
            return source
        target = self._workdir / "task"
        shutil.copytree(source, target, symlinks=True)
        return target

    def _spawn(self, init_timeout: float | None) -> None:
        """Start the process and wait until it reports ready (or an init error)."""
        self.executor_endpoint.start()
        with socket.create_server(("127.0.0.1", 0)) as listener:
            self.executor_endpoint.container_port = listener.getsockname()[1]
            self._process = subprocess.Popen(
                [
                    str(self._python),
                    "-u",
                    "-s",
                    "-P",
                    str(BOOTSTRAP),
                    "--listen-fd",
                    str(listener.fileno()),
                    "--parent-pid",
                    str(os.getpid()),
                ],
                env=self._env,
                cwd=self._task_root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(listener.fileno(),),
                start_new_session=True,
            )
        self._reader = threading.Thread(
            target=self._pump, args=(self._process,), daemon=True, name=f"lambda-output-{self.id}"
        )
        self._reader.start()
        startup = self.executor_endpoint.startup_future
        assert startup is not None
        try:
            await_result(startup, self._alive, init_timeout)
        except (RuntimeExited, InvocationTimedOut) as exc:
            self._terminate(grace=0)
            raise LambdaRuntimeException(
                f"Function process did not become ready ({exc!r}):\n{self._output.text()[-4000:]}"
            ) from exc

    def _pump(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for raw in iter(process.stdout.readline, b""):
            line = raw.decode(errors="replace")
            self._output.append(line)
            LOG.debug("[lambda %s] %s", self.id, line.rstrip("\n"))

    def _alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _terminate(self, grace: float) -> None:
        """Stop the process group: politely with a grace period, else at once."""
        process = self._process
        if process is None:
            return
        if process.poll() is None and grace > 0:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if self._reader is not None:
            self._reader.join(timeout=1)

    def stop(self) -> None:
        self._terminate(grace=STOP_GRACE_SECONDS)
        with contextlib.suppress(Exception):
            self.executor_endpoint.shutdown()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def invoke(self, payload: dict[str, str]) -> InvocationResult:
        if not self._alive():
            self._spawn(init_timeout=config.LAMBDA_RUNTIME_ENVIRONMENT_TIMEOUT)
        endpoint = self.executor_endpoint
        future: Future[InvocationResult] = Future()
        endpoint.invocation_future = future
        endpoint.logs = None
        request_id = payload["invoke-id"]
        mark = self._output.mark()
        url = f"http://127.0.0.1:{endpoint.container_port}/invoke"
        try:
            response = requests.post(url, json=payload, proxies=NO_PROXY, timeout=10)
        except requests.RequestException as exc:
            raise InvokeSendError(f"Could not send invocation to {url}: {exc}") from exc
        if not response.ok:
            raise InvokeSendError(f"Invocation to {url} answered {response.status_code}")
        timeout = float(self.function_version.config.timeout)
        try:
            return await_result(future, self._alive, timeout)
        except InvocationTimedOut:
            future.cancel()
            self._terminate(grace=0)
            logs = self._output.since(mark) + timeout_log(request_id, timeout)
            return InvocationResult(request_id, timeout_error(request_id, timeout), True, logs)
        except RuntimeExited:
            self._terminate(grace=0)
            assert self._process is not None
            reason = exit_reason(self._process.returncode)
            logs = self._output.since(mark) + f"RequestId: {request_id} Error: {reason}\n"
            return InvocationResult(request_id, exit_error(request_id, self._process.returncode), True, logs)

    def get_address(self) -> str:
        return "127.0.0.1"

    def get_endpoint_from_executor(self) -> str:
        return reachable_host(config.GATEWAY_LISTEN[0].host)

    def get_runtime_endpoint(self) -> str:
        return (
            f"http://{self.get_endpoint_from_executor()}:{config.GATEWAY_LISTEN[0].port}"
            f"{self.executor_endpoint.get_endpoint_prefix()}"
        )

    def get_logs(self) -> str:
        return self._output.text()

    @classmethod
    def prepare_version(cls, function_version: FunctionVersion) -> None:
        """Unsupported functions stay deployable (a failed prepare makes LocalStack's DeleteFunction fail)."""
        if not is_supported(function_version):
            LOG.warning("The process executor cannot run %s; invocations will fail", describe(function_version))
            return
        if function_version.config.code:
            function_version.config.code.prepare_for_execution()

    @classmethod
    def cleanup_version(cls, function_version: FunctionVersion) -> None:
        pass

    @classmethod
    def validate_environment(cls) -> bool:
        python = runtime_python()
        if python is None or not os.access(python, os.X_OK):
            LOG.warning("%s must name the Python interpreter for Lambda functions", PYTHON_ENV_VAR)
            return False
        return True
