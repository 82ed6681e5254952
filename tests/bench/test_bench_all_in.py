"""The all-in part on a small run: every request counted at the SDK, each cost where the design pays it."""

from __future__ import annotations

from typing import Any

import pytest

from leaderboard_dev.bench import all_in
from leaderboard_dev.bench.boards import realtime_downloads

pytestmark = pytest.mark.slow  # the all-in pricing streams through every design: CI runs it, make check does not

MEASURED, WINDOW = 200, 1000


@pytest.fixture(scope="module")
def cases() -> dict[str, dict[str, Any]]:
    return {case["name"]: case for case in all_in.run_all_in(MEASURED, WINDOW)["cases"]}


def distinct_songs_per_batch(batch_size: int, batches: int) -> int:
    """The oracle: the measured batches' downloads, drawn again from their seeds; all of them in one month."""
    return sum(
        len({item["songID"]["S"] for item in realtime_downloads(batch_size, all_in.START, 1.0, seed=1000 + number)})
        for number in range(batches)
    )


def test_ours_pays_every_component_of_its_design(cases: dict[str, dict[str, Any]]) -> None:
    # given ours, per batch, at batch size 100
    dollars = cases["ours_per_batch_100"]["dollars_per_million"]
    # when / then its aggregates, index, progress table, own stream reads and Lambda all cost something
    paid = ("aggregate_writes", "index_writes", "progress_reads", "progress_writes", "stream_reads")
    for component in (*paid, "lambda_requests", "lambda_duration"):
        assert dollars[component] > 0, component
    assert cases["ours_per_batch_100"]["dollars_per_million_ingest"] > 0


def test_the_guide_pays_no_progress_table_and_no_stream_reads(cases: dict[str, dict[str, Any]]) -> None:
    # given the guide's handler
    guide = cases["guide_100"]
    # when / then it writes aggregates and its index, and pays Lambda, but keeps no progress and reads no stream
    for component in ("aggregate_writes", "index_writes", "lambda_requests", "lambda_duration"):
        assert guide["dollars_per_million"][component] > 0, component
    for component in ("progress_reads", "progress_writes", "stream_reads"):
        assert guide["dollars_per_million"][component] == 0, component


@pytest.mark.parametrize("name", ["ours_per_batch_100", "ours_separate_aggregates_table_100"])
def test_ours_writes_each_distinct_aggregate_of_a_batch_once(cases: dict[str, dict[str, Any]], name: str) -> None:
    # given the batches of 100 downloads the run measured
    batches = MEASURED // 100
    expected = 100 * distinct_songs_per_batch(100, batches) / MEASURED
    # when / then its aggregate writes per 100 downloads are the distinct aggregates per batch
    assert cases[name]["per_100_downloads"]["aggregate_writes"] == pytest.approx(expected, abs=1e-3)


def test_the_guide_pays_two_index_writes_per_changed_count(cases: dict[str, dict[str, Any]]) -> None:
    # given the guide, whose index is keyed on (Month, DownloadCount)
    per_100 = cases["guide_100"]["per_100_downloads"]
    # when / then each write that moves a count already indexed deletes its old entry and puts the new one
    assert per_100["index_writes_per_changed_count"] == {all_in.GUIDE_INDEX.name: 2.0}
    assert per_100["aggregate_writes"] == 100.0


def test_a_separate_aggregates_table_reads_each_download_once(cases: dict[str, dict[str, Any]]) -> None:
    # given one table (aggregates on the downloads' stream) and two (the stream holds downloads only)
    separate = cases["ours_separate_aggregates_table_100"]["per_100_downloads"]
    one_table = cases["ours_per_batch_100"]["per_100_downloads"]
    # when / then the aggregator reads 100 records per 100 downloads from the second, more from the first
    assert separate["stream_records_read"] == 100.0
    assert one_table["stream_records_read"] > 100.0


def test_retractions_write_within_their_bound(cases: dict[str, dict[str, Any]]) -> None:
    # given downloads of which 10 % are later moved a month on and 5 % deleted
    per_100 = cases["ours_retractions_100"]["per_100_downloads"]
    # when / then the aggregate writes stay within the bound, and the edits and deletions reach the table
    assert 0 < per_100["aggregate_writes"] <= per_100["aggregate_write_bound"]
    assert per_100["ingest_requests"]["dynamodb UpdateItem cpu-downloads"] == pytest.approx(10.0)
    assert per_100["ingest_requests"]["dynamodb DeleteItem cpu-downloads"] == pytest.approx(5.0)


def test_per_window_writes_each_aggregate_of_its_window_once(cases: dict[str, dict[str, Any]]) -> None:
    # given per_window at its default batch size, over one window of the workload
    per_100 = cases["ours_per_window_1000"]["per_100_downloads"]
    # when / then it writes the window's distinct aggregates, the bound drawn from the generated downloads
    assert per_100["aggregate_writes"] == pytest.approx(per_100["aggregate_write_bound"], abs=1e-3)
