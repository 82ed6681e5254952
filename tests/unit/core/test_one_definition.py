"""One definition per fact: where a fact must still stand in more than one place, a test holds every copy equal.

The facts the aggregator, the query function and the operator tools share are defined once in
`leaderboard_core` (lambda_src/leaderboard_core/, copied into both zips by build.py and shipped with
the operator tools). What remains here: Python against Terraform, and the facts the core does not
hold yet. docs/design.md, "One definition per fact", lists them; each test holds one fact's copies
equal to its definition: constants by value, functions on generated input, rejections included.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import zoneinfo
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import build
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import aggregate_writes
import delivery
import download_records
import failure_messages as aggregator_messages
import progress_item
import query
import shard_progress
from aggregator_settings import Settings
from boards import boards_from_environment
from download_records import Download, Schema, parse_record
from index_reads import Layout
from leaderboard_core import index_layout
from leaderboard_core.attributes import NAME_VARIABLES, AttributeNames
from leaderboard_core.bookkeeping import (
    CHECKPOINT,
    CHECKPOINT_SEQUENCE,
    RESUME_AT,
    SHARD_ENDED,
    SHARD_KEY,
    WATERMARK_PREFIX,
    pad_sequence,
)
from leaderboard_core.buckets import board_id, bucket_key, time_zone_names
from leaderboard_core.periods import PERIOD_NAMES, PERIODS
from leaderboard_tools import deployment, reconcile, stream_reading
from leaderboard_tools.recover import failure_messages
from leaderboard_tools.size import prices, sizing
from tests import terraform_config
from tests.property_examples import examples
from tests.unit.terraform.lambda_environment import RecordingEnvironment, function_environment

TERRAFORM = Path(__file__).resolve().parents[3] / "terraform"
MOMENTS = st.datetimes(min_value=datetime(1, 1, 8), max_value=datetime(9999, 12, 24), timezones=st.just(UTC))
IDS = st.text(min_size=1, max_size=40).filter(lambda text: "\x00" not in text)


@dataclasses.dataclass(frozen=True)
class Refused:
    error: str


@functools.cache
def module_sets(function: str) -> frozenset[str]:
    """The environment variables terraform/lambda.tf gives the function (parsed once)."""
    return frozenset(function_environment(function))


def outcome(compute: Callable[[], Any]) -> Any:
    """What a copy answers: its value, or the kind of error it refuses with."""
    try:
        return compute()
    except (ValueError, ZeroDivisionError) as error:
        return Refused(type(error).__name__)


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


# ---------------------------------------------------------------- the attribute-name schema


def test_the_functions_read_the_attribute_names_lambda_tf_gives_them() -> None:
    # given the variables that set the attribute names (leaderboard_core.attributes, one definition for all three)
    variables = set(NAME_VARIABLES.values())
    # then terraform/lambda.tf gives each of them to the aggregator, and those the query reads to the query function
    assert variables <= module_sets("aggregator")
    assert variables - {"TIMESTAMP_ATTRIBUTE"} <= module_sets("query")
    assert set(NAME_VARIABLES) == {field.name for field in dataclasses.fields(AttributeNames)}


def test_the_host_tools_read_only_variables_the_module_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a deployment whose functions carry the environments lambda.tf gives them
    table = "t-downloads"
    given = {
        function: dict.fromkeys(module_sets(function), "1")
        | {
            "TABLE_NAME": table,
            "ENTITY_ATTRIBUTE": "songID",
            "SORT_KEY_ATTRIBUTE": "SK",
            "LEADERBOARD_PERIODS": "month",
            "LEADERBOARD_TIME_ZONE": "America/New_York",
            "LEADERBOARD_TIME_ZONE_DATA": version("tzdata"),
            "LEADERBOARD_SEASON_START": "2026-01-05",
            "LEADERBOARD_SEASON_LENGTH_DAYS": "28",
        }
        for function in ("aggregator", "query")
    }
    read: dict[str, RecordingEnvironment] = {}

    def environment_of(lambda_client: Any, function: str) -> RecordingEnvironment:
        name = "query" if function.endswith(deployment.QUERY_SUFFIX) else "aggregator"
        read[name] = RecordingEnvironment(given[name])
        return read[name]

    monkeypatch.setattr(deployment, "_environment", environment_of)
    # when the operator tools read the deployment
    deployment.discover(_FakeDeployment(table), table)
    # then they asked each function only for variables the module sets for it, the attribute names among them
    for function in ("aggregator", "query"):
        assert read[function].asked <= module_sets(function), function
    assert set(deployment.NAME_VARIABLES.values()) <= read["aggregator"].asked
    assert "LEADERBOARD_SHARDS" in read["query"].asked


class _FakeDeployment:
    """describe_table, the stream's one mapping (the aggregator) and the functions, as discover reads them."""

    def __init__(self, table: str) -> None:
        self.dynamodb, self.lambda_ = self, self
        self._table = table

    def describe_table(self, **parameters: Any) -> dict[str, Any]:
        keys = [{"AttributeName": "songID", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}]
        arn = f"arn:aws:dynamodb:us-east-1:0:table/{parameters['TableName']}"
        return {
            "Table": {
                "KeySchema": keys,
                "TableArn": arn,
                "StreamSpecification": {"StreamEnabled": True},
                "LatestStreamArn": f"{arn}/stream/2018-01-01T00:00:00.000",
            }
        }

    def describe_time_to_live(self, **parameters: Any) -> dict[str, Any]:
        return {"TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}}

    def get_paginator(self, operation: str) -> Any:
        assert operation == "list_event_source_mappings"
        function = f"arn:aws:lambda:us-east-1:0:function:t{deployment.AGGREGATOR_SUFFIX}"
        mapping = {"FunctionArn": function, "UUID": "u", "State": "Enabled", "TumblingWindowInSeconds": 5}
        return SimpleNamespace(paginate=lambda **_: [{"EventSourceMappings": [mapping]}])


# ---------------------------------------------------------------- the environment: boards and layout

PERIOD_LISTS = st.lists(st.sampled_from([*PERIODS, "", "months", "Day", " day"]), max_size=4).map(",".join)


@settings(max_examples=examples(200), deadline=None)
@given(
    environment=st.fixed_dictionaries(
        {"TABLE_NAME": st.just("t"), "TABLE_ARN": st.just("arn"), "PROGRESS_TABLE_NAME": st.just("p")},
        optional={
            "LEADERBOARD_PERIODS": PERIOD_LISTS,
            "CATEGORY_ATTRIBUTE": st.sampled_from(["", "Genre"]),
            "SUM_ATTRIBUTE": st.sampled_from(["", "Revenue"]),
            "LEADERBOARD_SHARDS": st.one_of(st.integers(1, 64).map(str), st.sampled_from(["", "x", " 3", "2.0"])),
        },
    )
)
@example(environment={"TABLE_NAME": "t", "TABLE_ARN": "a", "PROGRESS_TABLE_NAME": "p", "LEADERBOARD_PERIODS": ""})
@example(
    environment={
        "TABLE_NAME": "t",
        "TABLE_ARN": "a",
        "PROGRESS_TABLE_NAME": "p",
        "LEADERBOARD_PERIODS": "hour,week,all",
        "CATEGORY_ATTRIBUTE": "Genre",
        "SUM_ATTRIBUTE": "Revenue",
    }
)
def test_both_functions_read_the_boards_the_module_sets(environment: dict[str, str]) -> None:
    # given the boards lambda.tf gives both functions (LEADERBOARD_PERIODS, CATEGORY_ATTRIBUTE, SUM_ATTRIBUTE, shards)
    for function in ("aggregator", "query"):
        assert set(environment) - {"TABLE_NAME", "TABLE_ARN", "PROGRESS_TABLE_NAME"} <= module_sets(function)
    # when each function reads its environment (any value, a malformed one included)
    written = outcome(lambda: Settings.from_environment(environment))
    served = outcome(lambda: (boards_from_environment(environment), query.layout_from_environment(environment)))
    # then both refuse it, or the aggregator writes the boards the query function serves, where the host tools look
    if isinstance(written, Refused) or isinstance(served, Refused):
        assert (written, served) == (Refused("ValueError"), Refused("ValueError"))
        return
    schema, (kept, layout) = written.schema, served
    assert (schema.periods, schema.category is not None, schema.amount is not None, written.leaderboard_shards) == (
        kept.periods,
        kept.categories,
        kept.summed,
        layout.shards,
    )
    assert deployment.leaderboard_periods(environment) == schema.periods


# ---------------------------------------------------------------- the boards: periods, keys, limits


def _terraform_periods() -> tuple[str, ...]:
    """The periods variables.tf's validation of leaderboard_periods accepts."""
    document = terraform_config.hcl_document(TERRAFORM / "variables.tf")
    for block in document["variable"]:
        for name, body in block.items():
            if name.strip('"') == "leaderboard_periods":
                condition = body["validation"][0]["condition"]
                listed = re.search(r"contains\(\[([^\]]*)\]", condition)
                assert listed is not None, condition
                return tuple(re.findall(r'"([^"]+)"', listed[1]))
    raise AssertionError("no variable leaderboard_periods")


def test_the_module_validates_leaderboard_periods_against_the_periods_the_functions_know() -> None:
    assert _terraform_periods() == PERIOD_NAMES


@settings(max_examples=examples(200), deadline=None)
@given(entity=st.text(min_size=1, max_size=30), shards=st.integers(1, 64), category=st.text(min_size=1, max_size=12))
def test_the_query_function_reads_the_partition_the_aggregator_writes_an_entity_to(
    entity: str, shards: int, category: str
) -> None:
    assume(_encodable(entity) and _encodable(category))
    # given an entity of a category board, written where the aggregator places it
    board = board_id("2018-01", category)
    written = index_layout.leaderboard_partition(board, entity, shards)
    # then the partitions the query function reads for that board and entity are that one, among the board's
    assert Layout(shards).entity_partitions(board, entity) == [written]
    assert written in Layout(shards).partitions(board)


# ---------------------------------------------------------------- the progress table and the aggregates' bookkeeping


def _progress_table_hash_key() -> str:
    document = terraform_config.hcl_document(TERRAFORM / "progress.tf")
    for resource in document["resource"]:
        for kind, instances in resource.items():
            for body in instances.values():
                if kind.strip('"') == "aws_dynamodb_table":
                    return str(body["hash_key"]).strip('"')
    raise AssertionError("no aws_dynamodb_table in progress.tf")


def test_the_progress_table_s_key_is_the_one_terraform_declares() -> None:
    # given the progress table's key as the aggregator writes it and the tools read it (leaderboard_core.bookkeeping)
    # then it is the hash key progress.tf declares
    assert _progress_table_hash_key() == SHARD_KEY


SEQUENCES = st.integers(0, 10**40 - 1)


def _spelled(number: int, padded: bool) -> str:
    """A sequence number as the stream spells it: without leading zeros, or at the 21 digits a shard may start at."""
    return str(number).zfill(21) if padded else str(number)


@given(
    stream_arn=st.text(min_size=1, max_size=30),
    shard_id=st.text(min_size=1, max_size=30),
    checkpoint=st.none() | SEQUENCES,
    spelled=st.sampled_from(["absent", "plain", "padded"]),
    resume_at=st.none() | st.tuples(SEQUENCES, st.booleans()),
    ended=st.booleans(),
)
def test_the_in_flight_check_resumes_where_the_aggregator_resumes(
    stream_arn: str,
    shard_id: str,
    checkpoint: int | None,
    spelled: str,
    resume_at: tuple[int, bool] | None,
    ended: bool,
) -> None:
    # given a shard's progress item as the aggregator writes it (a checkpoint, its spelling or none, a ResumeAt)
    item: dict[str, Any] = {SHARD_ENDED: {"BOOL": ended}}
    if checkpoint is not None:
        item[CHECKPOINT] = {"S": pad_sequence(str(checkpoint))}
        if spelled != "absent":
            item[CHECKPOINT_SEQUENCE] = {"S": _spelled(checkpoint, spelled == "padded")}
    if resume_at is not None:
        item[RESUME_AT] = {"S": _spelled(*resume_at)}
    asked: list[dict[str, Any]] = []

    def get_item(**parameters: Any) -> dict[str, Any]:
        asked.append(parameters["Key"])
        return {"Item": item}

    # when the host tools read it for the shard
    host = stream_reading.shard_progress(SimpleNamespace(get_item=get_item), "progress", stream_arn, shard_id)
    # then they read the aggregator's item of that shard, and start where the aggregator's next read starts
    shard = delivery.ShardRef(stream_arn, shard_id)
    assert asked == [shard_progress.ProgressStore(None, "progress").key(shard)]
    written = progress_item.progress_of_item(item)

    def numbers(start: tuple[str | None, str | None]) -> tuple[int | None, ...]:
        return tuple(None if sequence is None else int(sequence) for sequence in start)

    assert numbers(host.start) == numbers(written.start)
    assert (host.ended, host.checkpoint) == (written.ended, written.checkpoint)


@given(stream_arn=st.text(min_size=1, max_size=60), shard_id=st.text(min_size=1, max_size=30))
def test_every_watermark_name_carries_the_prefix_the_recount_looks_for(stream_arn: str, shard_id: str) -> None:
    # given any shard's watermark name, as the aggregator writes it, then the recount recognises it as a watermark
    assert delivery.watermark_name(stream_arn, shard_id).startswith(WATERMARK_PREFIX)


OFFSETS = st.one_of(
    st.sampled_from(["Z", "z", "+00:00", "-05:00", "+05:30", "+14:00", "-12:00", ""]),
    st.builds(
        lambda sign, hours, minutes: f"{sign}{hours:02d}:{minutes:02d}",
        st.sampled_from("+-"),
        st.integers(0, 23),
        st.integers(0, 59),
    ),
)
TIMESTAMPS = st.builds(
    lambda moment, precision, offset, before, after: (
        f"{before}{moment.isoformat(timespec=precision) if precision else moment.date().isoformat()}{offset}{after}"
    ),
    st.datetimes(),
    st.sampled_from(["seconds", "milliseconds", "microseconds", "minutes", None]),
    OFFSETS,
    st.sampled_from(["", " ", "\t", "  \n"]),
    st.sampled_from(["", " ", "\n", " \t"]),
)
"""Timestamps a writer may put in a download: offsets, a lowercase z, surrounding spaces."""


# ---------------------------------------------------------------- what the recount counts


def _deployment(
    periods: tuple[str, ...] = ("month",), category: str | None = None, retractions: bool = False
) -> deployment.Deployment:
    return deployment.Deployment(
        *("t", "arn", None, AttributeNames(), 1, 1, None, None, 5, None, None, None, None, None, None),
        periods=periods,
        category_attribute=category,
        retractions=retractions,
    )


@settings(max_examples=examples(300), deadline=None)
@given(
    category=st.one_of(
        st.text(min_size=0, max_size=400),
        st.text(alphabet="音楽&/ é", min_size=100, max_size=130),
        st.integers(990, 1030).map(lambda length: "x" * length),
    ),
    as_number=st.booleans(),
    periods=st.lists(st.sampled_from(PERIODS), min_size=1, unique=True),
)
def test_the_recount_and_the_aggregator_agree_on_which_categories_count(
    category: str, as_number: bool, periods: list[str]
) -> None:
    # given a download carrying a category (a string of any length or script, or a number) and a deployment's periods
    image = {
        "songID": {"S": "song1"},
        "SK": {"S": "d1"},
        "Timestamp": {"S": "2018-12-31T23:30:00Z"},
        "Genre": {"N": "7"} if as_number else {"S": category},
    }
    record = {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "1", "NewImage": image}}
    # when the recount and the aggregator's parser each decide whether it counts, and in which boards
    parsed = parse_record(record, Schema(periods=tuple(periods), category="Genre"))
    counted_by_the_aggregator = [key.board for key in parsed.keys] if isinstance(parsed, Download) else []
    # then they decide alike: the recount files it in the aggregator's boards, or in none when it rejects it
    assert reconcile.boards_of_download(image, _deployment(tuple(periods), "Genre")) == counted_by_the_aggregator


STRINGS = st.one_of(st.text(max_size=12).map(lambda text: {"S": text}), st.just({"N": "1"}))


@settings(max_examples=examples(300), deadline=None)
@given(
    event_name=st.sampled_from(["INSERT", "INSERT", "MODIFY", "REMOVE"]),
    entity=st.none() | STRINGS,
    timestamp=st.none() | st.one_of(TIMESTAMPS, st.text(max_size=20)).map(lambda text: {"S": text}) | STRINGS,
    aggregate=st.booleans(),
    has_image=st.booleans(),
)
def test_the_recount_files_a_stream_record_where_the_aggregator_counts_it(
    event_name: str, entity: dict[str, str] | None, timestamp: dict[str, str] | None, aggregate: bool, has_image: bool
) -> None:
    # given a stream record of the table: a download, an aggregate's write, or one missing or malforming a field
    image = {"SK": {"S": "d1"}}
    image |= {} if entity is None else {"songID": entity}
    image |= {} if timestamp is None else {"Timestamp": timestamp}
    image |= {"Month": {"S": "2018-01"}} if aggregate else {}
    stream: dict[str, Any] = {"SequenceNumber": "1"} | ({"NewImage": image} if has_image else {})
    record = {"eventName": event_name, "dynamodb": stream}
    # when the aggregator parses it and the recount files it
    parsed = parse_record(record, Schema())
    counted = (parsed.key.entity_id, parsed.key.board) if isinstance(parsed, Download) else None
    # then the recount counts it in the aggregator's aggregate, or not at all when the aggregator does not
    assert reconcile.download_aggregates(record, _deployment()) == ([] if counted is None else [counted])


@settings(max_examples=examples(300), deadline=None)
@given(
    timestamp=TIMESTAMPS,
    category=st.none() | st.text(max_size=40) | st.just("x" * 1020),
    periods=st.lists(st.sampled_from(PERIODS), min_size=1, unique=True),
)
def test_the_recount_files_a_download_in_every_board_the_aggregator_counts_it_in(
    timestamp: str, category: str | None, periods: list[str]
) -> None:
    # given a download, with or without a category, and a deployment's periods and category attribute
    image = {"songID": {"S": "song1"}, "SK": {"S": "d1"}, "Timestamp": {"S": timestamp}}
    image |= {} if category is None else {"Genre": {"S": category}}
    record = {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "1", "NewImage": image}}
    # when the aggregator parses it and the recount files it
    parsed = parse_record(record, Schema(periods=tuple(periods), category="Genre"))
    counted = [(key.entity_id, key.board) for key in parsed.keys] if isinstance(parsed, Download) else []
    # then the recount counts it in exactly the aggregator's aggregates, in the stream and in the table
    deployed = _deployment(tuple(periods), "Genre")
    assert reconcile.download_aggregates(record, deployed) == counted
    assert [("song1", board) for board in reconcile.boards_of_download(image, deployed)] == counted


IMAGES = st.none() | st.fixed_dictionaries(
    {"songID": st.just({"S": "song1"}), "SK": st.just({"S": "d1"})},
    optional={
        "Timestamp": st.sampled_from(["2018-12-31T23:30:00Z", "2019-01-01T00:30:00Z", "2018-12-31T23:45:00Z", "x"]).map(
            lambda text: {"S": text}
        ),
        "Genre": st.sampled_from([{"S": "rock"}, {"S": "jazz"}, {"N": "7"}]),
        "Month": st.just({"S": "2018-12"}),
        "DownloadCount": st.just({"N": "0"}),
    },
)


@settings(max_examples=examples(500), deadline=None)
@given(
    event_name=st.sampled_from(["MODIFY", "REMOVE"]),
    old=IMAGES,
    new=IMAGES,
    identity=st.sampled_from(
        [None, {"type": "Service", "principalId": "dynamodb.amazonaws.com"}, {"Type": "Service", "PrincipalId": "x"}]
    ),
    periods=st.lists(st.sampled_from(PERIODS), min_size=1, unique=True),
)
def test_the_repair_s_look_at_the_stream_waits_for_every_aggregate_a_retraction_moves(
    event_name: str,
    old: dict[str, Any] | None,
    new: dict[str, Any] | None,
    identity: dict[str, str] | None,
    periods: list[str],
) -> None:
    # given a MODIFY or REMOVE of an item (a download, an aggregate, malformed, or expired by TTL) under retractions
    stream: dict[str, Any] = {"SequenceNumber": "1"}
    stream |= {} if old is None else {"OldImage": old}
    stream |= {} if new is None or event_name == "REMOVE" else {"NewImage": new}
    record = {"eventName": event_name, "dynamodb": stream} | ({} if identity is None else {"userIdentity": identity})
    # when the aggregator parses it and the repair's look at the stream files it
    parsed = parse_record(record, Schema(periods=tuple(periods), category="Genre", retractions=True))
    moved = sorted((key.entity_id, key.board) for key in parsed.keys) if isinstance(parsed, Download) else []
    # then the look waits for exactly the aggregates whose counts the aggregator moves
    deployed = _deployment(tuple(periods), "Genre", retractions=True)
    assert reconcile.download_aggregates(record, deployed) == moved


# ---------------------------------------------------------------- the failure queue's messages and the query's answers


@given(
    entity=st.text(min_size=1, max_size=30),
    moment=MOMENTS,
    checkpoint=st.none() | SEQUENCES,
    first=SEQUENCES,
)
def test_recover_reads_the_failure_messages_the_aggregator_writes(
    entity: str, moment: datetime, checkpoint: int | None, first: int
) -> None:
    assume(_encodable(entity))
    # given the messages the aggregator puts in the failure queue: a refused record, a rejected download, a gap
    shard = delivery.ShardRef("arn:aws:dynamodb:us-east-1:0:table/t/stream/s", "shardId-1")
    key = download_records.AggregateKey(entity, bucket_key(moment, "month"))
    contribution = aggregate_writes.Contribution(pad_sequence("7"), None)
    progress = progress_item.Progress(
        checkpoint=None if checkpoint is None else pad_sequence(str(checkpoint)),
        checkpoint_sequence=None if checkpoint is None else str(checkpoint),
    )
    rejected = download_records.Rejected("Timestamp is missing", "8", {"dynamodb": {}})
    messages = {
        "refused_record": aggregator_messages.refused_message(
            aggregator_messages.refused_contribution(key, shard, contribution, "x")
        ),
        "rejected_download": aggregator_messages.rejected_message(rejected, shard),
        "records_trimmed": aggregator_messages.gap_message(shard, progress, str(first), None),
    }
    # when recover reads them
    read = {
        kind: failure_messages.classify(
            {"Body": aggregator_messages.failure_message_body(message), "MessageId": kind, "ReceiptHandle": kind},
            _deployment(),
        )
        for kind, message in messages.items()
    }
    # then it knows each kind, the refused record's aggregate, and whether the gap lost anything
    assert {kind: message.kind for kind, message in read.items()} == {kind: kind for kind in messages}
    assert read["refused_record"].aggregates == {key.board: {entity}}
    assert read["records_trimmed"].every_month == (checkpoint is None or first > checkpoint)


# ---------------------------------------------------------------- what `size` sizes against, and its prices


def test_sizes_limits_and_defaults_are_the_modules_own() -> None:
    declared = terraform_config.variables(TERRAFORM)

    def bounds(name: str) -> tuple[int, int]:
        condition = declared[name]["validation"][0]["condition"]
        low = re.search(rf"var\.{name} >= (\d+)", condition)
        high = re.search(rf"var\.{name} <= (\d+)", condition)
        assert low, condition
        assert high, condition
        return int(low.group(1)), int(high.group(1))

    assert bounds("leaderboard_shards") == (1, sizing.SHARDS_MOST)
    batch_size = declared["batch_size"]["validation"][0]["condition"]
    assert re.findall(r"var\.batch_size [<>]= (\d+)", batch_size) == [str(end) for end in sizing.BATCH_SIZE_RANGE]
    assert bounds("tumbling_window_in_seconds") == sizing.WINDOW_SECONDS_RANGE
    assert declared["batch_size"]["default"] is None
    assert terraform_config.local_values(TERRAFORM)["default_batch_size"] == sizing.BATCH_SIZE_DEFAULTS
    assert declared["tumbling_window_in_seconds"]["default"] == sizing.WINDOW_SECONDS_DEFAULT
    assert declared["aggregator_memory_size"]["default"] == sizing.AGGREGATOR_MEMORY_MB
    assert declared["query_memory_size"]["default"] == sizing.QUERY_MEMORY_MB
    assert declared["aggregator_write_concurrency"]["default"] == sizing.AGGREGATOR_WRITE_CONCURRENCY
    periods = declared["leaderboard_periods"]["validation"][0]["condition"]
    assert re.findall(r'"([a-z]+)"', periods.split("contains(")[1]) == list(PERIOD_NAMES)


def test_every_price_names_its_source() -> None:
    for price in prices.PRICES:
        assert price.source.startswith("https://")
        assert price.confirmed in ("aws", "secondary", "unconfirmed")
        assert price.usd > 0


# ---------------------------------------------------------------- the list of copies


def test_the_design_page_lists_every_fact_this_module_holds_equal() -> None:
    # given docs/design.md's table of copies and the tests of this module
    page = (TERRAFORM.parent / "docs" / "design.md").read_text()
    section = page.split("## One definition per fact", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| Fact")]
    named = {name for row in rows for name in re.findall(r"`(test_\w+)`", row.rsplit(" | ", 1)[-1])}
    this = "test_the_design_page_lists_every_fact_this_module_holds_equal"
    here = {name for name in globals() if name.startswith("test_")} - {this}
    # then every test here holds a fact the table lists, and every test the table names exists (here or beside)
    assert here <= named
    beside = named - here
    contract = (Path(__file__).parents[1] / "terraform" / "test_module_contract.py").read_text()
    assert {name for name in beside if f"def {name}(" not in contract} == set()


# ---------------------------------------------------------------- the time zones

REPOSITORY = TERRAFORM.parent
TZDATA_PIN = re.compile(r"tzdata==([0-9.]+)")
"""An exact pin: the zips' and the development lock's (the operator distribution admits a range from it)."""


@pytest.fixture
def only_the_pinned_package() -> Iterator[None]:
    """zoneinfo's search path emptied: it finds zones in the tzdata package alone, not in the machine's files."""
    zoneinfo.reset_tzpath(to=[])
    try:
        yield
    finally:
        zoneinfo.reset_tzpath()


def test_the_module_accepts_exactly_the_zones_of_the_pinned_tzdata(only_the_pinned_package: None) -> None:
    # given the zones terraform/time_zones.tf lists, which leaderboard_time_zone's precondition checks
    time_zones_tf = (REPOSITORY / "terraform" / "time_zones.tf").read_text()
    listed = re.findall(r'^    "([^"]+)",$', time_zones_tf, flags=re.MULTILINE)
    # then they are the pinned package's zones, as zoneinfo finds them there, and the file is as build.py writes it
    assert listed == sorted(zoneinfo.available_timezones()) == list(time_zone_names())
    assert time_zones_tf == build.time_zones_tf()


def test_both_zips_and_the_development_lock_pin_the_same_tzdata_and_the_tools_admit_it() -> None:
    import tzdata

    pins = {
        path: TZDATA_PIN.findall(path.read_text())
        for path in [*(REPOSITORY / "lambda_src").glob("*/requirements.txt"), REPOSITORY / "development/pyproject.toml"]
    }
    assert len(pins) == 3
    assert {tuple(found) for found in pins.values()} == {(tzdata.__version__,)}, pins
    admitted = re.search(r'"tzdata>=([0-9.]+),<([0-9.]+)"', (REPOSITORY / "pyproject.toml").read_text())
    assert admitted is not None
    assert admitted[1] == tzdata.__version__
