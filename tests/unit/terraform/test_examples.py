"""The AWS examples are complete root configurations that plan: `terraform test` with a mocked provider.

Each example has a README and tests/plan.tftest.hcl; nothing in them points at an emulator (that
wiring lives in development/emulator_stack, which the acceptance suite applies).
"""

from __future__ import annotations

import re

import pytest

from leaderboard_dev.settings import TERRAFORM_MODULE
from tests.terraform_cli import terraform

EXAMPLES = TERRAFORM_MODULE / "examples"


EXAMPLE_NAMES = ["complete", "existing-table", "minimal", "trending-products"]


def test_there_are_a_minimal_a_complete_an_existing_table_and_a_trending_products_example() -> None:
    assert sorted(path.name for path in EXAMPLES.iterdir() if path.is_dir()) == EXAMPLE_NAMES


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_the_example_is_documented_and_free_of_emulator_wiring(example: str) -> None:
    directory = EXAMPLES / example
    assert (directory / "README.md").read_text().strip()
    text = "\n".join(path.read_text() for path in directory.glob("*.tf"))
    assert re.search(r'^provider "aws"', text, flags=re.MULTILINE), "a root configuration configures its provider"
    for emulator_wiring in ("endpoints", "skip_credentials_validation", "access_key", "localhost", "127.0.0.1"):
        assert emulator_wiring not in text, f"{example} holds emulator wiring: {emulator_wiring}"
    assert "create_alarms" in text, "the AWS examples turn the alarms on"


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_the_example_plans_against_a_mocked_provider(example: str) -> None:
    directory = EXAMPLES / example
    initialised = terraform(directory, "init", "-backend=false", "-input=false")
    assert initialised.returncode == 0, initialised.stderr
    result = terraform(directory, "test")
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"Success! [1-9][0-9]* passed, 0 failed", result.stdout), result.stdout
