"""Turn DynamoDB Streams records into downloads to count, or into a reason why not.

Pure functions only: everything here is unit-tested without AWS.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from leaderboard_core.amounts import amount_of
from leaderboard_core.attributes import (
    MAX_ENTITY_BYTES,
    AttributeNames,
    carries_aggregate_attributes,
    fits_partition_key,
)
from leaderboard_core.bookkeeping import pad_sequence
from leaderboard_core.buckets import (
    MAX_SORT_KEY_BYTES,
    UTC_CALENDAR,
    Calendar,
    MomentOutOfRange,
    fits_sort_key,
    utc_moment,
)
from leaderboard_core.index_layout import ENTITY_TIE_BREAK, MAX_DECIMALS, instant_of
from leaderboard_core.source_items import DownloadMarker, download_identity, expired_by_ttl

_DIGITS = re.compile(r"^[0-9]{1,40}$")


@dataclass(frozen=True)
class Schema(AttributeNames):
    """Attribute names of the table and what aggregates are kept; the guide's names and months are the defaults."""

    periods: tuple[str, ...] = ("month",)
    calendar: Calendar = UTC_CALENDAR
    """The deployment's time zone and seasons (LEADERBOARD_TIME_ZONE, LEADERBOARD_SEASON_*): where a moment counts."""
    category: str | None = None
    """An attribute of the raw record naming its category: a board per category per period, beside the overall one."""
    amount: str | None = None
    """A number attribute of the raw record added instead of 1 (revenue, minutes played)."""
    aggregates_beside: bool = True
    """Aggregates share the downloads' table (the guide's layout), so their writes come back on its stream."""
    marker: DownloadMarker | None = None
    """Which items of a shared table are downloads (source_item_filter); None: every item."""
    retractions: bool = False
    """Deletions and edits of downloads are followed (MODIFY and REMOVE move counts); else only INSERTs count."""
    tie_break: str = ENTITY_TIE_BREAK
    """How equal values list (the module's `leaderboard_tie_break`): by entity id, or `first_reached` first."""

    def is_aggregate(self, image: dict[str, Any]) -> bool:
        """An aggregate's image, where aggregates share the table (attributes.carries_aggregate_attributes)."""
        return self.aggregates_beside and carries_aggregate_attributes(image, self, self.retractions)


@dataclass(frozen=True)
class AggregateKey:
    entity_id: str
    board: str
    """The board id: `2018-01`, or `2018-01@rock` for a category's board."""


@dataclass(frozen=True)
class Rejected:
    """A record that looks like a download but cannot be counted; it must be reported, never dropped silently."""

    reason: str
    raw_sequence: str | None
    record: dict[str, Any]


@dataclass(frozen=True)
class Change:
    """What one stream record does to one aggregate: adds `amount` (negative: takes it back)."""

    key: AggregateKey
    amount: int | Decimal
    value_after: int | Decimal
    """The download's part in the aggregate once the record applies (0: no longer counted there)."""


@dataclass(frozen=True)
class Download:
    key: AggregateKey
    sequence: str
    """Zero-padded to SEQUENCE_WIDTH so that it compares correctly as a string."""
    raw_sequence: str
    """As delivered: what logs and failure messages name."""
    created: int | None = None
    """ApproximateCreationDateTime in whole epoch seconds, when the record carries it."""
    amount: int | Decimal = 1
    """What the download adds to each of its aggregates."""
    also: tuple[AggregateKey, ...] = ()
    """Its other aggregates (other periods, its category's boards): `key` and these together."""
    download_id: str | None = None
    """Which download of its song this is (`download_identity` of its primary key): what a repair's band holds."""
    item_key: dict[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)
    """The item's primary key (the record's Keys): what a claim names while a backfill runs."""
    moves: tuple[Change, ...] | None = None
    """A MODIFY's or REMOVE's changes (retractions): out of the old image's boards, into the new one's; none for an
    expiry (ledger mode, parse_expiry). None: an INSERT, which adds `amount` to each of `keys`."""
    rejection: Rejected | None = None
    """A MODIFY whose new image cannot be counted: its old contribution is taken back, and this is reported."""
    event_id: str | None = field(default=None, compare=False, hash=False, repr=False)
    """The record's eventID ("A globally unique identifier for the event that was recorded in this stream record"):
    what a claim names its first write by, so that a key written again is told from a retry of the same record."""
    expiry: bool = False
    """An expiry by TTL (ledger mode, parse_expiry): its download stays counted as its old image, `image_after`."""
    image_after: tuple[Change, ...] | None = None
    """What the record's new image counts, board by board (ledger mode's new(r), moved from the ledger's Base when the
    record is the first the stream applied): empty for a REMOVE or an image that counts nothing. None: an INSERT,
    whose new image is what `changes` adds."""
    instant: int | None = None
    """An INSERT's Timestamp as a UTC instant (index_layout.instant_of): the `first_reached` tie-break's fact."""

    @property
    def counted_after(self) -> tuple[Change, ...]:
        return self.image_after if self.image_after is not None else self.changes

    @property
    def keys(self) -> tuple[AggregateKey, ...]:
        return tuple(change.key for change in self.changes)

    @property
    def changes(self) -> tuple[Change, ...]:
        if self.moves is not None:
            return self.moves
        return tuple(Change(key, self.amount, self.amount) for key in (self.key, *self.also))


@dataclass(frozen=True)
class Ignored:
    """Nothing to count: an aggregate write, an item that is not a download, a change that moves no count, an expiry
    by TTL (and without retractions any MODIFY or REMOVE); the stream filter drops most of these."""

    reason: str
    raw_sequence: str


Parsed = Download | Rejected | Ignored


PER_SECOND = {"MILLISECOND": 1_000, "MICROSECOND": 1_000_000}
"""What ApproximateCreationDateTimePrecision (Kinesis Data Streams for DynamoDB's setting) may say a creation time
counts in, per second."""
LATEST_PLAUSIBLE_SECOND = 10**11
"""Epoch seconds past the year 5000: a creation time that large counts in smaller units than documented."""


def creation_second(stream: dict[str, Any]) -> int | None:
    """ApproximateCreationDateTime (epoch seconds, possibly fractional, or a datetime as a client's GetRecords parses
    it) floored, or None if absent or not a number. DynamoDB Streams documents seconds ("rounded down to the closest
    second"); a record that says it counts in milliseconds or microseconds is read so, and one in units it does not
    name, or too large to be seconds, is unknown (None), never taken for a time ~1000 times later."""
    value = stream.get("ApproximateCreationDateTime")
    if isinstance(value, datetime):
        return math.floor(value.timestamp())
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    precision = stream.get("ApproximateCreationDateTimePrecision")
    if precision is not None:
        if precision not in PER_SECOND:
            return None
        value = value / PER_SECOND[precision]
    if value >= LATEST_PLAUSIBLE_SECOND:
        return None
    return math.floor(value)


def _string_attribute(image: dict[str, Any], name: str) -> str | None:
    value = image.get(name)
    if isinstance(value, dict) and isinstance(value.get("S"), str) and value["S"] != "":
        return value["S"]
    return None


def _event_id(record: dict[str, Any]) -> str | None:
    event_id = record.get("eventID")
    return event_id if isinstance(event_id, str) and event_id else None


def _key_of(stream: dict[str, Any]) -> dict[str, Any] | None:
    keys = stream.get("Keys")
    return keys if isinstance(keys, dict) and keys else None


@dataclass(frozen=True)
class _Counted:
    """What one image of a download contributes: its amount to each of its boards."""

    keys: tuple[AggregateKey, ...]
    amount: int | Decimal
    instant: int | None = None
    """Its Timestamp's UTC instant (index_layout.instant_of): what `first_reached` ranks ties by."""


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
    event = record.get("eventName")
    if event in ("MODIFY", "REMOVE") and schema.retractions:
        return _change_of(record, stream, raw_sequence, schema, event)
    if event != "INSERT":
        return Ignored(f"eventName {event!r} is not a new download", raw_sequence)
    image = stream.get("NewImage")
    if not isinstance(image, dict):
        return Rejected("INSERT without NewImage (stream view type must include new images)", raw_sequence, record)
    counted = _counted(image, schema, raw_sequence, record)
    if not isinstance(counted, _Counted):
        return counted
    if schema.retractions and schema.is_aggregate(image):
        # Its MODIFYs and REMOVEs would be taken for an aggregate's (out of the index, known by its count): never
        # taken back, so it is never counted either.
        reason = f"carries {schema.count}, the aggregates' count attribute: downloads must not (retractions)"
        return Rejected(reason, raw_sequence, record)
    return Download(
        counted.keys[0],
        pad_sequence(raw_sequence),
        raw_sequence,
        creation_second(stream),
        counted.amount,
        counted.keys[1:],
        download_identity(item_key, schema.entity) if (item_key := _key_of(stream)) else None,
        item_key,
        event_id=_event_id(record),
        instant=counted.instant,
    )


def parse_expiry(record: dict[str, Any], schema: Schema) -> Download | None:
    """Ledger mode: an expiry by TTL (S12) of a counted download, as a record of its download that moves nothing
    itself but, placed first, freezes its old image as what the download counts (the ledger's rule). None: any other
    record, or an expired image that counts nothing."""
    stream = record.get("dynamodb")
    if record.get("eventName") != "REMOVE" or not expired_by_ttl(record) or not isinstance(stream, dict):
        return None
    old = stream.get("OldImage")
    raw_sequence = stream.get("SequenceNumber")
    if not isinstance(old, dict) or not isinstance(raw_sequence, str) or not _DIGITS.match(raw_sequence):
        return None
    if schema.is_aggregate(old):
        return None
    before = _counted(old, schema, raw_sequence, record)
    if not isinstance(before, _Counted):
        return None
    item_key = _key_of(stream)
    return Download(
        before.keys[0],
        pad_sequence(raw_sequence),
        raw_sequence,
        creation_second(stream),
        before.amount,
        before.keys[1:],
        download_identity(item_key, schema.entity) if item_key else None,
        item_key,
        moves=(),
        event_id=_event_id(record),
        expiry=True,
        image_after=tuple(Change(key, before.amount, before.amount) for key in before.keys),
    )


def _change_of(record: dict[str, Any], stream: dict[str, Any], raw_sequence: str, schema: Schema, event: str) -> Parsed:
    """A MODIFY or REMOVE, retractions on: the old image's contribution taken back, the new image's added, net per
    aggregate. An old image that was never counted (not a download, malformed and reported then) takes nothing back."""
    if expired_by_ttl(record):
        return Ignored("expired by TTL: an expiry never changes a count", raw_sequence)
    old = stream.get("OldImage")
    if not isinstance(old, dict):
        reason = f"{event} without OldImage (retractions need the stream view type NEW_AND_OLD_IMAGES)"
        return Rejected(reason, raw_sequence, record)
    new: dict[str, Any] | None = None
    if event == "MODIFY":
        new = stream.get("NewImage")
        if not isinstance(new, dict):
            return Rejected(
                "MODIFY without NewImage (stream view type must be NEW_AND_OLD_IMAGES)", raw_sequence, record
            )
    if schema.is_aggregate(old) or (new is not None and schema.is_aggregate(new)):
        return Ignored("aggregate item", raw_sequence)
    before = _counted(old, schema, raw_sequence, record)
    after = _counted(new, schema, raw_sequence, record) if new is not None else None
    parts: dict[AggregateKey, list[int | Decimal]] = {}
    if isinstance(before, _Counted):
        for key in before.keys:
            parts.setdefault(key, [0, 0])[0] = before.amount
    if isinstance(after, _Counted):
        for key in after.keys:
            parts.setdefault(key, [0, 0])[1] = after.amount
    moves = tuple(
        Change(key, new_part - old_part, new_part)
        for key, (old_part, new_part) in parts.items()
        if new_part != old_part
    )
    rejection = after if isinstance(after, Rejected) else None
    if not moves:
        return rejection or Ignored(f"a {event} that moves no count", raw_sequence)
    item_key = _key_of(stream)
    image_after = (
        tuple(Change(key, after.amount, after.amount) for key in after.keys) if isinstance(after, _Counted) else ()
    )
    return Download(
        moves[0].key,
        pad_sequence(raw_sequence),
        raw_sequence,
        creation_second(stream),
        moves[0].amount,
        tuple(move.key for move in moves[1:]),
        download_identity(item_key, schema.entity) if item_key else None,
        item_key,
        moves=moves,
        rejection=rejection,
        event_id=_event_id(record),
        image_after=image_after,
    )


def _counted(
    image: dict[str, Any], schema: Schema, raw_sequence: str, record: dict[str, Any]
) -> _Counted | Rejected | Ignored:
    """The boards one image of an item counts in and its amount; Ignored if it is no download, Rejected if it is one
    that cannot be counted."""
    if schema.aggregates_beside and schema.period in image:
        return Ignored("aggregate item", raw_sequence)
    if schema.marker is not None and not schema.marker.marks(image):
        return Ignored(f"not a download: its {schema.marker.attribute} is not {schema.marker.value!r}", raw_sequence)
    entity_id = _string_attribute(image, schema.entity)
    if entity_id is None:
        return Rejected(f"{schema.entity} is missing or not a non-empty string", raw_sequence, record)
    if not fits_partition_key(entity_id):
        reason = f"{schema.entity} is longer than DynamoDB's {MAX_ENTITY_BYTES}-byte partition key, the aggregates' key"
        return Rejected(reason, raw_sequence, record)
    timestamp = _string_attribute(image, schema.timestamp)
    if timestamp is None:
        return Rejected(f"{schema.timestamp} is missing or not a non-empty string", raw_sequence, record)
    try:
        moment = utc_moment(timestamp)
        schema.calendar.wall(moment)
    except MomentOutOfRange as error:
        return Rejected(f"{schema.timestamp} {timestamp[:64]!r} {error}", raw_sequence, record)
    except ValueError:
        return Rejected(f"{schema.timestamp} {timestamp[:64]!r} is not an ISO 8601 timestamp", raw_sequence, record)
    amount: int | Decimal = 1
    if schema.amount is not None:
        summed = amount_of(image.get(schema.amount))
        if summed is None:
            reason = f"{schema.amount} is missing, not a number, or has more than {MAX_DECIMALS} decimals or 12 digits"
            return Rejected(reason, raw_sequence, record)
        amount = summed
    category = None
    if schema.category is not None and schema.category in image:
        category = _string_attribute(image, schema.category)
        if category is None:
            return Rejected(f"{schema.category} is present but not a non-empty string", raw_sequence, record)
    boards = schema.calendar.download_boards(moment, schema.periods, category)
    if not boards:
        return Ignored(
            f"{schema.timestamp} {timestamp[:64]!r} is before the first season: it counts in no board", raw_sequence
        )
    if category is not None and not fits_sort_key(boards):
        reason = f"{schema.category} is too long: its board id passes DynamoDB's {MAX_SORT_KEY_BYTES}-byte sort key"
        return Rejected(reason, raw_sequence, record)
    return _Counted(tuple(AggregateKey(entity_id, board) for board in boards), amount, instant_of(moment))


def coalesce(downloads: list[Download]) -> dict[AggregateKey, list[Download]]:
    """Group downloads by aggregate, in stream order and each record once: one write per aggregate serves the batch."""
    groups: dict[AggregateKey, dict[str, Download]] = {}
    for download in downloads:
        groups.setdefault(download.key, {})[download.sequence] = download
    return {key: [group[sequence] for sequence in sorted(group)] for key, group in groups.items()}
