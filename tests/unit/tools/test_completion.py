"""`leaderboard-tools completion bash|zsh`: a script generated from the command line's own parsers, which names every
command and every flag, and which bash (and zsh, where it is installed) loads and completes with."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from leaderboard_tools import cli
from leaderboard_tools.cli import main


def script(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def the_commands() -> dict[str, argparse.ArgumentParser]:
    """Every command as `cli.main` builds it (the connection options included), independently of completion.py's
    own walk."""
    _, commands = cli.build_parser()
    return dict(commands.choices)


def flags(command: argparse.ArgumentParser) -> set[str]:
    return {flag for action in command._actions for flag in action.option_strings}


def test_the_bash_script_names_every_command_and_its_flags(capsys: pytest.CaptureFixture[str]) -> None:
    # given the commands cli.main registers (top, rank, all, size, rekey, reconcile, recover, backfill, readers, ...)
    commands = the_commands()
    assert {"top", "rank", "all", "size", "rekey", "reconcile", "recover", "backfill", "readers", "completion"} <= set(
        commands
    )
    # when the bash script is generated
    text = script("bash", capsys)
    # then it lists every command, and for each one every flag it takes
    listed = re.search(r"^_shtab_leaderboard_tools_subparsers=\((.*)\)$", text, flags=re.MULTILINE)
    assert listed is not None
    assert set(listed.group(1).split()) == set(commands)
    for name, command in commands.items():
        options = re.search(
            rf"^_shtab_leaderboard_tools_{name.replace('-', '_')}_option_strings=\((.*)\)$", text, flags=re.MULTILINE
        )
        assert options is not None, name
        assert set(options.group(1).split()) == flags(command), name
    # and the choices of a flag (size --output) are completed too
    assert "_shtab_leaderboard_tools_size___output_choices=(json table text)" in text


def completions(script_path: Path, words: list[str]) -> list[str]:
    """What bash offers after `words` (the last one being completed), with the script at `script_path` loaded."""
    program = (
        f"source {script_path}\n"
        f"COMP_WORDS=({' '.join(repr(word) for word in words)}); COMP_CWORD={len(words) - 1}\n"
        'COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}\n'
        '_shtab_leaderboard_tools; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    result = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return sorted(line for line in result.stdout.splitlines() if line)


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
def test_bash_completes_commands_flags_and_choices_with_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # given the bash script, loaded into bash
    path = tmp_path / "leaderboard-tools.bash"
    path.write_text(script("bash", capsys))
    # then bash completes a command, a flag and a flag's choices with it
    assert completions(path, ["leaderboard-tools", "re"]) == ["readers", "reconcile", "recover", "rekey"]
    assert completions(path, ["leaderboard-tools", "size", "--agg"]) == ["--aggregate-writes"]
    assert completions(path, ["leaderboard-tools", "size", "--output", ""]) == ["json", "table", "text"]
    assert completions(path, ["leaderboard-tools", "reconcile", "--rep"]) == ["--repair"]


def test_the_zsh_script_names_every_command_and_its_flags(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = script("zsh", capsys)
    assert text.startswith("#compdef leaderboard-tools")
    for name, command in the_commands().items():
        assert re.search(rf"^\s+{name}:'", text, flags=re.MULTILINE), name
        for flag in flags(command):
            assert re.search(rf'"{re.escape(flag)}[\[:"]|[{{,]{re.escape(flag)}[}},]', text), (name, flag)
    if shutil.which("zsh"):  # where zsh is installed, the script is valid zsh
        path = tmp_path / "_leaderboard-tools"
        path.write_text(text)
        checked = subprocess.run(["zsh", "-n", str(path)], capture_output=True, text=True, check=False)
        assert checked.returncode == 0, checked.stderr


def test_a_shell_it_does_not_know_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["completion", "fish"])
    assert exit_.value.code == 2
    assert "invalid choice: 'fish'" in capsys.readouterr().err
