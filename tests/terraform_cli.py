"""Terraform's CLI in a folder, with the provider from the machine's mirror (no network): for plan-level tests.

Terraform starts the AWS provider several times per command, and each start builds its schema of thousands of
resources: most of a plan's CPU. As in the acceptance suite, the commands of one folder attach to one provider process
of this test process (leaderboard_dev.terraform_stack.SharedProvider); the providers of the last few folders stay up,
older ones are stopped, so a run of many temporary folders holds a few at a time."""

from __future__ import annotations

import subprocess
from collections import OrderedDict
from pathlib import Path

from leaderboard_dev.terraform_stack import (
    REATTACH_VARIABLE,
    SharedProvider,
    installed_provider,
    terraform_environment,
)

UNATTACHED = ("init", "version")
"""Commands that install or name the provider rather than run it."""
FOLDERS_KEPT = 2
"""Folders whose provider process stays up between commands."""
_folders: OrderedDict[Path, dict[str, str]] = OrderedDict()


def _attached(directory: Path, environment: dict[str, str]) -> dict[str, str]:
    """The environment with this folder's shared provider, started on first use; the oldest folder's beyond
    FOLDERS_KEPT is stopped. Without an installed provider (before init), Terraform starts its own."""
    binary = installed_provider(directory)
    if binary is None:
        return environment
    folder = directory.resolve()
    _folders.pop(folder, None)
    _folders[folder] = environment
    while len(_folders) > FOLDERS_KEPT:
        oldest, its_environment = _folders.popitem(last=False)
        SharedProvider.stop(oldest, its_environment)
    reattach = SharedProvider.reattach(binary, directory, environment)
    return {**environment, REATTACH_VARIABLE: reattach} if reattach else environment


def terraform(
    directory: Path, *arguments: str, input: str | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    environment = terraform_environment(None)
    if arguments and arguments[0] not in UNATTACHED:
        environment = _attached(directory, environment)
    return subprocess.run(
        ["terraform", *arguments, "-no-color"],
        cwd=directory,
        env=environment,
        input=input,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
