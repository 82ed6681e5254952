"""`report` merges the parts measured on their own (all_in.json, backfill.json, ...) into the full run's results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from leaderboard_dev.bench.__main__ import with_separate_parts


def measured(directory: Path, name: str, key: str, commit: str) -> None:
    part = {"provenance": {"commit": commit}, "plan": {}, key: {"measured at": commit}, "failures": []}
    (directory / name).write_text(json.dumps(part))


def test_a_part_rerun_alone_replaces_what_an_earlier_run_of_it_had_merged(tmp_path: Path) -> None:
    # given results that hold the all-in part merged from an earlier separate run, and a newer run of that part
    measured(tmp_path, "all_in.json", "all_in", "old")
    earlier: dict[str, Any] = with_separate_parts({}, tmp_path)
    measured(tmp_path, "all_in.json", "all_in", "new")
    # when the report merges the separate parts again
    merged = with_separate_parts(earlier, tmp_path)
    # then the newer run's figures and provenance are the ones reported
    assert merged["all_in"] == {"measured at": "new"}
    assert merged["separate_runs"]["all_in"]["provenance"] == {"commit": "new"}


def test_a_part_the_full_run_measured_is_kept_beside_a_separate_run_of_it(tmp_path: Path) -> None:
    # given results whose full run measured the backfill, and a separate run of the backfill beside them
    measured(tmp_path, "backfill.json", "backfill", "separate")
    full = {"backfill": {"measured at": "full run"}}
    # when the report merges the separate parts
    merged = with_separate_parts(full, tmp_path)
    # then the full run's figures stay
    assert merged["backfill"] == {"measured at": "full run"}
    assert "backfill" not in merged.get("separate_runs", {})
