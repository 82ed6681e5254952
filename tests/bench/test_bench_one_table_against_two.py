"""One table against two in `make bench`: the separate-table stack runs beside ours at its batch sizes, and the
report sets their stream reads, writes, throughput and freshness side by side."""

from __future__ import annotations

from typing import Any

from leaderboard_dev.bench import report
from leaderboard_dev.bench.side_by_side import FULL, SMOKE


def test_the_full_run_measures_the_separate_table_at_batch_100_only_and_the_smoke_never() -> None:
    # given the full plan and the smoke's
    # when / then the separate-table stack runs beside ours at batch 100 in the full run, nowhere else
    assert "ours_separate_table" in {contender.name for contender in FULL.contenders_at(100)}
    assert "ours_separate_table" not in {contender.name for contender in FULL.contenders_at(1000)}
    assert all(contender.name != "ours_separate_table" for contender in SMOKE.contenders_at(100))


def figures(records_read: float, writes: float, freshness: float) -> dict[str, Any]:
    return {
        "stream_records_read_per_100": records_read,
        "writes_per_100": writes,
        "records_per_second": 500.0,
        "freshness_seconds": freshness,
    }


def test_the_report_sets_one_table_beside_two_at_each_batch_size_both_ran() -> None:
    # given ours in one table at batch 100 and 1,000, and in two tables at batch 100 only
    aggregators = {
        "ours_per_batch": {"100": figures(152.8, 52.6, 20.0), "1000": figures(121.3, 28.1, 30.0)},
        "ours_separate_table": {"100": figures(100.0, 52.6, 15.0)},
    }
    # when the report writes the comparison
    lines = report.one_table_against_two_lines({"aggregators": aggregators})
    # then one row per layout at batch 100, with each layout's own figures, and nothing at 1,000
    rows = [line for line in lines if line.startswith("| 1")]
    assert rows == [
        "| 100 | one table | 152.80 | 52.6 | 500.00 | 20.00 |",
        "| 100 | two tables | 100.00 | 52.6 | 500.00 | 15.00 |",
    ]


def test_without_a_separate_table_run_the_report_has_no_comparison() -> None:
    assert report.one_table_against_two_lines({"aggregators": {"ours_per_batch": {"100": figures(1, 1, 1)}}}) == []
