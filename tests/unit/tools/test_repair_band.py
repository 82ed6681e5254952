"""A repair's band: the downloads a recount could not be sure of are held by the aggregator and settled by the repair.

The repair sets the count to its recount and a fence F (the recount's end plus the clock margin); the aggregator
holds every record of the aggregate created at or before F on the aggregate while the band is open, and the repair,
which knows which downloads it counted, adds those it missed when it closes the band (the reconcile package, steps 4-5;
docs/operations.md). Played on moto with the shipped aggregator's store (operator_stack.ModelAggregator).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from aggregate_store import AggregateStore
from aggregate_writes import MAX_HELD, Contribution
from delivery import ShardRef
from download_records import AggregateKey, Schema
from leaderboard_core.bookkeeping import download_id, pad_sequence
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile import Reconciler, ReconcileReport
from shard_progress import ProgressStore
from tests.unit.tools.operator_stack import (
    MONTH,
    QUICK_BANDS,
    REGION,
    ModelAggregator,
    MotoStack,
    aggregate_item,
    deploy,
    downloads_in_table,
    drifted_song,
    once_the_band_opens,
    reconciler,
    set_count,
    stored_count,
    write_download,
)

MARGIN = 2
"""Seconds from the repair's recount to its fence: the window in which a download may or may not be recounted."""


def repair(stack: MotoStack, while_open: Callable[[], None] = lambda: None) -> ReconcileReport:
    """reconcile --repair of the month; `while_open` runs once, at the first pause after the band opened."""
    clients = operator_clients(region=REGION)
    settings = QUICK_BANDS | {"clock_margin_seconds": MARGIN}
    sleep = once_the_band_opens(stack, while_open, month=MONTH)
    reconciler = Reconciler(clients, discover(clients, stack.table), empty_page_pause=0, sleep=sleep, **settings)
    return reconciler.run_month(MONTH, repair=True)


def store(stack: MotoStack) -> AggregateStore:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    assert stack.progress_table is not None
    return AggregateStore(dynamodb, stack.table, Schema(), ProgressStore(dynamodb, stack.progress_table))


def shard(stack: MotoStack) -> ShardRef:
    return ShardRef(stack.stream_arn, ModelAggregator(stack).shard_ids()[0])


def late(sort_key: str, created: int, sequence: str = "9" * 25) -> Contribution:
    """A record of the download `sort_key` reaching the aggregator only now: AWS bounds neither when a written item's
    record becomes readable nor when the mapping delivers it (up to the stream's 24-hour retention)."""
    return Contribution(pad_sequence(sequence), created, download_id=download_id(sort_key))


def set_band(stack: MotoStack, fence: int, deadline: int, held: list[str] | None = None) -> None:
    """A band as a repair leaves it open: its fence, its deadline and what it holds."""
    values: dict[str, Any] = {":fence": {"N": str(fence)}, ":band": {"S": f"token|{deadline}"}}
    update = "SET RecountedThrough = :fence, RecountBand = :band"
    if held:
        values[":held"] = {"SS": held}
        update += ", RecountHeld = :held"
    boto3.client("dynamodb", region_name=REGION).update_item(
        TableName=stack.table,
        Key={"songID": {"S": "song1"}, "SK": {"S": MONTH}},
        UpdateExpression=update,
        ExpressionAttributeValues=values,
    )


def test_a_download_the_recount_missed_is_held_by_the_band_and_added_at_the_close(aws: None) -> None:
    # given a drifted song, and a listener who downloads it while the repair's band is open (after its recount,
    # before its fence), the aggregator catching up at once
    stack = drifted_song()
    aggregator = ModelAggregator(stack)

    def listener() -> None:
        write_download(stack, "song1", "d3")
        aggregator.run()

    # when the month is repaired
    report = repair(stack, while_open=listener)
    # then the aggregator held the download (not counted, not refused), and the close added it: 2 recounted + 1
    assert (aggregator.held, aggregator.refused) == (1, [])
    [difference] = report.differences
    assert (difference.state, difference.recounted, difference.added_at_close) == ("repaired", 2, 1)
    assert stored_count(stack, "song1", MONTH) == 3
    # and the band is gone, the fence stays
    item = aggregate_item(stack, "song1", MONTH) or {}
    assert not {"RecountBand", "RecountHeld"} & set(item)
    assert "RecountedThrough" in item


def test_a_download_the_recount_saw_is_held_but_never_counted_again(aws: None) -> None:
    # given a drifted song whose download d2 (recounted by the repair) reaches the aggregator only while the band is
    # open: a record the repair's look at the stream could not see yet
    stack = drifted_song()
    outcomes = []

    def late_delivery() -> None:
        outcomes.append(store(stack).apply(AggregateKey("song1", MONTH), shard(stack), [late("d2", int(time.time()))]))

    # when the month is repaired
    report = repair(stack, while_open=late_delivery)
    # then the band held it, and the close added nothing for it: the recount had counted it (a close adding every
    # held download would make this 3)
    assert [(outcome.added, outcome.held, outcome.refused) for outcome in outcomes] == [(0, 1, [])]
    assert [d.added_at_close for d in report.differences] == [0]
    assert stored_count(stack, "song1", MONTH) == 2


def test_a_record_created_before_the_fence_and_delivered_after_the_close_is_refused_and_reported(aws: None) -> None:
    # given a repaired song whose band is closed
    stack = drifted_song()
    report = repair(stack)
    assert [d.state for d in report.differences] == ["repaired"]
    fence = int((aggregate_item(stack, "song1", MONTH) or {})["RecountedThrough"]["N"])
    # when a record created at the fence reaches the aggregator afterwards (a download the recount may have counted)
    outcome = store(stack).apply(AggregateKey("song1", MONTH), shard(stack), [late("d7", fence)])
    # then it is refused with its reason, for the failure queue, and not counted
    assert (outcome.added, outcome.held) == (0, 0)
    assert ["counted by a recount" in reason for _, reason in outcome.refused] == [True]
    assert stored_count(stack, "song1", MONTH) == 2


def test_a_band_its_repair_never_closed_stops_holding_at_its_deadline(aws: None) -> None:
    # given an aggregate whose repair opened a band and stopped (killed) before closing it: its deadline has passed
    stack = drifted_song()
    now = int(time.time())
    set_band(stack, fence=now + 60, deadline=now - 1, held=[download_id("d5")])
    # when a record created before the fence arrives
    outcome = store(stack).apply(AggregateKey("song1", MONTH), shard(stack), [late("d6", now)])
    # then it is refused and reported, naming the expired band (nobody would ever settle what it held)
    assert outcome.held == 0
    assert ["band expired" in reason for _, reason in outcome.refused] == [True]
    assert (aggregate_item(stack, "song1", MONTH) or {})["RecountHeld"] == {"SS": [download_id("d5")]}


def test_a_full_band_refuses_what_it_cannot_hold_and_holds_what_it_already_has(aws: None) -> None:
    # given an open band holding MAX_HELD downloads, d0 among them
    stack = drifted_song()
    now = int(time.time())
    held = [download_id(f"d{number}") for number in range(MAX_HELD)]
    set_band(stack, fence=now + 60, deadline=now + 600, held=held)
    # when d0 arrives again from another record, and a new download d-new
    outcome = store(stack).apply(
        AggregateKey("song1", MONTH), shard(stack), [late("d0", now, "1" * 25), late("d-new", now, "2" * 25)]
    )
    # then the new one is refused and reported, the band still holds exactly MAX_HELD
    assert outcome.held == 1
    assert [f"holds {MAX_HELD} already" in reason for _, reason in outcome.refused] == [True]
    assert len((aggregate_item(stack, "song1", MONTH) or {})["RecountHeld"]["SS"]) == MAX_HELD


def test_one_write_counts_what_lies_after_the_fence_and_holds_what_lies_before(aws: None) -> None:
    # given an open band with a fence at `now`
    stack = drifted_song()
    now = int(time.time())
    set_band(stack, fence=now, deadline=now + 600)
    # when one batch brings a record created at the fence and one after it
    outcome = store(stack).apply(
        AggregateKey("song1", MONTH), shard(stack), [late("d8", now, "1" * 25), late("d9", now + 1, "2" * 25)]
    )
    # then the first is held, the second counted, in one conditional write after the first attempt failed
    assert (outcome.added, outcome.held, outcome.refused, outcome.writes) == (1, 1, [], 2)
    item = aggregate_item(stack, "song1", MONTH) or {}
    assert (item["DownloadCount"], item["RecountHeld"]) == ({"N": "6"}, {"SS": [download_id("d8")]})


def test_the_fence_lies_a_clock_margin_past_the_repair_s_own_recount(aws: None) -> None:
    # given a drifted song, when it is repaired, then its fence is at least the margin past the repair's start
    stack = drifted_song()
    started = math.floor(time.time())
    repair(stack)
    assert int((aggregate_item(stack, "song1", MONTH) or {})["RecountedThrough"]["N"]) >= started + MARGIN


def test_a_repair_stopped_by_an_error_closes_its_band_at_once(aws: None) -> None:
    # given a drifted song, a download the band holds, and then an error in the repair's wait (a throttled read,
    # Ctrl-C): anything but a kill
    stack = drifted_song()
    aggregator = ModelAggregator(stack)

    def listener_then_error() -> None:
        write_download(stack, "song1", "d3")
        aggregator.run()
        raise KeyboardInterrupt

    # when the month is repaired, then the error reaches the operator
    with pytest.raises(KeyboardInterrupt):
        repair(stack, while_open=listener_then_error)
    # and the band was closed on the way out, what it held settled: nothing is left for nobody to count
    item = aggregate_item(stack, "song1", MONTH) or {}
    assert not {"RecountBand", "RecountHeld"} & set(item)
    assert (aggregator.held, stored_count(stack, "song1", MONTH)) == (1, 3)


class ConflictOnClose:
    """The repair's DynamoDB client, whose first close (UpdateItem ... REMOVE band) meets an ongoing transaction.

    AWS, *Transaction conflict handling in DynamoDB*: "A PutItem, UpdateItem, or DeleteItem request for an item
    conflicts with an ongoing TransactWriteItems request that includes the same item", rejected with
    TransactionConflictException ("Operation was rejected because there is an ongoing transaction for the item").
    The aggregator writes an aggregate in a TransactWriteItems when it proves records of a pruned aggregate uncounted;
    botocore does not retry TransactionConflictException (only TransactionInProgressException).
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self.conflicts = 0

    def update_item(self, **parameters: Any) -> Any:
        if "REMOVE #band" in parameters.get("UpdateExpression", "") and self.conflicts == 0:
            self.conflicts += 1
            raise ClientError(
                {
                    "Error": {
                        "Code": "TransactionConflictException",
                        "Message": "Transaction is ongoing for the item",
                    }
                },
                "UpdateItem",
            )
        return self._client.update_item(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_close_that_meets_an_aggregator_transaction_still_closes_its_band(aws: None) -> None:
    # given a drifted song (2 downloads, hand-edited to 5)
    stack = deploy()
    model = ModelAggregator(stack)
    write_download(stack, "song1", "d1")
    write_download(stack, "song1", "d2")
    model.run()
    set_count(stack, "song1", MONTH, 5)

    def listener() -> None:
        # while the band is open a listener downloads the song; the aggregator holds it (the recount missed it)
        write_download(stack, "song1", "d3")
        model.run()
        assert model.held == 1

    repair = reconciler(
        stack, once_the_band_opens(stack, listener, month=MONTH), band_seconds=QUICK_BANDS["band_seconds"]
    )
    conflicting = ConflictOnClose(repair._dynamodb)
    repair._dynamodb = conflicting
    # when the repair closes the band just as an aggregator transaction on the aggregate is ongoing
    outcome: Callable[[], Any] = lambda: repair.run_month(MONTH, repair=True)  # noqa: E731
    with contextlib.suppress(ClientError):
        outcome()
    assert conflicting.conflicts == 1
    # then the close is tried again and d3, missed by the recount, is counted: 3 downloads, 3 counted, band closed.
    # Instead the run raised, the band stays open, and d3 is counted by nobody
    assert downloads_in_table(stack, "song1") == 3
    assert "RecountBand" not in (aggregate_item(stack, "song1", MONTH) or {})
    assert stored_count(stack, "song1", MONTH) == 3
