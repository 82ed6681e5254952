"""Recount a month's aggregates from the raw downloads, report the differences, and repair them safely.

The truth is the download items in the table, counted in their UTC month. A stored count can
differ from it when the stream mapping gave up on records (they are in the failure queue), when
someone edited an aggregate, or for a moment while downloads are still on their way through the
stream. So a repair touches only a *settled* aggregate: one whose count and watermarks did not
move, and whose recount did not change, between a snapshot taken before the recount and one
taken `settle_seconds` after it (longer than the mapping takes to deliver: the tumbling window
plus a margin). Each repair is one conditional UpdateItem on the count and every watermark it
read, so it cannot overwrite an update the aggregator made meanwhile; an aggregate that moved is
reported as live and left for the next run.

With time-to-live on the download items, expired downloads are gone from the table but counted
in their aggregates: a recount then understates. A month with a download whose expiry time has
passed is refused, and no repair ever lowers a count while the table has TTL.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_tools.leaderboard_layout import GUIDE_NAMES, AttributeNames, leaderboard_partition, order_of
from leaderboard_tools.loadgen import utc_month

WATERMARK_PREFIX = "Watermark_"


class ReconcileRefused(Exception):
    """The month cannot be recounted truthfully (expired downloads): nothing is repaired."""


@dataclass(frozen=True)
class Snapshot:
    """What the aggregator has written for one aggregate: its count and every watermark, as read."""

    count: int
    watermarks: tuple[tuple[str, str], ...]
    exists: bool


@dataclass
class Difference:
    entity_id: str
    stored: int
    recounted: int
    repaired: bool = False
    reason: str | None = None
    """Why it was not repaired: live, TTL, or a conflict that persisted."""


@dataclass
class ReconcileReport:
    month: str
    aggregates: int = 0
    downloads: int = 0
    differences: list[Difference] = field(default_factory=list)
    repaired: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "month": self.month,
            "differences": [
                {"songID": d.entity_id, "stored": d.stored, "recounted": d.recounted, "repaired": d.repaired}
                | ({"reason": d.reason} if d.reason else {})
                for d in self.differences
            ],
            "repaired": self.repaired,
        }


class Reconciler:
    def __init__(
        self,
        dynamodb: Any,
        table: str,
        names: AttributeNames = GUIDE_NAMES,
        segments: int = 4,
        settle_seconds: float = 90,
        leaderboard_shards: int = 1,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        on_progress: Callable[[int], None] = lambda scanned: None,
    ) -> None:
        self._dynamodb = dynamodb
        self._table = table
        self._names = names
        self._segments = segments
        self._shards = leaderboard_shards
        self._settle_seconds = settle_seconds
        self._sleep = sleep
        self._clock = clock
        self._on_progress = on_progress

    # ------------------------------------------------------------------ reading

    def ttl_attribute(self) -> str | None:
        description = self._dynamodb.describe_time_to_live(TableName=self._table)["TimeToLiveDescription"]
        if description.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
            return description.get("AttributeName")
        return None

    def snapshot(self, month: str, entity_ids: Iterable[str] | None = None) -> dict[str, Snapshot]:
        names = self._names
        if entity_ids is not None:
            snapshots = {}
            for entity_id in entity_ids:
                item = self._dynamodb.get_item(
                    TableName=self._table,
                    Key={names.entity: {"S": entity_id}, names.sort_key: {"S": month}},
                    ConsistentRead=True,
                ).get("Item")
                snapshots[entity_id] = self._snapshot_of(item)
            return snapshots
        items = self._scan(
            FilterExpression="#sk = :month AND attribute_exists(#period)",
            ExpressionAttributeNames={"#sk": names.sort_key, "#period": names.period},
            ExpressionAttributeValues={":month": {"S": month}},
        )
        return {item[names.entity]["S"]: self._snapshot_of(item) for item in items}

    def _snapshot_of(self, item: dict[str, Any] | None) -> Snapshot:
        if not item:
            return Snapshot(0, (), exists=False)
        watermarks = tuple(
            sorted((name, value["S"]) for name, value in item.items() if name.startswith(WATERMARK_PREFIX))
        )
        count = int(item[self._names.count]["N"]) if self._names.count in item else 0
        return Snapshot(count, watermarks, exists=True)

    def recount(self, month: str, entity_ids: Iterable[str] | None, ttl: str | None) -> Counter[str]:
        """Downloads per entity in the month (UTC); with TTL, refuse if one of them has expired."""
        names = self._names
        if entity_ids is not None:
            items = [item for entity_id in entity_ids for item in self._downloads_of(entity_id)]
        else:
            items = self._scan(
                FilterExpression="attribute_not_exists(#period)", ExpressionAttributeNames={"#period": names.period}
            )
        counts: Counter[str] = Counter()
        now = self._clock()
        for item in items:
            timestamp = item.get(names.timestamp, {}).get("S")
            entity = item.get(names.entity, {}).get("S")
            if not timestamp or not entity:
                continue
            try:
                if utc_month(timestamp) != month:
                    continue
            except ValueError:
                continue
            if ttl is not None and ttl in item and float(item[ttl]["N"]) <= now:
                raise ReconcileRefused(
                    f"a download of {entity} in {month} expired at {item[ttl]['N']} (TTL attribute {ttl}): "
                    "expired downloads may already be deleted, so a recount of this month would understate"
                )
            counts[entity] += 1
        return counts

    def _downloads_of(self, entity_id: str) -> list[dict[str, Any]]:
        """The cheaper path for a few songs: their partition, not the table."""
        names = self._names
        parameters: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#entity = :entity",
            "FilterExpression": "attribute_not_exists(#period)",
            "ExpressionAttributeNames": {"#entity": names.entity, "#period": names.period},
            "ExpressionAttributeValues": {":entity": {"S": entity_id}},
            "ConsistentRead": True,
        }
        items: list[dict[str, Any]] = []
        while True:
            page = self._dynamodb.query(**parameters)
            items.extend(page.get("Items", []))
            self._on_progress(page.get("ScannedCount", 0))
            if "LastEvaluatedKey" not in page:
                return items
            parameters["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _scan(self, **parameters: Any) -> list[dict[str, Any]]:
        def segment(number: int) -> list[dict[str, Any]]:
            request = {
                "TableName": self._table,
                "Segment": number,
                "TotalSegments": self._segments,
                "ConsistentRead": True,
                **parameters,
            }
            items: list[dict[str, Any]] = []
            while True:
                page = self._dynamodb.scan(**request)
                items.extend(page.get("Items", []))
                self._on_progress(page.get("ScannedCount", 0))
                if "LastEvaluatedKey" not in page:
                    return items
                request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

        with ThreadPoolExecutor(max_workers=self._segments) as pool:
            return [item for items in pool.map(segment, range(self._segments)) for item in items]

    # ------------------------------------------------------------------ the run

    def run(self, month: str, entity_ids: list[str] | None = None, repair: bool = False) -> ReconcileReport:
        ttl = self.ttl_attribute()
        before = self.snapshot(month, entity_ids)
        recounted = self.recount(month, entity_ids, ttl)
        report = ReconcileReport(month, aggregates=len(before), downloads=sum(recounted.values()))
        differing = sorted(
            entity
            for entity in set(before) | set(recounted)
            if before.get(entity, Snapshot(0, (), False)).count != recounted.get(entity, 0)
        )
        if not differing:
            return report
        if repair:
            self._sleep(self._settle_seconds)
            after = self.snapshot(month, differing)
            again = self.recount(month, differing, ttl)
        for entity in differing:
            snapshot = before.get(entity, Snapshot(0, (), False))
            difference = Difference(entity, snapshot.count, recounted.get(entity, 0))
            report.differences.append(difference)
            if not repair:
                continue
            if after[entity] != snapshot or again.get(entity, 0) != difference.recounted:
                difference.reason = "live: the aggregate or its downloads changed while reconciling; run again"
            elif ttl is not None and difference.recounted < difference.stored:
                difference.reason = f"the table has TTL ({ttl}): a recount below the stored count is not repaired"
            else:
                difference.repaired = self._repair(month, entity, snapshot, difference.recounted)
                if not difference.repaired:
                    difference.reason = "conflict: the aggregator wrote it meanwhile; run again"
        report.repaired = repair and all(d.repaired for d in report.differences)
        return report

    def _repair(self, month: str, entity_id: str, snapshot: Snapshot, recounted: int) -> bool:
        """Set the count (and its index order) to the recount, if the aggregate is still exactly as read."""
        names = self._names
        attribute_names = {"#count": names.count, "#order": names.order, "#period": names.period}
        values: dict[str, Any] = {
            ":recounted": {"N": str(recounted)},
            ":order": {"N": str(order_of(recounted, entity_id))},
        }
        if snapshot.exists:
            conditions = ["attribute_exists(#period)", "#count = :stored"]
            values[":stored"] = {"N": str(snapshot.count)}
        else:
            conditions = ["attribute_not_exists(#count)"]
        for index, (name, value) in enumerate(snapshot.watermarks):
            attribute_names[f"#w{index}"] = name
            values[f":w{index}"] = {"S": value}
            conditions.append(f"#w{index} = :w{index}")
        update = "SET #count = :recounted, #order = :order"
        if not snapshot.exists:
            update += ", #period = :partition"
            values[":partition"] = {"S": leaderboard_partition(month, entity_id, self._shards)}
        try:
            self._dynamodb.update_item(
                TableName=self._table,
                Key={names.entity: {"S": entity_id}, names.sort_key: {"S": month}},
                UpdateExpression=update,
                ConditionExpression=" AND ".join(conditions),
                ExpressionAttributeNames=attribute_names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True
