"""The module refuses every setting outside its guarantee: terraform test against a mocked provider.

The runs live in terraform/tests/validations.tftest.hcl; this test runs them with the provider
from the machine's filesystem mirror (no network) and checks each one was run and passed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from leaderboard_dev import provider_schema
from leaderboard_dev.settings import EMULATOR_STACK, TERRAFORM_MODULE
from leaderboard_dev.terraform_stack import provider_mirror
from tests.terraform_cli import terraform
from tests.terraform_config import hcl_document

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


# ---------------------------------------------------------------- version constraints

VERSIONED = [
    TERRAFORM_MODULE,
    TERRAFORM_MODULE / "examples" / "minimal",
    TERRAFORM_MODULE / "examples" / "complete",
    TERRAFORM_MODULE / "examples" / "trending-products",
    EMULATOR_STACK,
]
BEFORE_MOCK_PROVIDER = "1.6.6"
"""The last Terraform without `mock_provider`, which every .tftest.hcl here uses (it came with 1.7)."""


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in [*text.split("."), "0", "0"][:3])


def admits(constraint: str, candidate: str) -> bool:
    """Terraform's version constraint syntax (comma-separated, all must hold) for plain versions."""
    wanted = version(candidate)
    for part in constraint.split(","):
        match = re.fullmatch(r"\s*(>=|<=|!=|~>|=|>|<)?\s*([0-9]+(?:\.[0-9]+){0,2})\s*", part)
        assert match is not None, f"unparsed constraint {part!r}"
        operator, bound_text = match.group(1) or "=", match.group(2)
        bound = version(bound_text)
        if operator == "~>":
            precision = bound_text.count(".")
            upper = (*bound[: max(precision - 1, 0)], bound[max(precision - 1, 0)] + 1)
            holds = wanted >= bound and wanted[: len(upper)] < upper
        else:
            holds = {
                "=": wanted == bound,
                "!=": wanted != bound,
                ">": wanted > bound,
                ">=": wanted >= bound,
                "<": wanted < bound,
                "<=": wanted <= bound,
            }[operator]
        if not holds:
            return False
    return True


def constraints(directory: Path) -> tuple[str, str]:
    """(required_version, hashicorp/aws version) of a configuration's versions.tf."""
    terraform_block = hcl_document(directory / "versions.tf")["terraform"][0]
    aws = terraform_block["required_providers"][0]["aws"]
    return terraform_block["required_version"].strip('"'), aws["version"].strip('"')


def mirrored_provider_versions() -> list[str]:
    mirror = provider_mirror()
    if mirror is None:
        pytest.skip("no provider mirror on this machine: the tested hashicorp/aws version is the registry's")
    return sorted(path.name for path in (mirror / "registry.terraform.io" / "hashicorp" / "aws").iterdir())


def checked_provider_versions(directory: Path) -> list[str]:
    """The hashicorp/aws versions a configuration is checked with: the mirrored ones it plans and applies with and, for
    the module and its examples, the 6.x whose published schema test_provider_schema.py checks them against."""
    checked = mirrored_provider_versions()
    if directory in provider_schema.CONFIGURATIONS:
        checked.append(provider_schema.committed()["provider_version"])
    return checked


@pytest.mark.parametrize("directory", VERSIONED, ids=lambda path: path.name)
def test_the_version_constraints_admit_what_is_tested_and_no_unchecked_major(directory: Path) -> None:
    required_version, provider_version = constraints(directory)
    running = re.search(r"Terraform v([0-9.]+)", terraform(directory, "version").stdout)
    assert running is not None
    # then Terraform: the version running these tests, nothing before mock_provider, no next major
    assert admits(required_version, running.group(1)), required_version
    assert not admits(required_version, BEFORE_MOCK_PROVIDER), required_version
    assert not admits(required_version, f"{version(running.group(1))[0] + 1}.0.0"), required_version
    # and hashicorp/aws: the versions checked here, and no major version beyond them
    checked = checked_provider_versions(directory)
    for tested in checked:
        assert admits(provider_version, tested), (provider_version, tested)
    newest = max(version(tested) for tested in checked)
    if directory in provider_schema.CONFIGURATIONS:  # a major checked against its schema is admitted whole
        assert admits(provider_version, f"{newest[0]}.0.0"), provider_version
    assert not admits(provider_version, f"{newest[0] + 1}.0.0"), provider_version


def test_the_constraint_reader_reads_terraform_syntax() -> None:
    assert admits(">= 1.7.0, < 2.0.0", "1.11.4")
    assert not admits(">= 1.7.0, < 2.0.0", "1.6.6")
    assert admits(">= 5.0", "6.3.0")
    assert not admits("~> 5.100", "6.0.0")
    assert admits("~> 5.100", "5.101.2")
