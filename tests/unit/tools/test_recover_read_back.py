"""Recover with one reader per shard (the module's stream_readers = 1, ledger mode): a batch the mapping gave up is read
back by the aggregator (`{"readBack": <DDBStreamBatchInfo>}`), not counted from a checkpoint; a range the stream no
longer holds whole is repaired, as trimmed records are, by the rebase of every key's ledger item (the recount's repair
is refused in this mode). On moto, the aggregator's answers played by a stub that records what it was asked (the
read-back itself is the aggregator's, tested with it)."""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
import pytest

from leaderboard_core.claims import BACKFILL_DONE, CLAIM_KEY, claim_key
from leaderboard_tools.cli import main
from leaderboard_tools.commands import EXIT_DIFFERENCES, EXIT_EXACT
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import OperatorClients, operator_clients
from leaderboard_tools.reconcile import Reconciler, RepairUnavailable
from leaderboard_tools.recover import recover
from leaderboard_tools.recover.recovery import RecoveryReport
from tests.unit.tools.operator_stack import (
    MONTH,
    QUICK_BANDS,
    QUICK_RECOVERY,
    REGION,
    MotoStack,
    deploy,
    set_count,
    stored_count,
    write_download,
)

ONE_READER = {"LEDGER": "true", "CLAIMS_TABLE_NAME": "music-claims", "STREAM_READERS": "1"}
"""The aggregator's environment as terraform/lambda.tf sets it with ledger = true and stream_readers = 1."""
APPLIED = {"readBack": "applied", "recount": False, "records": 2, "keysApplied": 2, "expiriesKept": 0}
TRIMMED = {"readBack": "trimmed", "recount": True, "reason": "TrimmedDataAccessException: past the retention"}
UNREADABLE = {"readBack": "unreadable", "recount": True, "reason": "shardId is missing"}


class ReadBackFunction:
    """The one-reader aggregator's answers to recover: the given answer to each readBack (or a function error)."""

    def __init__(self, answer: dict[str, Any] | None, error: str | None = None) -> None:
        self._answer = answer
        self._error = error
        self.payloads: list[dict[str, Any]] = []

    def invoke(self, FunctionName: str, Payload: str) -> dict[str, Any]:  # noqa: N803 - boto3's names
        self.payloads.append(json.loads(Payload))
        if self._error is not None:
            payload = {"errorMessage": self._error, "errorType": "RuntimeError"}
            return {
                "StatusCode": 200,
                "FunctionError": "Unhandled",
                "Payload": io.BytesIO(json.dumps(payload).encode()),
            }
        asked = self.payloads[-1].get("readBack") or {}
        echoed = {key: asked[key] for key in ("shardId", "startSequenceNumber", "endSequenceNumber") if key in asked}
        answer = echoed | (self._answer or {})
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}


class CountingStreams:
    """The stream client, counting the records recover reads itself."""

    def __init__(self, streams: Any) -> None:
        self._streams = streams
        self.get_records_calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams, name)

    def get_records(self, **arguments: Any) -> Any:
        self.get_records_calls += 1
        return self._streams.get_records(**arguments)


class CountingReconciler(Reconciler):
    def __init__(self, *arguments: Any, **keywords: Any) -> None:
        super().__init__(*arguments, **keywords)
        self.runs: list[Any] = []
        self.repairs: list[bool] = []

    def run(self, targets: Any, repair: bool = False, **options: Any) -> Any:
        self.runs.append(targets)
        self.repairs.append(repair)
        return super().run(targets, repair=repair, **options)


def one_reader_stack(shards: int = 1, settings: dict[str, str] | None = None) -> MotoStack:
    """The module in ledger mode with one reader per shard, its ledger's backfill finished (a repair may run); its
    boards spread over `shards` index partitions, the aggregator's other `settings` (environment) as given."""
    stack = deploy(retractions=True, aggregator_settings=ONE_READER | (settings or {}), shards=shards)
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    dynamodb.create_table(
        TableName="music-claims",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": CLAIM_KEY, "AttributeType": "S"}],
        KeySchema=[{"AttributeName": CLAIM_KEY, "KeyType": "HASH"}],
    )
    dynamodb.put_item(TableName="music-claims", Item={CLAIM_KEY: {"S": BACKFILL_DONE}})
    return stack


def given_up_batch(stack: MotoStack, trimmed: bool = False) -> dict[str, Any]:
    """Two downloads of song1 whose batch the mapping gave up: their on-failure record, in the failure queue.
    `trimmed`: the range is no longer in the stream (named by its sequence numbers, its records gone)."""
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    shard = streams.describe_stream(StreamArn=stack.stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    if trimmed:
        first, last = "100000000000000000001", "100000000000000000002"
    else:
        write_download(stack, "song1", "d1")
        write_download(stack, "song1", "d2")
        iterator = streams.get_shard_iterator(
            StreamArn=stack.stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records = streams.get_records(ShardIterator=iterator)["Records"]
        first, last = records[0]["dynamodb"]["SequenceNumber"], records[-1]["dynamodb"]["SequenceNumber"]
    failure = {
        "requestContext": {"condition": "RecordAgeExceeded"},
        "DDBStreamBatchInfo": {
            "shardId": shard,
            "streamArn": stack.stream_arn,
            "startSequenceNumber": first,
            "endSequenceNumber": last,
            "approximateArrivalOfFirstRecord": "2018-03-10T10:00:00Z",
            "approximateArrivalOfLastRecord": "2018-03-10T10:00:00Z",
            "batchSize": 2,
        },
    }
    send(stack, failure)
    return failure


def send(stack: MotoStack, body: dict[str, Any]) -> None:
    boto3.client("sqs", region_name=REGION).send_message(QueueUrl=stack.queue_url, MessageBody=json.dumps(body))


def records_trimmed(stack: MotoStack) -> None:
    """The aggregator's `records_trimmed` of a shard, in the failure queue."""
    send(stack, {"kind": "records_trimmed", "shardId": "shardId-1", "checkpoint": "1", "firstReadableSequence": "9"})


def download_key(stack: MotoStack, song: str, download_id: str) -> dict[str, Any]:
    """The key `write_download` gives a download in the guide's table."""
    return {stack.names.entity: {"S": song}, stack.names.sort_key: {"S": download_id}}


def delete_download(stack: MotoStack, song: str, download_id: str) -> None:
    """The download's item deleted from the table, its record not delivered (deleted or expired: not told apart)."""
    boto3.client("dynamodb", region_name=REGION).delete_item(
        TableName=stack.table, Key=download_key(stack, song, download_id)
    )


def queue_depth(stack: MotoStack) -> int:
    attributes = boto3.client("sqs", region_name=REGION).get_queue_attributes(
        QueueUrl=stack.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def run_recover(
    stack: MotoStack, function: ReadBackFunction
) -> tuple[RecoveryReport, CountingReconciler, CountingStreams]:
    real = operator_clients(region=REGION)
    streams = CountingStreams(real.dynamodbstreams)
    clients = OperatorClients(real.dynamodb, streams, function, real.sqs)
    deployment = discover(real, stack.table)
    reconciler = CountingReconciler(clients, deployment, empty_page_pause=0, **QUICK_BANDS)
    report = recover(clients, deployment, reconciler, stack.queue_url, visibility_seconds=30, pacing=QUICK_RECOVERY)
    return report, reconciler, streams


def test_a_given_up_batch_is_handed_to_the_aggregator_to_read_back_and_deleted_once_it_is_applied(aws: None) -> None:
    # given a one-reader deployment and a batch the mapping gave up, beside a malformed download's report
    stack = one_reader_stack()
    failure = given_up_batch(stack)
    send(stack, {"kind": "rejected_download", "reason": "Timestamp is not ISO 8601", "sequenceNumber": "7"})
    function = ReadBackFunction(APPLIED)
    # when recover runs
    report, reconciler, streams = run_recover(stack, function)
    # then it asked the aggregator to read the on-failure record's range back, with the record's batch info as it is
    assert function.payloads == [{"readBack": failure["DDBStreamBatchInfo"]}]
    # and, the aggregator having applied it, the message is deleted with no recount and no read of the stream by
    # recover itself (the aggregator's read is the one momentary reader); the other kind is answered as always
    assert reconciler.runs == []
    assert streams.get_records_calls == 0
    assert (report.messages, report.deleted, report.kept) == (2, 2, [])
    (batch,) = report.batches
    assert (batch["shardId"], batch["done"]) == (failure["DDBStreamBatchInfo"]["shardId"], True)
    assert batch["readBack"]["readBack"] == "applied"
    assert batch["note"] == "read back and applied by the aggregator"
    assert report.rejected_downloads == [{"reason": "Timestamp is not ISO 8601", "sequenceNumber": "7", "key": None}]
    assert queue_depth(stack) == 0


def stale_ledger_item(stack: MotoStack, month: str) -> None:
    """song1's download d1, in the table in MONTH, counted in `month` by its ledger item (its edit's record lost)."""
    write_download(stack, "song1", "d1")
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    key = download_key(stack, "song1", "d1")
    dynamodb.put_item(
        TableName="music-claims",
        Item={
            CLAIM_KEY: {"S": claim_key(key)},
            "Version": {"S": "shardId-00000001000000000000-aaaa0000|" + "1".zfill(40)},
            "Entity": {"S": "song1"},
            "Contribution": {"M": {month: {"N": "1"}}},
        },
    )
    set_count(stack, "song1", month, 1)


@pytest.mark.parametrize("answer", [TRIMMED, UNREADABLE], ids=["trimmed", "unreadable"])
def test_a_range_the_stream_no_longer_holds_whole_is_repaired_by_the_rebase_then_deleted(
    aws: None, answer: dict[str, Any]
) -> None:
    # given a one-reader deployment, a batch the mapping gave up whose records the stream no longer holds, and a
    # download counted in February by its ledger item while its item, edited in the lost range, says March
    stack = one_reader_stack()
    given_up_batch(stack, trimmed=True)
    stale_ledger_item(stack, "2018-02")
    function = ReadBackFunction(answer)
    # when recover runs and the aggregator answers that the range cannot be read whole
    report, reconciler, _ = run_recover(stack, function)
    # then no aggregate is recounted alone: the rebase moved the key's ledger item and its aggregates to its item, and
    # the one recount, of every board, compared and repaired nothing
    assert len(function.payloads) == 1
    assert (reconciler.runs, reconciler.repairs) == ([None], [False])
    assert (stored_count(stack, "song1", "2018-02"), stored_count(stack, "song1", MONTH)) == (0, 1)
    (batch,) = report.batches
    assert batch["readBack"]["recount"] is True
    assert (
        f"the range is {answer['readBack']} ({answer['reason']}): every key's ledger item is rebased" == batch["note"]
    )
    assert report.rebased is not None
    assert (report.rebased.moved, report.rebased.differences_remain) == (1, False)
    # and, everything exact, the message is deleted
    assert (report.deleted, report.kept) == (1, [])


def test_with_one_reader_a_key_whose_item_is_gone_is_reported_and_recover_exits_with_differences(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a one-reader deployment whose stream trimmed records, and a download its ledger counts whose item is gone
    # (deleted or expired: the table no longer says which)
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    delete_download(stack, "song1", "d1")
    records_trimmed(stack)
    # when recover runs from the command line
    code = main(["recover", "--table", stack.table, "--json"])
    # then the key is reported, its count left as it is, and the exit code says differences remain
    answer = json.loads(capsys.readouterr().out)
    assert code == EXIT_DIFFERENCES
    assert [(gone["entityId"], gone["counts"]) for gone in answer["rebased"]["gone"]] == [("song1", {MONTH: "1"})]
    assert stored_count(stack, "song1", MONTH) == 1


def test_with_one_reader_a_gone_key_the_operator_names_deleted_is_taken_back(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a one-reader deployment with a download its ledger counts whose item is gone, reported by the rebase
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    delete_download(stack, "song1", "d1")
    main(["reconcile", "--table", stack.table, "--month", MONTH, "--repair", "--json"])
    (gone,) = json.loads(capsys.readouterr().out)["gone"]
    # when the operator, who knows the application deleted it, names it
    deleted = ["--deleted-keys", gone["claimKey"]]
    code = main(["reconcile", "--table", stack.table, "--month", MONTH, "--repair", *deleted, "--json"])
    # then its count is taken back, and nothing is left
    answer = json.loads(capsys.readouterr().out)
    assert (code, answer["taken_back"], answer["gone"]) == (EXIT_EXACT, 1, [])
    assert stored_count(stack, "song1", MONTH) == 0


def test_with_one_reader_the_recounts_repair_is_refused_naming_the_rebase(aws: None) -> None:
    # given a one-reader deployment
    stack = one_reader_stack()
    real = operator_clients(region=REGION)
    reconciler = Reconciler(real, discover(real, stack.table), **QUICK_BANDS)
    # when a repair by recount is asked for
    with pytest.raises(RepairUnavailable) as refused:
        reconciler.run(None, repair=True)
    # then it is refused, naming the rebase
    assert "rebase" in str(refused.value)


def test_with_one_reader_reconcile_repair_rebases_every_key(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    # given a one-reader deployment with a download counted in February by its ledger item, its item in March
    stack = one_reader_stack()
    stale_ledger_item(stack, "2018-02")
    # when `reconcile --repair` runs on any board
    code = main(["reconcile", "--table", stack.table, "--month", MONTH, "--repair", "--json"])
    # then it rebased the key: March counts it, February no longer
    answer = json.loads(capsys.readouterr().out)
    assert (code, answer["moved"]) == (EXIT_EXACT, 1)
    assert (stored_count(stack, "song1", "2018-02"), stored_count(stack, "song1", MONTH)) == (0, 1)


def test_a_read_back_the_aggregator_fails_is_kept_for_the_next_run(aws: None) -> None:
    # given a one-reader deployment and a batch the mapping gave up
    stack = one_reader_stack()
    given_up_batch(stack)
    function = ReadBackFunction(None, error="ProvisionedThroughputExceededException")
    # when recover runs and the aggregator's invocation fails
    report, reconciler, _ = run_recover(stack, function)
    # then nothing is recounted, the message is kept, and the run says waiting is all it needs
    assert reconciler.runs == []
    assert [entry["kind"] for entry in report.kept] == ["failed_batch"]
    assert "the aggregator could not read the range back" in report.kept[0]["note"]
    assert "ProvisionedThroughputExceededException" in report.kept[0]["note"]
    assert report.pending
    assert queue_depth(stack) == 1


def test_an_aggregator_that_does_not_answer_a_read_back_is_kept_and_named(aws: None) -> None:
    # given a deployment whose environment says one reader, but whose function answers like a two-reader aggregator
    stack = one_reader_stack()
    given_up_batch(stack)
    function = ReadBackFunction({"checkpoint": None, "reachedBound": False})
    # when recover runs
    report, reconciler, _ = run_recover(stack, function)
    # then nothing is taken as applied: the message is kept, saying what the aggregator answered
    assert reconciler.runs == []
    (kept,) = report.kept
    assert "the aggregator did not read the range back" in kept["note"]
    assert "stream_readers = 1" in kept["note"]
    assert queue_depth(stack) == 1


def test_with_two_stream_readers_a_given_up_batch_is_still_counted_from_the_shards_checkpoint(aws: None) -> None:
    # given a ledger deployment that says stream_readers = 2, and a batch the mapping gave up
    stack = deploy(retractions=True, aggregator_settings={**ONE_READER, "STREAM_READERS": "2"})
    failure = given_up_batch(stack)
    function = ReadBackFunction(APPLIED)
    # when recover runs
    run_recover(stack, function)
    # then the aggregator is asked to count the shard through the range's end, never to read it back
    info = failure["DDBStreamBatchInfo"]
    assert function.payloads == [
        {
            "shardId": info["shardId"],
            "eventSourceARN": stack.stream_arn,
            "throughSequenceNumber": info["endSequenceNumber"],
        }
    ]
    assert stored_count(stack, "song1", MONTH) is None
