"""The module refuses every setting outside its guarantee: terraform test against a mocked provider.

The runs live in terraform/tests/validations.tftest.hcl; this test runs them with the provider
from the machine's filesystem mirror (no network) and checks each one was run and passed.
"""

from __future__ import annotations

import re

from leaderboard_tools.settings import TERRAFORM_MODULE
from tests.terraform_cli import terraform

TEST_FILE = TERRAFORM_MODULE / "tests" / "validations.tftest.hcl"


def test_every_validation_and_precondition_refuses_what_it_should() -> None:
    # given the module's runs: defaults that plan, and settings outside the guarantee that must fail
    runs = re.findall(r'^run "([a-z_]+)"', TEST_FILE.read_text(), flags=re.MULTILINE)
    assert len(runs) >= 10
    initialised = terraform(TERRAFORM_MODULE, "init", "-backend=false", "-input=false")
    assert initialised.returncode == 0, initialised.stderr
    # when terraform test plans each of them
    result = terraform(TERRAFORM_MODULE, "test")
    # then every run passed: the good ones planned, the bad ones failed on exactly the expected check
    assert result.returncode == 0, result.stdout + result.stderr
    passed = re.findall(r'run "([a-z_]+)"\.\.\. pass', result.stdout)
    assert passed == runs, result.stdout
