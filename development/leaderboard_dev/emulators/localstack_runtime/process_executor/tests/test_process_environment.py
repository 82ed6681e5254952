from __future__ import annotations

from enum import Enum, StrEnum
from pathlib import Path

import pytest

from localstack_process_executor.environment import (
    env_text,
    function_environment,
    is_python_runtime,
    reachable_host,
)


class InitType(StrEnum):
    on_demand = "on-demand"


class Plain(Enum):
    value_a = "a"


LOCALSTACK_ENV: dict[str, object] = {
    "AWS_LAMBDA_FUNCTION_NAME": "writer",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "LSIAKEY",
    "AWS_SECRET_ACCESS_KEY": "secret",
    "AWS_SESSION_TOKEN": "token",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:4599",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": 128,
    "AWS_LAMBDA_FUNCTION_TIMEOUT": 3,
    "AWS_LAMBDA_INITIALIZATION_TYPE": InitType.on_demand,
    "LAMBDA_TASK_ROOT": "/var/task",
    "LAMBDA_RUNTIME_DIR": "/var/runtime",
    "TABLE_NAME": "aggregates",
}


def build(**overrides: object) -> dict[str, str]:
    return function_environment(
        {**LOCALSTACK_ENV, **overrides},
        python=Path("/cache/function-venv/bin/python"),
        task_root=Path("/state/env1/task"),
        runtime_dir=Path("/site-packages/localstack_process_executor"),
        tmp_dir=Path("/state/env1/tmp"),
    )


def test_keeps_lambda_variables_and_function_environment() -> None:
    env = build()
    assert env["AWS_LAMBDA_FUNCTION_NAME"] == "writer"
    assert env["AWS_REGION"] == "us-east-1"
    assert env["AWS_ACCESS_KEY_ID"] == "LSIAKEY"
    assert env["AWS_SESSION_TOKEN"] == "token"
    assert env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:4599"
    assert env["TABLE_NAME"] == "aggregates"


def test_values_are_strings_and_enums_render_by_value() -> None:
    env = build()
    assert env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] == "128"
    assert env["AWS_LAMBDA_FUNCTION_TIMEOUT"] == "3"
    assert env["AWS_LAMBDA_INITIALIZATION_TYPE"] == "on-demand"
    assert all(isinstance(value, str) for value in env.values())


def test_container_paths_are_replaced_by_host_paths() -> None:
    env = build()
    assert env["LAMBDA_TASK_ROOT"] == "/state/env1/task"
    assert env["LAMBDA_RUNTIME_DIR"] == "/site-packages/localstack_process_executor"
    assert env["TMPDIR"] == "/state/env1/tmp"
    assert env["PATH"].split(":")[0] == "/cache/function-venv/bin"


def test_nothing_leaks_from_the_host_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/localstack/site-packages")
    monkeypatch.setenv("GATEWAY_LISTEN", "127.0.0.1:4599")
    env = build()
    assert "PYTHONPATH" not in env
    assert "GATEWAY_LISTEN" not in env


def test_function_variables_may_override_path_but_none_values_are_dropped() -> None:
    env = build(PATH="/opt/bin:/usr/bin", AWS_SESSION_TOKEN=None)
    assert env["PATH"] == "/opt/bin:/usr/bin"
    assert "AWS_SESSION_TOKEN" not in env


def test_env_text() -> None:
    assert env_text(Plain.value_a) == "a"
    assert env_text(7) == "7"


@pytest.mark.parametrize(
    ("listen", "expected"),
    [
        ("0.0.0.0", "127.0.0.1"),
        ("", "127.0.0.1"),
        ("127.0.0.1", "127.0.0.1"),
        ("::", "[::1]"),
        ("::1", "[::1]"),
        ("localhost", "localhost"),
    ],
)
def test_reachable_host(listen: str, expected: str) -> None:
    assert reachable_host(listen) == expected


@pytest.mark.parametrize(
    ("runtime", "expected"),
    [("python3.12", True), ("python3.13", True), ("nodejs20.x", False), (None, False), ("", False)],
)
def test_is_python_runtime(runtime: str | None, expected: bool) -> None:
    assert is_python_runtime(runtime) is expected
