"""`recover` with retractions: the failure kinds that following edits and deletions adds, each answered.

The messages are the ones the shipped aggregator writes (its failure_messages.py, from the records its parse and store
made of moto's stream); the oracle is the test's own, the download items left in the table.
"""

from __future__ import annotations

import json
from typing import Any

import boto3

from aggregate_writes import Contribution
from delivery import ShardRef
from download_records import AggregateKey, Download, parse_record
from failure_messages import failure_message_body, refused_contribution, refused_message, rejected_message
from leaderboard_core.bookkeeping import pad_sequence
from shard_reader import _as_lambda_record
from tests.unit.tools.operator_stack import (
    MONTH,
    REGION,
    ModelAggregator,
    MotoStack,
    deploy,
    run_recover,
    stored_count,
    write_download,
)


def client() -> Any:
    return boto3.client("dynamodb", region_name=REGION)


def send(stack: MotoStack, message: dict[str, Any]) -> None:
    """As the aggregator sends a report: its body as failure_message_body makes it (a large record summarised)."""
    boto3.client("sqs", region_name=REGION).send_message(
        QueueUrl=stack.queue_url, MessageBody=failure_message_body(message)
    )


def delete(stack: MotoStack, sort_key: str) -> None:
    client().delete_item(TableName=stack.table, Key={"songID": {"S": "song1"}, "SK": {"S": sort_key}})


def last_record(stack: MotoStack) -> tuple[ShardRef, dict[str, Any]]:
    """The stream's last record, as the aggregator reads it (a Lambda event's form)."""
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    shard_id = ModelAggregator(stack).shard_ids()[0]
    iterator = streams.get_shard_iterator(
        StreamArn=stack.stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
    )
    records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    shard = ShardRef(stack.stream_arn, shard_id)
    return shard, _as_lambda_record(records[-1], shard)


def test_a_count_a_retraction_took_below_zero_is_recounted_by_recover(aws: None) -> None:
    # given d1 and d3 written but never counted (older than the stream, say: the aggregator moved past them), d2
    # counted, then d1 and d3 deleted: their retractions take back what was never counted here, the count goes to -1
    stack = deploy(retractions=True)
    write_download(stack, "song1", "d1")
    write_download(stack, "song1", "d3")
    aggregator = ModelAggregator(stack)
    aggregator.skip()
    write_download(stack, "song1", "d2")
    delete(stack, "d1")
    delete(stack, "d3")
    aggregator.run()
    assert stored_count(stack, "song1", MONTH) == -1
    # and the aggregator's report of it in the failure queue, naming the aggregate
    [(song, board, sequence)] = aggregator.refused
    [reason] = aggregator.refusals
    assert "a retraction took back a download never counted here" in reason
    shard = ShardRef(stack.stream_arn, aggregator.shard_ids()[0])
    refused = refused_contribution(AggregateKey(song, board), shard, Contribution(pad_sequence(sequence), 0), reason)
    send(stack, refused_message(refused))
    # when recover runs
    report = run_recover(stack)
    # then the aggregate is recounted and repaired to what the table holds (d2), and the message is deleted
    assert stored_count(stack, "song1", MONTH) == 1
    assert [difference["state"] for board in report.reconciled for difference in board["differences"]] == ["repaired"]
    assert (report.deleted, report.kept) == (1, [])


def test_a_download_edited_into_one_that_cannot_be_counted_is_reported_with_its_item_s_key(aws: None) -> None:
    # given d1 counted, then its Timestamp edited to something no board can hold: the aggregator takes d1 back and
    # reports the MODIFY (old and new images) as a rejected download, once with its record whole and once with a
    # record too large for a message (summarised to its keys)
    stack = deploy(retractions=True)
    write_download(stack, "song1", "d1")
    ModelAggregator(stack).run()
    client().update_item(
        TableName=stack.table,
        Key={"songID": {"S": "song1"}, "SK": {"S": "d1"}},
        UpdateExpression="SET #t = :t",
        ExpressionAttributeNames={"#t": "Timestamp"},
        ExpressionAttributeValues={":t": {"S": "yesterday"}},
    )
    shard, record = last_record(stack)
    parsed = parse_record(record, ModelAggregator(stack).settings.schema)
    assert isinstance(parsed, Download)
    assert parsed.rejection is not None
    message = rejected_message(parsed.rejection, shard)
    send(stack, message)
    large = json.loads(json.dumps(message))
    large["record"]["dynamodb"]["NewImage"]["Padding"] = {"S": "x" * 250_000}
    send(stack, large)
    # when recover runs
    report = run_recover(stack)
    # then each is reported with the item's key and the reason, and deleted: the item is what to fix
    assert [entry["key"] for entry in report.rejected_downloads] == [{"songID": "song1", "SK": "d1"}] * 2
    assert all("Timestamp" in entry["reason"] for entry in report.rejected_downloads)
    assert (report.deleted, report.kept) == (2, [])
