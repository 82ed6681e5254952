"""Recover on moto: each kind of failure-queue message answered as the design says, every month of a run at once,
a message deleted only when what it names is exact, the stream read through its empty pages."""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
import pytest

from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import OperatorClients, operator_clients
from leaderboard_tools.reconcile import Reconciler
from leaderboard_tools.recover import recover
from leaderboard_tools.recover.failure_queue import VisibilityKeeper, receive_all
from leaderboard_tools.stream_reading import ShardReader
from tests.unit.tools.operator_stack import (
    MONTH,
    QUICK_BANDS,
    QUICK_RECOVERY,
    REGION,
    ModelAggregator,
    MotoStack,
    deploy,
    set_count,
    stored_count,
    write_download,
)


class AggregatorFunction:
    """The aggregator's direct invocation, played by the model: it counts the shard from its checkpoint."""

    def __init__(self, stack: MotoStack, counts: bool = True) -> None:
        self._stack = stack
        self._counts = counts
        self.payloads: list[dict[str, Any]] = []

    def invoke(self, FunctionName: str, Payload: str) -> dict[str, Any]:  # noqa: N803 - boto3's names
        self.payloads.append(json.loads(Payload))
        if self._counts:
            ModelAggregator(self._stack).run()
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps({"reachedBound": self._counts}).encode())}


def clients_with(function: AggregatorFunction) -> OperatorClients:
    real = operator_clients(region="us-east-1")
    return OperatorClients(real.dynamodb, real.dynamodbstreams, function, real.sqs)


def run_recover(stack: MotoStack, clients: OperatorClients, reconciler: Reconciler | None = None) -> Any:
    deployment = discover(operator_clients(region="us-east-1"), stack.table)
    reconciler = reconciler or Reconciler(clients, deployment, empty_page_pause=0, **QUICK_BANDS)
    return recover(clients, deployment, reconciler, stack.queue_url, visibility_seconds=30, pacing=QUICK_RECOVERY)


def send(stack: MotoStack, body: dict[str, Any]) -> None:
    boto3.client("sqs", region_name="us-east-1").send_message(QueueUrl=stack.queue_url, MessageBody=json.dumps(body))


def records_of(stack: MotoStack) -> tuple[str, list[dict[str, Any]]]:
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    shard = streams.describe_stream(StreamArn=stack.stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=stack.stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    return shard, streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]


def failure_record(stack: MotoStack, shard: str, first: dict[str, Any], last: dict[str, Any]) -> dict[str, Any]:
    return {
        "requestContext": {"condition": "RetryAttemptsExhausted"},
        "DDBStreamBatchInfo": {
            "shardId": shard,
            "streamArn": stack.stream_arn,
            "startSequenceNumber": first["dynamodb"]["SequenceNumber"],
            "endSequenceNumber": last["dynamodb"]["SequenceNumber"],
            "approximateArrivalOfFirstRecord": "2018-03-10T10:00:00Z",
            "approximateArrivalOfLastRecord": "2018-03-10T10:00:00Z",
            "batchSize": 2,
        },
    }


def queue_depth(stack: MotoStack) -> int:
    attributes = boto3.client("sqs", region_name="us-east-1").get_queue_attributes(
        QueueUrl=stack.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


@pytest.fixture
def given_up(aws: None) -> tuple[MotoStack, dict[str, Any]]:
    """Two downloads of song1 the mapping gave up on: in the stream, behind no checkpoint, in the failure queue."""
    stack = deploy()
    write_download(stack, "song1", "d1")
    write_download(stack, "song1", "d2")
    shard, records = records_of(stack)
    failure = failure_record(stack, shard, records[0], records[-1])
    send(stack, failure)
    send(stack, {"kind": "rejected_download", "reason": "Timestamp is not ISO 8601", "sequenceNumber": "7"})
    return stack, failure


def test_a_batch_given_up_on_is_counted_by_the_aggregator_through_its_end_then_deleted(
    given_up: tuple[MotoStack, dict[str, Any]],
) -> None:
    stack, failure = given_up
    function = AggregatorFunction(stack)
    # when recover runs
    report = recover_report = run_recover(stack, clients_with(function))
    # then it asked the aggregator to count the shard through the range's end, as the direct-invocation contract says
    info = failure["DDBStreamBatchInfo"]
    assert function.payloads == [
        {
            "shardId": info["shardId"],
            "eventSourceARN": stack.stream_arn,
            "throughSequenceNumber": info["endSequenceNumber"],
        }
    ]
    # and the range's downloads are counted, both messages are gone, the malformed download reported
    assert stored_count(stack, "song1", MONTH) == 2
    assert (report.messages, report.deleted, report.kept) == (2, 2, [])
    assert recover_report.batches[0]["aggregates"] == [["song1", MONTH]]
    assert report.rejected_downloads == [{"reason": "Timestamp is not ISO 8601", "sequenceNumber": "7", "key": None}]
    assert queue_depth(stack) == 0


def test_a_batch_whose_range_the_aggregator_has_not_counted_yet_is_kept(
    given_up: tuple[MotoStack, dict[str, Any]],
) -> None:
    stack, _ = given_up
    # given an aggregator that does not get through the range (throttled, say)
    report = run_recover(stack, clients_with(AggregatorFunction(stack, counts=False)))
    # then the failure record is kept for the next run, which the report says is all it waits for
    assert [entry["kind"] for entry in report.kept] == ["failed_batch"]
    assert report.pending
    assert queue_depth(stack) == 1


def test_a_batch_the_shard_s_checkpoint_already_passed_is_deleted_without_an_invocation(
    given_up: tuple[MotoStack, dict[str, Any]],
) -> None:
    stack, _ = given_up
    ModelAggregator(stack).run()  # the mapping's next invocation counted it (the design: it reads from the checkpoint)
    function = AggregatorFunction(stack)
    report = run_recover(stack, clients_with(function))
    assert function.payloads == []
    assert (report.deleted, report.kept) == (2, [])


class CountingReconciler(Reconciler):
    def __init__(self, *arguments: Any, **keywords: Any) -> None:
        super().__init__(*arguments, **keywords)
        self.runs: list[Any] = []

    def run(self, targets: Any, repair: bool = False, **options: Any) -> Any:
        self.runs.append(targets)
        return super().run(targets, repair=repair, **options)


def test_every_month_the_messages_name_is_recounted_in_one_pass(aws: None) -> None:
    # given refused records of two aggregates in two months, both drifted
    stack = deploy()
    write_download(stack, "song1", "d1")
    write_download(stack, "song2", "d2", timestamp="2018-04-02T00:00:00Z")
    ModelAggregator(stack).run()
    set_count(stack, "song1", MONTH, 4)
    set_count(stack, "song2", "2018-04", 4)
    send(stack, {"kind": "refused_record", "reason": "counted by a recount", "entityId": "song1", "period": MONTH})
    send(stack, {"kind": "refused_record", "reason": "counted by a recount", "entityId": "song2", "period": "2018-04"})
    clients = operator_clients(region="us-east-1")
    reconciler = CountingReconciler(clients, discover(clients, stack.table), empty_page_pause=0, **QUICK_BANDS)
    # when recover runs
    report = run_recover(stack, clients, reconciler)
    # then one reconcile pass settled both months, and both messages are gone
    assert reconciler.runs == [{MONTH: {"song1"}, "2018-04": {"song2"}}]
    assert (stored_count(stack, "song1", MONTH), stored_count(stack, "song2", "2018-04")) == (1, 1)
    assert (report.deleted, report.kept) == (2, [])


def test_trimmed_records_are_answered_with_a_recount_of_every_month(aws: None) -> None:
    stack = deploy()
    write_download(stack, "song1", "d1")
    write_download(stack, "song2", "d2", timestamp="2017-12-31T23:00:00-05:00")
    ModelAggregator(stack).run()
    set_count(stack, "song2", "2018-01", 7)
    send(stack, {"kind": "records_trimmed", "shardId": "shardId-1", "streamArn": stack.stream_arn, "checkpoint": "1"})
    clients = operator_clients(region="us-east-1")
    reconciler = CountingReconciler(clients, discover(clients, stack.table), empty_page_pause=0, **QUICK_BANDS)
    report = run_recover(stack, clients, reconciler)
    assert reconciler.runs == [None]
    assert stored_count(stack, "song2", "2018-01") == 1
    assert (report.deleted, report.kept) == (1, [])


def test_a_message_whose_aggregate_still_has_downloads_in_flight_is_kept(aws: None) -> None:
    # given a refused record of song1, whose aggregate differs because a download is still in the stream
    stack = deploy()
    write_download(stack, "song1", "d1")
    ModelAggregator(stack).run()
    write_download(stack, "song1", "d2")
    send(stack, {"kind": "refused_record", "reason": "counted by a recount", "entityId": "song1", "period": MONTH})
    # when recover runs, then nothing is written and the message waits for the stream
    report = run_recover(stack, operator_clients(region="us-east-1"))
    assert stored_count(stack, "song1", MONTH) == 1
    assert report.kept[0]["kind"] == "refused_record"
    assert report.pending
    # and once the aggregator has caught up, the next run deletes it
    ModelAggregator(stack).run()
    again = run_recover(stack, operator_clients(region="us-east-1"))
    assert (again.deleted, again.kept, stored_count(stack, "song1", MONTH)) == (1, [], 2)


@pytest.mark.parametrize("board_field", ["board", "period"])
@pytest.mark.parametrize("in_record", [False, True])
def test_a_refused_record_names_its_board_as_board_or_as_period_from_an_older_aggregator(
    aws: None, board_field: str, in_record: bool
) -> None:
    # given a refused record of a drifted song naming its board as the aggregator writes it ("board"), or as an
    # aggregator before it did ("period"), in the message or in its record
    stack = deploy()
    write_download(stack, "song1", "d1")
    ModelAggregator(stack).run()
    set_count(stack, "song1", MONTH, 4)
    named = {"entityId": "song1", board_field: MONTH}
    send(
        stack,
        {"kind": "refused_record", "reason": "counted by a recount"} | ({"record": named} if in_record else named),
    )
    # when recover runs
    report = run_recover(stack, operator_clients(region="us-east-1"))
    # then that board is recounted and repaired, and the message deleted
    assert stored_count(stack, "song1", MONTH) == 1
    assert (report.deleted, report.kept) == (1, [])


class PagedStream:
    """A shard whose GetRecords answers empty pages between records, as AWS documents it may."""

    def __init__(self, pages: list[list[int]], closed: bool = True) -> None:
        self._pages = pages
        self._closed = closed
        self.calls = 0

    def get_shard_iterator(self, **_: Any) -> dict[str, Any]:
        return {"ShardIterator": "0"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803 - boto3's names
        self.calls += 1
        index = int(ShardIterator)
        last = index + 1 >= len(self._pages)
        records = [
            {"eventName": "INSERT", "dynamodb": {"SequenceNumber": str(number).zfill(21), "NewImage": {}}}
            for number in self._pages[index]
        ]
        return {"Records": records, "NextShardIterator": None if last and self._closed else str(index + 1)}


def test_a_range_is_read_through_empty_pages_to_its_end() -> None:
    # given a range 1..5 whose records come after empty pages, in the middle of a shard
    stream = PagedStream([[1], [], [], [2, 3], [], [4], [5, 6], [7]])
    seen: list[int] = []
    # when it is read
    outcome = ShardReader(stream, "arn", sleep=lambda seconds: None).read(
        "shard",
        lambda record: seen.append(int(record["dynamodb"]["SequenceNumber"])),
        at="1",
        past_bound=lambda record: int(record["dynamodb"]["SequenceNumber"]) > 5,
        open_shard=False,
    )
    # then every record of the range was read, and nothing past it
    assert (seen, outcome.end) == ([1, 2, 3, 4, 5], "bound")


def test_a_closed_shard_is_read_to_its_end_whatever_the_empty_pages() -> None:
    stream = PagedStream([[1], [], [], [], [], [], [], [], [2], []])
    seen: list[int] = []
    outcome = ShardReader(stream, "arn", sleep=lambda seconds: None).read(
        "shard", lambda record: seen.append(int(record["dynamodb"]["SequenceNumber"])), open_shard=False
    )
    assert (seen, outcome.end) == ([1, 2], "shard_end")


def test_throttled_reads_back_off_and_go_on() -> None:
    from botocore.exceptions import ClientError

    class Throttled(PagedStream):
        def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803
            if self.calls < 2:
                self.calls += 1
                raise ClientError({"Error": {"Code": "LimitExceededException", "Message": "two readers"}}, "GetRecords")
            return super().get_records(ShardIterator, Limit)

    pauses: list[float] = []
    seen: list[int] = []
    outcome = ShardReader(Throttled([[1], [2]]), "arn", sleep=pauses.append).read(
        "shard", lambda record: seen.append(int(record["dynamodb"]["SequenceNumber"])), open_shard=False
    )
    assert (seen, outcome.end) == ([1, 2], "shard_end")
    assert len(pauses) == 2
    assert pauses[1] > 0


class QueueOfPages:
    """An SQS client whose receives answer the given pages in turn, recording each receive's arguments."""

    def __init__(self, *pages: list[str]) -> None:
        self.pages = list(pages)
        self.receives: list[dict[str, Any]] = []

    def receive_message(self, **arguments: Any) -> dict[str, Any]:
        self.receives.append(arguments)
        return {"Messages": [{"MessageId": ident} for ident in (self.pages.pop(0) if self.pages else [])]}


def test_the_queue_is_read_by_long_polls_until_one_comes_back_empty() -> None:
    # given a queue that answers two pages, then nothing
    sqs = QueueOfPages(["m1", "m2"], ["m3"])
    # when recover's reader receives everything with its default pacing
    messages = receive_all(sqs, "queue", visibility_seconds=30)
    # then it read every message, each receive a long poll (a short one queries a subset of the servers and may come
    # back falsely empty), and it stopped at the first empty answer
    assert [message["MessageId"] for message in messages] == ["m1", "m2", "m3"]
    assert [receive["WaitTimeSeconds"] for receive in sqs.receives] == [2, 2, 2]
    assert all(receive["VisibilityTimeout"] == 30 for receive in sqs.receives)


def test_the_visibility_of_held_messages_is_renewed_while_recover_works() -> None:
    class Sqs:
        def __init__(self) -> None:
            self.renewals: list[list[dict[str, Any]]] = []

        def change_message_visibility_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> None:  # noqa: N803
            self.renewals.append(Entries)

    sqs = Sqs()
    from leaderboard_tools.recover.failure_messages import Message

    with VisibilityKeeper(sqs, "queue", visibility_seconds=0.06) as keeper:  # type: ignore[arg-type]
        keeper.hold([Message("m1", "handle-1", {}), Message("m2", "handle-2", {})])
        import time

        time.sleep(0.1)
    assert sqs.renewals
    assert {entry["ReceiptHandle"] for entry in sqs.renewals[0]} == {"handle-1", "handle-2"}
    assert all(entry["VisibilityTimeout"] == 0.06 for entry in sqs.renewals[0])


class ExactStringStream:
    """A stream that writes zero-padded sequence numbers and finds a position only by its exact string (MiniStack)."""

    def __init__(self, numbers: list[int], width: int, accepts: bool = True) -> None:
        self.records = [str(number).zfill(width) for number in numbers]
        self._accepts = accepts
        self.asked: list[str] = []

    def get_shard_iterator(self, ShardIteratorType: str, SequenceNumber: str | None = None, **_: Any) -> dict[str, Any]:  # noqa: N803
        from botocore.exceptions import ClientError

        if ShardIteratorType == "TRIM_HORIZON":
            return {"ShardIterator": "0"}
        self.asked.append(str(SequenceNumber))
        if not self._accepts or SequenceNumber not in self.records:
            raise ClientError(
                {"Error": {"Code": "TrimmedDataAccessException", "Message": "not found"}}, "GetShardIterator"
            )
        return {"ShardIterator": str(self.records.index(SequenceNumber) + 1)}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803
        index = int(ShardIterator)
        page = [{"eventName": "INSERT", "dynamodb": {"SequenceNumber": number}} for number in self.records[index:]]
        return {"Records": page, "NextShardIterator": None}


@pytest.mark.parametrize("accepts", [True, False])
def test_a_checkpoint_is_read_after_whatever_form_the_stream_writes_its_sequence_numbers_in(accepts: bool) -> None:
    # given a shard of zero-padded 30-digit sequence numbers and the progress table's 40-digit checkpoint at the second
    stream = ExactStringStream([1, 2, 3, 4], width=30, accepts=accepts)
    seen: list[str] = []
    # when the shard is read after the checkpoint
    outcome = ShardReader(stream, "arn", sleep=lambda seconds: None).read(
        "shard",
        lambda record: seen.append(record["dynamodb"]["SequenceNumber"]),
        after=stream.records[1].zfill(40),
        open_shard=False,
        shard_start=stream.records[0],
    )
    # then exactly the records after it are read: at once in the stream's own form, or from TRIM_HORIZON by value
    assert seen == stream.records[2:]
    assert outcome.trimmed is not accepts


def test_a_trimmed_gap_that_holds_no_record_is_deleted_without_a_recount(aws: None) -> None:
    # given a records_trimmed message whose first readable record is at or before the checkpoint: nothing was lost
    stack = deploy()
    send(
        stack,
        {
            "kind": "records_trimmed",
            "shardId": "shardId-1",
            "streamArn": stack.stream_arn,
            "checkpoint": "0" * 30 + "1000000011",
            "firstReadableSequence": "0" * 30 + "1000000009",
        },
    )
    clients = operator_clients(region="us-east-1")
    reconciler = CountingReconciler(clients, discover(clients, stack.table), empty_page_pause=0, **QUICK_BANDS)
    report = run_recover(stack, clients, reconciler)
    assert reconciler.runs == []
    assert (report.deleted, report.kept) == (1, [])


@pytest.mark.parametrize(
    ("item", "start"),
    [
        ({}, (None, None)),
        ({"ResumeAt": "000000000000000000005"}, ("000000000000000000005", None)),
        (
            {"Checkpoint": "0" * 39 + "7", "CheckpointSequence": "000000000000000000007", "ResumeAt": "05"},
            (None, "000000000000000000007"),
        ),
        ({"Checkpoint": "0" * 39 + "7", "ResumeAt": "000000000000000000009"}, ("000000000000000000009", None)),
        ({"Checkpoint": "0" * 39 + "7"}, (None, "0" * 39 + "7")),
    ],
)
def test_the_in_flight_check_starts_where_the_aggregator_resumes(item: dict[str, str], start: tuple[Any, Any]) -> None:
    from leaderboard_tools.stream_reading import shard_progress

    class Progress:
        def get_item(self, **_: Any) -> dict[str, Any]:
            return {"Item": {name: {"S": value} for name, value in item.items()}} if item else {}

    assert shard_progress(Progress(), "progress", "arn", "shard").start == start


def test_a_refused_record_of_an_all_time_board_is_answered_with_a_recount_of_that_board(aws: None) -> None:
    # given an aggregator keeping all-time boards beside months, and a refused record naming song1's all-time board
    stack = deploy(aggregator_settings={"LEADERBOARD_PERIODS": "month,all"})
    write_download(stack, "song1", "d1")
    ModelAggregator(stack).run()
    boto3.client("dynamodb", region_name="us-east-1").put_item(
        TableName=stack.table,
        Item={"songID": {"S": "song1"}, "SK": {"S": "all"}, "Month": {"S": "all"}, "DownloadCount": {"N": "5"}},
    )
    send(stack, {"kind": "refused_record", "reason": "pruned under another progress table", "entityId": "song1",
                 "period": "all"})  # fmt: skip
    # when recover runs
    report = run_recover(stack, operator_clients(region="us-east-1"))
    # then the all-time board is recounted as what it is (its one download), and the message is deleted
    assert stored_count(stack, "song1", "all") == 1
    assert stored_count(stack, "song1", MONTH) == 1
    assert (report.deleted, report.kept) == (1, [])


def test_trimmed_records_of_a_deployment_with_more_boards_than_months_recount_every_board(aws: None) -> None:
    # given an aggregator keeping day boards and a category's beside months, a drifted month, a day board and a
    # category board the trimmed records never reached, and the trimmed records' message
    stack = deploy(aggregator_settings={"LEADERBOARD_PERIODS": "day,month", "CATEGORY_ATTRIBUTE": "Genre"})
    write_download(stack, "song1", "d1")
    ModelAggregator(stack).run()
    set_count(stack, "song1", MONTH, 7)
    send(stack, {"kind": "records_trimmed", "shardId": "shardId-1", "streamArn": stack.stream_arn, "checkpoint": "1"})
    # when recover runs
    report = run_recover(stack, operator_clients(region="us-east-1"))
    # then every board is exact again (the month repaired, the missing day board written) and the message deleted
    assert stored_count(stack, "song1", MONTH) == 1
    assert stored_count(stack, "song1", "2018-03-10") == 1
    assert (report.deleted, report.kept) == (1, [])


WEEK = "2018-W10"
"""The ISO week of 2018-03-10, the operator stack's default download timestamp."""


def test_a_refused_record_of_a_week_board_never_lowers_that_board_below_its_downloads(aws: None) -> None:
    # given a stack whose aggregator keeps month and week boards (LEADERBOARD_PERIODS = month,week),
    # three downloads of song1, counted exactly on both boards, the aggregator caught up
    stack = deploy(aggregator_settings={"LEADERBOARD_PERIODS": "month,week"})
    for number in range(3):
        write_download(stack, "song1", f"d{number}")
    ModelAggregator(stack).run()
    set_count(stack, "song1", WEEK, 3)
    ModelAggregator(stack).run()
    assert (stored_count(stack, "song1", MONTH), stored_count(stack, "song1", WEEK)) == (3, 3)
    # and the aggregator's refused_record for the week board (as _refused_contribution writes it: entityId and
    # period = the board id; a corrupt watermark, an overflow or a pruning under another progress table refuse
    # records of any board)
    send(
        stack,
        {
            "kind": "refused_record",
            "reason": "Watermark_X is 'garbage', not '<40 digits>|<second>|<stream label>|<shard id>'",
            "sequenceNumber": "4",
            "entityId": "song1",
            "period": WEEK,
            "record": {"entityId": "song1", "period": WEEK, "created": 1520676000},
        },
    )
    # when the operator runs recover
    run_recover(stack, operator_clients(region=REGION))
    # then the week board still holds its three downloads (recover cannot recount a week: it must leave it)
    assert stored_count(stack, "song1", WEEK) == 3


def test_a_records_trimmed_message_is_answered_by_a_recount_of_every_board_the_week_board_too(aws: None) -> None:
    # given a stack with month and week boards, three downloads of song1, of which the stream lost two before the
    # aggregator read them: the month board was repaired by hand, the week board still counts one
    stack = deploy(aggregator_settings={"LEADERBOARD_PERIODS": "month,week"})
    for number in range(3):
        write_download(stack, "song1", f"d{number}")
    ModelAggregator(stack).run()
    set_count(stack, "song1", WEEK, 1)
    ModelAggregator(stack).run()
    # and the aggregator's report of the lost records
    send(
        stack,
        {
            "kind": "records_trimmed",
            "shardId": "shardId-1",
            "streamArn": stack.stream_arn,
            "checkpoint": "1",
            "firstReadableSequence": "900",
        },
    )
    # when recover runs
    report = run_recover(stack, operator_clients(region=REGION))
    # then the week board is recounted too: it holds its three downloads, every board is exact, the message deleted
    assert (stored_count(stack, "song1", MONTH), stored_count(stack, "song1", WEEK)) == (3, 3)
    assert (report.deleted, queue_depth(stack)) == (1, 0)


def test_recover_on_a_summing_deployment_still_answers_the_messages_it_can(aws: None) -> None:
    # given a deployment that sums Seconds (SUM_ATTRIBUTE), whose failure queue holds a rejected download (reported
    # and deleted by design) and a refused record (which this recount cannot repair: it counts, never sums)
    stack = deploy(aggregator_settings={"SUM_ATTRIBUTE": "Seconds"})
    send(stack, {"kind": "rejected_download", "reason": "Seconds is missing", "sequenceNumber": "7"})
    send(stack, {"kind": "refused_record", "reason": "overflow", "entityId": "song1", "period": MONTH})
    # when recover runs, then it finishes: the rejected download is answered, the refused record kept with a reason
    report = run_recover(stack, operator_clients(region=REGION))
    assert (report.deleted, len(report.kept)) == (1, 1)
