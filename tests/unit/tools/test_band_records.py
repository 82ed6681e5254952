"""A repair's band records: in the band queue, delayed toward the deadline, met there by the aggregator.

With the band queue (`RECOUNT_BAND_QUEUE_URL`, the module's `<name>-recount-bands`), a repair records each band there
before opening it; the band queue's mapping hands the record to the aggregator (`band_records.py`) at the deadline,
which copies it to the failure queue only if the band is still open then: a repair that goes well leaves nothing in
the failure queue, a repair that died leaves a `recount_band` there for `recover`. Played on moto with the shipped
repair, recover and aggregator handler.
"""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest

import aggregator
from aggregate_store import AggregateStore
from band_records import BandRecord, is_band_record_event, settle, verdict
from download_records import Schema
from failure_messages import send_to_failure_queue
from shard_progress import ProgressStore
from tests.unit.aggregator.handler_on_moto import aggregator_dependencies, aggregator_settings
from tests.unit.tools.operator_stack import (
    MONTH,
    REGION,
    MotoStack,
    aggregate_item,
    drifted_song,
    killed_repair_holding_a_missed_download,
    queue_counts,
    reconciler,
    run_recover,
    stored_count,
)


def band_queue_counts(stack: MotoStack) -> tuple[int, int]:
    """(visible, delayed) messages of the band queue."""
    assert stack.band_queue_url is not None
    attributes = boto3.client("sqs", region_name=REGION).get_queue_attributes(
        QueueUrl=stack.band_queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesDelayed"])


def mapping_event(stack: MotoStack, wait_seconds: float) -> dict[str, Any]:
    """What the band queue's mapping delivers once the delays are over: its records, as SQS events carry them."""
    assert stack.band_queue_url is not None
    time.sleep(wait_seconds)
    messages = (
        boto3.client("sqs", region_name=REGION)
        .receive_message(QueueUrl=stack.band_queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        .get("Messages", [])
    )
    return {
        "Records": [
            {"messageId": message["MessageId"], "body": message["Body"], "eventSource": "aws:sqs"}
            for message in messages
        ]
    }


def failure_bodies(stack: MotoStack) -> list[dict[str, Any]]:
    messages = (
        boto3.client("sqs", region_name=REGION)
        .receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        .get("Messages", [])
    )
    return [json.loads(message["Body"]) for message in messages]


def store_of(stack: MotoStack) -> AggregateStore:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    return AggregateStore(dynamodb, stack.table, Schema(), ProgressStore(dynamodb, stack.progress_table or ""))


def settled_on(stack: MotoStack, event: dict[str, Any], now: float | None = None) -> Any:
    sqs = boto3.client("sqs", region_name=REGION)
    return settle(
        event,
        store_of(stack).read,
        lambda messages: send_to_failure_queue(sqs, stack.queue_url, messages),
        (lambda: now) if now is not None else time.time,
    )


def test_a_repair_records_its_band_in_the_band_queue_delayed_and_nothing_in_the_failure_queue(aws: None) -> None:
    # given a drifted song of a deployment with the band queue
    stack = drifted_song(band_queue=True)
    # when it is repaired normally
    report = reconciler(stack).run_month(MONTH, repair=True)
    # then the band's record waits, delayed, in the band queue, and the failure queue (and its alarm) sees nothing
    assert [difference.state for difference in report.differences] == ["repaired"]
    assert band_queue_counts(stack) == (0, 1)
    assert queue_counts(stack) == (0, 0)


@pytest.mark.slow  # waits out the band queue's delay in real time (about a minute)
def test_the_record_of_a_band_its_repair_closed_is_done_at_the_deadline_without_a_report(aws: None) -> None:
    # given a song repaired normally, its band closed
    stack = drifted_song(band_queue=True)
    reconciler(stack).run_month(MONTH, repair=True)
    deadline = int((aggregate_item(stack, "song1", MONTH) or {})["RecountClosed"]["S"].split("|")[1])
    # when the band queue's mapping hands its record to the aggregator once the deadline has passed
    event = mapping_event(stack, max(0.0, deadline + 62.5 - time.time()))
    settled = settled_on(stack, event)
    # then the record is done (not retried) and nothing reaches the failure queue
    assert len(event["Records"]) == 1
    assert (settled.gone, settled.open, settled.expired, settled.retry) == (1, 0, [], [])
    assert failure_bodies(stack) == []


@pytest.mark.slow  # waits out the band queue's delay in real time (about a minute)
def test_a_killed_repair_s_band_reaches_the_failure_queue_at_its_deadline_and_recover_alone_settles_it(
    aws: None,
) -> None:
    # given a repair killed while its band held d3, a download its recount missed, on a song nobody downloads again
    stack = drifted_song(band_queue=True)
    deadline = killed_repair_holding_a_missed_download(stack, band_seconds=5)
    assert queue_counts(stack) == (0, 0)
    # when the band queue's mapping hands the record to the aggregator after the deadline
    event = mapping_event(stack, max(0.0, deadline + 62.5 - time.time()))
    settled = settled_on(stack, event, now=deadline + 61)
    # then the band is reported to the failure queue as a recount_band, and recover alone makes the count exact
    assert [record.deadline for record in settled.expired] == [deadline]
    assert [(body["kind"], body["entityId"], body["deadline"]) for body in failure_bodies(stack)] == [
        ("recount_band", "song1", deadline)
    ]
    report = run_recover(stack)
    assert report.kept == []
    assert stored_count(stack, "song1", MONTH) == 3
    assert not {"RecountBand", "RecountHeld"} & set(aggregate_item(stack, "song1", MONTH) or {})


def test_a_band_still_open_before_its_deadline_goes_back_to_the_queue(aws: None) -> None:
    # given a killed repair's band, whose record arrives before the deadline (a delay is at most 15 minutes)
    stack = drifted_song(band_queue=True)
    deadline = killed_repair_holding_a_missed_download(stack, band_seconds=120)
    band = ((aggregate_item(stack, "song1", MONTH) or {}).get("RecountBand") or {})["S"]
    record = BandRecord("song1", MONTH, band, deadline)
    event = {"Records": [{"messageId": "m1", "body": json.dumps(record.as_message()), "eventSource": "aws:sqs"}]}
    # when the aggregator meets it
    settled = settled_on(stack, event, now=deadline - 100)
    # then it is retried later, and nothing is reported yet
    assert (settled.open, settled.retry) == (1, ["m1"])
    assert failure_bodies(stack) == []


@pytest.mark.parametrize(
    "body",
    ["not json", json.dumps({"kind": "something else"}), json.dumps({"kind": "recount_band", "entityId": 3})],
    ids=["not JSON", "another kind", "wrong types"],
)
def test_a_band_record_not_understood_is_reported_and_done(aws: None, body: str) -> None:
    # given a message in the band queue that is no band record
    stack = drifted_song(band_queue=True)
    event = {"Records": [{"messageId": "m1", "body": body, "eventSource": "aws:sqs"}]}
    # when the aggregator meets it
    settled = settled_on(stack, event)
    # then it is reported to the failure queue, saying why, and not retried
    assert settled.retry == []
    [report] = failure_bodies(stack)
    assert report["kind"] == "refused_record"
    assert report["reason"].startswith("band record not understood")


def test_a_band_record_whose_report_the_failure_queue_refuses_goes_back_to_the_queue(aws: None) -> None:
    # given an expired band's record and a failure queue that refuses the send
    stack = drifted_song(band_queue=True)
    deadline = killed_repair_holding_a_missed_download(stack, band_seconds=120)
    band = ((aggregate_item(stack, "song1", MONTH) or {}).get("RecountBand") or {})["S"]
    body = json.dumps(BandRecord("song1", MONTH, band, deadline).as_message())
    event = {"Records": [{"messageId": "m1", "body": body, "eventSource": "aws:sqs"}]}
    # when the aggregator meets it
    settled = settle(event, store_of(stack).read, lambda messages: False, lambda: deadline + 61)
    # then it is not taken for done: it comes back
    assert (settled.expired, settled.retry) == ([], ["m1"])


def test_a_band_record_an_older_repair_wrote_with_period_is_read_as_its_board() -> None:
    # given a band record naming its board `period`, as repairs wrote it before `board`
    body = {"kind": "recount_band", "entityId": "song1", "period": MONTH, "band": "token|1000", "deadline": 1000}
    # when the aggregator parses it, then it is the record of that board, and written again it says `board`
    record = BandRecord.parse(json.dumps(body))
    assert record == BandRecord("song1", MONTH, "token|1000", 1000)
    assert record.as_message() == {**{key: value for key, value in body.items() if key != "period"}, "board": MONTH}


def test_only_sqs_events_are_band_record_events() -> None:
    assert is_band_record_event({"Records": [{"eventSource": "aws:sqs", "body": "{}"}]})
    assert not is_band_record_event({"Records": [{"eventSource": "aws:dynamodb"}]})
    assert not is_band_record_event({"Records": []})
    assert not is_band_record_event({"shardId": "s", "eventSourceARN": "arn"})


def test_a_band_is_expired_only_past_its_deadline_and_the_clock_margin() -> None:
    record = BandRecord("song1", MONTH, "token|1000", 1000)
    carrying = {"RecountBand": {"S": "token|1000"}}
    assert verdict(record, carrying, 1000 + 60) == "open"
    assert verdict(record, carrying, 1000 + 61) == "expired"
    assert verdict(record, {"RecountBand": {"S": "other|2000"}}, 5000) == "gone"
    assert verdict(record, None, 5000) == "gone"


def test_the_handler_answers_the_band_queue_s_mapping_with_the_records_to_retry(aws: None, lambda_context: Any) -> None:
    # given the aggregator wired to a stack whose killed repair left a band open, and that band's record arriving early
    stack = drifted_song(band_queue=True)
    deadline = killed_repair_holding_a_missed_download(stack, band_seconds=120)
    band = ((aggregate_item(stack, "song1", MONTH) or {}).get("RecountBand") or {})["S"]
    settings = aggregator_settings(
        aggregates_table_name=stack.table,
        progress_table_name=stack.progress_table or "",
        failure_queue_url=stack.queue_url,
    )
    dependencies = aggregator_dependencies(
        settings,
        boto3.client("dynamodb", region_name=REGION),
        boto3.client("dynamodbstreams", region_name=REGION),
        boto3.client("sqs", region_name=REGION),
    )
    early = {"messageId": "early", "body": json.dumps(BandRecord("song1", MONTH, band, deadline).as_message())}
    closed = {"messageId": "closed", "body": json.dumps(BandRecord("song1", MONTH, "gone|1", 1).as_message())}
    event = {"Records": [early | {"eventSource": "aws:sqs"}, closed | {"eventSource": "aws:sqs"}]}
    # when the band queue's mapping invokes the handler
    response = aggregator.handle(event, lambda_context, settings, dependencies)
    # then the open band's record goes back to the queue, the closed one is done, and nothing is reported
    assert response == {"batchItemFailures": [{"itemIdentifier": "early"}]}
    assert failure_bodies(stack) == []


def test_a_band_record_past_its_deadline_whose_aggregate_cannot_be_read_is_retried_and_counted_unsettled() -> None:
    # given an expired band's record whose aggregate read fails (a permissions boundary, a disabled key)
    record = BandRecord("song1", MONTH, "token|1000", 1000)
    event = {"Records": [{"messageId": "m1", "body": json.dumps(record.as_message()), "eventSource": "aws:sqs"}]}

    def denied(_key: Any) -> dict[str, Any]:
        raise RuntimeError("AccessDenied")

    # when the aggregator meets it well past the deadline
    settled = settle(event, denied, lambda messages: True, lambda: 1000 + 10**6)
    # then it comes back, and is counted as unsettled (the alarm's metric), saying why
    assert settled.retry == ["m1"]
    assert [why for _, why in settled.unsettled] == ["its aggregate could not be read: AccessDenied"]
