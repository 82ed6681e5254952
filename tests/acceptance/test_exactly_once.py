"""Exact counts under injected faults on the emulator, beside the guide's handler under the same faults.

Both stacks come from the same module and differ only in the aggregator's package. Each is fed
the same 3,000 downloads; a quarter of the invocations fail on purpose after writing part of
their batch, so the mapping redelivers work that was already done.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config
from localstack_client.session import Session

from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import invoke_function, poll_until
from leaderboard_dev.loadgen import Download, utc_month, write_items, zipf_downloads
from leaderboard_dev.observe import aggregator_invocations, log_lines, scan_all
from leaderboard_dev.settings import REPOSITORY, Endpoint
from tests.acceptance.conftest import FaultBuilds, stack, stream_records

FAULT_RATE = 0.25
RESULTS = REPOSITORY / "build" / "acceptance"
MAY = "2019-05-05T05:05:05Z"
INVENTED = "9" * 38


def aggregates(aws: Clients, table: str) -> dict[tuple[str, str], int]:
    items = scan_all(
        aws, TableName=table, FilterExpression="attribute_exists(#m)", ExpressionAttributeNames={"#m": "Month"}
    )
    return {(item["songID"]["S"], item["SK"]["S"]): int(item["DownloadCount"]["N"]) for item in items}


def recount_from_downloads(aws: Clients, table: str) -> Counter[tuple[str, str]]:
    """The truth, recounted from the download records in the table, in UTC months, independently of the aggregator."""
    items = scan_all(
        aws, TableName=table, FilterExpression="attribute_not_exists(#m)", ExpressionAttributeNames={"#m": "Month"}
    )
    return Counter((item["songID"]["S"], utc_month(item["Timestamp"]["S"])) for item in items)


def delivered(invocations: list[dict[str, Any]]) -> int:
    """Records the mapping has checkpointed: those of invocations that succeeded (each is checkpointed once)."""
    return sum(invocation["records"] for invocation in invocations if invocation["succeeded"])


@dataclass(frozen=True)
class Scenario:
    downloads: int
    batch_size: int


def run_scenario(
    endpoint: Endpoint, aws: Clients, purpose: str, scenario: Scenario, exact: bool, package: Path
) -> dict[str, Any]:
    """Deploy the package, write the downloads, wait for the truth: every record delivered, for ours exact counts."""
    downloads = scenario.downloads
    variables = {"batch_size": scenario.batch_size, "aggregator_package_path": str(package)}
    with stack(endpoint, purpose, **variables) as (_, outputs):
        table, log_group = outputs["table_name"], outputs["aggregator_log_group_name"]
        write_items(aws.dynamodb, table, [d.as_item() for d in zipf_downloads(downloads, songs=200, seed=7)])
        truth = recount_from_downloads(aws, table)
        state: dict[str, Any] = {}

        def drained() -> bool:
            state["lines"] = aggregator_invocations(log_lines(aws, log_group))
            state["observed"] = aggregates(aws, table)
            all_delivered = delivered(state["lines"]) >= downloads
            return all_delivered and (state["observed"] == dict(truth) if exact else True)

        try:
            poll_until(drained, timeout=900, interval=5, describe=f"{purpose}: every record delivered")
        except AssertionError as error:
            raise AssertionError(
                f"{error}; delivered {delivered(state.get('lines', []))} of {downloads}, "
                f"wrong aggregates {_differences(state.get('observed', {}), truth)}"
            ) from None
    observed, lines = state["observed"], state["lines"]
    keys = set(truth) | set(observed)
    errors = {key: observed.get(key, 0) - truth.get(key, 0) for key in keys}
    return {
        "downloads": sum(truth.values()),
        "aggregates": len(truth),
        "counted": sum(observed.values()),
        "over_counted": sum(error for error in errors.values() if error > 0),
        "lost": -sum(error for error in errors.values() if error < 0),
        "wrong_aggregates": sum(1 for error in errors.values() if error),
        "invocations": len(lines),
        "failed_invocations": sum(1 for line in lines if not line["succeeded"]),
        "records_delivered_more_than_once": sum(line["records"] for line in lines) - delivered(lines),
        "aggregate_writes": sum(line["aggregate_writes"] for line in lines),
    }


def _differences(observed: dict[tuple[str, str], int], truth: Counter[tuple[str, str]]) -> dict[str, Any]:
    wrong = {key: (observed.get(key, 0), truth.get(key, 0)) for key in set(truth) | set(observed)}
    return {f"{song}|{month}": pair for (song, month), pair in sorted(wrong.items()) if pair[0] != pair[1]}


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    """3,000 downloads in batches of 100 on either emulator: each side has some 30 or more invocations, so that a
    quarter of them failing leaves none without a failure only once in 5,000 runs (0.75^30); with 15 the test would
    stop on chance once in a hundred. More downloads prove nothing more and cost minutes of the suite's longest file."""
    return Scenario(3_000, 100)


def test_every_aggregate_is_exact_under_injected_faults_and_the_guide_handler_is_not(
    endpoint: Endpoint, aws: Clients, fault_builds: FaultBuilds, scenario: Scenario
) -> None:
    # given the downloads, and a quarter of the invocations failing after half of their records, on both sides
    ours = run_scenario(endpoint, aws, "exact", scenario, exact=True, package=fault_builds.faulty(FAULT_RATE))
    guide = run_scenario(endpoint, aws, "guide", scenario, exact=False, package=fault_builds.guide(FAULT_RATE))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "exactly_once.json").write_text(json.dumps({"ours": ours, "guide": guide}, indent=2))
    print(f"\nexactly-once under faults: ours {ours}\nguide's per-record handler: {guide}")
    # then on both sides faults really happened and records really were delivered more than once
    for side in (ours, guide):
        assert side["downloads"] == scenario.downloads
        assert side["failed_invocations"] >= 0.05 * side["invocations"] > 0
        assert side["records_delivered_more_than_once"] > 0
    # and ours counts every download exactly once, with fewer writes than downloads, retries included
    assert (ours["lost"], ours["over_counted"], ours["wrong_aggregates"]) == (0, 0, 0)
    assert 0 < ours["aggregate_writes"] < scenario.downloads
    # while the guide's handler, fed the same records under the same faults, over-counts
    assert guide["over_counted"] > 0
    assert guide["counted"] > scenario.downloads


def test_a_direct_invocation_with_the_streams_records_is_exactly_once_and_invented_ones_are_refused(
    endpoint: Endpoint, aws: Clients
) -> None:
    # A claim beyond the shard's tip is known only after 1,000 empty pages in a row, read within half the function's
    # timeout (the rest is kept for writes). LocalStack under the suite's load took over 90 s for them, so the function
    # gets 420 s, and the direct invocations a client that waits that long without retrying.
    timeout = 420
    invoking = Session(region_name=endpoint.region, localstack_host=f"{endpoint.host}:{endpoint.port}").client(
        "lambda", config=Config(read_timeout=timeout + 60, connect_timeout=5, retries={"total_max_attempts": 1})
    )
    with stack(endpoint, "direct", batch_size=100, aggregator_timeout=timeout) as (_, outputs):
        table, function = outputs["table_name"], outputs["aggregator_function_name"]
        # given 30 downloads written and counted through the mapping
        downloads = [
            Download(f"direct-song{n % 3}", f"download-{n:03d}", "u", "2019-05-05T05:05:05Z") for n in range(30)
        ]
        write_items(aws.dynamodb, table, [download.as_item() for download in downloads])

        def counts() -> dict[str, int]:
            return {song: count for (song, month), count in aggregates(aws, table).items() if month == "2019-05"}

        expected = {"direct-song0": 10, "direct-song1": 10, "direct-song2": 10}
        poll_until(lambda: counts() == expected, timeout=180, interval=2, describe="the mapping's counts")
        shard_id, records = stream_records(aws, outputs["table_stream_arn"])
        downloads_in_stream = [r for r in records if r["eventName"] == "INSERT"]
        assert len(downloads_in_stream) >= 30

        def deliver(batch: list[dict[str, Any]]) -> dict[str, Any]:
            event = {"shardId": shard_id, "eventSourceARN": outputs["table_stream_arn"], "Records": batch}
            return invoke_function(invoking, function, event)

        # when an operator replays any subset of the stream's own records directly
        for subset in (
            downloads_in_stream[:15],
            downloads_in_stream[10:25],
            downloads_in_stream,
            downloads_in_stream[::2],
        ):
            response = deliver(subset)
            assert (response["shardId"], response["reachedBound"]) == (shard_id, True)
        # then nothing more is counted
        assert counts() == expected
        # and a record with an invented sequence number beyond the shard's end is refused, reported, and moves nothing
        invented = json.loads(json.dumps(downloads_in_stream[0]))
        invented["dynamodb"]["SequenceNumber"] = INVENTED
        assert deliver([invented])["reachedBound"] is False
        assert counts() == expected

        def refusal() -> dict[str, Any] | None:
            messages = aws.sqs.receive_message(
                QueueUrl=outputs["failure_queue_url"], MaxNumberOfMessages=10, WaitTimeSeconds=1
            ).get("Messages", [])
            bodies = [json.loads(message["Body"]) for message in messages]
            return next(
                (b for b in bodies if b.get("kind") == "refused_record" and b["sequenceNumber"] == "9" * 38), None
            )

        poll_until(refusal, timeout=60, interval=1, describe="the refused record in the failure queue")
        # and later downloads of the same shard still count, once
        write_items(
            aws.dynamodb, table, [Download("direct-song0", "download-late", "u", "2019-05-06T00:00:00Z").as_item()]
        )
        poll_until(
            lambda: counts() == {**expected, "direct-song0": 11}, timeout=180, interval=2, describe="the late download"
        )
