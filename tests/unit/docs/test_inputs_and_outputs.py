"""docs/inputs-and-outputs.md's Inputs and Outputs tables and the module's variables.tf and outputs.tf agree;
docs/security.md says what the module cannot do for its caller (a key policy, signing)."""

from __future__ import annotations

import re
from pathlib import Path

from leaderboard_dev.settings import REPOSITORY, TERRAFORM_MODULE
from tests.terraform_config import outputs, variables

INTERFACE = REPOSITORY / "docs" / "inputs-and-outputs.md"
SECURITY = REPOSITORY / "docs" / "security.md"


def section(title: str, document: Path = INTERFACE) -> str:
    return document.read_text().split(f"\n{title}\n", 1)[1].split("\n#", 1)[0]


def documented_inputs() -> list[str]:
    """Every name in backticks in the first column of the Inputs table (a row may name several)."""
    names = []
    for line in section("## Inputs").splitlines():
        if line.startswith("| `"):
            names += re.findall(r"`([a-z0-9_]+)`", line.split("|")[1])
    return names


def documented_outputs() -> list[str]:
    return re.findall(r"`([a-z0-9_]+)`", section("## Outputs"))


def test_every_variable_is_in_the_inputs_table_and_nothing_else() -> None:
    names = documented_inputs()
    assert len(names) == len(set(names)), "a variable is listed twice"
    declared = set(variables(TERRAFORM_MODULE))
    assert set(names) - declared == set(), "the Inputs table lists inputs the module does not have"
    assert declared - set(names) == set(), "the Inputs table lacks variables"


def test_every_output_is_in_the_outputs_list_and_nothing_else() -> None:
    names = documented_outputs()
    assert len(names) == len(set(names)), "an output is listed twice"
    declared = set(outputs(TERRAFORM_MODULE))
    assert set(names) - declared == set(), "the Outputs list names outputs the module does not have"
    assert declared - set(names) == set(), "the Outputs list lacks outputs"


def test_the_security_page_states_the_key_policy_a_customer_key_needs() -> None:
    # the key policy a customer key needs, which the module cannot write (the key is the caller's)
    text = section("## Customer managed key", SECURITY)
    for principal in (":root", "logs.<region>.amazonaws.com", "cloudwatch.amazonaws.com", "SNS"):
        assert principal in text, principal
    assert "docs/security.md" in unquoted_description("kms_key_arn")


def test_the_security_page_says_how_to_deploy_the_unsigned_release_under_an_enforcing_code_signing_config() -> None:
    # what Lambda does with an unsigned zip under Enforce, and how to sign the release with AWS Signer
    text = section("## Code signing", SECURITY)
    for needed in ("Enforce", "start-signing-job", "AWSLambda-SHA384-ECDSA", "source_code_hash", "version"):
        assert needed in text, needed
    assert "`make release` does not sign" in text
    assert "docs/security.md, Code signing" in unquoted_description("code_signing_config_arn")


def unquoted_description(name: str) -> str:
    return str(variables(TERRAFORM_MODULE)[name]["description"])
