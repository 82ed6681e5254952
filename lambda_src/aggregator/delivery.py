"""What one invocation delivers: records of one shard of this table's stream, and the tumbling window around them.

The event source mapping sends tumbling-window events, which name the shard (`shardId`) and
carry the window's `state`. Sequence numbers are ordered only within a shard, so every
watermark is kept per stream and shard; a record that cannot be tied to a shard of this
table's stream is refused here, loudly, before anything is counted.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from leaderboard_core.band_holds import shard_digest
from leaderboard_core.bookkeeping import WATERMARK_PREFIX, pad_sequence


@dataclass(frozen=True)
class ShardRef:
    """One shard of one stream of the table: the scope in which sequence numbers compare."""

    stream_arn: str
    shard_id: str

    @property
    def table_arn(self) -> str:
        return self.stream_arn.rsplit("/stream/", 1)[0]

    @property
    def stream_label(self) -> str:
        return self.stream_arn.rsplit("/stream/", 1)[-1]

    @property
    def watermark_name(self) -> str:
        return watermark_name(self.stream_arn, self.shard_id)


@functools.lru_cache(maxsize=1024)
def watermark_name(stream_arn: str, shard_id: str) -> str:
    """The aggregate attribute holding a shard's watermark: short, and distinct per stream and shard."""
    return WATERMARK_PREFIX + shard_digest(stream_arn, shard_id)


@dataclass(frozen=True)
class Window:
    start: str
    end: str


@dataclass(frozen=True)
class Refused:
    """A record this invocation cannot count exactly; it goes to the failure queue, never silently away."""

    reason: str
    raw_sequence: str | None
    record: Any
    shard_id: str | None = None
    stream_arn: str | None = None


@dataclass
class Delivery:
    shard_id: str | None
    shard: ShardRef | None
    """None when no record or field names the stream: then only a window state can say which one."""
    records: list[dict[str, Any]]
    window: Window | None
    """None for a direct invocation: only the event source mapping sends window events."""
    state: dict[str, Any] = field(default_factory=dict)
    is_final: bool = True
    terminated_early: bool = False
    refused: list[Refused] = field(default_factory=list)
    through_sequence: str | None = None
    """A direct invocation's `throughSequenceNumber` (padded): count the shard at least this far."""

    @property
    def is_direct(self) -> bool:
        return self.window is None


def _sequence_of(record: Any) -> str | None:
    if isinstance(record, dict) and isinstance(record.get("dynamodb"), dict):
        sequence = record["dynamodb"].get("SequenceNumber")
        return sequence if isinstance(sequence, str) else None
    return None


def _refuse_all(records: list[Any], reason: str) -> list[Refused]:
    return [Refused(reason, _sequence_of(record), record) for record in records]


def parse_delivery(event: Any, table_arn: str) -> Delivery:
    """Split an invocation event into the records of one shard of this table's stream and what is refused.

    Never raises on bad input: an event that names no shard, or a record of another table's
    stream, is refused record by record with the reason.
    """
    if not isinstance(event, dict):
        return Delivery(
            None, None, [], None, refused=[Refused("event is not an object", None, {"event": repr(event)[:1000]})]
        )
    records = event.get("Records") or []
    if not isinstance(records, list):
        return Delivery(None, None, [], None, refused=[Refused("Records is not a list", None, {"Records": records})])
    window = _window_of(event.get("window"))
    state = event.get("state") if isinstance(event.get("state"), dict) else {}
    is_final = bool(event.get("isFinalInvokeForWindow")) if window is not None else True
    terminated_early = bool(event.get("isWindowTerminatedEarly"))
    shard_id = event.get("shardId")
    if not isinstance(shard_id, str) or not shard_id:
        return Delivery(
            None,
            None,
            [],
            window,
            state,
            is_final,
            terminated_early,
            _refuse_all(records, "the event names no shardId: sequence numbers compare only within a shard"),
        )
    stream_prefix = f"{table_arn}/stream/"
    event_stream = event.get("eventSourceARN")
    accepted: list[dict[str, Any]] = []
    refused: list[Refused] = []
    stream_arn = event_stream if isinstance(event_stream, str) and event_stream else None
    for record in records:
        record_stream = record.get("eventSourceARN") if isinstance(record, dict) else None
        if not isinstance(record_stream, str) or not record_stream.startswith(stream_prefix):
            refused.append(Refused(f"record is not from a stream of {table_arn}", _sequence_of(record), record))
            continue
        if stream_arn is None:
            stream_arn = record_stream
        if record_stream != stream_arn:
            refused.append(
                Refused(f"record is from {record_stream}, the event from {stream_arn}", _sequence_of(record), record)
            )
            continue
        accepted.append(record)
    if stream_arn is not None and not stream_arn.startswith(stream_prefix):
        refused.extend(_refuse_all(accepted, f"the event's stream {stream_arn} is not a stream of {table_arn}"))
        accepted = []
    shard = ShardRef(stream_arn, shard_id) if stream_arn is not None else None
    through = event.get("throughSequenceNumber") if window is None else None
    if through is not None and not (isinstance(through, str) and through.isdigit() and len(through) <= 40):
        refused.append(Refused(f"throughSequenceNumber {through!r} is not a sequence number", None, {"event": event}))
        through = None
    return Delivery(
        shard_id,
        shard,
        accepted,
        window,
        state,
        is_final,
        terminated_early,
        refused,
        pad_sequence(through) if through else None,
    )


def _window_of(value: Any) -> Window | None:
    if isinstance(value, dict) and isinstance(value.get("start"), str) and isinstance(value.get("end"), str):
        return Window(value["start"], value["end"])
    return None
