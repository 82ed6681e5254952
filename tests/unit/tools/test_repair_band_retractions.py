"""A repair's band while edits and deletions of downloads are followed (retractions): every aggregate ends at what
the table's items say.

The repair sets the count to its recount, and its band holds every record created by its fence; with retractions a
held record may take a download back (a REMOVE), move it between boards or change it (a MODIFY), and the close settles
each held download to what its last held record leaves, less what the recount counted of it
(leaderboard_core.band_holds). The oracle is the test's own: the download items left in the table at the end, each
filed by slicing its UTC timestamp (`2018-03-10T...Z`: month `2018-03`). Played on moto with the shipped aggregator's
parse and store (operator_stack.ModelAggregator), its stream carrying old and new images.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import boto3

from leaderboard_core.attributes import AttributeNames
from leaderboard_core.bookkeeping import download_id
from leaderboard_tools.commands.reconcile import reconcile_exit_code
from leaderboard_tools.deployment import Deployment, discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile import Reconciler, RunReport, download_aggregates
from tests.unit.tools.operator_stack import (
    MONTH,
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

APRIL = "2018-04"
MARCH_DAY, APRIL_DAY = "2018-03-10T10:00:00Z", "2018-04-02T10:00:00Z"
MARGIN = 4
"""Seconds from a repair's recount to its fence: records written while its band is open are created by it, on a machine
loaded enough to stall a test a few seconds between the recount and the write (2 s did not always suffice)."""


def client() -> Any:
    return boto3.client("dynamodb", region_name=REGION)


def counted_stack(downloads: dict[str, str]) -> MotoStack:
    """song1's downloads (sort key -> timestamp) on a deployment following retractions, all counted, then every month
    they are in hand-edited to 9: the drift a repair sets right."""
    stack = deploy(retractions=True)
    for sort_key, timestamp in downloads.items():
        write_download(stack, "song1", sort_key, timestamp)
    ModelAggregator(stack).run()
    for month in {timestamp[:7] for timestamp in downloads.values()}:
        set_count(stack, "song1", month, 9)
    return stack


def move(stack: MotoStack, sort_key: str, timestamp: str) -> None:
    """An edit of a download's time: a MODIFY moving it from one month's board to another's."""
    client().update_item(
        TableName=stack.table,
        Key={"songID": {"S": "song1"}, "SK": {"S": sort_key}},
        UpdateExpression="SET #t = :t",
        ExpressionAttributeNames={"#t": "Timestamp"},
        ExpressionAttributeValues={":t": {"S": timestamp}},
    )


def delete(stack: MotoStack, sort_key: str) -> None:
    client().delete_item(TableName=stack.table, Key={"songID": {"S": "song1"}, "SK": {"S": sort_key}})


def oracle(stack: MotoStack) -> Counter[tuple[str, str]]:
    """The table's download items at the end, each filed in its month by slicing its timestamp."""
    items = client().scan(
        TableName=stack.table,
        FilterExpression="attribute_exists(#t) AND attribute_not_exists(#count)",
        ExpressionAttributeNames={"#t": "Timestamp", "#count": "DownloadCount"},
        ConsistentRead=True,
    )["Items"]
    return Counter((item["songID"]["S"], item["Timestamp"]["S"][:7]) for item in items)


def repair(
    stack: MotoStack,
    months: list[str],
    before_recount: Callable[[], None] = lambda: None,
    while_open: Callable[[], None] = lambda: None,
) -> RunReport:
    """reconcile --repair of song1's `months` in one run. `before_recount` runs once, just before the repair's own
    recount of the first aggregate it repairs (after its look at the stream: a change the recount may see, whose
    record the aggregator gets only later); `while_open` runs once every month's band is open."""
    clients = operator_clients(region=REGION)
    pending = [while_open]

    def sleep(seconds: float) -> None:
        if pending and all("RecountBand" in (aggregate_item(stack, "song1", month) or {}) for month in months):
            pending.pop()()
        time.sleep(seconds)

    reconciler = Reconciler(
        clients,
        discover(clients, stack.table),
        empty_page_pause=0,
        sleep=sleep,
        **(QUICK_BANDS | {"clock_margin_seconds": MARGIN}),
    )
    recount = reconciler._recount_songs
    first = [before_recount]

    def recount_songs(*arguments: Any, **options: Any) -> Any:
        if options.get("keep_ids") and first:
            first.pop()()
        return recount(*arguments, **options)

    reconciler._recount_songs = recount_songs  # type: ignore[method-assign]
    return reconciler.run({month: ["song1"] for month in months}, repair=True)


def settled(report: RunReport) -> dict[str, tuple[str, int, int]]:
    """Each month's (state, recounted, added at the close) for song1."""
    return {
        board.board: (difference.state, difference.recounted, difference.added_at_close)
        for board in report.boards
        for difference in board.differences
    }


def test_a_deletion_of_a_download_the_recount_counted_is_taken_back_at_the_close(aws: None) -> None:
    # given three downloads of song1 counted, the month drifted
    stack = counted_stack({"d1": MARCH_DAY, "d2": MARCH_DAY, "d3": MARCH_DAY})
    aggregator = ModelAggregator(stack)

    def deletion() -> None:
        delete(stack, "d2")
        aggregator.run()

    # when d2 is deleted while the band is open (after the recount counted it), the aggregator catching up at once
    report = repair(stack, [MONTH], while_open=deletion)
    # then the band held the deletion and the close took d2 back (a close adding what the recount missed adds 0: 3)
    assert aggregator.held == 1
    assert settled(report) == {MONTH: ("repaired", 3, -1)}
    assert stored_count(stack, "song1", MONTH) == oracle(stack)[("song1", MONTH)] == 2


def test_a_deletion_of_a_download_the_recount_never_saw_adds_nothing_at_the_close(aws: None) -> None:
    # given three downloads of song1 counted, the month drifted
    stack = counted_stack({"d1": MARCH_DAY, "d2": MARCH_DAY, "d3": MARCH_DAY})
    aggregator = ModelAggregator(stack)
    # when d3 is deleted just before the repair's recount (which does not see it) and its record reaches the
    # aggregator while the band is open
    report = repair(stack, [MONTH], before_recount=lambda: delete(stack, "d3"), while_open=aggregator.run)
    # then the band held d3's deletion and the close added nothing for it (a close adding every held download the
    # recount missed would count the deleted d3: 3)
    assert aggregator.held == 1
    assert settled(report) == {MONTH: ("repaired", 2, 0)}
    assert stored_count(stack, "song1", MONTH) == oracle(stack)[("song1", MONTH)] == 2


def test_downloads_moved_between_two_months_under_bands_end_counted_where_their_items_say(aws: None) -> None:
    # given d1 and d2 in March, d3 in April, counted, both months drifted
    stack = counted_stack({"d1": MARCH_DAY, "d2": MARCH_DAY, "d3": APRIL_DAY})
    aggregator = ModelAggregator(stack)

    def move_d1() -> None:
        move(stack, "d1", APRIL_DAY)
        aggregator.run()

    # when d2 moves to April just before the recounts (they see it in April) and d1 moves while both bands are open
    # (the recounts saw it in March), the aggregator holding both moves in both months
    report = repair(stack, [MONTH, APRIL], before_recount=lambda: move(stack, "d2", APRIL_DAY), while_open=move_d1)
    # then March takes d1 back and adds nothing for d2; April adds d1 and nothing more for d2 (counted by its recount)
    assert aggregator.held == 4
    assert settled(report) == {MONTH: ("repaired", 1, -1), APRIL: ("repaired", 2, 1)}
    assert {month: stored_count(stack, "song1", month) for month in (MONTH, APRIL)} == {MONTH: 0, APRIL: 3}
    assert oracle(stack) == Counter({("song1", APRIL): 3})
    # and March, back at 0, has left the leaderboard index as the aggregator leaves a count of 0
    assert "Month" not in (aggregate_item(stack, "song1", MONTH) or {})


def test_a_download_edited_back_and_forth_under_bands_ends_where_its_last_image_says(aws: None) -> None:
    # given d1 and d2 in March, counted, both months drifted
    stack = counted_stack({"d1": MARCH_DAY, "d2": MARCH_DAY, "d3": APRIL_DAY})
    aggregator = ModelAggregator(stack)

    def back_and_forth() -> None:
        move(stack, "d1", APRIL_DAY)
        move(stack, "d1", MARCH_DAY)
        aggregator.run()

    # when d1 moves to April and back to March while both bands are open
    report = repair(stack, [MONTH, APRIL], while_open=back_and_forth)
    # then both closes settle d1 where its last record leaves it: in March, as recounted
    assert settled(report) == {MONTH: ("repaired", 2, 0), APRIL: ("repaired", 1, 0)}
    assert {month: stored_count(stack, "song1", month) for month in (MONTH, APRIL)} == {MONTH: 2, APRIL: 1}
    assert oracle(stack) == Counter({("song1", MONTH): 2, ("song1", APRIL): 1})


def test_a_download_deleted_and_written_again_under_its_key_counts_once(aws: None) -> None:
    # given d1 and d2 counted, the month drifted
    stack = counted_stack({"d1": MARCH_DAY, "d2": MARCH_DAY})
    aggregator = ModelAggregator(stack)

    def rewrites() -> None:
        write_download(stack, "song1", "d2", MARCH_DAY)
        delete(stack, "d1")
        write_download(stack, "song1", "d1", MARCH_DAY)
        aggregator.run()

    # when d2 is deleted before the recount (which misses it) and written again while the band is open, and d1 (which
    # the recount counted) is deleted and written again while the band is open
    report = repair(stack, [MONTH], before_recount=lambda: delete(stack, "d2"), while_open=rewrites)
    # then each counts once: d2 added at the close, d1 left as recounted
    assert settled(report) == {MONTH: ("repaired", 1, 1)}
    assert stored_count(stack, "song1", MONTH) == oracle(stack)[("song1", MONTH)] == 2


def test_an_edit_still_in_the_stream_leaves_both_its_months_pending(aws: None) -> None:
    # given d1 in March counted, both months drifted, then d1 moved to April: a MODIFY the aggregator has not read
    stack = counted_stack({"d1": MARCH_DAY, "d2": APRIL_DAY})
    move(stack, "d1", APRIL_DAY)
    # when both months are repaired
    report = repair(stack, [MONTH, APRIL])
    # then neither is touched: the edit in flight would move each
    assert {board: state for board, (state, _, _) in settled(report).items()} == {MONTH: "pending", APRIL: "pending"}
    assert {month: stored_count(stack, "song1", month) for month in (MONTH, APRIL)} == {MONTH: 9, APRIL: 9}


def test_a_download_held_from_shards_the_stream_does_not_order_is_left_as_recounted_and_said(aws: None) -> None:
    # given d1, d2 counted, the month drifted
    stack = counted_stack({"d1": MARCH_DAY, "d2": MARCH_DAY})

    def held_from_two_unknown_shards() -> None:
        client().update_item(
            TableName=stack.table,
            Key={"songID": {"S": "song1"}, "SK": {"S": MONTH}},
            UpdateExpression="ADD RecountHeld :held",
            ExpressionAttributeValues={
                ":held": {"SS": [f"{download_id('d9')}|AAAAAAAA|900|0", f"{download_id('d9')}|BBBBBBBB|12|1"]}
            },
        )

    # when the band holds records of d9 from two shards the stream does not list, one leaving it counted, one not
    report = repair(stack, [MONTH], while_open=held_from_two_unknown_shards)
    # then the close adds nothing for d9, says so, and the run exits as a difference left (3)
    [difference] = report.board(MONTH).differences
    assert (difference.state, difference.added_at_close) == ("unsettled", 0)
    assert "run `reconcile --repair` again" in (difference.reason or "")
    assert reconcile_exit_code(report.board(MONTH).differences, refused=False) == 3
    assert stored_count(stack, "song1", MONTH) == 2
    assert "RecountBand" not in (aggregate_item(stack, "song1", MONTH) or {})


def test_an_aggregate_back_at_zero_out_of_the_index_is_recounted_and_repaired(aws: None) -> None:
    # given d1 counted then deleted (its count back at 0, out of the index), and d2 written but never counted (its
    # record lost: the checkpoint moved past it)
    stack = counted_stack({"d1": MARCH_DAY})
    set_count(stack, "song1", MONTH, 1)
    delete(stack, "d1")
    ModelAggregator(stack).run()
    assert "Month" not in (aggregate_item(stack, "song1", MONTH) or {"Month": None})
    write_download(stack, "song1", "d2", MARCH_DAY)
    ModelAggregator(stack).skip()
    # when the month is repaired
    report = repair(stack, [MONTH])
    # then the aggregate out of the index is found, set to its recount and back in the index
    assert settled(report) == {MONTH: ("repaired", 1, 0)}
    assert stored_count(stack, "song1", MONTH) == oracle(stack)[("song1", MONTH)] == 1
    assert (aggregate_item(stack, "song1", MONTH) or {})["Month"] == {"S": MONTH}


# ---------------------------------------------------------------- what the look at the stream waits for


def _deployment(retractions: bool) -> Deployment:
    return Deployment(
        table="t",
        table_arn="arn",
        stream_arn="arn/stream/x",
        names=AttributeNames(),
        leaderboard_shards=1,
        query_leaderboard_shards=1,
        query_leaderboard_shards_previous=None,
        ttl_attribute=None,
        window_seconds=None,
        failure_queue_url=None,
        progress_table=None,
        aggregator_function=None,
        query_function=None,
        mapping_uuid=None,
        mapping_state=None,
        retractions=retractions,
    )


def _record(event: str, old: str | None, new: str | None, identity: dict[str, str] | None = None) -> dict[str, Any]:
    images = {
        name: {"songID": {"S": "song1"}, "SK": {"S": "d1"}, "Timestamp": {"S": timestamp}}
        for name, timestamp in (("OldImage", old), ("NewImage", new))
        if timestamp is not None
    }
    return {"eventName": event, "dynamodb": images} | ({"userIdentity": identity} if identity else {})


def test_the_stream_look_waits_for_the_boards_a_record_moves_a_count_in() -> None:
    # given a deployment following retractions, and one that does not
    following, not_following = _deployment(True), _deployment(False)
    ttl = {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}
    # then an edit across months moves both months, one within a month none, a deletion its month, an expiry by TTL
    # none; without retractions only INSERTs count
    assert download_aggregates(_record("MODIFY", MARCH_DAY, APRIL_DAY), following) == [
        ("song1", MONTH),
        ("song1", APRIL),
    ]
    assert download_aggregates(_record("MODIFY", MARCH_DAY, "2018-03-11T10:00:00Z"), following) == []
    assert download_aggregates(_record("REMOVE", MARCH_DAY, None), following) == [("song1", MONTH)]
    assert download_aggregates(_record("REMOVE", MARCH_DAY, None, ttl), following) == []
    assert download_aggregates(_record("MODIFY", MARCH_DAY, APRIL_DAY), not_following) == []
    assert download_aggregates(_record("INSERT", None, APRIL_DAY), not_following) == [("song1", APRIL)]
