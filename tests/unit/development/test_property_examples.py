"""make check draws a quarter of each property's examples; make test and CI draw them all."""

from __future__ import annotations

import re

import pytest

from tests.property_examples import examples
from tests.unit.conftest import REPOSITORY


def test_a_property_draws_its_own_count_unless_the_quick_loop_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    # given no request for the quick loop
    monkeypatch.delenv("PROPERTY_EXAMPLES", raising=False)

    # then every property draws the count it names
    assert [examples(count) for count in (2, 8, 80, 400)] == [2, 8, 80, 400]


def test_the_quick_loop_draws_a_quarter_and_never_fewer_than_three(monkeypatch: pytest.MonkeyPatch) -> None:
    # given make check's request
    monkeypatch.setenv("PROPERTY_EXAMPLES", "quick")

    # then a quarter, at least three, never more than the property's own count
    assert [examples(count) for count in (2, 8, 80, 400)] == [2, 3, 20, 100]


def test_every_fixed_example_count_of_the_unit_tier_goes_through_the_budget() -> None:
    # given every property setting in the tests make check runs
    sources = [*(REPOSITORY / "tests" / "unit").rglob("*.py"), *(REPOSITORY / "tests" / "bench").rglob("*.py")]

    # when the example counts written as a bare number are collected
    bare = [
        f"{path.relative_to(REPOSITORY)}: {match.group(0)}"
        for path in sources
        for match in re.finditer(r"max_examples\s*=\s*\d+", path.read_text())
    ]

    # then there are none: each is examples(n), so make check's budget reaches every new property too
    assert bare == []
