"""recover and the rebase's answers while the aggregator's `#replicas-seen` item exists: refused, nothing written.

The aggregator writes the item (lambda_src/aggregator/replica_guard.py) when, with retractions on, DescribeTable shows
the watched table replicated: a deletion in its stream can then be an expiry in another region (AWS: replicated TTL
deletions "are not identifiable in DynamoDB streams in the regions the deletion is replicated to"), so no answer can
be judged. Detached (retractions = false), the item no longer matters to the counts and recover runs again.
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from leaderboard_core.bookkeeping import FIRST_SEEN, REPLICA_REGIONS, REPLICAS_SEEN_KEY, SHARD_KEY
from leaderboard_tools.commands import EXIT_ERROR
from leaderboard_tools.commands.reconcile import rebase_ledger
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.recover.replicas_seen import ReplicasSeen
from tests.unit.tools.operator_stack import (
    MONTH,
    REGION,
    MotoStack,
    deploy,
    queue_counts,
    run,
    run_recover,
    write_download,
)


def replica_recorded(stack: MotoStack) -> None:
    """The item the aggregator's replica guard writes, as it writes it."""
    assert stack.progress_table
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName=stack.progress_table,
        Item={
            SHARD_KEY: {"S": REPLICAS_SEEN_KEY},
            FIRST_SEEN: {"N": "1516000000"},
            REPLICA_REGIONS: {"SS": ["replica eu-west-1 (CREATING)"]},
        },
    )


def refused_record(stack: MotoStack) -> None:
    body = {"kind": "refused_record", "reason": "overflow", "entityId": "song1", "board": MONTH}
    boto3.client("sqs", region_name=REGION).send_message(QueueUrl=stack.queue_url, MessageBody=json.dumps(body))


def test_recover_refuses_to_answer_anything_while_a_replica_is_recorded(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a deployment with retractions, a message in its failure queue, and a replica the aggregator recorded
    stack = deploy(retractions=True)
    write_download(stack, "song1", "d1")
    refused_record(stack)
    replica_recorded(stack)
    # when recover runs
    code = run(["recover", "--table", stack.table])
    # then it exits non-zero with the deployment-level message, and the message stays in the queue for later
    error = capsys.readouterr().err
    assert code == EXIT_ERROR
    assert "found music-downloads replicated (replica eu-west-1 (CREATING)) at 2018-01-15T07:06:40Z" in error
    assert "retractions = false and ledger = false" in error
    assert "nothing was written" in error
    assert sum(queue_counts(stack)) == 1


def test_once_detached_recover_answers_again_whatever_the_item(aws: None) -> None:
    # given the same item, but the deployment detached (retractions off: a REMOVE changes no count)
    stack = deploy(retractions=False)
    write_download(stack, "song1", "d1")
    refused_record(stack)
    replica_recorded(stack)
    # when recover runs
    report = run_recover(stack)
    # then it receives and answers the message as usual (a recount of its board), refusing nothing
    assert report.messages == 1
    assert [board["board"] for board in report.reconciled] == [MONTH]


def test_the_rebase_refuses_gone_report_answers_while_a_replica_is_recorded(aws: None) -> None:
    # given a ledger-mode deployment (one reader per shard) with a replica recorded
    stack = deploy(retractions=True)
    replica_recorded(stack)
    clients = operator_clients(region=REGION)
    deployment = dataclasses.replace(
        discover(clients, stack.table), ledger=True, stream_readers=1, claims_table="music-claims"
    )
    aws_clients: Any = SimpleNamespace(dynamodb=clients.dynamodb)
    # when the operator answers a gone report (`reconcile --repair --deleted-keys`)
    # then the answer is refused before anything is read or written
    with pytest.raises(ReplicasSeen, match="recover answers nothing"):
        rebase_ledger(aws_clients, deployment, "json", ["download#abc"])
