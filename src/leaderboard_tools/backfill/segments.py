"""The backfill's own items in the claims table: a run resumes from each segment's saved place, and the done item
keeps the scan's end on DynamoDB's clock, which the claims must outlast."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_core.claims import BACKFILL_DONE, BACKFILL_ITEM_PREFIX, CLAIM_KEY
from leaderboard_tools.backfill.refusals import BackfillRefused, check_history
from leaderboard_tools.backfill.report import Tally, _number, iso, tally_of_item
from leaderboard_tools.reconcile.clock import DynamoClock, ServerClock, interval_clock

START_ITEM = BACKFILL_ITEM_PREFIX + "start"
DONE_ITEM = BACKFILL_DONE
SEGMENTS_ATTRIBUTE, STARTED_AT, ENDED_AT, ENDED_AT_TEXT = "Segments", "StartedAt", "EndedAt", "EndedAtText"
LAST_KEY, SEGMENT_DONE = "LastKey", "Done"
"""The backfill's own items: `start` (Segments, StartedAt), `segment#<i>of<N>` (LastKey: the scan's place after the
last page counted, Done, the counters), `done` (EndedAt: the scan's end on DynamoDB's clock, the counters)."""


def segment_item(index: int, segments: int) -> str:
    return f"{BACKFILL_ITEM_PREFIX}segment#{index}of{segments}"


class DynamoTime(DynamoClock):
    """DynamoDB's clock from its Date headers (reconcile's DynamoClock); this machine's clock is not relied on, so
    no margin is checked against it."""

    def __init__(self, dynamodb: Any, table: str, monotonic: Callable[[], float] = interval_clock) -> None:
        self._dynamodb = dynamodb
        self._table = table
        self._monotonic = monotonic
        self._clock = time.time
        self._margin = math.inf
        self._server = ServerClock()

    def latest(self) -> float:
        """The latest DynamoDB's clock can be now: every request answered before this call was served by then."""
        return self._dynamodb_latest()


class SegmentPlaces:
    """The Backfill's reads and writes of its own items: the run's start, each segment's place, the run's end."""

    def _get(self, name: str) -> dict[str, Any] | None:
        return self._dynamodb.get_item(TableName=self._claims, Key={CLAIM_KEY: {"S": name}}, ConsistentRead=True).get(
            "Item"
        )

    def _begin(self, register: Callable[[], None]) -> dict[str, Any] | None:
        """The done item when the backfill is done; else the run's start is recorded (or found, with the same
        segments: a different --segments would scan other ranges than the saved places name), the run registered
        (runs.py), and the done item read again: a run that finished meanwhile may already be released."""
        done = self._get(DONE_ITEM)
        if done is not None:
            return done
        start = self._get(START_ITEM)
        if start is None:
            check_history(self._dynamodb, self._deployment, self._claims)
            item = {
                CLAIM_KEY: {"S": START_ITEM},
                SEGMENTS_ATTRIBUTE: {"N": str(self._segments)},
                STARTED_AT: {"N": str(self._dynamo_time())},
            }
            try:
                self._dynamodb.put_item(
                    TableName=self._claims,
                    Item=item,
                    ConditionExpression="attribute_not_exists(#key)",
                    ExpressionAttributeNames={"#key": CLAIM_KEY},
                )
                start = item
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
                start = self._get(START_ITEM) or item  # another run started at once
        saved = int(_number(start, SEGMENTS_ATTRIBUTE))
        if saved != self._segments:
            raise BackfillRefused(
                f"an unfinished backfill of {self._deployment.table} scans in {saved} segments: run it with "
                f"--segments {saved} (its saved places name those segments' ranges); nothing was written"
            )
        register()
        done = self._get(DONE_ITEM)
        if done is not None:
            return done
        self._report.started_at = _number(start, STARTED_AT) or None
        return None

    def _segment_state(self, index: int) -> tuple[bool, dict[str, Any] | None]:
        item = self._get(segment_item(index, self._segments)) or {}
        return bool((item.get(SEGMENT_DONE) or {}).get("BOOL")), (item.get(LAST_KEY) or {}).get("M")

    def _save(self, index: int, last_key: dict[str, Any] | None, page: Tally) -> None:
        """The segment's place after a page all of whose transactions succeeded, and its counters."""
        names = {"#done": SEGMENT_DONE, "#last": LAST_KEY}
        values: dict[str, Any] = {":done": {"BOOL": last_key is None}}
        additions = []
        for name, attribute in Tally.COUNTERS.items():
            names[f"#{name}"] = attribute
            values[f":{name}"] = {"N": str(getattr(page, name))}
            additions.append(f"#{name} :{name}")
        update = "SET #done = :done"
        if last_key is None:
            tail = " REMOVE #last"
        else:
            update += ", #last = :last"
            values[":last"] = {"M": last_key}
            tail = ""
        self._dynamodb.update_item(
            TableName=self._claims,
            Key={CLAIM_KEY: {"S": segment_item(index, self._segments)}},
            UpdateExpression=f"{update} ADD {', '.join(additions)}{tail}",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def _finish(self) -> None:
        """Every segment done: the scan's end on DynamoDB's clock and every run's totals, in the done item."""
        total = Tally()
        for index in range(self._segments):
            total.add(tally_of_item(self._get(segment_item(index, self._segments)) or {}))
        ended = self._dynamo_time()
        item = {
            CLAIM_KEY: {"S": DONE_ITEM},
            SEGMENTS_ATTRIBUTE: {"N": str(self._segments)},
            ENDED_AT: {"N": str(ended)},
            ENDED_AT_TEXT: {"S": iso(ended) or ""},
            **{attribute: {"N": str(getattr(total, name))} for name, attribute in Tally.COUNTERS.items()},
        }
        try:
            self._dynamodb.put_item(
                TableName=self._claims,
                Item=item,
                ConditionExpression="attribute_not_exists(#key) OR #ended < :ended",
                ExpressionAttributeNames={"#key": CLAIM_KEY, "#ended": ENDED_AT},
                ExpressionAttributeValues={":ended": item[ENDED_AT]},
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            # Another run ended later: it may have claimed downloads written after this one's end, so its end is the
            # one the claims must outlive.
            item = self._get(DONE_ITEM) or item
        self._report.ended_at = _number(item, ENDED_AT)
        self._report.total = tally_of_item(item)
