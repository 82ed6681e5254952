"""What DescribeStream says of a stream's shards: parents, first records, which are closed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from delivery import ShardRef

if TYPE_CHECKING:
    from dependencies import Dependencies

DESCRIBE_PAGES = 100
"""DescribeStream pages (100 shards each) searched for a shard's first sequence number and parent, once per shard
and function instance. 1,000 pages made LocalStack's first invocations time out (its DescribeStream pages on past a
shard it lists under another id). A stream of more than 10,000 shards is not searched whole: a shard past them is
read from its trim horizon, its parent unknown, and says so in the log."""


@dataclass(frozen=True)
class ShardFacts:
    """What DescribeStream says of a shard: its parent, and the sequence number of its first record."""

    parent_shard_id: str | None
    first_sequence: str | None
    listed: bool = True
    """False: DescribeStream did not list the shard."""
    described_whole: bool = True
    """With `listed` False: every page of the description was read (the shard is gone), or the search gave up."""
    closed: bool = False
    """DescribeStream gave the shard an EndingSequenceNumber: it takes no more records."""


GONE_FACTS = ShardFacts(None, None, listed=False, described_whole=True)


def shard_facts(deps: Dependencies, shard: ShardRef) -> ShardFacts:
    """From DescribeStream (paginated), once per shard and instance: shards never change parents or first records.

    A shard first seen is read from its first sequence number, not from the trim horizon, so that
    records trimmed before it was ever read are reported instead of silently skipped.
    """
    described_whole = True
    if shard.shard_id not in deps.shards:
        described_whole = False
        start: str | None = None
        for _ in range(DESCRIBE_PAGES):
            parameters: dict[str, Any] = {"StreamArn": shard.stream_arn}
            if start:
                parameters["ExclusiveStartShardId"] = start
            description = deps.streams.describe_stream(**parameters)["StreamDescription"]
            for described in description.get("Shards", []):
                sequence_range = described.get("SequenceNumberRange", {})
                deps.shards[described["ShardId"]] = ShardFacts(
                    described.get("ParentShardId"),
                    sequence_range.get("StartingSequenceNumber"),
                    closed="EndingSequenceNumber" in sequence_range,
                )
            start = description.get("LastEvaluatedShardId")
            if shard.shard_id in deps.shards:
                break
            if not start:
                described_whole = True
                break
    facts = deps.shards.get(shard.shard_id)
    if facts is None:
        return ShardFacts(None, None, listed=False, described_whole=described_whole)
    return facts


def listed_shards(deps: Dependencies, stream_arn: str) -> dict[str, ShardFacts] | None:
    """Every shard DescribeStream lists now, or None when its pages did not end within DESCRIBE_PAGES."""
    listed: dict[str, ShardFacts] = {}
    start: str | None = None
    for _ in range(DESCRIBE_PAGES):
        parameters: dict[str, Any] = {"StreamArn": stream_arn}
        if start:
            parameters["ExclusiveStartShardId"] = start
        description = deps.streams.describe_stream(**parameters)["StreamDescription"]
        known = len(listed)
        for described in description.get("Shards", []):
            sequence_range = described.get("SequenceNumberRange", {})
            facts = ShardFacts(
                described.get("ParentShardId"),
                sequence_range.get("StartingSequenceNumber"),
                closed="EndingSequenceNumber" in sequence_range,
            )
            listed[described["ShardId"]] = deps.shards[described["ShardId"]] = facts
        start = description.get("LastEvaluatedShardId")
        if not start:
            return listed
        if len(listed) == known:
            return None  # a page that lists nothing new does not move on: the listing cannot be finished
    return None


def is_closed(deps: Dependencies, shard: ShardRef) -> bool:
    """Whether DescribeStream gives the shard an EndingSequenceNumber ("that shard is closed and can no longer receive
    more data"). Closed stays closed, so only a shard last seen open is described again."""
    known = deps.shards.get(shard.shard_id)
    if known is not None and known.closed:
        return True
    deps.shards.pop(shard.shard_id, None)
    facts = shard_facts(deps, shard)
    if not facts.listed and known is not None:
        deps.shards[shard.shard_id] = known
    return facts.closed
