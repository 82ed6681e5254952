"""The interrupted repair's message (Reconciler._interrupted_outcome): a Ctrl-C at
points of `_repair_all` the shipped tests do not reach, each message checked against the state it left."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

import leaderboard_tools.reconcile.reconciler as reconciler_module
from leaderboard_tools.interruption import Interrupted
from leaderboard_tools.reconcile.reconciler import _utc
from tests.unit.tools.operator_stack import (
    MONTH,
    REGION,
    DynamoDBTime,
    ModelAggregator,
    aggregate_item,
    deploy,
    on_every_new_client,
    reconciler,
    set_count,
    write_download,
)


def two_drifted_songs() -> Any:
    stack = deploy()
    for song in ("song1", "song2"):
        write_download(stack, song, f"{song}-d1")
        write_download(stack, song, f"{song}-d2")
    ModelAggregator(stack).run()
    for song in ("song1", "song2"):
        set_count(stack, song, MONTH, 5)
    return stack


def test_a_band_left_open_by_an_earlier_close_round_is_not_said_closed(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given two drifted songs; the repair closes its bands after each one opens (the band-id budget; in production
    # also after band_seconds / 2 of opening bands), and song1's close meets a changed held set every round
    # (CLOSE_ROUNDS conditional failures: a hot song), so that close leaves song1's band open and says so
    stack = two_drifted_songs()
    monkeypatch.setattr(reconciler_module, "BAND_ID_BUDGET", 0)
    sends: list[str] = []

    def before_update(params: dict[str, Any], **_: Any) -> Any:
        body = json.loads(params.get("body") or b"{}")
        if "REMOVE #band, #held" in body.get("UpdateExpression", "") and body["Key"]["songID"]["S"] == "song1":
            error = {"Error": {"Code": "ConditionalCheckFailedException", "Message": "held set changed"}}
            return AWSResponse(None, 400, {}, None), error
        return None

    def before_send(params: dict[str, Any], **_: Any) -> None:
        sends.append("send")
        if len(sends) == 2:  # Ctrl-C as song2's band record is about to be sent
            raise KeyboardInterrupt

    on_every_new_client(monkeypatch, "before-call.dynamodb.UpdateItem", before_update)
    on_every_new_client(monkeypatch, "before-call.sqs.SendMessage", before_send)
    repair = reconciler(stack)
    # when the repair runs and Ctrl-C lands after song1's close round
    with pytest.raises(Interrupted) as interrupted:
        repair.run_month(MONTH, repair=True)
    message = interrupted.value.outcome
    # then song1's band is still open on its aggregate ...
    assert "RecountBand" in (aggregate_item(stack, "song1", MONTH) or {})
    # ... and the message must not say it is closed
    assert "the bands of song1 in 2018-03 are closed" not in message, message


def test_the_cut_write_is_said_with_its_bands_own_deadline(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a drifted song, DynamoDB's time fixed (no time passes between a request and its answer), and Ctrl-C the
    # moment the repair's UpdateItem has landed (its response parsed, not yet returned to the repair)
    stack = two_drifted_songs()
    time = DynamoDBTime().install(monkeypatch)

    def after_update(parsed: dict[str, Any], model: Any, **_: Any) -> None:
        raise KeyboardInterrupt

    on_every_new_client(monkeypatch, "after-call.dynamodb.UpdateItem", after_update)
    clients_reconciler = reconciler(stack, sleep=time.sleep, clock=time.clock, monotonic=time.monotonic)
    with pytest.raises(Interrupted) as interrupted:
        clients_reconciler.run_month(MONTH, repair=True)
    message = interrupted.value.outcome
    band = (aggregate_item(stack, "song1", MONTH) or {})["RecountBand"]["S"]
    deadline = int(band.split("|")[1])
    # then the message names the band's own deadline, past which the aggregator reports it
    assert "was being written" in message, message
    assert f"until its deadline, {_utc(deadline)}" in message, (message, deadline, time.now)


def test_a_second_ctrl_c_after_the_close_landed_does_not_say_the_band_stays_open(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a drifted song; Ctrl-C while the repair waits to close its band, and a second Ctrl-C the moment the close
    # that the first one started (_close_at_once) has landed
    stack = two_drifted_songs()
    closes: list[str] = []

    def before_update(params: dict[str, Any], **_: Any) -> None:
        body = json.loads(params.get("body") or b"{}")
        if "REMOVE #band, #held" in body.get("UpdateExpression", ""):
            closes.append(body["Key"]["songID"]["S"])

    def after_update(parsed: dict[str, Any], **_: Any) -> None:
        if closes and closes[-1] == "song1" and "Error" not in parsed:
            closes.append("landed")
            raise KeyboardInterrupt  # the second Ctrl-C: the close has landed

    on_every_new_client(monkeypatch, "before-call.dynamodb.UpdateItem", before_update)
    on_every_new_client(monkeypatch, "after-call.dynamodb.UpdateItem", after_update)
    first: list[str] = []

    def sleep(seconds: float) -> None:
        if not first and "RecountBand" in (aggregate_item(stack, "song2", MONTH) or {}):
            first.append("ctrl-c")
            raise KeyboardInterrupt  # the first Ctrl-C: both bands open, waiting for their close

    repair = reconciler(stack, sleep=sleep)
    with pytest.raises(Interrupted) as interrupted:
        repair.run_month(MONTH, repair=True)
    message = interrupted.value.outcome
    # then song1's band is closed ...
    assert "landed" in closes
    assert "RecountBand" not in (aggregate_item(stack, "song1", MONTH) or {})
    # ... and the message does not say that it stays open: at most that it may (the cut close's answer never came)
    said = [part for part in message.split("; ") if part.startswith("the bands of") and "song1 in 2018-03" in part]
    assert all("may stay open" in part for part in said), message
    # and song2's band, whose close never began, is open and said to stay open
    assert "RecountBand" in (aggregate_item(stack, "song2", MONTH) or {})
    assert any(part.startswith("the bands of song2 in 2018-03 stay open") for part in message.split("; ")), message


def test_ctrl_c_during_the_first_songs_recount_says_nothing_was_written(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a drifted song and Ctrl-C during the repair's recount of it (_settle's _recount_songs: a read of the
    # song's downloads, before its band's record is sent or its aggregate written)
    stack = two_drifted_songs()
    repair = reconciler(stack)

    def interrupted_recount(*_: Any, **__: Any) -> Any:
        raise KeyboardInterrupt

    repair._recount_songs = interrupted_recount  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt) as interrupted:
        repair.run_month(MONTH, repair=True)
    message = getattr(interrupted.value, "outcome", "nothing was written")
    sqs = boto3.client("sqs", region_name=REGION)
    attributes = sqs.get_queue_attributes(QueueUrl=stack.queue_url, AttributeNames=["All"])["Attributes"]
    # then nothing was written: no band record sent, no aggregate changed
    assert sum(int(v) for k, v in attributes.items() if k.startswith("ApproximateNumberOfMessages")) == 0
    assert "RecountBand" not in (aggregate_item(stack, "song1", MONTH) or {})
    # and docs/operations.md says the line is then "interrupted: nothing was written ...", not that a write was cut
    assert "was being written" not in message, message


def test_ctrl_c_between_the_band_record_and_the_repair_says_the_queue_holds_a_record(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a deployment without a band queue (the band's record goes to the failure queue, visible at its deadline
    # whatever became of the band: the failure_queue_messages alarm then fires), and Ctrl-C the moment song1's band
    # record has been sent, before its aggregate is written
    stack = two_drifted_songs()

    def after_send(parsed: dict[str, Any], **_: Any) -> None:
        raise KeyboardInterrupt

    on_every_new_client(monkeypatch, "after-call.sqs.SendMessage", after_send)
    repair = reconciler(stack)
    with pytest.raises(Interrupted) as interrupted:
        repair.run_month(MONTH, repair=True)
    message = interrupted.value.outcome
    sqs = boto3.client("sqs", region_name=REGION)
    attributes = sqs.get_queue_attributes(QueueUrl=stack.queue_url, AttributeNames=["All"])["Attributes"]
    # then the failure queue holds the band's record, and no aggregate was changed
    assert int(attributes["ApproximateNumberOfMessagesDelayed"]) + int(attributes["ApproximateNumberOfMessages"]) == 1
    assert "RecountBand" not in (aggregate_item(stack, "song1", MONTH) or {})
    # and the message says so, as the clock refusal's does ("the failure queue holds the record of a band never
    # opened, which recover deletes"): else the alarm that fires at the deadline is unexplained
    assert "queue" in message, message
