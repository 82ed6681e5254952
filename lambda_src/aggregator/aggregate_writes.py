"""An aggregate item's conditional writes, as DynamoDB takes them: the records a write carries, the shard's
watermark it sets, and the update and prune expressions that guard the count."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from delivery import ShardRef
from download_records import AggregateKey, Schema
from leaderboard_core.bookkeeping import (
    APPLIED_SEQUENCE,
    RECOUNT_BAND,
    RECOUNT_HELD,
    RECOUNTED_THROUGH,
    WATERMARKS_PRUNED,
    WATERMARKS_PRUNED_UNDER,
)
from leaderboard_core.index_layout import ORDER_SCALE, leaderboard_partition, order_of, order_tiebreak

MAX_HELD = 4000
"""About 23 bytes each: the item stays under about 92 KB while a band is open (every write of it then costs that many
write units, for the minute or two a band lasts); a song with more records by the fence than this gets refusals."""


@dataclass(frozen=True)
class Contribution:
    """One download's part in an aggregate: its place in the shard and what it adds."""

    sequence: str
    """Zero-padded to SEQUENCE_WIDTH."""
    created: int | None
    amount: int | Decimal = 1
    download_id: str | None = None
    """Which download of the song it is: what a repair's band holds it by."""
    value_after: int | Decimal | None = None
    """The download's part in the aggregate once this record applies (0 once taken back); None: `amount`."""


def watermark_value(sequence: str, created: int, shard: ShardRef) -> str:
    """Sequence first: a string comparison with a bare padded sequence number then compares the sequences."""
    return f"{sequence}|{created}|{shard.stream_label}|{shard.shard_id}"


class AggregateWrites:
    """The parameters of one aggregate table's writes: its key schema, index partitions and order."""

    def __init__(
        self, table_name: str, schema: Schema, leaderboard_shards: int = 1, clock: Callable[[], float] = time.time
    ) -> None:
        self._table = table_name
        self._schema = schema
        self._shards = leaderboard_shards
        self._summed = schema.amount is not None
        self._clock = clock

    def item_key(self, key: AggregateKey) -> dict[str, Any]:
        return {self._schema.entity: {"S": key.entity_id}, self._schema.sort_key: {"S": key.board}}

    def update(
        self,
        key: AggregateKey,
        shard: ShardRef,
        contributions: list[Contribution],
        item: dict[str, Any] | None,
        proof_needed: bool = False,
        held: list[Contribution] | None = None,
    ) -> dict[str, Any]:
        """One conditional update: count, watermark, index partition and order change together or not at all.

        The order moves with the count (ADD-like arithmetic on it), so no read is needed. An
        aggregate written before the order existed has a count but no order: once the item is
        known, its order is set outright from that count, on the condition that the count holds.
        Held records move the watermark and join the band's set, on the condition that the band is
        still the one read and has room for them.
        """
        held = held or []
        addition = sum((contribution.amount for contribution in contributions), Decimal(0))
        highest = max([*contributions, *held], key=lambda c: c.sequence)
        created = [c.created for c in contributions]
        names = {
            "#count": self._schema.count,
            "#period": self._schema.period,
            "#order": self._schema.order,
            "#wm": shard.watermark_name,
            "#pruned": WATERMARKS_PRUNED,
            "#fence": RECOUNTED_THROUGH,
            "#applied": APPLIED_SEQUENCE,
            "#band": RECOUNT_BAND,
            "#held": RECOUNT_HELD,
        }
        never_pruned = "attribute_not_exists(#pruned) AND attribute_not_exists(#applied)"
        values: dict[str, Any] = {
            ":addition": {"N": number_text(addition)},
            ":partition": {"S": leaderboard_partition(key.board, key.entity_id, self._shards)},
            ":entry": {"S": watermark_value(highest.sequence, highest.created or int(self._clock()), shard)},
        }
        if item is None:
            watermark = f"((attribute_exists(#wm) AND #wm < :low) OR (attribute_not_exists(#wm) AND {never_pruned}))"
            values[":low"] = {"S": contributions[0].sequence}
            fence = "(attribute_not_exists(#fence) OR #fence < :earliest)"
            values[":earliest"] = {"N": str(min(0 if c is None else c for c in created))}
        else:
            if shard.watermark_name in item:
                watermark = "#wm = :expected"
                values[":expected"] = item[shard.watermark_name]
            elif proof_needed:
                watermark = "attribute_not_exists(#wm)"
            else:
                # Release 0.1.0's AppliedSequence, if any, was applied as read: nothing writes it any more.
                watermark = "attribute_not_exists(#wm) AND attribute_not_exists(#pruned)"
            if RECOUNTED_THROUGH in item:
                fence = "#fence = :fence"
                values[":fence"] = item[RECOUNTED_THROUGH]
            else:
                fence = "attribute_not_exists(#fence)"
            if held:
                ids = sorted({c.download_id for c in held if c.download_id is not None})
                already = set((item.get(RECOUNT_HELD) or {}).get("SS") or [])
                fence += " AND #band = :band AND (attribute_not_exists(#held) OR size(#held) <= :room)"
                values[":band"] = item[RECOUNT_BAND]
                values[":held"] = {"SS": ids}
                values[":room"] = {"N": str(MAX_HELD - len(set(ids) - already))}
        known_count = number(item.get(self._schema.count)) if item is not None else None
        if item is not None and known_count is not None and self._schema.order not in item:
            order_expression = "#order = :order"
            order_condition = "#count = :count AND attribute_not_exists(#order)"
            values[":order"] = {"N": str(order_of(known_count + addition, key.entity_id, self._summed))}
            values[":count"] = {"N": number_text(known_count)}
        else:
            # A count back at 0 left the index (`leave_index`): its order is then rebuilt from the tie-breaker.
            order_expression = "#order = if_not_exists(#order, :tiebreak) + :scaled"
            order_condition = "(attribute_exists(#order) OR attribute_not_exists(#count) OR #count = :zero)"
            values[":zero"] = {"N": "0"}
            values[":tiebreak"] = {"N": str(order_tiebreak(key.entity_id, self._summed))}
            values[":scaled"] = {"N": str(int(addition * ORDER_SCALE))}
        additions = "#count :addition, #held :held" if held else "#count :addition"
        update = f"ADD {additions} SET #period = :partition, {order_expression}, #wm = :entry"
        condition = f"{watermark} AND {fence} AND {order_condition}"
        return {
            "TableName": self._table,
            "Key": self.item_key(key),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            **_used_placeholders(names, values, update, condition),
        }

    def leave_index(self, key: AggregateKey) -> dict[str, Any]:
        """Take an aggregate whose count is back at 0 out of the sparse index, only while it is still 0: its count
        (0) and watermarks stay, and the next write that adds to it puts it back with its order rebuilt."""
        return {
            "TableName": self._table,
            "Key": self.item_key(key),
            "UpdateExpression": "REMOVE #period, #order",
            "ConditionExpression": "#count = :zero AND attribute_exists(#period)",
            "ExpressionAttributeNames": {
                "#count": self._schema.count,
                "#period": self._schema.period,
                "#order": self._schema.order,
            },
            "ExpressionAttributeValues": {":zero": {"N": "0"}},
        }

    def prune(self, key: AggregateKey, stale: dict[str, str], genesis: str) -> dict[str, Any]:
        """Remove the watermarks `stale` names (name -> value read), only if they are still what was read."""
        names = {"#count": self._schema.count, "#pruned": WATERMARKS_PRUNED, "#under": WATERMARKS_PRUNED_UNDER}
        values: dict[str, Any] = {":removed": {"N": str(len(stale))}, ":genesis": {"S": genesis}}
        # Watermarks pruned under one progress table only: checkpoints of a recreated one vouch for none of them.
        conditions_genesis = "(attribute_not_exists(#under) OR #under = :genesis)"
        conditions = ["attribute_exists(#count)", conditions_genesis]
        removals = []
        for index, (name, raw) in enumerate(sorted(stale.items())):
            names[f"#s{index}"] = name
            values[f":s{index}"] = {"S": raw}
            conditions.append(f"#s{index} = :s{index}")
            removals.append(f"#s{index}")
        return {
            "TableName": self._table,
            "Key": self.item_key(key),
            "UpdateExpression": f"REMOVE {', '.join(removals)} ADD #pruned :removed SET #under = :genesis",
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }


def _used_placeholders(names: dict[str, str], values: dict[str, Any], *expressions: str) -> dict[str, Any]:
    """Only the placeholders the expressions use: DynamoDB refuses a request that defines one it does not use."""
    text = " ".join(expressions)
    used = set(re.findall(r"[#:][A-Za-z0-9_]+", text))
    return {
        "ExpressionAttributeNames": {name: value for name, value in names.items() if name in used},
        "ExpressionAttributeValues": {name: value for name, value in values.items() if name in used},
    }


def number(value: Any) -> Decimal | None:
    if isinstance(value, dict) and isinstance(value.get("N"), str):
        try:
            number = Decimal(value["N"])
        except InvalidOperation:
            return None
        return number if number.is_finite() else None
    return None


def number_text(value: Decimal | int) -> str:
    """As DynamoDB takes a number: no exponent, so 10^26-scaled orders stay exact integers."""
    number = Decimal(value)
    return str(int(number)) if number == number.to_integral_value() else format(number.normalize(), "f")
