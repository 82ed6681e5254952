"""The table's attribute names, as the module's attribute-name variables set them (the guide's by default)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class AttributeNames:
    entity: str = "songID"
    sort_key: str = "SK"
    timestamp: str = "Timestamp"
    period: str = "Month"
    """Only aggregates carry it: the sparse index's partition key."""
    count: str = "DownloadCount"
    order: str = "LeaderboardOrder"
    """The sparse index's sort key: the count and a tie-breaker (index_layout.py)."""


def carries_aggregate_attributes(image: Mapping[str, Any], names: AttributeNames, retractions: bool) -> bool:
    """An aggregate's item: it carries the period; with retractions, one whose count came back to 0 left the index and
    carries only its count. Downloads carry neither."""
    return names.period in image or (retractions and names.count in image)


MAX_ENTITY_BYTES = 2048
"""DynamoDB: a partition key's "maximum length is 2048 bytes" (Developer Guide, *Constraints*); the entity id is the
aggregates' partition key. In the guide's table it is the source's own partition key and fits; in a single-table
design it is any attribute, and a longer one makes a download uncountable."""


def fits_partition_key(entity: str) -> bool:
    """Whether an entity id can key an aggregate: a download whose entity cannot is rejected, counted nowhere."""
    return len(entity.encode()) <= MAX_ENTITY_BYTES


GUIDE_NAMES = AttributeNames()
NAME_VARIABLES = {
    "entity": "ENTITY_ATTRIBUTE",
    "sort_key": "SORT_KEY_ATTRIBUTE",
    "timestamp": "TIMESTAMP_ATTRIBUTE",
    "period": "PERIOD_ATTRIBUTE",
    "count": "COUNT_ATTRIBUTE",
    "order": "ORDER_ATTRIBUTE",
}
"""AttributeNames field -> the functions' environment variable the module sets it from (terraform/lambda.tf)."""
COUNT_FIELD = "downloadCount"
"""The field of a query answer holding a count (or sum): the query contract's name, whatever the count attribute's."""


def names_from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The attribute names a function's environment sets, the guide's where it sets none."""
    return {
        field.name: environ.get(NAME_VARIABLES[field.name], getattr(GUIDE_NAMES, field.name))
        for field in fields(AttributeNames)
    }
