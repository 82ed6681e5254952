"""Terraform's own checks over the module, its examples and the emulator stack; checkov over the module and examples.

The provider comes from the mirror if there is one."""

from __future__ import annotations

import subprocess
from pathlib import Path

from leaderboard_dev.settings import EMULATOR_STACK, REPOSITORY, TERRAFORM_MODULE
from leaderboard_dev.terraform_stack import terraform_environment

CONFIGURATIONS = (
    TERRAFORM_MODULE,
    *sorted(path for path in (TERRAFORM_MODULE / "examples").glob("*") if path.is_dir()),
    EMULATOR_STACK,
)


def run(command: list[str], directory: Path) -> bool:
    print(f"$ (cd {directory.relative_to(REPOSITORY)} && {' '.join(command)})", flush=True)
    return subprocess.run(command, cwd=directory, env=terraform_environment(None), check=False).returncode == 0


def check(checkov: str | None) -> bool:
    results = [
        run(["terraform", "fmt", "-check", "-recursive", "-diff"], path) for path in (TERRAFORM_MODULE, EMULATOR_STACK)
    ]
    for configuration in CONFIGURATIONS:
        results.append(run(["terraform", "init", "-backend=false", "-input=false", "-no-color"], configuration))
        results.append(run(["terraform", "validate", "-no-color"], configuration))
    if checkov:
        results.append(
            run(
                [checkov, "--directory", ".", "--framework", "terraform", "--compact", "--quiet", "--skip-download"],
                TERRAFORM_MODULE,
            )
        )
    return all(results)
