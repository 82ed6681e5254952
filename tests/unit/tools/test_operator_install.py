"""The operator distribution (`pip install .` at the repository's root, no extras): reconcile, recover, rekey and the
rest on boto3, botocore and rich in ranges, without the development package or the emulators. Local development is the
distribution in development/, which `make venv` installs beside it with the exact versions CI runs."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import venv
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from leaderboard_dev.release import package_version
from leaderboard_dev.settings import REPOSITORY
from tests.unit.development.working_tree import copy_working_tree

pytestmark = pytest.mark.slow  # a clean virtualenv and a wheel built and installed: CI runs it, make check does not

DEVELOPMENT_ONLY = ("localstack_client", "ministack", "python_terraform")
OPERATOR_DEPENDENCIES = {"boto3", "botocore", "rich", "shtab", "tzdata"}


def project(pyproject: Path) -> dict[str, Any]:
    return tomllib.loads(pyproject.read_text())["project"]


def requirements(listed: list[str]) -> dict[str, Requirement]:
    return {requirement.name: requirement for requirement in map(Requirement, listed)}


def test_the_operator_distribution_requires_ranges_and_no_emulator_package() -> None:
    operator = project(REPOSITORY / "pyproject.toml")
    required = requirements(operator["dependencies"])
    # only what the tools import, each in a range with a floor and a ceiling, never one exact version
    assert set(required) == OPERATOR_DEPENDENCIES
    for requirement in required.values():
        operators = {specifier.operator for specifier in requirement.specifier}
        assert operators == {">=", "<"}, requirement
    # and no extras: the emulators, the tests and the benchmark are the development distribution's
    assert "optional-dependencies" not in operator
    development = project(REPOSITORY / "development" / "pyproject.toml")
    assert {"localstack-client", "ministack", "python-terraform"} <= set(
        requirements(development["optional-dependencies"]["emulator"])
    )


def test_the_development_lock_is_exact_and_inside_the_operator_ranges() -> None:
    # given the ranges the operator distribution admits and the versions development and CI install (`make venv`)
    ranges = requirements(project(REPOSITORY / "pyproject.toml")["dependencies"])
    development = project(REPOSITORY / "development" / "pyproject.toml")
    locked = requirements(development["dependencies"])
    assert "leaderboard-tools" in locked
    for name in OPERATOR_DEPENDENCIES:
        # then each is one exact version, which the range admits
        (pin,) = locked[name].specifier
        assert pin.operator == "==", locked[name]
        assert ranges[name].specifier.contains(pin.version), (ranges[name], pin)
    # and every extra of development pins its versions exactly too
    for extra in development["optional-dependencies"].values():
        for requirement in requirements(extra).values():
            assert [specifier.operator for specifier in requirement.specifier] == ["=="], requirement


def test_the_operator_commands_run_without_the_emulator_packages() -> None:
    # given an interpreter where the emulator packages cannot be imported
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in DEVELOPMENT_ONLY)
    script = (
        f"import sys; {blocked}\n"
        "from leaderboard_tools.cli import main\n"
        "for command in ('reconcile', 'recover', 'rekey', 'size'):\n"
        "    try:\n"
        "        main([command, '--help'])\n"
        "    except SystemExit as exit_:\n"
        "        assert exit_.code == 0, (command, exit_.code)\n"
        "import leaderboard_tools.reconcile, leaderboard_tools.recover, leaderboard_tools.rekey\n"
        "import leaderboard_tools.deployment, leaderboard_tools.operator_aws\n"
        "print('ok')\n"
    )
    # when the operator commands are loaded and asked for their usage, then they answer
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("ok")


def test_the_operator_package_imports_nothing_of_local_development() -> None:
    # given every module of leaderboard_tools, the package an operator installs
    package = REPOSITORY / "src" / "leaderboard_tools"
    modules = sorted(
        ".".join(("leaderboard_tools", *path.relative_to(package).with_suffix("").parts)).removesuffix(".__init__")
        for path in package.rglob("*.py")
        if path.stem != "__main__"
    )
    assert "leaderboard_tools.reconcile" in modules
    # when each is imported in an interpreter where leaderboard_dev and the emulator packages cannot be imported
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in ("leaderboard_dev", *DEVELOPMENT_ONLY))
    script = (
        f"import importlib, sys; {blocked}\nfor name in {modules!r}:\n    importlib.import_module(name)\nprint('ok')"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    # then every one loads, and none imports leaderboard_dev, even inside a function
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    importing = re.compile(r"^\s*(from|import)\s+leaderboard_dev\b", flags=re.MULTILINE)
    assert [path.name for path in package.rglob("*.py") if importing.search(path.read_text())] == []


# A clean virtualenv, as an operator's: `pip install` of this working tree's files, nothing else.


@pytest.fixture(scope="module")
def operator_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("operator-install")
    source = copy_working_tree(root / "source")
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    installed = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    return root / "venv"


def run_in(environment: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=environment, capture_output=True, text=True, check=False)


def test_a_clean_install_holds_the_operator_tools_and_no_development_module(operator_install: Path) -> None:
    python = str(operator_install / "bin" / "python")
    # then the tools and the core they share with the Lambdas import, and nothing of local development does
    script = (
        "import importlib.util\n"
        "print([name for name in ('leaderboard_tools', 'leaderboard_core', 'leaderboard_dev', 'ministack',"
        " 'localstack_client', 'python_terraform', 'moto') if importlib.util.find_spec(name)])"
    )
    assert run_in(operator_install, python, "-c", script).stdout.strip() == "['leaderboard_tools', 'leaderboard_core']"
    development = run_in(operator_install, python, "-m", "leaderboard_dev", "--help")
    assert development.returncode != 0
    assert "No module named leaderboard_dev" in development.stderr
    # the distribution is the version pyproject.toml gives, and lists only its own two packages
    files = run_in(operator_install, python, "-m", "pip", "show", "--files", "leaderboard-tools").stdout
    assert f"Version: {package_version()}" in files
    top_level = {line.strip().split("/")[0] for line in files.split("Files:", 1)[1].splitlines() if line.strip()}
    assert {name for name in top_level if not name.startswith(("..", "leaderboard_tools-"))} == {
        "leaderboard_tools",
        "leaderboard_core",
    }


def test_a_clean_install_runs_the_command_and_each_command_s_help(operator_install: Path) -> None:
    command = str(operator_install / "bin" / "leaderboard-tools")
    usage = run_in(operator_install, command, "--help")
    assert usage.returncode == 0, usage.stderr
    listed = re.search(r"\{([a-z,-]+)\}", usage.stdout)
    assert listed, usage.stdout
    names = listed[1].split(",")
    assert {"top", "rank", "all", "size", "rekey", "reconcile", "recover"} <= set(names)
    for name in names:
        help_ = run_in(operator_install, command, name, "--help")
        assert (name, help_.returncode, help_.stderr) == (name, 0, "")
