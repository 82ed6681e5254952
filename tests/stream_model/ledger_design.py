"""Ledger mode (docs/exactly-once-model.md, "Ledger histories") in the model's own words, on the shipped watermark
engine: what the shipped ledger design must match, and what its naive variants (naive_designs.py) change.

Per download key K, a ledger item (the claims table's, `leaderboard_core.claims` names) holds `Owner`, `StreamFrom`
(set once: the first record of K the stream applied) and, when a backfill counted K first, `Entity` and
`Contribution` (its Base). A record r of K, classified against StreamFrom, moves:

- r precedes StreamFrom (same shard, lower sequence; or r's shard is an ancestor of StreamFrom's): nothing;
- r is StreamFrom: new(r) - Base;
- r follows StreamFrom (same shard, higher sequence; or StreamFrom's shard is an ancestor of r's): new(r) - old(r);
- r is an expiry by Time to Live: nothing, but it sets StreamFrom like any record. An expired download stays counted;
  were the expiry to claim nothing, a download the backfill counted, expired and written again under its key would
  take the backfill's Base back at its new INSERT (new - Base) and lose the expired download's count
  (regressions.LEDGER_HISTORIES: "a download the backfill counted, expired by TTL and written again...").

Every record's move is a function of the record and of two facts written once, so the watermarks, which apply each
record to each aggregate at most once, and the checkpoint, at least once, make every board end where the items' last
images say. The backfill counts an item in one transaction (ledger_backfill.py): the ledger item's Put, conditioned on
its absence, with Entity and Contribution, and the aggregates' ADDs.

The design swaps the record parse the shipped catch-up calls for one that claims each record's key and returns its
ledger move (its expiries by TTL too, which the shipped seam `deps.ledger` never sees); the shard being read comes from
the catch-up call. Both swaps are installed once and act only inside this design's invocations (`_ACTIVE`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import catch_up
import shard_lineage
import two_readers
from delivery import ShardRef
from download_records import AggregateKey, Change, Download, Ignored, Parsed, Rejected, parse_record
from leaderboard_core.bookkeeping import pad_sequence
from leaderboard_core.claims import (
    BACKFILL,
    BASE_CONTRIBUTION,
    BASE_ENTITY,
    CLAIM_KEY,
    CLAIM_OWNER,
    STREAM,
    STREAM_FROM,
    claim_key,
)
from leaderboard_core.source_items import expired_by_ttl
from tests.stream_model.designs import ShardWatermarkDesign, schema_of, shipped_ledger
from tests.stream_model.environment import Environment
from tests.stream_model.ledger_backfill import LEDGER_TABLE, backfill_item
from tests.stream_model.one_reader_design import one_reader

Moves = dict[AggregateKey, Decimal]


class UnorderedShards(AssertionError):
    """Two records of one key in shards neither of which descends from the other: the model never writes one key to
    two lineages, so this is the model's mistake (the design would report it and count nothing)."""


class LedgerDesign(ShardWatermarkDesign):
    """The shipped aggregator's watermark engine, every record of a download moved as its ledger item says."""

    takes_config = True
    first_record_moves_from_base = True

    def __init__(self, env: Environment, config: Any) -> None:
        super().__init__(env, config.aggregate_writes, schema=schema_of(config, retractions=True))
        self.name = f"ledger (the model's), {config.aggregate_writes}"

    # ------------------------------------------------------------------ the aggregator

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        outer = getattr(_ACTIVE, "design", None), getattr(_ACTIVE, "shard", None)
        _ACTIVE.design, _ACTIVE.shard = self, None
        try:
            return super().invoke(event, remaining_ms)
        finally:
            _ACTIVE.design, _ACTIVE.shard = outer

    @property
    def shard(self) -> ShardRef | None:
        """The shard this thread's catch-up reads (a paused direct invocation runs in a thread of its own)."""
        return getattr(_ACTIVE, "shard", None)

    def parse(self, record: dict[str, Any], schema: Any) -> Parsed:
        """A record of a download as its ledger move; anything else as the shipped parse says."""
        parsed = parse_record(record, schema)
        stream = record.get("dynamodb") or {}
        keys = stream.get("Keys")
        if not self._is_download_record(record, schema) or not keys:
            return parsed
        assert self.shard is not None, "a record parsed outside a catch-up: its shard is not known"
        rejection = parsed if isinstance(parsed, Rejected) else getattr(parsed, "rejection", None)
        sequence = pad_sequence(stream["SequenceNumber"])
        ledger = self.claim(keys, f"{self.shard.stream_arn}|{self.shard.shard_id}|{sequence}")
        if expired_by_ttl(record):
            return parsed  # claims, moves nothing: what was counted of the key stays counted, Base included
        moves = self.moves(record, schema, ledger, sequence)
        changes = tuple(
            Change(key, _number(amount), _number(self.image_part(stream.get("NewImage"), schema, key)))
            for key, amount in moves.items()
            if amount
        )
        if not changes:
            return rejection or Ignored("ledger: the record moves nothing", stream["SequenceNumber"])
        return Download(
            changes[0].key,
            sequence,
            stream["SequenceNumber"],
            parsed.created if isinstance(parsed, Download) else None,
            changes[0].amount,
            tuple(change.key for change in changes[1:]),
            parsed.download_id if isinstance(parsed, Download) else None,
            keys,
            moves=changes,
            rejection=rejection if isinstance(rejection, Rejected) else None,
        )

    @staticmethod
    def _is_download_record(record: dict[str, Any], schema: Any) -> bool:
        """An INSERT, MODIFY or REMOVE of an item (no aggregate), an expiry by TTL too: what the ledger orders."""
        if record.get("eventName") not in ("INSERT", "MODIFY", "REMOVE"):
            return False
        stream = record.get("dynamodb") or {}
        images = [stream.get(name) for name in ("NewImage", "OldImage") if isinstance(stream.get(name), dict)]
        return bool(images) and not any(schema.is_aggregate(image) for image in images)

    def claim(self, keys: dict[str, Any], first: str) -> dict[str, Any]:
        """The ledger item of the key, StreamFrom set to `first` unless some record set it before."""
        response = self.env.dynamodb.update_item(
            TableName=LEDGER_TABLE,
            Key={CLAIM_KEY: {"S": claim_key(keys)}},
            UpdateExpression="SET #owner = if_not_exists(#owner, :stream), #from = if_not_exists(#from, :first)",
            ExpressionAttributeNames={"#owner": CLAIM_OWNER, "#from": STREAM_FROM},
            ExpressionAttributeValues={":stream": {"S": STREAM}, ":first": {"S": first}},
            ReturnValues="ALL_NEW",
        )
        return response.get("Attributes") or {}

    def moves(self, record: dict[str, Any], schema: Any, ledger: dict[str, Any], sequence: str) -> Moves:
        """The lead's rule: nothing before StreamFrom, new - Base at it, new - old after it."""
        stream = record.get("dynamodb") or {}
        assert self.shard is not None
        here = (self.shard.shard_id, sequence)
        _, from_shard, from_sequence = ledger[STREAM_FROM]["S"].rsplit("|", 2)
        order = self.order(here, (from_shard, from_sequence))
        new = self.contribution(stream.get("NewImage"), schema)
        if order < 0:
            return {}
        if order == 0:
            return _less(new, self.base(ledger))
        return _less(new, self.contribution(stream.get("OldImage"), schema))

    def order(self, record: tuple[str, str], first: tuple[str, str]) -> int:
        """-1: the record precedes StreamFrom; 0: it is StreamFrom; 1: it follows. Within a shard by sequence, across
        shards by lineage only (a child's sequence numbers may be lower than its parent's)."""
        if record[0] == first[0]:
            return (record[1] > first[1]) - (record[1] < first[1])
        if first[0] in self.ancestors(record[0]):
            return 1
        if record[0] in self.ancestors(first[0]):
            return -1
        raise UnorderedShards(f"records of one key in {record[0]} and {first[0]}")

    def ancestors(self, shard_id: str) -> list[str]:
        """The shard's ancestors, nearest first, from the progress table (each shard's item names its parent)."""
        assert self.shard is not None
        found: list[str] = []
        parent = self.dependencies.progress.read(ShardRef(self.shard.stream_arn, shard_id)).parent_shard_id
        while parent is not None and parent not in found:
            found.append(parent)
            parent = self.dependencies.progress.read(ShardRef(self.shard.stream_arn, parent)).parent_shard_id
        return found

    @staticmethod
    def base(ledger: dict[str, Any]) -> Moves:
        """What the backfill counted for the key (nothing when the stream claimed it first)."""
        if ledger.get(CLAIM_OWNER) != {"S": BACKFILL}:
            return {}
        entity = ledger[BASE_ENTITY]["S"]
        return {
            AggregateKey(entity, board): Decimal(value["N"])
            for board, value in ledger.get(BASE_CONTRIBUTION, {}).get("M", {}).items()
        }

    @staticmethod
    def contribution(image: dict[str, Any] | None, schema: Any) -> Moves:
        """What one image counts by the shipped parser: its amount on each of its boards (nothing if it cannot)."""
        if not isinstance(image, dict):
            return {}
        parsed = parse_record({"eventName": "INSERT", "dynamodb": {"NewImage": image, "SequenceNumber": "1"}}, schema)
        if not isinstance(parsed, Download):
            return {}
        return {change.key: Decimal(change.amount) for change in parsed.changes}

    def image_part(self, image: dict[str, Any] | None, schema: Any, key: AggregateKey) -> Decimal:
        return self.contribution(image, schema).get(key, Decimal(0))

    # ------------------------------------------------------------------ the backfill

    def backfill(self, image: dict[str, Any]) -> None:
        backfill_item(self.env.dynamodb, self.schema, image, self.leaderboard_shards)


def _less(new: Moves, old: Moves) -> Moves:
    return {key: new.get(key, Decimal(0)) - old.get(key, Decimal(0)) for key in new.keys() | old.keys()}


def _number(amount: Decimal) -> int | Decimal:
    """As the shipped parser gives amounts: a whole number as an int."""
    return int(amount) if amount == amount.to_integral_value() else amount.normalize()


_ACTIVE = threading.local()
"""The ledger design this thread's invocation runs, and the shard its catch-up reads: invocations of several designs
and histories, some paused in threads, never see another's."""
_SHIPPED_PARSE, _SHIPPED_CATCH_UP = catch_up.parse_record, catch_up.catch_up


def _parse(record: Any, schema: Any) -> Parsed:
    design = getattr(_ACTIVE, "design", None)
    return design.parse(record, schema) if design is not None else _SHIPPED_PARSE(record, schema)


def _catch_up(invocation: Any, shard: ShardRef, *rest: Any) -> Any:
    if getattr(_ACTIVE, "design", None) is None:
        return _SHIPPED_CATCH_UP(invocation, shard, *rest)
    outer, _ACTIVE.shard = getattr(_ACTIVE, "shard", None), shard
    try:
        return _SHIPPED_CATCH_UP(invocation, shard, *rest)
    finally:
        _ACTIVE.shard = outer


catch_up.parse_record = _parse
two_readers.catch_up = shard_lineage.catch_up = _catch_up
"""Installed once, for good: outside a ledger design's invocation each is the shipped function itself."""


def ledger(env: Environment, config: Any) -> LedgerDesign:
    """The model's factory for ledger histories."""
    return LedgerDesign(env, config)


LEDGER_DESIGNS: dict[str, Callable[[Environment, Any], Any]] = {
    "the model's ledger": ledger,
    "shipped": shipped_ledger,
    "one reader": one_reader,
}
"""Every ledger design the suite holds to the ledger histories: the model's, the shipped aggregator's ledger mode
(designs.py), and the one-reader design (one_reader_design.py), all with the model's backfill (ledger_backfill.py)."""
