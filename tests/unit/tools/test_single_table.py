"""The operator tools attached to a platform's own table (docs/attaching.md): a single-table design keyed PK/SK, the
downloads marked among other item types (source_item_filter), the aggregates in `<name>-aggregates`.

Played on moto (operator_stack.deploy(single_table=...)), the aggregator's part by ModelAggregator: the shipped
parse_record with the Settings the deployed environment gives, and the shipped AggregateStore. Every expected count is
the test's own tally of the items it wrote (board ids from the timestamps' text: they are all UTC, `Z`).
"""

from __future__ import annotations

import base64
import io
import itertools
import json
from collections import Counter
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import boto3
import botocore.handlers
import botocore.parsers
import pytest
from botocore.session import get_session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import query
from boards import boards_from_environment
from delivery import ShardRef
from download_records import Download, Schema, parse_record
from leaderboard_core.attributes import AttributeNames
from leaderboard_tools import cli
from leaderboard_tools.commands import EXIT_DIFFERENCES, EXIT_EXACT, leaderboards
from leaderboard_tools.deployment import Deployment, discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.query_client import query_function_of
from leaderboard_tools.reconcile import Reconciler
from shard_reader import _as_lambda_record
from tests.property_examples import examples
from tests.unit.conftest import FakeLambdaContext
from tests.unit.tools.operator_stack import (
    DOWNLOADS,
    MONTH,
    REGION,
    ModelAggregator,
    MotoStack,
    SingleTable,
    aggregate_item,
    deploy,
    download_item,
    enable_stream,
    once_the_band_opens,
    platform_table,
    reconciler,
    run,
    set_count,
    stored_count,
    write_download,
)

PLATFORM = SingleTable()
"""music-platform, keyed PK/SK, downloads of type DOWNLOAD: the table of terraform/examples/existing-table."""
NAMES = AttributeNames()
MARCH = "2018-03-10T10:00:00Z"


@pytest.fixture(autouse=True)
def quick_bands(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands build their Reconciler with defaults: a band settling and polling as QUICK_BANDS has them, and
    no pause at the stream's tip (moto's stream has every record at once)."""
    defaults = Reconciler.__init__.__kwdefaults__
    monkeypatch.setitem(defaults, "band_settle_seconds", 0)
    monkeypatch.setitem(defaults, "band_poll_seconds", 0.05)
    monkeypatch.setitem(defaults, "empty_page_pause", 0)


@pytest.fixture
def requests_made(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """(operation, parameters) of every DynamoDB request of any client created from now on (moto still answers)."""
    made: list[tuple[str, dict[str, Any]]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        made.append((model.name, dict(params)))

    monkeypatch.setattr(
        botocore.handlers,
        "BUILTIN_HANDLERS",
        [("before-parameter-build.dynamodb", record), *botocore.handlers.BUILTIN_HANDLERS],
    )
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    return made


def put(table: str, item: dict[str, Any]) -> None:
    boto3.client("dynamodb", region_name=REGION).put_item(TableName=table, Item=item)


def other_item(kind: str, number: int, song: str = "song1", timestamp: str | None = MARCH) -> dict[str, Any]:
    """An item of another type of the platform's table that names a song and a time, as a playlist entry does."""
    item = {"PK": {"S": "USER#user1"}, "SK": {"S": f"{kind}#{number}"}, "type": {"S": kind}, "songID": {"S": song}}
    return item | ({"Timestamp": {"S": timestamp}} if timestamp else {})


def aggregates(stack: MotoStack) -> dict[tuple[str, str], int]:
    """Every aggregate the aggregates table holds: (song, board) -> count."""
    pages = (
        boto3.client("dynamodb", region_name=REGION).get_paginator("scan").paginate(TableName=stack.aggregates_table)
    )
    return {
        (item["songID"]["S"], item["SK"]["S"]): int(item["DownloadCount"]["N"])
        for page in pages
        for item in page["Items"]
        if "DownloadCount" in item
    }


def reconcile_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int | BaseException, dict[str, Any]]:
    capsys.readouterr()
    code = run(["reconcile", "--table", PLATFORM.table, "--region", REGION, *argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


# ---------------------------------------------------------------- (a) the tools find both tables


def test_the_deployment_read_from_the_source_table_and_from_the_aggregates_table_is_the_same(aws: None) -> None:
    # given the module attached to the platform's table, its aggregates in music-aggregates
    stack = deploy(single_table=PLATFORM)
    clients = operator_clients(region=REGION)
    # when the deployment is read from either table's name
    from_source = discover(clients, PLATFORM.table)
    from_aggregates = discover(clients, "music-aggregates")
    # then it is one deployment: the platform's table and its stream, the aggregates' own table, the download's
    # identity from the platform's key (PK, SK), the marker, and the query function serving the aggregates
    assert from_source == from_aggregates
    assert (from_source.table, from_source.aggregates, from_source.aggregates_beside) == (
        PLATFORM.table,
        "music-aggregates",
        False,
    )
    assert from_source.stream_arn == stack.stream_arn
    assert from_source.key_attributes == ("PK", "SK")
    assert from_source.entity_is_partition is False
    assert from_source.marker == DOWNLOADS
    assert from_source.query_function == stack.query


class QueryFunction:
    """A Lambda client whose invoke runs the shipped query handler with the invoked function's deployed environment
    (read from moto), against moto's tables; every request is recorded."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, FunctionName: str, Payload: bytes) -> dict[str, Any]:  # noqa: N803 - boto3's parameter names
        environment = boto3.client("lambda", region_name=REGION).get_function_configuration(FunctionName=FunctionName)[
            "Environment"
        ]["Variables"]
        self._monkeypatch.setattr(query, "SCHEMA", query.schema_from_environment(environment))
        self._monkeypatch.setattr(query, "LAYOUT", query.layout_from_environment(environment))
        self._monkeypatch.setattr(query, "BOARDS", boards_from_environment(environment))
        self._monkeypatch.setattr(query, "AGGREGATES_TABLE_NAME", query.aggregates_table_from_environment(environment))
        self._monkeypatch.setattr(query, "_dynamodb", boto3.client("dynamodb", region_name=REGION))
        request = json.loads(Payload)
        self.requests.append((FunctionName, request))
        answer = query.lambda_handler(request, FakeLambdaContext())
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}


def test_top_of_the_aggregates_table_asks_the_query_function_beside_it(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the module attached to the platform's table, song2 downloaded twice and song1 once, counted
    stack = deploy(single_table=PLATFORM)
    for song, download in (("song2", "d1"), ("song2", "d2"), ("song1", "d3")):
        write_download(stack, song, download)
    ModelAggregator(stack).run()
    # when the operator asks for the top of March naming the aggregates table
    parsed: dict[str, Any] = {}
    with monkeypatch.context() as parsing:
        parsing.setattr(leaderboards, "run", lambda arguments: parsed.setdefault("arguments", arguments) and 0)
        assert cli.main(["top", "--table", "music-aggregates", "--month", MONTH]) == 0
    function = QueryFunction(monkeypatch)
    code = leaderboards.run(parsed["arguments"], client=function)
    out = capsys.readouterr().out
    # then the function is <name>-query, and it answers from the aggregates table: song2 (2) above song1 (1)
    assert query_function_of("music-aggregates") == stack.query
    assert code == 0
    assert function.requests == [(stack.query, {"month": MONTH, "limit": 10})]
    rows = [line.split("│")[1:4] for line in out.splitlines() if line.startswith("│")]
    assert [[cell.strip() for cell in row] for row in rows] == [["1", "song2", "2"], ["2", "song1", "1"]]


# ---------------------------------------------------------------- (b) what a recount counts


def test_reconcile_of_a_single_table_counts_only_marked_downloads_and_reads_the_aggregates_table(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the platform's table: marked downloads of song1 and song2 (one carrying an attribute named like the period,
    # "Month"), items of other types naming song1 and a time, an item of no type, and a marked item without a time
    stack = deploy(single_table=PLATFORM)
    downloads = [("song1", "d1"), ("song1", "d2"), ("song1", "d3"), ("song2", "d4")]
    for song, download in downloads:
        write_download(stack, song, download)
    month_named = download_item(NAMES, "song2", "d5", MARCH, PLATFORM) | {"Month": {"S": "March"}}
    put(PLATFORM.table, month_named)
    downloads.append(("song2", "d5"))
    put(PLATFORM.table, other_item("PLAYLIST_ENTRY", 1))
    put(PLATFORM.table, other_item("LIKE", 2))
    put(PLATFORM.table, {key: value for key, value in other_item("none", 3).items() if key != "type"})
    timeless = download_item(NAMES, "song1", "d6", MARCH, PLATFORM)
    del timeless["Timestamp"]
    put(PLATFORM.table, timeless)
    # and the aggregator having read the stream
    aggregator = ModelAggregator(stack)
    aggregator.run()
    expected = Counter(song for song, _ in downloads)
    # then the aggregator counted the marked downloads only, the one named like the period too, passed over the other
    # types and rejected (reported, never dropped) the marked item without a time
    assert [stored_count(stack, song, MONTH) for song in ("song1", "song2")] == [expected["song1"], expected["song2"]]
    assert [rejected.reason for rejected in aggregator.rejected] == ["Timestamp is missing or not a non-empty string"]
    assert sum("not a download" in reason for reason in aggregator.ignored) == 3
    # and it wrote nothing to the platform's table
    source_items = boto3.client("dynamodb", region_name=REGION).scan(TableName=PLATFORM.table)["Items"]
    assert not [item for item in source_items if "DownloadCount" in item]

    # when March is reconciled
    report = reconciler(stack).run_month(MONTH)
    # then the recount counts the marked downloads with a time, as many as the aggregates of the aggregates table hold
    assert (report.downloads, report.aggregates, report.differences) == (sum(expected.values()), 2, [])

    # when song1's aggregate in the aggregates table is edited by hand, and March reconciled again (the command)
    set_count(stack, "song1", MONTH, 9)
    code, json_report = reconcile_json(capsys, "--month", MONTH)
    # then the stored count it reports is the aggregates table's, the recount the marked downloads'
    assert code == EXIT_DIFFERENCES
    assert [(d["songID"], d["stored"], d["recounted"]) for d in json_report["differences"]] == [
        ("song1", 9, expected["song1"])
    ]


# ---------------------------------------------------------------- (c) a few songs where the song is not the key


@pytest.mark.parametrize(
    ("platform", "read"),
    [(PLATFORM, "Scan"), (SingleTable(partition_key="songID"), "Query")],
    ids=["keyed by user", "keyed by song"],
)
def test_reconcile_of_a_few_songs_reads_their_partition_or_scans_where_the_song_is_not_the_key(
    aws: None, requests_made: list[tuple[str, dict[str, Any]]], platform: SingleTable, read: str
) -> None:
    # given the platform's table keyed by its users (PK, SK) or by the song, three downloads of song1, one of song2,
    # and an item of another type naming song1, counted by the aggregator
    stack = deploy(single_table=platform)
    for song, download in (("song1", "d1"), ("song1", "d2"), ("song1", "d3"), ("song2", "d4")):
        write_download(stack, song, download)
    put(platform.table, other_item("PLAYLIST_ENTRY", 1))
    ModelAggregator(stack).run()
    # when song1's March is reconciled
    recount = reconciler(stack)
    requests_made.clear()
    report = recount.run_month(MONTH, ["song1"])
    # then song1's downloads are read with a Query of its partition where the song is the partition key, else with
    # a Scan of the table filtered to song1's marked downloads; never both
    reads = [(operation, params) for operation, params in requests_made if params.get("TableName") == platform.table]
    assert {operation for operation, _ in reads} == {read}
    for _, params in reads:
        values = params["ExpressionAttributeValues"]
        assert (values[":entity"], values[":marker"]) == ({"S": "song1"}, {"S": "DOWNLOAD"})
        condition = params.get("KeyConditionExpression") if read == "Query" else params["FilterExpression"]
        assert "#entity = :entity" in condition
    # and it counts them right: three, as the aggregator did
    assert (report.downloads, report.aggregates, report.differences) == (3, 1, [])


def test_reconcile_of_several_songs_scans_a_table_not_keyed_by_song_once_for_them_all(
    aws: None, requests_made: list[tuple[str, dict[str, Any]]]
) -> None:
    # given the platform's table keyed by its users, downloads of three songs, counted by the aggregator
    stack = deploy(single_table=PLATFORM)
    for song, download in (("song1", "d1"), ("song1", "d2"), ("song2", "d3"), ("song3", "d4")):
        write_download(stack, song, download)
    ModelAggregator(stack).run()
    # when song1's and song2's March is reconciled
    recount = reconciler(stack)
    requests_made.clear()
    report = recount.run_month(MONTH, ["song1", "song2"])
    # then the table is scanned once, segment by segment, for both songs (not once per song), and both are right
    scans = [params for operation, params in requests_made if params.get("TableName") == PLATFORM.table]
    assert sorted(params["Segment"] for params in scans) == list(range(scans[0]["TotalSegments"]))
    for params in scans:
        assert "#entity IN (:entity0, :entity1)" in params["FilterExpression"]
        assert {params["ExpressionAttributeValues"][name]["S"] for name in (":entity0", ":entity1")} == {
            "song1",
            "song2",
        }
    assert (report.downloads, report.aggregates, report.differences) == (3, 2, [])


# ---------------------------------------------------------------- (d) the history the stream does not carry


def test_repair_counts_the_history_written_before_the_stream_and_makes_every_board_exact(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the platform's table with a history written before its stream existed (and items of other types)
    platform_table(PLATFORM, stream=False)
    history = [
        ("song1", "h1", "2018-03-10T10:00:00Z"),
        ("song1", "h2", "2018-03-11T09:00:00Z"),
        ("song2", "h3", "2018-03-11T23:59:59Z"),
        ("song3", "h4", "2018-04-01T00:00:00Z"),
        ("song1", "h5", "2018-04-01T12:00:00Z"),
    ]
    for song, download, timestamp in history:
        put(PLATFORM.table, download_item(NAMES, song, download, timestamp, PLATFORM))
    put(PLATFORM.table, other_item("PLAYLIST_ENTRY", 1))
    # and then the stream enabled, the module attached (day, month and all-time boards), downloads written since
    # counted by the aggregator, and one written since that the mapping never delivered
    enable_stream(PLATFORM)
    stack = deploy(single_table=PLATFORM, aggregator_settings={"LEADERBOARD_PERIODS": "day,month,all"})
    since = [("song1", "n1", "2018-03-10T11:00:00Z"), ("song2", "n2", "2018-04-01T08:00:00Z")]
    for song, download, timestamp in since:
        write_download(stack, song, download, timestamp)
    put(PLATFORM.table, other_item("LIKE", 2, "song3", "2018-04-01T09:00:00Z"))
    aggregator = ModelAggregator(stack)
    aggregator.run()
    write_download(stack, "song3", "n3", "2018-03-11T10:00:00Z")
    assert aggregator.skip() == 1
    downloads = [*history, *since, ("song3", "n3", "2018-03-11T10:00:00Z")]
    truth = Counter(
        (song, board) for song, _, timestamp in downloads for board in (timestamp[:10], timestamp[:7], "all")
    )
    boards = sorted({board for _, board in truth})
    assert aggregates(stack) != truth
    # when each board is repaired, one at a time
    codes = {board: reconcile_json(capsys, "--board", board, "--repair")[0] for board in boards}
    # then every board's repair is exact, and every aggregate is the table's tally: no more, no fewer
    assert codes == dict.fromkeys(boards, EXIT_EXACT)
    assert aggregates(stack) == truth
    # and a reconcile of each board afterwards finds nothing to repair
    afterwards = {board: reconcile_json(capsys, "--board", board) for board in boards}
    assert {board: (code, report["differences"]) for board, (code, report) in afterwards.items()} == {
        board: (EXIT_EXACT, []) for board in boards
    }


def recounted_ids(stack: MotoStack, song: str) -> set[str]:
    """The identities the repair's recount gives the song's March downloads (what a band's close compares)."""
    return reconciler(stack)._recount_songs([song], {MONTH: [song]}, keep_ids=True).ids or set()


def held_ids(stack: MotoStack, song: str) -> set[str]:
    return set(((aggregate_item(stack, song, MONTH) or {}).get("RecountHeld") or {}).get("SS") or [])


def test_a_download_written_while_the_band_is_open_is_held_by_the_recount_s_identity_and_counted_once(
    aws: None,
) -> None:
    # given the platform's table, song1 downloaded twice and counted, then hand-edited to 5
    stack = deploy(single_table=PLATFORM)
    write_download(stack, "song1", "d1")
    write_download(stack, "song1", "d2")
    aggregator = ModelAggregator(stack)
    aggregator.run()
    set_count(stack, "song1", MONTH, 5)
    before = recounted_ids(stack, "song1")
    held_while_open: list[set[str]] = []

    def listener() -> None:
        # a listener downloads song1 while the repair's band is open; the aggregator reads it at once
        write_download(stack, "song1", "d3")
        aggregator.run()
        held_while_open.append(held_ids(stack, "song1"))

    # when March is repaired
    report = reconciler(stack, once_the_band_opens(stack, listener, month=MONTH)).run_month(MONTH, repair=True)
    # then the aggregator held d3 by the identity the recount gives d3 (its PK/SK), not by anything else
    assert (aggregator.held, aggregator.refused) == (1, [])
    assert held_while_open == [recounted_ids(stack, "song1") - before]
    assert len(held_while_open[0]) == 1
    # and the close added it once: 2 recounted + 1
    [difference] = report.differences
    assert (difference.state, difference.recounted, difference.added_at_close) == ("repaired", 2, 1)
    assert stored_count(stack, "song1", MONTH) == 3

    # when the stream is read again from its start (a replay of every record)
    boto3.client("dynamodb", region_name=REGION).delete_item(
        TableName=str(stack.progress_table),
        Key={"ShardKey": {"S": f"{stack.stream_arn}|{aggregator.shard_ids()[0]}"}},
    )
    replay = ModelAggregator(stack)
    replay.run()
    # then nothing is counted twice: 3 downloads, 3 counted
    assert stored_count(stack, "song1", MONTH) == 3


def test_a_late_record_of_a_download_the_repair_recounted_is_held_and_never_added_at_the_close(aws: None) -> None:
    # given the platform's table, song1's d1 counted and d2 written but not delivered (the aggregator's checkpoint
    # moved past it: a batch given up), so the aggregate holds 1 of 2
    stack = deploy(single_table=PLATFORM)
    aggregator = ModelAggregator(stack)
    write_download(stack, "song1", "d1")
    aggregator.run()
    write_download(stack, "song1", "d2")
    shard_id = aggregator.shard_ids()[0]
    [late] = aggregator._records(shard_id, aggregator.checkpoint(shard_id))
    aggregator.skip()
    assert stored_count(stack, "song1", MONTH) == 1

    def late_delivery() -> None:
        # d2's record reaches the aggregator only now, while the band is open: parsed as the aggregator parses it
        aggregator._count(shard_id, late)

    # when March is repaired (its recount counts d2 from the table)
    report = reconciler(stack, once_the_band_opens(stack, late_delivery, month=MONTH)).run_month(MONTH, repair=True)
    # then the band held d2's record and the close added nothing for it: the record's identity (from its Keys) is the
    # one the recount gave the item it read, so 2, not 3
    assert aggregator.held == 1
    [difference] = report.differences
    assert (difference.state, difference.recounted, difference.added_at_close) == ("repaired", 2, 0)
    assert stored_count(stack, "song1", MONTH) == 2


# ---------------------------------------------------------------- (e) one identity, from the stream and from the table

STRING_KEYS = st.text(min_size=1, max_size=40)
NUMBER_KEYS = st.one_of(
    st.integers(min_value=-(10**15), max_value=10**15).map(str),
    st.decimals(min_value=-(10**6), max_value=10**6, places=4, allow_nan=False, allow_infinity=False).map(str),
)
BINARY_KEYS = st.binary(min_size=1, max_size=40)
KEY_VALUES = {"S": STRING_KEYS, "N": NUMBER_KEYS, "B": BINARY_KEYS}


ATTACHED_SCHEMA = Schema(aggregates_beside=False, marker=DOWNLOADS)
"""What the attached aggregator parses with (its Settings from terraform/lambda.tf's environment)."""


def record_identities(boto3_record: dict[str, Any], lambda_record: dict[str, Any], shard: ShardRef) -> set[Any]:
    """The download id the aggregator's parse_record gives a record, as GetRecords through boto3 gives it (read by
    the aggregator, shard_reader) and as Lambda delivers it (the event's JSON)."""
    ids = set()
    for record in (_as_lambda_record(boto3_record, shard), lambda_record):
        parsed = parse_record(record, ATTACHED_SCHEMA)
        assert isinstance(parsed, Download), parsed
        ids.add(parsed.download_id)
    return ids


@pytest.mark.parametrize("key_types", [("S", "S"), ("S", "N"), ("N", "S")], ids="/".join)
def test_the_aggregator_and_the_recount_give_a_moto_item_one_identity(aws: None, key_types: tuple[str, str]) -> None:
    """String and number keys through moto's stream and scan. Binary keys are the next test's, without moto: moto
    5.2.5 writes a binary key into a stream record's Keys base64-encoded twice (its NewImage is right)."""
    # given the module attached to a platform table keyed PK/SK of these types
    platform = SingleTable(key_types=key_types)
    stack = deploy(single_table=platform)
    recount = reconciler(stack)
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    bodies: list[bytes] = []
    streams.meta.events.register(
        "before-parse.dynamodb-streams.GetRecords", lambda response_dict, **_: bodies.append(response_dict["body"])
    )
    shard = ShardRef(stack.stream_arn, ModelAggregator(stack).shard_ids()[0])
    songs = (f"song{number}" for number in itertools.count())

    @settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(partition=KEY_VALUES[key_types[0]], sort=KEY_VALUES[key_types[1]])
    def one_identity(partition: str, sort: str) -> None:
        # given a marked download under a random key, its song its own
        song, key = next(songs), {"PK": {key_types[0]: partition}, "SK": {key_types[1]: sort}}
        item = key | {"type": {"S": "DOWNLOAD"}, "songID": {"S": song}, "Timestamp": {"S": MARCH}}
        put(platform.table, item)
        try:
            # when its stream record is read (through boto3, and as the wire's JSON a Lambda event carries) and the
            # table recounted for its song
            iterator = streams.get_shard_iterator(
                StreamArn=stack.stream_arn, ShardId=shard.shard_id, ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            boto3_record = streams.get_records(ShardIterator=iterator, Limit=1000)["Records"][-1]
            lambda_record = json.loads(bodies[-1])["Records"][-1] | {"eventSourceARN": stack.stream_arn}
            assert boto3_record["eventName"] == "INSERT"
            recounted = recount._recount_songs([song], {MONTH: [song]}, keep_ids=True).ids
            # then the aggregator and the recount name the download alike
            assert record_identities(boto3_record, lambda_record, shard) == recounted
            assert len(recounted or ()) == 1
        finally:
            boto3.client("dynamodb", region_name=REGION).delete_item(TableName=platform.table, Key=key)

    one_identity()


def wire(kind: str, value: Any) -> dict[str, Any]:
    """An attribute value as DynamoDB's JSON protocol carries it (and a Lambda event): binary as base64 text."""
    return {kind: base64.b64encode(value).decode() if kind == "B" else value}


def parsed_response(service: str, operation: str, body: dict[str, Any]) -> dict[str, Any]:
    """The response boto3 returns for this wire body: botocore's own parser (binary to bytes, times to datetimes)."""
    model = get_session().get_service_model(service).operation_model(operation)
    parser = botocore.parsers.create_parser(model.metadata["protocol"])
    return parser.parse({"status_code": 200, "headers": {}, "body": json.dumps(body).encode()}, model.output_shape)


def attached_deployment() -> Deployment:
    return Deployment(
        table=PLATFORM.table,
        table_arn=f"arn:aws:dynamodb:{REGION}:123456789012:table/{PLATFORM.table}",
        stream_arn=None,
        names=NAMES,
        leaderboard_shards=1,
        query_leaderboard_shards=1,
        query_leaderboard_shards_previous=None,
        ttl_attribute=None,
        window_seconds=60,
        failure_queue_url=None,
        progress_table=None,
        aggregator_function="music-aggregator",
        query_function="music-query",
        mapping_uuid=None,
        mapping_state="Enabled",
        aggregates_table="music-aggregates",
        key_attributes=("PK", "SK"),
        marker=DOWNLOADS,
    )


def scanned_identities(page: dict[str, Any]) -> set[str]:
    recount = Reconciler(SimpleNamespace(dynamodb=None, dynamodbstreams=None), attached_deployment())
    pages: Iterator[dict[str, Any]] = iter([page])
    return recount._count_pages(pages, None, keep_ids=True).ids or set()


@settings(max_examples=examples(200), deadline=None)
@given(
    types=st.tuples(st.sampled_from("SNB"), st.sampled_from("SNB")),
    data=st.data(),
)
def test_the_aggregator_and_the_recount_give_a_download_one_identity_whatever_its_key_types(
    types: tuple[str, str], data: st.DataObject
) -> None:
    # given a marked download keyed PK/SK by values of any key type (string, number, binary)
    values = [data.draw(KEY_VALUES[kind]) for kind in types]
    key = {name: wire(kind, value) for name, kind, value in zip(("PK", "SK"), types, values, strict=True)}
    item = key | {"type": {"S": "DOWNLOAD"}, "songID": {"S": "song1"}, "Timestamp": {"S": MARCH}}
    stream_arn = f"arn:aws:dynamodb:{REGION}:123456789012:table/{PLATFORM.table}/stream/2018-03-01T00:00:00.000"
    wire_record = {
        "eventID": "1",
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": {
            "ApproximateCreationDateTime": 1520676000.0,
            "Keys": key,
            "NewImage": item,
            "SequenceNumber": "1" * 21,
            "SizeBytes": 100,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }
    # when its stream record reaches the aggregator (as Lambda delivers it, and as boto3's GetRecords returns it) and
    # a recount scans its item (as boto3's Scan returns it)
    [boto3_record] = parsed_response("dynamodbstreams", "GetRecords", {"Records": [wire_record]})["Records"]
    page = parsed_response("dynamodb", "Scan", {"Items": [item], "Count": 1, "ScannedCount": 1})
    shard = ShardRef(stream_arn, "shardId-1")
    # then both forms of the record and the scanned item give one identity
    identities = record_identities(boto3_record, wire_record | {"eventSourceARN": stream_arn}, shard)
    assert identities == scanned_identities(page)
    assert len(identities) == 1


# ---------------------------------------------------------------- requests DynamoDB accepts


def projected_attributes(params: dict[str, Any]) -> list[str]:
    """The attributes a ProjectionExpression names, placeholders resolved (top-level names only, as the tools use)."""
    names = params.get("ExpressionAttributeNames") or {}
    return [names.get(path.strip(), path.strip()) for path in params["ProjectionExpression"].split(",")]


@pytest.mark.parametrize(
    "platform",
    [None, PLATFORM, SingleTable(partition_key="songID")],
    ids=["the guide's table", "keyed by user", "keyed by song"],
)
def test_a_repair_s_reads_project_each_attribute_once(
    aws: None, requests_made: list[tuple[str, dict[str, Any]]], platform: SingleTable | None
) -> None:
    # given song1 downloaded twice and counted, then hand-edited to 5
    stack = deploy(single_table=platform)
    write_download(stack, "song1", "d1")
    write_download(stack, "song1", "d2")
    ModelAggregator(stack).run()
    set_count(stack, "song1", MONTH, 5)
    # when March is repaired (its recount of song1 keeps the downloads' ids for the band)
    requests_made.clear()
    report = reconciler(stack).run_month(MONTH, repair=True)
    # then no read names an attribute twice in its projection, through two placeholders either: DynamoDB refuses
    # such a request ("Invalid ProjectionExpression: Two document paths overlap with each other"), moto does not
    projections = [projected_attributes(params) for _, params in requests_made if "ProjectionExpression" in params]
    assert projections
    assert [projection for projection in projections if len(set(projection)) < len(projection)] == []
    assert [(d.state, d.recounted) for d in report.differences] == [("repaired", 2)]
