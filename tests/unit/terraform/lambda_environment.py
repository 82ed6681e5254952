"""What terraform/lambda.tf gives each function and variables.tf's defaults, and an environment that records what a
handler reads: helpers of the environment-contract tests (test_module_contract.py, core/test_one_definition.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tests.terraform_config import hcl_document, unquoted

TERRAFORM = Path(__file__).resolve().parents[3] / "terraform"


def function_environment(function: str) -> dict[str, str]:
    """The environment block the module gives one function, as written in lambda.tf."""
    document = hcl_document(TERRAFORM / "lambda.tf")
    for resource in document["resource"]:
        for kind, instances in resource.items():
            for name, body in instances.items():
                if unquoted(kind) == "aws_lambda_function" and unquoted(name) == function:
                    return {unquoted(key): value for key, value in body["environment"][0]["variables"].items()}
    raise AssertionError(f"no aws_lambda_function.{function} in lambda.tf")


def variable_default(name: str) -> Any:
    document = hcl_document(TERRAFORM / "variables.tf")
    for block in document["variable"]:
        for key, body in block.items():
            if unquoted(key) == name:
                default = body["default"]
                return default.strip('"') if isinstance(default, str) else default
    raise AssertionError(f"no variable {name}")


class RecordingEnvironment(Mapping[str, str]):
    """Remembers every name the handler asks for, present or not."""

    def __init__(self, values: dict[str, str]) -> None:
        self._values = values
        self.asked: set[str] = set()

    def __getitem__(self, name: str) -> str:
        self.asked.add(name)
        return self._values[name]

    def get(self, name: str, default: Any = None) -> Any:
        self.asked.add(name)
        return self._values.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)
