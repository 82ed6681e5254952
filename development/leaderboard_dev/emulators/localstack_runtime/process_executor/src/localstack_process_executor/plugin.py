"""Entry point LocalStack loads when ``LAMBDA_RUNTIME_EXECUTOR=process``."""

from __future__ import annotations

from localstack.services.lambda_.invocation.plugins import RuntimeExecutorPlugin

from localstack_process_executor import PLUGIN_NAME


class ProcessRuntimeExecutorPlugin(RuntimeExecutorPlugin):
    name = PLUGIN_NAME

    def load(self, *args: object, **kwargs: object) -> type:
        from localstack_process_executor.executor import ProcessRuntimeExecutor

        return ProcessRuntimeExecutor
