"""Terraform's own checks and checkov over the module and its examples, with the provider from the mirror if any."""

from __future__ import annotations

import subprocess
from pathlib import Path

from leaderboard_tools.settings import TERRAFORM_MODULE
from leaderboard_tools.terraform_stack import terraform_environment

CONFIGURATIONS = (
    TERRAFORM_MODULE,
    *sorted(path for path in (TERRAFORM_MODULE / "examples").iterdir() if path.is_dir()),
)


def run(command: list[str], directory: Path) -> bool:
    print(f"$ (cd {directory.relative_to(TERRAFORM_MODULE.parent)} && {' '.join(command)})", flush=True)
    return subprocess.run(command, cwd=directory, env=terraform_environment(None), check=False).returncode == 0


def check(checkov: str | None) -> bool:
    results = [run(["terraform", "fmt", "-check", "-recursive", "-diff"], TERRAFORM_MODULE)]
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
