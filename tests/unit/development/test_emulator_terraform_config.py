"""`python -m leaderboard_dev terraform-config` gives a root configuration of the user's own the CLI config the
project's Terraform runs use: `eval` of its output exports TF_CLI_CONFIG_FILE, which takes hashicorp/aws from this
machine's mirror (docs/attaching.md, "The example on the emulator")."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from leaderboard_dev import cli, terraform_stack


@pytest.fixture
def no_configured_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No TF_PROVIDER_MIRROR, the well-known places replaced by one of the test's, and the config written there."""
    monkeypatch.delenv(terraform_stack.MIRROR_VARIABLE, raising=False)
    monkeypatch.setattr(terraform_stack, "STATE_DIR", tmp_path / "state")
    well_known = tmp_path / "plugins"
    monkeypatch.setattr(terraform_stack, "WELL_KNOWN_MIRRORS", (well_known,))
    return well_known


def exported_by_eval(printed: str) -> str:
    """TF_CLI_CONFIG_FILE after bash evaluates what the command printed, as the doc's line does."""
    script = 'unset TF_CLI_CONFIG_FILE\neval "$1"\nprintf %s "${TF_CLI_CONFIG_FILE-}"'
    return subprocess.run(["bash", "-c", script, "bash", printed], capture_output=True, text=True, check=True).stdout


def test_terraform_config_exports_a_cli_config_that_installs_the_aws_provider_from_the_mirror(
    no_configured_mirror: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a mirror of hashicorp/aws at a well-known place
    (no_configured_mirror / "registry.terraform.io" / "hashicorp" / "aws").mkdir(parents=True)
    # when the command runs
    code = cli.main(["terraform-config"])
    # then `eval` of what it printed exports the CLI config, and that config installs hashicorp/aws from the mirror
    printed = capsys.readouterr().out
    assert code == 0
    config = Path(exported_by_eval(printed))
    assert config == terraform_stack.STATE_DIR / "terraform-cli.tfrc"
    text = config.read_text()
    assert f'path    = "{no_configured_mirror}"' in text
    assert 'include = ["registry.terraform.io/hashicorp/aws"]' in text


def test_terraform_config_without_a_mirror_says_so_and_exports_nothing(
    no_configured_mirror: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given no mirror anywhere: when the command runs
    code = cli.main(["terraform-config"])
    # then it says terraform init uses the registry, and `eval` of it leaves TF_CLI_CONFIG_FILE unset
    printed = capsys.readouterr().out
    assert code == 0
    assert printed.startswith("# no filesystem mirror of hashicorp/aws here")
    assert exported_by_eval(printed) == ""
