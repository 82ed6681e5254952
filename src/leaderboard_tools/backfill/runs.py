"""Every run of the backfill, findable and endable: what lets the claims go only when no run can still claim.

A run may be killed, or paused (a laptop asleep) and go on later, and two may run at once: the done item says when
the scan ended, not that no run still counts. So each run is registered before it reads the done item, and counts
only while its fence items exist: every transaction a segment of it writes holds a ConditionCheck on that segment's
fence (TransactWriteItems: "either all of them succeed, or all of them fail"). One fence per segment:
"an item within a TransactWriteItems request is part of another ongoing TransactWriteItems request" is a conflict
(DynamoDB Developer Guide, "Transaction conflict handling"), and a segment's transactions follow one another. Once
the fences are deleted, by the run at its end or by `--release-check` for a run not heard from within the lease,
nothing the run counts can commit any more; every download it counted was read, so written, before that deletion's
answer. That moment, on DynamoDB's clock, is the run's bound: the claims go only once the aggregator has counted past
every run's bound.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from leaderboard_core.claims import BACKFILL_ITEM_PREFIX, CLAIM_KEY

RUNS_ITEM = BACKFILL_ITEM_PREFIX + "runs"
RUNS = "Runs"
"""The string set of every run's id, in the runs item: release reads it instead of scanning the claims table."""
STARTED_AT, HEARD_AT, ENDED_AT, ENDED_BY, PROCESS, SEGMENTS = (
    "StartedAt",
    "HeardAt",
    "EndedAt",
    "EndedBy",
    "Process",
    "Segments",
)
HEARTBEAT_SECONDS = 30.0
"""How often a live run says so in its run item."""
LEASE_SECONDS = 120.0
"""A run not heard from for this long is taken for dead, and `--release-check` ends it: four heartbeats missed (a
process alive after that only stops, at its next transaction, and a later run goes on)."""


def run_item(run_id: str) -> str:
    return f"{BACKFILL_ITEM_PREFIX}run#{run_id}"


def fence_item(run_id: str, segment: int) -> str:
    return f"{BACKFILL_ITEM_PREFIX}fence#{run_id}#{segment}"


def fence_check(claims_table: str, run_id: str, segment: int) -> dict[str, Any]:
    """A segment's transaction's action that lets it commit only while the segment's fence exists."""
    return {
        "ConditionCheck": {
            "TableName": claims_table,
            "Key": {CLAIM_KEY: {"S": fence_item(run_id, segment)}},
            "ConditionExpression": "attribute_exists(#key)",
            "ExpressionAttributeNames": {"#key": CLAIM_KEY},
        }
    }


def _key(name: str) -> dict[str, Any]:
    return {CLAIM_KEY: {"S": name}}


class RunLease:
    """One run's registration, heartbeat and end, in the claims table; `dynamo_time`: the latest DynamoDB's clock can
    be now."""

    def __init__(self, dynamodb: Any, claims_table: str, segments: int, dynamo_time: Callable[[], float]) -> None:
        self.run_id = uuid.uuid4().hex
        self.segments = segments
        self._dynamodb = dynamodb
        self._claims = claims_table
        self._dynamo_time = dynamo_time
        self._stop = threading.Event()
        self._beating: threading.Thread | None = None

    def register(self) -> None:
        """The fences first, then the run item, then its id among the runs: a run release cannot find never counts."""
        for segment in range(self.segments):
            self._dynamodb.put_item(TableName=self._claims, Item=_key(fence_item(self.run_id, segment)))
        now = {"N": str(self._dynamo_time())}
        self._dynamodb.put_item(
            TableName=self._claims,
            Item={
                **_key(run_item(self.run_id)),
                STARTED_AT: now,
                HEARD_AT: now,
                SEGMENTS: {"N": str(self.segments)},
                PROCESS: {"S": f"{socket.gethostname()} pid {os.getpid()}"},
            },
        )
        self._dynamodb.update_item(
            TableName=self._claims,
            Key=_key(RUNS_ITEM),
            UpdateExpression="ADD #runs :run",
            ExpressionAttributeNames={"#runs": RUNS},
            ExpressionAttributeValues={":run": {"SS": [self.run_id]}},
        )
        self._beating = threading.Thread(target=self._beat, name="backfill-heartbeat", daemon=True)
        self._beating.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                self._dynamodb.update_item(
                    TableName=self._claims,
                    Key=_key(run_item(self.run_id)),
                    UpdateExpression="SET #heard = :now",
                    ConditionExpression="attribute_not_exists(#ended)",
                    ExpressionAttributeNames={"#heard": HEARD_AT, "#ended": ENDED_AT},
                    ExpressionAttributeValues={":now": {"N": str(self._dynamo_time())}},
                )
            except Exception:  # a missed beat only shortens the lease; the run's own requests report errors
                continue

    def silence(self) -> None:
        """No more heartbeats (the process is going down without a word, or the run is ending)."""
        self._stop.set()
        if self._beating is not None and self._beating is not threading.current_thread():
            self._beating.join()

    def end(self) -> None:
        """The fences deleted, then the moment after it recorded: nothing this run counts commits past it."""
        self.silence()
        if self._beating is None:
            return  # never registered: it counted nothing
        end_run(self._dynamodb, self._claims, self.run_id, self.segments, self._dynamo_time, "the run itself")


def end_run(
    dynamodb: Any, claims_table: str, run_id: str, segments: int, dynamo_time: Callable[[], float], by: str
) -> float:
    """Delete the run's fences and record when (the latest DynamoDB's clock can be once they are deleted): the bound
    of every download the run counted. A bound recorded before is kept."""
    for segment in range(segments):
        dynamodb.delete_item(TableName=claims_table, Key=_key(fence_item(run_id, segment)))
    ended = dynamo_time()
    answer = dynamodb.update_item(
        TableName=claims_table,
        Key=_key(run_item(run_id)),
        UpdateExpression="SET #ended = if_not_exists(#ended, :ended), #by = if_not_exists(#by, :by)",
        ExpressionAttributeNames={"#ended": ENDED_AT, "#by": ENDED_BY},
        ExpressionAttributeValues={":ended": {"N": str(ended)}, ":by": {"S": by}},
        ReturnValues="ALL_NEW",
    )
    return float(answer["Attributes"][ENDED_AT]["N"])


@dataclass(frozen=True)
class RunSeen:
    """A run as release reads it."""

    run_id: str
    started_at: float | None
    heard_at: float | None
    ended_at: float | None
    segments: int
    fenced: bool
    """A fence of it is left: it may still count."""
    process: str


def runs_of(dynamodb: Any, claims_table: str) -> list[RunSeen]:
    """Every registered run, read consistently: the runs item, then each run's fence and run item."""
    get = dynamodb.get_item
    listed = get(TableName=claims_table, Key=_key(RUNS_ITEM), ConsistentRead=True).get("Item") or {}
    seen = []
    for run_id in sorted((listed.get(RUNS) or {}).get("SS", [])):
        item = get(TableName=claims_table, Key=_key(run_item(run_id)), ConsistentRead=True).get("Item") or {}
        segments = int(_number(item, SEGMENTS) or 0)
        fences = [
            get(TableName=claims_table, Key=_key(fence_item(run_id, segment)), ConsistentRead=True).get("Item")
            for segment in range(segments)
        ]
        seen.append(
            RunSeen(
                run_id,
                _number(item, STARTED_AT),
                _number(item, HEARD_AT),
                _number(item, ENDED_AT),
                segments,
                any(fence is not None for fence in fences),
                (item.get(PROCESS) or {}).get("S", "an unknown process"),
            )
        )
    return seen


def _number(item: dict[str, Any], name: str) -> float | None:
    value = (item.get(name) or {}).get("N")
    return None if value is None else float(value)
