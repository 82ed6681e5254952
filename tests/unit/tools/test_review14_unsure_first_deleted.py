"""review14: fix57 records each `keep_taken_unsure` fact at its first receipt (`unsure#<digest>`, `FirstMessage`), and a
later copy is told "the same report as message <first> ...: delete this copy without acting on it once that one is
judged". Within a run, `mark_repeated` keeps the first copy in receive order and deletes the others, without reading
that record. A run that receives a copy (Y) before the recorded first message (X), both in the queue, deletes X as a
repeat of Y and keeps Y, told to defer to X: the message the operator is told to judge is the one the run deleted.

AWS: an SQS standard queue "might" deliver a message more than once and "out of order" (standard queues); recover keeps
a `keep_taken_unsure` report in the queue for the operator (visible again at once), and the aggregator sends a report
again when a retry of its batch folds the key again after a crash ("Lambda event source mappings process each event at
least once, and duplicate processing of records can occur"), so X and a copy Y can both be in the queue, in any order;
"It is possible you will receive a message even after you have deleted it" (DeleteMessage)."""

from __future__ import annotations

import boto3

from leaderboard_core.claims import CLAIM_KEY
from leaderboard_tools.recover.failure_messages import mark_repeated
from leaderboard_tools.recover.unsure_facts import record_facts
from tests.unit.tools.test_backfill import _create_keyed_table
from tests.unit.tools.test_recover_failure_repeats import unsure

LEDGER = "music-claims"


def test_a_run_receiving_a_copy_before_the_recorded_first_message_does_not_delete_the_message_it_defers_to(
    aws: None,
) -> None:
    # given a fact recorded by an earlier run at its first message X (kept in the queue for the operator)
    _create_keyed_table(LEDGER, CLAIM_KEY)
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    record_facts([unsure("X")], dynamodb, LEDGER)
    # when a later run receives a copy Y first, then X, and marks repeats and records facts as recover does
    copy, first = unsure("Y"), unsure("X")
    messages = [copy, first]
    mark_repeated(messages)
    record_facts(messages, dynamodb, LEDGER)
    # then the message the kept copy defers to is not the one this run deletes
    deleted = {message.message_id for message in messages if message.done}
    deferring = [m for m in messages if not m.done and "delete this copy without acting" in m.note]
    told_to_wait_for = {m.note.split("the same report as message ")[1].split(",")[0] for m in deferring}
    assert not (told_to_wait_for & deleted), (
        f"deleted {sorted(deleted)}; kept {[(m.message_id, m.note) for m in messages if not m.done]}"
    )
