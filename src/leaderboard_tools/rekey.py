"""Move every aggregate to the index partition of a new leaderboard layout, while the leaderboard keeps answering.

Changing `leaderboard_shards` changes where each aggregate belongs in the index ("2018-01" with
one shard, "2018-01#k" with N). The module is first applied with the new count and the old one
as `leaderboard_shards_previous`: the aggregator writes the new partition on every update, and
the query function reads both layouts. This pass moves the aggregates nobody updates (older
months, quiet songs); then the module is applied without `leaderboard_shards_previous`.

Each move is one conditional UpdateItem on the partition the pass read, so it cannot undo an
update the aggregator made meanwhile; on a conflict the item is read again. Aggregates written
before the index sorted by LeaderboardOrder get their order from their count the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_core.attributes import GUIDE_NAMES, AttributeNames
from leaderboard_core.index_layout import ENTITY_TIE_BREAK, LATEST_COUNTED, leaderboard_partition, ranked_order

MAX_ROUNDS = 5


@dataclass
class RekeyReport:
    aggregates: int = 0
    moved: int = 0
    ordered: int = 0
    """Aggregates that had no LeaderboardOrder yet (written before it existed) and got one."""
    unchanged: int = 0
    conflicts: int = 0
    failed: list[str] = field(default_factory=list)
    dry_run: bool = False
    """Nothing written: `moved` and `ordered` count what the pass would write."""


def scan_aggregates(dynamodb: Any, table: str, names: AttributeNames, segment: int, segments: int) -> Any:
    """Aggregates only: the items carrying the period attribute (the index's partition key)."""
    parameters: dict[str, Any] = {
        "TableName": table,
        "Segment": segment,
        "TotalSegments": segments,
        "FilterExpression": "attribute_exists(#period)",
        "ProjectionExpression": "#entity, #sk, #period, #count, #order, #latest",
        "ExpressionAttributeNames": {
            "#entity": names.entity,
            "#sk": names.sort_key,
            "#period": names.period,
            "#count": names.count,
            "#order": names.order,
            "#latest": LATEST_COUNTED,
        },
        "ConsistentRead": True,
    }
    for page in dynamodb.get_paginator("scan").paginate(**parameters):
        yield from page.get("Items", [])


def move(
    dynamodb: Any,
    table: str,
    names: AttributeNames,
    shards: int,
    item: dict[str, Any],
    dry_run: bool = False,
    tie_break: str = ENTITY_TIE_BREAK,
) -> str:
    """Put one aggregate where the layout wants it; 'moved', 'ordered', 'unchanged' or 'conflicts' (gave up). With
    `dry_run`, what it would be, written nowhere. An order it sets breaks ties as the aggregator does (`tie_break`)."""
    key = {names.entity: item[names.entity], names.sort_key: item[names.sort_key]}
    for _ in range(MAX_ROUNDS):
        entity, period = item[names.entity]["S"], item[names.sort_key]["S"]
        target = leaderboard_partition(period, entity, shards)
        current = item.get(names.period, {}).get("S")
        needs_order = names.order not in item and names.count in item
        if current == target and not needs_order:
            return "unchanged"
        if dry_run:
            return "ordered" if needs_order else "moved"
        attribute_names = {"#period": names.period}
        values: dict[str, Any] = {":target": {"S": target}, ":current": {"S": current or ""}}
        update, condition = "SET #period = :target", "#period = :current"
        if needs_order:
            attribute_names.update({"#order": names.order, "#count": names.count})
            latest = int(item[LATEST_COUNTED]["N"]) if LATEST_COUNTED in item else None
            order = ranked_order(int(item[names.count]["N"]), entity, latest=latest, tie_break=tie_break)
            values[":order"] = {"N": str(order)}
            values[":count"] = item[names.count]
            update += ", #order = :order"
            condition += " AND #count = :count AND attribute_not_exists(#order)"
        try:
            dynamodb.update_item(
                TableName=table,
                Key=key,
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=attribute_names,
                ExpressionAttributeValues=values,
            )
            return "ordered" if needs_order else "moved"
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            item = dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item") or {}
            if not item:
                return "unchanged"
    return "conflicts"


def rekey(
    dynamodb: Any,
    table: str,
    shards: int,
    names: AttributeNames = GUIDE_NAMES,
    segments: int = 4,
    on_phase: Callable[[int], None] = lambda done: None,
    dry_run: bool = False,
    tie_break: str = ENTITY_TIE_BREAK,
) -> RekeyReport:
    """One parallel scan over the aggregates; each is moved at most once, with conditional writes (`dry_run`: none,
    the report counting what would be written).

    Interrupted (Ctrl-C), the segments stop at their next request (interruption.py): every aggregate is then in its
    old partition or its new one, each moved by one conditional write, and a second run moves the rest."""
    report = RekeyReport(dry_run=dry_run)

    def run_segment(segment: int) -> list[tuple[str, str]]:
        outcomes = []
        for item in scan_aggregates(dynamodb, table, names, segment, segments):
            name = f"{item[names.entity]['S']}|{item[names.sort_key]['S']}"
            try:
                outcomes.append((name, move(dynamodb, table, names, shards, item, dry_run, tie_break)))
            except ClientError as error:
                outcomes.append((name, f"failed: {error.response.get('Error', {}).get('Code')}"))
            on_phase(1)
        return outcomes

    with ThreadPoolExecutor(max_workers=segments) as pool:
        for outcomes in pool.map(run_segment, range(segments)):
            for name, outcome in outcomes:
                report.aggregates += 1
                if outcome == "moved":
                    report.moved += 1
                elif outcome == "ordered":
                    report.ordered += 1
                elif outcome == "unchanged":
                    report.unchanged += 1
                elif outcome == "conflicts":
                    report.conflicts += 1
                    report.failed.append(name)
                else:
                    report.failed.append(f"{name}: {outcome}")
    return report
