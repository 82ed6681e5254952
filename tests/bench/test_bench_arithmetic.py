"""The benchmark's arithmetic without an emulator: the oracle, the bounds, the pressure on paper, the report."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from leaderboard_dev.bench import boards, report
from leaderboard_dev.bench import handler_cpu as handler_cpu_module
from leaderboard_dev.bench.pressure_cost import (
    busiest_share,
    cost_per_million,
    index_pressure,
    lambda_seconds_per_million,
)
from leaderboard_dev.bench.side_by_side import (
    Contender,
    distinct_per_group,
    distinct_per_read,
    failed_windows_bound,
    write_figures,
)
from leaderboard_dev.bench.workload import StreamContents, count_error, neighbour_months
from leaderboard_tools.size.sizing import PARTITION_WRITE_LIMIT, Workload, partition_load, song_id


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


def test_a_window_start_its_final_invocation_closed_twice_bounds_two_windows() -> None:
    # given a window whose final invocation closed it, then its records delivered again after a failure, in the same
    # window interval (the same window start), and closed again
    stream = StreamContents(
        download_keys={10: ("a", "2024-01"), 11: ("b", "2024-01"), 12: ("a", "2024-01")},
        aggregate_writes={},
    )
    invocations: list[dict[str, Any]] = [
        {"first_sequence": "10", "last_sequence": "11", "window_start": "w1", "final": True},
        {"first_sequence": "10", "last_sequence": "12", "window_start": "w1", "final": True},
    ]
    # when / then: each closing writes its window's distinct aggregates: {a, b} + {a, b}
    assert distinct_per_group(invocations, stream, by_window=True) == 4
    # and a window start closed once, over two invocations, is one window: {a, b}
    invocations[0]["final"] = False
    assert distinct_per_group(invocations, stream, by_window=True) == 2


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


def test_the_report_writes_the_summary_schema_and_the_results_section_before_the_contenders(tmp_path: Path) -> None:
    # given raw results of a run and a benchmark page with sections around where Results goes
    document = tmp_path / "docs" / "benchmark.md"
    document.parent.mkdir()
    document.write_text("# Title\n\nintro\n\n## Contenders and workload\n\ntable\n")
    results = raw_results()

    # when the report is drawn twice, into the page (a rerun replaces its section)
    report.write_results(results, tmp_path / "out", document)
    report.write_results(results, tmp_path / "out", document)

    # then
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    figures = summary["aggregators"]["ours_per_batch"]["100"]
    assert figures.keys() >= set(report.SUMMARY_FIELDS)
    assert summary["reads"]["1000"]["read_ratio_index_vs_scan"] == 20.0
    assert summary["headline"][0]["guide_over_ours"] == 2.0
    text = document.read_text()
    assert text.count("## Results") == 1
    assert text.index("intro") < text.index("## Results") < text.index("## Contenders and workload")
    assert text.endswith("## Contenders and workload\n\ntable\n")
    assert "![writes per 100 downloads against batch size](../out/writes_per_100.png)" in text  # from the page's folder
    for plot in ("writes_per_100.png", "read_time.png", "freshness.png"):
        assert (tmp_path / "out" / plot).stat().st_size > 0


def test_the_raw_figures_and_what_a_reader_looks_at_go_to_their_own_folders(tmp_path: Path) -> None:
    # given raw results and a benchmark page beside a figures folder, as the full run writes them
    document = tmp_path / "docs" / "benchmark.md"
    document.parent.mkdir()
    document.write_text("# Title\n\n## Contenders and workload\n")
    raw, figures = tmp_path / "development" / "benchmark-results", tmp_path / "docs" / "benchmark-results"

    # when the report is drawn
    report.write_results(raw_results(), raw, document, figures)

    # then the JSON stays with the development files, the summary and plots sit beside the page that links them
    assert sorted(path.name for path in raw.iterdir()) == ["results.json", "summary.json"]
    assert sorted(path.name for path in figures.iterdir()) == [
        "freshness.png",
        "read_time.png",
        "summary.md",
        "writes_per_100.png",
    ]
    assert "![freshness against load](benchmark-results/freshness.png)" in document.read_text()


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
            "command": "python -m leaderboard_dev.bench",
            "machine": "test",
            "emulator": "ministack",
            "date": "2026-11-30T00:00:00+00:00",
        },
        "plan": {"fault_rate": 0.25},
        "side_by_side": runs,
        "reads_freshness": {"highest_ingest_rate": 400.0, "ladder": [step], "rates": [rate]},
    }


# ---------------------------------------------------------------- boards, the handler's CPU, the cost


def test_lambda_seconds_add_the_cpu_and_every_wait_in_line() -> None:
    # given 0.5 ms of CPU per download, 10,000 invocations of 4 calls in line and 55 writes 8 at a time, 10 ms a call
    seconds = lambda_seconds_per_million(
        cpu_ms_per_download=0.5,
        invocations_per_million=10_000,
        sequential_calls_per_invocation=4,
        parallel_writes_per_invocation=55,
        latency_ms=10,
        write_concurrency=8,
    )

    # then 500 s of CPU and 10,000 x (4 + ceil(55 / 8) = 7) x 10 ms = 1,100 s of waiting
    assert seconds == pytest.approx(500 + 1100)


def test_the_guides_writes_wait_one_after_another() -> None:
    # given one ADD per download, each waited for: 100 calls in line per invocation of 100
    seconds = lambda_seconds_per_million(0.8, 10_000, 100, 0, 10, 8)

    # then a million calls of 10 ms and the CPU
    assert seconds == pytest.approx(800 + 10_000)


def handler_cpu(aggregator: str, batch_size: int, cpu: float, sequential: float) -> dict[str, Any]:
    return {
        "latency": {"milliseconds_per_call": 10.0},
        "write_concurrency": 8,
        "cases": [
            {
                "aggregator": aggregator,
                "configuration": "month",
                "batch_size": batch_size,
                "cpu_ms_per_download": cpu,
                "sequential_calls_per_invocation": sequential,
            }
        ],
    }


def test_the_cost_derives_lambda_from_the_cpu_and_the_latency_when_measured() -> None:
    # given a clean load of 10,000 downloads in 100 invocations with 2,000 aggregate writes (20 per invocation),
    # and 0.5 ms of CPU per download with 4 calls in line per invocation
    run = clean_run({"song001": 2000}, downloads=10_000)

    # when
    cost = cost_per_million(run, guide=False, handler_cpu=handler_cpu("ours_per_batch", 100, 0.5, 4))

    # then per million: 500 s of CPU, 10,000 invocations x (4 + ceil(20 / 8) = 3) x 10 ms = 700 s, at 0.5 GB
    assert cost["lambda_duration"] == "derived"
    assert cost["lambda_gb_seconds"] == pytest.approx((500 + 700) * 0.5)
    assert cost["emulator_lambda_gb_seconds"] == pytest.approx(50 * 100 * 0.5)
    assert cost["dollars"]["lambda_duration"] == pytest.approx(600 * 0.0000166667, abs=1e-4)


def test_the_guides_cost_waits_for_each_of_its_writes() -> None:
    # given the guide's handler: 10,000 downloads, 10,000 ADDs in 100 invocations
    run = {**clean_run({"song001": 10_000}, downloads=10_000), "aggregator": "guide"}

    # when
    cost = cost_per_million(run, guide=True, handler_cpu=handler_cpu("guide", 100, 0.8, 100))

    # then 800 s of CPU and a million ADDs of 10 ms, in line
    assert cost["lambda_gb_seconds"] == pytest.approx((800 + 10_000) * 0.5)


def test_without_the_cpu_measurement_the_emulators_durations_stand_in() -> None:
    cost = cost_per_million(clean_run({"song001": 2000}, downloads=10_000), guide=False, handler_cpu=None)
    assert cost["lambda_duration"] == "emulator"
    assert cost["lambda_gb_seconds"] == cost["emulator_lambda_gb_seconds"] == pytest.approx(2500)


@pytest.mark.parametrize(("name", "per_download"), [("month", 1), ("day_month_all", 3), ("day_month_all_category", 6)])
def test_each_board_kept_multiplies_the_predicted_writes(name: str, per_download: int) -> None:
    # given the month's prediction at batch 100
    month = boards.predicted_per_100(boards.BY_NAME["month"], 100.0)
    workload = Workload(downloads_per_second=100, songs=1000, batch_size=100)

    # then it is sizing's distinct songs per batch, per 100 downloads, and each configuration multiplies it
    assert month == pytest.approx(sum(workload.updates_per_second()))
    assert boards.BY_NAME[name].boards.per_download == per_download
    assert boards.predicted_per_100(boards.BY_NAME[name], 100.0) == pytest.approx(per_download * month)


def test_the_boards_oracle_counts_each_download_in_every_board_it_belongs_to() -> None:
    # given three downloads, two of song001 (rock) on either side of a midnight, one of song002 (pop)
    items = [
        {"songID": {"S": "song001"}, "Timestamp": {"S": "2024-03-14T23:59:59Z"}, "Genre": {"S": "rock"}},
        {"songID": {"S": "song001"}, "Timestamp": {"S": "2024-03-15T00:00:00Z"}, "Genre": {"S": "rock"}},
        {"songID": {"S": "song002"}, "Timestamp": {"S": "2024-03-15T10:00:00Z"}, "Genre": {"S": "r&b/soul"}},
    ]

    # when the oracle counts them for days, months and all time, with categories
    truth = boards.board_truth(items, boards.BY_NAME["day_month_all_category"])

    # then each download is in three overall boards and three category boards, the category percent-encoded
    assert sum(truth.values()) == 3 * 6
    assert truth[("song001", "2024-03-14")] == truth[("song001", "2024-03-15")] == 1
    assert truth[("song001", "2024-03")] == truth[("song001", "all@rock")] == 2
    assert truth[("song002", "2024-03-15@r%26b%2Fsoul")] == 1


def test_realtime_downloads_rise_in_time_and_keep_each_songs_genre() -> None:
    start = datetime(2024, 3, 14, 12, tzinfo=UTC)
    items = boards.realtime_downloads(500, start, boards.LOAD_SECONDS, seed=1)
    stamps = [item["Timestamp"]["S"] for item in items]
    assert stamps == sorted(stamps)
    assert {stamp[:10] for stamp in stamps} == {"2024-03-14", "2024-03-15"}
    assert len({item["SK"]["S"] for item in items}) == 500
    assert all(item["Genre"]["S"] == boards.genre_of(item["songID"]["S"]) for item in items)
    assert boards.genre_of("song001") == boards.genre_of("song009") == "rock"


def test_board_write_figures_count_every_write_and_bound_the_succeeded_batches() -> None:
    invocations = [
        {"records": 100, "succeeded": True, "aggregate_writes": 60, "distinct_aggregates": 60, "duration_ms": 500},
        {"records": 100, "succeeded": True, "aggregate_writes": 62, "distinct_aggregates": 58, "duration_ms": 700},
        {"records": 0, "succeeded": True, "aggregate_writes": 0, "distinct_aggregates": 0, "duration_ms": 10},
    ]
    figures = boards.write_figures(invocations, downloads=200)
    assert (figures["writes_per_100"], figures["bound_per_100"]) == (61.0, 59.0)
    assert (figures["batches"], figures["mean_batch"], figures["invocations"]) == (2, 100.0, 3)
    assert figures["processing_seconds"] == pytest.approx(1.21)


def test_the_cpu_summary_separates_the_parallel_writes_from_the_calls_in_line() -> None:
    # given two measured invocations of 100 records: 40 ms and 60 ms of CPU, four calls in line and 50 writes each
    calls = Counter({"GetItem:progress": 1, "GetShardIterator": 1, "GetRecords": 1, "UpdateItem:progress": 1})
    calls["UpdateItem:aggregates"] = 50
    samples = [{"records": 100, "seconds": 0.040, "calls": calls}, {"records": 100, "seconds": 0.060, "calls": calls}]

    # when
    summary = handler_cpu_module.summarise(handler_cpu_module.CpuCase("ours_per_batch", "month", 100, 2), samples)

    # then
    assert summary["cpu_ms_per_download"] == pytest.approx(0.5)
    assert summary["cpu_ms_per_download_spread"] == [0.4, 0.5, 0.6]
    assert summary["aggregate_writes_per_invocation"] == 50
    assert summary["sequential_calls_per_invocation"] == 4


def test_the_guides_calls_are_all_in_line() -> None:
    samples = [{"records": 10, "seconds": 0.01, "calls": Counter({"UpdateItem:aggregates": 10})}]
    summary = handler_cpu_module.summarise(handler_cpu_module.CpuCase("guide", "month", 10, 1), samples)
    assert (summary["sequential_calls_per_invocation"], summary["aggregate_writes_per_invocation"]) == (10, 0)


def test_the_cpu_measurement_runs_the_shipped_handler_on_moto() -> None:
    # given a small case: two batches of 10 downloads after a warm-up
    case = handler_cpu_module.CpuCase("ours_per_batch", "day_month_all_category", 10, 2)

    # when it is measured
    measured = handler_cpu_module.measure_case(case)

    # then every download was delivered once, the shard read and checkpointed, each board written
    assert measured["downloads"] == 20
    assert measured["calls_per_invocation"]["GetRecords"] >= 1
    assert measured["calls_per_invocation"]["UpdateItem:progress"] >= 1
    assert 6 <= measured["aggregate_writes_per_invocation"] <= 6 * 10
    assert measured["cpu_ms_per_download"] > 0


def test_the_report_shows_the_boards_and_the_derived_lambda_share(tmp_path: Path) -> None:
    # given raw results with the boards part and the CPU measurement
    results = raw_results()
    results["boards"] = [
        {
            "configuration": name,
            "label": boards.BY_NAME[name].label,
            "batch_size": 100,
            "downloads": 1000,
            "boards_per_download": boards.BY_NAME[name].boards.per_download,
            "writes_per_100": 50.0 * boards.BY_NAME[name].boards.per_download,
            "bound_per_100": 50.0 * boards.BY_NAME[name].boards.per_download,
            "predicted_per_100": 49.0 * boards.BY_NAME[name].boards.per_download,
            "aggregate_writes": 500 * boards.BY_NAME[name].boards.per_download,
            "invocations": 10,
            "processing_seconds": 10.0,
            "mean_batch": 100.0,
            "exact": True,
            "wrong_aggregates": 0,
        }
        for name in boards.BY_NAME
    ]
    results["handler_cpu"] = handler_cpu("ours_per_batch", 100, 0.5, 4) | {"method": "test"}
    results["handler_cpu"]["latency"] = handler_cpu_module.LATENCY
    for case in results["handler_cpu"]["cases"]:
        case.update(downloads=2000, cpu_ms_per_download_spread=[0.4, 0.5, 0.6], aggregate_writes_per_invocation=55)

    # when the report is drawn
    summary = report.write_results(results, tmp_path, None)
    text = (tmp_path / "summary.md").read_text()

    # then the boards table holds each configuration against the month's, and the cost says how Lambda is derived
    assert [row["over_month"] for row in summary["boards"]] == [1.0, 3.0, 6.0]
    assert '`["day", "month", "all"], category (8 genres)`' in text
    assert "Lambda duration derived" in text
    assert "single-digit milliseconds" in text
    rows = summary["cost_per_million_downloads"]["rows"]
    assert {row["lambda_duration"] for row in rows if row["aggregator"] == "ours_per_batch"} >= {"derived"}
    assert {row["configuration"] for row in rows} == {"month", "day_month_all", "day_month_all_category"}


def test_per_windows_failed_final_invocations_allow_the_distinct_aggregates_of_the_window_they_closed() -> None:
    # given a window whose final invocation failed and was retried, and another window that did not fail
    stream = StreamContents(
        download_keys={10: ("a", "2024-01"), 11: ("b", "2024-01"), 12: ("a", "2024-01"), 13: ("c", "2024-01")},
        aggregate_writes={},
    )
    invocations: list[dict[str, Any]] = [
        {"first_sequence": "10", "last_sequence": "10", "window_start": "w1", "final": False, "succeeded": True},
        {"first_sequence": "11", "last_sequence": "12", "window_start": "w1", "final": True, "succeeded": False},
        {"first_sequence": "11", "last_sequence": "12", "window_start": "w1", "final": True, "succeeded": True},
        {"first_sequence": "13", "last_sequence": "13", "window_start": "w2", "final": True, "succeeded": True},
    ]
    # when / then: the failed final invocation may have written its whole window once, {a, b}; w2 is not allowed
    assert failed_windows_bound(invocations, stream) == 2


def test_the_per_read_bound_counts_each_aggregate_once_per_logged_read_from_the_stream() -> None:
    # given a final invocation that read its window in two steps, {a, b} then {a, c}, and one that read nothing
    stream = StreamContents(
        download_keys={10: ("a", "2024-01"), 11: ("b", "2024-01"), 12: ("a", "2024-01"), 13: ("c", "2024-01")},
        aggregate_writes={},
    )
    invocations: list[dict[str, Any]] = [
        {"window_start": "w1", "final": True, "succeeded": True, "read_ranges": [["10", "11"], ["12", "13"]]},
        {"window_start": "w2", "final": True, "succeeded": True, "read_ranges": []},
    ]
    # when / then: each read writes its own distinct aggregates, a twice: four, where the window alone holds three
    assert distinct_per_read(invocations, stream) == 4
    assert (
        distinct_per_group([{**invocations[0], "first_sequence": "10", "last_sequence": "13"}], stream, by_window=True)
        == 3
    )


def test_per_windows_bounds_close_a_window_at_each_final_invocation_that_carried_no_records() -> None:
    # given two windows of one window start (the smoke's MiniStack run at 12:17:20Z): {a, b} delivered and closed
    # by a final invocation carrying no records, then {a, c} delivered and closed the same way, each read in one step
    stream = StreamContents(
        download_keys={10: ("a", "2024-01"), 11: ("b", "2024-01"), 12: ("a", "2024-01"), 13: ("c", "2024-01")},
        aggregate_writes={},
    )

    def invocation(first: str | None, last: str | None, final: bool, reads: list[list[str]]) -> dict[str, Any]:
        records = 0 if first is None or last is None else int(last) - int(first) + 1
        writes = 2 if final else 0
        return {
            "records": records,
            "succeeded": True,
            "aggregate_writes": writes,
            "distinct_aggregates": writes,
            "records_read": 2 if final else 0,
            "first_sequence": first,
            "last_sequence": last,
            "window_start": "w1",
            "final": final,
            "read_ranges": reads,
        }

    invocations = [
        invocation("10", "11", final=False, reads=[]),
        invocation(None, None, final=True, reads=[["10", "11"]]),
        invocation("12", "13", final=False, reads=[]),
        invocation(None, None, final=True, reads=[["12", "13"]]),
    ]
    # when the figures are taken
    figures = write_figures(invocations, Contender("ours_per_window", "per_window"), stream, downloads=4)
    # then each window is bounded on its own, {a, b} + {a, c}, as each read wrote it: not {a, b, c} merged
    assert figures["bound_from_stream_per_window"] == 4
    assert figures["bound_from_stream_per_read"] == 4
    assert figures["bound"] == figures["aggregate_writes"] == 4
