"""Ledger mode with one reader per shard (docs/exactly-once-one-reader.md): the shipped aggregator
with STREAM_READERS=1 (lambda_src/aggregator/one_reader.py, versioned_ledger.py, delivery_notes.py, stream_shards.py),
driven through the model's fakes and held to the ledger histories beside ledger_design.py's. This file is the adapter
and the operator's recover; the design, in the model's words:

The handler applies only the records the mapping delivers: no GetRecords, no checkpoint of its own. Per download key
K, a versioned ledger item (the claims table's, keyed by `leaderboard_core.claims.claim_key`) holds

- `Version`: `<shard id>|<padded sequence number>` of the last record of K applied (absent where the backfill counted
  K and no record of it was applied since),
- `Contribution`: board -> amount, what K counts now; `Entity` the entity it counts for (read from the image),
- `Decreased`: the aggregates K's moves took something from, which may have reached 0 and must leave the index.

A record r of K is applied iff it is after Version: same shard and a higher sequence number, or Version's shard an
ancestor of r's (lineage from each shard's ParentShardId); the backfill's item, or none, is before every record. A
record not after Version changes nothing (a duplicate, or an older record retried after a newer one); a record whose
shard and Version's are unrelated by lineage is reported (`refused_record`) and never guessed. Applying moves K from
Contribution to what r's new image counts (a REMOVE: nothing), in one TransactWriteItems per entity: each key's ledger
Put conditioned on the Version read, and one ADD per aggregate of the summed moves. A condition that fails re-reads
and retries. Because each move ends where a record's image says, whatever came before, the latest record of K applied
decides K's count: order, duplicates and bisection do not matter, and every record need only be delivered once at
least. An expiry by Time to Live is no state but retention: its old image stays counted, once, by the expiry's own
item (`expired#<key>|<version>`), wherever the expiry stands against Version.

What the mapping may not deliver: a batch it gives up names its range on the failure queue, and recover hands that
range to the function (`{"readBack": <DDBStreamBatchInfo>}`), which reads it back (GetShardIterator, GetRecords: a
momentary reader) and applies it like any delivery; read too late, the range is trimmed, the function says so, and
recover repairs by the rebase (leaderboard_tools.recover.rebase): each key's ledger item moved to what its item counts
now, with the aggregates, by transactions conditioned like the handler's; a key whose item is gone is reported, and the
operator names those the application deleted, which the rebase then takes back. What no repair can know is a download
written and expired by TTL within a range the stream trimmed before delivery (no item, no ledger item: only the
model's omniscient recount saw it); the design reports that range, and the oracle allows the boards to miss that
download only where a report names it (histories.reachable_truth). A mapping paused past the retention
skips trimmed records without a word (L6): the handler keeps per shard the highest record delivered and its creation
time, and the records of invocations not yet finished, and reports `records_trimmed` wherever a record that old may
have been skipped (at the next delivery of the shard or its first child, and on the schedule): a conservative test
that reads nothing from the stream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from email.utils import formatdate
from typing import Any

import one_reader as shipped_one_reader
import wiring
from aggregate_store import AggregateStore
from aggregator_settings import Settings
from dependencies import Dependencies
from failure_messages import send_to_failure_queue
from leaderboard_core.attributes import AttributeNames
from leaderboard_core.claims import claim_key
from leaderboard_dev.backlog_stream import InlineExecutor
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.recover.rebase import rebase
from shard_progress import ProgressStore
from tests.stream_model.designs import schema_of
from tests.stream_model.environment import FAILURE_QUEUE_URL, PROGRESS_TABLE, TABLE, TABLE_ARN, Design, Environment
from tests.stream_model.histories import History
from tests.stream_model.ledger_backfill import LEDGER_TABLE, backfill_item
from versioned_ledger import VersionedLedger

READ_BACK_ATTEMPTS = 5
"""Invocations recover makes of one given-up range before it recounts instead."""


class OneReaderDesign(Design):
    """The shipped aggregator with STREAM_READERS=1 (lambda_src/aggregator/one_reader.py), built with the model's fakes,
    and the operator's recover, which hands each given-up range back to the function (`readBack`)."""

    uses_windows = True
    """The window event names its shard (L1); the state is not used."""
    reports_rejected = True
    sweeps_on_schedule = True
    keeps_index = True
    takes_config = True
    expiry_moves_its_key = True
    repair_reads_only_the_tables = True
    ledger_class: type[VersionedLedger] = VersionedLedger
    """The shipped fold; a naive variant (naive_designs.py) swaps one of its rules."""

    def __init__(self, env: Environment, config: Any) -> None:
        self.env = env
        self.schema = schema_of(config, retractions=True)
        self.leaderboard_shards = 1
        self.settings = Settings(
            aggregates_table_name=TABLE,
            table_arn=TABLE_ARN,
            progress_table_name=PROGRESS_TABLE,
            schema=self.schema,
            leaderboard_shards=self.leaderboard_shards,
            failure_queue_url=FAILURE_QUEUE_URL,
            aggregate_writes=config.aggregate_writes,
            write_concurrency=1,
            deadline_margin_ms=1000,
            claims_table_name=LEDGER_TABLE,
            ledger=True,
            stream_readers=1,
        )
        self.name = f"one reader (shipped), {config.aggregate_writes}"
        self.restart()

    def restart(self) -> None:
        """A new function instance (after a kill or a cold start): nothing cached survives."""
        env = self.env
        progress = ProgressStore(env.dynamodb, PROGRESS_TABLE, clock=env.clock, ledger=True)
        store = AggregateStore(
            env.dynamodb, TABLE, self.schema, progress, clock=env.clock, leaderboard_shards=self.leaderboard_shards
        )
        self.dependencies = Dependencies(
            store=store,
            progress=progress,
            streams=env.streams,
            executor=InlineExecutor(),
            send_failures=lambda messages: send_to_failure_queue(env.queue, FAILURE_QUEUE_URL, messages),
            clock=env.clock,
            sleep=env.sleep,
        )
        wiring.one_reader_parts(self.dependencies, self.settings, env.dynamodb)
        shipped = self.dependencies.versioned_ledger
        assert shipped is not None
        self.dependencies.versioned_ledger = self.ledger_class(
            env.dynamodb, LEDGER_TABLE, TABLE, self.schema, self.leaderboard_shards, shipped.shards
        )

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        response, _summary = shipped_one_reader.process_event(event, self.dependencies, self.settings)
        return response

    def backfill(self, image: dict[str, Any]) -> None:
        backfill_item(self.env.dynamodb, self.schema, image, self.leaderboard_shards)

    def recount(self, env: Environment, counts: dict[tuple[str, str], int]) -> None:
        """The operator's repair with one reader per shard: not the recount's counts but the rebase of every key's
        ledger item to the table's item, with the aggregates (a recount would leave the ledger behind). The keys it
        reports gone, the operator answers from the application's own knowledge: those it deleted are taken back by
        a second run (`reconcile --repair --deleted-key`), those that expired stay counted; as the report asks, so is
        one whose expiry the aggregator kept by its own item with no order against the version counted
        (`unorderedExpiries`): that count is the expiry's already."""
        tables, deployment = ModelTables(env), deployment_of(self.settings)
        report = rebase(tables, deployment)
        deleted = {claim_key({"songID": {"S": song}, "SK": {"S": download}}) for song, download in env.deleted()}
        named = [gone["claimKey"] for gone in report.gone if gone["claimKey"] in deleted or gone["unorderedExpiries"]]
        if named:
            rebase(tables, deployment, deleted=named)

    def recover(self, message: dict[str, Any], invoke: Callable[[dict[str, Any]], Any], recount: Any) -> None:
        """The operator's recover: a range the mapping gave up is handed to the function to read back and apply; a
        range it cannot read whole (trimmed), records trimmed before delivery and records no order placed, recounted."""
        info = message.get("DDBStreamBatchInfo")
        if info is not None:
            for _ in range(READ_BACK_ATTEMPTS):
                succeeded, response = invoke({shipped_one_reader.READ_BACK_EVENT: info})
                if succeeded and isinstance(response, dict):
                    if response.get("recount"):
                        recount(None)
                    return
            recount(None)
        elif message.get("kind") == "records_trimmed":
            recount(None)
        elif message.get("kind") == "refused_record" and message.get("entityId") and message.get("board"):
            recount({(message["entityId"], message["board"])})


class ModelTables:
    """The model's DynamoDB as the rebase reads it: the downloads from the world's table (`Environment.table_items`),
    the ledger and the aggregates from FakeDynamoDB, where every write goes."""

    def __init__(self, env: Environment) -> None:
        self.env = env

    def _downloads(self) -> dict[tuple[str, str], dict[str, Any]]:
        return {(item["songID"]["S"], item["SK"]["S"]): item for item in self.env.table_items()}

    def get_paginator(self, operation: str) -> ModelTables:
        assert operation == "scan"
        return self

    def paginate(self, **parameters: Any) -> list[dict[str, Any]]:
        """One page: every download of the table, or every item of another table (the ledger)."""
        table = parameters["TableName"]
        if table == TABLE:
            return [{"Items": list(self._downloads().values())}]
        return [{"Items": [dict(item) for (name, _), item in self.env.dynamodb.items.items() if name == table]}]

    def get_item(self, **parameters: Any) -> dict[str, Any]:
        """A read of the table answers with DynamoDB's Date header, on the model's clock (the rebase records it)."""
        if parameters["TableName"] == TABLE:
            key = parameters["Key"]
            item = self._downloads().get((key["songID"]["S"], key["SK"]["S"]))
            date = {"ResponseMetadata": {"HTTPHeaders": {"date": formatdate(self.env.clock(), usegmt=True)}}}
            return ({"Item": item} if item is not None else {}) | date
        return dict(self.env.dynamodb.get_item(**parameters))

    def transact_write_items(self, **parameters: Any) -> Any:
        return self.env.dynamodb.transact_write_items(**parameters)

    def update_item(self, **parameters: Any) -> Any:
        return self.env.dynamodb.update_item(**parameters)

    def put_item(self, **parameters: Any) -> Any:
        return self.env.dynamodb.put_item(**parameters)

    def delete_item(self, **parameters: Any) -> Any:
        return self.env.dynamodb.delete_item(**parameters)


def deployment_of(settings: Settings) -> Deployment:
    """What the operator tools discover around the model's aggregator: ledger mode, one reader per shard."""
    schema = settings.schema
    return Deployment(
        table=TABLE,
        table_arn=TABLE_ARN,
        stream_arn=None,
        names=AttributeNames(
            schema.entity, schema.sort_key, schema.timestamp, schema.period, schema.count, schema.order
        ),
        leaderboard_shards=settings.leaderboard_shards,
        query_leaderboard_shards=settings.leaderboard_shards,
        query_leaderboard_shards_previous=None,
        ttl_attribute=None,
        window_seconds=60,
        failure_queue_url=FAILURE_QUEUE_URL,
        progress_table=PROGRESS_TABLE,
        aggregator_function="model-aggregator",
        query_function=None,
        mapping_uuid=None,
        mapping_state=None,
        periods=schema.periods,
        calendar=schema.calendar,
        category_attribute=schema.category,
        sum_attribute=schema.amount,
        key_attributes=(schema.entity, schema.sort_key),
        marker=schema.marker,
        claims_table=LEDGER_TABLE,
        retractions=True,
        tie_break=schema.tie_break,
        ledger=True,
        stream_readers=1,
    )


HAZARDS_IT_NEVER_MEETS = frozenset(
    {
        "pruning",
        "empty GetRecords page",
        "throttled GetRecords",
        "trimmed records",
        "expired iterator",
        "direct paused while the mapping goes on",
        "fresh state on retry",
    }
)
"""Hazards this design meets seldom or never: those of a design that reads shards itself or keeps watermarks (it reads
a shard only when recover hands it a given-up range to read back), a direct invocation paused midway (it refuses one
before any call) and a retry's fresh state (it keeps none)."""


def with_its_mapping(history: History) -> History:
    """The history with the mapping this design asks for: MaximumRetryAttempts and MaximumRecordAgeInSeconds -1 (None
    in the model), failed batches retried, and bisected, until their records expire."""
    config = replace(history.config, maximum_retry_attempts=None, maximum_record_age=None)
    return History(config, history.steps)


def one_reader(env: Environment, config: Any) -> OneReaderDesign:
    """The model's factory for ledger histories on the one-reader design."""
    return OneReaderDesign(env, config)
