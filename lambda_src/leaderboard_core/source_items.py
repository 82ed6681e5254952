"""Which items of the source table are downloads, and what tells one download from another.

The stream mapping's filter (terraform, source_item_filter), the aggregator and the operator tools' recounts apply
the same rule; a repair's band and its recount name a download by the same identity.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from leaderboard_core.bookkeeping import download_id

ITEM_ATTRIBUTE_VARIABLE = "SOURCE_ITEM_ATTRIBUTE"
ITEM_VALUE_VARIABLE = "SOURCE_ITEM_VALUE"
AGGREGATES_TABLE_VARIABLE = "AGGREGATES_TABLE_NAME"
RETRACTIONS_VARIABLE = "RETRACTIONS"
"""`true`: deletions and edits of downloads are followed (the module's `retractions`)."""
TTL_SERVICE = ("Service", "dynamodb.amazonaws.com")
"""The type and principal of a stream record's userIdentity when Time to Live deleted the item (DynamoDB Streams API,
*Identity*: "For Time To Live, the type is "Service"", "the principalId is "dynamodb.amazonaws.com""): no retraction."""


@dataclass(frozen=True)
class DownloadMarker:
    """source_item_filter: downloads share the table with other item types, and carry this string attribute value."""

    attribute: str
    value: str

    def marks(self, item: Mapping[str, Any]) -> bool:
        """As the mapping's filter `{attribute: {"S": [value]}}` matches a new image: a string equal to the value."""
        return item.get(self.attribute) == {"S": self.value}

    def scan_filter(self) -> tuple[str, dict[str, str], dict[str, dict[str, str]]]:
        """The same rule as a FilterExpression, its attribute names and values."""
        return "#marker = :marker", {"#marker": self.attribute}, {":marker": {"S": self.value}}


def marker_from_environment(environ: Mapping[str, str]) -> DownloadMarker | None:
    attribute = environ.get(ITEM_ATTRIBUTE_VARIABLE) or None
    return DownloadMarker(attribute, environ.get(ITEM_VALUE_VARIABLE, "")) if attribute else None


def _plain(value: Any) -> Any:
    """An attribute value as JSON can hold it: binary (bytes from a client, base64 text in a Lambda event) as base64."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, Mapping):
        return {name: _plain(inner) for name, inner in value.items()}
    return value


def download_identity(key: Mapping[str, Any], entity: str) -> str:
    """A download's identity within its entity: its primary key less the entity attribute.

    In the guide's table (songID, SK) that is the sort key's value, so `download_id(SK)`; in a single-table design
    whose key does not hold the entity, every key attribute, in a canonical JSON form. `key` is a stream record's
    `Keys`, or a scanned item's key attributes.
    """
    rest = {name: value for name, value in key.items() if name != entity}
    if len(rest) == 1:
        (value,) = rest.values()
        if isinstance(value, Mapping) and isinstance(value.get("S"), str):
            return download_id(value["S"])
    return download_id(json.dumps(_plain(rest), sort_keys=True, separators=(",", ":")))


def expired_by_ttl(record: Mapping[str, Any]) -> bool:
    """A REMOVE that Time to Live made. A Lambda event spells the identity `type`/`principalId`; GetRecords, which the
    aggregator and the tools read the shard with, `Type`/`PrincipalId` (the API's Identity shape): both are read."""
    identity = record.get("userIdentity")
    if not isinstance(identity, Mapping):
        return False
    kind = identity.get("type", identity.get("Type"))
    principal = identity.get("principalId", identity.get("PrincipalId"))
    return record.get("eventName") == "REMOVE" and (kind, principal) == TTL_SERVICE
