"""Every tier's hypothesis settings (no per-example deadline) and xdist's scheduling (tests/scheduling.py).

The properties check what histories count, not how fast an example runs; on two shared cores (make check's four
workers, the unit tier beside the acceptance suite) one example can take longer than hypothesis's default 200 ms
without anything being wrong, which it would report as a failure."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings

from tests.scheduling import SpreadLongFiles

settings.register_profile("leaderboard", deadline=None)
settings.load_profile("leaderboard")


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> SpreadLongFiles | None:
    """`--dist loadfile` spreads the long files' tests (tests/scheduling.py); any other mode is xdist's own."""
    return SpreadLongFiles(config, log) if config.getvalue("dist") == "loadfile" else None
