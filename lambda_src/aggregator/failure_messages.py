"""What the aggregator puts in the failure queue: records it cannot count, and records it can no longer read."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from aggregate_writes import Contribution
from delivery import Refused, ShardRef
from download_records import AggregateKey, Rejected
from progress_item import Progress
from telemetry import logger


def rejected_message(item: Rejected, shard: ShardRef) -> dict[str, Any]:
    return {
        "kind": "rejected_download",
        "reason": item.reason,
        "sequenceNumber": item.raw_sequence,
        "shardId": shard.shard_id,
        "streamArn": shard.stream_arn,
        "record": item.record,
    }


def refused_message(item: Refused) -> dict[str, Any]:
    message = {
        "kind": "refused_record",
        "reason": item.reason,
        "sequenceNumber": item.raw_sequence,
        "shardId": item.shard_id,
        "streamArn": item.stream_arn,
        "record": item.record,
    }
    if isinstance(item.record, dict) and "entityId" in item.record:
        message["entityId"], message["board"] = item.record["entityId"], item.record.get("board")
    return message


def refused_contribution(key: AggregateKey, shard: ShardRef, contribution: Contribution, reason: str) -> Refused:
    return Refused(
        reason,
        contribution.sequence.lstrip("0") or "0",
        {"entityId": key.entity_id, "board": key.board, "created": contribution.created},
        shard.shard_id,
        shard.stream_arn,
    )


def gap_message(
    shard: ShardRef, progress: Progress, first_sequence: str | None, first_created: int | None
) -> dict[str, Any]:
    """What recover needs to recount records trimmed before they were read: where counting stopped, and resumed."""
    return {
        "kind": "records_trimmed",
        "shardId": shard.shard_id,
        "streamArn": shard.stream_arn,
        "checkpoint": progress.checkpoint_sequence,
        "checkpointCreated": progress.checkpoint_created,
        "firstReadableSequence": first_sequence,
        "firstReadableCreated": first_created,
    }


def lost_ancestor_message(shard: ShardRef, lost: ShardRef) -> dict[str, Any]:
    """An ancestor deleted from the stream before it was read: its records, and any of its ancestors', are lost."""
    return {
        "kind": "records_trimmed",
        "shardId": lost.shard_id,
        "streamArn": lost.stream_arn,
        "checkpoint": None,
        "checkpointCreated": None,
        "firstReadableSequence": None,
        "firstReadableCreated": None,
        "lostAncestorOf": shard.shard_id,
        "reason": "an ancestor shard was deleted from the stream before it was read to its end",
    }


MESSAGE_BYTES = 200_000
"""Below SQS's per-message limit (256 KiB, or 1 MiB where raised), with room for the JSON around a record."""
BATCH_BYTES = 900_000
"""SendMessageBatch: "the maximum total payload size (the sum of the individual lengths of all of the batched
messages)" is 1 MiB (256 KiB in older text: then one message per batch); kept below it."""


def failure_message_body(message: dict[str, Any]) -> str:
    """The message as JSON that always parses: an oversized record is replaced by what identifies it."""
    body = json.dumps(message, default=str)
    if len(body.encode()) <= MESSAGE_BYTES:
        return body
    record = message.get("record")
    stream = record.get("dynamodb", {}) if isinstance(record, dict) else {}
    summary = {
        "truncated": True,
        "eventName": record.get("eventName") if isinstance(record, dict) else None,
        "keys": stream.get("Keys") if isinstance(stream, dict) else None,
        "sequenceNumber": stream.get("SequenceNumber") if isinstance(stream, dict) else None,
        "bytes": len(body.encode()),
    }
    return json.dumps({**message, "record": summary}, default=str)[:MESSAGE_BYTES]


def send_to_failure_queue(sqs: Any, queue_url: str | None, messages: list[dict[str, Any]]) -> bool:
    """Copy messages to the failure queue in batches of at most ten and 900 KB; False unless every one got there."""
    if not queue_url:
        return True
    bodies = [failure_message_body(message) for message in messages]
    batches: list[list[str]] = [[]]
    for body in bodies:
        batch = batches[-1]
        if len(batch) == 10 or sum(len(b.encode()) for b in batch) + len(body.encode()) > BATCH_BYTES:
            batches.append([body])
        else:
            batch.append(body)
    delivered = True
    for batch in batches:
        if not batch:
            continue
        entries = [{"Id": str(index), "MessageBody": body} for index, body in enumerate(batch)]
        try:
            response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        except (ClientError, BotoCoreError):
            logger.exception("records were not copied to the failure queue; the log lines hold them")
            delivered = False
            continue
        if response.get("Failed"):
            logger.error("some records were not copied to the failure queue", extra={"failed": response["Failed"]})
            delivered = False
    return delivered
