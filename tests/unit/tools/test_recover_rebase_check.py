"""Recover with one reader per shard deletes a message only when what it names is exact after the rebase: a recount
that compares and writes nothing checks each aggregate the message names, and a key the rebase left (gone, unplaced)
keeps the messages naming its aggregates. What is kept says what is left and what the operator does. On moto, as
test_recover_read_back.py."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from leaderboard_core.claims import CLAIM_KEY, claim_key
from leaderboard_tools.cli import main
from leaderboard_tools.commands import EXIT_EXACT
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import OperatorClients, operator_clients
from leaderboard_tools.recover import RecoveryReport, recover
from tests.unit.tools.operator_stack import (
    MONTH,
    QUICK_BANDS,
    QUICK_RECOVERY,
    REGION,
    MotoStack,
    set_count,
    stored_count,
    write_download,
)
from tests.unit.tools.test_recover_read_back import (
    APPLIED,
    CountingReconciler,
    ReadBackFunction,
    delete_download,
    download_key,
    one_reader_stack,
    queue_depth,
    records_trimmed,
    send,
    stale_ledger_item,
)

OVERFLOW = (
    "ledger: the aggregate's value or order would pass DynamoDB's 38 digits; the keys' ledger items moved without it: "
    "recount it"
)


def refused_record(stack: MotoStack, song: str, board: str, reason: str = OVERFLOW) -> None:
    """The aggregator's `refused_record` of one aggregate, in the failure queue."""
    send(stack, {"kind": "refused_record", "entityId": song, "board": board, "reason": reason, "sequenceNumber": "5"})


def expiry_kept_in_ledger() -> None:
    """The ledger keeping a download of song1 expired by TTL counted: its own item, which names no aggregate."""
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName="music-claims", Item={CLAIM_KEY: {"S": "expired#download#song1-d0|shardId-1|" + "7".zfill(40)}}
    )


def two_reader_ledger_item(stack: MotoStack, song: str, download_id: str, month: str) -> str:
    """A ledger item as two readers per shard write it (StreamFrom, no Version), counting `month`: its claim key."""
    claim = claim_key(download_key(stack, song, download_id))
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName="music-claims",
        Item={
            CLAIM_KEY: {"S": claim},
            "StreamFrom": {"S": "shardId-00000001000000000000-aaaa0000|" + "1".zfill(40)},
            "Entity": {"S": song},
            "Contribution": {"M": {month: {"N": "1"}}},
        },
    )
    return claim


def recover_once(
    stack: MotoStack,
    reconciler_class: type[CountingReconciler] = CountingReconciler,
    clients: OperatorClients | None = None,
) -> tuple[RecoveryReport, CountingReconciler]:
    """recover's run, its check by `reconciler_class` (the aggregator's read-back, not asked here, would apply)."""
    real = operator_clients(region=REGION)
    clients = clients or OperatorClients(real.dynamodb, real.dynamodbstreams, ReadBackFunction(APPLIED), real.sqs)
    deployment = discover(real, stack.table)
    reconciler = reconciler_class(clients, deployment, empty_page_pause=0, **QUICK_BANDS)
    return recover(
        clients, deployment, reconciler, stack.queue_url, visibility_seconds=30, pacing=QUICK_RECOVERY
    ), reconciler


def test_a_refused_record_of_an_aggregate_no_download_explains_is_set_to_what_the_ledger_counts_and_deleted(
    aws: None,
) -> None:
    # given a one-reader deployment whose download of song1 counts once, its ledger item in step with its item, while
    # song1's aggregate holds a count no download explains (past what 38 digits of order allow), and the aggregator's
    # refused_record of that aggregate
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song1", MONTH, 999999999999)
    refused_record(stack, "song1", MONTH)
    # when recover runs
    report, reconciler = recover_once(stack)
    # then the rebase found the key in step and wrote nothing, the aggregate was set to what the ledger counts in it,
    # and the check, before and after, compared and repaired nothing
    assert report.rebased is not None
    assert (report.rebased.in_step, report.rebased.moved, report.rebased.differences_remain) == (1, 0, False)
    assert report.drift is not None
    assert report.drift.settled == [{"entityId": "song1", "board": MONTH, "stored": "999999999999", "ledger": "1"}]
    assert stored_count(stack, "song1", MONTH) == 1
    assert (reconciler.runs, reconciler.repairs) == ([{MONTH: {"song1"}}] * 2, [False, False])
    # and, song1 exact, the message is deleted
    assert (report.deleted, report.kept, queue_depth(stack)) == (1, [], 0)
    assert not report.differences_remain


class LedgerWrittenAtEveryRead:
    """The DynamoDB client, a download of `song` (song9 unless told) moved in the ledger at every read of an aggregate
    (as the aggregator's transactions do while recover measures the drift)."""

    def __init__(self, dynamodb: Any, aggregates_table: str, song: str = "song9") -> None:
        self._dynamodb = dynamodb
        self._aggregates = aggregates_table
        self._song = song
        self.moves = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dynamodb, name)

    def get_item(self, **parameters: Any) -> Any:
        if parameters["TableName"] == self._aggregates:
            self.moves += 1
            self._dynamodb.put_item(
                TableName="music-claims",
                Item={
                    CLAIM_KEY: {"S": f"download#{self._song}-d9"},
                    "Version": {"S": f"shardId-1|{self.moves:040d}"},
                    "Entity": {"S": self._song},
                    "Contribution": {"M": {"2018-02": {"N": "1"}}},
                },
            )
        return self._dynamodb.get_item(**parameters)


def test_an_aggregate_whose_ledger_moves_under_every_measurement_is_left_and_its_message_kept_to_run_again(
    aws: None,
) -> None:
    # given a one-reader deployment with song1's aggregate holding a count no download explains, its refused_record,
    # and another download of song1 (in February) moved in the ledger between every two scans of it
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song1", MONTH, 999999999999)
    refused_record(stack, "song1", MONTH)
    real = operator_clients(region=REGION)
    dynamodb = LedgerWrittenAtEveryRead(real.dynamodb, stack.aggregates_table, song="song1")
    # when recover runs
    report, _ = recover_once(stack, clients=OperatorClients(dynamodb, real.dynamodbstreams, None, real.sqs))
    # then the aggregate is left as it is after every measurement, and the message is kept, saying to run again
    assert stored_count(stack, "song1", MONTH) == 999999999999
    assert report.drift is not None
    assert ([(entry["entityId"], entry["board"], entry["retry"]) for entry in report.drift.left]) == [
        ("song1", MONTH, True)
    ]
    assert (report.deleted, queue_depth(stack)) == (0, 1)
    (kept,) = report.kept
    assert (kept["kind"], kept["retry"]) == ("refused_record", True)
    assert f"song1 in {MONTH} (stored 999999999999, recounted 1)" in kept["note"]
    assert "changed under 3 measurements" in kept["note"]
    assert "run recover again" in kept["note"]
    assert report.pending


class NumberOverflow:
    """The DynamoDB client, refusing every update of an aggregate as DynamoDB refuses a number past 38 digits."""

    def __init__(self, dynamodb: Any, aggregates_table: str) -> None:
        self._dynamodb = dynamodb
        self._aggregates = aggregates_table

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dynamodb, name)

    def update_item(self, **parameters: Any) -> Any:
        if parameters["TableName"] == self._aggregates:
            error = {
                "Code": "ValidationException",
                "Message": "Number overflow. Attempting to store a number with magnitude larger than supported range",
            }
            raise ClientError({"Error": error}, "UpdateItem")
        return self._dynamodb.update_item(**parameters)


def test_an_aggregate_whose_setting_dynamodb_refuses_is_left_and_its_message_kept_for_good(aws: None) -> None:
    # given a one-reader deployment with song1's aggregate holding a count no download explains, its refused_record,
    # and DynamoDB refusing the aggregate's update as a number past 38 digits
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song1", MONTH, 999999999999)
    refused_record(stack, "song1", MONTH)
    real = operator_clients(region=REGION)
    dynamodb = NumberOverflow(real.dynamodb, stack.aggregates_table)
    # when recover runs
    report, _ = recover_once(stack, clients=OperatorClients(dynamodb, real.dynamodbstreams, None, real.sqs))
    # then the aggregate is left as it is, and the message is kept, saying why; waiting will not settle it
    assert stored_count(stack, "song1", MONTH) == 999999999999
    assert report.drift is not None
    assert [(entry["entityId"], entry["retry"]) for entry in report.drift.left] == [("song1", False)]
    assert (report.deleted, queue_depth(stack)) == (0, 1)
    (kept,) = report.kept
    assert kept["retry"] is False
    assert "the ledger counts 1 in it, which DynamoDB refused" in kept["note"]
    assert "Number overflow" in kept["note"]
    assert report.differences_remain


def test_with_an_expiry_kept_in_the_ledger_no_aggregate_is_set_and_the_message_is_kept_saying_why(aws: None) -> None:
    # given a one-reader deployment with song1's aggregate holding a count no download explains, its refused_record,
    # and the ledger keeping a download expired by TTL counted (its own item, which names no aggregate)
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song1", MONTH, 5)
    refused_record(stack, "song1", MONTH)
    expiry_kept_in_ledger()
    # when recover runs
    report, _ = recover_once(stack)
    # then the aggregate is left as it is, and the message is kept, saying why; waiting will not settle it
    assert stored_count(stack, "song1", MONTH) == 5
    assert (report.deleted, queue_depth(stack)) == (0, 1)
    (kept,) = report.kept
    assert kept["retry"] is False
    assert f"song1 in {MONTH} (stored 5, recounted 1)" in kept["note"]
    assert "expired by TTL" in kept["note"]
    assert report.differences_remain


def test_a_refused_record_whose_aggregate_the_rebase_makes_exact_is_deleted(aws: None) -> None:
    # given a one-reader deployment whose download of song1 is in the table in MONTH while its ledger item counts it in
    # February (its edit's record lost), and a refused_record of song1's aggregate in MONTH
    stack = one_reader_stack()
    stale_ledger_item(stack, "2018-02")
    refused_record(stack, "song1", MONTH, reason="ledger: shard unrelated: no documented order places them")
    # when recover runs
    report, reconciler = recover_once(stack)
    # then the rebase moved the key and its aggregates, the check found song1 in MONTH exact, and the message is deleted
    assert report.rebased is not None
    assert report.rebased.moved == 1
    assert (stored_count(stack, "song1", "2018-02"), stored_count(stack, "song1", MONTH)) == (0, 1)
    assert reconciler.repairs == [False]
    assert (report.deleted, report.kept, queue_depth(stack)) == (1, [], 0)
    assert not report.differences_remain


def test_a_trimmed_message_whose_key_is_gone_is_kept_naming_it_until_the_operator_takes_it_back(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a one-reader deployment whose ledger counts a download whose item is gone (deleted or expired, not told
    # apart), and the aggregator's records_trimmed
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    delete_download(stack, "song1", "d1")
    records_trimmed(stack)
    # when recover runs
    report, _ = recover_once(stack)
    # then the message is kept, naming the gone key and the repair that takes a deleted one back
    assert report.rebased is not None
    (gone,) = report.rebased.gone
    assert (report.deleted, queue_depth(stack)) == (0, 1)
    (kept,) = report.kept
    assert (kept["kind"], kept["boards"], kept["retry"]) == ("records_trimmed", ["every board"], False)
    assert gone["claimKey"] in kept["note"]
    assert "reconcile --repair --deleted-keys" in kept["note"]
    assert report.differences_remain
    # when the operator, who knows the application deleted it, names it, and runs recover again
    main(["reconcile", "--table", stack.table, "--month", MONTH, "--repair", "--deleted-keys", gone["claimKey"]])
    capsys.readouterr()
    again, _ = recover_once(stack)
    # then, everything exact, the message is deleted
    assert (again.deleted, again.kept, queue_depth(stack)) == (1, [], 0)
    assert stored_count(stack, "song1", MONTH) == 0


def test_a_key_the_rebase_leaves_unplaced_keeps_the_messages_naming_its_aggregates_only(aws: None) -> None:
    # given a one-reader deployment with song1's download in MONTH counted in February by a ledger item of two readers
    # per shard (which the rebase leaves as it is), song1's aggregates equal to their recount, and refused_records of
    # song1's and of song2's aggregates in MONTH
    stack = one_reader_stack()
    write_download(stack, "song1", "d1")
    claim = two_reader_ledger_item(stack, "song1", "d1", "2018-02")
    set_count(stack, "song1", MONTH, 1)
    refused_record(stack, "song1", MONTH)
    refused_record(stack, "song2", MONTH)
    # when recover runs
    report, _ = recover_once(stack)
    # then the rebase left the key, naming its aggregates, and the message naming one of them is kept, saying why,
    # although its count equals the recount; song2's, exact and named by no key left, is deleted
    assert report.rebased is not None
    assert [(entry["claimKey"], entry["aggregates"]) for entry in report.rebased.unplaced] == [
        (claim, [["song1", "2018-02"], ["song1", MONTH]])
    ]
    assert (report.deleted, queue_depth(stack)) == (1, 1)
    (kept,) = report.kept
    assert kept["kind"] == "refused_record"
    assert claim in kept["note"]
    assert "StreamFrom" in kept["note"]


def test_a_difference_the_check_meets_from_a_download_written_during_the_run_keeps_the_message(
    aws: None,
) -> None:
    # given a one-reader deployment whose download of song1 the rebase makes exact, a refused_record of its aggregate,
    # and a second download of song1 written after the rebase and before the check (not delivered yet)
    stack = one_reader_stack()
    stale_ledger_item(stack, "2018-02")
    refused_record(stack, "song1", MONTH)

    class WrittenMeanwhile(CountingReconciler):
        def run(self, targets: Any, repair: bool = False, **options: Any) -> Any:
            write_download(stack, "song1", "d2")
            return super().run(targets, repair=repair, **options)

    # when recover runs
    report, _ = recover_once(stack, WrittenMeanwhile)
    # then the check met the difference and the message is kept, saying that such a download settles by itself
    assert (report.deleted, queue_depth(stack)) == (0, 1)
    (kept,) = report.kept
    assert f"song1 in {MONTH} (stored 1, recounted 2)" in kept["note"]
    assert "run recover again" in kept["note"]


def test_recover_from_the_command_line_sets_an_aggregate_no_download_explains_and_exits_exact(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a one-reader deployment with song1's aggregate holding a count no download explains, and its refused_record
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song1", MONTH, 7)
    refused_record(stack, "song1", MONTH)
    # when recover runs from the command line
    code = main(["recover", "--table", stack.table, "--json"])
    # then the aggregate is set to what the ledger counts, the message deleted, and the exit code says exact
    answer = json.loads(capsys.readouterr().out)
    assert (code, answer["deleted"], answer["kept"]) == (EXIT_EXACT, 1, [])
    assert answer["drift"] == {
        "settled": [{"entityId": "song1", "board": MONTH, "stored": "7", "ledger": "1"}],
        "left": [],
    }
    assert stored_count(stack, "song1", MONTH) == 1
    assert queue_depth(stack) == 0


@pytest.mark.parametrize("output", ["table", "text"])
def test_recover_for_a_person_and_for_a_script_names_the_aggregate_it_set_and_both_counts(
    aws: None, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    # given a one-reader deployment with song1's aggregate holding a count no download explains, and its refused_record
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song1", MONTH, 7)
    refused_record(stack, "song1", MONTH)
    # when recover runs with that output
    code = main(["recover", "--table", stack.table, "--output", output])
    # then the output names the aggregate set, what it held and what the ledger counts
    printed = capsys.readouterr().out
    assert code == EXIT_EXACT
    expected = f"set: song1 in {MONTH}: 7 -> 1" if output == "table" else f"drift_settled\tsong1\t{MONTH}\t7\t1"
    assert expected in printed, printed
