"""The benchmark's own tests: its arithmetic, its report and its parts on moto, no emulator. Apart from tests/unit so
that the product's unit tests import nothing of `leaderboard_dev.bench` (the benchmark needs its plotting extras)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def no_emulator_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto intercepts AWS hostnames only: an emulator endpoint in the environment (`make test` runs these beside the
    acceptance suites) must not leak into a client of these tests."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
