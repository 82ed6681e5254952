"""The benchmark's arithmetic without an emulator: the oracle, the bounds, the pressure on paper, the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from leaderboard_tools.bench import report
from leaderboard_tools.bench.pressure_cost import busiest_share, cost_per_million, index_pressure
from leaderboard_tools.bench.side_by_side import distinct_per_group
from leaderboard_tools.bench.workload import StreamContents, count_error, neighbour_months
from leaderboard_tools.sizing import PARTITION_WRITE_LIMIT, Workload, partition_load, song_id


@pytest.mark.parametrize(
    ("month", "expected"),
    [
        ("2024-01", ("2023-12", "2024-01", "2024-02")),
        ("2024-06", ("2024-05", "2024-06", "2024-07")),
        ("2024-12", ("2024-11", "2024-12", "2025-01")),
    ],
)
def test_neighbour_months_cross_year_ends(month: str, expected: tuple[str, str, str]) -> None:
    # when / then
    assert neighbour_months(month) == expected


def test_count_error_adds_over_counted_and_missing_across_every_aggregate() -> None:
    # given the truth and what a handler wrote: one aggregate high, one low, one in the wrong month
    truth = {("song1", "2024-06"): 10, ("song2", "2024-06"): 5, ("song3", "2024-06"): 1}
    observed = {("song1", "2024-06"): 12, ("song2", "2024-06"): 4, ("song3", "2024-07"): 1}

    # when
    error = count_error(observed, truth)

    # then
    assert error["over_counted"] == 2 + 1
    assert error["missing"] == 1 + 1
    assert error["absolute"] == 5
    assert error["relative"] == pytest.approx(5 / 16)
    assert error["wrong_aggregates"] == 4


def test_the_bound_counts_distinct_aggregates_per_batch_or_per_window() -> None:
    # given a stream of five downloads and two invocations of one window, the second overlapping the first's songs
    stream = StreamContents(
        download_keys={
            10: ("a", "2024-01"),
            11: ("a", "2024-01"),
            12: ("b", "2024-01"),
            13: ("a", "2024-01"),
            14: ("c", "2024-01"),
        },
        aggregate_writes={},
    )
    invocations: list[dict[str, Any]] = [
        {"first_sequence": "10", "last_sequence": "12", "window_start": "w1"},
        {"first_sequence": "13", "last_sequence": "14", "window_start": "w1"},
    ]

    # when / then: per batch {a, b} + {a, c}; per window {a, b, c}
    assert distinct_per_group(invocations, stream, by_window=False) == 4
    assert distinct_per_group(invocations, stream, by_window=True) == 3


def test_busiest_share_puts_every_write_in_one_partition_with_one_shard() -> None:
    # given measured writes per song
    writes = {song_id(rank): 100 // rank for rank in range(1, 51)}

    # when / then
    assert busiest_share(writes, 1) == 1.0
    assert 1 / 4 <= busiest_share(writes, 4) < 1.0


def test_index_pressure_from_writes_shaped_like_the_sizing_model_agrees_with_it() -> None:
    # given writes per song exactly as sizing.py predicts them for batches of 100 (an oracle of its own arithmetic)
    workload = Workload(downloads_per_second=100, songs=1000, batch_size=100)
    updates = workload.updates_per_second()
    shaped = {song_id(rank): round(1000 * rate) for rank, rate in enumerate(updates, start=1)}
    run = clean_run(shaped, downloads=100_000)

    # when
    rows = index_pressure(run)

    # then every supported shard count is there, and the measured-shaped figure is the prediction
    assert {row["leaderboard_shards"] for row in rows} == set(range(1, 65))
    for row in rows:
        expected = partition_load(
            Workload(downloads_per_second=row["downloads_per_second"], songs=1000, batch_size=100),
            row["leaderboard_shards"],
        ).busiest_partition_index_writes_per_second
        assert row["busiest_partition_index_writes_per_second"] == pytest.approx(expected, rel=0.01, abs=0.5)
        assert row["share_of_partition_limit"] == pytest.approx(
            row["busiest_partition_index_writes_per_second"] / PARTITION_WRITE_LIMIT, abs=0.001
        )


def test_cost_scales_the_measured_counts_to_a_million_downloads() -> None:
    # given a clean load of 10,000 downloads with 2,000 aggregate writes and 50 s of processing
    run = clean_run({"song001": 2000}, downloads=10_000)

    # when
    cost = cost_per_million(run, guide=False)

    # then
    assert cost["table_writes"] == 1_000_000 + 200_000
    assert cost["index_writes"] == 2 * 200_000
    assert cost["lambda_gb_seconds"] == pytest.approx(50 * 100 * 0.5)
    assert cost["dollars_total"] > 0


def test_the_report_writes_the_summary_schema_and_the_readme_section_before_build(tmp_path: Path) -> None:
    # given raw results of a run and a README with sections around where Benchmark goes
    readme = tmp_path / "README.md"
    readme.write_text("# Title\n\n## Aggregator contract\n\ntext\n\n## Build\n\nmake build\n")
    results = raw_results()

    # when the report is drawn twice (a rerun replaces its section)
    report.write_results(results, tmp_path / "out", None)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    section = report._readme_section(report.markdown(summary, {"plot": "bench/results/plot.png"}))
    report.replace_section(readme, section)
    report.replace_section(readme, section)

    # then
    figures = summary["aggregators"]["ours_per_batch"]["100"]
    assert figures.keys() >= set(report.SUMMARY_FIELDS)
    assert summary["reads"]["1000"]["read_ratio_index_vs_scan"] == 20.0
    assert summary["headline"][0]["guide_over_ours"] == 2.0
    text = readme.read_text()
    assert text.count("## Benchmark") == 1
    assert text.index("## Aggregator contract") < text.index("## Benchmark") < text.index("## Build")
    assert text.endswith("## Build\n\nmake build\n")
    for plot in ("writes_per_100.png", "read_time.png", "freshness.png"):
        assert (tmp_path / "out" / plot).stat().st_size > 0


def clean_run(writes_by_song: dict[str, int], downloads: int) -> dict[str, Any]:
    total = sum(writes_by_song.values())
    return {
        "aggregator": "ours_per_batch",
        "batch_size": 100,
        "clean": {
            "downloads": downloads,
            "aggregate_writes": total,
            "aggregate_writes_by_song": writes_by_song,
            "mean_batch": 100.0,
            "bound_per_100": round(100 * total / downloads, 2),
            "processing_seconds": 50.0,
            "invocations": downloads // 100,
        },
    }


def load_figures(writes_per_100: float, errors: int) -> dict[str, Any]:
    return {
        "downloads": 1000,
        "writes_per_100": writes_per_100,
        "bound_per_100": 50.0,
        "aggregate_writes": int(10 * writes_per_100),
        "aggregate_writes_by_song": {"song001": int(10 * writes_per_100)},
        "mean_batch": 100.0,
        "processing_seconds": 10.0,
        "invocations": 10,
        "records_per_second": 100.0,
        "freshness_seconds": 3.0,
        "ingest_rate": 400.0,
        "fault_rate": 0.25,
        "failed_invocations": 2,
        "settled": True,
        "count_error": {"absolute": errors, "relative": errors / 1000, "over_counted": errors, "missing": 0},
    }


def raw_results() -> dict[str, Any]:
    runs = [
        {
            "aggregator": name,
            "batch_size": 100,
            "clean": load_figures(writes, 0),
            "faults": load_figures(writes, errors),
        }
        for name, writes, errors in (("ours_per_batch", 50.0, 0), ("ours_per_window", 30.0, 0), ("guide", 100.0, 40))
    ]
    step = {
        "data_size": 1000,
        "load": 1000,
        "ingest_rate": 400.0,
        "freshness_seconds": 2.0,
        "index_query_ms": 5.0,
        "query_lambda_ms": 50.0,
        "scan_and_count_ms": 100.0,
        "read_ratio_index_vs_scan": 20.0,
    }
    rate = {"share_of_highest": 1.0, "target_rate": 400.0, "ingest_rate": 390.0, "load": 1000, "freshness_seconds": 2.5}
    return {
        "provenance": {
            "commit": "0" * 40,
            "command": "python -m leaderboard_tools.bench",
            "machine": "test",
            "emulator": "ministack",
            "date": "2026-11-30T00:00:00+00:00",
        },
        "plan": {"fault_rate": 0.25},
        "side_by_side": runs,
        "reads_freshness": {"highest_ingest_rate": 400.0, "ladder": [step], "rates": [rate]},
    }
