"""The progress table: per stream shard, the checkpoint through which every download is counted.

Invariant: every download record of a shard with a sequence number at or below its `Checkpoint`
is counted in its aggregate. The aggregator reads each shard from here, so that what the mapping
re-delivers out of order, merges, splits or gives up on cannot change what is counted. The
checkpoint only ever rises (a conditional write), so a stale read of it is a safe lower bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from delivery import ShardRef

CHECKPOINT = "Checkpoint"
SHARD_ENDED = "ShardEnded"
PARENT_SHARD = "ParentShardId"
CACHE_SECONDS = 60.0


@dataclass(frozen=True)
class Progress:
    checkpoint: str | None = None
    """40-digit padded sequence number; None when nothing of the shard is counted yet."""
    checkpoint_created: int | None = None
    ended: bool = False
    parent_shard_id: str | None = None
    exists: bool = False


def shard_key(shard: ShardRef) -> str:
    return f"{shard.stream_arn}|{shard.shard_id}"


class ProgressStore:
    def __init__(self, client: Any, table_name: str, clock: Callable[[], float] = time.time) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock
        self._cache: dict[str, tuple[float, Progress]] = {}

    @property
    def table_name(self) -> str:
        return self._table

    def key(self, shard: ShardRef) -> dict[str, Any]:
        return {"ShardKey": {"S": shard_key(shard)}}

    def read(self, shard: ShardRef) -> Progress:
        """A strongly consistent read: where this invocation starts reading."""
        item = self._client.get_item(TableName=self._table, Key=self.key(shard), ConsistentRead=True).get("Item")
        progress = _progress_of(item)
        self._cache[shard_key(shard)] = (self._clock(), progress)
        return progress

    def lower_bound(self, shard: ShardRef) -> Progress:
        """A recent read, possibly stale: the checkpoint only rises, so it is at most the true one."""
        cached = self._cache.get(shard_key(shard))
        if cached is not None and (cached[1].ended or self._clock() - cached[0] < CACHE_SECONDS):
            return cached[1]
        item = self._client.get_item(TableName=self._table, Key=self.key(shard)).get("Item")
        progress = _progress_of(item)
        self._cache[shard_key(shard)] = (self._clock(), progress)
        return progress

    def advance(
        self,
        shard: ShardRef,
        checkpoint: str,
        created: int | None,
        ended: bool,
        parent_shard_id: str | None = None,
    ) -> bool:
        """Raise the checkpoint (never lower it); False when another reader had already passed it."""
        names = {"#checkpoint": CHECKPOINT}
        values: dict[str, Any] = {
            ":checkpoint": {"S": checkpoint},
            ":stream": {"S": shard.stream_arn},
            ":shard": {"S": shard.shard_id},
            ":now": {"N": str(int(self._clock()))},
        }
        assignments = ["#checkpoint = :checkpoint", "StreamArn = :stream", "ShardId = :shard", "UpdatedAt = :now"]
        if created is not None:
            assignments.append("CheckpointCreated = :created")
            values[":created"] = {"N": str(created)}
        if ended:
            names["#ended"] = SHARD_ENDED
            values[":ended"] = {"BOOL": True}
            assignments.append("#ended = :ended")
        if parent_shard_id:
            names["#parent"] = PARENT_SHARD
            values[":parent"] = {"S": parent_shard_id}
            assignments.append("#parent = :parent")
        condition = "attribute_not_exists(#checkpoint) OR #checkpoint < :checkpoint"
        if ended:
            condition = f"{condition} OR (#checkpoint = :checkpoint AND attribute_not_exists(#ended))"
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self.key(shard),
                UpdateExpression="SET " + ", ".join(assignments),
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            self._cache.pop(shard_key(shard), None)
            return False
        self._cache[shard_key(shard)] = (
            self._clock(),
            Progress(checkpoint, created, ended, parent_shard_id, exists=True),
        )
        return True

    def mark_ended(self, shard: ShardRef, parent_shard_id: str | None = None) -> None:
        """A shard read to its end with nothing after the checkpoint (or nothing at all)."""
        names = {"#ended": SHARD_ENDED}
        values: dict[str, Any] = {
            ":ended": {"BOOL": True},
            ":stream": {"S": shard.stream_arn},
            ":shard": {"S": shard.shard_id},
            ":now": {"N": str(int(self._clock()))},
        }
        assignments = ["#ended = :ended", "StreamArn = :stream", "ShardId = :shard", "UpdatedAt = :now"]
        if parent_shard_id:
            names["#parent"] = PARENT_SHARD
            values[":parent"] = {"S": parent_shard_id}
            assignments.append("#parent = :parent")
        self._client.update_item(
            TableName=self._table,
            Key=self.key(shard),
            UpdateExpression="SET " + ", ".join(assignments),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
        self._cache.pop(shard_key(shard), None)

    def condition_check(self, shard: ShardRef, lowest: str) -> dict[str, Any]:
        """A transaction member that holds only while no record at or above `lowest` is behind the checkpoint."""
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": self.key(shard),
                "ConditionExpression": "attribute_not_exists(#checkpoint) OR #checkpoint < :lowest",
                "ExpressionAttributeNames": {"#checkpoint": CHECKPOINT},
                "ExpressionAttributeValues": {":lowest": {"S": lowest}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }


def progress_of_item(item: dict[str, Any] | None) -> Progress:
    return _progress_of(item)


def _progress_of(item: dict[str, Any] | None) -> Progress:
    if not item:
        return Progress()
    checkpoint = item.get(CHECKPOINT, {}).get("S")
    created = item.get("CheckpointCreated", {}).get("N")
    return Progress(
        checkpoint=checkpoint if isinstance(checkpoint, str) else None,
        checkpoint_created=int(created) if isinstance(created, str) and created.isdigit() else None,
        ended=bool(item.get(SHARD_ENDED, {}).get("BOOL")),
        parent_shard_id=item.get(PARENT_SHARD, {}).get("S"),
        exists=True,
    )
