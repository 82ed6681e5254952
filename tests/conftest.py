"""Every tier's hypothesis settings: no per-example deadline.

The properties check what histories count, not how fast an example runs; on two shared cores (make check's four
workers, the unit tier beside the acceptance suite) one example can take longer than hypothesis's default 200 ms
without anything being wrong, which it would report as a failure."""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("leaderboard", deadline=None)
settings.load_profile("leaderboard")
