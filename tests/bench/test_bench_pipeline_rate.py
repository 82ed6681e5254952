"""The pipeline's sustained rate, apart from the load generator's: what `make bench` reports of the freshness loads."""

from __future__ import annotations

import pytest

from leaderboard_dev.bench import report


def test_the_pipeline_counts_a_load_in_its_writing_time_plus_its_freshness() -> None:
    # given 90,000 downloads written at 800 a second (112.5 s), and the index complete 487.5 s after the last write
    step = {"load": 90_000, "ingest_rate": 800.0, "freshness_seconds": 487.5}
    # when the pipeline's rate is taken from them
    counted = report.pipeline_rate(step)
    # then it is the load over the 600 s from the first write to the index holding it all
    assert counted == pytest.approx(150.0)


def test_a_load_without_a_rate_or_a_freshness_has_no_pipeline_rate() -> None:
    assert report.pipeline_rate({"load": 10, "ingest_rate": 0, "freshness_seconds": 1.0}) is None
    assert report.pipeline_rate({"load": 10, "ingest_rate": 5.0, "freshness_seconds": None}) is None


@pytest.mark.parametrize(
    ("freshness_seconds", "said"),
    [(487.5, "its own limit on this emulator"), (1.0, "kept pace with the load generator")],
)
def test_the_pipelines_rate_is_called_its_own_only_where_the_load_generator_outran_it(
    freshness_seconds: float, said: str
) -> None:
    # given the largest load's writing rate and freshness
    step = {"load": 90_000, "data_size": 90_000, "ingest_rate": 800.0, "freshness_seconds": freshness_seconds}
    freshness = {"by_load": [{**step, "pipeline_rate": report.pipeline_rate(step)}]}
    # when the report says what the pipeline sustained
    sentence = report.pipeline_sentence(freshness)
    # then a backlog that grew names the pipeline's limit; a load it kept up with names none
    assert said in sentence


def test_the_latency_the_pipeline_has_when_it_keeps_up_is_not_taken_for_a_backlog() -> None:
    # given paced loads whose least freshness is 30 s, and a large load written in 100 s, fresh 30 s after its end
    rates = [{"freshness_seconds": 45.0}, {"freshness_seconds": 30.0}]
    step = {"load": 80_000, "ingest_rate": 800.0, "freshness_seconds": 30.0}
    # when the pipeline's rate is taken less that latency
    counted = report.pipeline_rate(step, report.latency_floor(rates))
    # then it kept pace with the writes: 800 a second, not 80,000 over 130 s
    assert report.latency_floor(rates) == 30.0
    assert counted == pytest.approx(800.0)
    sentence = report.pipeline_sentence({"by_load": [{**step, "pipeline_rate": counted}], "latency_floor_seconds": 30})
    assert "kept pace with the load generator" in sentence
