"""A review of the operator tools: one test per finding.

Every test states what the operator tools promise (docs/operations.md, *Reconcile and recover*; the
docstrings of reconcile.py and recover.py). Each was a strict xfail while its finding was open and
passes since its fix (finding 4, the last, at stop 22: the repair's band).
"""

from __future__ import annotations

import json
import time
from typing import Any

import boto3

from aggregate_store import AggregateStore
from aggregate_writes import Contribution
from delivery import ShardRef
from download_records import AggregateKey, Download, Rejected, Schema, parse_record
from leaderboard_core.bookkeeping import pad_sequence
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile import Reconciler
from leaderboard_tools.recover import recover
from shard_progress import ProgressStore
from tests.unit.operator_stack import (
    QUICK_BANDS,
    REGION,
    ModelAggregator,
    MotoStack,
    aggregate_item,
    deploy,
    set_count,
    stored_count,
    write_download,
)

MONTH = "2018-03"
WEEK = "2018-W10"
"""The ISO week of 2018-03-10, the operator stack's default download timestamp."""


def _send(stack: MotoStack, body: dict[str, Any]) -> None:
    boto3.client("sqs", region_name=REGION).send_message(QueueUrl=stack.queue_url, MessageBody=json.dumps(body))


def _queue_depth(stack: MotoStack) -> int:
    attributes = boto3.client("sqs", region_name=REGION).get_queue_attributes(
        QueueUrl=stack.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def _recover(stack: MotoStack) -> Any:
    clients = operator_clients(region=REGION)
    deployment = discover(clients, stack.table)
    reconciler = Reconciler(clients, deployment, empty_page_pause=0, **QUICK_BANDS)
    return recover(clients, deployment, reconciler, stack.queue_url, visibility_seconds=30)


def test_a_refused_record_of_a_week_board_never_lowers_that_board_below_its_downloads(aws: None) -> None:
    # given a stack whose aggregator keeps month and week boards (LEADERBOARD_PERIODS = month,week),
    # three downloads of song1, counted exactly on both boards, the aggregator caught up
    stack = deploy(aggregator_settings={"LEADERBOARD_PERIODS": "month,week"})
    for number in range(3):
        write_download(stack, "song1", f"d{number}")
    ModelAggregator(stack).run()
    set_count(stack, "song1", WEEK, 3)
    ModelAggregator(stack).run()
    assert (stored_count(stack, "song1", MONTH), stored_count(stack, "song1", WEEK)) == (3, 3)
    # and the aggregator's refused_record for the week board (as _refused_contribution writes it: entityId and
    # period = the board id; a corrupt watermark, an overflow or a pruning under another progress table refuse
    # records of any board)
    _send(
        stack,
        {
            "kind": "refused_record",
            "reason": "Watermark_X is 'garbage', not '<40 digits>|<second>|<stream label>|<shard id>'",
            "sequenceNumber": "4",
            "entityId": "song1",
            "period": WEEK,
            "record": {"entityId": "song1", "period": WEEK, "created": 1520676000},
        },
    )
    # when the operator runs recover
    _recover(stack)
    # then the week board still holds its three downloads (recover cannot recount a week: it must leave it)
    assert stored_count(stack, "song1", WEEK) == 3


def test_a_records_trimmed_message_is_kept_while_boards_recover_cannot_recount_miss_downloads(aws: None) -> None:
    # given a stack with month and week boards, three downloads of song1, of which the stream lost two before the
    # aggregator read them: the month board was repaired by hand, the week board still counts one
    stack = deploy(aggregator_settings={"LEADERBOARD_PERIODS": "month,week"})
    for number in range(3):
        write_download(stack, "song1", f"d{number}")
    ModelAggregator(stack).run()
    set_count(stack, "song1", WEEK, 1)
    ModelAggregator(stack).run()
    # and the aggregator's report of the lost records
    _send(
        stack,
        {
            "kind": "records_trimmed",
            "shardId": "shardId-1",
            "streamArn": stack.stream_arn,
            "checkpoint": "1",
            "firstReadableSequence": "900",
        },
    )
    # when recover runs
    report = _recover(stack)
    # then the message that names the loss is not deleted while a board it touches is still short
    assert stored_count(stack, "song1", WEEK) == 1
    assert (report.deleted, _queue_depth(stack)) == (0, 1)


def test_the_recount_counts_exactly_the_downloads_the_aggregator_counts(aws: None) -> None:
    # given a stack with category boards (CATEGORY_ATTRIBUTE = Genre), one good download of song1 and one whose
    # Genre is a number
    stack = deploy(aggregator_settings={"CATEGORY_ATTRIBUTE": "Genre"})
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    names = stack.names
    for download_id, genre in (("d1", {"S": "rock"}), ("d2", {"N": "7"})):
        dynamodb.put_item(
            TableName=stack.table,
            Item={
                names.entity: {"S": "song1"},
                names.sort_key: {"S": download_id},
                names.timestamp: {"S": "2018-03-10T10:00:00Z"},
                "Genre": genre,
            },
        )
    # the shipped aggregator's parser counts the first and rejects the second (reported, never countable)
    schema = Schema(category="Genre")
    image = {"songID": {"S": "song1"}, "SK": {"S": "d2"}, "Timestamp": {"S": "2018-03-10T10:00:00Z"}}

    def parsed(genre: dict[str, str]) -> Any:
        stream = {"SequenceNumber": "2", "NewImage": image | {"Genre": genre}}
        return parse_record({"eventName": "INSERT", "dynamodb": stream}, schema)

    assert isinstance(parsed({"S": "rock"}), Download)
    assert isinstance(parsed({"N": "7"}), Rejected)
    # and the month board holds what the aggregator counted: one, the stream caught up
    ModelAggregator(stack).run()
    set_count(stack, "song1", MONTH, 1)
    ModelAggregator(stack).run()
    # when reconcile recounts the month
    clients = operator_clients(region=REGION)
    report = Reconciler(clients, discover(clients, stack.table), empty_page_pause=0).run_month(MONTH)
    # then it finds no difference: the recount and the aggregator agree on what a download is
    assert [(d.entity_id, d.stored, d.recounted) for d in report.differences] == []


def test_a_download_written_after_a_repair_returned_is_counted_by_the_aggregator(aws: None) -> None:
    # given song1 with two downloads and a hand-edited count of 5, the aggregator caught up
    stack = deploy()
    write_download(stack, "song1", "d1")
    write_download(stack, "song1", "d2")
    ModelAggregator(stack).run()
    set_count(stack, "song1", MONTH, 5)
    ModelAggregator(stack).run()
    # and reconcile --repair has set it right and returned (a clock margin of 2 s: the fence lies 2 s past the
    # recount, which a repair that returned at once would leave in the future)
    clients = operator_clients(region=REGION)
    settings = QUICK_BANDS | {"clock_margin_seconds": 2}
    report = Reconciler(clients, discover(clients, stack.table), empty_page_pause=0, **settings).run_month(
        MONTH, repair=True
    )
    assert [d.state for d in report.differences] == ["repaired"]
    assert stored_count(stack, "song1", MONTH) == 2
    # when a listener downloads song1 afterwards and the shipped aggregator's store counts its record
    write_download(stack, "song1", "d3")
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    shard_id = ModelAggregator(stack).shard_ids()[0]
    assert stack.progress_table is not None
    store = AggregateStore(dynamodb, stack.table, Schema(), ProgressStore(dynamodb, stack.progress_table))
    outcome = store.apply(
        AggregateKey("song1", MONTH),
        ShardRef(stack.stream_arn, shard_id),
        [Contribution(pad_sequence("9" * 25), int(time.time()))],
    )
    # then it is counted, not refused as "counted by a recount" (it was written after the recount ended)
    assert (outcome.added, [reason for _, reason in outcome.refused]) == (1, [])
    assert stored_count(stack, "song1", MONTH) == 3
    assert aggregate_item(stack, "song1", MONTH) is not None


def test_a_ttl_attribute_that_is_not_a_number_does_not_stop_the_recount(aws: None) -> None:
    # given a table with TTL on ExpiresAt, a download whose ExpiresAt is a string (DynamoDB's TTL acts only on
    # Number attributes, so it never expires) and a drifted count
    stack = deploy(ttl_attribute="ExpiresAt")
    names = stack.names
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName=stack.table,
        Item={
            names.entity: {"S": "song1"},
            names.sort_key: {"S": "d1"},
            names.timestamp: {"S": "2018-03-10T10:00:00Z"},
            "ExpiresAt": {"S": "never"},
        },
    )
    ModelAggregator(stack).run()
    set_count(stack, "song1", MONTH, 4)
    # when reconcile recounts the month, then it reports the difference instead of raising KeyError
    clients = operator_clients(region=REGION)
    report = Reconciler(clients, discover(clients, stack.table), empty_page_pause=0).run_month(MONTH)
    assert [(d.entity_id, d.stored, d.recounted) for d in report.differences] == [("song1", 4, 1)]


def test_recover_on_a_summing_deployment_still_answers_the_messages_it_can(aws: None) -> None:
    # given a deployment that sums Seconds (SUM_ATTRIBUTE), whose failure queue holds a rejected download (reported
    # and deleted by design) and a refused record (which this recount cannot repair: it counts, never sums)
    stack = deploy(aggregator_settings={"SUM_ATTRIBUTE": "Seconds"})
    _send(stack, {"kind": "rejected_download", "reason": "Seconds is missing", "sequenceNumber": "7"})
    _send(stack, {"kind": "refused_record", "reason": "overflow", "entityId": "song1", "period": MONTH})
    # when recover runs, then it finishes: the rejected download is answered, the refused record kept with a reason
    report = _recover(stack)
    assert (report.deleted, len(report.kept)) == (1, 1)
