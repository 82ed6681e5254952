"""Exactly-once counting under everything AWS's documentation allows, as the stream model plays it.

Hypothesis draws histories of deliveries (tests/stream_model/histories.py) from a fixed seed; the
model (aws_delivery.py) plays each against the shipped aggregator; the oracle recounts every
download and checks that nothing is missing without a durable failure record, then plays the
operator's recover and checks that every aggregate is exact. A failing history is shrunk to a
short story of deliveries and printed as Python: keep it in regressions.py. MODEL_HISTORIES
(default 1000) is the number of histories of the shipped design, split between its two write
modes and MODEL_CHUNKS chunks (`make test-model` runs 20,000 on two workers); three in ten of that number again
are histories whose downloads are also deleted, edited, written again and expired (retractions), and one in ten again,
per ledger design (the one-reader design's too), are the same in ledger mode, on tables with downloads from before
their stream and backfills.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from aggregator_settings import PER_BATCH, PER_WINDOW
from tests.stream_model.aws_delivery import HAZARDS
from tests.stream_model.designs import shipped
from tests.stream_model.histories import (
    BOARDS,
    LEDGER_KINDS,
    LOCAL_TIME,
    RETRACTION_KINDS,
    History,
    histories,
    play,
)
from tests.stream_model.ledger_design import LEDGER_DESIGNS
from tests.stream_model.naive_designs import factory
from tests.stream_model.one_reader_design import HAZARDS_IT_NEVER_MEETS
from tests.stream_model.reference_design import CheckpointReader
from tests.stream_model.regressions import (
    DEVELOPMENT,
    FINDINGS,
    GUARD_WITNESSES,
    HIGH_MARK_COUNTEREXAMPLES,
    LEDGER_HISTORIES,
    LEDGER_STORIES,
    NAIVE_STORIES,
    RETRACTION_DEVELOPMENT,
    RETRACTION_FINDINGS,
    RETRACTION_STORIES,
)

pytestmark = pytest.mark.slow  # the stream model at its CI size: CI runs it, make check does not

HISTORIES = int(os.environ.get("MODEL_HISTORIES", "1000"))
CHUNKS = int(os.environ.get("MODEL_CHUNKS", "1"))
MODES = (PER_BATCH, PER_WINDOW)
NOT_REQUIRED = {"expired iterator", "timed out"}
"""Hazards only a design that holds an iterator 15 minutes, or overruns its timeout, meets: tracked, not required."""
REFERENCE = factory(CheckpointReader)
RARE_AMONG_RETRACTIONS = {"larger retry", "direct behind the mapping", "failure queue refused a send"}
"""Hazards the fewer histories with retractions may miss: the histories without them require each."""


def explore(
    make_design: Any,
    modes: tuple[str, ...],
    examples: int,
    chunk: int,
    boards: tuple[str, ...] = ("month",),
    retractions: bool = False,
    ledger: bool = False,
    mapped: Callable[[History], History] | None = None,
) -> Counter[str]:
    """Play `examples` seeded histories; fail with the shrunk history if any is not exact; the hazards seen
    (and the kinds of boards counted, and of retractions). With `retractions` (or `ledger`), half the histories feed
    one aggregate, where counts most often end back at 0. `mapped` changes each history drawn (its mapping's settings,
    say) before it is played."""
    seen: Counter[str] = Counter()
    drawn = histories(modes, boards=boards)
    if retractions or ledger:
        drawn = st.one_of(
            histories(modes, boards=boards, retractions=True, ledger=ledger),
            histories(modes, focused=True, boards=boards, retractions=True, ledger=ledger),
        )
    if mapped is not None:
        drawn = drawn.map(mapped)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )
    @seed(chunk)
    @given(history=drawn)
    def every_history_is_exact(history: History) -> None:
        outcome = play(history, make_design)
        seen.update(outcome.hazards | outcome.board_kinds)
        assert not outcome.problems(), f"{outcome.problems()}: {outcome.summary()}\n{history!r}"

    every_history_is_exact()
    return seen


@pytest.mark.parametrize("chunk", range(CHUNKS))
@pytest.mark.parametrize("mode", MODES)
def test_the_shipped_aggregator_counts_every_download_exactly_once(mode: str, chunk: int) -> None:
    # given seeded random histories with every hazard AWS documents, in one write mode
    examples = max(1, HISTORIES // (len(MODES) * CHUNKS))
    # when each is played against the shipped aggregator, then recovered as the design file says
    seen = explore(shipped, (mode,), examples, chunk=100 * MODES.index(mode) + chunk)
    # then none lost or over-counted a download, and every hazard class occurred among them
    assert set(HAZARDS) - NOT_REQUIRED - set(seen) == set()


@pytest.mark.parametrize("boards", [name for name in BOARDS if name != "month"])
def test_several_periods_a_category_and_sums_are_exact_under_every_history(boards: str) -> None:
    # given seeded random histories in both write modes, the aggregator keeping several periods and a
    # category's boards (percent-encoded names, downloads without one), in one configuration summing fractions
    examples = max(1, HISTORIES // 4)
    # when each is played against the shipped aggregator, then recovered
    seen = explore(shipped, MODES, examples, chunk=11 + list(BOARDS).index(boards), boards=(boards,))
    # then none lost or over-counted anything on any board, the hazards occurred, and so did what the boards add
    assert set(HAZARDS) - NOT_REQUIRED - {"pruning"} - set(seen) == set()
    periods, _, summed = BOARDS[boards]
    expected = {"category"} | ({"fractions"} if summed else set())
    expected |= {"week of the next year"} if "week" in periods else set()
    expected |= (
        {"a local day before the UTC day", "a season", "an hour of a night the clocks change"}
        if boards in LOCAL_TIME
        else set()
    )
    assert expected - set(seen) == set()


@pytest.mark.parametrize("chunk", range(CHUNKS))
@pytest.mark.parametrize("mode", MODES)
def test_deletions_edits_rewrites_and_expiries_are_counted_exactly_once_under_every_history(
    mode: str, chunk: int
) -> None:
    # given seeded random histories with the hazards AWS documents, in one write mode, on every kind of board, whose
    # downloads are also deleted, edited (across months and a year, category, amount, entity, marker, back again, or
    # nothing counted), written again under their key and expired by Time to Live; half of them on one aggregate
    examples = max(1, 3 * HISTORIES // (10 * len(MODES) * CHUNKS))
    # when each is played against the shipped aggregator with retractions, then recovered
    first = 32 + 100 * MODES.index(mode) + chunk
    seen = explore(shipped, (mode,), examples, chunk=first, boards=tuple(BOARDS), retractions=True)
    # (how a history plays out depends on the invocations' time, so under load a chunk may miss a kind: more chunks,
    # up to four, are played until every kind has occurred)
    for more in range(1, 5):
        if not set(RETRACTION_KINDS) - set(seen):
            break
        seen += explore(shipped, (mode,), examples, chunk=first + 1000 * more, boards=tuple(BOARDS), retractions=True)
    # then every board equals the recount of the table's last items and of those TTL deleted, no count is below 0,
    # none at 0 is in the index and every board ranks as the recount does; and every kind of retraction occurred
    assert set(RETRACTION_KINDS) - set(seen) == set()
    assert set(HAZARDS) - NOT_REQUIRED - RARE_AMONG_RETRACTIONS - set(seen) == set()


@pytest.mark.parametrize("chunk", range(CHUNKS))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("design", list(LEDGER_DESIGNS))
def test_a_ledger_design_counts_every_download_as_the_items_last_images_say_under_every_ledger_history(
    design: str, mode: str, chunk: int
) -> None:
    # given seeded random histories with the hazards AWS documents, in one write mode, on every kind of board, on a
    # table with downloads from before its stream, whose downloads are deleted, edited (across months and categories,
    # spoilt and mended, back again), written again under their key and expired, while backfills count the table:
    # two at once, killed midway, run again; half of them on one aggregate
    examples = max(1, HISTORIES // (10 * len(MODES) * CHUNKS))
    # when each is played against the ledger design, an operator's backfill run to its end after the steps, then
    # recovered
    first = 52 + 100 * MODES.index(mode) + chunk
    required = (set(HAZARDS) - NOT_REQUIRED - RARE_AMONG_RETRACTIONS) | set(LEDGER_KINDS)
    if design == "one reader":
        required -= HAZARDS_IT_NEVER_MEETS  # it reads no shard, keeps no state, refuses direct invocations
    seen: Counter[str] = Counter()
    # (as with retractions, more chunks, up to four, are played until every hazard and kind has occurred)
    for more in range(5):
        if seen and not required - set(seen):
            break
        seen += explore(
            LEDGER_DESIGNS[design],
            (mode,),
            examples,
            chunk=first + 1000 * more,
            boards=tuple(BOARDS),
            ledger=True,
        )
    # then every board equals the recount of the table's last items and of those TTL deleted, and ranks as it does;
    # and every hazard occurred, backfills ran two at once and were killed
    assert required - set(seen) == set()


def test_the_reference_design_is_exact_under_every_history() -> None:
    # given seeded random histories in both write modes
    examples = max(1, HISTORIES // 4)
    # when each is played against the design file's rules in the model's own words
    seen = explore(REFERENCE, MODES, examples, chunk=7)
    # then every one is exact (the model asks nothing impossible), and every hazard occurred but pruning and
    # refused batches (the reference sends one message at a time)
    assert set(HAZARDS) - NOT_REQUIRED - {"pruning", "failure queue refused a send"} - set(seen) == set()


REGRESSIONS = {
    **DEVELOPMENT,
    **FINDINGS,
    **HIGH_MARK_COUNTEREXAMPLES,
    **{name: story[1] for name, story in NAIVE_STORIES.items()},
    **{f"witness of the guard: {name}": history for name, history in GUARD_WITNESSES.items()},
}


@pytest.mark.parametrize("name", list(REGRESSIONS))
def test_a_kept_counterexample_is_exact_on_the_shipped_aggregator(name: str) -> None:
    # given a history that once broke a design
    history = REGRESSIONS[name]
    # when the shipped aggregator plays it in its write mode
    outcome = play(history, shipped)
    # then nothing is lost or over-counted
    assert outcome.problems() == [], f"{outcome.summary()}\n{history!r}"


RETRACTION_REGRESSIONS = {
    **RETRACTION_DEVELOPMENT,
    **RETRACTION_FINDINGS,
    **{name: story[1] for name, story in RETRACTION_STORIES.items()},
}


@pytest.mark.parametrize("name", list(RETRACTION_REGRESSIONS))
def test_a_kept_history_of_deletions_and_edits_is_exact_on_the_shipped_aggregator(name: str) -> None:
    # given a history of deletions and edits that once broke a design
    history = RETRACTION_REGRESSIONS[name]
    # when the shipped aggregator plays it with retractions
    outcome = play(history, shipped)
    # then every board equals the recount, and the index holds exactly the counts above 0, ranked as the recount
    assert outcome.problems() == [], f"{outcome.summary()}\n{history!r}"


def test_a_deletion_read_in_a_child_before_its_download_in_the_parent_is_not_reported_as_never_counted() -> None:
    # given a download in a closed parent shard behind a run of empty pages, and its deletion in a child
    history = RETRACTION_FINDINGS["a count an addition brings back to 0 from below leaves the index"]
    # when the shipped aggregator plays it
    outcome = play(history, shipped)
    # then no failure message says a retraction took back a download never counted: the stream held every download
    assert outcome.false_alarms == 0


@pytest.mark.parametrize("name", list(REGRESSIONS))
def test_a_kept_counterexample_is_exact_on_the_reference_design(name: str) -> None:
    history = REGRESSIONS[name]
    # the reference keeps the month's boards only: a history of other boards is played on those
    history = History(replace(history.config, boards="month"), history.steps)
    outcome = play(history, REFERENCE)
    assert outcome.problems() == [], f"{outcome.summary()}\n{history!r}"


LEDGER_REGRESSIONS = {**LEDGER_HISTORIES, **{name: story[1] for name, story in LEDGER_STORIES.items()}}


def _ledger_cases() -> list[Any]:
    cases = []
    for design in LEDGER_DESIGNS:
        for name in LEDGER_REGRESSIONS:
            cases.append(pytest.param(design, name, id=f"{design}-{name}"))
    return cases


@pytest.mark.parametrize(("design", "name"), _ledger_cases())
def test_a_kept_ledger_history_is_exact_on_every_ledger_design(design: str, name: str) -> None:
    # given a ledger history kept for what it shows (an issue's finding, or a naive ledger design's story)
    history = LEDGER_REGRESSIONS[name]
    # when the ledger design plays it, an operator's backfill run to its end after the steps
    outcome = play(history, LEDGER_DESIGNS[design])
    # then every board equals the recount of the table's last items, and ranks as it does
    assert outcome.problems() == [], f"{outcome.summary()}\n{history!r}"
