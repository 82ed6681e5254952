"""A reviewer's attacks on reconcile under the tie-break first_reached (moto): an edit of a counted download's
Timestamp, which the aggregator passes over without retractions (downloads are immutable), is drift that reconcile
reports and a repair settles from the data; the recount's instant is the aggregator's whatever the offset."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from leaderboard_core.index_layout import FIRST_REACHED, LATEST_COUNTED, ranked_order
from tests.unit.tools.operator_stack import MONTH, ModelAggregator, aggregate_item, write_download
from tests.unit.tools.test_reconcile_first_reached import first_reached_stack, listing, reconciler


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
