"""The operator tools as an on-call engineer runs them: on AWS by default, reading the deployment, never racing.

Each test drives the command line (`leaderboard_tools.cli.main`) against the module's deployment in
moto (tests/unit/tools/operator_stack.py) and checks what reached AWS and what the table holds afterwards.
"""

from __future__ import annotations

import io
import json
import tracemalloc
from typing import Any
from urllib.parse import urlparse

import boto3
import botocore.handlers
import pytest
from botocore.response import StreamingBody

from leaderboard_core.attributes import AttributeNames
from leaderboard_core.index_layout import leaderboard_partition
from leaderboard_tools.reconcile import Reconciler
from tests.unit.tools.operator_stack import (
    MONTH,
    QUICK_BANDS,
    ModelAggregator,
    MotoStack,
    aggregate_item,
    answer_with,
    deploy,
    given_up_batch,
    run,
    set_count,
    stored_count,
    write_download,
)

REGIONAL_ENDPOINTS = {
    "dynamodb": "dynamodb.us-east-1.amazonaws.com",
    "dynamodbstreams": "streams.dynamodb.us-east-1.amazonaws.com",
    "lambda": "lambda.us-east-1.amazonaws.com",
    "sqs": "sqs.us-east-1.amazonaws.com",
}
RENAMED = AttributeNames(count="Downloads")


@pytest.fixture(autouse=True)
def quick_bands(monkeypatch: pytest.MonkeyPatch) -> None:
    """The band's settling and polling as QUICK_BANDS has them: the commands build their Reconciler with defaults."""
    defaults = Reconciler.__init__.__kwdefaults__
    monkeypatch.setitem(defaults, "band_settle_seconds", QUICK_BANDS["band_settle_seconds"])
    monkeypatch.setitem(defaults, "band_poll_seconds", QUICK_BANDS["band_poll_seconds"])


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URL of every request any botocore client sends from now on (moto still answers those for AWS)."""
    urls: list[str] = []

    def record(request: Any, **_: Any) -> None:
        urls.append(request.url)

    monkeypatch.setattr(
        botocore.handlers, "BUILTIN_HANDLERS", [("before-send", record), *botocore.handlers.BUILTIN_HANDLERS]
    )
    return urls


# ---------------------------------------------------------------- 1. AWS by default


def test_with_no_endpoint_each_tool_sends_every_request_to_the_regional_aws_endpoint(
    aws: None, sent: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # given the module deployed (in moto), a download not yet counted, AWS credentials and a region in the
    # standard environment variables and no AWS_ENDPOINT_URL (the aws fixture removes it)
    stack = deploy()
    write_download(stack, "song1", "d1")
    hosts_per_tool = {}
    for argv in (
        ["reconcile", "--table", stack.table, "--month", MONTH, "--repair"],
        ["recover", "--table", stack.table, "--queue-url", stack.queue_url],
        ["rekey", "--table", stack.table, "--shards", "1"],
    ):
        sent.clear()
        # when each tool runs
        outcome = run(argv)
        hosts_per_tool[argv[0]] = ({urlparse(url).netloc for url in sent}, outcome)
    # then every request of every tool went to the regional endpoint of its service, and each tool got its answers
    assert hosts_per_tool["reconcile"][0] == {
        REGIONAL_ENDPOINTS[service] for service in ("dynamodb", "dynamodbstreams", "lambda")
    }, hosts_per_tool
    assert hosts_per_tool["recover"][0] == {REGIONAL_ENDPOINTS[service] for service in ("dynamodb", "lambda", "sqs")}
    assert hosts_per_tool["rekey"][0] == {REGIONAL_ENDPOINTS[service] for service in ("dynamodb", "lambda")}
    assert [outcome for _, outcome in hosts_per_tool.values()] == [4, 0, 0], capsys.readouterr().err


def test_an_endpoint_is_used_only_when_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from leaderboard_tools.operator_aws import operator_clients

    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    # given nothing: AWS's regional endpoints, in the region asked for
    default = operator_clients(region="eu-west-1")
    assert default.dynamodb.meta.endpoint_url == "https://dynamodb.eu-west-1.amazonaws.com"
    assert default.dynamodbstreams.meta.endpoint_url == "https://streams.dynamodb.eu-west-1.amazonaws.com"
    # given AWS_ENDPOINT_URL (the SDKs' own setting) or --endpoint-url: every service there
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4633")
    from_environment = operator_clients(region="eu-west-1")
    given = operator_clients(region="eu-west-1", endpoint_url="http://127.0.0.1:9999")
    for service in ("dynamodb", "dynamodbstreams", "lambda_", "sqs"):
        assert getattr(from_environment, service).meta.endpoint_url == "http://127.0.0.1:4633"
        assert getattr(given, service).meta.endpoint_url == "http://127.0.0.1:9999"


def test_without_a_region_the_tools_say_so_before_sending_anything(
    monkeypatch: pytest.MonkeyPatch, sent: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    for variable in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    assert run(["reconcile", "--table", "music-downloads", "--month", MONTH]) == 5  # AWS not reachable as set up
    assert "no AWS region" in capsys.readouterr().err
    assert sent == []


# ---------------------------------------------------------------- 2. the tools read the deployment


def test_a_renamed_count_attribute_is_read_from_the_deployment_not_assumed(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a stack whose count attribute is Downloads, and one aggregate counted 5 for 2 downloads
    stack = deploy(names=RENAMED)
    write_download(stack, "song1", "d1")
    write_download(stack, "song1", "d2")
    ModelAggregator(stack).run()
    set_count(stack, "song1", MONTH, 5)
    capsys.readouterr()
    # when reconcile runs with --table alone
    code = run(["reconcile", "--table", stack.table, "--month", MONTH, "--json"])
    # then it reports the difference under the deployment's names, and says so in its exit code
    report = json.loads(capsys.readouterr().out)
    assert [(d["songID"], d["stored"], d["recounted"]) for d in report["differences"]] == [("song1", 5, 2)]
    assert code == 3


def test_an_aggregate_the_repair_creates_lands_in_the_deployed_leaderboard_layout(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a stack with leaderboard_shards = 4 whose aggregate of a counted song was lost (deleted by hand)
    stack = deploy(names=RENAMED, shards=4)
    for number in range(3):
        write_download(stack, "lost-song", f"d{number}")
    ModelAggregator(stack).run()
    names = stack.names
    key = {names.entity: {"S": "lost-song"}, names.sort_key: {"S": MONTH}}
    import boto3

    boto3.client("dynamodb", region_name="us-east-1").delete_item(TableName=stack.table, Key=key)
    # when reconcile --repair runs with --table alone
    code = run(["reconcile", "--table", stack.table, "--month", MONTH, "--repair"])
    # then the aggregate is back with its count, in the index partition the query function reads
    item = aggregate_item(stack, "lost-song", MONTH)
    assert item is not None, capsys.readouterr()
    assert (item[names.count]["N"], item[names.period]["S"]) == ("3", leaderboard_partition(MONTH, "lost-song", 4))
    assert code == 0


def test_a_flag_that_contradicts_the_deployment_is_refused(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    # given a stack with the count in Downloads and four leaderboard shards, one aggregate off by one
    stack = deploy(names=RENAMED, shards=4)
    write_download(stack, "song1", "d1")
    ModelAggregator(stack).run()
    set_count(stack, "song1", MONTH, 2)
    capsys.readouterr()
    # when the operator names another count attribute, or another layout
    wrong_name = run(
        ["reconcile", "--table", stack.table, "--month", MONTH, "--repair", "--count-attribute", "DownloadCount"]
    )
    name_message = capsys.readouterr().err
    wrong_shards = run(["reconcile", "--table", stack.table, "--month", MONTH, "--repair", "--shards", "1"])
    shards_message = capsys.readouterr().err
    # then both are refused with what the deployment says, and nothing changed
    assert (wrong_name, wrong_shards) == (1, 1)
    assert "--count-attribute DownloadCount contradicts the deployment" in name_message
    assert "Downloads" in name_message
    assert "--shards 1 contradicts the deployment" in shards_message
    assert stored_count(stack, "song1", MONTH) == 2


def test_rekey_refuses_a_layout_that_is_not_deployed(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    # given a stack on four leaderboard shards, its aggregates where the query function reads them
    stack = deploy(shards=4)
    write_download(stack, "song1", "d1")
    ModelAggregator(stack).run()
    before = aggregate_item(stack, "song1", MONTH)
    capsys.readouterr()
    # when rekey is asked for two shards
    code = run(["rekey", "--table", stack.table, "--shards", "2"])
    # then it refuses, naming the deployed layout, and moves nothing
    assert code == 1
    assert "leaderboard_shards = 4" in capsys.readouterr().err
    assert aggregate_item(stack, "song1", MONTH) == before


# ---------------------------------------------------------------- 3. a repair that cannot race


def in_flight_month(stack: MotoStack) -> dict[str, int]:
    """song-a: 3 downloads, 2 counted, 1 still in the stream; song-b: 1 download, none counted; song-c: 2
    downloads, both counted, then edited to 7 by hand. Returns the truth."""
    aggregator = ModelAggregator(stack)
    write_download(stack, "song-c", "c1")
    write_download(stack, "song-c", "c2")
    write_download(stack, "song-a", "a1")
    write_download(stack, "song-a", "a2")
    aggregator.run()
    set_count(stack, "song-c", MONTH, 7)
    write_download(stack, "song-a", "a3")
    write_download(stack, "song-b", "b1")
    return {"song-a": 3, "song-b": 1, "song-c": 2}


def test_repair_leaves_what_is_in_flight_and_the_stream_then_makes_every_count_exact(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a stack (four leaderboard shards, a renamed count) whose stream lags: song-a and song-b
    # have downloads in the stream that the aggregator has not read, song-c drifted by hand
    stack = deploy(names=RENAMED, shards=4)
    truth = in_flight_month(stack)
    capsys.readouterr()
    # when reconcile --repair runs while the records are in flight
    code = run(["reconcile", "--table", stack.table, "--month", MONTH, "--repair", "--json"])
    output = capsys.readouterr().out
    counts_after_repair = {song: stored_count(stack, song, MONTH) for song in truth}
    # and the aggregator then catches up with the stream
    ModelAggregator(stack).run()
    # then no count ever exceeded the truth, and every count ends exact
    assert all((counts_after_repair[song] or 0) <= truth[song] for song in truth), counts_after_repair
    assert {song: stored_count(stack, song, MONTH) for song in truth} == truth
    # and the repair fixed the drift, reported the two in flight as pending, and its exit code says so
    report = json.loads(output)
    states = {d["songID"]: d["state"] for d in report["differences"]}
    assert states == {"song-a": "pending", "song-b": "pending", "song-c": "repaired"}
    assert code == 4


def test_a_repair_while_the_stream_lags_never_leaves_a_count_above_the_truth(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the module's default names and layout; song-a has 3 downloads, 2 counted and the third still in the
    # stream; song-b has 1 download, not counted yet (no aggregate): the stream lags behind the table
    stack = deploy()
    aggregator = ModelAggregator(stack)
    write_download(stack, "song-a", "a1")
    write_download(stack, "song-a", "a2")
    aggregator.run()
    write_download(stack, "song-a", "a3")
    write_download(stack, "song-b", "b1")
    capsys.readouterr()
    # when reconcile --repair runs while those two records are in flight, and the aggregator then reads them
    code = run(["reconcile", "--table", stack.table, "--month", MONTH, "--repair"])
    ModelAggregator(stack).run()
    # then each song ends at its downloads: song-a at 3 (not 4), song-b at 1 (not 2)
    assert {song: stored_count(stack, song, MONTH) for song in ("song-a", "song-b")} == {"song-a": 3, "song-b": 1}
    # and the repair said that it left them pending
    assert code == 4, capsys.readouterr().err


def test_a_download_the_recount_counted_is_refused_however_late_it_reaches_the_aggregator(
    aws: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from leaderboard_tools import stream_reading

    # given song-a counted 1 of its 2 downloads, the second still in the stream, and a stream read
    # that does not see it yet (records become readable "in near-real time", not at once)
    stack = deploy(names=RENAMED)
    write_download(stack, "song-a", "a1")
    ModelAggregator(stack).run()
    write_download(stack, "song-a", "a2")
    monkeypatch.setattr(
        stream_reading.ShardReader,
        "read",
        lambda self, shard_id, on_record, **_: stream_reading.ShardReadOutcome(shard_id, 0, "tip"),
    )
    # when the repair sets the recount (2) and the aggregator reads the late record afterwards
    assert run(["reconcile", "--table", stack.table, "--month", MONTH, "--repair"]) == 0
    aggregator = ModelAggregator(stack)
    aggregator.run()
    # then the record is refused by the recount fence, and the count stays exact
    assert stored_count(stack, "song-a", MONTH) == 2
    assert [(song, month) for song, month, _ in aggregator.refused] == [("song-a", MONTH)]
    item = aggregate_item(stack, "song-a", MONTH)
    assert item is not None
    assert int(item["RecountedThrough"]["N"]) > 0


def test_without_a_progress_table_the_repair_is_refused_not_guessed(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a deployment whose aggregator keeps no progress table (a release before checkpoints)
    stack = deploy(with_progress_table=False)
    write_download(stack, "song1", "d1")
    capsys.readouterr()
    # when --repair runs, then it refuses and writes nothing
    assert run(["reconcile", "--table", stack.table, "--month", MONTH, "--repair"]) == 1
    assert "progress table" in capsys.readouterr().err
    assert stored_count(stack, "song1", MONTH) is None


def test_the_deployment_is_read_from_the_table_alone(aws: None) -> None:
    from leaderboard_tools.deployment import discover
    from leaderboard_tools.operator_aws import operator_clients

    # given a stack in the middle of a layout change, with TTL and a renamed count
    stack = deploy(names=RENAMED, shards=4, previous_shards=2, ttl_attribute="ExpiresAt", window_seconds=30)
    # when the deployment is read from its table
    found = discover(operator_clients(region="us-east-1"), stack.table).as_json()
    # then every setting the tools need is the deployed one
    assert found | {"table_arn": None, "stream_arn": None, "mapping_uuid": None} == {
        "table": stack.table,
        "table_arn": None,
        "stream_arn": None,
        "names": {
            "entity": "songID",
            "sort_key": "SK",
            "timestamp": "Timestamp",
            "period": "Month",
            "count": "Downloads",
            "order": "LeaderboardOrder",
        },
        "leaderboard_shards": 4,
        "query_leaderboard_shards": 4,
        "query_leaderboard_shards_previous": 2,
        "ttl_attribute": "ExpiresAt",
        "window_seconds": 30,
        "failure_queue_url": stack.queue_url,
        "progress_table": stack.progress_table,
        "aggregator_function": f"arn:aws:lambda:us-east-1:123456789012:function:{stack.aggregator}",
        "query_function": stack.query,
        "mapping_uuid": None,
        "mapping_state": "Enabled",
        "periods": ["month"],
        "category_attribute": None,
        "sum_attribute": None,
        "recount_band_queue_url": None,
        "aggregates_table": "",
        "key_attributes": ["songID", "SK"],
        "marker": None,
        "claims_table": None,
        "retractions": False,
        "ledger": False,
        "calendar": {"time_zone": "UTC", "season": None},
        "tie_break": "entity",
        "stream_readers": 2,
    }
    assert found["stream_arn"] == stack.stream_arn
    assert json.loads(json.dumps(found)) == found


# ---------------------------------------------------------------- 4. one month parser


def test_a_repair_leaves_a_count_the_aggregator_made_from_a_lowercase_z_or_surrounding_spaces(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given two downloads of song1 whose timestamps the aggregator accepts (a lowercase z, surrounding spaces),
    # both counted by it: song1 holds 2 for March
    stack = deploy()
    write_download(stack, "song1", "d1", timestamp="2018-03-10T10:00:00z")
    write_download(stack, "song1", "d2", timestamp=" 2018-03-10T10:00:00Z ")
    ModelAggregator(stack).run()
    capsys.readouterr()
    # when reconcile --repair runs on the month
    code = run(["reconcile", "--table", stack.table, "--month", MONTH, "--repair"])
    # then the recount reads the two timestamps as the aggregator did: the correct count is left as it is
    assert stored_count(stack, "song1", MONTH) == 2
    assert code == 0, capsys.readouterr().err


# ---------------------------------------------------------------- 5. recover reads through empty pages


EMPTY_PAGE = "empty-page-then:"


class EmptyPageAfterEachRecord:
    """GetRecords as AWS documents it may answer: an empty page in the middle of a shard (here after each record)."""

    def __init__(self) -> None:
        self._streams = boto3.session.Session().client("dynamodbstreams", region_name="us-east-1")

    def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        iterator = params["ShardIterator"]
        if iterator.startswith(EMPTY_PAGE):
            return {"Records": [], "NextShardIterator": iterator.removeprefix(EMPTY_PAGE)}
        page = self._streams.get_records(ShardIterator=iterator, Limit=1)
        if page["Records"] and page.get("NextShardIterator"):
            page["NextShardIterator"] = EMPTY_PAGE + page["NextShardIterator"]
        return page


def test_recover_counts_a_given_up_batch_whole_when_its_range_holds_empty_pages(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a batch of one download each of song1 and song2 that the mapping gave up on (nothing counted, its
    # on-failure record in the failure queue), a stream that answers an empty page after each record, and the
    # aggregator's direct invocation (played by the model) counting its shard when recover asks
    stack = deploy()
    write_download(stack, "song1", "d1")
    write_download(stack, "song2", "d2")
    given_up_batch(stack)
    aggregator = ModelAggregator(stack)

    def invoke(params: dict[str, Any]) -> dict[str, Any]:
        aggregator.run()
        payload = json.dumps({"reachedBound": True}).encode()
        return {"StatusCode": 200, "Payload": StreamingBody(io.BytesIO(payload), len(payload))}

    answer_with(monkeypatch, "dynamodb-streams.GetRecords", EmptyPageAfterEachRecord())
    answer_with(monkeypatch, "lambda.Invoke", invoke)
    capsys.readouterr()
    # when recover runs
    code = run(["recover", "--table", stack.table, "--queue-url", stack.queue_url])
    # then both downloads of the batch are counted, not only the one before the first empty page
    assert {song: stored_count(stack, song, MONTH) for song in ("song1", "song2")} == {"song1": 1, "song2": 1}
    # and the message is deleted only now that everything it names is exact
    attributes = boto3.client("sqs", region_name="us-east-1").get_queue_attributes(
        QueueUrl=stack.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert sum(int(value) for value in attributes.values()) == 0
    assert code == 0, capsys.readouterr().err


# ---------------------------------------------------------------- 6. memory bounded by songs


class GeneratedDownloads:
    """Scan of the downloads (FilterExpression attribute_not_exists) answered with `total` March downloads of three
    songs, 1,000 a page per segment, made page by page; other scans are moto's."""

    def __init__(self) -> None:
        self.total = 0

    def __call__(self, body: dict[str, Any]) -> dict[str, Any] | None:
        if "attribute_not_exists" not in body.get("FilterExpression", ""):
            return None
        share = range(body.get("Segment", 0), self.total, body.get("TotalSegments", 1))
        start = int(body.get("ExclusiveStartKey", {}).get("SK", {}).get("S", "0"))
        items = [
            {"songID": {"S": f"song{number % 3}"}, "Timestamp": {"S": f"2018-03-{number % 28 + 1:02d}T10:00:00Z"}}
            for number in share[start : start + 1000]
        ]
        page: dict[str, Any] = {"Items": items, "Count": len(items), "ScannedCount": len(items)}
        if start + 1000 < len(share):
            page["LastEvaluatedKey"] = {"songID": {"S": "song0"}, "SK": {"S": str(start + 1000)}}
        return page


@pytest.mark.slow  # a month of 120,000 downloads: CI runs it, make check does not
def test_reconcile_s_memory_does_not_grow_with_a_month_s_downloads(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a month of three songs, none counted yet, whose downloads the table answers page by page
    stack = deploy()
    downloads = GeneratedDownloads()
    answer_with(monkeypatch, "dynamodb.Scan", downloads)
    peaks, recounted = {}, {}
    for total in (12_000, 120_000):
        downloads.total = total
        capsys.readouterr()
        # when reconcile recounts the month, of 12,000 downloads and then of 120,000 (as items some 60 MB)
        tracemalloc.start()
        try:
            run(["reconcile", "--table", stack.table, "--month", MONTH, "--json"])
            peaks[total] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        report = json.loads(capsys.readouterr().out)
        recounted[total] = sorted((d["songID"], d["recounted"]) for d in report["differences"])
    # then every download is counted each time
    assert recounted == {total: [(f"song{n}", total // 3) for n in range(3)] for total in (12_000, 120_000)}
    # and ten times the downloads cost the recount no more memory: it holds counters per song, not the downloads
    growth = peaks[120_000] - peaks[12_000]
    assert growth < 5_000_000, f"peak {peaks[12_000] / 1e6:.1f} MB -> {peaks[120_000] / 1e6:.1f} MB"


class _ListedMappings:
    """A Lambda client listing the given mappings of one stream, every function an aggregator of `table`."""

    def __init__(self, table: str, mappings: list[dict[str, Any]]) -> None:
        self._table, self._mappings = table, mappings

    def get_paginator(self, operation: str) -> Any:
        assert operation == "list_event_source_mappings"
        mappings = self._mappings
        return type("Paginator", (), {"paginate": lambda _self, **_: [{"EventSourceMappings": mappings}]})()

    def get_function_configuration(self, FunctionName: str) -> dict[str, Any]:  # noqa: N803 (boto3's name)
        return {"Environment": {"Variables": {"TABLE_NAME": self._table, "COUNT_ATTRIBUTE": "DownloadCount"}}}


def test_a_mapping_replaced_by_terraform_and_still_deleting_is_not_a_second_aggregator() -> None:
    from leaderboard_tools.deployment import DeploymentError, _aggregator_mapping

    # given the stream's mappings right after Terraform replaced the aggregator's: the old one still listed as
    # Deleting (AWS, DeleteEventSourceMapping: "might not be completely deleted for several seconds"), the new one
    function = "arn:aws:lambda:us-east-1:123456789012:function:songs-aggregator"
    old = {"UUID": "old", "FunctionArn": function, "State": "Deleting"}
    new = {"UUID": "new", "FunctionArn": function, "State": "Enabled"}
    # when the aggregator is looked up, whichever order the list gives
    found = [
        _aggregator_mapping(_ListedMappings("songs", order), "songs", "stream") for order in ([old, new], [new, old])
    ]
    # then it is the one function, through its live mapping
    assert [mapping["UUID"] for mapping, _ in filter(None, found)] == ["new", "new"]
    # and two functions reading the stream are still refused
    other = {"UUID": "other", "FunctionArn": function.replace("songs-", "other-"), "State": "Enabled"}
    with pytest.raises(DeploymentError, match="more than one aggregator"):
        _aggregator_mapping(_ListedMappings("songs", [new, other]), "songs", "stream")
