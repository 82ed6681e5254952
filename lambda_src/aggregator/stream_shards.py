"""One reader per shard: what DescribeStream says of the stream's shards, kept where a later invocation finds it.

A shard's parent is named by the shard itself ("The shard ID of the current shard's parent.", *Shard*), and only
while DescribeStream lists it (S8): each parent met is written to the progress table (`one-reader-parent|<shard>`),
so that a record can be placed by lineage after its shard's listing is gone. The stream's creation time bounds the
age of every record of a lineage nothing was delivered from (the trimmed check, delivery_notes.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from leaderboard_core.bookkeeping import SHARD_KEY

PARENT_PREFIX = "one-reader-parent|"
"""`one-reader-parent|<shard id>`: the shard's ParentShardId as DescribeStream gave it ("" for none)."""
ANCESTRY_LIMIT = 1000
DESCRIBE_PAGES = 1000


@dataclass
class Listing:
    """One DescribeStream, over all its pages."""

    parents: dict[str, str] = field(default_factory=dict)
    """Shard id -> its parent ("" for none)."""
    open: set[str] = field(default_factory=set)
    """Shards with no EndingSequenceNumber: records may still be written to them."""
    created: float | None = None
    """When the stream was created (CreationRequestDateTime), in epoch seconds."""


class StreamShards:
    """Each shard's parent, read once from DescribeStream and kept for good in the progress table."""

    def __init__(self, client: Any, progress_table: str, streams: Any) -> None:
        self.client = client
        self.progress_table = progress_table
        self.streams = streams
        self._parents: dict[str, str] = {}
        self._created: dict[str, float] = {}

    def ancestors(self, stream_arn: str, shard: str) -> list[str]:
        """The shard's ancestors, nearest first, as far as lineage is known (at most ANCESTRY_LIMIT)."""
        found: list[str] = []
        parent = self.parent_of(stream_arn, shard)
        while parent and parent not in found and len(found) < ANCESTRY_LIMIT:
            found.append(parent)
            parent = self.parent_of(stream_arn, parent)
        return found

    def parent_of(self, stream_arn: str, shard: str) -> str | None:
        """The shard's parent ("" for none); None while unknown (a shard deleted before any invocation listed it)."""
        if shard in self._parents:
            return self._parents[shard]
        item = self.client.get_item(TableName=self.progress_table, Key={SHARD_KEY: {"S": PARENT_PREFIX + shard}})
        if "Item" in item:
            self._parents[shard] = str(item["Item"]["Parent"]["S"])
            return self._parents[shard]
        listed = self.describe(stream_arn)
        return listed.parents.get(shard)

    def describe(self, stream_arn: str) -> Listing:
        """Every shard DescribeStream lists, over all its pages (S8); each parent not yet kept is written down."""
        listing = Listing()
        start: str | None = None
        for _ in range(DESCRIBE_PAGES):
            parameters: dict[str, Any] = {"StreamArn": stream_arn, "Limit": 100}
            if start is not None:
                parameters["ExclusiveStartShardId"] = start
            description = self.streams.describe_stream(**parameters)["StreamDescription"]
            listing.created = listing.created or _epoch(description.get("CreationRequestDateTime"))
            for shard in description.get("Shards", []):
                listing.parents[shard["ShardId"]] = shard.get("ParentShardId", "")
                if "EndingSequenceNumber" not in shard.get("SequenceNumberRange", {}):
                    listing.open.add(shard["ShardId"])
            start = description.get("LastEvaluatedShardId")
            if not start:
                self._keep(listing)
                if listing.created is not None:
                    self._created[stream_arn] = listing.created
                return listing
        raise RuntimeError("DescribeStream did not end")

    def created(self, stream_arn: str) -> float:
        """When the stream was created: from DescribeStream, else from its label (an ISO 8601 timestamp)."""
        if stream_arn not in self._created:
            listed = self.describe(stream_arn).created
            self._created[stream_arn] = listed if listed is not None else _label_time(stream_arn)
        return self._created[stream_arn]

    def _keep(self, listing: Listing) -> None:
        for shard_id, parent in listing.parents.items():
            if self._parents.get(shard_id) == parent:
                continue
            self.client.put_item(
                TableName=self.progress_table,
                Item={SHARD_KEY: {"S": PARENT_PREFIX + shard_id}, "Parent": {"S": parent}},
            )
            self._parents[shard_id] = parent


def _epoch(value: Any) -> float | None:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float):
        return float(value)
    return None


def _label_time(stream_arn: str) -> float:
    """The stream label's time ("A timestamp, in ISO 8601 format, for this stream", *DescribeStream*); 0 if unreadable:
    the stream is then taken for as old as can be, and a first delivery's check reports what it cannot rule out."""
    label = stream_arn.rsplit("/stream/", 1)[-1]
    try:
        return datetime.fromisoformat(label if label.endswith("Z") or "+" in label else label + "+00:00").timestamp()
    except ValueError:
        return 0.0
