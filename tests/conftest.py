"""Every tier's hypothesis settings (no per-example deadline), xdist's scheduling (tests/scheduling.py), the
`matrix` marker and the collector's settings for a test process.

The properties check what histories count, not how fast an example runs; on two shared cores (make check's four
workers, the unit tier beside the acceptance suite) one example can take longer than hypothesis's default 200 ms
without anything being wrong, which it would report as a failure."""

from __future__ import annotations

import gc
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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A `matrix` test's first case stays in `make check`; its other cases are `slow`, run by CI and `make test-unit`.

    Such a test runs the installed command (or a build) once per case, each a child process; the first case keeps
    the behaviour in the fast loop, the rest repeat it per command. Before `-m` deselects (tryfirst)."""
    first_cases: set[tuple[str, str]] = set()
    for item in items:
        if item.get_closest_marker("matrix") is None:
            continue
        function = (str(item.path), getattr(item, "originalname", item.name))
        if function in first_cases:
            item.add_marker(pytest.mark.slow)
        else:
            first_cases.add(function)


GENERATION_0_THRESHOLD = 50_000
"""Allocations between young-generation collections (Python's default is 700)."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what the imports and the collection built before any test runs.

    A test process holds a large heap that lives to its end (botocore's service models, moto's backends, hypothesis,
    every collected test), and the tests allocate much and keep little: each full collection walked that heap again.
    Frozen, the collector walks only what the tests allocate, and less often; nothing a test sees changes."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GENERATION_0_THRESHOLD, *gc.get_threshold()[1:])
