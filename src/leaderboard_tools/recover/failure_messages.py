"""The failure queue's messages, classified by kind, with the aggregates each names; a band's record answered."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from leaderboard_core.bookkeeping import RECOUNT_BAND
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.reconcile import (
    BAND_MESSAGE_KIND,
    AggregateId,
    Reconciler,
    download_aggregates,
)

KEEP_TAKEN_UNSURE = "keep_taken_unsure"
"""The aggregator's report of an operator's keep taken by an expiry after an INSERT it cannot place, spent by a REMOVE
with no TTL identity, or of a record it cannot place against a gone version's read."""


@dataclass
class Message:
    message_id: str
    receipt_handle: str
    body: dict[str, Any]
    kind: str = "unknown"
    aggregates: dict[str, set[str] | None] = field(default_factory=dict)
    """Board -> songs to recount (None: the whole board)."""
    every_month: bool = False
    note: str = ""
    done: bool = False
    retry: bool = False
    """Not exact yet only because the stream has not caught up (downloads in flight, a checkpoint behind)."""
    batch: dict[str, Any] = field(default_factory=dict)
    """For the mapping's failure records: the range, the aggregates it touches, the checkpoint."""
    expired_band: AggregateId | None = None
    """For a band's record: the aggregate still carrying it past its deadline."""
    queue_url: str = ""
    """The queue it was received from, where it is deleted or made visible again."""

    def summary(self) -> dict[str, Any]:
        boards = ["every board"] if self.every_month else sorted(self.aggregates)
        return {"kind": self.kind, "boards": boards, "note": self.note, "retry": self.retry}


def classify(raw: dict[str, Any], deployment: Deployment) -> Message:
    try:
        body = json.loads(raw["Body"])
    except ValueError:
        body = {}
    message = Message(raw["MessageId"], raw["ReceiptHandle"], body if isinstance(body, dict) else {})
    kind = message.body.get("kind")
    if "DDBStreamBatchInfo" in message.body:
        message.kind = "failed_batch"
    elif kind == "records_trimmed":
        message.kind = kind
        if _empty_gap(message.body):
            message.done, message.note = (
                True,
                "nothing was trimmed: the first readable record is not after the checkpoint",
            )
        else:
            message.every_month = True
    elif kind == "rejected_download":
        message.kind = kind
    elif kind == "refused_record":
        message.kind = kind
        for entity, board in _refused_aggregates(message.body, deployment):
            message.aggregates.setdefault(board, set()).add(entity)
    elif kind == BAND_MESSAGE_KIND:
        message.kind = kind
    elif kind == KEEP_TAKEN_UNSURE:
        # Nothing in the table tells which it was: kept, for the operator to judge and add back by hand if need be.
        message.kind = kind
        message.note = unsure_note(message.body)
    return message


def unsure_note(body: dict[str, Any]) -> str:
    """What recover says of a `keep_taken_unsure` report it keeps for the operator."""
    return (
        f"{body.get('claimKey')}: {body.get('reason')}; counts {body.get('counts')} (insert {body.get('insert')}, "
        f"taken by {body.get('takenBy')}): delete this message from the queue once judged"
    )


def fact_of(body: dict[str, Any]) -> str:
    """What a report is of: the key, the removal that took its keep, what the keep counted, and why it is unsure. Not
    the INSERT it names (`insert`, the lowest known when it was sent), which a record read back later may lower."""
    fields = [body.get(name) for name in ("claimKey", "takenBy", "entityId", "reason")]
    return json.dumps([*fields, body.get("counts")], sort_keys=True)


def mark_repeated(messages: list[Message]) -> None:
    """A `keep_taken_unsure` report of the same fact as another read in the same run is that fact sent again: SQS
    standard queues "support at-least-once message delivery" and "more than one copy of a message might be delivered"
    (standard queues), and the aggregator sends a report again when a retry of its batch folds the key again after a
    crash. Kept once (the first received; `unsure_facts.record_facts` keeps instead the one an earlier run recorded
    first, when it is among them); the repeats are done."""
    first: dict[str, str] = {}
    for message in messages:
        if message.kind != KEEP_TAKEN_UNSURE:
            continue
        fact = fact_of(message.body)
        if fact in first:
            message.done = True
            message.note = f"the same report as message {first[fact]}, sent again: deleted, that one kept"
        else:
            first[fact] = message.message_id


def answer_band(message: Message, clients: Any, deployment: Deployment, reconciler: Reconciler) -> None:
    """Done if the aggregate no longer carries the band; waiting while its deadline has not passed; else its
    aggregate is named for the run's recount, whose repair replaces the band."""
    body = message.body
    entity, board, band, deadline = body.get("entityId"), board_of(body), body.get("band"), body.get("deadline")
    if not all(isinstance(value, str) for value in (entity, board, band)) or not isinstance(deadline, int):
        message.note = "the band's record names no aggregate, band and deadline"
        return
    names = deployment.names
    item = clients.dynamodb.get_item(
        TableName=deployment.aggregates,
        Key={names.entity: {"S": entity}, names.sort_key: {"S": board}},
        ConsistentRead=True,
    ).get("Item")
    now = reconciler.dynamodb_time()
    if ((item or {}).get(RECOUNT_BAND) or {}).get("S") != band:
        if now <= deadline:
            # The record is sent before the band opens: until the deadline, absent may mean not open yet.
            message.retry, message.note = True, f"its band is not open, or closed already: kept until {deadline}"
        else:
            message.done, message.note = True, "its band is closed or replaced by a later repair's: nothing to do"
    elif now <= deadline:
        message.retry, message.note = True, f"its repair's band is open until {deadline}: run again after it"
    else:
        message.aggregates = {board: {entity}}
        message.expired_band = (entity, board)
        message.note = f"its repair's band outlived its deadline {deadline} (the repair was stopped): recount"


def _empty_gap(body: dict[str, Any]) -> bool:
    """The records lost lie strictly between the checkpoint and the first readable record: none if it is not after."""
    checkpoint, first = body.get("checkpoint"), body.get("firstReadableSequence")
    return (
        isinstance(checkpoint, str)
        and isinstance(first, str)
        and checkpoint.isdigit()
        and first.isdigit()
        and (int(first) <= int(checkpoint))
    )


def board_of(fields: dict[str, Any]) -> Any:
    """The board a message names: its "board", or its "period" when an aggregator from before "board" wrote it."""
    return fields["board"] if "board" in fields else fields.get("period")


def _refused_aggregates(body: dict[str, Any], deployment: Deployment) -> list[AggregateId]:
    """The aggregate a refused record names; where it names none, every aggregate its download counts in."""
    if isinstance(body.get("entityId"), str) and isinstance(board_of(body), str):
        return [(body["entityId"], board_of(body))]
    record = body.get("record")
    if isinstance(record, dict) and "entityId" in record and board_of(record) is not None:
        return [(str(record["entityId"]), str(board_of(record)))]
    return download_aggregates(record, deployment)
