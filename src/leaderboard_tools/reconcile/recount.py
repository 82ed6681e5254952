"""The recount: the downloads in the table, counted per aggregate, and the aggregates as read before it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from leaderboard_core.attributes import carries_aggregate_attributes, fits_partition_key
from leaderboard_core.bookkeeping import (
    RECOUNT_BAND,
    RECOUNT_HELD,
    RECOUNTED_THROUGH,
    WATERMARK_PREFIX,
)
from leaderboard_core.buckets import CATEGORY_SEPARATOR, download_boards, fits_sort_key, period_of_board, utc_moment
from leaderboard_core.index_layout import FIRST_REACHED, LATEST_COUNTED, instant_of
from leaderboard_core.source_items import download_identity
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.reconcile.phases import READING_AGGREGATES, RECOUNTING, item_count
from leaderboard_tools.reconcile.report import AggregateId, Snapshot


@dataclass
class Recount:
    counts: Counter[AggregateId] = field(default_factory=Counter)
    expired: dict[str, str] = field(default_factory=dict)
    ids: set[str] | None = None
    """The ids of the downloads counted, when a repair needs them (one aggregate's)."""
    latest: dict[AggregateId, int] = field(default_factory=dict)
    """The tie-break `first_reached`: each aggregate's latest counted download's instant, as the aggregator takes it."""

    def merge(self, part: Recount) -> None:
        self.counts.update(part.counts)
        for board, reason in part.expired.items():
            self.expired.setdefault(board, reason)
        for aggregate, instant in part.latest.items():
            self.latest[aggregate] = max(instant, self.latest.get(aggregate, instant))
        if self.ids is not None and part.ids is not None:
            self.ids |= part.ids


class TableRecount:
    """The Reconciler's reading of the table: the aggregates' snapshot and the downloads' recount."""

    def _paginate(self, operation: str, **parameters: Any) -> Iterator[dict[str, Any]]:
        yield from self._dynamodb.get_paginator(operation).paginate(**parameters)

    def _snapshot(self, targets: Mapping[str, Collection[str] | None] | None) -> dict[AggregateId, Snapshot]:
        names = self._names
        snapshots: dict[AggregateId, Snapshot] = {}
        whole_boards = (
            None if targets is None else sorted(board for board, songs in (targets or {}).items() if songs is None)
        )
        if targets is None or whole_boards:
            # A scan reads every item of the table, downloads too where the aggregates are beside them.
            self._phase(READING_AGGREGATES, item_count(self._dynamodb, self._aggregates_table), approximate=True)
            for item in self._scan_aggregates(whole_boards):
                if board_refusal(item[names.sort_key]["S"], self._deployment) is None:
                    snapshots[(item[names.entity]["S"], item[names.sort_key]["S"])] = self._snapshot_of(item)
        named = [(board, entity_id) for board, songs in (targets or {}).items() for entity_id in songs or ()]
        if named:
            self._phase(READING_AGGREGATES, len(named), unit="aggregates")
        for board, entity_id in named:
            item = self._dynamodb.get_item(
                TableName=self._aggregates_table,
                Key={names.entity: {"S": entity_id}, names.sort_key: {"S": board}},
                ConsistentRead=True,
            ).get("Item")
            self._on_phase(1)
            if item and carries_aggregate_attributes(item, names, self._deployment.retractions):
                snapshots[(entity_id, board)] = self._snapshot_of(item)
        return snapshots

    def _scan_aggregates(self, boards: list[str] | None) -> Iterator[dict[str, Any]]:
        names = self._names
        parameters: dict[str, Any] = {
            "FilterExpression": "attribute_exists(#period)",
            "ExpressionAttributeNames": {"#period": names.period},
        }
        if self._deployment.retractions:
            parameters["FilterExpression"] = "(attribute_exists(#period) OR attribute_exists(#count))"
            parameters["ExpressionAttributeNames"]["#count"] = names.count
        if boards:
            values = {f":m{index}": {"S": board} for index, board in enumerate(boards)}
            parameters["FilterExpression"] += f" AND #sk IN ({', '.join(values)})"
            parameters["ExpressionAttributeNames"]["#sk"] = names.sort_key
            parameters["ExpressionAttributeValues"] = values
        for items in self._parallel_scan(parameters):
            yield from items

    def _parallel_scan(self, parameters: dict[str, Any]) -> list[list[dict[str, Any]]]:
        """Aggregates only (few, one per song and board): each segment's items, read with consistent reads."""

        def segment(number: int) -> list[dict[str, Any]]:
            items: list[dict[str, Any]] = []
            for page in self._paginate(
                "scan",
                TableName=self._aggregates_table,
                Segment=number,
                TotalSegments=self._segments,
                ConsistentRead=True,
                **parameters,
            ):
                items.extend(page.get("Items", []))
                self._on_phase(page.get("ScannedCount", 0))
            return items

        with ThreadPoolExecutor(max_workers=self._segments) as pool:
            return list(pool.map(segment, range(self._segments)))

    def _snapshot_of(self, item: dict[str, Any]) -> Snapshot:
        watermarks = tuple(
            sorted((name, value["S"]) for name, value in item.items() if name.startswith(WATERMARK_PREFIX))
        )
        count = int(item[self._names.count]["N"]) if self._names.count in item else 0
        fence = int(item[RECOUNTED_THROUGH]["N"]) if RECOUNTED_THROUGH in item else None
        band = (item.get(RECOUNT_BAND) or {}).get("S")
        held = len((item.get(RECOUNT_HELD) or {}).get("SS") or [])
        latest = int(item[LATEST_COUNTED]["N"]) if LATEST_COUNTED in item else None
        return Snapshot(count, watermarks, fence, exists=True, band=band, held=held, latest=latest)

    def _recount(self, targets: Mapping[str, Collection[str] | None] | None) -> Recount:
        """Downloads per (song, board) of the targets; a scan when a whole board is wanted, else a Query per song."""
        whole = targets is None or any(songs is None for songs in targets.values())
        if whole:
            self._phase(RECOUNTING, item_count(self._dynamodb, self._table), approximate=True)
            parts = self._recount_scan(targets)
        else:
            songs = sorted({song for entities in (targets or {}).values() for song in entities or ()})
            self._phase(RECOUNTING)
            parts = [self._recount_songs(songs, targets)]
        merged = Recount()
        for part in parts:
            merged.merge(part)
        return merged

    def _count_pages(
        self,
        pages: Iterator[dict[str, Any]],
        targets: Mapping[str, Collection[str] | None] | None,
        keep_ids: bool = False,
        counted: bool = True,
    ) -> Recount:
        """`counted`: the items scanned advance the current phase (a repair's recount of one song does not: its phase
        counts aggregates)."""
        names, ttl, now = self._names, self._deployment.ttl_attribute, self._clock()
        part = Recount(ids=set() if keep_ids else None)
        first_reached = self._deployment.tie_break == FIRST_REACHED
        for page in pages:
            if counted:
                self._on_phase(page.get("ScannedCount", 0))
            for item in page.get("Items", []):
                entity = _string(item, names.entity)
                for board in boards_of_download(item, self._deployment):
                    if targets is not None and (board not in targets or not _wanted(targets[board], entity)):
                        continue
                    if ttl is not None and _expired(item.get(ttl), now):
                        part.expired.setdefault(
                            board,
                            f"a download of {entity} in {board} expired at {item[ttl]['N']} (TTL attribute {ttl}): "
                            "expired downloads may already be deleted, so a recount of this board would understate",
                        )
                    part.counts[(entity, board)] += 1
                    if first_reached:
                        instant = instant_of(utc_moment(item[names.timestamp]["S"]))
                        part.latest[(entity, board)] = max(instant, part.latest.get((entity, board), instant))
                    if part.ids is not None:
                        key = {
                            name: item[name]
                            for name in self._deployment.key_attributes or (names.entity, names.sort_key)
                        }
                        part.ids.add(download_identity(key, names.entity))
        return part

    def _download_parameters(self, keep_ids: bool = False) -> dict[str, Any]:
        return download_scan_parameters(self._deployment, with_key=keep_ids)

    def _recount_scan(self, targets: Mapping[str, Collection[str] | None] | None) -> list[Recount]:
        """One counter per scan segment, merged by the caller: memory bounded by (song, board) pairs."""

        def segment(number: int) -> Recount:
            pages = self._paginate(
                "scan",
                TableName=self._table,
                Segment=number,
                TotalSegments=self._segments,
                **self._download_parameters(),
            )
            return self._count_pages(pages, targets)

        with ThreadPoolExecutor(max_workers=self._segments) as pool:
            return list(pool.map(segment, range(self._segments)))

    def _recount_songs(
        self,
        songs: list[str],
        targets: Mapping[str, Collection[str] | None],
        keep_ids: bool = False,
        counted: bool = True,
    ) -> Recount:
        """The cheaper path for a few songs: their partitions; in a table not partitioned by song, one scan for up to
        MAX_IN_OPERANDS of them."""
        parameters = self._download_parameters(keep_ids)
        merged = Recount(ids=set() if keep_ids else None)
        if self._deployment.entity_is_partition or not self._deployment.key_attributes:
            reads = [
                self._paginate(
                    "query",
                    TableName=self._table,
                    KeyConditionExpression="#entity = :entity",
                    **_with_values(parameters, {":entity": song}),
                )
                for song in songs
            ]
        else:
            reads = [
                self._songs_scan(songs[start : start + MAX_IN_OPERANDS], parameters)
                for start in range(0, len(songs), MAX_IN_OPERANDS)
            ]
        for pages in reads:
            merged.merge(self._count_pages(pages, targets, keep_ids, counted))
        return merged

    def _songs_scan(self, songs: list[str], parameters: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Songs' downloads where they are not one partition each (a single-table design keyed otherwise): the table,
        scanned once for up to MAX_IN_OPERANDS of them; what it costs is the whole table's read units."""
        if len(songs) == 1:
            values, condition = {":entity": songs[0]}, "#entity = :entity"
        else:
            values = {f":entity{index}": song for index, song in enumerate(songs)}
            condition = f"#entity IN ({', '.join(values)})"
        filtered = _with_values(parameters, values)
        filtered["FilterExpression"] = (
            f"{parameters['FilterExpression']} AND {condition}" if "FilterExpression" in parameters else condition
        )
        for number in range(self._segments):
            yield from self._paginate(
                "scan", TableName=self._table, Segment=number, TotalSegments=self._segments, **filtered
            )


def download_scan_parameters(deployment: Deployment, with_key: bool = False) -> dict[str, Any]:
    """What a recount (and a backfill) reads of the downloads: the attributes that place a download on its boards
    (`boards_of_download`), with `with_key` the table's primary key too, and only items that are downloads (not
    aggregates beside them, and those source_item_filter marks); consistent reads.

    Each attribute is projected once: DynamoDB refuses a ProjectionExpression naming one twice ("Two document paths
    overlap"), which the entity would be where it is also the table's partition key (the guide's table)."""
    names, ttl = deployment.names, deployment.ttl_attribute
    wanted = {"#entity": names.entity, "#timestamp": names.timestamp}
    if with_key:
        wanted |= {f"#key{index}": name for index, name in enumerate(deployment.key_attributes or (names.sort_key,))}
    if ttl:
        wanted["#ttl"] = ttl
    if deployment.category_attribute:
        wanted["#category"] = deployment.category_attribute
    read: dict[str, str] = {}
    for placeholder, name in wanted.items():
        if name not in read.values():
            read[placeholder] = name
    conditions, attribute_names, values = [], dict(read), {}
    if deployment.aggregates_beside:
        conditions.append("attribute_not_exists(#period)")
        attribute_names["#period"] = names.period
    if deployment.marker is not None:
        condition, marker_names, marker_values = deployment.marker.scan_filter()
        conditions.append(condition)
        attribute_names |= marker_names
        values |= marker_values
    parameters: dict[str, Any] = {
        "ProjectionExpression": ", ".join(read),
        "ExpressionAttributeNames": attribute_names,
        "ConsistentRead": True,
    }
    if conditions:
        parameters["FilterExpression"] = " AND ".join(conditions)
    if values:
        parameters["ExpressionAttributeValues"] = values
    return parameters


MAX_IN_OPERANDS = 100
"""DynamoDB's IN comparator takes at most 100 values (Developer Guide, *Comparison operator and function
reference*)."""


def _with_values(parameters: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    strings = {name: {"S": value} for name, value in values.items()}
    return {**parameters, "ExpressionAttributeValues": {**parameters.get("ExpressionAttributeValues", {}), **strings}}


def _wanted(songs: Collection[str] | None, entity: str) -> bool:
    return songs is None or entity in songs


def _expired(value: Any, now: float) -> bool:
    """TTL compares an epoch time in seconds with the current time: any other value never expires the item."""
    if not isinstance(value, dict) or not isinstance(value.get("N"), str):
        return False
    try:
        return float(value["N"]) <= now
    except ValueError:
        return False


def board_refusal(board: str, deployment: Deployment) -> str | None:
    """Why a board is not one the deployment keeps, so never recounted (its downloads would be recounted as none)."""
    period = period_of_board(board, deployment.calendar)
    if period is None:
        names = deployment.calendar.period_names
        return f"{board} is not a board id (a bucket of {', '.join(names)}, or <bucket>@<category>)"
    if period not in deployment.periods:
        return (
            f"{board} is a {period} board: the deployment keeps {', '.join(deployment.periods)} boards "
            "(LEADERBOARD_PERIODS), never this one"
        )
    if CATEGORY_SEPARATOR in board and deployment.category_attribute is None:
        return f"{board} is a category board: the deployment keeps none (no CATEGORY_ATTRIBUTE)"
    return None


def _string(item: Mapping[str, Any], name: str) -> str | None:
    """A non-empty string attribute, as the aggregator reads one; None for anything else."""
    value = item.get(name)
    if isinstance(value, dict) and isinstance(value.get("S"), str) and value["S"] != "":
        return value["S"]
    return None


def boards_of_download(item: Mapping[str, Any], deployment: Deployment) -> list[str]:
    """Every board the aggregator counts a download in (a table item, or a stream record's new image), as it parses
    it: the same `download_boards`; none when it rejects the download (no song or timestamp, a song too long to key
    an aggregate, a bad category)."""
    names, category_attribute = deployment.names, deployment.category_attribute
    timestamp, entity = _string(item, names.timestamp), _string(item, names.entity)
    if entity is None or timestamp is None or not fits_partition_key(entity):
        return []
    try:
        moment = utc_moment(timestamp)
        deployment.calendar.wall(moment)
    except ValueError:
        return []
    category = None
    if category_attribute is not None and category_attribute in item:
        category = _string(item, category_attribute)
        if category is None:
            return []
    boards = download_boards(moment, deployment.periods, category, deployment.calendar)
    return boards if category is None or fits_sort_key(boards) else []
