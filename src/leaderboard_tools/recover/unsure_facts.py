"""`keep_taken_unsure` reports as facts: one taking of a keep is one fact, however many messages say it (within a run:
`mark_repeated`). Across runs, and between runs at once, a record of each fact received, written once in the ledger
table (`unsure#<digest>`), tells a later copy from the first."""

from __future__ import annotations

import hashlib
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_core.claims import CLAIM_KEY, UNSURE_FACT_PREFIX
from leaderboard_tools.recover.failure_messages import KEEP_TAKEN_UNSURE, Message, fact_of, unsure_note

FIRST_MESSAGE = "FirstMessage"
"""On a fact's record: the id of the first message of it that a run received."""


def record_facts(messages: list[Message], dynamodb: Any, ledger_table: str) -> None:
    """Each fact this run keeps, recorded with its message's id by a PutItem conditioned on the record's absence (one
    writer wins, whatever runs write at once). A message whose fact was recorded from another message is a copy
    (received after the first was judged and deleted, or held by another run): said so, and kept, since nothing tells
    whether that one was judged. The first message received again is said to have been received before; received in
    this run beside a copy `mark_repeated` kept, it is the one kept, and the copy is done."""
    for message in messages:
        if message.kind != KEEP_TAKEN_UNSURE or message.done:
            continue
        key = {CLAIM_KEY: {"S": UNSURE_FACT_PREFIX + hashlib.sha256(fact_of(message.body).encode()).hexdigest()}}
        try:
            dynamodb.put_item(
                TableName=ledger_table,
                Item=key | {FIRST_MESSAGE: {"S": message.message_id}},
                ConditionExpression="attribute_not_exists(#key)",
                ExpressionAttributeNames={"#key": CLAIM_KEY},
            )
            continue
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
        item = dynamodb.get_item(TableName=ledger_table, Key=key, ConsistentRead=True).get("Item") or {}
        first = (item.get(FIRST_MESSAGE) or {}).get("S")
        recorded = next((other for other in messages if other.message_id == first and other is not message), None)
        if recorded is not None:
            keep_recorded_first(recorded, message)
        elif first == message.message_id:
            message.note += "; a run received this message before: if it was judged then, delete it without acting"
        else:
            message.note = (
                f"the same report as message {first}, received by an earlier run or one running now: one fact, to "
                "judge once; delete this copy without acting on it once that one is judged. " + message.note
            )


def keep_recorded_first(recorded: Message, copy: Message) -> None:
    """The recorded first message, which later copies are told to defer to, kept in place of a copy of it received
    before it in this run: the one the operator is told to judge is never the one deleted."""
    recorded.done = False
    recorded.note = unsure_note(recorded.body)
    recorded.note += "; a run received this message before: if it was judged then, delete it without acting"
    copy.done = True
    copy.note = f"the same report as message {recorded.message_id}, sent again: deleted, that one kept"
