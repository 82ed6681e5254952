"""recover reads a `keep_taken_unsure` report sent twice as one: SQS standard queues deliver "at least once" and may
deliver a message twice, and the aggregator may send a report again when a retry of its batch folds the key again
after a crash (within one apply it sends each once: test_review12_read_windows.py)."""

from __future__ import annotations

import json
from typing import Any

from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.recover.failure_messages import KEEP_TAKEN_UNSURE, Message, mark_repeated
from tests.unit.tools.operator_stack import deploy
from tests.unit.tools.test_recover import run_recover, send


def unsure(message_id: str, taken_by: str = "shard|2", kind: str = KEEP_TAKEN_UNSURE) -> Message:
    body: dict[str, Any] = {
        "kind": kind,
        "claimKey": "download#a",
        "entityId": "song1",
        "counts": {"2018-01": "1"},
        "takenBy": taken_by,
        "insert": None,
        "reason": "a REMOVE with no TTL identity took the operator's keep",
    }
    return Message(message_id, f"receipt-{message_id}", json.loads(json.dumps(body)), kind=kind)


def test_a_keep_taken_unsure_report_received_twice_is_kept_once_and_its_repeat_deleted() -> None:
    # given the same report received twice (its keys in another order the second time)
    first, repeat = unsure("m1"), unsure("m2")
    repeat.body = dict(reversed(list(repeat.body.items())))
    # when recover marks repeats
    mark_repeated([first, repeat])
    # then the first is kept for the operator, the repeat is done and says which message it repeats
    assert not first.done
    assert repeat.done
    assert "m1" in repeat.note


def test_reports_of_different_takers_or_of_another_kind_are_each_kept() -> None:
    # given two reports of different takers, and two identical refused_record messages
    one, other = unsure("m1"), unsure("m2", taken_by="shard|3")
    refused = [unsure("m3", kind="refused_record"), unsure("m4", kind="refused_record")]
    # when recover marks repeats
    mark_repeated([one, other, *refused])
    # then none is marked done: only a keep_taken_unsure report's repeat is the same fact
    assert [message.done for message in (one, other, *refused)] == [False, False, False, False]


def test_recover_deletes_a_repeated_keep_taken_unsure_report_and_keeps_the_first_for_the_operator(aws: None) -> None:
    # given the aggregator's keep_taken_unsure report in the failure queue twice
    stack = deploy()
    for _ in range(2):
        send(stack, unsure("unused").body)
    # when recover runs
    report = run_recover(stack, operator_clients(region="us-east-1"))
    # then one is deleted as a repeat, one kept for the operator to judge
    assert report.deleted == 1
    assert [kept["kind"] for kept in report.kept] == [KEEP_TAKEN_UNSURE]


def test_reports_of_one_taking_that_name_different_inserts_are_one_fact() -> None:
    # given two reports of the same taking, the second naming a lower INSERT a record read back later found
    first, lower = unsure("m1"), unsure("m2")
    first.body["insert"], lower.body["insert"] = "shard|5", "shard|3"
    # when recover marks repeats
    mark_repeated([first, lower])
    # then the second is the same fact: done, naming the first
    assert (first.done, lower.done) == (False, True)
    assert "m1" in lower.note
