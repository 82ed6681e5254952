"""The progress table: per stream shard, the checkpoint through which every download is counted.

Invariant: every download record of a shard with a sequence number at or below its `Checkpoint`
is counted in its aggregate (or reported). The aggregator reads each shard from here, so that what
the mapping re-delivers out of order, merges, splits or gives up on cannot change what is counted.
The checkpoint only ever rises (a conditional write), so a stale read of it is a safe lower bound.

An item is created the first time a shard is seen (`FirstSeenAt`), with the shard's first
sequence number (`ResumeAt`), so that a shard whose first records were trimmed before it was ever
read says so instead of starting silently at the trim horizon.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from delivery import ShardRef
from leaderboard_core.bookkeeping import (
    CHECKPOINT,
    CHECKPOINT_CREATED,
    CHECKPOINT_SEQUENCE,
    CLOSED_UNREAD_SINCE,
    DELIVERED_HIGH,
    EMPTY_TAIL_WALKED_AT,
    FIRST_SEEN,
    GAP_REPORTED_FROM,
    GENESIS,
    GENESIS_KEY,
    LEDGER_FROM,
    LINEAGE_COUNTED,
    LINEAGE_UNKNOWN,
    LOST_UNREAD,
    NEXT_SHARD,
    PARENT_SHARD,
    RESUME_AT,
    SHARD_ENDED,
    SHARD_ID,
    SHARD_KEY,
    STREAM_ARN,
    SWEEP_CURSOR_KEY,
    UPDATED_AT,
    pad_sequence,
)
from progress_item import Progress, progress_of_item, shard_key

CACHE_SECONDS = 60.0


class LedgerTurnedOnLate(RuntimeError):
    """Ledger mode on a progress table a deployment without it began: what that deployment counted has no ledger item,
    so the first edit or deletion of each such download would be placed as if it had never been counted."""


class ProgressStore:
    def __init__(
        self, client: Any, table_name: str, clock: Callable[[], float] = time.time, ledger: bool = False
    ) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock
        self._ledger = ledger
        self._cache: dict[str, tuple[float, Progress]] = {}
        self._genesis: str | None = None

    @property
    def table_name(self) -> str:
        return self._table

    def genesis(self) -> str:
        """This progress table's token, drawn by the first reader ever (conditional), the same for all after. In ledger
        mode the first reader marks it (LEDGER_FROM), and a token drawn without the mark raises LedgerTurnedOnLate."""
        if self._genesis is None:
            key = {SHARD_KEY: {"S": GENESIS_KEY}}
            marked = f", {LEDGER_FROM} = :now" if self._ledger else ""
            try:
                self._client.update_item(
                    TableName=self._table,
                    Key=key,
                    UpdateExpression=f"SET #genesis = :token, {UPDATED_AT} = :now{marked}",
                    ConditionExpression="attribute_not_exists(#genesis)",
                    ExpressionAttributeNames={"#genesis": GENESIS},
                    ExpressionAttributeValues={
                        ":token": {"S": uuid.uuid4().hex},
                        ":now": {"N": str(int(self._clock()))},
                    },
                )
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
            item = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True).get("Item") or {}
            if self._ledger and LEDGER_FROM not in item:
                raise LedgerTurnedOnLate(
                    f"ledger mode is on, but the progress table {self._table} was begun by this deployment without it: "
                    "the downloads it counted then have no ledger item, so their edits and deletions would be counted "
                    "as if they had never been. Nothing is counted. Set ledger = false again, or attach a new stack "
                    "(another name) with ledger = true and backfill it (docs/attaching.md)"
                )
            self._genesis = item[GENESIS]["S"]
        return self._genesis

    def key(self, shard: ShardRef) -> dict[str, Any]:
        return {SHARD_KEY: {"S": shard_key(shard)}}

    def read(self, shard: ShardRef) -> Progress:
        """A strongly consistent read: where this invocation starts reading."""
        item = self._client.get_item(TableName=self._table, Key=self.key(shard), ConsistentRead=True).get("Item")
        progress = progress_of_item(item)
        self._cache[shard_key(shard)] = (self._clock(), progress)
        return progress

    def lower_bound(self, shard: ShardRef) -> Progress:
        """A recent read, possibly stale: the checkpoint only rises, so it is at most the true one."""
        cached = self._cache.get(shard_key(shard))
        if cached is not None and (cached[1].ended or self._clock() - cached[0] < CACHE_SECONDS):
            return cached[1]
        item = self._client.get_item(TableName=self._table, Key=self.key(shard)).get("Item")
        progress = progress_of_item(item)
        self._cache[shard_key(shard)] = (self._clock(), progress)
        return progress

    def first_seen(
        self,
        shard: ShardRef,
        first_sequence: str | None,
        parent_shard_id: str | None,
        lineage_counted: bool = False,
        lineage_unknown: bool = False,
    ) -> Progress:
        """Create the shard's item the first time it is seen; another reader may have done so meanwhile."""
        values: dict[str, Any] = {
            ":stream": {"S": shard.stream_arn},
            ":shard": {"S": shard.shard_id},
            ":now": {"N": str(int(self._clock()))},
            ":genesis": {"S": self.genesis()},
        }
        assignments = [
            f"{STREAM_ARN} = :stream",
            f"{SHARD_ID} = :shard",
            "#first = :now",
            f"{UPDATED_AT} = :now",
            "#genesis = :genesis",
        ]
        names = {"#first": FIRST_SEEN, "#key": SHARD_KEY, "#genesis": GENESIS}
        if first_sequence:
            names["#resume"] = RESUME_AT
            values[":resume"] = {"S": first_sequence}
            assignments.append("#resume = :resume")
        if parent_shard_id:
            names["#parent"] = PARENT_SHARD
            values[":parent"] = {"S": parent_shard_id}
            assignments.append("#parent = :parent")
        if lineage_unknown:
            names["#unknown"] = LINEAGE_UNKNOWN
            values[":unknown"] = {"BOOL": True}
            assignments.append("#unknown = :unknown")
        if lineage_counted:
            names["#lineage"] = LINEAGE_COUNTED
            values[":lineage"] = {"BOOL": True}
            assignments.append("#lineage = :lineage")
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self.key(shard),
                UpdateExpression="SET " + ", ".join(assignments),
                ConditionExpression="attribute_not_exists(#key)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
        return self.read(shard)

    def advance(
        self,
        shard: ShardRef,
        checkpoint: str,
        sequence: str,
        created: int | None,
        ended: bool,
    ) -> bool:
        """Raise the checkpoint (never lower it); False when another reader had already passed it."""
        names = {"#checkpoint": CHECKPOINT, "#sequence": CHECKPOINT_SEQUENCE}
        values: dict[str, Any] = {
            ":checkpoint": {"S": checkpoint},
            ":sequence": {"S": sequence},
            ":stream": {"S": shard.stream_arn},
            ":shard": {"S": shard.shard_id},
            ":now": {"N": str(int(self._clock()))},
        }
        assignments = [
            "#checkpoint = :checkpoint",
            "#sequence = :sequence",
            f"{STREAM_ARN} = :stream",
            f"{SHARD_ID} = :shard",
            f"{UPDATED_AT} = :now",
        ]
        if created is not None:
            assignments.append(f"{CHECKPOINT_CREATED} = :created")
            values[":created"] = {"N": str(created)}
        if ended:
            names["#ended"] = SHARD_ENDED
            values[":ended"] = {"BOOL": True}
            assignments.append("#ended = :ended")
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
        self._cache.pop(shard_key(shard), None)
        return True

    def note_delivered(self, shard: ShardRef, high: str) -> None:
        """Remember (upwards only) the highest sequence the mapping delivered: a final invocation reads that far."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self.key(shard),
                UpdateExpression="SET #delivered = :high",
                ConditionExpression=(
                    "attribute_exists(#key) AND (attribute_not_exists(#delivered) OR #delivered < :high)"
                ),
                ExpressionAttributeNames={"#delivered": DELIVERED_HIGH, "#key": SHARD_KEY},
                ExpressionAttributeValues={":high": {"S": high}},
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
        self._cache.pop(shard_key(shard), None)

    def resume_after_gap(self, shard: ShardRef, first_readable: str) -> None:
        """After a reported trimmed gap: read on from the first record still in the stream, never before it."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self.key(shard),
                UpdateExpression=f"SET #resume = :resume, {UPDATED_AT} = :now",
                ConditionExpression="attribute_not_exists(#checkpoint) OR #checkpoint < :padded",
                ExpressionAttributeNames={"#resume": RESUME_AT, "#checkpoint": CHECKPOINT},
                ExpressionAttributeValues={
                    ":resume": {"S": first_readable},
                    ":padded": {"S": pad_sequence(first_readable)},
                    ":now": {"N": str(int(self._clock()))},
                },
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
        self._cache.pop(shard_key(shard), None)

    def mark_ended(self, shard: ShardRef) -> None:
        """A shard read to its end with nothing after the checkpoint (or nothing at all), or gone from the stream."""
        self._client.update_item(
            TableName=self._table,
            Key=self.key(shard),
            UpdateExpression=f"SET #ended = :ended, {STREAM_ARN} = :stream, {SHARD_ID} = :shard, {UPDATED_AT} = :now",
            ExpressionAttributeNames={"#ended": SHARD_ENDED},
            ExpressionAttributeValues={
                ":ended": {"BOOL": True},
                ":stream": {"S": shard.stream_arn},
                ":shard": {"S": shard.shard_id},
                ":now": {"N": str(int(self._clock()))},
            },
        )
        self._cache.pop(shard_key(shard), None)

    def mark_lineage_counted(self, shard: ShardRef) -> None:
        """Every ancestor of the shard is ended: later readers of it, and of its children, look no further up."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self.key(shard),
                UpdateExpression=f"SET #lineage = :counted, {UPDATED_AT} = :now",
                ConditionExpression="attribute_exists(#key)",
                ExpressionAttributeNames={"#lineage": LINEAGE_COUNTED, "#key": SHARD_KEY},
                ExpressionAttributeValues={":counted": {"BOOL": True}, ":now": {"N": str(int(self._clock()))}},
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
        self._cache.pop(shard_key(shard), None)

    def note_gap_reported(self, shard: ShardRef, start_token: str) -> None:
        """A trimmed gap from this start, with nothing readable after it, is in the failure queue."""
        self._client.update_item(
            TableName=self._table,
            Key=self.key(shard),
            UpdateExpression=f"SET #gap = :start, {UPDATED_AT} = :now",
            ExpressionAttributeNames={"#gap": GAP_REPORTED_FROM},
            ExpressionAttributeValues={":start": {"S": start_token}, ":now": {"N": str(int(self._clock()))}},
        )
        self._cache.pop(shard_key(shard), None)

    def sweep_cursor(self) -> str | None:
        """The shard the next lineage sweep begins with (where the last one was cut short), if any."""
        item = self._client.get_item(TableName=self._table, Key={SHARD_KEY: {"S": SWEEP_CURSOR_KEY}}).get("Item")
        value = (item or {}).get(NEXT_SHARD, {}).get("S")
        return value if isinstance(value, str) else None

    def set_sweep_cursor(self, shard_id: str) -> None:
        self._client.update_item(
            TableName=self._table,
            Key={SHARD_KEY: {"S": SWEEP_CURSOR_KEY}},
            UpdateExpression=f"SET #next = :next, {UPDATED_AT} = :now",
            ExpressionAttributeNames={"#next": NEXT_SHARD},
            ExpressionAttributeValues={":next": {"S": shard_id}, ":now": {"N": str(int(self._clock()))}},
        )

    def note_closed_unread(self, shard: ShardRef, swept_at: float) -> None:
        """A sweep that began at `swept_at` found the shard closed and not read to its end: the first one is kept."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self.key(shard),
                UpdateExpression=f"SET #since = if_not_exists(#since, :since), {UPDATED_AT} = :now",
                ConditionExpression="attribute_exists(#key)",
                ExpressionAttributeNames={"#since": CLOSED_UNREAD_SINCE, "#key": SHARD_KEY},
                ExpressionAttributeValues={
                    ":since": {"N": str(int(swept_at))},
                    ":now": {"N": str(int(self._clock()))},
                },
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
        self._cache.pop(shard_key(shard), None)

    def note_empty_tail(self, shard: ShardRef, walked_at: float) -> None:
        """A read of the closed shard gave up after MAX_EMPTY_PAGES in a row, short of its EndingSequenceNumber."""
        self._client.update_item(
            TableName=self._table,
            Key=self.key(shard),
            UpdateExpression=f"SET #walked = :walked, {UPDATED_AT} = :now",
            ExpressionAttributeNames={"#walked": EMPTY_TAIL_WALKED_AT},
            ExpressionAttributeValues={
                ":walked": {"N": str(int(walked_at))},
                ":now": {"N": str(int(self._clock()))},
            },
        )
        self._cache.pop(shard_key(shard), None)

    def mark_lost(self, shard: ShardRef) -> None:
        """An ancestor gone from the stream before it was read, its loss reported: ended, and nothing above it to do.

        Its other children meet this item and report nothing more (recover recounts every month once).
        """
        self._client.update_item(
            TableName=self._table,
            Key=self.key(shard),
            UpdateExpression=(
                f"SET #ended = :true, #lineage = :true, #lost = :true, {STREAM_ARN} = :stream, {SHARD_ID} = :shard, "
                f"{UPDATED_AT} = :now"
            ),
            ExpressionAttributeNames={"#ended": SHARD_ENDED, "#lineage": LINEAGE_COUNTED, "#lost": LOST_UNREAD},
            ExpressionAttributeValues={
                ":true": {"BOOL": True},
                ":stream": {"S": shard.stream_arn},
                ":shard": {"S": shard.shard_id},
                ":now": {"N": str(int(self._clock()))},
            },
        )
        self._cache.pop(shard_key(shard), None)

    def condition_check(self, shard: ShardRef, lowest: str, pruned_under: str) -> dict[str, Any]:
        """A transaction member that holds only while this shard's progress can vouch for a pruned aggregate.

        The item must belong to the progress table the aggregate was pruned under (one recreated since
        knows nothing of what was pruned), and its checkpoint must be below every record to add.
        """
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": self.key(shard),
                "ConditionExpression": (
                    "#genesis = :pruned_under AND (attribute_not_exists(#checkpoint) OR #checkpoint < :lowest)"
                ),
                "ExpressionAttributeNames": {"#genesis": GENESIS, "#checkpoint": CHECKPOINT},
                "ExpressionAttributeValues": {":lowest": {"S": lowest}, ":pruned_under": {"S": pruned_under}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
