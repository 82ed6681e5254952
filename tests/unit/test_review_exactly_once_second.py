"""A second reviewer's counterexamples to the aggregator (issue 14, second pass: periods, categories, sums).

Each test is a history AWS's documentation allows, played on moto's table and stream (or on the
aggregate store with a client that answers as DynamoDB documents), marked strict `xfail` while it
shows the bug, and kept as a regression test of its fix. Each docstring names the AWS sentence.
"""

from __future__ import annotations

import dataclasses
import re
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError

import aggregator
from aggregate_store import (
    WATERMARKS_PRUNED,
    WATERMARKS_PRUNED_UNDER,
    AggregateStore,
    WatermarkContention,
)
from aggregate_writes import Contribution
from aggregator import AggregatesNotWritten
from delivery import ShardRef
from download_records import AggregateKey, Schema
from leaderboard_core.index_layout import order_of
from shard_progress import ProgressStore
from tests.streams import STREAM_ARN
from tests.unit.conftest import PROGRESS_TABLE, TABLE, count_of
from tests.unit.test_aggregator_handler import Deployed, wire
from tests.unit.test_review_exactly_once import TrimmedStream, use_streams

NUMBER_OVERFLOW = "Number overflow. Attempting to store a number with magnitude larger than supported range"
"""What DynamoDB answers when an update's arithmetic passes 38 significant digits (UpdateItem's and
TransactWriteItems' ValidationError messages list it; it is also the message for imprecise sums)."""


@pytest.fixture
def stack(dynamodb: Any, sqs_queue: tuple[Any, str], monkeypatch: pytest.MonkeyPatch) -> Deployed:
    sqs, queue_url = sqs_queue
    return wire(dynamodb, sqs, queue_url, monkeypatch)


def with_schema(monkeypatch: pytest.MonkeyPatch, **changes: Any) -> None:
    """The deployment's schema changed (category, sum), its aggregate store with it."""
    schema = dataclasses.replace(aggregator.SETTINGS.schema, **changes)
    monkeypatch.setattr(aggregator, "SETTINGS", dataclasses.replace(aggregator.SETTINGS, schema=schema))
    store = AggregateStore(aggregator.DEPENDENCIES.progress._client, TABLE, schema, aggregator.DEPENDENCIES.progress)
    monkeypatch.setattr(aggregator, "DEPENDENCIES", dataclasses.replace(aggregator.DEPENDENCIES, store=store))


# ---------------------------------------------------------------- liveness, then loss


def test_review2_a_category_too_long_for_a_sort_key_is_rejected_not_blocking_the_shard(
    stack: Deployed, lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One download whose category is 1,100 characters blocks its shard.

    AWS (DynamoDB Developer Guide, *Constraints*, sort key length): "The minimum length of a sort key
    value is 1 byte. The maximum length is 1,024 bytes." The board id `<bucket>@<percent-encoded
    category>` is the aggregate's sort key (113 CJK characters are enough: each encodes to 9 bytes);
    `parse_record` takes any non-empty string as a category, the write is refused with a
    ValidationException that `_overflows` does not recognise, the aggregate counts as unwritten, and
    the checkpoint waits below it for ever (until the record is trimmed a day later).
    """
    # given a deployment with category boards, one download whose category is too long for a sort key, then two
    with_schema(monkeypatch, category="Genre")
    stack.put_raw(
        {
            "songID": {"S": "song1"},
            "SK": {"S": "song1-d0"},
            "Timestamp": {"S": "2018-01-15T10:00:00Z"},
            "Genre": {"S": "r" * 1100},
        }
    )
    stack.write("song2", 2)
    records = stack.stream_records()
    # when the mapping delivers the window, then its final invocation
    response = aggregator.lambda_handler(stack.window_event(records), lambda_context)
    try:
        aggregator.lambda_handler(stack.window_event([], state=response["state"], final=True), lambda_context)
        raised = False
    except AggregatesNotWritten:
        raised = True
    # then the final invocation succeeds, the checkpoint passes every record, and the long category is reported
    # (main: the final raises, the checkpoint stays before the first record, nothing is reported)
    first = records[0]["dynamodb"]["SequenceNumber"]
    reported = any(message.get("sequenceNumber") == first for message in stack.failure_messages())
    assert count_of(stack.dynamodb, "song2", "2018-01") == 2
    assert (raised, stack.checkpoint(), reported) == (False, records[-1]["dynamodb"]["SequenceNumber"], True)


class ThirtyEightDigits:
    """moto's DynamoDB with DynamoDB's number precision: a result past 38 significant digits is refused.

    AWS, *UpdateItem* (ValidationException) and *TransactWriteItems* (TransactionCanceledException,
    cancellation reason "Validation Error: Code: ValidationError Messages: ... Number overflow.
    Attempting to store a number with magnitude larger than supported range"). moto and the stream
    model's fake store the 39-digit order silently (the fake rounds it to 38 digits).
    """

    def __init__(self, client: Any, order_attribute: str = "LeaderboardOrder") -> None:
        self._client = client
        self._order = order_attribute
        self.transactions = 0

    def _too_precise(self, update: dict[str, Any]) -> bool:
        scaled = update.get("ExpressionAttributeValues", {}).get(":scaled")
        if scaled is None:
            return False
        item = self._client.get_item(TableName=update["TableName"], Key=update["Key"], ConsistentRead=True).get("Item")
        current = int(Decimal(item[self._order]["N"])) if item and self._order in item else 0
        digits = str(current + int(scaled["N"])).lstrip("-").rstrip("0")
        return len(digits) > 38

    def update_item(self, **parameters: Any) -> Any:
        if self._too_precise(parameters):
            self._check_condition(parameters)
            raise ClientError({"Error": {"Code": "ValidationException", "Message": NUMBER_OVERFLOW}}, "UpdateItem")
        return self._client.update_item(**parameters)

    def _check_condition(self, update: dict[str, Any]) -> None:
        """A failed condition answers first, with the item (which of the two DynamoDB checks first is undocumented)."""
        condition = update["ConditionExpression"]
        used = set(re.findall(r"[#:][A-Za-z0-9_]+", condition))
        check = {
            "TableName": update["TableName"],
            "Key": update["Key"],
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {k: v for k, v in update["ExpressionAttributeNames"].items() if k in used},
            "ExpressionAttributeValues": {k: v for k, v in update["ExpressionAttributeValues"].items() if k in used},
        }
        try:
            self._client.transact_write_items(TransactItems=[{"ConditionCheck": check}])
        except ClientError as error:
            item = self._client.get_item(TableName=update["TableName"], Key=update["Key"], ConsistentRead=True)
            failed = {"Code": "ConditionalCheckFailedException", "Message": "The conditional request failed"}
            raise ClientError({"Error": failed, "Item": item.get("Item", {})}, "UpdateItem") from error

    def transact_write_items(self, **parameters: Any) -> Any:
        self.transactions += 1
        actions = parameters["TransactItems"]
        if any("Update" in action and self._too_precise(action["Update"]) for action in actions):
            reasons = [
                {"Code": "ValidationError", "Message": NUMBER_OVERFLOW} if "Update" in action else {"Code": "None"}
                for action in actions
            ]
            error = {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"}
            raise ClientError({"Error": error, "CancellationReasons": reasons}, "TransactWriteItems")
        return self._client.transact_write_items(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_review2_a_sum_past_38_digits_on_a_pruned_aggregate_is_refused_not_retried_for_ever(
    dynamodb: Any,
) -> None:
    """The all-time revenue board of a hot product (fed by more than four shards, so pruned) reaches 10^12.

    `_overflows` recognises DynamoDB's `ValidationException` from UpdateItem, not the same refusal
    inside a transaction (`TransactionCanceledException`, reason `ValidationError`): `_known_after`
    re-reads the item and retries the same transaction until `WatermarkContention`. The aggregate
    stays unwritten, the checkpoint waits below its record on every invocation, and every final
    invocation raises, for as long as the record is in the stream (24 hours).
    """
    # given a summed all-time board at 999,999,999,999.5 whose watermarks were pruned, and a shard never seen on it
    progress = ProgressStore(dynamodb, PROGRESS_TABLE)
    shard = ShardRef(STREAM_ARN, "shardId-00000000000000000001-00000001")
    progress.first_seen(shard, "100", None)
    key = AggregateKey("song1", "all")
    total = Decimal("999999999999.5")
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "all"},
            "Month": {"S": "all"},
            "DownloadCount": {"N": str(total)},
            "LeaderboardOrder": {"N": str(order_of(total, "song1", summed=True))},
            WATERMARKS_PRUNED: {"N": "1"},
            WATERMARKS_PRUNED_UNDER: {"S": progress.genesis()},
        },
    )
    client = ThirtyEightDigits(dynamodb)
    store = AggregateStore(client, TABLE, Schema(amount="Revenue"), progress)
    # when a download of revenue 1 from that shard is written
    try:
        refused: int | None = len(
            store.apply(key, shard, [Contribution("0" * 37 + "200", 1_516_000_000, Decimal(1))]).refused
        )
    except WatermarkContention:
        refused = None
    # then it is refused (reported, the checkpoint passes it), as the plain update refuses it, after one transaction
    # (main: WatermarkContention after 8 transactions, the aggregate unwritten and the checkpoint held below it)
    assert (refused, client.transactions) == (1, 1)


def test_review2_control_a_sum_past_38_digits_on_an_unpruned_aggregate_is_refused(dynamodb: Any) -> None:
    """The same sum through the plain conditional update: refused and reported, never blocking (this holds)."""
    # given the same board, never pruned
    progress = ProgressStore(dynamodb, PROGRESS_TABLE)
    shard = ShardRef(STREAM_ARN, "shardId-00000000000000000001-00000001")
    progress.first_seen(shard, "100", None)
    total = Decimal("999999999999.5")
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "all"},
            "Month": {"S": "all"},
            "DownloadCount": {"N": str(total)},
            "LeaderboardOrder": {"N": str(order_of(total, "song1", summed=True))},
        },
    )
    store = AggregateStore(ThirtyEightDigits(dynamodb), TABLE, Schema(amount="Revenue"), progress)
    # when a download of revenue 1 is written
    outcome = store.apply(
        AggregateKey("song1", "all"), shard, [Contribution("0" * 37 + "200", 1_516_000_000, Decimal(1))]
    )
    # then it is refused, to be reported
    assert len(outcome.refused) == 1


# ---------------------------------------------------------------- silent loss (by contract, against the page's claim)


@pytest.mark.xfail(
    strict=True,
    reason="a download that carries the period attribute (`Month`) is an aggregate by definition: the mapping's filter "
    "drops it, so it is neither counted nor reported (review 2, finding S3; a precondition in docs/exactly-once.md)",
)
def test_review2_a_download_carrying_the_period_attribute_is_reported_not_silently_skipped(
    stack: Deployed, lambda_context: Any
) -> None:
    """`parse_record` tells the aggregator's own aggregate writes from downloads by the period attribute alone.

    docs/aggregator-contract.md asks that downloads not carry `Month`; docs/exactly-once.md (*What is
    exact*) says every download record is counted, and what is not counted is reported, "never
    silently". An aggregate's INSERT always carries the count and a `Watermark_*`; a record with
    `Month` but neither is a download the aggregator drops without a trace but a log counter.
    """
    # given a download whose application also stored its month, beside an ordinary one
    stack.put_raw(
        {
            "songID": {"S": "song1"},
            "SK": {"S": "song1-d0"},
            "Timestamp": {"S": "2018-01-15T10:00:00Z"},
            "Month": {"S": "2018-01"},
        }
    )
    stack.write("song1", 1, first=1)
    iterator = stack.streams.get_shard_iterator(
        StreamArn=stack.stream_arn, ShardId=stack.shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    high = stack.streams.get_records(ShardIterator=iterator)["Records"][-1]["dynamodb"]["SequenceNumber"]
    # when a direct invocation counts the shard through its last record
    aggregator.lambda_handler(stack.direct_event([], through=high), lambda_context)
    # then the first download is counted, or reported as a malformed download (main: count 1 and no message)
    counted = count_of(stack.dynamodb, "song1", "2018-01")
    reported = [message["kind"] for message in stack.failure_messages()]
    assert counted == 2 or reported == ["rejected_download"]


# ---------------------------------------------------------------- silent loss on a large stream


class ManyShards:
    """moto's stream as DescribeStream pages a large one: 100 shards a page, this table's shards after 10,000 others.

    AWS, *DescribeStream*: "Limit: The maximum number of shard objects to return. The upper limit is
    100." "The only way to know when you have reached the end of the result set is when
    LastEvaluatedShardId is empty." Nothing bounds the number of shards a stream lists.
    """

    def __init__(self, streams: Any, others: int = 10_000) -> None:
        self._streams = streams
        self.others = [f"shardId-00000000000000000000-{number:08d}" for number in range(others)]

    def describe_stream(self, **parameters: Any) -> Any:
        start = parameters.get("ExclusiveStartShardId")
        position = self.others.index(start) + 1 if start in self.others else 0
        if (start is not None and start not in self.others) or position >= len(self.others):
            return self._streams.describe_stream(StreamArn=parameters["StreamArn"])
        page = self.others[position : position + 100]
        description = self._streams.describe_stream(StreamArn=parameters["StreamArn"])["StreamDescription"]
        description = {**description, "Shards": [{"ShardId": shard_id} for shard_id in page]}
        description["LastEvaluatedShardId"] = page[-1]
        return {"StreamDescription": description}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams, name)


def test_review2_a_shard_listed_after_100_describe_pages_still_reports_its_trimmed_start(
    stack: Deployed, lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`shard_facts` stops after DESCRIBE_PAGES = 100 pages (10,000 shards) and falls back to ShardFacts(None, None).

    The shard is then read from TRIM_HORIZON, which "Start[s] reading at the last (untrimmed) stream
    record": review 1's F3 again, on a stream with more than 10,000 shards, and the shard's parent
    is unknown too (never drained).
    """
    # given ten downloads in a shard listed after 10,000 others, whose first five the aggregator never counted
    stack.write("song1", 10)
    records = stack.stream_records()
    # when DynamoDB trims those five and the mapping delivers the other five
    use_streams(monkeypatch, TrimmedStream(ManyShards(stack.streams), records[4]["dynamodb"]["SequenceNumber"]))
    aggregator.lambda_handler(stack.window_event(records[5:], final=True), lambda_context)
    # then the gap is reported for a recount (main: 5 counted, checkpoint at r10, no message)
    assert count_of(stack.dynamodb, "song1", "2018-01") == 5
    assert "records_trimmed" in [message["kind"] for message in stack.failure_messages()]


def test_review2_control_a_shard_listed_after_150_others_reports_its_trimmed_start(
    stack: Deployed, lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control for the test above (passes on main): within 100 pages, the same trim is reported."""
    stack.write("song1", 10)
    records = stack.stream_records()
    streams = ManyShards(stack.streams, others=150)
    use_streams(monkeypatch, TrimmedStream(streams, records[4]["dynamodb"]["SequenceNumber"]))
    aggregator.lambda_handler(stack.window_event(records[5:], final=True), lambda_context)
    assert count_of(stack.dynamodb, "song1", "2018-01") == 5
    assert "records_trimmed" in [message["kind"] for message in stack.failure_messages()]
