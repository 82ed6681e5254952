"""Every zone the module accepts loads from the pinned tzdata (that the module accepts exactly its zones, and that the
zips and the tools pin it alike: test_one_definition.py)."""

from __future__ import annotations

from leaderboard_core.buckets import time_zone, time_zone_names


def test_every_listed_zone_loads_from_the_package() -> None:
    for name in time_zone_names():
        assert str(time_zone(name)) == name
