"""The replica guard: with retractions on, once the watched table shows a replica, the aggregator applies nothing.

AWS: "TTL deletions that are replicated to global table regions are not identifiable in DynamoDB streams in the
regions the deletion is replicated to" (Developer Guide, *Working with expired items and time to live*), and replicas
can be added "at any time" (*Tutorials: Creating global tables*). DescribeTable's answers below are shaped as its API
reference documents them (`Replicas` with `RegionName` and `ReplicaStatus`, `GlobalTableVersion`,
`GlobalTableWitnesses`); moto holds the table, its stream and the progress table.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from aggregator_settings import Settings
from leaderboard_core.bookkeeping import FIRST_SEEN, REPLICA_REGIONS, REPLICAS_SEEN_KEY, SHARD_KEY
from replica_guard import (
    CACHE_SECONDS,
    STALE_SECONDS,
    ReplicaCheckUnanswered,
    ReplicaGuard,
    ReplicatedSource,
    Seen,
    replication_signs,
)
from tests.unit.aggregator.handler_on_moto import Deployed, aggregator_dependencies, wire
from tests.unit.aggregator.test_retracted_counts import delete, listed
from tests.unit.conftest import PROGRESS_TABLE, create_progress_table, create_table

REGION = "us-east-1"
CLEAN: dict[str, Any] = {}
CREATING = {"Replicas": [{"RegionName": "eu-west-1", "ReplicaStatus": "CREATING"}], "GlobalTableVersion": "2019.11.21"}
THROTTLED = ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "DescribeTable")


class DescribedAs:
    """moto's DynamoDB, with DescribeTable answering what the test scripts (moto cannot make a CREATING replica),
    counting its calls; every other call goes to moto."""

    def __init__(self, dynamodb: Any, answer: dict[str, Any] | ClientError) -> None:
        self._dynamodb = dynamodb
        self.answer = answer
        self.calls = 0

    def describe_table(self, **parameters: Any) -> dict[str, Any]:
        self.calls += 1
        if isinstance(self.answer, ClientError):
            raise self.answer
        table = self._dynamodb.describe_table(**parameters)["Table"]
        return {"Table": {**table, **self.answer}}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dynamodb, name)


class Clock:
    def __init__(self, now: float = 1_516_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def retracting(aws: None, sqs_queue: tuple[Any, str]) -> Deployed:
    """The handler with retractions on, on a table whose stream carries both images, and a counted download d0."""
    create_progress_table()
    sqs, queue_url = sqs_queue
    deployed = wire(create_table(stream_view_type="NEW_AND_OLD_IMAGES"), sqs, queue_url)
    deployed.with_schema(retractions=True)
    return deployed


def guarded(deployed: Deployed, answer: dict[str, Any] | ClientError, clock: Clock) -> DescribedAs:
    """The deployment's aggregator in a fresh execution environment whose DescribeTable answers `answer`."""
    described = DescribedAs(deployed.dynamodb, answer)
    guard = ReplicaGuard(described, deployed.settings.table_arn, PROGRESS_TABLE, clock=clock)
    deployed.dependencies = dataclasses.replace(deployed.dependencies, replica_guard=guard)
    return described


def replicas_seen(deployed: Deployed) -> dict[str, Any] | None:
    key = {SHARD_KEY: {"S": REPLICAS_SEEN_KEY}}
    return deployed.dynamodb.get_item(TableName=PROGRESS_TABLE, Key=key, ConsistentRead=True).get("Item")


def deliver(deployed: Deployed, lambda_context: Any, kinds: set[str]) -> dict[str, Any]:
    records = [r for r in deployed.stream_records(unfiltered=True) if r["eventName"] in kinds]
    return deployed.invoke(deployed.window_event(records, final=True), lambda_context)


def counted_then_deleted(deployed: Deployed, lambda_context: Any) -> None:
    """song1 counted twice (d0, d1), then d0 deleted by the application (no userIdentity)."""
    deployed.write("song1", 2)
    deliver(deployed, lambda_context, {"INSERT"})
    assert listed(deployed.dynamodb) == {"song1": 2}
    delete(deployed, "song1", 0)


def test_a_deletion_while_a_replica_is_being_created_is_refused_and_the_replica_recorded_once(
    retracting: Deployed, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # given song1 counted twice, then d0 deleted, while DescribeTable lists a replica still CREATING
    counted_then_deleted(retracting, lambda_context)
    clock = Clock()
    guarded(retracting, CREATING, clock)
    capsys.readouterr()
    # when the mapping delivers the deletion
    with pytest.raises(ReplicatedSource, match="no deletion can be told from another region's expiry") as refused:
        deliver(retracting, lambda_context, {"REMOVE"})
    # then the batch fails, nothing is taken back, the message names the deployment and what to do
    assert listed(retracting.dynamodb) == {"song1": 2}
    assert PROGRESS_TABLE in str(refused.value)
    assert "retractions = false and ledger = false" in str(refused.value)
    # and the replica is recorded in the progress table, with when and what was seen, and the metric is published
    item = replicas_seen(retracting)
    assert item is not None
    assert item[FIRST_SEEN] == {"N": str(int(clock.now))}
    assert set(item[REPLICA_REGIONS]["SS"]) == {"replica eu-west-1 (CREATING)", "GlobalTableVersion 2019.11.21"}
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert any(entry.get("ReplicatedSource") == [1.0] or entry.get("ReplicatedSource") == 1.0 for entry in emitted)
    # and a later refusal, in another environment, keeps the first time seen
    clock.now += 3600
    guarded(retracting, CREATING, clock)
    with pytest.raises(ReplicatedSource):
        deliver(retracting, lambda_context, {"REMOVE"})
    assert replicas_seen(retracting) == item


def test_once_seen_a_deletion_is_refused_after_the_replica_is_gone_in_this_environment_and_in_a_new_one(
    retracting: Deployed, lambda_context: Any
) -> None:
    # given a replica seen once, by an environment that refused a batch for it
    counted_then_deleted(retracting, lambda_context)
    clock = Clock()
    described = guarded(retracting, CREATING, clock)
    with pytest.raises(ReplicatedSource):
        deliver(retracting, lambda_context, {"REMOVE"})
    # when the replica is removed and DescribeTable is clean again, past the cache period
    described.answer = CLEAN
    clock.now += 10 * CACHE_SECONDS
    # then the same environment still refuses, and so does a fresh one (the progress table's item is sticky)
    with pytest.raises(ReplicatedSource):
        deliver(retracting, lambda_context, {"REMOVE"})
    guarded(retracting, CLEAN, clock)
    with pytest.raises(ReplicatedSource):
        deliver(retracting, lambda_context, {"REMOVE"})
    assert listed(retracting.dynamodb) == {"song1": 2}


def test_once_seen_a_batch_of_inserts_only_is_refused_too(retracting: Deployed, lambda_context: Any) -> None:
    # given a replica seen (the decision: every record refused, since with two readers the aggregator applies what it
    # reads itself beyond the event, and the deployment is to be detached and recounted anyway)
    counted_then_deleted(retracting, lambda_context)
    guarded(retracting, CREATING, Clock())
    with pytest.raises(ReplicatedSource):
        deliver(retracting, lambda_context, {"REMOVE"})
    retracting.write("song1", 1, first=5)
    # when a batch holding only an INSERT arrives
    with pytest.raises(ReplicatedSource):
        deliver(retracting, lambda_context, {"INSERT"})
    # then it is refused as well: nothing counted
    assert listed(retracting.dynamodb) == {"song1": 2}


def test_without_a_replica_the_deletion_is_taken_back(retracting: Deployed, lambda_context: Any) -> None:
    # given song1 counted twice, d0 deleted, and DescribeTable listing no replica
    counted_then_deleted(retracting, lambda_context)
    guarded(retracting, CLEAN, Clock())
    # when the deletion is delivered
    deliver(retracting, lambda_context, {"REMOVE"})
    # then it is taken back, and no replica is recorded
    assert listed(retracting.dynamodb) == {"song1": 1}
    assert replicas_seen(retracting) is None


def test_one_environment_asks_describe_table_once_per_cache_period(retracting: Deployed, lambda_context: Any) -> None:
    # given an environment that has just asked DescribeTable
    clock = Clock()
    described = guarded(retracting, CLEAN, clock)
    retracting.write("song1", 1)
    deliver(retracting, lambda_context, {"INSERT"})
    assert described.calls == 1
    # when invocations follow within the cache period
    for _ in range(3):
        clock.now += CACHE_SECONDS / 4
        deliver(retracting, lambda_context, {"INSERT"})
    # then none asks again; the first after the period does, once
    assert described.calls == 1
    clock.now += CACHE_SECONDS / 4
    deliver(retracting, lambda_context, {"INSERT"})
    deliver(retracting, lambda_context, {"INSERT"})
    assert described.calls == 2


def test_a_throttled_describe_table_keeps_the_last_answer_until_it_is_stale(
    retracting: Deployed, lambda_context: Any
) -> None:
    # given a clean answer, then DescribeTable throttled past the cache period
    counted_then_deleted(retracting, lambda_context)
    clock = Clock()
    described = guarded(retracting, CLEAN, clock)
    retracting.write("song1", 1, first=5)
    deliver(retracting, lambda_context, {"INSERT"})
    described.answer = THROTTLED
    clock.now += CACHE_SECONDS
    # when the deletion is delivered: the last answer stands, the deletion is taken back
    deliver(retracting, lambda_context, {"REMOVE"})
    assert listed(retracting.dynamodb) == {"song1": 2}
    assert described.calls == 2
    # then once that answer is older than STALE_SECONDS, the invocation fails rather than apply unguarded
    clock.now += STALE_SECONDS
    with pytest.raises(ReplicaCheckUnanswered):
        deliver(retracting, lambda_context, {"INSERT"})


def test_an_error_with_no_answer_yet_fails_the_invocation(retracting: Deployed, lambda_context: Any) -> None:
    # given a fresh environment whose DescribeTable is throttled
    counted_then_deleted(retracting, lambda_context)
    guarded(retracting, THROTTLED, Clock())
    # when the deletion is delivered
    with pytest.raises(ReplicaCheckUnanswered, match="nothing is applied"):
        deliver(retracting, lambda_context, {"REMOVE"})
    # then nothing is taken back
    assert listed(retracting.dynamodb) == {"song1": 2}


def test_two_environments_recording_at_once_keep_the_first_record(retracting: Deployed) -> None:
    # given one environment's record of the replica
    first = ReplicaGuard(retracting.dynamodb, retracting.settings.table_arn, PROGRESS_TABLE)
    first._record(Seen(100, ("replica eu-west-1 (CREATING)",)))
    # when another, which read no record a moment before, records its own
    second = ReplicaGuard(retracting.dynamodb, retracting.settings.table_arn, PROGRESS_TABLE)
    kept = second._record(Seen(200, ("replica eu-west-1 (ACTIVE)",)))
    # then the conditional write keeps the first, and the second environment adopts it
    assert kept == Seen(100, ("replica eu-west-1 (CREATING)",))


@pytest.mark.parametrize(
    ("table", "replicated"),
    [
        ({}, False),
        ({"Replicas": [{"RegionName": REGION, "ReplicaStatus": "ACTIVE"}]}, False),
        ({"Replicas": [{"RegionName": "eu-west-1", "ReplicaStatus": "DELETING"}]}, True),
        ({"GlobalTableVersion": "2019.11.21"}, True),
        ({"GlobalTableWitnesses": [{"RegionName": "us-west-2", "WitnessStatus": "ACTIVE"}]}, True),
    ],
    ids=["no replica", "this region only", "another region deleting", "a version alone", "a witness"],
)
def test_a_table_is_replicated_by_any_replica_elsewhere_a_version_or_a_witness(
    table: dict[str, Any], replicated: bool
) -> None:
    assert bool(replication_signs(table, REGION)) is replicated


def test_the_function_is_wired_with_the_guard_exactly_when_retractions_are_on(retracting: Deployed) -> None:
    # given the deployment's settings with and without retractions, wired as aggregator.py wires them
    with_retractions: Settings = retracting.settings
    without = dataclasses.replace(
        with_retractions, schema=dataclasses.replace(with_retractions.schema, retractions=False)
    )
    wired = aggregator_dependencies(with_retractions, retracting.dynamodb, retracting.streams, retracting.sqs)
    unwired = aggregator_dependencies(without, retracting.dynamodb, retracting.streams, retracting.sqs)
    # then only the first has the guard, on the table whose stream it reads
    assert wired.replica_guard is not None
    assert wired.replica_guard.table_arn == with_retractions.table_arn
    assert unwired.replica_guard is None


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="review16 finding 1 (silent): DescribeTable answers for now, not for when a record was written; a REMOVE "
    "written while a replica existed (mapping disabled or throttled meanwhile; the replica removed before the guard "
    "first looked) is applied as a deletion on a clean answer, and the replica is never recorded",
)
def test_a_deletion_written_before_the_guard_first_looked_is_not_taken_back_on_a_later_clean_answer(
    retracting: Deployed, lambda_context: Any
) -> None:
    # given song1 counted twice, then d0 removed (a REMOVE without TTL identity, as a replicated expiry shows)
    counted_then_deleted(retracting, lambda_context)
    # and an environment whose first DescribeTable answer comes an hour after the REMOVE was written, clean
    # (a replica added and removed in that hour, while the mapping was disabled, leaves no trace in DescribeTable)
    clock = Clock(now=time.time() + 3600)
    guarded(retracting, CLEAN, clock)
    # when the mapping delivers the REMOVE
    with contextlib.suppress(ReplicatedSource, ReplicaCheckUnanswered):
        deliver(retracting, lambda_context, {"REMOVE"})
    # then nothing vouches for the table's state when the REMOVE was written: the count is not taken back silently
    assert listed(retracting.dynamodb) == {"song1": 2}
