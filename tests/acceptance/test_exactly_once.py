"""Exact counts under injected faults on the emulator, and the guide's handler under the same faults as a baseline."""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import build
import pytest

from leaderboard_tools.aws import Clients
from leaderboard_tools.leaderboard import invoke_function, poll_until
from leaderboard_tools.loadgen import write_items, zipf_downloads
from leaderboard_tools.settings import REPOSITORY, Endpoint
from tests.acceptance.conftest import log_lines, scan_all, stack
from tests.streams import download_record

DOWNLOADS = 10_000
FAULT_RATE = 0.25
RESULTS = REPOSITORY / "build" / "acceptance"


def aggregates(aws: Clients, table: str) -> dict[tuple[str, str], int]:
    items = scan_all(
        aws, TableName=table, FilterExpression="attribute_exists(#m)", ExpressionAttributeNames={"#m": "Month"}
    )
    return {(item["songID"]["S"], item["SK"]["S"]): int(item["DownloadCount"]["N"]) for item in items}


def recount_from_downloads(aws: Clients, table: str) -> Counter[tuple[str, str]]:
    """The truth, recomputed from the download records in the table rather than from what the test meant to write."""
    items = scan_all(
        aws, TableName=table, FilterExpression="attribute_not_exists(#m)", ExpressionAttributeNames={"#m": "Month"}
    )
    return Counter((item["songID"]["S"], item["Timestamp"]["S"][:7]) for item in items)


def settle(aws: Clients, table: str, timeout: float, quiet_seconds: float = 15) -> dict[tuple[str, str], int]:
    """Until the aggregates stop changing for quiet_seconds: the stream has drained, faults and retries included."""
    state: dict[str, Any] = {"last": None, "since": time.monotonic()}

    def stable() -> dict[tuple[str, str], int] | None:
        current = aggregates(aws, table)
        if current != state["last"]:
            state["last"], state["since"] = current, time.monotonic()
            return None
        return current if time.monotonic() - state["since"] >= quiet_seconds else None

    return poll_until(stable, timeout, interval=3, describe="aggregates stable")


def run_scenario(endpoint: Endpoint, aws: Clients, purpose: str, **variables: Any) -> dict[str, Any]:
    """Deploy, write the same 10,000 downloads, wait for the stream to drain, compare with the recount."""
    with stack(endpoint, purpose, batch_size=200, test_fault_injection_rate=FAULT_RATE, **variables) as (_, outputs):
        table = outputs["table_name"]
        write_items(aws.dynamodb, table, [d.as_item() for d in zipf_downloads(DOWNLOADS, songs=200, seed=7)])
        observed = settle(aws, table, timeout=900)
        truth = recount_from_downloads(aws, table)
        lines = log_lines(aws, outputs["aggregator_log_group_name"])
    keys = set(truth) | set(observed)
    errors = {key: observed.get(key, 0) - truth.get(key, 0) for key in keys}
    summaries = [
        line
        for line in lines
        if line.get("message") in ("batch summary", "test-only fault injected", "guide invocation")
    ]
    return {
        "downloads": sum(truth.values()),
        "aggregates": len(truth),
        "counted": sum(observed.values()),
        "over_counted": sum(error for error in errors.values() if error > 0),
        "lost": -sum(error for error in errors.values() if error < 0),
        "wrong_aggregates": sum(1 for error in errors.values() if error),
        "invocations_logged": len(summaries),
        "faults_injected": sum(
            1 for line in summaries if line["message"] == "test-only fault injected" or line.get("fault")
        ),
        "aggregate_writes": sum(line.get("aggregate_writes", 0) for line in summaries),
    }


@pytest.fixture(scope="module")
def guide_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    stage = tmp_path_factory.mktemp("guide-stage")
    shutil.copyfile(Path(__file__).parent / "baseline" / "guide_aggregator.py", stage / "aggregator.py")
    package = tmp_path_factory.mktemp("guide") / "guide-aggregator.zip"
    build.write_zip(stage, package)
    return package


def test_every_aggregate_is_exact_under_injected_faults_and_the_guide_handler_is_not(
    endpoint: Endpoint, aws: Clients, guide_package: Path
) -> None:
    # given 10,000 downloads and a quarter of the invocations failing after applying part of their batch
    ours = run_scenario(endpoint, aws, "exact")
    baseline = run_scenario(endpoint, aws, "guide", aggregator_package_path=str(guide_package))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "exactly_once.json").write_text(json.dumps({"ours": ours, "guide": baseline}, indent=2))
    print(f"\nexactly-once under faults: ours {ours}\nguide's per-record handler: {baseline}")
    # then ours counts every download exactly once, with faults really injected
    assert ours["downloads"] == DOWNLOADS
    assert ours["faults_injected"] >= 0.05 * ours["invocations_logged"] > 0
    assert (ours["lost"], ours["over_counted"], ours["wrong_aggregates"]) == (0, 0, 0)
    assert ours["counted"] == DOWNLOADS
    # and coalescing writes fewer items than one per download, retries' conditional writes included
    # (how many fewer depends on how many records the emulator's poller hands over per batch)
    assert 0 < ours["aggregate_writes"] < DOWNLOADS


def test_direct_invocation_with_hand_made_events_is_exactly_once(endpoint: Endpoint, aws: Clients) -> None:
    with stack(endpoint, "direct", batch_size=100) as (_, outputs):
        function = outputs["aggregator_function_name"]
        records = [download_record(10_000 + n, f"direct-song{n % 3}", "2019-05-05T05:05:05Z") for n in range(30)]

        def deliver(batch: list[dict[str, Any]]) -> dict[str, Any]:
            return invoke_function(aws.lambda_, function, {"Records": batch})

        def counts() -> dict[str, int]:
            return {
                song: count
                for (song, month), count in aggregates(aws, outputs["table_name"]).items()
                if month == "2019-05"
            }

        # given all 30 records applied once
        assert deliver(records) == {"batchItemFailures": []}
        assert counts() == {"direct-song0": 10, "direct-song1": 10, "direct-song2": 10}
        # when any subset of them is redelivered: a half, an overlapping slice, the whole batch, a single record
        for subset in (records[:15], records[10:25], records, records[7:8], records[::2]):
            assert deliver(subset) == {"batchItemFailures": []}
        # then nothing more is counted
        assert counts() == {"direct-song0": 10, "direct-song1": 10, "direct-song2": 10}
        # and records beyond the applied ones still count, once
        newer = [download_record(20_000 + n, "direct-song0", "2019-05-06T00:00:00Z") for n in range(5)]
        deliver(records[25:] + newer)
        deliver(newer)
        assert counts() == {"direct-song0": 15, "direct-song1": 10, "direct-song2": 10}
