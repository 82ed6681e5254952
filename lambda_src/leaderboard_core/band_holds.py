"""What a repair's band holds of each download: written by the aggregator, settled by the repair's close.

While a band is open, the aggregator holds every record of the aggregate created at or before the repair's fence in
the aggregate's `RecountHeld` string set, instead of counting it; the close then brings each held download's part to
what the table says. Without retractions a download has one record, its INSERT: the set holds its id (`download_id`),
and the close adds each held download its recount did not count. With retractions a download may have several
records (edits, its deletion, a re-insert under its key), each leaving its part in the aggregate at a new value: the
set holds one entry per held record, `<id>|<shard tag>|<sequence>|<value after>`, and the close moves each held
download from what its recount counted to what its last held record leaves.

"Last" is the stream's order: "For each item that is modified in a DynamoDB table, the stream records appear in the
same sequence as the actual modifications to the item" (DynamoDB Developer Guide, *Change data capture for DynamoDB
Streams*): by sequence within a shard, and a parent shard's before its child's. Sequence numbers of different shards
are never compared: the shard tag says which shard a record came from, and the stream's lineage orders the shards.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

MAX_HELD = 4000
"""Download ids a band holds without retractions (about 23 bytes each: the item stays under about 92 KB while the band
is open, and every write of it costs that many write units); a song with more records by the fence is refused."""
MAX_HELD_RECORDS = 2000
"""Entries a band holds with retractions, one per held record: about 60 bytes each (a 21 to 40-digit sequence number,
a count's 0 or 1), at most about 92 with a summed value's 19 characters, so the item stays under about 120 KB (184 KB
at worst), well within DynamoDB's 400 KB."""
SEPARATOR = "|"
SHARD_TAG_LENGTH = 8
"""Base32 characters of the shard's hash: 40 bits; two shards of one stream sharing a tag are told apart by the
close, which then settles neither's downloads blindly (`shard_lineage`)."""

Value = int | Decimal


def shard_digest(stream_arn: str, shard_id: str) -> str:
    """The hash naming a shard of a stream: a watermark's attribute name is built of it, a held entry's tag too."""
    digest = hashlib.sha256(f"{stream_arn}\n{shard_id}".encode()).digest()
    return base64.b32encode(digest[:10]).decode().rstrip("=")


def shard_tag(stream_arn: str, shard_id: str) -> str:
    return shard_digest(stream_arn, shard_id)[:SHARD_TAG_LENGTH]


def value_text(value: Value) -> str:
    """As DynamoDB takes a number: no exponent, no trailing zeros."""
    number = Decimal(value)
    return str(int(number)) if number == number.to_integral_value() else format(number.normalize(), "f")


def held_entry(download_id: str, tag: str, sequence: str, value_after: Value) -> str:
    """One held record with retractions: the sequence number without its padding (its digits are what order it)."""
    return SEPARATOR.join((download_id, tag, sequence.lstrip("0") or "0", value_text(value_after)))


@dataclass(frozen=True)
class HeldRecord:
    download_id: str
    shard_tag: str | None
    """None: a bare download id, held without retractions (an INSERT, adding 1)."""
    sequence: int
    value_after: Value


def parse_held(entry: str) -> HeldRecord | None:
    """A held entry, or a bare download id (held without retractions); None for anything else."""
    parts = entry.split(SEPARATOR)
    if len(parts) == 1:
        return HeldRecord(entry, None, 0, 1) if entry else None
    if len(parts) != 4 or not all(parts[:3]) or not parts[2].isdigit():
        return None
    try:
        value = Decimal(parts[3])
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    return HeldRecord(parts[0], parts[1], int(parts[2]), int(value) if value == value.to_integral_value() else value)


def shard_lineage(stream_arn: str, shards: Iterable[tuple[str, str | None]]) -> dict[str, frozenset[str]]:
    """Each shard's tag -> the tags of all its ancestors, from the stream's shards (id, parent id) as DescribeStream
    lists them. A tag two listed shards share is left out: no record of it can be placed."""
    parents = dict(shards)
    tags: dict[str, list[str]] = {}
    for shard_id in parents:
        tags.setdefault(shard_tag(stream_arn, shard_id), []).append(shard_id)
    lineage: dict[str, frozenset[str]] = {}
    for tag, shard_ids in tags.items():
        if len(shard_ids) > 1:
            continue
        ancestors: set[str] = set()
        parent = parents.get(shard_ids[0])
        while parent is not None and parent not in ancestors:
            ancestors.add(parent)
            parent = parents.get(parent)
        lineage[tag] = frozenset(shard_tag(stream_arn, ancestor) for ancestor in ancestors)
    return lineage


@dataclass
class Settlement:
    change: Value = 0
    """What the close adds to the count (negative: takes back)."""
    unsettled: list[str] = field(default_factory=list)
    """Downloads whose last held record cannot be told (records of shards the lineage does not order, with different
    values), or entries that are not held records: nothing is added for them."""


def held_by_download(entries: Iterable[str]) -> tuple[dict[str, list[HeldRecord]], list[str]]:
    """The held records per download, and the entries that are none."""
    records: dict[str, list[HeldRecord]] = {}
    malformed: list[str] = []
    for entry in entries:
        record = parse_held(entry)
        if record is None:
            malformed.append(entry)
        else:
            records.setdefault(record.download_id, []).append(record)
    return records, malformed


def spans_shards(records: Mapping[str, list[HeldRecord]]) -> bool:
    """Whether a download's held records came from more than one shard: only then is the lineage needed."""
    return any(len({record.shard_tag for record in held}) > 1 for held in records.values())


def last_value(held: list[HeldRecord], lineage: Mapping[str, frozenset[str]]) -> Value | None:
    """What a download's last held record leaves; None when the records' shards do not say which is last."""
    tags = {record.shard_tag for record in held}
    latest = [
        tag
        for tag in tags
        if not any(tag is not None and tag in lineage.get(other or "", frozenset()) for other in tags - {tag})
    ]
    values = {max((r for r in held if r.shard_tag == tag), key=lambda r: r.sequence).value_after for tag in latest}
    return values.pop() if len(values) == 1 else None


def settle(
    records: Mapping[str, list[HeldRecord]],
    counted: Callable[[str], Value],
    lineage: Mapping[str, frozenset[str]],
) -> Settlement:
    """The close's change to the count: for each held download, what its last held record leaves less what the
    recount counted of it (`counted`: 0 where it counted none). Without retractions each held id adds 1 unless the
    recount counted it: the held downloads the recount missed."""
    settlement = Settlement()
    for download_id, held in records.items():
        value = last_value(held, lineage)
        if value is None:
            settlement.unsettled.append(download_id)
        else:
            settlement.change += value - counted(download_id)
    return settlement
