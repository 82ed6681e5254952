"""A reviewer's counterexamples to the aggregator's exactly-once design (issue 14), each an event sequence AWS allows.

Each failed once (silent over-count, silent loss, loud loss, liveness, cost) and is kept as a
regression test of its fix; the CHANGELOG tells the fixes. Each docstring names the AWS sentence
that allows the history.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from botocore.exceptions import ClientError

import aggregator
import shard_reader
from aggregate_store import AggregateStore
from aggregate_writes import Contribution
from aggregator import AggregatesNotWritten
from aggregator_settings import PER_WINDOW
from delivery import ShardRef
from download_records import AggregateKey, Schema
from leaderboard_core.bookkeeping import RECOUNTED_THROUGH, pad_sequence
from shard_progress import ProgressStore
from tests.streams import STREAM_ARN
from tests.unit.conftest import PROGRESS_TABLE, TABLE, count_of
from tests.unit.test_aggregator_handler import Deployed, wire

KEY = AggregateKey("song1", "2018-01")
NOW = 1_516_000_000


@pytest.fixture
def stack(dynamodb: Any, sqs_queue: tuple[Any, str], monkeypatch: pytest.MonkeyPatch) -> Deployed:
    """The handler on moto's table, stream, progress table and failure queue, as test_aggregator_handler wires it."""
    sqs, queue_url = sqs_queue
    return wire(dynamodb, sqs, queue_url, monkeypatch)


def sequence_of(record: dict[str, Any]) -> str:
    return record["dynamodb"]["SequenceNumber"]


def use_streams(monkeypatch: pytest.MonkeyPatch, streams: Any) -> None:
    monkeypatch.setattr(aggregator, "DEPENDENCIES", dataclasses.replace(aggregator.DEPENDENCIES, streams=streams))


def client_error(code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, operation)


class TrimmedStream:
    """moto's stream after DynamoDB trimmed every record up to `trimmed_through` (24 hours old).

    GetShardIterator with a sequence number older than the trim point raises
    TrimmedDataAccessException; TRIM_HORIZON starts "at the last (untrimmed) stream record".
    """

    def __init__(self, streams: Any, trimmed_through: str) -> None:
        self._streams = streams
        self.trimmed_through = trimmed_through

    def get_shard_iterator(self, **parameters: Any) -> Any:
        kind = parameters["ShardIteratorType"]
        if kind == "TRIM_HORIZON":
            parameters = {**parameters, "ShardIteratorType": "AFTER_SEQUENCE_NUMBER"}
            parameters["SequenceNumber"] = self.trimmed_through
        elif kind in ("AFTER_SEQUENCE_NUMBER", "AT_SEQUENCE_NUMBER") and int(parameters["SequenceNumber"]) < int(
            self.trimmed_through
        ):
            raise client_error("TrimmedDataAccessException", "GetShardIterator")
        return self._streams.get_shard_iterator(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams, name)


class VanishedParent:
    """moto's stream whose one shard has a parent that DynamoDB has since deleted ("Shards are ephemeral")."""

    def __init__(self, streams: Any, parent_id: str) -> None:
        self._streams = streams
        self.parent_id = parent_id

    def describe_stream(self, **parameters: Any) -> Any:
        description = self._streams.describe_stream(**parameters)
        for shard in description["StreamDescription"]["Shards"]:
            shard["ParentShardId"] = self.parent_id
        return description

    def get_shard_iterator(self, **parameters: Any) -> Any:
        if parameters["ShardId"] == self.parent_id:
            raise client_error("ResourceNotFoundException", "GetShardIterator")
        return self._streams.get_shard_iterator(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams, name)


# ---------------------------------------------------------------- silent over-count


@pytest.mark.parametrize(
    "legacy",
    [
        pytest.param({"AppliedSequence": "LAST"}, id="release-0.1.0-AppliedSequence"),
    ],
)
def test_review_upgrading_a_deployment_counts_the_retained_stream_again(
    stack: Deployed, lambda_context: Any, legacy: dict[str, str]
) -> None:
    """Every shard without a progress item is read from TRIM_HORIZON (24 hours back) and trusted to be uncounted.

    Release 0.1.0 kept one `AppliedSequence` per aggregate; issue 7's code pruned a shard's watermark
    and set `WatermarksPrunedBefore`. The new code knows neither: the first write finds no
    `Watermark_<shard>` and no `WatermarksPruned`, so `attribute_not_exists(#wm) AND
    attribute_not_exists(#pruned)` holds and everything the stream retains is added again.
    """
    # given three downloads the previous release already counted, its aggregate as that release left it
    stack.write("song1", 3)
    counted = stack.stream_records()
    created_last = int(counted[-1]["dynamodb"]["ApproximateCreationDateTime"])
    attributes = {
        name: {"S": pad_sequence(sequence_of(counted[-1]))} if value == "LAST" else {"N": str(created_last)}
        for name, value in legacy.items()
    }
    stack.put_raw(
        {"songID": {"S": "song1"}, "SK": {"S": "2018-01"}, "Month": {"S": "2018-01"}, "DownloadCount": {"N": "3"}}
        | attributes
    )
    # when the new release is stack and the mapping delivers the next download
    stack.write("song1", 1, first=3)
    aggregator.lambda_handler(stack.window_event(stack.stream_records()[3:]), lambda_context)
    # then the count is 4 (main: 7, the three counted again from the trim horizon)
    assert count_of(stack.dynamodb, "song1", "2018-01") == 4


# ---------------------------------------------------------------- silent loss


def test_review_records_trimmed_before_a_shard_is_first_counted_are_reported(
    stack: Deployed, lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard with no checkpoint is read from TRIM_HORIZON, which never raises TrimmedDataAccessException.

    TrimmedDataAccessException: "You request a shard iterator with a sequence number older than the
    trim point (24 hours)." With no sequence number there is nothing to be older: the first records of
    the shard vanish, the checkpoint passes them, and `recover`'s "C_S >= end" check then deletes the
    mapping's failure record of those very records. docs/exactly-once.md: records trimmed before the
    aggregator read them are reported as `records_trimmed`, "never silently".
    """
    # given ten downloads in a new shard whose first five the aggregator never counted (failing for a day)
    stack.write("song1", 10)
    records = stack.stream_records()
    # when DynamoDB trims those five and the mapping delivers the other five
    use_streams(monkeypatch, TrimmedStream(stack.streams, sequence_of(records[4])))
    aggregator.lambda_handler(stack.window_event(records[5:], final=True), lambda_context)
    # then the gap is reported for a recount (main: 5 counted, checkpoint at r10, no message at all)
    assert count_of(stack.dynamodb, "song1", "2018-01") == 5
    assert stack.checkpoint() == sequence_of(records[-1])
    kinds = [message["kind"] for message in stack.failure_messages()]
    assert "records_trimmed" in kinds


def test_review_control_records_trimmed_after_a_checkpoint_are_reported(
    stack: Deployed, lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control for the test above (passes on main): with a checkpoint, the same trim is reported."""
    stack.write("song1", 10)
    records = stack.stream_records()
    aggregator.lambda_handler(stack.window_event(records[:2], final=True), lambda_context)
    use_streams(monkeypatch, TrimmedStream(stack.streams, sequence_of(records[4])))
    aggregator.lambda_handler(stack.window_event(records[5:], final=True), lambda_context)
    assert count_of(stack.dynamodb, "song1", "2018-01") == 7
    assert "records_trimmed" in [message["kind"] for message in stack.failure_messages()]


# ---------------------------------------------------------------- liveness that ends in loss


def test_review_reports_too_large_for_one_sqs_batch_never_block_the_shard(
    stack: Deployed, lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five large malformed downloads make every SendMessageBatch fail, forever; the checkpoint waits before them.

    SendMessageBatch: "The maximum allowed individual message size and the maximum total payload size
    (the sum of the individual lengths of all of the batched messages) are both 1 MiB" (256 KiB in
    older text). Each message is cut at 250,000 characters, but ten go in one batch, so five
    ~230 KB records (DynamoDB allows 400 KB items) exceed it on every attempt. The reports are held
    back, the checkpoint never passes the first of them, and every invocation re-reads from there:
    once the backlog exceeds the read budget (100,000 records; 8 here), nothing after it is counted.
    """
    # a read budget of 8 records in pages of 4 stands for the shipped 100,000 in pages of 1,000
    monkeypatch.setattr(aggregator, "SETTINGS", dataclasses.replace(aggregator.SETTINGS, read_budget_records=8))
    monkeypatch.setattr(shard_reader, "PAGE_LIMIT", 4)
    # given five malformed downloads of 230 KB each (no Timestamp), then ten good ones
    for number in range(5):
        stack.put_raw({"songID": {"S": "song9"}, "SK": {"S": f"big-{number}"}, "Blob": {"S": "x" * 230_000}})
    stack.write("song1", 10)
    records = stack.stream_records()
    # when the mapping delivers them and retries the window's final invocation five times
    for _ in range(5):
        try:
            aggregator.lambda_handler(stack.window_event(records, final=True), lambda_context)
            break
        except AggregatesNotWritten:
            continue
    # then the malformed ones are reported and the good ones counted (main: 3 counted, nothing reported,
    # checkpoint never set; the shard is stuck until the records are trimmed a day later)
    reported = [message for message in stack.failure_messages() if message["kind"] == "rejected_download"]
    assert (len(reported) >= 5, count_of(stack.dynamodb, "song1", "2018-01")) == (True, 10)


def test_review_a_parent_shard_that_no_longer_exists_does_not_block_its_child(
    stack: Deployed, lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child drains its parent first, and any error reading the parent fails the child's invocation.

    "Shards are ephemeral: They are created and deleted automatically, as needed." A parent whose last
    window was given up keeps a progress item without `ShardEnded`; if no child invocation drains it
    within the 24 hours it is retained (a cold partition), GetShardIterator on it fails, and every
    invocation of the child raises, retried and given up, so none of the child's downloads is counted.
    """
    parent = "shardId-00000001000000000000-deadbeef"
    # given a parent shard counted part-way (its last window given up), since deleted by DynamoDB
    stack.dynamodb.put_item(
        TableName=PROGRESS_TABLE,
        Item={
            "ShardKey": {"S": f"{stack.stream_arn}|{parent}"},
            "StreamArn": {"S": stack.stream_arn},
            "ShardId": {"S": parent},
            "Checkpoint": {"S": pad_sequence("1")},
        },
    )
    use_streams(monkeypatch, VanishedParent(stack.streams, parent))
    # when the child's downloads are delivered, and retried
    stack.write("song1", 3)
    for _ in range(3):
        try:
            aggregator.lambda_handler(stack.window_event(stack.stream_records(), final=True), lambda_context)
            break
        except ClientError:
            continue
    # then they are counted (main: every invocation raises ResourceNotFoundException from the parent)
    assert count_of(stack.dynamodb, "song1", "2018-01") == 3


def test_review_a_window_whose_records_were_all_trimmed_does_not_fail_forever(
    stack: Deployed, lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A final invocation whose bound lies inside a trimmed gap can never move the checkpoint to its bound.

    The read from TRIM_HORIZON meets a record above the bound first, so no record is handled and the
    checkpoint stays at the trimmed one; the invocation raises, and every retry reports the same gap
    again, until the mapping gives the window up (up to maximum_record_age_in_seconds of retries).
    """
    monkeypatch.setattr(aggregator, "SETTINGS", dataclasses.replace(aggregator.SETTINGS, aggregate_writes=PER_WINDOW))
    # given r1, r2 counted, and a per_window window that delivered r3..r5 but had not written them
    stack.write("song1", 10)
    records = stack.stream_records()
    aggregator.lambda_handler(stack.window_event(records[:2], final=True), lambda_context)
    opened = aggregator.lambda_handler(stack.window_event(records[2:5]), lambda_context)
    use_streams(monkeypatch, TrimmedStream(stack.streams, sequence_of(records[6])))
    # when the window's final invocation comes after r3..r7 were trimmed
    raised = 0
    for _ in range(3):
        try:
            aggregator.lambda_handler(stack.window_event([], state=opened["state"], final=True), lambda_context)
        except AggregatesNotWritten:
            raised += 1
    # then it succeeds once the gap is reported (main: raises every time, one records_trimmed message per retry)
    trimmed = [message for message in stack.failure_messages() if message["kind"] == "records_trimmed"]
    assert (raised, len(trimmed)) == (0, 1)


# ---------------------------------------------------------------- cost and noise


def test_review_a_new_shard_pays_a_transaction_on_every_aggregate_ever_pruned(dynamodb: Any) -> None:
    """docs/exactly-once.md: "A transaction only when a pruned aggregate is written again from a shard whose
    watermark was pruned (rare...)". In fact every shard that has never written the aggregate pays a
    failed UpdateItem plus a TransactWriteItems (two write units per item) once `WatermarksPruned` is set,
    i.e. every child shard (a new generation every few hours) on every aggregate whose parent was pruned.
    """
    progress = ProgressStore(dynamodb, PROGRESS_TABLE, clock=lambda: NOW)
    store = AggregateStore(dynamodb, TABLE, Schema(), progress, clock=lambda: NOW)
    parent, child, grandchild = (ShardRef(STREAM_ARN, f"shardId-{name}") for name in ("p", "c", "g"))
    store.apply(KEY, parent, [Contribution(pad_sequence("200"), NOW)])
    progress.first_seen(parent, None, None)
    progress.advance(parent, pad_sequence("200"), "200", NOW, ended=True)
    store.apply(KEY, child, [Contribution(pad_sequence("300"), NOW)])  # prunes the parent's watermark
    outcome = store.apply(KEY, grandchild, [Contribution(pad_sequence("400"), NOW)])
    assert (outcome.writes, outcome.transactions) == (1, 0)


def test_review_records_below_the_watermark_are_not_reported_as_refused_by_the_fence(dynamodb: Any) -> None:
    """The fence is applied before the watermark: a late or concurrent reader's already-counted records are
    reported as `refused_record` ("counted by a recount"), and `recover` recounts the aggregate for nothing."""
    progress = ProgressStore(dynamodb, PROGRESS_TABLE, clock=lambda: NOW)
    store = AggregateStore(dynamodb, TABLE, Schema(), progress, clock=lambda: NOW)
    shard = ShardRef(STREAM_ARN, "shardId-a")
    records = [Contribution(pad_sequence(str(n)), NOW - 100) for n in (200, 210)]
    store.apply(KEY, shard, records)
    dynamodb.update_item(
        TableName=TABLE,
        Key={"songID": {"S": "song1"}, "SK": {"S": "2018-01"}},
        UpdateExpression="SET #fence = :fence",
        ExpressionAttributeNames={"#fence": RECOUNTED_THROUGH},
        ExpressionAttributeValues={":fence": {"N": str(NOW)}},
    )
    late = store.apply(KEY, shard, records)
    assert (late.already_applied, late.refused) == (2, [])
