"""`make bench-smoke` in the suite, so that the benchmark cannot rot: it runs, and what it measures holds.

The smoke deploys ours (per_batch and per_window) and the guide's handler side by side with the
same faulty share of invocations and the same 2,000 Zipf downloads, and one stack of ours for
reads and freshness. The assertions are on both sides, against counts the test takes itself
from the generator (not from the bench's own oracle).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from leaderboard_dev.bench.side_by_side import FAULT_MONTH, FAULT_SEED, SMOKE
from leaderboard_dev.loadgen import utc_month, zipf_downloads
from leaderboard_dev.settings import REPOSITORY, Endpoint

SMOKE_RESULTS = REPOSITORY / "build" / "bench-smoke"
PER_AGGREGATOR_FIELDS = {"writes_per_100", "bound_per_100", "count_error", "records_per_second", "freshness_seconds"}
PROVENANCE_FIELDS = {"commit", "command", "machine", "emulator", "date"}
SMOKE_TIMEOUT_SECONDS = 1500
"""About 6 minutes on two shared cores, most of it Terraform applying and destroying four stacks at once; under CI's
load the faulted loads' settle waits alone may take 15 minutes (Plan.settle_timeout)."""


@pytest.fixture(scope="module")
def smoke_run(endpoint: Endpoint, emulator_kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One smoke run of the benchmark's command line; its summary and its raw results."""
    if emulator_kind != "ministack":
        pytest.skip(
            "the benchmark's figures are MiniStack's (docs/benchmark-results/); the rest of the suite covers LocalStack"
        )
    environment = {**os.environ, "AWS_ENDPOINT_URL": endpoint.url}
    # A session of its own: on a timeout the bench's worker processes and their Terraform runs stop with it.
    bench = subprocess.Popen(
        [sys.executable, "-m", "leaderboard_dev.bench", "--smoke"],
        cwd=REPOSITORY,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = bench.communicate(timeout=SMOKE_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(bench.pid, signal.SIGTERM)
        output, _ = bench.communicate()
        pytest.fail(f"the smoke bench took more than {SMOKE_TIMEOUT_SECONDS} s:\n{output[-3000:]}")
    assert bench.returncode == 0, output[-3000:]
    summary = json.loads((SMOKE_RESULTS / "summary.json").read_text())
    results = json.loads((SMOKE_RESULTS / "results.json").read_text())
    return summary, results


def runs_of(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {run["aggregator"]: run["faults"] for run in results["side_by_side"]}


def invocations_of(run: dict[str, Any]) -> str:
    """The run's logged invocations, one line each: what a failed bound is read from (build/bench-smoke/ keeps all)."""
    return "\n".join(json.dumps(invocation, sort_keys=True) for invocation in run.get("invocations_logged") or [])


def test_the_summary_has_every_figure_for_every_aggregator_and_data_size(
    smoke_run: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    # given the smoke run
    summary, _ = smoke_run

    # then each aggregator has the five figures at each batch size of the plan, with provenance and plots beside
    assert set(summary["aggregators"]) == {"ours_per_batch", "ours_per_window", "guide"}
    for by_batch in summary["aggregators"].values():
        assert set(by_batch) == {str(size) for size in SMOKE.batch_sizes}
        for figures in by_batch.values():
            assert figures.keys() >= PER_AGGREGATOR_FIELDS
    assert set(summary["reads"]) == {str(size) for size in SMOKE.ladder}
    assert all(read["read_ratio_index_vs_scan"] > 0 for read in summary["reads"].values())
    assert summary["provenance"].keys() >= PROVENANCE_FIELDS
    assert summary["provenance"]["command"].endswith("--smoke")
    for plot in ("writes_per_100.png", "read_time.png", "freshness.png"):
        assert (SMOKE_RESULTS / plot).stat().st_size > 0


def test_ours_counts_exactly_under_faults_and_the_guide_over_counts(
    smoke_run: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    # given the downloads the smoke wrote, counted here from the generator
    _, results = smoke_run
    downloads = zipf_downloads(SMOKE.fault_downloads, songs=1000, months=(FAULT_MONTH,), seed=FAULT_SEED, exponent=1.1)
    expected_total = sum(1 for download in downloads if utc_month(download.timestamp) == FAULT_MONTH)
    runs = runs_of(results)

    # then every contender saw failed invocations, at the same fault rate
    for run in runs.values():
        assert run["fault_rate"] == SMOKE.fault_rate
        assert run["failed_invocations"] > 0
        assert run["settled"]
        assert run["count_error"]["downloads"] == expected_total

    # and ours counted every download exactly once, in both modes
    for name in ("ours_per_batch", "ours_per_window"):
        assert runs[name]["count_error"]["counted"] == expected_total
        assert runs[name]["count_error"]["absolute"] == 0

    # and the guide's handler counted the retried halves twice
    guide = runs["guide"]["count_error"]
    assert guide["over_counted"] > 0
    assert guide["counted"] > expected_total
    assert guide["relative"] > 0


def test_ours_writes_at_the_bound_or_above_it_only_by_retries(smoke_run: tuple[dict[str, Any], dict[str, Any]]) -> None:
    # given the side-by-side runs
    _, results = smoke_run
    runs = runs_of(results)

    # then ours per batch wrote once per distinct aggregate of each batch, and above that only by retried work; the
    # distinct aggregates it logged are those the stream holds in the ranges it read
    per_batch = runs["ours_per_batch"]
    assert per_batch["bound"] > 0
    assert per_batch["bound"] == per_batch["bound_from_stream_per_read"]
    allowance = per_batch["retry_writes_allowance"]
    assert per_batch["bound"] <= per_batch["aggregate_writes"] <= per_batch["bound"] + allowance, invocations_of(
        per_batch
    )

    # and ours per window wrote no less than the distinct aggregates of its windows, and no more than those of each
    # read its invocations logged (a final invocation reads its window in steps when one read would outlast its
    # budget), taken from the stream, and what its failed invocations wrote
    per_window = runs["ours_per_window"]
    assert per_window["bound"] > 0
    allowance = per_window["retry_writes_allowance"]
    per_read = per_window["bound_from_stream_per_read"]
    assert per_window["bound"] <= per_window["aggregate_writes"] <= per_read + allowance, invocations_of(per_window)

    # and the guide wrote once per record delivered, retried records included: more than ours
    guide = runs["guide"]
    assert guide["aggregate_writes"] >= guide["downloads"]
    assert guide["writes_per_100"] > runs["ours_per_batch"]["writes_per_100"]


def test_the_all_in_part_prices_every_component_ours_at_its_bound_and_the_guide_at_two_index_writes(
    smoke_run: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    # given the smoke's all-in part: every request counted at the SDK and priced
    _, results = smoke_run
    cases = {case["name"]: case for case in results["all_in"]["cases"]}
    # then ours pays each component of its design, and writes each distinct aggregate of a batch once
    ours = cases["ours_per_batch_100"]
    for component in ("aggregate_writes", "index_writes", "progress_reads", "progress_writes", "stream_reads"):
        assert ours["dollars_per_million"][component] > 0, component
    assert ours["per_100_downloads"]["aggregate_writes"] == pytest.approx(
        ours["per_100_downloads"]["aggregate_write_bound"], abs=1e-3
    )
    # and the guide, its index on (Month, DownloadCount), pays two index writes for every count it moves
    guide = cases["guide_100"]["per_100_downloads"]
    assert set(guide["index_writes_per_changed_count"].values()) == {2.0}
    assert cases["ours_separate_aggregates_table_100"]["per_100_downloads"]["stream_records_read"] == 100.0
