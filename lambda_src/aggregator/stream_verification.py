"""Direct invocations are checked against the stream itself: only records really in the named shard count.

The event source mapping's deliveries are trusted. A direct invocation (a replay, a test, an
operator) could name a shard or sequence numbers that do not exist, and an invented sequence
number would move a watermark past records still to come. So each claimed record is looked up
in the stream at its sequence number, and the stream's own copy is what gets counted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from delivery import Refused, ShardRef
from download_records import pad_sequence

MAX_PAGES = 50
MAX_EMPTY_PAGES = 5


def verified_records(
    streams: Any, shard: ShardRef, records: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[Refused]]:
    """The stream's copies of the claimed records, and every claim that the stream does not confirm."""
    claims: list[dict[str, Any]] = []
    refused: list[Refused] = []
    for record in records:
        if _sequence(record) is None:
            refused.append(Refused("record has no SequenceNumber to look up", None, record))
        else:
            claims.append(record)
    if not claims:
        return [], refused
    claims.sort(key=lambda record: pad_sequence(_sequence(record) or "0"))
    try:
        found = _read_range(streams, shard, _sequence(claims[0]) or "", pad_sequence(_sequence(claims[-1]) or "0"))
    except (ClientError, BotoCoreError) as error:
        code = error.response.get("Error", {}).get("Code") if isinstance(error, ClientError) else type(error).__name__
        reason = f"{shard.shard_id} of {shard.stream_arn} could not be read at this sequence number ({code})"
        return [], refused + [Refused(reason, _sequence(claim), claim) for claim in claims]
    accepted = []
    for claim in claims:
        sequence = _sequence(claim) or ""
        original = found.get(pad_sequence(sequence))
        if original is None:
            refused.append(Refused(f"no record {sequence} in {shard.shard_id} of {shard.stream_arn}", sequence, claim))
        elif original.get("eventName") != claim.get("eventName") or original["dynamodb"].get("Keys") != claim.get(
            "dynamodb", {}
        ).get("Keys"):
            refused.append(Refused(f"record {sequence} differs from the stream's record", sequence, claim))
        else:
            accepted.append(_as_lambda_record(original, shard))
    return accepted, refused


def _read_range(streams: Any, shard: ShardRef, first: str, last_padded: str) -> dict[str, dict[str, Any]]:
    iterator = streams.get_shard_iterator(
        StreamArn=shard.stream_arn,
        ShardId=shard.shard_id,
        ShardIteratorType="AT_SEQUENCE_NUMBER",
        SequenceNumber=first,
    ).get("ShardIterator")
    found: dict[str, dict[str, Any]] = {}
    empty_pages = 0
    for _ in range(MAX_PAGES):
        if not iterator:
            break
        page = streams.get_records(ShardIterator=iterator, Limit=1000)
        records = page.get("Records", [])
        for record in records:
            found[pad_sequence(record["dynamodb"]["SequenceNumber"])] = record
        if found and max(found) >= last_padded:
            break
        empty_pages = 0 if records else empty_pages + 1
        if empty_pages >= MAX_EMPTY_PAGES:
            break
        iterator = page.get("NextShardIterator")
    return found


def _as_lambda_record(record: dict[str, Any], shard: ShardRef) -> dict[str, Any]:
    """GetRecords omits eventSourceARN and returns creation times as datetimes; Lambda events carry both as data."""
    stream = dict(record["dynamodb"])
    created = stream.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        stream["ApproximateCreationDateTime"] = created.timestamp()
    return {**record, "dynamodb": stream, "eventSourceARN": shard.stream_arn}


def _sequence(record: Any) -> str | None:
    if isinstance(record, dict) and isinstance(record.get("dynamodb"), dict):
        sequence = record["dynamodb"].get("SequenceNumber")
        if isinstance(sequence, str) and sequence.isdigit() and len(sequence) <= 40:
            return sequence
    return None
