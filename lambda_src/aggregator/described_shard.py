"""What DescribeStream says of one shard, as the aggregator keeps it per function instance."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ShardFacts:
    """What DescribeStream says of a shard: its parent, and the sequence number of its first record."""

    parent_shard_id: str | None
    first_sequence: str | None
    listed: bool = True
    """False: DescribeStream did not list the shard."""
    described_whole: bool = True
    """With `listed` False: every page of the description was read (the shard is gone), or the search gave up."""
    ending_sequence: str | None = None
    """DescribeStream's EndingSequenceNumber, "the last sequence number for the stream records contained within a
    shard": present, the shard is closed ("can no longer receive more data")."""

    @property
    def closed(self) -> bool:
        return self.ending_sequence is not None


GONE_FACTS = ShardFacts(None, None, listed=False, described_whole=True)
