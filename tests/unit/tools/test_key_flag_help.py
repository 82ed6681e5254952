"""The board commands' --key help names the buckets a deployment on any clock keys, seasons included."""

from __future__ import annotations

import subprocess
import sys


def test_the_key_flag_help_names_the_local_bucket_and_the_season_key() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "leaderboard_tools", "top", "--help"], capture_output=True, text=True, check=True
    ).stdout
    key_help = " ".join(shown[shown.index("--key KEY ") :].split("--category")[0].split())
    assert "UTC" not in key_help
    assert "S2026-01-05" in key_help or "SYYYY-MM-DD" in key_help
