"""Retractions on moto's table and stream (NEW_AND_OLD_IMAGES): a deletion takes a download back once, however often
it is delivered; a count back at 0 leaves the sparse index and the next download puts it back as a fresh aggregate; a
count taken below 0 is reported against its aggregate (a sum may be negative)."""

from __future__ import annotations

import contextlib
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError

import two_readers
from aggregate_store import AggregateStore
from aggregate_writes import Contribution
from delivery import ShardRef
from download_records import AggregateKey, Schema
from leaderboard_core.bookkeeping import WATERMARKS_PRUNED, WATERMARKS_PRUNED_UNDER, pad_sequence
from leaderboard_core.index_layout import order_of
from shard_progress import ProgressStore
from tests.streams import STREAM_ARN
from tests.unit.aggregator.handler_on_moto import Deployed, wire
from tests.unit.conftest import INDEX, PROGRESS_TABLE, TABLE, create_progress_table, create_table

KEY = AggregateKey("song1", "2018-01")
SHARD = ShardRef(STREAM_ARN, "shardId-a")
NOW = 1_516_000_000


@pytest.fixture
def retracting(aws: None, sqs_queue: tuple[Any, str]) -> Deployed:
    """The handler with retractions on, reading a table whose stream carries both images, as the module sets it."""
    create_progress_table()
    sqs, queue_url = sqs_queue
    deployed = wire(create_table(stream_view_type="NEW_AND_OLD_IMAGES"), sqs, queue_url)
    deployed.with_schema(retractions=True)
    return deployed


def aggregate(dynamodb: Any, song: str = "song1", board: str = "2018-01") -> dict[str, Any]:
    key = {"songID": {"S": song}, "SK": {"S": board}}
    return dynamodb.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item") or {}


def listed(dynamodb: Any, board: str = "2018-01") -> dict[str, int]:
    """The board as the sparse index lists it: entity -> count."""
    items = dynamodb.query(
        TableName=TABLE,
        IndexName=INDEX,
        KeyConditionExpression="Month = :board",
        ExpressionAttributeValues={":board": {"S": board}},
    )["Items"]
    return {item["songID"]["S"]: int(item["DownloadCount"]["N"]) for item in items}


def delete(deployed: Deployed, song: str, number: int) -> None:
    deployed.dynamodb.delete_item(TableName=TABLE, Key={"songID": {"S": song}, "SK": {"S": f"{song}-d{number}"}})


def count_everything(deployed: Deployed, lambda_context: Any) -> None:
    """One window event carrying every record of the shard (the aggregator reads the shard itself anyway)."""
    deployed.invoke(deployed.window_event(deployed.stream_records(unfiltered=True)), lambda_context)


def test_a_download_deleted_leaves_a_count_of_0_out_of_the_index_and_a_new_one_puts_it_back_as_fresh(
    retracting: Deployed, lambda_context: Any
) -> None:
    # given song1 downloaded once and song2 twice, counted
    retracting.write("song1", 1)
    retracting.write("song2", 2)
    count_everything(retracting, lambda_context)
    assert listed(retracting.dynamodb) == {"song1": 1, "song2": 2}
    # when song1's only download is deleted
    delete(retracting, "song1", 0)
    count_everything(retracting, lambda_context)
    # then its count is 0 and the board no longer lists it: no period attribute, no order
    stored = aggregate(retracting.dynamodb)
    assert stored["DownloadCount"] == {"N": "0"}
    assert ("Month" in stored, "LeaderboardOrder" in stored) == (False, False)
    assert listed(retracting.dynamodb) == {"song2": 2}
    # when it is written again under the same key
    retracting.write("song1", 1)
    count_everything(retracting, lambda_context)
    # then it is counted once, listed again, and ordered as a fresh aggregate with a count of 1
    stored = aggregate(retracting.dynamodb)
    assert stored["DownloadCount"] == {"N": "1"}
    assert stored["LeaderboardOrder"] == {"N": str(order_of(1, "song1"))}
    assert listed(retracting.dynamodb) == {"song1": 1, "song2": 2}


def test_a_deletion_delivered_again_takes_the_download_back_once(retracting: Deployed, lambda_context: Any) -> None:
    # given three downloads counted, then one deleted
    retracting.write("song1", 3)
    count_everything(retracting, lambda_context)
    delete(retracting, "song1", 1)
    records = retracting.stream_records(unfiltered=True)
    # when the deletion is delivered, then delivered again (a retry), alone and with every record before it
    remove = [record for record in records if record["eventName"] == "REMOVE"]
    retracting.invoke(retracting.window_event(records), lambda_context)
    retracting.invoke(retracting.window_event(remove), lambda_context)
    retracting.invoke(retracting.window_event(records), lambda_context)
    # then the count is what the table holds
    assert aggregate(retracting.dynamodb)["DownloadCount"] == {"N": "2"}


def test_an_edit_across_a_month_boundary_moves_the_download_once(retracting: Deployed, lambda_context: Any) -> None:
    # given two January downloads counted
    retracting.write("song1", 2, timestamp="2018-01-31T23:30:00Z")
    count_everything(retracting, lambda_context)
    # when one is edited into February, and the edit is delivered twice
    retracting.dynamodb.update_item(
        TableName=TABLE,
        Key={"songID": {"S": "song1"}, "SK": {"S": "song1-d0"}},
        UpdateExpression="SET #t = :t",
        ExpressionAttributeNames={"#t": "Timestamp"},
        ExpressionAttributeValues={":t": {"S": "2018-02-01T00:30:00Z"}},
    )
    count_everything(retracting, lambda_context)
    count_everything(retracting, lambda_context)
    # then January holds one and February one
    assert listed(retracting.dynamodb, "2018-01") == {"song1": 1}
    assert listed(retracting.dynamodb, "2018-02") == {"song1": 1}


def test_an_edit_that_breaks_a_download_takes_it_back_and_reports_it(retracting: Deployed, lambda_context: Any) -> None:
    # given two downloads counted
    retracting.write("song1", 2)
    count_everything(retracting, lambda_context)
    # when one's timestamp is edited into something no board can hold
    retracting.dynamodb.update_item(
        TableName=TABLE,
        Key={"songID": {"S": "song1"}, "SK": {"S": "song1-d1"}},
        UpdateExpression="SET #t = :t",
        ExpressionAttributeNames={"#t": "Timestamp"},
        ExpressionAttributeValues={":t": {"S": "31/01/2018"}},
    )
    count_everything(retracting, lambda_context)
    # then it no longer counts where it did, and the edit is reported as a malformed download
    assert aggregate(retracting.dynamodb)["DownloadCount"] == {"N": "1"}
    assert [message["record"]["eventName"] for message in rejections(retracting)] == ["MODIFY"]


def rejections(deployed: Deployed) -> list[dict[str, Any]]:
    """The malformed downloads reported: moto records an UpdateItem that creates an aggregate as two INSERTs, the first
    of its key alone (DynamoDB records one), which the aggregator rejects as a download without a timestamp."""
    return [
        message
        for message in deployed.failure_messages()
        if message["kind"] == "rejected_download" and "not an ISO 8601 timestamp" in message["reason"]
    ]


def attached_after_one_download(aws: None, sqs_queue: tuple[Any, str]) -> Deployed:
    """song1 downloaded before the stream existed (the module attached later, no backfill), then the stream enabled."""
    create_progress_table()
    dynamodb = create_table(stream_view_type=None)
    dynamodb.put_item(
        TableName=TABLE,
        Item={"songID": {"S": "song1"}, "SK": {"S": "song1-d0"}, "Timestamp": {"S": "2018-01-15T10:00:00Z"}},
    )
    dynamodb.update_table(
        TableName=TABLE, StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    )
    sqs, queue_url = sqs_queue
    deployed = wire(dynamodb, sqs, queue_url)
    deployed.with_schema(retractions=True)
    return deployed


def refusals(deployed: Deployed) -> list[dict[str, Any]]:
    return [message for message in deployed.failure_messages() if message["kind"] == "refused_record"]


def test_a_deletion_of_a_download_never_counted_is_reported_against_its_aggregate(
    aws: None, sqs_queue: tuple[Any, str], lambda_context: Any
) -> None:
    # given a download the aggregator never counted (written before the stream)
    deployed = attached_after_one_download(aws, sqs_queue)
    # when it is deleted
    delete(deployed, "song1", 0)
    count_everything(deployed, lambda_context)
    # then the count went below 0, and that is reported naming the aggregate, for recover to recount
    assert aggregate(deployed.dynamodb)["DownloadCount"] == {"N": "-1"}
    [report] = refusals(deployed)
    assert (report["entityId"], report["board"]) == ("song1", "2018-01")
    assert "the count is -1" in report["reason"]


def test_a_count_below_0_whose_report_the_queue_refused_is_reported_by_the_retry(
    aws: None, sqs_queue: tuple[Any, str], lambda_context: Any
) -> None:
    # given a download never counted, deleted, and the failure queue refusing the first report (the handler then holds
    # the checkpoint: "the next reader meets them again and reports them")
    deployed = attached_after_one_download(aws, sqs_queue)
    delete(deployed, "song1", 0)
    send = deployed.dependencies.send_failures
    refused = iter([True])
    deployed.dependencies.send_failures = lambda messages: False if next(refused, False) else send(messages)
    with contextlib.suppress(two_readers.AggregatesNotWritten):
        deployed.invoke(deployed.window_event(deployed.stream_records(unfiltered=True), final=True), lambda_context)
    # when Lambda retries the window, the queue accepting now
    deployed.invoke(deployed.window_event(deployed.stream_records(unfiltered=True), final=True), lambda_context)
    # then the count below 0 is reported all the same, never lost with the failed send
    assert aggregate(deployed.dynamodb)["DownloadCount"] == {"N": "-1"}
    assert [report["entityId"] for report in refusals(deployed)] == ["song1"]


class ThrottlesLeavingTheIndex:
    """DynamoDB throttling the write that takes a count at 0 out of the index, once: the count's own write landed."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.throttled = 0

    def update_item(self, **parameters: Any) -> Any:
        if parameters["UpdateExpression"] == "REMOVE #period, #order" and not self.throttled:
            self.throttled += 1
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}}, "x")
        return self._client.update_item(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_count_at_0_whose_leaving_the_index_was_throttled_leaves_it_on_the_retry(
    retracting: Deployed, lambda_context: Any
) -> None:
    # given song1's only download counted, then deleted, and DynamoDB throttling the write that takes it out of the
    # index (the count's own write landed: the aggregate is at 0 and still listed, its record not yet passed)
    retracting.write("song1", 1)
    retracting.write("song2", 1)
    count_everything(retracting, lambda_context)
    delete(retracting, "song1", 0)
    throttling = ThrottlesLeavingTheIndex(retracting.dynamodb)
    retracting.use_store(throttling)
    count_everything(retracting, lambda_context)
    assert throttling.throttled == 1
    # when the shard is read again (the checkpoint waited below the record), DynamoDB accepting the write now
    count_everything(retracting, lambda_context)
    # then the board never lists a count of 0
    assert aggregate(retracting.dynamodb)["DownloadCount"] == {"N": "0"}
    assert listed(retracting.dynamodb) == {"song2": 1}


# ------------------------------------------------------------------------------------- the store, one shard's lists


def store(client: Any, schema: Schema | None = None) -> AggregateStore:
    progress = ProgressStore(client, PROGRESS_TABLE, clock=lambda: NOW)
    return AggregateStore(client, TABLE, schema or Schema(retractions=True), progress, clock=lambda: NOW)


def contributions(*signed: int, amount: int | Decimal = 1) -> list[Contribution]:
    """One record per number, in order: +n adds the download of sequence n, -n takes one back."""
    return [Contribution(pad_sequence(str(abs(n))), NOW, amount if n > 0 else -amount) for n in signed]


def test_a_list_with_a_retraction_written_again_or_longer_takes_back_only_what_is_above_the_watermark(
    dynamodb: Any,
) -> None:
    # given two downloads added and one taken back, by one write
    first = store(dynamodb).apply(KEY, SHARD, contributions(200, 205, -210))
    assert aggregate(dynamodb)["DownloadCount"] == {"N": "1"}
    # when the same list is written again (a retry), then nothing moves
    again = store(dynamodb).apply(KEY, SHARD, contributions(200, 205, -210))
    assert (first.added, again.added, again.already_applied) == (3, 0, 3)
    assert aggregate(dynamodb)["DownloadCount"] == {"N": "1"}
    # when a longer list brings one more retraction, then only that one is taken back
    store(dynamodb).apply(KEY, SHARD, contributions(200, 205, -210, -215))
    assert aggregate(dynamodb)["DownloadCount"] == {"N": "0"}
    assert "Month" not in aggregate(dynamodb)


def test_a_count_taken_below_0_is_refused_with_the_count(dynamodb: Any) -> None:
    outcome = store(dynamodb).apply(KEY, SHARD, contributions(-300))
    [(record, reason)] = outcome.refused
    assert record.sequence == pad_sequence("300")
    assert "the count is -1" in reason


def test_a_sum_taken_below_0_is_a_negative_total_never_reported(dynamodb: Any) -> None:
    # given revenue summed, a refund of 12.5 taken back from a product whose sales the aggregator never saw
    summed = Schema(amount="Revenue", retractions=True)
    outcome = store(dynamodb, summed).apply(KEY, SHARD, contributions(-300, amount=Decimal("12.5")))
    # then the total is -12.5, exactly, and nothing is refused: a sum may be negative
    assert outcome.refused == []
    assert Decimal(aggregate(dynamodb)["DownloadCount"]["N"]) == Decimal("-12.5")


def test_the_store_takes_nothing_out_of_the_index_when_a_retraction_leaves_the_count_above_0(dynamodb: Any) -> None:
    outcome = store(dynamodb).apply(KEY, SHARD, contributions(200, 205, -210))
    assert (outcome.writes, outcome.refused) == (1, [])
    assert aggregate(dynamodb)["LeaderboardOrder"] == {"N": str(order_of(1, "song1"))}


def test_without_retractions_a_negative_sale_that_brings_a_total_to_0_keeps_it_listed_at_one_write(
    dynamodb: Any,
) -> None:
    # given revenue summed without retractions, where a refund is written as a sale of negative amount (an INSERT)
    summed = Schema(amount="Revenue")
    store(dynamodb, summed).apply(KEY, SHARD, contributions(200, amount=Decimal(5)))
    # when the refund brings the total to 0
    outcome = store(dynamodb, summed).apply(KEY, SHARD, [Contribution(pad_sequence("205"), NOW, Decimal(-5))])
    # then it is one write, as before retractions existed, and the board still lists the product at 0
    assert outcome.writes == 1
    assert aggregate(dynamodb)["Month"] == {"S": "2018-01"}


def test_a_deletion_counted_from_a_child_shard_before_its_download_from_the_parent_ends_unlisted(
    dynamodb: Any,
) -> None:
    # given a download whose INSERT is in a parent shard and whose REMOVE is in its child, the child's records counted
    # while the parent is not yet read to its end (each shard under its own watermark: docs/exactly-once.md, rule 8)
    parent, child = SHARD, ShardRef(STREAM_ARN, "shardId-b")
    early = store(dynamodb).apply(KEY, child, contributions(-10))
    assert [reason for _, reason in early.refused] != []  # for a moment the count is -1: reported, a false alarm
    # when the parent's INSERT is counted
    store(dynamodb).apply(KEY, parent, contributions(900))
    # then the count is 0, and the board does not list it
    stored = aggregate(dynamodb)
    assert stored["DownloadCount"] == {"N": "0"}
    assert ("Month" in stored, "LeaderboardOrder" in stored) == (False, False)


def test_a_download_added_by_a_proven_write_that_brings_a_count_back_to_0_leaves_it_out_of_the_index(
    dynamodb: Any,
) -> None:
    # given an aggregate whose watermarks were pruned, at -1 and listed: a deletion counted from a child shard before
    # its download from the parent (the parent never wrote it: no watermark of the parent, so its write needs the
    # proof, a transaction with the parent's checkpoint)
    progress = ProgressStore(dynamodb, PROGRESS_TABLE, clock=lambda: NOW)
    parent = ShardRef(STREAM_ARN, "shardId-p")
    progress.first_seen(parent, "100", None)
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "2018-01"},
            "Month": {"S": "2018-01"},
            "DownloadCount": {"N": "-1"},
            "LeaderboardOrder": {"N": str(order_of(-1, "song1"))},
            WATERMARKS_PRUNED: {"N": "1"},
            WATERMARKS_PRUNED_UNDER: {"S": progress.genesis()},
        },
    )
    # when the parent's INSERT is counted
    outcome = store(dynamodb).apply(KEY, parent, contributions(900))
    assert (outcome.added, outcome.transactions) == (1, 1)
    # then the count is 0 and the board does not list it, as after a plain update
    stored = aggregate(dynamodb)
    assert stored["DownloadCount"] == {"N": "0"}
    assert ("Month" in stored, "LeaderboardOrder" in stored) == (False, False)
