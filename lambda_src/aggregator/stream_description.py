"""What DescribeStream says of a stream's shards: parents, first records, which are closed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from delivery import ShardRef
from described_shard import GONE_FACTS, ShardFacts
from telemetry import logger

if TYPE_CHECKING:
    from dependencies import Dependencies

DESCRIBE_PAGES = 100
"""DescribeStream pages (100 shards each) searched for a shard's first sequence number and parent, once per shard
and function instance. 1,000 pages made LocalStack's first invocations time out (its DescribeStream pages on past a
shard it lists under another id). A stream of more than 10,000 shards is not searched whole: a shard past them is
read from its trim horizon, its parent unknown, and says so in the log."""
UNLISTED_SECONDS = 900.0
"""A parent DescribeStream did not list is not searched for again (up to DESCRIBE_PAGES pages) before this long, per
function instance: it is read as an open shard meanwhile, as when DescribeStream refuses."""


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
                    ending_sequence=sequence_range.get("EndingSequenceNumber"),
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
                ending_sequence=sequence_range.get("EndingSequenceNumber"),
            )
            listed[described["ShardId"]] = deps.shards[described["ShardId"]] = facts
        start = description.get("LastEvaluatedShardId")
        if not start:
            return listed
        if len(listed) == known:
            return None  # a page that lists nothing new does not move on: the listing cannot be finished
    return None


def described_ending(deps: Dependencies, shard: ShardRef) -> str | None:
    """The shard's EndingSequenceNumber, or None: open, not listed, or DescribeStream refused (LimitExceededException:
    10 calls a second). None reads the shard as before (an open one's tip is a few empty pages), never not at all.
    Closed stays closed, so only a shard last seen open is described again; one not listed, after UNLISTED_SECONDS."""
    known = deps.shards.get(shard.shard_id)
    if known is not None and known.closed:
        return known.ending_sequence
    unlisted = deps.unlisted_at.get(shard.shard_id)
    if unlisted is not None and deps.clock() - unlisted < UNLISTED_SECONDS:
        return None
    deps.shards.pop(shard.shard_id, None)
    try:
        facts = shard_facts(deps, shard)
    except (ClientError, BotoCoreError) as error:
        logger.warning(
            "DescribeStream refused; the shard read as an open one", extra={"shard": shard, "error": str(error)}
        )
        facts = GONE_FACTS
    else:
        if not facts.listed:
            deps.unlisted_at[shard.shard_id] = deps.clock()
    if not facts.listed and known is not None:
        deps.shards[shard.shard_id] = known
    return facts.ending_sequence
