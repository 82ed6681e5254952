"""A repair at its edges: killed on an aggregate nobody downloads again, run from a wrong clock, overlapping another.

Played on moto with the shipped repair (leaderboard_tools.reconcile) and recover against the shipped aggregator's
store (tests/unit/tools/operator_stack.ModelAggregator); moto answers with a `Date` header from this machine's clock,
except where a test's DynamoDBTime stamps it (a repair's clocks measured the same under any load).
"""

from __future__ import annotations

import io
import json
import time
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody

from aggregate_writes import watermark_value
from delivery import ShardRef
from leaderboard_tools.commands import EXIT_PENDING
from leaderboard_tools.commands.reconcile import reconcile_exit_code
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile import ClockDisagrees, Reconciler
from leaderboard_tools.recover import recover
from tests.unit.tools.operator_stack import (
    MONTH,
    QUICK_BANDS,
    QUICK_RECOVERY,
    REGION,
    DynamoDBTime,
    ModelAggregator,
    MotoStack,
    RepairKilled,
    aggregate_item,
    answer_with,
    band_of,
    deploy,
    downloads_in_table,
    drifted_song,
    given_up_batch,
    killed_repair_holding_a_missed_download,
    once_the_band_opens,
    queue_counts,
    reconciler,
    run,
    run_recover,
    set_count,
    stored_count,
    write_download,
)

HOUR = 3600.0


def queue_bodies(stack: MotoStack) -> list[dict[str, Any]]:
    """Every message the queue holds, delayed ones included once visible: received, then made visible again."""
    sqs = boto3.client("sqs", region_name=REGION)
    messages = sqs.receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0).get(
        "Messages", []
    )
    return [json.loads(message["Body"]) for message in messages]


def wait_past(deadline: int) -> None:
    """Until the band's deadline has passed and its record, delayed as long, is visible."""
    time.sleep(max(0.0, deadline + 2.5 - time.time()))


def test_a_band_its_killed_repair_left_on_an_aggregate_nobody_downloads_again_is_recounted_by_recover(
    aws: None,
) -> None:
    # given a drifted song (2 downloads, hand-edited to 5) whose repair was killed while its band held d3, a download
    # its recount missed, and that nobody downloads again
    stack = drifted_song()
    deadline = killed_repair_holding_a_missed_download(stack, band_seconds=5)
    assert stored_count(stack, "song1", MONTH) == 2
    # when the band's deadline passes and recover runs, with no further download
    wait_past(deadline)
    report = run_recover(stack)
    # then the band's record was answered by a recount: the aggregate is exact (3) and carries no band of the
    # killed repair
    assert [(entry["band"].split("|")[1], entry["done"]) for entry in report.bands] == [(str(deadline), False)]
    assert (report.kept, report.deleted) == ([], 1)
    assert stored_count(stack, "song1", MONTH) == 3
    assert not {"RecountBand", "RecountHeld"} & set(aggregate_item(stack, "song1", MONTH) or {})
    # and nothing is visible in the queue: what is left is the record of recover's own band, closed by its run
    assert queue_counts(stack) == (0, 1)


def test_the_record_of_a_band_closed_by_its_repair_is_deleted_by_recover_without_a_recount(aws: None) -> None:
    # given a drifted song repaired normally: its band opened, recorded in the failure queue, and closed
    stack = drifted_song()
    report = reconciler(stack).run_month(MONTH, repair=True)
    assert [d.state for d in report.differences] == ["repaired"]
    assert band_of(stack) is None
    assert (queue_bodies(stack), queue_counts(stack)) == ([], (0, 1))  # out of sight until the band's deadline
    fence = int((aggregate_item(stack, "song1", MONTH) or {})["RecountedThrough"]["N"])
    # when its deadline passes (the fence, its second, twice the band's second, rounded up) and recover runs
    wait_past(fence + 1 + 2 * 1 + 1)
    [record] = queue_bodies(stack)
    assert (record["kind"], record["entityId"], record["period"]) == ("recount_band", "song1", MONTH)
    assert record["board"] == MONTH
    recounts: list[Any] = []
    clients = operator_clients(region=REGION)
    counting = reconciler(stack)
    counting.run = lambda *arguments, **options: recounts.append(arguments)  # type: ignore[method-assign]
    recovery = recover(
        clients, discover(clients, stack.table), counting, stack.queue_url, visibility_seconds=30, pacing=QUICK_RECOVERY
    )
    # then the record is deleted with nothing to do: no recount, the queue empty, the count as the repair left it
    assert [entry["done"] for entry in recovery.bands] == [True]
    assert "nothing to do" in recovery.bands[0]["note"]
    assert (recounts, recovery.deleted, recovery.kept) == ([], 1, [])
    assert queue_counts(stack) == (0, 0)
    assert stored_count(stack, "song1", MONTH) == 2


def test_the_record_of_a_band_naming_its_board_as_board_waits_while_the_band_is_open(aws: None) -> None:
    # given a repair killed while its band is open, and its record as the aggregator now writes it ("board")
    stack = drifted_song()
    killed_repair_holding_a_missed_download(stack, band_seconds=120)
    body = {"kind": "recount_band", "entityId": "song1", "board": MONTH, "band": band_of(stack)}
    body["deadline"] = int(str(body["band"]).split("|")[1])
    boto3.client("sqs", region_name=REGION).send_message(QueueUrl=stack.queue_url, MessageBody=json.dumps(body))
    # when recover runs
    report = run_recover(stack)
    # then it reads the aggregate the record names, finds its band open, and keeps the record
    assert [(entry["board"], entry["done"]) for entry in report.bands] == [(MONTH, False)]
    assert report.bands[0]["note"].startswith("its repair's band is open")
    assert (report.reconciled, stored_count(stack, "song1", MONTH)) == ([], 2)


def test_the_record_of_a_band_still_open_before_its_deadline_waits_for_the_next_run(aws: None) -> None:
    # given a repair killed while its band is open, whose record recover meets before the band's deadline
    stack = drifted_song()
    killed_repair_holding_a_missed_download(stack, band_seconds=120)
    assert queue_counts(stack) == (0, 1)  # its own record, delayed until the deadline
    body = {"kind": "recount_band", "entityId": "song1", "period": MONTH, "band": band_of(stack)}
    body["deadline"] = int(str(body["band"]).split("|")[1])
    boto3.client("sqs", region_name=REGION).send_message(QueueUrl=stack.queue_url, MessageBody=json.dumps(body))
    # when recover runs
    report = run_recover(stack)
    # then the record is kept (the band may still close), and nothing was recounted or changed
    assert [(entry["done"], entry["note"].startswith("its repair's band is open")) for entry in report.bands] == [
        (False, True)
    ]
    assert [entry["retry"] for entry in report.kept] == [True]
    assert (report.reconciled, stored_count(stack, "song1", MONTH)) == ([], 2)


def test_a_band_whose_record_cannot_be_sent_is_not_opened_and_its_aggregate_not_repaired(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a drifted song, and a failure queue that refuses the repair's message
    stack = drifted_song()
    repair = reconciler(stack)

    def refuse(**_: Any) -> None:
        from botocore.exceptions import ClientError

        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no sqs:SendMessage"}}, "SendMessage")

    monkeypatch.setattr(repair._sqs, "send_message", refuse)
    # when the month is repaired
    report = repair.run_month(MONTH, repair=True)
    # then the aggregate is reported, untouched: no band, no fence, the count as it was
    [difference] = report.differences
    assert difference.state == "unrecorded"
    assert "could not be recorded in the failure queue" in (difference.reason or "")
    item = aggregate_item(stack, "song1", MONTH) or {}
    assert not {"RecountBand", "RecountedThrough"} & set(item)
    assert stored_count(stack, "song1", MONTH) == 5


@pytest.mark.parametrize(("offset", "word"), [(HOUR, "ahead of"), (-HOUR, "behind")])
def test_a_repair_from_a_clock_an_hour_off_dynamodb_s_refuses_and_changes_nothing(
    aws: None, monkeypatch: pytest.MonkeyPatch, offset: float, word: str
) -> None:
    # given a drifted song, and an operator whose clock is an hour off DynamoDB's
    stack = drifted_song()
    before = aggregate_item(stack, "song1", MONTH)
    dynamodb = DynamoDBTime(offset).install(monkeypatch)
    repair = reconciler(stack, dynamodb.sleep, clock_margin_seconds=60)
    # when the month is repaired, then the repair refuses, saying by how much and what to do
    with pytest.raises(ClockDisagrees, match=rf"about 3600 s {word} DynamoDB's.*NTP"):
        repair.run_month(MONTH, repair=True)
    # and nothing was written: the aggregate as it was, no band, no message
    assert aggregate_item(stack, "song1", MONTH) == before
    assert queue_counts(stack) == (0, 0)


@pytest.mark.parametrize("offset", [HOUR, -HOUR])
def test_reconcile_repair_from_a_clock_an_hour_off_exits_non_zero_saying_so(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], offset: float
) -> None:
    # given a drifted song, and a machine whose clock is an hour off (DynamoDB's Date header is the true time)
    stack = drifted_song()
    before = aggregate_item(stack, "song1", MONTH)
    DynamoDBTime(offset).install(monkeypatch)
    # when the operator runs reconcile --repair
    code = run(["reconcile", "--table", stack.table, "--month", MONTH, "--repair", "--region", REGION])
    # then it exits 1 with the clocks' difference and the fix, and changed no count, opened no band, sent nothing
    assert code == 1
    error = capsys.readouterr().err
    assert [phrase in error for phrase in ("about 3600 s", "NTP", "nothing was written")] == [True, True, True]
    assert aggregate_item(stack, "song1", MONTH) == before
    assert queue_counts(stack) == (0, 0)


def test_a_repair_whose_dynamodb_responses_carry_no_date_refuses(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a drifted song, and DynamoDB's responses stripped of their Date header (a proxy in between)
    stack = drifted_song()
    before = aggregate_item(stack, "song1", MONTH)
    repair = reconciler(stack)
    describe = repair._dynamodb.describe_table

    def without_date(**parameters: Any) -> dict[str, Any]:
        response = describe(**parameters)
        response["ResponseMetadata"]["HTTPHeaders"].pop("date", None)
        return response

    monkeypatch.setattr(repair._dynamodb, "describe_table", without_date)
    # when the month is repaired, then it refuses, and nothing was written
    with pytest.raises(ClockDisagrees, match="no Date header"):
        repair.run_month(MONTH, repair=True)
    assert aggregate_item(stack, "song1", MONTH) == before
    assert queue_counts(stack) == (0, 0)


def test_a_repair_whose_band_a_second_repair_replaced_says_so(aws: None) -> None:
    # given a drifted song whose repair (A) has its band open, when a second repair (B) repairs the song meanwhile
    # (it was hand-edited again) and closes its own band
    stack = drifted_song()
    second: list[Any] = []

    def second_repair() -> None:
        set_count(stack, "song1", MONTH, 7)
        second.append(reconciler(stack).run_month(MONTH, repair=True))

    first = reconciler(stack, once_the_band_opens(stack, second_repair, month=MONTH)).run_month(MONTH, repair=True)
    # then B repaired the song, and A's report says its band was replaced (not that its close's response was lost)
    assert [d.state for d in second[0].differences] == ["repaired"]
    [difference] = first.differences
    assert "another repair replaced its band" in (difference.reason or "")
    # and the count is exact
    assert stored_count(stack, "song1", MONTH) == 2


def test_a_close_whose_response_was_lost_reports_its_band_closed_with_what_it_added(aws: None) -> None:
    # given a drifted song, a download its repair's band holds, and a close whose first write lands but whose
    # response is lost (botocore retries it, and the retry's condition fails)
    stack = drifted_song()
    aggregator = ModelAggregator(stack)

    def listener() -> None:
        write_download(stack, "song1", "d3")
        aggregator.run()

    repair = reconciler(stack, once_the_band_opens(stack, listener, month=MONTH))
    update = repair._dynamodb.update_item

    def lost_close(**parameters: Any) -> Any:
        response = update(**parameters)
        if "REMOVE #band" in parameters["UpdateExpression"]:
            return update(**parameters)  # the retry: ConditionalCheckFailedException
        return response

    repair._dynamodb.update_item = lost_close  # type: ignore[method-assign]
    # when the month is repaired
    report = repair.run_month(MONTH, repair=True)
    # then the report says the band closed and what its close added
    [difference] = report.differences
    assert (difference.state, difference.added_at_close, difference.reason) == ("repaired", 1, None)
    assert stored_count(stack, "song1", MONTH) == 3


def test_a_repair_whose_interval_clock_stopped_before_a_band_opened_refuses_and_nothing_is_counted_twice(
    aws: None,
) -> None:
    # given a drifted song (2 downloads, hand-edited to 5), and a repair whose interval clock stops for 30 s after
    # its clock check (a suspend on a clock that does not count it), while a listener downloads song1 (d3) whose
    # record the aggregator has not applied yet
    stack = drifted_song()
    before = aggregate_item(stack, "song1", MONTH)
    stopped = [0.0]
    repair = reconciler(stack, monotonic=lambda: time.monotonic() - stopped[0])
    recount_songs = repair._recount_songs

    def suspended_then_recount(*arguments: Any, **options: Any) -> Any:
        if options.get("keep_ids"):  # the per-song recount, just before the band's fence
            stopped[0] = 30.0
            write_download(stack, "song1", "d3")
        return recount_songs(*arguments, **options)

    repair._recount_songs = suspended_then_recount  # type: ignore[method-assign]
    # when the month is repaired, then it refuses before opening the band: the fence's fresh Date header
    # contradicts the clock
    with pytest.raises(ClockDisagrees, match=r"interval clock stopped or jumped.*nothing was written"):
        repair.run_month(MONTH, repair=True)
    # and nothing was written: no band, no fence, no message
    assert aggregate_item(stack, "song1", MONTH) == before
    assert queue_counts(stack) == (0, 0)
    # and d3 is counted once: by the aggregator, then by a repair from a sound clock, never twice
    ModelAggregator(stack).run()
    assert [d.state for d in reconciler(stack).run_month(MONTH, repair=True).differences] == ["repaired"]
    ModelAggregator(stack).run()
    assert stored_count(stack, "song1", MONTH) == 3


def two_drifted_songs() -> MotoStack:
    """song1 and song2 with one download each, counted, then hand-edited to 5."""
    stack = deploy()
    for song in ("song1", "song2"):
        write_download(stack, song, f"{song}-d1")
    ModelAggregator(stack).run()
    for song in ("song1", "song2"):
        set_count(stack, song, MONTH, 5)
    return stack


def test_a_response_without_date_after_a_band_opened_leaves_only_its_aggregate_unrepaired(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given two drifted songs, and one DynamoDB response without its Date header once song1's band has opened
    stack = two_drifted_songs()
    repair = reconciler(stack)
    describe = repair._dynamodb.describe_table
    stripped: list[bool] = []

    def without_date_once_song1_is_repaired(**parameters: Any) -> dict[str, Any]:
        response = describe(**parameters)
        if band_of(stack) is not None and not stripped:
            stripped.append(True)
            response["ResponseMetadata"]["HTTPHeaders"].pop("date", None)
        return response

    monkeypatch.setattr(repair._dynamodb, "describe_table", without_date_once_song1_is_repaired)
    # when the month is repaired
    report = repair.run_month(MONTH, repair=True)
    # then song1 is repaired, and song2, whose band needed that response, is reported not repaired, untouched
    assert stripped == [True]
    states = {d.entity_id: (d.state, d.reason or "") for d in report.differences}
    assert states["song1"][0] == "repaired"
    assert states["song2"][0] == "unclocked"
    assert "no Date header" in states["song2"][1]
    assert "not repaired" in states["song2"][1]
    assert (stored_count(stack, "song1", MONTH), stored_count(stack, "song2", MONTH)) == (1, 5)
    assert not {"RecountBand", "RecountedThrough"} & set(aggregate_item(stack, "song2", MONTH) or {})
    # and only song1's band was recorded in the failure queue
    assert queue_counts(stack) == (0, 1)


def test_reconcile_repair_stopped_by_a_clock_refusal_after_a_band_opened_names_what_it_repaired(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given two drifted songs, and a machine whose clock is stepped an hour ahead once song1's band has opened
    stack = two_drifted_songs()
    dynamodb = DynamoDBTime().install(monkeypatch)
    stepped: list[bool] = []

    def clock() -> float:
        if not stepped and band_of(stack) is not None:
            stepped.append(True)
        return dynamodb.now + (HOUR if stepped else 0)

    monkeypatch.setitem(Reconciler.__init__.__kwdefaults__, "clock", clock)
    # when the operator runs reconcile --repair
    code = run(["reconcile", "--table", stack.table, "--month", MONTH, "--repair", "--region", REGION])
    # then it exits 1 saying the clock is off and that song1 was repaired before it stopped, not that nothing was
    # written
    assert code == 1
    error = capsys.readouterr().err
    assert "about 3600 s ahead of DynamoDB's" in error
    assert "stopped after repairing song1 in 2018-03" in error
    assert "nothing was written" not in error
    # and so it was: song1 exact with its band closed, song2 untouched
    assert (stored_count(stack, "song1", MONTH), stored_count(stack, "song2", MONTH)) == (1, 5)
    assert band_of(stack) is None
    assert "RecountBand" not in (aggregate_item(stack, "song2", MONTH) or {})


def test_recover_stopped_by_a_clock_refusal_says_it_invoked_the_aggregator_and_deleted_nothing(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a batch of song1 the mapping gave up on (its on-failure record in the failure queue), a refused record
    # naming song2 (hand-edited to 5, no download), the aggregator's direct invocation (played by the model), and a
    # machine whose clock is an hour ahead of DynamoDB's
    stack = deploy()
    write_download(stack, "song1", "d1")
    given_up_batch(stack)
    set_count(stack, "song2", MONTH, 5)
    sqs = boto3.client("sqs", region_name=REGION)
    refused = {"kind": "refused_record", "reason": "counted by a recount", "entityId": "song2", "period": MONTH}
    sqs.send_message(QueueUrl=stack.queue_url, MessageBody=json.dumps(refused))
    aggregator = ModelAggregator(stack)

    def invoke(params: dict[str, Any]) -> dict[str, Any]:
        aggregator.run()
        payload = json.dumps({"reachedBound": True}).encode()
        return {"StatusCode": 200, "Payload": StreamingBody(io.BytesIO(payload), len(payload))}

    answer_with(monkeypatch, "lambda.Invoke", invoke)
    DynamoDBTime(HOUR).install(monkeypatch)
    capsys.readouterr()
    # when the operator runs recover
    code = run(["recover", "--table", stack.table, "--queue-url", stack.queue_url, "--region", REGION])
    # then it exits 1 saying why, that the aggregator was invoked for the batch, and that no message was deleted
    assert code == 1
    error = capsys.readouterr().err
    assert "about 3600 s ahead of DynamoDB's" in error
    assert "recover stopped; it changed no aggregate" in error
    assert "invoked the aggregator for 1 of the mapping's failed batches" in error
    assert "no message was deleted" in error
    assert "nothing was written" not in error
    # and so it was: song1 counted by the aggregator, song2 untouched, both messages still in the queue
    assert (stored_count(stack, "song1", MONTH), stored_count(stack, "song2", MONTH)) == (1, 5)
    attributes = sqs.get_queue_attributes(
        QueueUrl=stack.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert sum(int(value) for value in attributes.values()) == 2


def test_a_close_whose_response_was_lost_before_another_repair_closed_its_own_band_says_it_is_not_known_which(
    aws: None,
) -> None:
    # given a drifted song, a download its repair's band holds (missed by its recount), and a close whose write lands
    # but whose response is lost; before botocore's retry, a hand edit and a second repair open and close their own
    # band (RecountClosed then names the second repair's band)
    stack = drifted_song()
    aggregator = ModelAggregator(stack)

    def listener() -> None:
        write_download(stack, "song1", "d3")
        aggregator.run()

    repair = reconciler(stack, once_the_band_opens(stack, listener, month=MONTH))
    update = repair._dynamodb.update_item
    second: list[Any] = []

    def lost_close(**parameters: Any) -> Any:
        response = update(**parameters)
        if "REMOVE #band" in parameters["UpdateExpression"] and not second:
            set_count(stack, "song1", MONTH, 9)
            second.append(reconciler(stack).run_month(MONTH, repair=True))
            return update(**parameters)  # the retry: ConditionalCheckFailedException
        return response

    repair._dynamodb.update_item = lost_close  # type: ignore[method-assign]
    # when the month is repaired
    report = repair.run_month(MONTH, repair=True)
    # then the first repair says its band was closed or replaced, not known which, rather than that it was replaced
    # and added nothing; and it asks for another run (exit code 4), not exact
    [difference] = report.differences
    assert difference.state == "unknown"
    assert "closed or replaced" in (difference.reason or "")
    assert "recount to be sure" in (difference.reason or "")
    assert "another repair replaced its band" not in (difference.reason or "")
    assert (report.exact, reconcile_exit_code(report.differences, refused=False)) == (False, EXIT_PENDING)
    # and the count is exact, as the second repair made it
    assert [d.state for d in second[0].differences] == ["repaired"]
    assert stored_count(stack, "song1", MONTH) == 3


def test_a_download_held_by_the_band_of_a_killed_repair_is_counted_or_reported(aws: None) -> None:
    # given a drifted song (2 downloads, hand-edited to 5)
    stack = drifted_song()
    aggregator = ModelAggregator(stack)

    def listener_then_kill() -> None:
        # the band is open: a listener downloads the song, the aggregator holds it (its recount missed it) ...
        write_download(stack, "song1", "d3")
        aggregator.run()
        assert aggregator.held == 1
        # ... and the repair is killed before its close
        raise RepairKilled

    sleep = once_the_band_opens(stack, listener_then_kill, month=MONTH)
    killed = reconciler(stack, sleep, clock_margin_seconds=2, band_seconds=1)
    killed._close_at_once = lambda bands: None  # type: ignore[method-assign] # SIGKILL: no handler of it runs
    with pytest.raises(RepairKilled):
        killed.run_month(MONTH, repair=True)
    # when the band's deadline passes and the song goes on being downloaded (after the fence: counted)
    band = (aggregate_item(stack, "song1", MONTH) or {})["RecountBand"]["S"]
    time.sleep(max(0.0, int(band.split("|")[1]) + 1.5 - time.time()))
    write_download(stack, "song1", "d4")
    aggregator.run()
    # then d3 is either counted or reported (a refused record, for the failure queue and recover): 4 downloads
    # in the table; the aggregate says 3 and nothing was refused
    assert downloads_in_table(stack, "song1") == 4
    assert stored_count(stack, "song1", MONTH) == 4 or aggregator.refused


def test_a_download_held_by_one_band_while_a_second_repair_recounts_is_not_lost(aws: None) -> None:
    # given a song counted from a parent shard that has since ended (shards roll over: its watermark is the only one),
    stack = deploy()
    aggregator = ModelAggregator(stack)
    write_download(stack, "song1", "d1")
    write_download(stack, "song1", "d2")
    aggregator.run()
    [current] = aggregator.shard_ids()
    client = boto3.client("dynamodb", region_name=REGION)
    key = {"songID": {"S": "song1"}, "SK": {"S": MONTH}}
    item = aggregate_item(stack, "song1", MONTH) or {}
    live = ShardRef(stack.stream_arn, current)
    parent = ShardRef(stack.stream_arn, "shardId-00000001000000000000-parent0")
    sequence, created = item[live.watermark_name]["S"].split("|")[:2]
    client.update_item(
        TableName=stack.table,
        Key=key,
        UpdateExpression="REMOVE #live SET #parent = :parent",
        ExpressionAttributeNames={"#live": live.watermark_name, "#parent": parent.watermark_name},
        ExpressionAttributeValues={":parent": {"S": watermark_value(sequence, int(created), parent)}},
    )
    # hand-edited to 5, and a first repair (A) whose band is open: its fence a few seconds ahead
    set_count(stack, "song1", MONTH, 5)
    now = int(time.time())
    client.update_item(
        TableName=stack.table,
        Key=key,
        UpdateExpression="SET RecountedThrough = :fence, RecountBand = :band",
        ExpressionAttributeValues={":fence": {"N": str(now + 4)}, ":band": {"S": f"repair-a|{now + 600}"}},
    )
    # when a second repair (B: recover, or an operator's reconcile) repairs the song, and between its recount of the
    # song and its write a listener downloads it (a key its Query had passed), and the aggregator, reading the
    # current shard, holds it in A's band
    repair_b = reconciler(stack, clock_margin_seconds=2, band_seconds=QUICK_BANDS["band_seconds"])
    write_b = repair_b._repair
    held: list[int] = []

    def download_then_write(*arguments: Any) -> bool:
        if not held:
            write_download(stack, "song1", "d3")
            aggregator.run()
            held.append(aggregator.held)
        return write_b(*arguments)

    repair_b._repair = download_then_write  # type: ignore[method-assign]
    report = repair_b.run_month(MONTH, repair=True)
    assert held == [1]
    # then B does not write over A's band (before the fix it did, removing A's held set: d3 was then neither counted
    # nor reported, its record below the checkpoint): B reports a conflict, and d3 stays in A's held set, where A's
    # close adds it or, A stopped, its expired band is reported
    assert [(d.state, d.recounted) for d in report.differences] == [("conflict", 2)]
    assert downloads_in_table(stack, "song1") == 3
    item = aggregate_item(stack, "song1", MONTH) or {}
    assert (item["RecountBand"]["S"].split("|")[0], len(item["RecountHeld"]["SS"])) == ("repair-a", 1)


def test_a_download_written_after_the_close_is_counted_when_the_operator_clock_is_ahead_within_the_margin(
    aws: None,
) -> None:
    # given a drifted song, and an operator whose clock runs 5 s ahead of DynamoDB's (the margin allows 6)
    stack = drifted_song()
    aggregator = ModelAggregator(stack)
    repair = reconciler(
        stack, clock_margin_seconds=6, clock=lambda: time.time() + 5, band_seconds=QUICK_BANDS["band_seconds"]
    )
    # when the month is repaired, and right after the repair has finished (its band closed) the song is downloaded
    report = repair.run_month(MONTH, repair=True)
    assert [d.state for d in report.differences] == ["repaired"]
    assert "RecountBand" not in (aggregate_item(stack, "song1", MONTH) or {})
    write_download(stack, "song1", "d3")
    aggregator.run()
    # then the aggregator counts it: no recount saw it and the band is closed. It is refused instead ("counted by a
    # recount"): reported, so recover repairs it, but the module's claim "only a record delivered later than the wait
    # allowed is refused" does not hold
    assert (stored_count(stack, "song1", MONTH), aggregator.refused) == (3, [])
