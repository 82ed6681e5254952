"""`leaderboard-tools readers`: the readers of a table's stream against the two a shard allows (S6, docs/attaching.md).

On moto: the module's stack from operator_stack.deploy (the guide's table, or attached to a platform's table), other
consumers as event source mappings of the same stream, and a platform's table before the module is attached.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from leaderboard_tools.commands import EXIT_DIFFERENCES, EXIT_ERROR, EXIT_EXACT
from tests.unit.tools.operator_stack import REGION, SingleTable, _function_zip, deploy, platform_table, run

PLATFORM = SingleTable()
"""music-platform, keyed PK/SK: the table of terraform/examples/existing-table."""


def stream_of(table: str) -> str:
    return boto3.client("dynamodb", region_name=REGION).describe_table(TableName=table)["Table"]["LatestStreamArn"]


def other_consumer(table: str, name: str = "search-indexer", batch_size: int = 50) -> str:
    """Another team's function on the table's stream (a search index feed): its own mapping; the mapping's UUID."""
    iam = boto3.client("iam", region_name=REGION)
    role = iam.create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17"}))
    lambda_client = boto3.client("lambda", region_name=REGION)
    lambda_client.create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler="handler.handler",
        Code={"ZipFile": _function_zip()},
        Environment={"Variables": {"INDEX": "songs"}},
    )
    return lambda_client.create_event_source_mapping(
        EventSourceArn=stream_of(table), FunctionName=name, StartingPosition="LATEST", BatchSize=batch_size
    )["UUID"]


def readers(table: str, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int | BaseException, str, str]:
    """The command's exit code, stdout and stderr."""
    outcome = run(["readers", "--table", table, *flags])
    captured = capsys.readouterr()
    return outcome, captured.out, captured.err


@pytest.mark.parametrize(("layout", "table"), [("guide", "music-downloads"), ("attached", "music-aggregates")])
def test_the_module_alone_is_the_two_readers_a_shard_allows(
    aws: None, capsys: pytest.CaptureFixture[str], layout: str, table: str
) -> None:
    # given the module on the guide's table, or attached to a platform's table (named by its aggregates table)
    deploy(single_table=PLATFORM if layout == "attached" else None)
    # when readers runs
    outcome, out, err = readers(table, capsys)
    # then the aggregator is the stream's only reader, counted twice (its mapping and its own reads), within the limit
    assert outcome == EXIT_EXACT, err
    assert "  2  the module's aggregator music-aggregator (mapping " in out
    assert "Enabled" in out
    assert "2 readers; a shard allows 2\n" in out
    assert "warning" not in err


def test_one_more_consumer_is_a_third_reader_and_the_warning_says_what_to_do(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the module attached to a platform's table whose stream also feeds a search indexer
    deploy(single_table=PLATFORM)
    uuid = other_consumer(PLATFORM.table)
    # when readers runs on the platform's table
    outcome, out, err = readers(PLATFORM.table, capsys)
    # then three readers per shard: exit 3, the indexer listed, and the warning says what to do
    assert outcome == EXIT_DIFFERENCES
    assert f"  1  search-indexer (mapping {uuid} Enabled, batch size 50)" in out
    assert "3 readers; a shard allows 2: too many" in out
    assert err.startswith("warning: 3 readers of each shard of the stream of music-platform")
    for advice in ("Move search-indexer off the stream", "Kinesis Data Streams for DynamoDB", "ThrottledStreamReads"):
        assert advice in err


def test_before_attaching_an_existing_consumer_and_the_module_to_come_are_too_many(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a platform's table with a stream and one consumer on it, and no module attached yet
    platform_table(PLATFORM)
    other_consumer(PLATFORM.table)
    # when readers runs on it, before terraform apply
    outcome, out, err = readers(PLATFORM.table, capsys)
    # then the aggregator counts as the two readers it will add: three, exit 3 with the warning
    assert outcome == EXIT_DIFFERENCES, err
    assert "  2  the module's aggregator, not attached yet" in out
    assert "  1  search-indexer" in out
    assert "Move search-indexer off the stream" in err


def test_before_attaching_a_stream_without_consumers_has_room_for_the_module(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a platform's table with a stream no one reads yet
    platform_table(PLATFORM)
    # when readers runs on it
    outcome, out, err = readers(PLATFORM.table, capsys)
    # then the module's two readers fit: exit 0, no warning
    assert outcome == EXIT_EXACT, err
    assert "2 readers; a shard allows 2\n" in out
    assert err == ""


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda: platform_table(PLATFORM, stream=False), "table music-platform has no stream"),
        (lambda: None, "cannot read table music-platform"),
    ],
    ids=["no-stream", "no-table"],
)
def test_a_table_without_a_stream_or_that_does_not_exist_is_a_clear_error(
    aws: None, capsys: pytest.CaptureFixture[str], setup: Any, message: str
) -> None:
    # given a platform's table without a stream, or no such table
    setup()
    # when readers runs on it
    outcome, out, err = readers(PLATFORM.table, capsys)
    # then exit 1 with the reason, no traceback
    assert outcome == EXIT_ERROR
    assert err.startswith("error: ")
    assert message in err
    assert "Traceback" not in err
    assert out == ""


def test_json_lists_each_reader_with_its_mappings_and_the_total(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    # given the module attached to a platform's table, and a consumer on its stream that is disabled for now
    stack = deploy(single_table=PLATFORM)
    uuid = other_consumer(PLATFORM.table)
    boto3.client("lambda", region_name=REGION).update_event_source_mapping(UUID=uuid, Enabled=False)
    # when readers runs with --json
    outcome, out, err = readers(PLATFORM.table, capsys, "--json")
    # then one JSON object: the aggregator (2), the disabled mapping with its state (1, it reads again once enabled)
    report = json.loads(out)
    aggregator, indexer = report["readers"]
    assert outcome == EXIT_DIFFERENCES
    assert report["table"] == PLATFORM.table
    assert report["streamArn"] == stack.stream_arn
    assert (report["total"], report["allowed"], report["tooMany"]) == (3, 2, True)
    assert report["warning"] in err
    assert aggregator["kind"] == "aggregator"
    assert aggregator["function"].endswith(":function:music-aggregator")
    assert (aggregator["attached"], aggregator["readers"], len(aggregator["mappings"])) == (True, 2, 1)
    assert set(aggregator["mappings"][0]) == {"uuid", "state", "batchSize"}
    assert indexer == {
        "kind": "mapping",
        "function": indexer["function"],
        "attached": True,
        "readers": 1,
        "mappings": [{"uuid": uuid, "state": "Disabled", "batchSize": 50}],
    }
    assert indexer["function"].endswith(":function:search-indexer")


def test_in_ledger_mode_the_aggregator_still_takes_both_readers_and_another_consumer_is_one_too_many(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the module attached in ledger mode (with retractions) to a platform's table whose stream feeds an indexer
    deploy(
        single_table=PLATFORM,
        retractions=True,
        aggregator_settings={"LEDGER": "true", "CLAIMS_TABLE_NAME": "music-claims"},
    )
    uuid = other_consumer(PLATFORM.table)
    # when readers runs, as a table and as JSON
    outcome, out, err = readers(PLATFORM.table, capsys)
    json_outcome, json_out, _ = readers(PLATFORM.table, capsys, "--json")
    # then the aggregator still counts two (its mapping and its own reads of the shard, in ledger mode too): three
    # readers with the indexer, exit 3 and the warning
    assert (outcome, json_outcome) == (EXIT_DIFFERENCES, EXIT_DIFFERENCES)
    assert "  2  the module's aggregator music-aggregator (mapping " in out
    assert "and its own reads of the shard, in ledger mode too" in out
    assert f"  1  search-indexer (mapping {uuid} Enabled, batch size 50)" in out
    assert "3 readers; a shard allows 2: too many" in out
    assert "Move search-indexer off the stream" in err
    aggregator, indexer = json.loads(json_out)["readers"]
    assert (aggregator["kind"], aggregator["ledger"], aggregator["readers"]) == ("aggregator", True, 2)
    assert "ledger" not in indexer


def test_without_ledger_mode_the_aggregator_is_not_said_to_be_in_it(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the module on the guide's table, without ledger
    deploy()
    # when readers runs with --json, then its aggregator is two readers, not in ledger mode
    outcome, out, _ = readers("music-downloads", capsys, "--json")
    (aggregator,) = json.loads(out)["readers"]
    assert outcome == EXIT_EXACT
    assert (aggregator["ledger"], aggregator["readers"]) == (False, 2)


ONE_READER = {"LEDGER": "true", "CLAIMS_TABLE_NAME": "music-claims", "STREAM_READERS": "1"}
"""The aggregator's environment as terraform/lambda.tf sets it with ledger = true and stream_readers = 1."""


def test_with_one_stream_reader_the_module_and_another_consumer_are_the_two_a_shard_allows(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the module attached in ledger mode with stream_readers = 1 to a table whose stream feeds an indexer
    deploy(single_table=PLATFORM, retractions=True, aggregator_settings=ONE_READER)
    uuid = other_consumer(PLATFORM.table)
    # when readers runs, as text and as JSON
    outcome, out, err = readers(PLATFORM.table, capsys)
    json_outcome, json_out, _ = readers(PLATFORM.table, capsys, "--json")
    # then the aggregator is one steady reader (its mapping), recover's read-back momentary: two readers, exit 0
    assert (outcome, json_outcome) == (EXIT_EXACT, EXIT_EXACT), err
    assert "  1  the module's aggregator music-aggregator (mapping " in out
    assert "its mapping the only steady reader (ledger mode, stream_readers = 1)" in out
    assert "recover's read-back of a batch the mapping gave up is a momentary reader, only after a give-up" in out
    assert f"  1  search-indexer (mapping {uuid} Enabled, batch size 50)" in out
    assert "2 readers; a shard allows 2\n" in out
    assert err == ""
    report = json.loads(json_out)
    aggregator, indexer = report["readers"]
    assert (aggregator["ledger"], aggregator["streamReaders"], aggregator["readers"]) == (True, 1, 1)
    assert "momentary" in aggregator["momentary"]
    assert "momentary" not in indexer
    assert (report["total"], report["tooMany"], report["warning"]) == (2, False, None)


def test_with_two_stream_readers_the_same_consumer_is_one_too_many_and_the_warning_offers_one_reader(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the same table and indexer, the module in ledger mode with its default stream_readers = 2 (said outright)
    deploy(
        single_table=PLATFORM,
        retractions=True,
        aggregator_settings={**ONE_READER, "STREAM_READERS": "2"},
    )
    other_consumer(PLATFORM.table)
    # when readers runs
    outcome, out, err = readers(PLATFORM.table, capsys, "--json")
    # then three readers: exit 3, and the warning names stream_readers = 1 as a way to fit
    report = json.loads(out)
    assert outcome == EXIT_DIFFERENCES
    assert (report["readers"][0]["streamReaders"], report["total"], report["tooMany"]) == (2, 3, True)
    assert "momentary" not in report["readers"][0]
    assert "apply the module with stream_readers = 1" in err


def test_with_one_stream_reader_two_other_consumers_are_too_many_and_no_reader_of_the_module_is_left_to_give(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the one-reader module beside two other consumers
    deploy(single_table=PLATFORM, retractions=True, aggregator_settings=ONE_READER)
    other_consumer(PLATFORM.table)
    other_consumer(PLATFORM.table, name="analytics-feed")
    # when readers runs
    outcome, out, err = readers(PLATFORM.table, capsys)
    # then three readers, exit 3; the warning moves a consumer, offers no stream_readers = 1 (it has it), and says the
    # mappings' reads are what is throttled (the aggregator reads no shard steadily)
    assert outcome == EXIT_DIFFERENCES
    assert "3 readers; a shard allows 2: too many" in out
    assert "Move analytics-feed, search-indexer off the stream" in err
    assert "stream_readers = 1" not in err
    assert "iterator_age" in err
    assert "ThrottledStreamReads" not in err


@pytest.mark.parametrize(("planned", "expected"), [("1", EXIT_EXACT), ("2", EXIT_DIFFERENCES)])
def test_before_attaching_the_planned_stream_readers_decide_whether_an_existing_consumer_leaves_room(
    aws: None, capsys: pytest.CaptureFixture[str], planned: str, expected: int
) -> None:
    # given a platform's table whose stream feeds one consumer, and no module attached yet
    platform_table(PLATFORM)
    other_consumer(PLATFORM.table)
    # when readers runs with the stream_readers the module will be applied with
    outcome, out, err = readers(PLATFORM.table, capsys, "--stream-readers", planned)
    # then the module to come counts as that many readers: 1 fits beside the consumer, 2 do not
    assert outcome == expected, err
    assert f"  {planned}  the module's aggregator, not attached yet: its mapping " in out
    assert f"{int(planned) + 1} readers; a shard allows 2" in out


def test_a_planned_stream_readers_that_contradicts_the_attached_aggregator_is_refused(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the one-reader module attached
    deploy(single_table=PLATFORM, retractions=True, aggregator_settings=ONE_READER)
    # when readers runs saying the module takes two readers
    outcome, out, err = readers(PLATFORM.table, capsys, "--stream-readers", "2")
    # then it refuses, naming what the aggregator says
    assert outcome == EXIT_ERROR
    assert "--stream-readers 2 contradicts the deployment" in err
    assert "(STREAM_READERS) says 1" in err
    assert out == ""


def test_an_aggregator_without_stream_readers_in_its_environment_takes_two_readers(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the module deployed before stream_readers existed (no STREAM_READERS in the aggregator's environment)
    deploy(single_table=PLATFORM, retractions=True, aggregator_settings={"LEDGER": "true"})
    # when readers runs with --json, then the aggregator is two readers
    outcome, out, _ = readers(PLATFORM.table, capsys, "--json")
    (aggregator,) = json.loads(out)["readers"]
    assert outcome == EXIT_EXACT
    assert (aggregator["streamReaders"], aggregator["readers"]) == (2, 2)
