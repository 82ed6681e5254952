"""Turn DynamoDB Streams records into downloads to count, or into a reason why not.

Pure functions only: everything here is unit-tested without AWS.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

SEQUENCE_WIDTH = 40
"""DynamoDB stream sequence numbers have at most 40 digits; padding them makes string order numeric order."""

_DIGITS = re.compile(r"^[0-9]{1,40}$")


@dataclass(frozen=True)
class Schema:
    """Attribute names of the table; the guide's names are the defaults."""

    entity: str = "songID"
    sort_key: str = "SK"
    timestamp: str = "Timestamp"
    period: str = "Month"
    count: str = "DownloadCount"
    order: str = "LeaderboardOrder"


@dataclass(frozen=True)
class AggregateKey:
    entity_id: str
    period: str


@dataclass(frozen=True)
class Download:
    key: AggregateKey
    sequence: str
    """Zero-padded to SEQUENCE_WIDTH so that it compares correctly as a string."""
    raw_sequence: str
    """As delivered: what logs and failure messages name."""
    created: int | None = None
    """ApproximateCreationDateTime in whole epoch seconds, when the record carries it."""
    amount: int = 1
    """What the download adds to its aggregate."""


@dataclass(frozen=True)
class Rejected:
    """A record that looks like a download but cannot be counted; it must be reported, never dropped silently."""

    reason: str
    raw_sequence: str | None
    record: dict[str, Any]


@dataclass(frozen=True)
class Ignored:
    """Not a new download (an aggregate write, a MODIFY, a REMOVE); the stream filter normally drops these."""

    reason: str
    raw_sequence: str


Parsed = Download | Rejected | Ignored


def pad_sequence(raw: str) -> str:
    return raw.zfill(SEQUENCE_WIDTH)


def month_of(timestamp: str) -> str:
    """Return the UTC month `YYYY-MM` of an ISO 8601 timestamp.

    The guide slices the first seven characters, which files a download at
    2018-01-31T23:30:00-05:00 under January although it happened in February UTC.
    A timestamp without an offset is taken as UTC, as the data model states.
    """
    text = timestamp.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return f"{moment.year:04d}-{moment.month:02d}"


def creation_second(stream: dict[str, Any]) -> int | None:
    """ApproximateCreationDateTime (epoch seconds, possibly fractional) floored, or None if absent or not a number."""
    value = stream.get("ApproximateCreationDateTime")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return math.floor(value)


def _string_attribute(image: dict[str, Any], name: str) -> str | None:
    value = image.get(name)
    if isinstance(value, dict) and isinstance(value.get("S"), str) and value["S"] != "":
        return value["S"]
    return None


def parse_record(record: dict[str, Any], schema: Schema) -> Parsed:
    """Classify one stream record; never raises on bad input."""
    if not isinstance(record, dict):
        return Rejected("record is not an object", None, {"record": repr(record)[:1000]})
    stream = record.get("dynamodb")
    if not isinstance(stream, dict):
        return Rejected("record has no dynamodb section", None, record)
    raw_sequence = stream.get("SequenceNumber")
    if not isinstance(raw_sequence, str) or not _DIGITS.match(raw_sequence):
        return Rejected("SequenceNumber is missing or not 1-40 digits", None, record)
    if record.get("eventName") != "INSERT":
        return Ignored(f"eventName {record.get('eventName')!r} is not a new download", raw_sequence)
    image = stream.get("NewImage")
    if not isinstance(image, dict):
        return Rejected("INSERT without NewImage (stream view type must include new images)", raw_sequence, record)
    if schema.period in image:
        return Ignored("aggregate item", raw_sequence)
    entity_id = _string_attribute(image, schema.entity)
    if entity_id is None:
        return Rejected(f"{schema.entity} is missing or not a non-empty string", raw_sequence, record)
    timestamp = _string_attribute(image, schema.timestamp)
    if timestamp is None:
        return Rejected(f"{schema.timestamp} is missing or not a non-empty string", raw_sequence, record)
    try:
        period = month_of(timestamp)
    except ValueError:
        return Rejected(f"{schema.timestamp} {timestamp[:64]!r} is not an ISO 8601 timestamp", raw_sequence, record)
    return Download(AggregateKey(entity_id, period), pad_sequence(raw_sequence), raw_sequence, creation_second(stream))


def coalesce(downloads: list[Download]) -> dict[AggregateKey, list[Download]]:
    """Group downloads by aggregate, in stream order and each record once: one write per aggregate serves the batch."""
    groups: dict[AggregateKey, dict[str, Download]] = {}
    for download in downloads:
        groups.setdefault(download.key, {})[download.sequence] = download
    return {key: [group[sequence] for sequence in sorted(group)] for key, group in groups.items()}
