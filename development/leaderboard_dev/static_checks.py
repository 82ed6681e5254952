"""Terraform's own checks over the module, its examples and the emulator stack; checkov over the module and examples.

The provider comes from the mirror if there is one. The configurations and checkov are independent of each other, and
each is one process at a time, so they run side by side; each command's output is printed whole when it ends, so the
log reads as if they ran one after another."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from leaderboard_dev.settings import EMULATOR_STACK, REPOSITORY, TERRAFORM_MODULE
from leaderboard_dev.terraform_stack import terraform_environment

CONFIGURATIONS = (
    TERRAFORM_MODULE,
    *sorted(path for path in (TERRAFORM_MODULE / "examples").glob("*") if path.is_dir()),
    EMULATOR_STACK,
)

PARALLEL_CHECKS = max(2, min(4, os.cpu_count() or 2))
"""Checks running at once: one per core, between two and four."""


def run(command: list[str], directory: Path, shown_as: Path | None = None) -> bool:
    """The command in `directory`, its output printed whole under the folder it checks (`shown_as`, for a copy)."""
    result = subprocess.run(
        command,
        cwd=directory,
        env=terraform_environment(None),
        check=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    status = "" if result.returncode == 0 else f"  # exit status {result.returncode}"
    folder = (shown_as or directory).relative_to(REPOSITORY)
    print(f"$ (cd {folder} && {' '.join(command)}){status}\n{result.stdout}", flush=True)
    return result.returncode == 0


def validate(configuration: Path, copies: Path) -> bool:
    """`validate` needs `init`'s providers, so the two run in turn; a failed `init` still reports `validate`. Both run
    in a copy of the configuration (with the module beside it, as its relative sources expect), so that `make check`
    can lint while the unit tier's Terraform tests init the same folders."""
    copy = copies / configuration.relative_to(REPOSITORY)
    initialised = run(["terraform", "init", "-backend=false", "-input=false", "-no-color"], copy, configuration)
    return run(["terraform", "validate", "-no-color"], copy, configuration) and initialised


def copy_configurations(copies: Path) -> None:
    """The module (its examples inside it) and the emulator stack, without Terraform's working files."""
    working_files = shutil.ignore_patterns(".terraform", "terraform.tfstate*", ".terraform.tfstate.lock.info")
    for tree in (TERRAFORM_MODULE, EMULATOR_STACK):
        shutil.copytree(tree, copies / tree.relative_to(REPOSITORY), ignore=working_files)


def check(checkov: str | None) -> bool:
    with tempfile.TemporaryDirectory(prefix="check-terraform-") as temporary:
        copies = Path(temporary)
        copy_configurations(copies)
        return _check_all(checkov, copies)


def _check_all(checkov: str | None, copies: Path) -> bool:
    with ThreadPoolExecutor(max_workers=PARALLEL_CHECKS) as pool:
        checks = []
        if checkov:
            scan = [checkov, "--directory", ".", "--framework", "terraform", "--compact", "--quiet", "--skip-download"]
            checks.append(pool.submit(run, scan, TERRAFORM_MODULE))
        checks += [
            pool.submit(run, ["terraform", "fmt", "-check", "-recursive", "-diff"], path)
            for path in (TERRAFORM_MODULE, EMULATOR_STACK)
        ]
        checks += [pool.submit(validate, configuration, copies) for configuration in CONFIGURATIONS]
        return all([check.result() for check in checks])
