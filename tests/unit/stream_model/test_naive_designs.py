"""The model really produces each hazard: some history breaks every deliberately naive design.

Each naive design (tests/stream_model/naive_designs.py) trusts one thing AWS does not promise. A
short story of deliveries shows it failing for that reason while the reference design, which
keeps that guard, stays exact; and random histories break each of them too, so the hazards
are not only in the hand-written stories. Four counterexamples against the high-mark design
(naive_designs.HighMarkDesign, regressions.HIGH_MARK_COUNTEREXAMPLES) are kept with the numbers first reported for them.
The naive ways of following deletions and edits (naive_designs.NAIVE_RETRACTIONS) break on histories with retractions,
on which the shipped aggregator is exact; the naive ledger designs (naive_designs.NAIVE_LEDGERS), and the naive way of
following retractions without a ledger, break on ledger histories, on which every ledger design is exact.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, settings

from aggregator_settings import PER_BATCH, PER_WINDOW
from tests.property_examples import examples
from tests.stream_model import naive_designs as naive
from tests.stream_model.designs import on_new_york_standard_time_all_year, shipped
from tests.stream_model.histories import BOARDS, LOCAL_TIME, History, Outcome, histories, play
from tests.stream_model.ledger_design import LEDGER_DESIGNS, ledger
from tests.stream_model.reference_design import CheckpointReader
from tests.stream_model.regressions import HIGH_MARK_COUNTEREXAMPLES, LEDGER_STORIES, NAIVE_STORIES, RETRACTION_STORIES

pytestmark = pytest.mark.slow  # the stream model at its CI size: CI runs it, make check does not

REFERENCE = naive.factory(CheckpointReader)
GENERATE_ONLY = settings(
    max_examples=examples(300),
    deadline=None,
    database=None,
    phases=(Phase.generate,),
    suppress_health_check=list(HealthCheck),
)
"""How the random searches draw: new histories only, none replayed, none kept."""


def outcome_of(design: type[Any], history: History) -> Outcome:
    return play(history, naive.factory(design))


@pytest.mark.parametrize("name", list(NAIVE_STORIES))
def test_a_naive_design_breaks_on_its_story_and_the_reference_does_not(name: str) -> None:
    # given a naive design and the story that shows the hazard it ignores
    design_name, history, expected = NAIVE_STORIES[name]
    design = getattr(naive, design_name)
    # when the naive design and the reference play it
    broken, reference = outcome_of(design, history), play(history, REFERENCE)
    # then the naive one loses or over-counts as its docstring says, and the reference is exact
    assert any(expected in problem for problem in broken.problems()), broken.summary()
    assert reference.problems() == [], reference.summary()


@pytest.mark.parametrize("design", naive.NAIVE, ids=lambda design: design.__name__)
def test_random_histories_break_every_naive_design(design: type[Any]) -> None:
    # given seeded random histories
    make = naive.factory(design)

    def broken(history: History) -> bool:
        return bool(play(history, make).problems())

    # when they are played against the naive design, then some history breaks it
    found = find(histories(), broken, settings=GENERATE_ONLY, random=random.Random(14))
    assert play(found, make).problems()


@pytest.mark.parametrize("name", list(RETRACTION_STORIES))
def test_a_naive_retraction_design_breaks_on_its_story_and_the_shipped_aggregator_does_not(name: str) -> None:
    # given a naive way of following deletions and edits, and a story of deliveries that shows what it ignores
    design_name, history, expected = RETRACTION_STORIES[name]
    # when the naive design and the shipped aggregator play it
    broken = play(history, naive.factory(getattr(naive, design_name)))
    exact = play(history, shipped)
    # then the naive design loses or over-counts as its docstring says, and the shipped aggregator is exact
    assert any(expected in problem for problem in broken.problems()), broken.summary()
    assert exact.problems() == [], exact.summary()


SHARDS_MOVED = {"shard split", "rollover", "split for heat"}


@pytest.mark.parametrize("mode", [PER_BATCH, PER_WINDOW])
@pytest.mark.parametrize("design", list(naive.NAIVE_RETRACTIONS), ids=lambda design: design.__name__)
def test_random_histories_with_retractions_break_every_naive_retraction_design(design: type[Any], mode: str) -> None:
    # given seeded random histories in one write mode whose downloads are deleted, edited and expired too
    make = naive.factory(design)
    expected = naive.NAIVE_RETRACTIONS[design]

    def broken_across_shards(history: History) -> bool:
        outcome = play(history, make)
        return bool(outcome.hazards & SHARDS_MOVED) and any(expected in problem for problem in outcome.problems())

    # when they are played against the naive design, then one whose shards split or rolled over breaks it as its
    # docstring says
    drawn = histories((mode,), boards=tuple(BOARDS), retractions=True)
    found = find(drawn, broken_across_shards, settings=GENERATE_ONLY, random=random.Random(28))
    # and the shipped aggregator plays the same history exactly
    assert play(found, shipped).problems() == [], repr(found)


@pytest.mark.parametrize("name", list(LEDGER_STORIES))
def test_a_naive_ledger_design_breaks_on_its_story_and_the_models_ledger_does_not(name: str) -> None:
    # given a naive way of keeping the ledger, and a ledger history that shows what it ignores
    design_name, history, expected = LEDGER_STORIES[name]
    # when the naive design and the model's ledger design play it
    broken = play(history, naive.factory(getattr(naive, design_name)))
    exact = play(history, ledger)
    # then the naive design loses or over-counts as its docstring says, and the model's ledger design is exact (every
    # ledger design plays the stories in test_exactly_once.py)
    assert any(expected in problem for problem in broken.problems()), broken.summary()
    assert exact.problems() == [], exact.summary()


LEDGER_HAZARDS = {
    naive.LedgerComparesSequencesAcrossShards: "child with lower sequence numbers",
    naive.OneReaderComparesSequencesAcrossShards: "child with lower sequence numbers",
}
"""What a random history must show for the naive design's failure to be the one its docstring names."""


@pytest.mark.parametrize("mode", [PER_BATCH, PER_WINDOW])
@pytest.mark.parametrize(
    "design", [*naive.NAIVE_LEDGERS, naive.SubtractsEveryDeliveredRetraction], ids=lambda design: design.__name__
)
def test_random_ledger_histories_break_every_naive_ledger_design(design: type[Any], mode: str) -> None:
    # given seeded random ledger histories in one write mode: history before the stream, backfills, retractions
    make = naive.factory(design)
    expected = naive.NAIVE_LEDGERS.get(design) or naive.NAIVE_RETRACTIONS[design]
    hazard = LEDGER_HAZARDS.get(design)

    def broken_as_its_docstring_says(history: History) -> bool:
        outcome = play(history, make)
        shown = hazard is None or hazard in outcome.hazards
        return shown and any(expected in problem for problem in outcome.problems())

    # when they are played against the naive design, then one breaks it as its docstring says
    drawn = histories((mode,), boards=tuple(BOARDS), ledger=True)
    found = find(drawn, broken_as_its_docstring_says, settings=GENERATE_ONLY, random=random.Random(38))
    # and every ledger design plays the same history exactly
    for make_ledger in LEDGER_DESIGNS.values():
        assert play(found, make_ledger).problems() == [], repr(found)


def test_the_high_mark_design_loses_half_of_a_reordered_retry_silently() -> None:
    # given ten downloads of one song whose first delivery fails, retried r6..r10 before r1..r5
    outcome = outcome_of(naive.HighMarkDesign, HIGH_MARK_COUNTEREXAMPLES["1. a retry presents r6..r10 before r1..r5"])
    # then the delivered-record watermark design counts 5 of 10, and nothing durable says so
    assert (outcome.downloads, outcome.lost_before, outcome.uncovered, outcome.failure_records) == (10, 5, 5, 0)


def test_the_high_mark_design_loses_half_of_a_larger_retry_over_a_written_half_until_a_recount() -> None:
    # given r1..r5 written with the response lost, retried as r1..r10 with that song's write throttled
    history = HIGH_MARK_COUNTEREXAMPLES["2. a larger retry whose write is throttled spans the stored watermark"]
    outcome = outcome_of(naive.HighMarkDesign, history)
    # then the window is given up with 5 of 10 counted: loud (a failure record), repaired only by a recount
    assert (outcome.lost_before, outcome.uncovered, outcome.lost) == (5, 0, 0)
    assert "window given up" in outcome.hazards


def test_the_high_mark_design_counts_3_of_10_after_a_direct_invocation_ahead_of_the_mapping() -> None:
    outcome = outcome_of(
        naive.HighMarkDesign, HIGH_MARK_COUNTEREXAMPLES["3. a direct invocation of r8 ahead of the mapping"]
    )
    assert (outcome.downloads, outcome.lost_before, outcome.uncovered) == (10, 7, 7)


def test_the_high_mark_design_loses_what_a_given_up_windows_failure_record_does_not_name() -> None:
    # given a per_window window of song1 then song2 downloads whose final invocation fails, retry quota 0
    outcome = outcome_of(
        naive.HighMarkDesign,
        HIGH_MARK_COUNTEREXAMPLES["4. a window given up with its first half pending for another song"],
    )
    # then nothing of the window is counted, and recover (the named range's aggregates) finds song2 only
    assert (outcome.lost_before, outcome.lost) == (10, 5)


def test_random_local_time_histories_break_a_calendar_on_a_fixed_offset() -> None:
    # given seeded random histories on New York's boards, and the shipped aggregator keeping them on a fixed UTC-5
    def broken(history: History) -> bool:
        return bool(play(history, on_new_york_standard_time_all_year).problems())

    # when they are played against it, then some history breaks it: a download on a night the clocks change
    found = find(histories(boards=tuple(LOCAL_TIME)), broken, settings=GENERATE_ONLY, random=random.Random(14))
    assert play(found, on_new_york_standard_time_all_year).problems()
    # while the shipped calendar counts the same history exactly
    assert play(found, shipped).problems() == []
