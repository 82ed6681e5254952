"""An operator install (`pip install .`, no extras) runs reconcile, recover and rekey: nothing of the emulators."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from leaderboard_tools.settings import REPOSITORY

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
