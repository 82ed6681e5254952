"""Exactly-once increments of one aggregate item from one shard, at one conditional write per aggregate.

Each aggregate keeps one watermark per stream shard that fed it: the attribute
`Watermark_<hash of stream and shard>` holds "<sequence>|<creation second>|<stream label>", the
highest sequence number of that shard already added to the count. Records of one shard reach
the aggregator in sequence order, so everything at or below the shard's watermark is counted
and nothing above it is; the count and the watermark change in one conditional UpdateItem.
Sequence numbers of different shards are never compared. Watermarks older than any record the
mapping can still deliver are pruned to keep the item small, and `WatermarksPrunedBefore`
then refuses any write it can no longer prove. See docs/exactly-once.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from delivery import WATERMARK_PREFIX, ShardRef
from download_records import SEQUENCE_WIDTH, AggregateKey, Schema
from leaderboard_order import ORDER_SCALE, leaderboard_partition, order_of, order_tiebreak
from window_state import Segment

PRUNED_BEFORE_ATTRIBUTE = "WatermarksPrunedBefore"
MAX_CONDITION_ROUNDS = 8
"""A round is lost only when another writer moved the watermark in between; more than a few means something is wrong."""
CLOCK_SKEW_SECONDS = 60
"""Allowed disagreement between record creation times and this function's clock, and between records' own times."""


class WatermarkContention(Exception):
    """The watermark kept moving under us; the aggregate stays pending and is written again later."""


class WatermarkInconsistency(Exception):
    """A watermark falls inside downloads written together: an order the design cannot explain, so no guess."""


class CorruptWatermark(Exception):
    """A watermark attribute is not "<40 digits>|<second>|<label>": counting on would guess, so the aggregate fails."""


@dataclass(frozen=True)
class WatermarkRetention:
    """How long a shard's watermark must outlive the newest record it covers.

    The mapping never delivers a record older than `maximum_record_age_seconds`, and a
    window holds a record at most `window_seconds` before it is written; past both, with
    margins for clock skew and retries, no delivery of that shard can need the watermark.
    """

    maximum_record_age_seconds: int
    window_seconds: int

    @property
    def prune_after_seconds(self) -> int:
        return self.maximum_record_age_seconds + self.window_seconds + 600


@dataclass(frozen=True)
class Watermark:
    sequence: str
    created: int
    stream_label: str
    raw: str

    @classmethod
    def parse(cls, name: str, value: Any) -> Watermark:
        text = value.get("S") if isinstance(value, dict) else None
        parts = text.split("|") if isinstance(text, str) else []
        if (
            len(parts) != 3
            or len(parts[0]) != SEQUENCE_WIDTH
            or not parts[0].isdigit()
            or not parts[1].isdigit()
            or not parts[2]
        ):
            raise CorruptWatermark(f"{name} is {value!r}, not '<40 digits>|<second>|<stream label>'")
        return cls(parts[0], int(parts[1]), parts[2], text)


def watermark_value(sequence: str, created: int, stream_label: str) -> str:
    """Sequence first: a string comparison with a bare padded sequence number then compares the sequences."""
    return f"{sequence}|{created}|{stream_label}"


@dataclass
class ApplyOutcome:
    added: int = 0
    already_applied: int = 0
    writes: int = 0
    """UpdateItem calls made, conditional failures and prunes included."""
    refused: list[Segment] = field(default_factory=list)
    """Segments older than a pruned watermark: they cannot be proven new, so they are reported, not counted."""
    pruned_watermarks: int = 0
    previous_stream_labels: tuple[str, ...] = ()
    """Labels of other streams whose watermarks the aggregate carries: a re-enabled stream or a restored table."""
    index_partition: str | None = None
    """The index partition the count moved in (each such write is two index writes): where the index is hot."""


class AggregateStore:
    def __init__(
        self,
        client: Any,
        table_name: str,
        schema: Schema,
        retention: WatermarkRetention,
        clock: Callable[[], float] = time.time,
        leaderboard_shards: int = 1,
    ) -> None:
        self._client = client
        self._table = table_name
        self._schema = schema
        self._retention = retention
        self._clock = clock
        self._shards = leaderboard_shards

    def _key(self, key: AggregateKey) -> dict[str, Any]:
        return {self._schema.entity: {"S": key.entity_id}, self._schema.sort_key: {"S": key.period}}

    def _read(self, key: AggregateKey) -> dict[str, Any]:
        return self._client.get_item(TableName=self._table, Key=self._key(key), ConsistentRead=True).get("Item") or {}

    def apply(self, key: AggregateKey, shard: ShardRef, segments: list[Segment]) -> ApplyOutcome:
        """Add the downloads of `segments` (one shard, ascending) that no earlier write added.

        The first attempt assumes the common case, that none were added, and costs one write.
        When its condition fails, DynamoDB returns the item, and the next attempt adds exactly
        the downloads above the watermark it read, conditioned on that watermark still holding.
        """
        outcome = ApplyOutcome()
        name = shard.watermark_name
        remaining = list(segments)
        expected: Watermark | None = None
        known = False
        item: dict[str, Any] = {}
        for _ in range(MAX_CONDITION_ROUNDS):
            if not remaining:
                return outcome
            if known:
                addition = 0
                for segment in remaining:
                    above = segment.above(expected.sequence) if expected is not None else segment.count
                    if above is None:
                        raise WatermarkInconsistency(
                            f"{name} of {key} is at {expected.sequence if expected else None}, inside downloads "
                            f"{segment.low}..{segment.high} that were written together"
                        )
                    addition += above
                if addition == 0:
                    outcome.already_applied += sum(segment.count for segment in remaining)
                    return outcome
            else:
                addition = sum(segment.count for segment in remaining)
            try:
                written = self._write(
                    key, shard, remaining, addition, expected if known else None, item if known else None
                )
                outcome.writes += 1
                outcome.added += addition
                outcome.already_applied += sum(segment.count for segment in remaining) - addition
                outcome.index_partition = leaderboard_partition(key.period, key.entity_id, self._shards)
                self._after_write(key, shard, written, outcome)
                return outcome
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
                outcome.writes += 1
                item = error.response.get("Item")
                if item is None:
                    item = self._read(key)
                pruned_before = _number(item.get(PRUNED_BEFORE_ATTRIBUTE))
                if pruned_before is not None:
                    unprovable = [segment for segment in remaining if segment.low_created <= pruned_before]
                    outcome.refused.extend(unprovable)
                    remaining = [segment for segment in remaining if segment.low_created > pruned_before]
                expected = Watermark.parse(name, item[name]) if name in item else None
                known = True
        raise WatermarkContention(f"{name} of {key} kept moving for {MAX_CONDITION_ROUNDS} rounds")

    def _write(
        self,
        key: AggregateKey,
        shard: ShardRef,
        segments: list[Segment],
        addition: int,
        expected: Watermark | None,
        known_item: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """One conditional UpdateItem: count, watermark, index partition and order change together or not at all.

        The order moves with the count (ADD-like arithmetic on it), so no read is needed. An
        aggregate written before the order existed has a count but no order: once the item is
        known, its order is set outright from that count, on the condition that the count holds.
        """
        names = {
            "#count": self._schema.count,
            "#period": self._schema.period,
            "#order": self._schema.order,
            "#wm": shard.watermark_name,
            "#pruned": PRUNED_BEFORE_ATTRIBUTE,
        }
        low, high = segments[0], segments[-1]
        values: dict[str, Any] = {
            ":addition": {"N": str(addition)},
            ":partition": {"S": leaderboard_partition(key.period, key.entity_id, self._shards)},
            ":entry": {"S": watermark_value(high.high, high.high_created, shard.stream_label)},
            ":low_created": {"N": str(low.low_created)},
        }
        if known_item is None:
            watermark_condition = "(attribute_not_exists(#wm) OR #wm < :low)"
            values[":low"] = {"S": low.low}
        elif expected is None:
            watermark_condition = "attribute_not_exists(#wm)"
        else:
            watermark_condition = "#wm = :expected"
            values[":expected"] = {"S": expected.raw}
        known_count = _number(known_item.get(self._schema.count)) if known_item is not None else None
        if known_item is not None and known_count is not None and self._schema.order not in known_item:
            order_expression = "#order = :order"
            order_condition = "#count = :count AND attribute_not_exists(#order)"
            values[":order"] = {"N": str(order_of(known_count + addition, key.entity_id))}
            values[":count"] = {"N": str(known_count)}
        else:
            order_expression = "#order = if_not_exists(#order, :tiebreak) + :scaled"
            order_condition = "(attribute_exists(#order) OR attribute_not_exists(#count))"
            values[":tiebreak"] = {"N": str(order_tiebreak(key.entity_id))}
            values[":scaled"] = {"N": str(addition * ORDER_SCALE)}
        response = self._client.update_item(
            TableName=self._table,
            Key=self._key(key),
            UpdateExpression=f"ADD #count :addition SET #period = :partition, {order_expression}, #wm = :entry",
            ConditionExpression=(
                f"{watermark_condition} AND {order_condition}"
                " AND (attribute_not_exists(#pruned) OR #pruned < :low_created)"
            ),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        return response.get("Attributes") or {}

    def _after_write(self, key: AggregateKey, shard: ShardRef, item: dict[str, Any], outcome: ApplyOutcome) -> None:
        """Prune watermarks no delivery can need any more, and notice those of other streams."""
        now = int(self._clock())
        threshold = now - self._retention.prune_after_seconds
        stale: dict[str, Watermark] = {}
        labels: set[str] = set()
        for name, value in item.items():
            if not name.startswith(WATERMARK_PREFIX) or name == shard.watermark_name:
                continue
            try:
                watermark = Watermark.parse(name, value)
            except CorruptWatermark:
                continue
            if watermark.stream_label != shard.stream_label:
                labels.add(watermark.stream_label)
            if watermark.created < threshold:
                stale[name] = watermark
        outcome.previous_stream_labels = tuple(sorted(labels))
        if stale:
            outcome.writes += 1
            if self._prune(key, stale, threshold + CLOCK_SKEW_SECONDS):
                outcome.pruned_watermarks += len(stale)

    def _prune(self, key: AggregateKey, stale: dict[str, Watermark], pruned_before: int) -> bool:
        """Remove stale watermarks and raise the pruned mark, only if they are still what was read."""
        names = {"#count": self._schema.count, "#pruned": PRUNED_BEFORE_ATTRIBUTE}
        values: dict[str, Any] = {":pruned_before": {"N": str(pruned_before)}}
        conditions = ["attribute_exists(#count)", "(attribute_not_exists(#pruned) OR #pruned < :pruned_before)"]
        removals = []
        for index, (name, watermark) in enumerate(sorted(stale.items())):
            names[f"#s{index}"] = name
            values[f":s{index}"] = {"S": watermark.raw}
            conditions.append(f"#s{index} = :s{index}")
            removals.append(f"#s{index}")
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key(key),
                UpdateExpression=f"REMOVE {', '.join(removals)} SET #pruned = :pruned_before",
                ConditionExpression=" AND ".join(conditions),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return False
        return True


def _number(value: Any) -> int | None:
    if isinstance(value, dict) and isinstance(value.get("N"), str):
        try:
            return int(value["N"])
        except ValueError:
            return None
    return None
