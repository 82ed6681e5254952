"""Operator tools from before leaderboard_time_zone know nothing of LEADERBOARD_TIME_ZONE: run against a deployment on
a local clock, their reconcile recounts in UTC buckets and "repairs" every correct local count. Nothing in the tools
or the deployment refuses that pairing, so the release must say it."""

from __future__ import annotations

import re
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]


def test_the_release_warns_that_older_tools_recount_a_local_deployment_in_utc() -> None:
    changelog = (REPOSITORY / "CHANGELOG.md").read_text()
    unreleased = changelog[
        changelog.index("## [Unreleased]") : changelog.index("\n## [", changelog.index("## [Unreleased]") + 1)
    ]
    operations = (REPOSITORY / "docs" / "operations.md").read_text()
    warning = re.compile(
        r"(older|earlier|before this release|upgrade)[^.]{0,200}(tools|leaderboard-tools)", re.IGNORECASE
    )
    near_zone = [
        m
        for text in (unreleased, operations)
        for m in warning.finditer(text)
        if "zone" in text[max(0, m.start() - 300) : m.end() + 300]
    ]
    assert near_zone, "no upgrade warning near the time zone"
