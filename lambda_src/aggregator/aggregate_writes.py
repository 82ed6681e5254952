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
from leaderboard_core.band_holds import MAX_HELD, MAX_HELD_RECORDS, held_entry, shard_tag
from leaderboard_core.band_holds import value_text as number_text
from leaderboard_core.bookkeeping import (
    APPLIED_SEQUENCE,
    RECOUNT_BAND,
    RECOUNT_HELD,
    RECOUNTED_THROUGH,
    WATERMARKS_PRUNED,
    WATERMARKS_PRUNED_UNDER,
)
from leaderboard_core.index_layout import (
    FIRST_REACHED,
    LATEST_COUNTED,
    ORDER_SCALE,
    leaderboard_partition,
    leave_index,
    order_of,
    order_tiebreak,
    ranked_order,
)


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
    instant: int | None = None
    """The download's Timestamp as a UTC instant (index_layout.instant_of): the `first_reached` tie-break's fact."""

    @property
    def part_after(self) -> int | Decimal:
        return self.amount if self.value_after is None else self.value_after


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
                entries = self.held_entries(shard, held)
                already = set((item.get(RECOUNT_HELD) or {}).get("SS") or [])
                fence += " AND #band = :band AND (attribute_not_exists(#held) OR size(#held) <= :room)"
                values[":band"] = item[RECOUNT_BAND]
                values[":held"] = {"SS": entries}
                values[":room"] = {"N": str(self.held_limit - len(set(entries) - already))}
        known_count = number(item.get(self._schema.count)) if item is not None else None
        removed = ""
        if self.first_reached:
            order_expression, order_condition = self._first_reached_order(
                key, [*contributions, *held], addition, item, names, values
            )
        elif (
            item is not None and known_count is not None and (LATEST_COUNTED in item or self._schema.order not in item)
        ):
            # No order yet, or one the tie-break first_reached left: set outright from the count (the instant dropped).
            order_expression = "#order = :order"
            values[":order"] = {"N": str(order_of(known_count + addition, key.entity_id, self._summed))}
            values[":count"] = {"N": number_text(known_count)}
            if LATEST_COUNTED in item:
                names["#latest"] = LATEST_COUNTED
                order_condition, removed = "#count = :count AND attribute_exists(#latest)", " REMOVE #latest"
            else:
                order_condition = "#count = :count AND attribute_not_exists(#order)"
        else:
            # A count back at 0 left the index (`leave_index`): its order is then rebuilt from the tie-breaker. An
            # aggregate a first_reached deployment wrote fails the condition once, and the item it returns is known.
            names["#latest"] = LATEST_COUNTED
            order_expression = "#order = if_not_exists(#order, :tiebreak) + :scaled"
            order_condition = (
                "(attribute_exists(#order) OR attribute_not_exists(#count) OR #count = :zero)"
                " AND attribute_not_exists(#latest)"
            )
            values[":zero"] = {"N": "0"}
            values[":tiebreak"] = {"N": str(order_tiebreak(key.entity_id, self._summed))}
            values[":scaled"] = {"N": str(int(addition * ORDER_SCALE))}
        additions = "#count :addition, #held :held" if held else "#count :addition"
        settings = ", ".join(part for part in ("#period = :partition", order_expression, "#wm = :entry") if part)
        update = f"ADD {additions} SET {settings}{removed}"
        condition = f"{watermark} AND {fence} AND {order_condition}"
        return {
            "TableName": self._table,
            "Key": self.item_key(key),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            **_used_placeholders(names, values, update, condition),
        }

    @property
    def first_reached(self) -> bool:
        """Ties list the entity whose latest counted download is older first: the store reads before it writes."""
        return self._schema.tie_break == FIRST_REACHED

    def _first_reached_order(
        self,
        key: AggregateKey,
        records: list[Contribution],
        addition: Decimal,
        item: dict[str, Any] | None,
        names: dict[str, str],
        values: dict[str, Any],
    ) -> tuple[str, str]:
        """The order set outright from the count and latest instant read, on the condition that both still hold.

        DynamoDB has no max() in an update expression: the latest instant is the larger of the one read and the
        records' (held ones too: without retractions every held download ends counted, by the band's close), and the
        condition makes a write that raced another fail (and be made again from the item it returns) instead of
        lowering it. Without any instant the order still moves with the count, in the slot of no latest download.
        """
        if item is None:
            raise ValueError("first_reached writes an aggregate only once it was read")
        names["#latest"] = LATEST_COUNTED
        known_count = number(item.get(self._schema.count))
        known_latest = number(item.get(LATEST_COUNTED))
        instants = [c.instant for c in records if c.instant is not None]
        if known_latest is not None:
            instants.append(int(known_latest))
        conditions = []
        if known_count is None:
            conditions.append("attribute_not_exists(#count)")
        else:
            conditions.append("#count = :count")
            values[":count"] = {"N": number_text(known_count)}
        if known_latest is None:
            conditions.append("attribute_not_exists(#latest)")
        else:
            conditions.append("#latest = :known_latest")
            values[":known_latest"] = {"N": str(int(known_latest))}
        latest = max(instants) if instants else None
        value = (known_count or 0) + addition
        values[":order"] = {"N": str(ranked_order(value, key.entity_id, self._summed, latest, FIRST_REACHED))}
        if latest is None:
            return "#order = :order", " AND ".join(conditions)
        values[":latest"] = {"N": str(latest)}
        return "#order = :order, #latest = :latest", " AND ".join(conditions)

    @property
    def held_limit(self) -> int:
        """How many entries a band's held set may reach (band_holds.py)."""
        return MAX_HELD_RECORDS if self._schema.retractions else MAX_HELD

    def held_entries(self, shard: ShardRef, held: list[Contribution]) -> list[str]:
        """What a write adds to the band's held set: the download ids; with retractions, one entry per download for
        its last record of the write (one shard's, ascending), saying what that record leaves of its part."""
        if not self._schema.retractions:
            return sorted({c.download_id for c in held if c.download_id is not None})
        tag = shard_tag(shard.stream_arn, shard.shard_id)
        last = {c.download_id: c for c in sorted(held, key=lambda c: c.sequence) if c.download_id is not None}
        return sorted(held_entry(download_id, tag, c.sequence, c.part_after) for download_id, c in last.items())

    def leave_index(self, key: AggregateKey) -> dict[str, Any]:
        schema = self._schema
        return leave_index(self._table, self.item_key(key), schema.count, schema.period, schema.order)

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
