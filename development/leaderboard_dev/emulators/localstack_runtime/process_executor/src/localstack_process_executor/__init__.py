"""LocalStack Lambda runtime executor that runs Python functions as host processes."""

from __future__ import annotations

PLUGIN_NAME = "process"
PYTHON_ENV_VAR = "LAMBDA_PROCESS_EXECUTOR_PYTHON"
