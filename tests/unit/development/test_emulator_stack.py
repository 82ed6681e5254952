"""The emulator stack (development/emulator_stack) accepts what its callers pass and returns what the module outputs.

Terraform refuses a -var it has no variable for, so a test or benchmark that passes a new setting
to Stack would fail only when it runs against an emulator; this finds it in the unit tier.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from leaderboard_dev.settings import EMULATOR_STACK, REPOSITORY, TERRAFORM_MODULE, Endpoint
from leaderboard_dev.terraform_stack import Stack
from tests.terraform_config import outputs, resources, variables

CALLERS = (REPOSITORY / "tests", REPOSITORY / "development" / "leaderboard_dev")
STACK_FACTORIES = {"stack", "bench_stack", "Stack"}
STACK_SETTINGS = {"working_dir", "workspace"}
"""Stack's own keywords (where its configuration and its state are), no Terraform variable."""


def passed_variables(source: str) -> set[str]:
    """Keyword names given to the stack factories, to `<stack>.variables.update(...)`, and dict keys given to Stack."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        factory = isinstance(function, ast.Name) and function.id in STACK_FACTORIES
        update = (
            isinstance(function, ast.Attribute)
            and function.attr == "update"
            and isinstance(function.value, ast.Attribute)
            and function.value.attr == "variables"
        )
        if factory or update:
            names |= {keyword.arg for keyword in node.keywords if keyword.arg is not None}
        if factory and isinstance(function, ast.Name) and function.id == "Stack":
            literal = next((argument for argument in node.args[2:3] if isinstance(argument, ast.Dict)), None)
            if literal is not None:
                names |= {key.value for key in literal.keys if isinstance(key, ast.Constant)}
    return names - STACK_SETTINGS


def callers_variables() -> dict[str, set[Path]]:
    found: dict[str, set[Path]] = {}
    for root in CALLERS:
        for path in root.rglob("*.py"):
            for name in passed_variables(path.read_text()):
                found.setdefault(name, set()).add(path.relative_to(REPOSITORY))
    return found


def test_the_scan_finds_keywords_updates_and_literal_dicts() -> None:
    # given each way a caller passes variables
    source = (
        "with stack(endpoint, 'acc', batch_size=50) as s: pass\n"
        "deployment.variables.update(leaderboard_shards=4)\n"
        "Stack('n', endpoint, {'tags': {}})\n"
        "bench_stack(endpoint, 'x', **settings)\n"
    )
    # when it is scanned, then every name is found, and **settings adds none
    assert passed_variables(source) == {"batch_size", "leaderboard_shards", "tags"}


def test_the_emulator_stack_declares_every_variable_its_callers_pass() -> None:
    # given the variables every test, tool and benchmark passes, and those Stack itself adds
    passed = callers_variables()
    own = set(Stack("scan", Endpoint("http://127.0.0.1:1", "us-east-1")).all_variables)
    assert {"batch_size", "leaderboard_shards"} <= set(passed), "the scan finds nothing: has the call shape changed?"
    # when compared with what the emulator stack declares
    declared = set(variables(EMULATOR_STACK))
    # then nothing is passed that Terraform would refuse
    missing = {name: sorted(map(str, paths)) for name, paths in passed.items() if name not in declared}
    assert not missing, f"development/emulator_stack/variables.tf lacks {missing}"
    assert own <= declared


def test_the_emulator_stack_outputs_everything_the_module_outputs() -> None:
    assert set(outputs(TERRAFORM_MODULE)) <= set(outputs(EMULATOR_STACK))


SERVICE_OF_TYPE_PREFIX = {
    "aws_cloudwatch_log_": "cloudwatchlogs",
    "aws_cloudwatch_metric_": "cloudwatch",
    "aws_dynamodb_": "dynamodb",
    "aws_iam_role": "iam",
    "aws_kms_": "kms",
    "aws_lambda_": "lambda",
    "aws_s3_": "s3",
    "aws_scheduler_": "scheduler",
    "aws_sns_": "sns",
    "aws_sqs_": "sqs",
    "aws_caller_identity": "sts",
}
"""The provider's endpoint name for each kind of resource or data source the module declares (aws_region and
aws_iam_policy_document call nothing)."""
LOCAL_ONLY = {"aws_region", "aws_iam_policy_document"}


def test_the_emulator_stack_sends_every_service_the_module_calls_to_the_emulator() -> None:
    # given the AWS services of every resource and data source the module declares
    declared = {name.split(".")[0] for kind in ("resource", "data") for name in resources(TERRAFORM_MODULE, kind)}
    unmapped = {
        kind for kind in declared - LOCAL_ONLY if not any(kind.startswith(prefix) for prefix in SERVICE_OF_TYPE_PREFIX)
    }
    assert not unmapped, f"which service do {sorted(unmapped)} call? add them to SERVICE_OF_TYPE_PREFIX"
    called = {
        service for kind in declared for prefix, service in SERVICE_OF_TYPE_PREFIX.items() if kind.startswith(prefix)
    }
    assert {"dynamodb", "lambda", "scheduler", "sts"} <= called
    # when compared with the endpoints the emulator stack's provider block sets
    provider = (EMULATOR_STACK / "main.tf").read_text().split('provider "aws" {', 1)[1].split("\n}\n", 1)[0]
    endpoints = set(re.findall(r"^\s+(\w+)\s+= local\.endpoint$", provider.split("endpoints {", 1)[1], re.MULTILINE))
    # then each is sent to the emulator by the configuration itself, not only by an AWS_ENDPOINT_URL in the environment
    assert called <= endpoints, f"development/emulator_stack/main.tf sends {sorted(called - endpoints)} to AWS"
