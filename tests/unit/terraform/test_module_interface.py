"""The module's interface follows the terraform-aws-modules conventions a platform team expects.

`create = false` is checked on a real plan (the AWS provider configured offline, no API call), not
only in `terraform test`, so that a resource added without the switch is caught whatever its type.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from leaderboard_dev.settings import TERRAFORM_MODULE
from tests.terraform_cli import terraform
from tests.terraform_config import outputs, unquoted, variables

OFFLINE_PROVIDER = """
provider "aws" {
  region                      = "us-east-1"
  access_key                  = "offline"
  secret_key                  = "offline"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  skip_region_validation      = true
}
"""
REQUIRED = {"name"}
"""The one input without a default: everything else is optional."""


def test_create_false_plans_no_resource_and_null_outputs(tmp_path: Path) -> None:
    # given a root that calls the module with create = false and nothing else but its name
    (tmp_path / "main.tf").write_text(
        OFFLINE_PROVIDER
        + f'module "leaderboard" {{\n  source = "{TERRAFORM_MODULE}"\n  name = "switched-off"\n  create = false\n}}\n'
        + "".join(
            f'output "{name}" {{\n  value = module.leaderboard.{name}\n}}\n' for name in outputs(TERRAFORM_MODULE)
        )
    )
    assert terraform(tmp_path, "init", "-backend=false", "-input=false").returncode == 0
    # when it is planned
    planned = terraform(tmp_path, "plan", "-input=false", "-out=plan")
    assert planned.returncode == 0, planned.stderr
    shown = json.loads(terraform(tmp_path, "show", "-json", "plan").stdout)
    # then no resource is planned at all, and every output is null
    assert not [change["address"] for change in shown.get("resource_changes", [])]
    assert {name: output.get("value") for name, output in shown["planned_values"]["outputs"].items()} == {
        name: None for name in outputs(TERRAFORM_MODULE)
    }


def test_the_module_reads_nothing_outside_its_folder() -> None:
    """A module sourced by git URL is only its folder: ../dist and the like do not exist there."""
    for path in TERRAFORM_MODULE.glob("*.tf"):
        text = path.read_text()
        assert not re.search(r"path\.(module|root|cwd)\}?/\.\.", text), path.name
        assert '"../' not in text, path.name


def test_every_variable_is_described_typed_and_optional_but_the_name() -> None:
    declared = variables(TERRAFORM_MODULE)
    for name, body in declared.items():
        assert unquoted(body.get("description", "")).strip(), f"{name} has no description"
        assert "type" in body, f"{name} has no type"
        assert ("default" in body) is (name not in REQUIRED), f"{name}: only {REQUIRED} may lack a default"


def test_every_output_is_described_and_named_thing_attribute() -> None:
    for name, body in outputs(TERRAFORM_MODULE).items():
        assert unquoted(body.get("description", "")).strip(), f"{name} has no description"
        assert re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+", name), name
