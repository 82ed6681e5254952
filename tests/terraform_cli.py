"""Terraform's CLI in a folder, with the provider from the machine's mirror (no network): for plan-level tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from leaderboard_dev.terraform_stack import terraform_environment


def terraform(directory: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["terraform", *arguments, "-no-color"],
        cwd=directory,
        env=terraform_environment(None),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
