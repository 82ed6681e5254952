"""The zones the module accepts are the zones the functions carry: terraform/time_zones.tf and the pinned tzdata."""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Iterator
from pathlib import Path

import build
import pytest

from leaderboard_core.buckets import time_zone, time_zone_names

ROOT = Path(__file__).resolve().parents[3]
PIN = re.compile(r"tzdata==([0-9.]+)")
"""An exact pin: the zips' and the development lock's (the operator distribution admits a range from it)."""


@pytest.fixture
def only_the_pinned_package() -> Iterator[None]:
    """zoneinfo's search path emptied: it finds zones in the tzdata package alone, not in the machine's files."""
    zoneinfo.reset_tzpath(to=[])
    try:
        yield
    finally:
        zoneinfo.reset_tzpath()


def test_the_module_accepts_exactly_the_zones_of_the_pinned_tzdata(only_the_pinned_package: None) -> None:
    # given the zones terraform/time_zones.tf lists, which leaderboard_time_zone's precondition checks
    listed = re.findall(r'^    "([^"]+)",$', (ROOT / "terraform" / "time_zones.tf").read_text(), flags=re.MULTILINE)
    # then they are the pinned package's zones, as zoneinfo finds them there, and the file is as build.py writes it
    assert listed == sorted(zoneinfo.available_timezones()) == list(time_zone_names())
    assert (ROOT / "terraform" / "time_zones.tf").read_text() == build.time_zones_tf()


def test_both_zips_and_the_development_lock_pin_the_same_tzdata_and_the_tools_admit_it() -> None:
    import tzdata

    pins = {
        path: PIN.findall(path.read_text())
        for path in [*(ROOT / "lambda_src").glob("*/requirements.txt"), ROOT / "development" / "pyproject.toml"]
    }
    assert len(pins) == 3
    assert {tuple(found) for found in pins.values()} == {(tzdata.__version__,)}, pins
    admitted = re.search(r'"tzdata>=([0-9.]+),<([0-9.]+)"', (ROOT / "pyproject.toml").read_text())
    assert admitted is not None
    assert admitted[1] == tzdata.__version__


def test_every_listed_zone_loads_from_the_package() -> None:
    for name in time_zone_names():
        assert str(time_zone(name)) == name
