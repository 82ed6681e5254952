"""Environment of a function process, built from what LocalStack hands to an execution environment.

LocalStack already supplies the Lambda variables (region, credentials, function name, the function's
own ``Environment``, ``AWS_ENDPOINT_URL``); a host process additionally needs real paths in place of
the container's ``/var/task`` and ``/var/runtime``, and must not inherit LocalStack's own variables.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from pathlib import Path

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def env_text(value: object) -> str:
    """Render a value as the container executor would; enums by value, not by member name."""
    if isinstance(value, Enum):
        return str(value.value)
    return str(value)


def function_environment(
    localstack_env: Mapping[str, object],
    *,
    python: Path,
    task_root: Path,
    runtime_dir: Path,
    tmp_dir: Path,
) -> dict[str, str]:
    """Return the complete environment for a function process (nothing comes from the host)."""
    env = {"PATH": f"{python.parent}:{SYSTEM_PATH}", "LANG": "en_US.UTF-8"}
    env.update({key: env_text(value) for key, value in localstack_env.items() if value is not None})
    env.update(
        {
            "LAMBDA_TASK_ROOT": str(task_root),
            "LAMBDA_RUNTIME_DIR": str(runtime_dir),
            "TMPDIR": str(tmp_dir),
        }
    )
    return env


def reachable_host(listen_host: str) -> str:
    """Host a local process uses to reach a gateway bound to ``listen_host``."""
    if listen_host in {"", "0.0.0.0"}:
        return "127.0.0.1"
    if listen_host == "::":
        return "[::1]"
    if ":" in listen_host and not listen_host.startswith("["):
        return f"[{listen_host}]"
    return listen_host


def is_python_runtime(runtime: object) -> bool:
    return runtime is not None and env_text(runtime).startswith("python3.")
