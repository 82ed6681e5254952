"""`bench report` publishes figures of the code that ships only: a part measured before the aggregator changed, or on
uncommitted changes, is refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

from leaderboard_dev.bench import report


def git(repository: Path, *arguments: str) -> str:
    done = subprocess.run(["git", *arguments], cwd=repository, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def commit_file(repository: Path, path: str, text: str) -> str:
    (repository / path).parent.mkdir(parents=True, exist_ok=True)
    (repository / path).write_text(text)
    git(repository, "add", path)
    git(repository, "-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-qm", path)
    return git(repository, "rev-parse", "HEAD")


def measured_at(commit: str, clean: bool = True) -> dict[str, object]:
    return {"commit": commit, "work_tree_clean": clean}


def test_a_part_measured_before_the_aggregator_changed_is_refused_and_one_after_a_docs_change_is_not(
    tmp_path: Path,
) -> None:
    # given an aggregator committed, a part measured there, then the aggregator changed, then only the docs
    git(tmp_path, "init", "-q")
    before = commit_file(tmp_path, "lambda_src/aggregator/aggregator.py", "one\n")
    after = commit_file(tmp_path, "lambda_src/aggregator/aggregator.py", "two\n")
    commit_file(tmp_path, "docs/benchmark.md", "figures\n")
    results = {
        "provenance": measured_at(after),
        "separate_runs": {
            "all_in": {"provenance": measured_at(before)},
            "backfill": {"provenance": measured_at(after)},
        },
    }
    # when the report checks every part's commit against the aggregator at HEAD
    stale = report.parts_older_than_the_aggregator(results, tmp_path)
    # then only the part measured before the aggregator's change is refused
    assert stale == [f"all_in: measured at {before[:12]}, before the aggregator's last change"]


def test_a_part_measured_on_uncommitted_changes_or_an_unknown_commit_is_refused(tmp_path: Path) -> None:
    # given a repository whose aggregator is committed
    git(tmp_path, "init", "-q")
    head = commit_file(tmp_path, "lambda_src/aggregator/aggregator.py", "one\n")
    results = {
        "provenance": measured_at(head, clean=False),
        "separate_runs": {"reads_freshness": {"provenance": measured_at("0" * 40)}},
    }
    # when / then neither can be shown to describe the code at HEAD
    stale = report.parts_older_than_the_aggregator(results, tmp_path)
    assert stale == [
        f"the full run: measured with uncommitted changes at {head[:12]}",
        "reads_freshness: measured at 000000000000, before the aggregator's last change",
    ]
