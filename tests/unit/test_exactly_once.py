"""Exactly-once counting under everything AWS's documentation allows, as the stream model plays it.

The model (tests/stream_model/aws_delivery.py) delivers random, seeded histories to each design
and an oracle recounts every download in its UTC month. MODEL_HISTORIES scales the number of
histories per design (default 300 here; `make test-model` runs more).
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

from aggregator import PER_BATCH, PER_WINDOW
from tests.stream_model.aws_delivery import (
    ALL_HAZARDS,
    ONE_ORDERED_SHARD,
    DeliveryModel,
    Hazards,
    HistoryResult,
    Mapping,
    Written,
    random_downloads,
)
from tests.stream_model.designs import GuideDesign, PreviousDesign, ShardWatermarkDesign
from tests.stream_model.fake_dynamodb import FakeDynamoDB

HISTORIES = int(os.environ.get("MODEL_HISTORIES", "300"))
CHUNKS = 10
WINDOW_SECONDS = 5


def history(
    seed: int,
    make_design: Any,
    hazards: Hazards,
    downloads: list[Written] | None = None,
    mapping: Mapping | None = None,
) -> HistoryResult:
    fake = FakeDynamoDB()
    design = make_design(fake)
    chosen = mapping or Mapping(batch_size=12, tumbling_window_seconds=WINDOW_SECONDS if design.uses_windows else None)
    model = DeliveryModel(seed, design, fake, hazards, chosen)
    result = model.run(downloads if downloads is not None else random_downloads(random.Random(seed), 120))
    result.design_object = design  # type: ignore[attr-defined]
    return result


def per_batch(fake: FakeDynamoDB) -> ShardWatermarkDesign:
    return ShardWatermarkDesign(fake, aggregate_writes=PER_BATCH, window_seconds=WINDOW_SECONDS)


def per_window(fake: FakeDynamoDB) -> ShardWatermarkDesign:
    """With three leaderboard shards: where an aggregate sits in the index changes nothing of its count."""
    return ShardWatermarkDesign(fake, aggregate_writes=PER_WINDOW, window_seconds=WINDOW_SECONDS, leaderboard_shards=3)


@pytest.mark.parametrize("make_design", [per_batch, per_window], ids=[PER_BATCH, PER_WINDOW])
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_histories_with_every_hazard_count_every_download_exactly_once(make_design: Any, chunk: int) -> None:
    # given random histories with every hazard the documentation allows
    for seed in range(chunk, HISTORIES, CHUNKS):
        # when each is delivered to the shipped design
        result = history(seed, make_design, ALL_HAZARDS)
        design = result.design_object  # type: ignore[attr-defined]
        # then every aggregate equals the recount, nothing was refused or found inconsistent
        assert (result.lost, result.over_counted) == (0, 0), f"seed {seed}: {result}"
        assert result.failures_injected > 0
        assert design.refused == [], f"seed {seed}"
        assert design.inconsistencies == [], f"seed {seed}"


HAZARDS = {
    "one ordered shard, no faults": ONE_ORDERED_SHARD,
    "function failures and lost responses": Hazards(
        split_for_heat=False, shard_splits=False, child_sequences_lower=False
    ),
    "split for heat": Hazards(
        shard_splits=False, child_sequences_lower=False, function_failures=False, late_writes=False
    ),
    "children with lower sequence numbers": Hazards(split_for_heat=False, function_failures=False, late_writes=False),
    "parallelization factor 2": Hazards(
        split_for_heat=False,
        shard_splits=False,
        child_sequences_lower=False,
        parallelization_factor=2,
        function_failures=False,
        late_writes=False,
    ),
}
UTC_ONLY = [
    Written(d.song_id, d.download_id, d.timestamp[:19] + "Z", d.created)
    for d in random_downloads(random.Random(7), 200)
]


def totals(make_design: Any, hazards: Hazards, seeds: range) -> tuple[int, int]:
    results = [history(seed, make_design, hazards, downloads=UTC_ONLY) for seed in seeds]
    return sum(r.lost for r in results), sum(r.over_counted for r in results)


@pytest.mark.parametrize("hazard", list(HAZARDS))
def test_which_hazards_break_which_design(hazard: str) -> None:
    # given one documented hazard at a time, and UTC timestamps so that the guide's month slicing is not at issue
    hazards, seeds = HAZARDS[hazard], range(12)
    # when the guide's handler, the previous single-watermark design and the shipped one face it
    guide = totals(GuideDesign, hazards, seeds)
    previous = totals(PreviousDesign, hazards, seeds)
    ours = [totals(per_batch, hazards, seeds), totals(per_window, hazards, seeds)]
    # then the guide over-counts whenever a batch is delivered twice, the previous design loses downloads
    # whenever one song's records are not one ordered sequence, and the shipped design is exact throughout
    expected = {
        "one ordered shard, no faults": ((0, 0), (0, 0)),
        "function failures and lost responses": ("over", (0, 0)),
        "split for heat": ((0, 0), "lost"),
        "children with lower sequence numbers": ((0, 0), "lost"),
        "parallelization factor 2": ((0, 0), "lost"),
    }[hazard]
    for observed, wanted in zip((guide, previous), expected, strict=True):
        lost, over_counted = observed
        if wanted == "over":
            assert (lost, over_counted > 0) == (0, True), observed
        elif wanted == "lost":
            assert (lost > 0, over_counted) == (True, 0), observed
        else:
            assert observed == wanted, observed
    if hazards.parallelization_factor == 1:
        assert ours == [(0, 0), (0, 0)]


def test_a_batch_given_up_on_is_never_over_counted_and_only_its_records_are_missing() -> None:
    # given a mapping with two retries, and failures frequent enough that some batches are given up on
    mapping = Mapping(batch_size=12, tumbling_window_seconds=WINDOW_SECONDS, maximum_retry_attempts=2)
    given_up = 0
    for seed in range(40):
        result = history(seed, per_batch, ALL_HAZARDS, mapping=mapping)
        # then nothing is ever counted twice, and what is missing is no more than what the mapping discarded
        discarded = sum(len(d.sequences) for d in result.discarded)
        given_up += discarded
        assert result.over_counted == 0, f"seed {seed}"
        assert result.lost <= discarded, f"seed {seed}: lost {result.lost}, discarded {discarded}"
    assert given_up > 0
