"""Reconcile under the tie-break first_reached (moto): the recount reproduces each aggregate's latest counted download
from the table, reports an aggregate whose instant drifted, and a repair restores the order the aggregator writes."""

from __future__ import annotations

import boto3
import pytest

from leaderboard_core.buckets import utc_moment
from leaderboard_core.index_layout import (
    FIRST_REACHED,
    LATEST_COUNTED,
    TIE_BREAK_VARIABLE,
    instant_of,
    leaderboard_partitions,
    ranked_order,
)
from leaderboard_tools.backfill import BackfillRefused
from leaderboard_tools.backfill.refusals import claims_table_of
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile import Reconciler
from leaderboard_tools.rekey import rekey
from tests.unit.tools.operator_stack import (
    MONTH,
    QUICK_BANDS,
    REGION,
    ModelAggregator,
    MotoStack,
    aggregate_item,
    deploy,
    set_count,
    write_download,
)

DOWNLOADS = {
    "song1": ["2018-03-02T10:00:00Z", "2018-03-10T10:00:00Z"],
    "song2": ["2018-03-05T10:00:00.250Z", "2018-03-01T00:00:00Z"],
    "song3": ["2018-03-20T10:00:00Z", "2018-03-03T10:00:00Z"],
    "song4": ["2018-03-05T11:00:00.250+01:00"],
    "song5": ["2018-03-05T10:00:00.250Z"],
}
"""Three songs of 2 downloads and two of 1, the latter two whose latest downloads are the same instant."""
ORACLE = ["song2", "song1", "song3", "song4", "song5"]
"""Count descending, then the older latest download (song2's 5th, song1's 10th, song3's 20th), then the id."""


def first_reached_stack(shards: int) -> MotoStack:
    stack = deploy(shards=shards, aggregator_settings={TIE_BREAK_VARIABLE: FIRST_REACHED})
    for song, timestamps in DOWNLOADS.items():
        for number, timestamp in enumerate(timestamps):
            write_download(stack, song, f"{song}-d{number}", timestamp=timestamp)
    ModelAggregator(stack).run()
    return stack


def reconciler(stack: MotoStack) -> Reconciler:
    clients = operator_clients(region=REGION)
    return Reconciler(clients, discover(clients, stack.table), empty_page_pause=0, **QUICK_BANDS)


def listing(stack: MotoStack) -> list[str]:
    """The board as its index orders it, highest first."""
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    entries = []
    for partition in leaderboard_partitions(MONTH, stack.shards):
        for page in dynamodb.get_paginator("query").paginate(
            TableName=stack.aggregates_table,
            IndexName="MonthDownloadsIndex",
            KeyConditionExpression="#period = :partition",
            ExpressionAttributeNames={"#period": stack.names.period},
            ExpressionAttributeValues={":partition": {"S": partition}},
        ):
            entries += [(-int(item["LeaderboardOrder"]["N"]), item["songID"]["S"]) for item in page["Items"]]
    return [song for _, song in sorted(entries)]


def latest_of(song: str) -> int:
    return max(instant_of(utc_moment(timestamp)) for timestamp in DOWNLOADS[song])


def set_latest(stack: MotoStack, song: str, timestamp: str) -> None:
    """A hand edit of the instant alone: drift a recount of counts would not see."""
    boto3.client("dynamodb", region_name=REGION).update_item(
        TableName=stack.aggregates_table,
        Key={"songID": {"S": song}, "SK": {"S": MONTH}},
        UpdateExpression="SET #latest = :latest",
        ExpressionAttributeNames={"#latest": LATEST_COUNTED},
        ExpressionAttributeValues={":latest": {"N": str(instant_of(utc_moment(timestamp)))}},
    )


@pytest.mark.parametrize("shards", [1, 4])
def test_the_aggregator_lists_ties_by_the_older_latest_download(aws: None, shards: int) -> None:
    # given the downloads counted by the shipped aggregator under first_reached
    stack = first_reached_stack(shards)
    # then the index lists as the oracle ranks the data, and a recount finds nothing to repair
    assert listing(stack) == ORACLE
    assert reconciler(stack).run_month(MONTH).differences == []


@pytest.mark.parametrize("shards", [1, 4])
def test_a_repair_restores_the_count_and_the_latest_instant_from_the_downloads(aws: None, shards: int) -> None:
    # given song1's count edited by hand (and its order with it, as by entity) and song3's instant alone
    stack = first_reached_stack(shards)
    set_count(stack, "song1", MONTH, 5)
    set_latest(stack, "song3", "2018-03-01T00:00:00Z")
    # when reconcile runs, then both are reported, song3 for its instant
    found = reconciler(stack).run_month(MONTH).differences
    assert [(d.entity_id, d.stored, d.recounted) for d in found] == [("song1", 5, 2), ("song3", 2, 2)]
    assert "2018-03-01T00:00:00.000Z, the recount's 2018-03-20T10:00:00.000Z" in (found[1].reason or "")
    # when they are repaired
    report = reconciler(stack).run_month(MONTH, repair=True)
    # then each holds the recount's count and latest instant, in the order the aggregator writes, and lists as before
    assert [d.state for d in report.differences] == ["repaired", "repaired"]
    for song in ("song1", "song3"):
        item = aggregate_item(stack, song, MONTH) or {}
        assert item[LATEST_COUNTED] == {"N": str(latest_of(song))}
        order = ranked_order(2, song, latest=latest_of(song), tie_break=FIRST_REACHED)
        assert item["LeaderboardOrder"] == {"N": str(order)}
    assert listing(stack) == ORACLE
    assert reconciler(stack).run_month(MONTH).differences == []
    # and a download counted afterwards moves song2's instant forward, after song1's
    write_download(stack, "song2", "song2-d9", timestamp="2018-03-11T00:00:00Z")
    write_download(stack, "song1", "song1-d9", timestamp="2018-03-04T00:00:00Z")
    ModelAggregator(stack).run()
    assert listing(stack)[:3] == ["song1", "song2", "song3"]
    assert reconciler(stack).run_month(MONTH).differences == []


def test_rekey_orders_an_aggregate_by_its_latest_instant(aws: None) -> None:
    # given an aggregate whose order attribute is missing (written before orders existed)
    stack = first_reached_stack(1)
    boto3.client("dynamodb", region_name=REGION).update_item(
        TableName=stack.aggregates_table,
        Key={"songID": {"S": "song3"}, "SK": {"S": MONTH}},
        UpdateExpression="REMOVE LeaderboardOrder",
    )
    # when rekey runs under the deployed tie-break
    report = rekey(boto3.client("dynamodb", region_name=REGION), stack.aggregates_table, 1, tie_break=FIRST_REACHED)
    # then it sets the order the aggregator writes
    assert report.ordered == 1
    order = ranked_order(2, "song3", latest=latest_of("song3"), tie_break=FIRST_REACHED)
    assert (aggregate_item(stack, "song3", MONTH) or {})["LeaderboardOrder"] == {"N": str(order)}


def test_a_backfill_is_refused_under_first_reached(aws: None) -> None:
    # given a deployment with claims, whose aggregator breaks ties by first_reached
    stack = deploy(aggregator_settings={TIE_BREAK_VARIABLE: FIRST_REACHED, "CLAIMS_TABLE_NAME": "music-claims"})
    clients = operator_clients(region=REGION)
    # then the backfill refuses before anything is written, saying why
    with pytest.raises(BackfillRefused, match="without their downloads' instants"):
        claims_table_of(discover(clients, stack.table))
