"""A repair's band records, delivered from the band queue at the band's deadline: was the band closed?

A repair (`reconcile --repair`, `recover`) records each band in the band queue before opening it, delayed
toward the band's deadline. When the band queue's mapping delivers the record here, the aggregate says what
became of the band: gone (closed by its repair, or replaced by a later repair, which recorded its own) and the
record is done; still there before its deadline (a delay is at most 15 minutes) and it goes back to the queue;
still there past it and its repair died with the band open, holding downloads nobody will count: the record is
copied to the failure queue, where the alarm fires and `recover` recounts the aggregate.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from dependencies import Dependencies
from download_records import AggregateKey
from leaderboard_core.bookkeeping import RECOUNT_BAND
from telemetry import logger, metrics

BAND_RECORD_KIND = "recount_band"
CLOCK_MARGIN_SECONDS = 60
"""How far this function's clock may be from the repair's (DynamoDB's): a band is expired only this long past."""
GONE, OPEN, EXPIRED = "gone", "open", "expired"


def is_band_record_event(event: Any) -> bool:
    """An event of the band queue's mapping: SQS records only."""
    records = event.get("Records") if isinstance(event, dict) else None
    return bool(records) and all(isinstance(r, dict) and r.get("eventSource") == "aws:sqs" for r in records)


@dataclass(frozen=True)
class BandRecord:
    entity_id: str
    board: str
    band: str
    deadline: int

    @classmethod
    def parse(cls, body: str) -> BandRecord:
        """The record a repair sent; ValueError, saying what is wrong, for anything else.

        A record sent before band records named their board `board` names it `period`: read as well."""
        try:
            data = json.loads(body)
        except ValueError as error:
            raise ValueError(f"not JSON: {error}") from error
        if not isinstance(data, dict) or data.get("kind") != BAND_RECORD_KIND:
            raise ValueError(f"not a {BAND_RECORD_KIND} record")
        entity, band, deadline = (data.get(key) for key in ("entityId", "band", "deadline"))
        board = data.get("board", data.get("period"))
        if not (isinstance(entity, str) and isinstance(board, str) and isinstance(band, str)):
            raise ValueError("entityId, board and band must be strings")
        if not isinstance(deadline, int) or isinstance(deadline, bool):
            raise ValueError("deadline must be an integer (epoch seconds)")
        return cls(entity, board, band, deadline)

    def as_message(self) -> dict[str, Any]:
        return {
            "kind": BAND_RECORD_KIND,
            "entityId": self.entity_id,
            "board": self.board,
            "band": self.band,
            "deadline": self.deadline,
        }


def verdict(record: BandRecord, aggregate: dict[str, Any] | None, now: float) -> str:
    """GONE: past the band's deadline, the aggregate no longer carries it; OPEN: not yet past its deadline (a repair
    records its band before opening it: absent may mean not open yet), or past it by less than the clock margin;
    EXPIRED: the aggregate still carries it past its deadline and the margin."""
    carried = ((aggregate or {}).get(RECOUNT_BAND) or {}).get("S")
    if now <= record.deadline:
        return OPEN
    if carried != record.band:
        return GONE
    return EXPIRED if now > record.deadline + CLOCK_MARGIN_SECONDS else OPEN


@dataclass
class Settled:
    """What became of one event's records; `retry`: the message ids Lambda puts back in the queue."""

    gone: int = 0
    open: int = 0
    expired: list[BandRecord] = field(default_factory=list)
    malformed: list[tuple[str, str]] = field(default_factory=list)
    """(message id, why): reported to the failure queue, then done."""
    retry: list[str] = field(default_factory=list)
    unsettled: list[tuple[str, str]] = field(default_factory=list)
    """(message id, why): past its deadline and the margin, yet neither done nor reported (a read or a report
    failed): retried, and counted (`UnsettledBandRecords`), so that a record that keeps failing raises an alarm."""


def settle(
    event: dict[str, Any],
    read_aggregate: Callable[[AggregateKey], dict[str, Any] | None],
    send_failures: Callable[[list[dict[str, Any]]], bool],
    now: Callable[[], float],
) -> Settled:
    """Each record's band looked up on its aggregate (a strongly consistent read); expired ones and records not
    understood reported to the failure queue. A record whose report did not get there, or whose read failed,
    goes back to the queue."""
    settled = Settled()
    for message in event["Records"]:
        message_id = str(message.get("messageId"))
        try:
            record = BandRecord.parse(str(message.get("body")))
        except (ValueError, RecursionError) as error:
            report = {"kind": "refused_record", "reason": f"band record not understood: {error}", "record": message}
            if send_failures([report]):
                settled.malformed.append((message_id, str(error)))
            else:
                settled.retry.append(message_id)
            continue
        try:
            state = verdict(record, read_aggregate(AggregateKey(record.entity_id, record.board)), now())
        except Exception as error:  # a failed read: the record comes back, nothing is decided on it
            settled.retry.append(message_id)
            if now() > record.deadline + CLOCK_MARGIN_SECONDS:
                settled.unsettled.append((message_id, f"its aggregate could not be read: {error}"))
            continue
        if state == GONE:
            settled.gone += 1
        elif state == OPEN:
            settled.open += 1
            settled.retry.append(message_id)
        elif send_failures([record.as_message()]):
            settled.expired.append(record)
        else:
            settled.retry.append(message_id)
            settled.unsettled.append(
                (message_id, "its band outlived its deadline; the failure queue refused the report")
            )
    return settled


def settle_band_records(event: dict[str, Any], dependencies: Dependencies) -> dict[str, Any]:
    """The band queue's records, at their bands' deadlines: a band its repair never closed goes to the failure queue."""
    settled = settle(event, dependencies.store.read, dependencies.send_failures, time.time)
    for record in settled.expired:
        logger.error(
            "a repair's band outlived its deadline: its repair did not close it; reported for recover",
            extra={"entity_id": record.entity_id, "board": record.board, "band": record.band},
        )
    for message_id, why in settled.malformed:
        logger.error("band record not understood; reported", extra={"message_id": message_id, "reason": why})
    for message_id, why in settled.unsettled:
        logger.error(
            "band record past its deadline not settled; retried", extra={"message_id": message_id, "reason": why}
        )
    metrics.add_metric(name="ExpiredRepairBands", unit=MetricUnit.Count, value=len(settled.expired))
    metrics.add_metric(name="UnsettledBandRecords", unit=MetricUnit.Count, value=len(settled.unsettled))
    logger.info(
        "band records",
        extra={"gone": settled.gone, "open": settled.open, "expired": len(settled.expired), "retried": settled.retry},
    )
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in settled.retry]}
