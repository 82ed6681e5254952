"""Ruff sorts every Lambda module as first-party, with no list to keep: its `src` setting names the folders.

The Lambdas' modules import one another by their bare names (`import shard_reader`): each function's folder is its
zip's root. Ruff's `src` (pyproject.toml) lists lambda_src/aggregator and lambda_src/query, and ruff counts a module
found in one of those folders as first-party; a new module is so from its first line, with nothing to add anywhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[3]
LAMBDA_FOLDERS = ("lambda_src/aggregator", "lambda_src/query")
PACKAGES = ("leaderboard_core", "leaderboard_tools", "leaderboard_dev")


def lambda_modules() -> list[str]:
    """Every module of both functions, from their folders: what a new file adds."""
    return sorted(path.stem for folder in LAMBDA_FOLDERS for path in (REPOSITORY / folder).glob("*.py"))


def sorted_as_third_party(modules: list[str], folder: Path) -> list[str]:
    """The modules ruff does not sort as first-party with the project's settings.

    One probe file per module imports the standard library, a third-party package and the module, each in the
    block isort puts it in when the module is first-party: ruff's I001 on a probe means it sorts the module
    elsewhere.
    """
    for module in modules:
        (folder / f"probe_{module}.py").write_text(f"import json\n\nimport boto3\n\nimport {module}\n")
    settings = ["--config", str(REPOSITORY / "pyproject.toml"), "--select", "I", "--no-cache", "--exit-zero"]
    checked = subprocess.run(
        [sys.executable, "-m", "ruff", "check", *settings, "--output-format", "json", str(folder)],
        cwd=REPOSITORY,  # with --config, ruff resolves `src` from the working directory
        capture_output=True,
        text=True,
        check=True,
    )
    flagged = {Path(finding["filename"]).stem.removeprefix("probe_") for finding in json.loads(checked.stdout)}
    return sorted(flagged & set(modules))


def test_the_lambda_folders_hold_the_modules_of_both_functions() -> None:
    # given the functions' folders, when their modules are listed, then both handlers and a helper of each are there
    modules = lambda_modules()
    assert {"aggregator", "shard_reader", "query", "query_kinds"} <= set(modules)
    assert len(modules) >= 35


def test_ruff_sorts_every_lambda_module_and_shared_package_as_first_party(tmp_path: Path) -> None:
    # given every module of both functions and the project's packages
    modules = [*lambda_modules(), *PACKAGES]
    # when ruff sorts an import of each with the project's settings
    third_party = sorted_as_third_party(modules, tmp_path)
    # then it puts every one among the first-party imports
    assert third_party == [], f"ruff does not sort these as first-party: {', '.join(third_party)}"


@pytest.mark.parametrize("outside", ["notamodule_of_this_project", "boto3"])
def test_the_probe_names_a_module_that_is_not_first_party(tmp_path: Path, outside: str) -> None:
    # given a module that is none of the project's, when it is probed like the Lambdas' modules
    third_party = sorted_as_third_party([outside, "shard_reader"], tmp_path)
    # then the probe names it, and only it
    assert third_party == [outside]
