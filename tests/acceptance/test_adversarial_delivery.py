"""The deployed default configuration under the deliveries the Lambda guide allows beyond ordinary retries.

"Records are always processed in order the first time. If records are processed more than once, they
might be processed out of order." (Lambda Developer Guide, tumbling windows.) The emulators' stream
mapping plays such retries when a test switches its adversarial retries on for the stack's function
(leaderboard_dev/emulators/adversarial_retries.py); a faulty build of the shipped aggregator makes
a share of the invocations fail after half of their work, so that retries happen. Besides, an
operator's direct invocation ahead of the mapping, and a window given up then recovered.

Every test compares the counts with a recount of the downloads the test itself wrote, and asserts
that the hazard really happened.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from leaderboard_dev.aws import Clients
from leaderboard_dev.emulators.adversarial_retries import AdversarialRetries, read_journal
from leaderboard_dev.leaderboard import NotSettled, invoke_function, poll_until
from leaderboard_dev.loadgen import Download, write_items
from leaderboard_dev.settings import Endpoint
from tests.acceptance.conftest import (
    Counts,
    FaultBuilds,
    adversarial_retries,
    differences,
    downloads,
    recount,
    stack,
    stored,
    stream_records,
)

WINDOW_SECONDS = 10
"""The stack's tumbling window: short, so that windows close within the test."""
FAULT_RATE = 0.4
RETRIES = 100
"""Every failed attempt of an adversarial retry counts towards the quota, split or not: enough never to give up."""


def wait_for_exact_counts(
    aws: Clients, table: str, truth: Counts, timeout: float, evidence: Any = None, songs_of: str = ""
) -> None:
    """Poll until the aggregates (of the songs named ``songs_of``-…) equal the recount; then, a window and more
    later, they still do (nothing counted late)."""

    def counts() -> Counts:
        return {key: count for key, count in stored(aws, table).items() if key[0].startswith(songs_of)}

    seen: dict[str, Counts] = {}

    def exact() -> bool:
        seen["counts"] = counts()
        return seen["counts"] == truth

    try:
        poll_until(exact, timeout=timeout, interval=3, describe="counts equal to the recount")
    except NotSettled as error:
        lost = sum(truth.values()) - sum(seen.get("counts", {}).values())
        context = evidence() if callable(evidence) else evidence
        raise AssertionError(
            f"{error}: {sum(truth.values())} downloads, {lost} short; "
            f"wrong aggregates {differences(seen.get('counts', {}), truth)}; {context}"
        ) from None
    time.sleep(WINDOW_SECONDS + 5)
    assert differences(counts(), truth) == {}


@pytest.fixture(scope="module")
def faulty_stack(endpoint: Endpoint, fault_builds: FaultBuilds) -> Iterator[dict[str, Any]]:
    """One deployment of the default configuration (per_batch) with 10-second windows and a build failing 40 % of
    the invocations after half of their records, shared by the retry scenarios (each writes its own songs).

    Batches of 10: a scenario's 150 downloads take 15 first deliveries or more, so that none of them failing
    happens once in 2,000 runs at most (0.6^15); the scenario then fails, saying that no retry was played.
    """
    package = str(fault_builds.faulty(FAULT_RATE))
    with stack(
        endpoint,
        "retries",
        batch_size=10,
        tumbling_window_in_seconds=WINDOW_SECONDS,
        maximum_retry_attempts=RETRIES,
        aggregator_package_path=package,
    ) as (_, outputs):
        yield outputs


def run_adversarial_scenario(
    aws: Clients, outputs: dict[str, Any], directory: Path, purpose: str, policy: AdversarialRetries, seed: int
) -> list[dict[str, Any]]:
    """Play ``policy``, write 150 downloads of the scenario's own songs, wait until their counts equal the recount;
    return the retries the mapping played meanwhile."""
    table, function = outputs["table_name"], outputs["aggregator_function_name"]
    already = len(read_journal(directory, function))
    written = downloads(purpose, 150, seed)
    truth = recount(written)

    def played() -> list[dict[str, Any]]:
        return [entry for entry in read_journal(directory, function)[already:] if entry["event"] == "retry"]

    def summary() -> str:
        retries = played()
        return (
            f"{len(retries)} retries played: {sum(1 for e in retries if e['reordered'])} reordered, "
            f"{sum(1 for e in retries if e['merged'])} merged, {sum(1 for e in retries if e['split'])} split"
        )

    with adversarial_retries(directory, function, policy):
        write_items(aws.dynamodb, table, [download.as_item() for download in written])
        wait_for_exact_counts(aws, table, truth, timeout=300, evidence=summary, songs_of=purpose)
    return played()


def test_retries_out_of_order_count_every_download_exactly_once(
    aws: Clients, faulty_stack: dict[str, Any], switch_directory: Path
) -> None:
    # given the default configuration (per_batch), 40 % of the invocations failing after half of their records,
    # and retries that present the records from the checkpoint on in another order, sometimes split, sometimes with
    # a fresh state
    policy = AdversarialRetries(seed=14, reorder=1.0, split=0.5, fresh_state=0.5)
    # when 150 downloads are written, then every aggregate of their songs equals the recount of the downloads written
    played = run_adversarial_scenario(aws, faulty_stack, switch_directory, "reordered", policy, seed=1401)
    # and the mapping really retried out of order, and such a retry succeeded
    assert any(entry["reordered"] and entry["succeeded"] for entry in played), played


def test_larger_retries_merged_with_newer_records_count_every_download_exactly_once(
    aws: Clients, faulty_stack: dict[str, Any], switch_directory: Path
) -> None:
    # given the same, with first deliveries shorter than the records at hand and retries that take on newer records
    # of the window (up to the batch size)
    policy = AdversarialRetries(seed=15, merge=1.0, short_batches=1.0)
    # when 150 downloads are written, then every aggregate of their songs equals the recount of the downloads written
    played = run_adversarial_scenario(aws, faulty_stack, switch_directory, "merged", policy, seed=1402)
    # and a retry really was larger than the batch that failed, and such a retry succeeded
    assert any(entry["merged"] and entry["succeeded"] for entry in played), played


def mapping_state(aws: Clients, mapping_uuid: str) -> str:
    return str(aws.lambda_.get_event_source_mapping(UUID=mapping_uuid).get("State"))


def test_a_direct_invocation_ahead_of_the_mapping_loses_nothing(endpoint: Endpoint, aws: Clients) -> None:
    with stack(endpoint, "ahead", batch_size=100, tumbling_window_in_seconds=WINDOW_SECONDS) as (_, outputs):
        table, function = outputs["table_name"], outputs["aggregator_function_name"]
        stream_arn, mapping_uuid = outputs["table_stream_arn"], outputs["aggregator_event_source_mapping_uuid"]
        # given the mapping disabled, and ten downloads r1..r10 of one song in the stream
        aws.lambda_.update_event_source_mapping(UUID=mapping_uuid, Enabled=False)
        poll_until(lambda: mapping_state(aws, mapping_uuid) == "Disabled", timeout=60, describe="mapping disabled")
        written = [Download("ahead-song", f"ahead-{n:02d}", "u1", f"2019-05-{n:02d}T10:00:00Z") for n in range(1, 11)]
        write_items(aws.dynamodb, table, [download.as_item() for download in written], workers=1)
        shard_id, records = stream_records(aws, stream_arn)
        inserts = [record for record in records if record["eventName"] == "INSERT"]
        assert [record["dynamodb"]["Keys"]["SK"]["S"] for record in inserts] == [d.download_id for d in written]
        # when an operator invokes the aggregator directly with r8, a real record of the stream, before the
        # mapping delivered r1..r8
        r8 = inserts[7]
        response = invoke_function(
            aws.lambda_, function, {"shardId": shard_id, "eventSourceARN": stream_arn, "Records": [r8]}
        )
        assert mapping_state(aws, mapping_uuid) == "Disabled"
        # and the mapping is enabled afterwards
        aws.lambda_.update_event_source_mapping(UUID=mapping_uuid, Enabled=True)
        # then the song's count is the ten downloads written, none lost behind r8
        wait_for_exact_counts(aws, table, recount(written), timeout=180, evidence=lambda: f"direct: {response}")
        # and the direct invocation counted through r8 itself: it answered the design's contract
        assert response["shardId"] == shard_id
        assert response["reachedBound"] is True
        assert int(response["checkpoint"]) == int(r8["dynamodb"]["SequenceNumber"])
