"""Every guard of the shipped aggregator is needed: without any one of them, some history goes wrong.

For each guard (tests/stream_model/guards.py) the harness searches seeded histories for one that
is exact with the guard and wrong without it. A guard no history needs is marked here with the
reason: either the model does not produce its hazard yet, or the guard is not needed for
exactness (the reference design's list is the harness's own check). The marks are strict: once
a history needs the guard, the mark must go. MODEL_GUARD_HISTORIES sets the search's length.
"""

from __future__ import annotations

import os

import pytest

from tests.stream_model.designs import shipped
from tests.stream_model.guards import REFERENCE, SHIPPED, Guard, breaking_history
from tests.stream_model.naive_designs import factory
from tests.stream_model.reference_design import CheckpointReader

pytestmark = pytest.mark.slow  # the stream model at its CI size: CI runs it, make check does not

EXAMPLES = int(os.environ.get("MODEL_GUARD_HISTORIES", "300"))

SHIPPED_UNNEEDED = {
    "recount fence": "no history repairs an aggregate while the stream still holds its records",
    "a gone shard asks for a recount": (
        "the lineage walk of its descendants (and the sweep of listed shards) reads the gone shard too, finds it "
        "gone and reports it: two guards for one hazard"
    ),
}
REFERENCE_UNNEEDED = {
    "monotonic checkpoint": "the reference never prunes a watermark, so a checkpoint moved back is only re-read",
}


def cases(guards: tuple[Guard, ...], unneeded: dict[str, str]) -> list[object]:
    return [
        pytest.param(
            guard,
            id=guard.name,
            marks=[pytest.mark.xfail(strict=True, raises=AssertionError, reason=unneeded[guard.name])]
            if guard.name in unneeded
            else [],
        )
        for guard in guards
    ]


@pytest.mark.parametrize("guard", cases(SHIPPED, SHIPPED_UNNEEDED))
def test_without_any_one_guard_the_shipped_aggregator_gets_some_history_wrong(guard: Guard) -> None:
    # given seeded histories, and the shipped aggregator with one guard removed
    # when they are played with and without the guard
    history = breaking_history(guard, shipped, EXAMPLES)
    # then one of them is exact with the guard and wrong without it
    assert history is not None, f"no history of {EXAMPLES} needs '{guard.name}' ({guard.protects})"


@pytest.mark.parametrize("guard", cases(REFERENCE, REFERENCE_UNNEEDED))
def test_without_any_one_guard_the_reference_design_gets_some_history_wrong(guard: Guard) -> None:
    history = breaking_history(guard, factory(CheckpointReader), EXAMPLES)
    assert history is not None, f"no history of {EXAMPLES} needs '{guard.name}' ({guard.protects})"
