"""Apply, inspect and destroy the emulator stack (development/emulator_stack) in a workspace, via python-terraform."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from python_terraform import IsFlagged, Terraform

from leaderboard_dev.file_lock import locked
from leaderboard_dev.settings import EMULATOR_STACK, STATE_DIR, Endpoint, emulator_environment

MIRROR_VARIABLE = "TF_PROVIDER_MIRROR"
WELL_KNOWN_MIRRORS = (
    Path("/opt/tf-plugins"),
    Path("/usr/share/terraform/plugins"),
    Path.home() / ".terraform.d" / "plugins",
)


class TerraformError(RuntimeError):
    pass


def provider_mirror() -> Path | None:
    """The filesystem mirror of hashicorp/aws to install from, or None for the registry.

    TF_PROVIDER_MIRROR names it; unset, a well-known mirror on this machine is used if there is one.
    """
    configured = os.environ.get(MIRROR_VARIABLE)
    candidates = [Path(configured)] if configured else list(WELL_KNOWN_MIRRORS)
    for candidate in candidates:
        if (candidate / "registry.terraform.io" / "hashicorp" / "aws").is_dir():
            return candidate
    if configured:
        raise TerraformError(f"{MIRROR_VARIABLE}={configured} holds no registry.terraform.io/hashicorp/aws")
    return None


def cli_config(mirror: Path, directory: Path = STATE_DIR) -> Path:
    """A CLI config taking hashicorp/aws from the mirror and anything else from the registry."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "terraform-cli.tfrc"
    text = (
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        f'    path    = "{mirror}"\n'
        '    include = ["registry.terraform.io/hashicorp/aws"]\n'
        "  }\n"
        '  direct {\n    exclude = ["registry.terraform.io/hashicorp/aws"]\n  }\n'
        "}\n"
    )
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


PROVIDER_GOGC = "800"
"""Go's garbage collector target for Terraform and the AWS provider it starts. Every plan, apply and destroy starts
the provider more than once, and each start builds its schema of thousands of resources; at Go's default (100) a
third of that CPU is collection. 800 costs about 1 GB per provider process and saves that third: provider starts are
what the acceptance suite computes most of on two cores. A GOGC already set is kept."""


def terraform_environment(endpoint: Endpoint | None) -> dict[str, str]:
    environment = dict(os.environ)
    environment["TF_IN_AUTOMATION"] = "1"
    environment.setdefault("GOGC", PROVIDER_GOGC)
    mirror = provider_mirror()
    if mirror is not None:
        environment["TF_CLI_CONFIG_FILE"] = str(cli_config(mirror))
    elif not Path(environment.get("TF_CLI_CONFIG_FILE", "~")).expanduser().is_file():
        environment.pop("TF_CLI_CONFIG_FILE", None)
    if endpoint is not None:
        environment.update(emulator_environment(endpoint))
    return environment


_INITIALISED: set[Path] = set()
"""Working folders this process has run `terraform init` in."""


@dataclass
class Stack:
    """One deployment of the emulator stack, isolated in a workspace named after its prefix."""

    name: str
    endpoint: Endpoint | None
    variables: dict[str, Any] = field(default_factory=dict)
    working_dir: Path = EMULATOR_STACK

    def __post_init__(self) -> None:
        self._terraform = Terraform(working_dir=str(self.working_dir))

    @property
    def all_variables(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "aws_endpoint_url": self.endpoint.url if self.endpoint else "",
            "region": self.endpoint.region if self.endpoint else os.environ.get("AWS_REGION", "us-east-1"),
            **self.variables,
        }

    def _run(
        self, command: str, *arguments: str, in_workspace: bool = True, check: bool = True, **options: Any
    ) -> tuple[int, str, str]:
        """python-terraform passes os.environ to Terraform, so the environment is swapped in for the call."""
        environment = terraform_environment(self.endpoint)
        if in_workspace:
            environment["TF_WORKSPACE"] = self.name
        else:
            environment.pop("TF_WORKSPACE", None)
        previous = dict(os.environ)
        os.environ.clear()
        os.environ.update(environment)
        try:
            code, out, err = self._terraform.cmd(
                command, *arguments, capture_output=True, no_color=IsFlagged, **options
            )
        finally:
            os.environ.clear()
            os.environ.update(previous)
        if check and code != 0:
            raise TerraformError(f"terraform {command} failed ({code}):\n{err or out}")
        return code, out or "", err or ""

    def init(self) -> None:
        """Locked: stacks applied in parallel (one pytest worker each) share the working directory's .terraform.
        Initialised once per process and folder: the next stacks only need their workspace."""
        with locked(self.working_dir / ".terraform-init.lock"):
            if self.working_dir.resolve() not in _INITIALISED:
                self._run("init", in_workspace=False, input=False)
                _INITIALISED.add(self.working_dir.resolve())
            self._run("workspace select", "-or-create", self.name, in_workspace=False)

    def apply(self) -> dict[str, Any]:
        self.init()
        self._run("apply", input=False, auto_approve=IsFlagged, var=self.all_variables)
        return self.outputs()

    def outputs(self) -> dict[str, Any]:
        """`terraform output -json` for all outputs: python-terraform's output(name) predates Terraform 1.x."""
        _, out, _ = self._run("output", json=IsFlagged)
        return {name: value["value"] for name, value in json.loads(out or "{}").items()}

    def pending_changes(self) -> str | None:
        """The plan's text when it would change anything, None when it is empty."""
        code, out, err = self._run(
            "plan", check=False, input=False, detailed_exitcode=IsFlagged, var=self.all_variables
        )
        if code == 0:
            return None
        if code == 2:
            return out
        raise TerraformError(f"terraform plan failed ({code}):\n{err or out}")

    def destroy(self) -> None:
        """Explicit flags: python-terraform's destroy() adds -force, which Terraform 1.x rejects. No refresh: the
        state holds every resource this stack created, which is what a destroy needs, and reading each one first
        is a third of the destroy's time."""
        self._run("destroy", input=False, auto_approve=IsFlagged, refresh="false", var=self.all_variables)

    def exists(self) -> bool:
        return (self.working_dir / "terraform.tfstate.d" / self.name / "terraform.tfstate").is_file()

    def delete_workspace(self, force: bool = False) -> None:
        """force drops a state that still lists resources: for an emulator that is gone with everything in it."""
        self._run("workspace select", "default", in_workspace=False, check=False)
        self._run("workspace delete", self.name, in_workspace=False, check=False, force=IsFlagged if force else None)


@contextmanager
def deployed(stack: Stack) -> Iterator[dict[str, Any]]:
    """Apply, yield the outputs, and destroy afterwards even when apply or the body failed."""
    try:
        yield stack.apply()
    finally:
        stack.destroy()
        stack.delete_workspace()
