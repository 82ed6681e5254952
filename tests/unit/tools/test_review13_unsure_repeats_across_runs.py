"""review13: fix56's `mark_repeated` reads identical `keep_taken_unsure` reports as one only among the messages one run
receives. The report asks the operator to add counts back by hand and then delete it ("delete this message from the
queue once judged"). SQS standard queues: "it is possible to receive a message even after you delete it ... The copy
remains on the server and might be returned to you during a subsequent receive request" (DeleteMessage); and "more than
one copy of a message might be delivered out of order" (standard queues). A copy received by a later run, after the
first was judged and deleted, or by a run alongside the one holding the first (a received message is hidden from other
consumers for its visibility timeout), is shown as a fact of its own: an operator acting on it as written adds the same
counts back twice (a double count).

Fixed: each fact received is recorded once in the ledger table (a PutItem conditioned on its absence), with the id of
its first message; a copy is told the same report. The stacks here have a ledger table: only ledger mode sends
`keep_taken_unsure`. Two runs at once: which of them records first is not known, and a run cannot see the copy another
holds ("a period of time during which Amazon SQS prevents other consuming components from receiving and processing
the message", visibility timeout), so the other run's receipt is its recording (as a real run records right after
receiving), in either order."""

from __future__ import annotations

import boto3
import pytest

from leaderboard_core.claims import CLAIM_KEY
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.recover.failure_messages import KEEP_TAKEN_UNSURE, classify
from leaderboard_tools.recover.unsure_facts import record_facts
from tests.unit.tools.operator_stack import MotoStack, deploy
from tests.unit.tools.test_backfill import _create_keyed_table
from tests.unit.tools.test_recover import run_recover, send
from tests.unit.tools.test_recover_failure_repeats import unsure


def ledger_stack() -> MotoStack:
    """The module in ledger mode: its ledger table named in the aggregator's CLAIMS_TABLE_NAME."""
    _create_keyed_table("music-claims", CLAIM_KEY)
    return deploy(aggregator_settings={"CLAIMS_TABLE_NAME": "music-claims"})


def test_a_copy_of_a_judged_and_deleted_unsure_report_received_by_a_later_run_is_not_shown_as_a_new_fact(
    aws: None,
) -> None:
    # given a keep_taken_unsure report that a run kept and the operator judged (counts added back by hand) and deleted
    stack = ledger_stack()
    body = unsure("unused").body
    send(stack, body)
    first = run_recover(stack, operator_clients(region="us-east-1"))
    assert [kept["kind"] for kept in first.kept] == [KEEP_TAKEN_UNSURE]
    sqs = boto3.client("sqs", region_name="us-east-1")
    [message] = sqs.receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=10)["Messages"]
    sqs.delete_message(QueueUrl=stack.queue_url, ReceiptHandle=message["ReceiptHandle"])
    # when a copy of it is received afterwards (a copy left on a server the delete missed, or the aggregator's retry of
    # its batch after a crash sending it again)
    send(stack, body)
    later = run_recover(stack, operator_clients(region="us-east-1"))
    # then the later run does not present it as a fact still to act on
    fresh = [kept for kept in later.kept if kept["kind"] == KEEP_TAKEN_UNSURE and "same report" not in kept["note"]]
    assert fresh == [], f"shown again as a fact to act on: {fresh}"


@pytest.mark.parametrize("first", ["the other run", "this run"])
def test_two_runs_at_once_holding_one_copy_each_of_an_unsure_report_do_not_both_show_it_as_a_fact_of_its_own(
    aws: None, first: str
) -> None:
    # given the same keep_taken_unsure report twice in the failure queue, one copy held by another recover run (received
    # with its visibility timeout, as receive_all does, and recorded as that run records what it receives)
    stack = ledger_stack()
    body = unsure("unused").body
    for _ in range(2):
        send(stack, body)
    sqs = boto3.client("sqs", region_name="us-east-1")
    held = sqs.receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=1, VisibilityTimeout=30)["Messages"]
    assert len(held) == 1
    deployment = discover(operator_clients(region="us-east-1"), stack.table)
    assert deployment.claims_table
    other = [classify(raw, deployment) for raw in held]
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    if first == "the other run":
        record_facts(other, dynamodb, deployment.claims_table)
    # when this run answers the queue meanwhile
    report = run_recover(stack, operator_clients(region="us-east-1"))
    if first == "this run":
        record_facts(other, dynamodb, deployment.claims_table)
    # then the copy it holds is not shown as a fact of its own where the other run shows the same report: of the two
    # runs, one shows it, the other says it is the same report
    fresh = [kept for kept in report.kept if kept["kind"] == KEEP_TAKEN_UNSURE and "same report" not in kept["note"]]
    fresh_there = [message.message_id for message in other if "same report" not in message.note]
    if first == "the other run":
        assert fresh == [], f"shown by both runs as a fact to act on: {fresh}"
    assert len(fresh) + len(fresh_there) == 1, f"here {fresh}, there {fresh_there}"
