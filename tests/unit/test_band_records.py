"""The repairs' band records in the module's band queue: a band closed normally leaves none, a killed repair's one does.

With the band queue (`RECOUNT_BAND_QUEUE_URL`, the module's `<name>-recount-bands`), a repair records each band there
before opening it and deletes the record when it closes the band, so the failure queue (and its alarm) sees nothing of
a repair that went well, and a record that ages in the band queue is a band whose repair died. Played on moto with the
shipped repair and recover, against the shipped aggregator's store (tests/unit/operator_stack.ModelAggregator).
"""

from __future__ import annotations

import json
from typing import Any

import boto3

from tests.unit.operator_stack import REGION, MotoStack, aggregate_item, drifted_song, stored_count
from tests.unit.test_repair_edges import (
    MONTH,
    killed_repair_holding_a_missed_download,
    queue_counts,
    reconciler,
    run_recover,
    wait_past,
)


def band_queue_counts(stack: MotoStack) -> tuple[int, int, int]:
    """(visible, in flight, delayed) messages of the band queue."""
    assert stack.band_queue_url is not None
    attributes = boto3.client("sqs", region_name=REGION).get_queue_attributes(
        QueueUrl=stack.band_queue_url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return (
        int(attributes["ApproximateNumberOfMessages"]),
        int(attributes["ApproximateNumberOfMessagesNotVisible"]),
        int(attributes["ApproximateNumberOfMessagesDelayed"]),
    )


def band_records(stack: MotoStack) -> list[dict[str, Any]]:
    assert stack.band_queue_url is not None
    messages = (
        boto3.client("sqs", region_name=REGION)
        .receive_message(QueueUrl=stack.band_queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        .get("Messages", [])
    )
    return [json.loads(message["Body"]) for message in messages]


def test_a_repair_that_closes_its_band_leaves_no_record_in_either_queue(aws: None) -> None:
    # given a drifted song of a deployment with the band queue
    stack = drifted_song(band_queue=True)
    # when it is repaired normally
    report = reconciler(stack).run_month(MONTH, repair=True)
    # then its band opened and closed, and neither queue holds anything: the failure queue's alarm stays quiet
    assert [difference.state for difference in report.differences] == ["repaired"]
    assert stored_count(stack, "song1", MONTH) == 2
    assert band_queue_counts(stack) == (0, 0, 0)
    assert queue_counts(stack) == (0, 0)


def test_a_killed_repair_leaves_its_record_in_the_band_queue_and_recover_alone_settles_it(aws: None) -> None:
    # given a repair killed while its band held d3, a download its recount missed, on a song nobody downloads again
    stack = drifted_song(band_queue=True)
    deadline = killed_repair_holding_a_missed_download(stack)
    # then its record is in the band queue at once (where it ages into the alarm), none in the failure queue
    [record] = band_records(stack)
    assert (record["kind"], record["entityId"], int(record["deadline"])) == ("recount_band", "song1", deadline)
    assert queue_counts(stack) == (0, 0)
    # when the deadline passes and recover runs, with no further download
    wait_past(deadline)
    report = run_recover(stack)
    # then the aggregate is exact, no band is left on it, and both queues are empty (recover's own band closed)
    assert [entry["done"] for entry in report.bands] == [False]
    assert (report.kept, report.deleted) == ([], 1)
    assert stored_count(stack, "song1", MONTH) == 3
    assert not {"RecountBand", "RecountHeld"} & set(aggregate_item(stack, "song1", MONTH) or {})
    assert band_queue_counts(stack) == (0, 0, 0)
    assert queue_counts(stack) == (0, 0)


def test_a_repair_deletes_only_its_own_record_and_leaves_another_repair_s_visible(aws: None) -> None:
    # given the band queue holding another repair's record, still in progress
    stack = drifted_song(band_queue=True)
    assert stack.band_queue_url is not None
    other = {"kind": "recount_band", "entityId": "song9", "period": MONTH, "band": "other|9999999999"}
    other["deadline"] = 9999999999
    boto3.client("sqs", region_name=REGION).send_message(QueueUrl=stack.band_queue_url, MessageBody=json.dumps(other))
    # when this repair runs and closes its band
    reconciler(stack).run_month(MONTH, repair=True)
    # then only the other repair's record is left, visible
    assert band_records(stack) == [other]
    assert band_queue_counts(stack)[2] == 0
