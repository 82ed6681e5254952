"""A reviewer's attacks on reconcile under the tie-break first_reached (moto): an edit of a counted download's
Timestamp, which the aggregator passes over without retractions (downloads are immutable), is drift that reconcile
reports and a repair settles from the data; the recount's instant is the aggregator's whatever the offset."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3

from leaderboard_core.index_layout import (
    ENTITY_TIE_BREAK,
    FIRST_REACHED,
    LATEST_COUNTED,
    TIE_BREAK_VARIABLE,
    ranked_order,
)
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile import Reconciler
from tests.unit.tools.operator_stack import (
    MONTH,
    QUICK_BANDS,
    REGION,
    ModelAggregator,
    MotoStack,
    aggregate_item,
    once_the_band_opens,
    set_count,
    write_download,
)
from tests.unit.tools.test_reconcile_first_reached import first_reached_stack, listing, reconciler


def environment_of(stack: MotoStack) -> dict[str, str]:
    configuration = boto3.client("lambda", region_name=REGION).get_function_configuration(FunctionName=stack.aggregator)
    return configuration["Environment"]["Variables"]


def milliseconds(timestamp: str) -> int:
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(UTC)
    return (moment - datetime(1, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def test_an_edited_timestamp_is_reported_and_a_repair_ranks_by_it(aws: None) -> None:
    # given the downloads counted under first_reached, then song2's latest download edited to a later instant of the
    # same month (the same count in the same board): the aggregator passes the MODIFY over
    stack = first_reached_stack(1)
    write_download(stack, "song2", "song2-d0", timestamp="2018-03-25T10:00:00-02:00")
    ModelAggregator(stack).run()
    assert (aggregate_item(stack, "song2", MONTH) or {})[LATEST_COUNTED] == {
        "N": str(milliseconds("2018-03-05T10:00:00.250Z"))
    }
    # when reconcile runs, then song2 is reported for its instant alone
    found = reconciler(stack).run_month(MONTH).differences
    assert [(d.entity_id, d.stored, d.recounted) for d in found] == [("song2", 2, 2)]
    # when it is repaired, then song2 holds the edited instant and lists after song1 and song3 (older latest first)
    reconciler(stack).run_month(MONTH, repair=True)
    edited = milliseconds("2018-03-25T12:00:00Z")
    item = aggregate_item(stack, "song2", MONTH) or {}
    assert item[LATEST_COUNTED] == {"N": str(edited)}
    assert item["LeaderboardOrder"] == {"N": str(ranked_order(2, "song2", latest=edited, tie_break=FIRST_REACHED))}
    assert listing(stack) == ["song1", "song3", "song2", "song4", "song5"]
    assert reconciler(stack).run_month(MONTH).differences == []


def test_the_recount_takes_the_aggregators_instant_for_every_offset_form(aws: None) -> None:
    # given downloads whose Timestamps name one instant in several forms (offset, Z, z, none, sub-millisecond)
    stack = first_reached_stack(1)
    for number, timestamp in enumerate(
        [
            "2018-03-28T23:30:00.1239-01:00",
            "2018-03-29T00:30:00.123Z",
            "2018-03-29T00:30:00.123999z",
            "2018-03-29T00:30:00.123",
            "2018-03-29T02:30:00.123+02:00",
        ]
    ):
        write_download(stack, "song6", f"song6-d{number}", timestamp=timestamp)
    ModelAggregator(stack).run()
    # then the aggregator's instant is the millisecond counted by hand, and a recount finds no drift
    assert (aggregate_item(stack, "song6", MONTH) or {})[LATEST_COUNTED] == {
        "N": str(milliseconds("2018-03-29T00:30:00.123Z"))
    }
    assert reconciler(stack).run_month(MONTH).differences == []


def test_a_download_held_by_a_repairs_band_moves_the_latest_instant(aws: None) -> None:
    # given song1 (downloads of the 2nd and the 10th) drifted to 5, and a listener who downloads it on the 30th while
    # the repair's band is open (after its recount, before its fence), the aggregator catching up at once
    stack = first_reached_stack(1)
    set_count(stack, "song1", MONTH, 5)
    aggregator = ModelAggregator(stack)

    def listener() -> None:
        write_download(stack, "song1", "song1-d9", timestamp="2018-03-30T10:00:00Z")
        aggregator.run()

    clients = operator_clients(region=REGION)
    settings = QUICK_BANDS | {"clock_margin_seconds": 2}
    sleep = once_the_band_opens(stack, listener, month=MONTH)
    repairer = Reconciler(clients, discover(clients, stack.table), empty_page_pause=0, sleep=sleep, **settings)
    # when the month is repaired
    repairer.run_month(MONTH, repair=True)
    # then song1 counts 3 downloads, its latest the 30th's, in the order the data ranks
    assert aggregator.held == 1
    item = aggregate_item(stack, "song1", MONTH) or {}
    latest = milliseconds("2018-03-30T10:00:00Z")
    assert item["DownloadCount"] == {"N": "3"}
    assert item[LATEST_COUNTED] == {"N": str(latest)}
    assert item["LeaderboardOrder"] == {"N": str(ranked_order(3, "song1", latest=latest, tie_break=FIRST_REACHED))}


def test_after_going_back_to_entity_reconcile_finds_an_order_left_by_first_reached(aws: None) -> None:
    # given songs counted under first_reached, then the module applied again with the tie-break entity
    stack = first_reached_stack(1)
    boto3.client("lambda", region_name=REGION).update_function_configuration(
        FunctionName=stack.aggregator,
        Environment={"Variables": {**environment_of(stack), TIE_BREAK_VARIABLE: ENTITY_TIE_BREAK}},
    )
    write_download(stack, "song9", "song9-d0", timestamp="2018-03-01T00:00:00Z")
    write_download(stack, "song9", "song9-d1", timestamp="2018-03-02T00:00:00Z")
    ModelAggregator(stack).run()
    # when reconcile runs under entity
    report = reconciler(stack).run_month(MONTH)
    # then the index lists equal counts by id, or reconcile reports the orders that do not
    out_of_order = listing(stack) != ["song1", "song2", "song3", "song9", "song4", "song5"]
    assert not out_of_order or report.differences
