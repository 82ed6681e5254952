"""An operator install (`pip install .`, no extras) runs reconcile, recover and rekey: nothing of the emulators."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

from leaderboard_dev.settings import REPOSITORY

DEVELOPMENT_ONLY = ("localstack_client", "ministack", "python_terraform")


def test_the_base_install_requires_no_emulator_package() -> None:
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    required = {requirement.split("==")[0] for requirement in project["dependencies"]}
    assert required == {"boto3", "botocore", "rich"}
    assert {"localstack-client", "ministack", "python-terraform"} <= {
        requirement.split("==")[0] for requirement in project["optional-dependencies"]["emulator"]
    }


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
