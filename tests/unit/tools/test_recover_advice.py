"""recover's advice for a rejected download, followed on moto: the fixed download counts, the boards equal a recount.

The aggregator is the shipped handler (`aggregator.handle`, with the settings the deployed function's environment
gives it), invoked directly through the shard's last record as recover invokes it; the failure queue's message is
the one it sends. The oracle is the test's own: the downloads the table holds whose timestamp is an ISO 8601 time,
counted by month from the timestamp's first seven characters.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import boto3
import pytest

import aggregator
from aggregator_settings import Settings
from leaderboard_tools.commands.recover import _table
from leaderboard_tools.recover.advice import rejected_download_fix
from tests.unit.aggregator.handler_on_moto import aggregator_dependencies
from tests.unit.conftest import FakeLambdaContext
from tests.unit.tools.operator_stack import REGION, MotoStack, deploy, run, run_recover, write_download

GOOD, MALFORMED = "2018-03-10T10:00:00Z", "yesterday"


def dynamodb() -> Any:
    return boto3.client("dynamodb", region_name=REGION)


def aggregator_catches_up(stack: MotoStack) -> None:
    """The shipped handler, invoked as recover invokes it: count the shard from its checkpoint through its last
    record."""
    lambda_client = boto3.client("lambda", region_name=REGION)
    environment = lambda_client.get_function_configuration(FunctionName=stack.aggregator)["Environment"]["Variables"]
    settings = Settings.from_environment(environment)
    dependencies = aggregator_dependencies(
        settings,
        dynamodb(),
        boto3.client("dynamodbstreams", region_name=REGION),
        boto3.client("sqs", region_name=REGION),
    )
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    (shard,) = streams.describe_stream(StreamArn=stack.stream_arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(
        StreamArn=stack.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    last = streams.get_records(ShardIterator=iterator, Limit=1000)["Records"][-1]["dynamodb"]["SequenceNumber"]
    event = {"shardId": shard["ShardId"], "eventSourceARN": stack.stream_arn, "throughSequenceNumber": last}
    answer = aggregator.handle(event, FakeLambdaContext(), settings, dependencies)
    assert answer.get("reachedBound") is not False, answer


def boards(stack: MotoStack) -> Counter[tuple[str, str]]:
    """Every aggregate's count, as the index holds them."""
    items = dynamodb().scan(TableName=stack.aggregates_table, ConsistentRead=True)["Items"]
    return Counter(
        {(item["songID"]["S"], item["SK"]["S"]): int(item["DownloadCount"]["N"]) for item in items if "Month" in item}
    )


def recount(stack: MotoStack) -> Counter[tuple[str, str]]:
    """The test's own count of the table's downloads: song and month of each with a timestamp of 2018."""
    items = dynamodb().scan(TableName=stack.table, ConsistentRead=True)["Items"]
    return Counter(
        (item["songID"]["S"], item["Timestamp"]["S"][:7])
        for item in items
        if "Month" not in item and item.get("Timestamp", {}).get("S", "").startswith("2018-")
    )


def a_malformed_download_reported(stack: MotoStack) -> dict[str, Any]:
    """Two good downloads and one whose Timestamp is not a time, counted by the aggregator; recover's report."""
    write_download(stack, "song1", "d1")
    write_download(stack, "song1", "d2")
    write_download(stack, "song1", "d3", MALFORMED)
    aggregator_catches_up(stack)
    assert boards(stack) == Counter({("song1", "2018-03"): 2})
    return run_recover(stack).as_json()


def fixed_item(key: dict[str, str]) -> dict[str, Any]:
    return {"songID": {"S": key["songID"]}, "SK": {"S": key["SK"]}, "Timestamp": {"S": GOOD}, "UserID": {"S": "u1"}}


def test_a_rejected_download_fixed_as_recover_advises_without_retractions_is_counted(aws: None) -> None:
    # given a malformed download the aggregator rejected, reported by recover with its key and the advice
    stack = deploy()
    answer = a_malformed_download_reported(stack)
    [rejected] = answer["rejected_downloads"]
    assert rejected["key"] == {"songID": "song1", "SK": "d3"}
    advice = answer["rejected_fix"]
    assert "DeleteItem of its key, then PutItem of the fixed item" in advice
    assert advice in _table(answer)
    # when the operator follows it: DeleteItem, then PutItem of the fixed item
    key = {name: {"S": value} for name, value in rejected["key"].items()}
    dynamodb().delete_item(TableName=stack.table, Key=key)
    dynamodb().put_item(TableName=stack.table, Item=fixed_item(rejected["key"]))
    aggregator_catches_up(stack)
    # then the fixed download is counted once, and the boards equal a recount of the table
    assert recount(stack) == Counter({("song1", "2018-03"): 3})
    assert boards(stack) == recount(stack)


@pytest.mark.parametrize("rewrite", ["UpdateItem", "PutItem over the same key"])
def test_a_rejected_download_fixed_in_place_without_retractions_is_not_counted_and_the_advice_says_so(
    aws: None, rewrite: str
) -> None:
    # given a malformed download the aggregator rejected, and recover's advice
    stack = deploy()
    answer = a_malformed_download_reported(stack)
    key = {"songID": {"S": "song1"}, "SK": {"S": "d3"}}
    # when the item is fixed in place (the stream carries a MODIFY)
    if rewrite == "UpdateItem":
        dynamodb().update_item(
            TableName=stack.table,
            Key=key,
            UpdateExpression="SET #t = :t",
            ExpressionAttributeNames={"#t": "Timestamp"},
            ExpressionAttributeValues={":t": {"S": GOOD}},
        )
    else:
        dynamodb().put_item(TableName=stack.table, Item=fixed_item({"songID": "song1", "SK": "d3"}))
    aggregator_catches_up(stack)
    # then the aggregator passes the MODIFY over: stored 2, the table 3
    assert boards(stack) == Counter({("song1", "2018-03"): 2})
    assert recount(stack) == Counter({("song1", "2018-03"): 3})
    # and recover's advice does not tell this path: it warns that a fix in place stays uncounted
    advice = answer["rejected_fix"]
    assert not advice.startswith("fix each item in place")
    assert "An UpdateItem, or a PutItem over the same key, reaches it as a MODIFY" in advice
    assert "stay uncounted" in advice


def test_a_rejected_download_fixed_in_place_with_retractions_is_counted_as_recover_advises(aws: None) -> None:
    # given retractions on, and a malformed download the aggregator rejected, reported with the advice
    stack = deploy(retractions=True)
    answer = a_malformed_download_reported(stack)
    [rejected] = answer["rejected_downloads"]
    assert answer["rejected_fix"].startswith("fix each item in place (UpdateItem")
    # when the operator follows it: UpdateItem of its Timestamp
    dynamodb().update_item(
        TableName=stack.table,
        Key={name: {"S": value} for name, value in rejected["key"].items()},
        UpdateExpression="SET #t = :t",
        ExpressionAttributeNames={"#t": "Timestamp"},
        ExpressionAttributeValues={":t": {"S": GOOD}},
    )
    aggregator_catches_up(stack)
    # then the MODIFY counts it, and the boards equal a recount of the table
    assert boards(stack) == recount(stack) == Counter({("song1", "2018-03"): 3})


def test_the_advice_follows_the_mode() -> None:
    # given each mode, when the advice is asked for, then it names the write that counts a fixed download there
    assert "DeleteItem of its key, then PutItem" in rejected_download_fix(retractions=False)
    assert "UpdateItem, or PutItem over the same key" in rejected_download_fix(retractions=True)
    assert "ledger mode" in rejected_download_fix(retractions=False, ledger=True)
    assert "ledger mode" in rejected_download_fix(retractions=True, ledger=True)


def test_the_text_output_names_the_advice_once(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    # given a malformed download reported
    stack = deploy()
    write_download(stack, "song1", "d3", MALFORMED)
    aggregator_catches_up(stack)
    capsys.readouterr()
    # when recover runs with --output text, then one line gives the advice for the rejected downloads
    run(["recover", "--table", stack.table, "--output", "text"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("rejected_fix")]
    assert len(lines) == 1
    assert "DeleteItem of its key, then PutItem" in lines[0]
