"""What a delivered record is to the versioned ledger (one reader per shard): well formed or reported, a download or
not, and what each of its images counts, read by the aggregator's own parser (download_records.parse_record) so that
the entity, the boards and the amount come from the image as in every other mode, whatever the table's keys are.

Pure functions: a record that cannot be applied is reported (`rejected_download`) and never blocks its shard.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from delivery import ShardRef
from download_records import Download, Ignored, Rejected, Schema, parse_record
from leaderboard_core.source_items import expired_by_ttl

Boards = dict[str, Decimal]
KEY_TYPES = ("S", "N", "B")
"""A key attribute's types: "Each primary key attribute must be a scalar (meaning that it can hold only a single
value). The only data types allowed for primary key attributes are string, number, or binary."."""
CHANGES = ("INSERT", "MODIFY", "REMOVE")


def sequence_of(record: dict[str, Any]) -> int:
    return int(record["dynamodb"]["SequenceNumber"])


def well_formed(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Rejected]]:
    """The records that name a sequence number, a creation time and typed Keys, and the rest: reported, never
    blocking a shard."""
    kept: list[dict[str, Any]] = []
    malformed: list[Rejected] = []
    for record in records:
        stream = record.get("dynamodb") if isinstance(record, dict) else None
        sequence = stream.get("SequenceNumber") if isinstance(stream, dict) else None
        created = stream.get("ApproximateCreationDateTime") if isinstance(stream, dict) else None
        if not (isinstance(sequence, str) and sequence.isdigit() and len(sequence) <= 40):
            malformed.append(Rejected("SequenceNumber is missing or not 1-40 digits", None, record))
        elif not isinstance(created, int | float) or isinstance(created, bool) or not math.isfinite(created):
            malformed.append(Rejected("ApproximateCreationDateTime is missing or not a number", sequence, record))
        elif record.get("eventName") in CHANGES and not typed_keys(stream.get("Keys")):
            malformed.append(
                Rejected("Keys is missing or not a map of string, number or binary values", sequence, record)
            )
        else:
            kept.append(record)
    return kept, malformed


def typed_keys(keys: Any) -> bool:
    """A stream record's Keys as DynamoDB writes them: each attribute a non-empty S, N or B."""
    if not isinstance(keys, dict) or not keys:
        return False
    for value in keys.values():
        if not isinstance(value, dict) or len(value) != 1:
            return False
        kind, content = next(iter(value.items()))
        if kind not in KEY_TYPES or not isinstance(content, str) or not content:
            return False
    return True


def image_counts(image: dict[str, Any] | None, schema: Schema) -> dict[tuple[str, str], Decimal] | None:
    """What one image counts by the aggregator's parser, (entity, board) -> amount; None if it is no download at all."""
    if not isinstance(image, dict):
        return {}
    parsed = parse_record({"eventName": "INSERT", "dynamodb": {"NewImage": image, "SequenceNumber": "1"}}, schema)
    if isinstance(parsed, Ignored):
        return None
    if not isinstance(parsed, Download):
        return {}
    return {(change.key.entity_id, change.key.board): Decimal(change.amount) for change in parsed.changes}


def counted(image: dict[str, Any] | None, schema: Schema) -> tuple[str | None, Boards]:
    """The entity an image counts for and its boards, or (None, {}) where it counts nothing. A single-table design
    keys the item by anything (docs/attaching.md): the entity is the image's attribute, never the record's Keys."""
    counts = image_counts(image, schema) or {}
    entities = {entity for entity, _ in counts}
    if not counts or len(entities) != 1:
        return None, {}
    return entities.pop(), {board: amount for (_, board), amount in counts.items()}


def is_download_record(record: dict[str, Any], schema: Schema) -> bool:
    """An INSERT, MODIFY or REMOVE of an item that is no aggregate (an expiry by TTL too). A REMOVE needs only its
    Keys: the key's ledger item says what it counts, and a REMOVE moves it to nothing whatever its old image was (an
    aggregate's key has no ledger item, so it takes nothing). An expiry keeps its old image counted: it needs it."""
    if record.get("eventName") not in CHANGES:
        return False
    stream = record.get("dynamodb") or {}
    images = [stream.get(name) for name in ("NewImage", "OldImage") if isinstance(stream.get(name), dict)]
    if not images and record.get("eventName") == "REMOVE" and not expired_by_ttl(record):
        return bool(stream.get("Keys"))
    return bool(images) and bool(stream.get("Keys")) and not any(map(schema.is_aggregate, images))


def rejection(record: dict[str, Any], schema: Schema) -> str | None:
    """Why a change of a download cannot be applied as its images say (reported on every delivery, applied or not);
    None if it can. An INSERT or MODIFY needs its new image, a REMOVE its old one (NEW_AND_OLD_IMAGES): one without it
    is reported for the stream's view type, and applied by its Keys unless it is an expiry (`is_download_record`)."""
    event = record.get("eventName")
    stream = record.get("dynamodb") or {}
    new, old = stream.get("NewImage"), stream.get("OldImage")
    if event not in CHANGES or (isinstance(old, dict) and schema.is_aggregate(old)):
        return None
    if event == "REMOVE":
        if isinstance(old, dict):
            return None
        if expired_by_ttl(record):
            return (
                "REMOVE without OldImage (stream view type must be NEW_AND_OLD_IMAGES), an expiry by TTL: not applied, "
                "the download stays counted as its ledger item says"
            )
        return (
            "REMOVE without OldImage (stream view type must be NEW_AND_OLD_IMAGES): applied by its Keys, its "
            "ledger item saying what the download counted"
        )
    if not isinstance(new, dict):
        return f"{event} without NewImage (stream view type must be NEW_AND_OLD_IMAGES)"
    if schema.is_aggregate(new) or image_counts(new, schema) != {}:
        return None
    parsed = parse_record({"eventName": "INSERT", "dynamodb": {"NewImage": new, "SequenceNumber": "1"}}, schema)
    return getattr(parsed, "reason", "the new image is no countable download")


def refused_report(
    shard: ShardRef, key: dict[str, Any], records: list[dict[str, Any]], entity: str, board: str, reason: str
) -> dict[str, Any]:
    """A `refused_record` of one aggregate a key's records move: recover recounts it."""
    sequences = [record["dynamodb"]["SequenceNumber"] for record in records]
    return {
        "kind": "refused_record",
        "entityId": entity,
        "board": board,
        "reason": reason,
        "shardId": shard.shard_id,
        "streamArn": shard.stream_arn,
        "sequenceNumber": sequences[0],
        "record": {"keys": key, "sequenceNumbers": sequences},
    }
