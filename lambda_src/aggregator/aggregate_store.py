"""Exactly-once increments of one aggregate item, at one conditional write per aggregate and batch.

Each aggregate carries `AppliedSequence`, the highest stream sequence number (zero-padded
to 40 digits) already added into its count. Stream records of one aggregate arrive in
sequence order, so every record at or below the watermark has been counted: a retried,
bisected or overlapping delivery adds only the records above it. The count and the
watermark change in the same conditional UpdateItem, so no crash can separate them.
See docs/exactly-once.md for the argument and its limits.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from download_records import SEQUENCE_WIDTH, AggregateKey, Schema

WATERMARK_ATTRIBUTE = "AppliedSequence"
MAX_CONDITION_ROUNDS = 8
"""A round is lost only when another writer moved the watermark in between; more than a few means something is wrong."""


class WatermarkContention(Exception):
    """The watermark kept moving under us; the key is reported as failed and retried by the mapping."""


class CorruptWatermark(Exception):
    """The aggregate's watermark is not a sequence string: counting on would guess, so the key fails until repaired."""


@dataclass(frozen=True)
class ApplyOutcome:
    added: int
    """Records added to the count by this call."""
    already_applied: int
    """Records at or below the watermark: counted by an earlier delivery."""
    writes: int
    """UpdateItem calls made, the successful one included."""


def records_above(sequences: list[str], watermark: str | None) -> int:
    """How many of the sorted, padded sequences are above the watermark (all when there is none)."""
    if watermark is None:
        return len(sequences)
    return len(sequences) - bisect.bisect_right(sequences, watermark)


class AggregateStore:
    def __init__(self, client: Any, table_name: str, schema: Schema) -> None:
        self._client = client
        self._table = table_name
        self._schema = schema

    def _key(self, key: AggregateKey) -> dict[str, Any]:
        return {self._schema.entity: {"S": key.entity_id}, self._schema.sort_key: {"S": key.period}}

    def _current_watermark(self, key: AggregateKey, error: ClientError) -> str | None:
        item = error.response.get("Item")
        if item is None:
            item = self._client.get_item(
                TableName=self._table,
                Key=self._key(key),
                ConsistentRead=True,
                ProjectionExpression="#wm",
                ExpressionAttributeNames={"#wm": WATERMARK_ATTRIBUTE},
            ).get("Item")
        if not item or WATERMARK_ATTRIBUTE not in item:
            return None
        watermark = item[WATERMARK_ATTRIBUTE].get("S")
        if not isinstance(watermark, str) or len(watermark) != SEQUENCE_WIDTH or not watermark.isdigit():
            raise CorruptWatermark(
                f"{WATERMARK_ATTRIBUTE} of {key} is {item[WATERMARK_ATTRIBUTE]!r}, not a padded sequence number"
            )
        return watermark

    def apply(self, key: AggregateKey, sequences: list[str]) -> ApplyOutcome:
        """Add the records of `sequences` (sorted, padded, distinct) that no earlier delivery added.

        The first attempt assumes the common case, that none were applied, and costs one write.
        On a redelivery the failed condition returns the item, and the second attempt adds
        exactly the records above its watermark, conditioned on that watermark still holding.
        """
        lowest, highest = sequences[0], sequences[-1]
        known_watermark: str | None = None
        watermark_known = False
        for round_number in range(1, MAX_CONDITION_ROUNDS + 1):
            names = {"#count": self._schema.count, "#period": self._schema.period, "#wm": WATERMARK_ATTRIBUTE}
            values: dict[str, Any] = {":period": {"S": key.period}, ":highest": {"S": highest}}
            if not watermark_known:
                addition = len(sequences)
                condition = "attribute_not_exists(#wm) OR #wm < :lowest"
                values[":lowest"] = {"S": lowest}
            else:
                addition = records_above(sequences, known_watermark)
                if addition == 0:
                    return ApplyOutcome(0, len(sequences), round_number - 1)
                if known_watermark is None:
                    condition = "attribute_not_exists(#wm)"
                else:
                    condition = "#wm = :expected"
                    values[":expected"] = {"S": known_watermark}
            values[":addition"] = {"N": str(addition)}
            try:
                self._client.update_item(
                    TableName=self._table,
                    Key=self._key(key),
                    UpdateExpression="ADD #count :addition SET #period = :period, #wm = :highest",
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return ApplyOutcome(addition, len(sequences) - addition, round_number)
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
                known_watermark = self._current_watermark(key, error)
                watermark_known = True
        raise WatermarkContention(f"watermark of {key} kept moving for {MAX_CONDITION_ROUNDS} rounds")
