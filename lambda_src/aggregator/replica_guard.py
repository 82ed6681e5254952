"""The replica guard: with retractions (or ledger) on, refuse every record once the stream's table is found replicated.

AWS, DynamoDB Developer Guide, "Working with expired items and time to live (TTL)": "TTL deletions that are replicated
to global table regions are not identifiable in DynamoDB streams in the regions the deletion is replicated to", and
("Throughput capacity planning for DynamoDB global tables") "that work can be done in any Region". With a replica, a
REMOVE without TTL's identity may be an expiry in another region, and a retraction would take a count the expiry
should have kept. Replicas can be added "at any time" ("Tutorials: Creating global tables"), so the plan-time check
(terraform/source_table.tf, aggregates_table.tf) is not enough: the aggregator asks DescribeTable, cached per
execution environment as AWS advises for the control plane ("Instead of retrieving data for the same table multiple
times at short intervals, cache the data for processing", "Best practices for managing the control plane").

A table is replicated when DescribeTable lists a replica in another region (any status: CREATING too),
names a GlobalTableVersion, or lists witnesses (MRSC). Found once, it is written to the progress table
(REPLICAS_SEEN_KEY, a conditional write) and never forgotten by the tool: the records applied before the detection
cannot be told apart afterwards, and a removed replica's REMOVEs stay in the stream for up to 24 hours. From then on
every invocation that may apply a stream record is refused (raised: the batch fails and the mapping retries it),
INSERT and MODIFY too: with two readers per shard the aggregator applies records it reads itself, beyond the event,
and the deployment must be detached and recounted anyway (docs/exactly-once-retractions.md, "Replicated tables").
Legacy (2017.11.29) global tables do not show in DescribeTable: see the same page.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from leaderboard_core.bookkeeping import (
    FIRST_SEEN,
    REPLICA_REGIONS,
    REPLICAS_SEEN_KEY,
    SHARD_KEY,
    replicas_seen_of,
)
from telemetry import logger, metrics

CACHE_SECONDS = 60.0
"""How long one environment trusts DescribeTable's answer: a replica created meanwhile is found within a minute (plus
DescribeTable's own lag: it "uses an eventually consistent query"), at one call per warm environment a minute, far
below the control plane's 2,500 requests per second."""
STALE_SECONDS = 900.0
"""How long a clean answer still stands while DescribeTable or the progress table fails (a throttle, an outage): past
it, the invocation fails rather than apply a REMOVE unguarded."""
METRIC = "ReplicatedSource"
"""The EMF metric (terraform/alarms.tf, replicated_source): 1 for each invocation refused because of a replica."""


class ReplicatedSource(Exception):
    """The stream's table is (or was) replicated and retractions are on: nothing is applied."""


class ReplicaCheckUnanswered(Exception):
    """Neither DescribeTable nor the progress table answered, and no recent answer stands: nothing is applied."""


@dataclass(frozen=True)
class Seen:
    first_seen: int
    signs: tuple[str, ...]


def replication_signs(table: Mapping[str, Any], region: str) -> list[str]:
    """What in a DescribeTable `Table` says the table is replicated: a replica in another region (any status), a
    global table version, a witness; none, not replicated (as far as DescribeTable shows: legacy global tables no)."""
    signs = [
        f"replica {replica.get('RegionName')} ({replica.get('ReplicaStatus', 'status unknown')})"
        for replica in table.get("Replicas") or []
        if replica.get("RegionName") != region
    ]
    if table.get("GlobalTableVersion"):
        signs.append(f"GlobalTableVersion {table['GlobalTableVersion']}")
    signs += [f"witness {witness.get('RegionName')}" for witness in table.get("GlobalTableWitnesses") or []]
    return signs


def refusal_message(table_arn: str, progress_table: str, seen: Seen) -> str:
    """The deployment-level message: what was seen, since when, why nothing counts, what the operator does."""
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seen.first_seen))
    return (
        f"the deployment with progress table {progress_table} reads the stream of {table_arn}, found replicated "
        f"({'; '.join(seen.signs)}) at {since} (item {REPLICAS_SEEN_KEY}): AWS says TTL deletions replicated to "
        'global table regions "are not identifiable in DynamoDB streams in the regions the deletion is replicated '
        "to\", so with retractions (or ledger) on no deletion can be told from another region's expiry, and nothing "
        "more is counted. Detach (retractions = false and ledger = false), or remove the replica and, once its records "
        "have left the stream (24 h), delete that item by hand; then recount "
        '(docs/exactly-once-retractions.md, "Replicated tables"); the records refused meanwhile stay in the stream '
        "and reach the failure queue once the mapping gives up"
    )


@dataclass
class ReplicaGuard:
    """One execution environment's replica check: DescribeTable at most once per CACHE_SECONDS, sticky once seen."""

    dynamodb: Any
    table_arn: str
    progress_table: str
    clock: Callable[[], float] = time.time
    cache_seconds: float = CACHE_SECONDS
    stale_seconds: float = STALE_SECONDS
    answered_at: float | None = field(default=None, init=False)
    seen: Seen | None = field(default=None, init=False)

    def check(self) -> None:
        """Raise ReplicatedSource if the table is or was replicated; ReplicaCheckUnanswered if that cannot be told."""
        now = self.clock()
        if self.seen is None and (self.answered_at is None or now - self.answered_at >= self.cache_seconds):
            self._refresh(now)
        if self.seen is not None:
            message = refusal_message(self.table_arn, self.progress_table, self.seen)
            metrics.add_metric(name=METRIC, unit=MetricUnit.Count, value=1)
            logger.error("replicated source table: invocation refused", extra={"reason": message})
            raise ReplicatedSource(message)

    def _refresh(self, now: float) -> None:
        """The progress table's sticky item, else DescribeTable (recorded if replicated); on an error the last answer,
        while it is younger than stale_seconds."""
        try:
            seen = self._read_seen()
            if seen is None:
                name, region = _table_name(self.table_arn), self.table_arn.split(":")[3]
                signs = replication_signs(self.dynamodb.describe_table(TableName=name)["Table"], region)
                if signs:
                    seen = self._record(Seen(int(now), tuple(signs)))
        except (ClientError, BotoCoreError) as error:
            if self.answered_at is None or now - self.answered_at >= self.stale_seconds:
                raise ReplicaCheckUnanswered(
                    f"whether {self.table_arn} has replicas could not be read ({error}) and no answer from the last "
                    f"{self.stale_seconds:.0f} s stands: nothing is applied until it can be (retractions are on)"
                ) from error
            logger.warning(
                "replica check failed; the last answer stands",
                extra={"error": str(error), "answered_seconds_ago": round(now - self.answered_at)},
            )
            return
        self.seen, self.answered_at = seen, now

    def _read_seen(self) -> Seen | None:
        found = replicas_seen_of(
            self.dynamodb.get_item(
                TableName=self.progress_table, Key={SHARD_KEY: {"S": REPLICAS_SEEN_KEY}}, ConsistentRead=True
            ).get("Item")
        )
        return Seen(*found) if found is not None else None

    def _record(self, seen: Seen) -> Seen:
        """Write the sticky item where none is; another environment's, if it wrote first, is the one kept."""
        try:
            self.dynamodb.update_item(
                TableName=self.progress_table,
                Key={SHARD_KEY: {"S": REPLICAS_SEEN_KEY}},
                UpdateExpression="SET #first = :first, #signs = :signs, #table = :table",
                ConditionExpression="attribute_not_exists(#key)",
                ExpressionAttributeNames={
                    "#first": FIRST_SEEN,
                    "#signs": REPLICA_REGIONS,
                    "#table": "TableArn",
                    "#key": SHARD_KEY,
                },
                ExpressionAttributeValues={
                    ":first": {"N": str(seen.first_seen)},
                    ":signs": {"SS": list(dict.fromkeys(seen.signs))},
                    ":table": {"S": self.table_arn},
                },
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return self._read_seen() or seen
        return seen


def _table_name(table_arn: str) -> str:
    """`arn:<partition>:dynamodb:<region>:<account>:table/<name>` -> `<name>`."""
    return table_arn.split(":table/", 1)[1].split("/", 1)[0]
