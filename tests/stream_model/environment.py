"""What a design under test is given: the model's AWS (DynamoDB, DynamoDB Streams, SQS) and its clock.

Every design, the shipped one and the naive ones, sees AWS only through these fakes, so the
model decides everything AWS may decide: what a call returns, when it fails, what time it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

TABLE = "model-downloads"
PROGRESS_TABLE = "model-downloads-progress"
TABLE_ARN = f"arn:aws:dynamodb:us-east-1:000000000000:table/{TABLE}"
STREAM_ARN = f"{TABLE_ARN}/stream/2018-01-01T00:00:00.000"
FAILURE_QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/000000000000/model-aggregator-failures"


@dataclass
class FakeQueue:
    """The failure queue: the mapping's on-failure records and the aggregator's own messages, in arrival order."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    before_call: Callable[[str, dict[str, Any]], None] | None = None
    refuse: Callable[[], int] | None = None
    """Per SendMessageBatch: 0 accepts it, 1 fails the call, 2 fails every entry but the first (queue-batch-errors)."""

    def send_message(self, **parameters: Any) -> dict[str, Any]:
        if self.before_call is not None:
            self.before_call("SendMessage", parameters)
        self.messages.append(json.loads(parameters["MessageBody"]))
        return {"MessageId": str(len(self.messages))}

    def send_message_batch(self, **parameters: Any) -> dict[str, Any]:
        if self.before_call is not None:
            self.before_call("SendMessageBatch", parameters)
        entries = parameters["Entries"]
        refused = self.refuse() if self.refuse is not None else 0
        if refused == 1:
            raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "refused"}}, "SendMessageBatch")
        taken = entries[:1] if refused == 2 else entries
        for entry in taken:
            self.messages.append(json.loads(entry["MessageBody"]))
        failed = [{"Id": entry["Id"], "SenderFault": False, "Code": "InternalError"} for entry in entries[len(taken) :]]
        return {"Successful": [{"Id": entry["Id"]} for entry in taken], "Failed": failed}

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [message for message in self.messages if message.get("kind") == kind]

    def batch_infos(self) -> list[dict[str, Any]]:
        """The mapping's on-failure records (DDBStreamBatchInfo): shard and sequence range of what it discarded."""
        return [message["DDBStreamBatchInfo"] for message in self.messages if "DDBStreamBatchInfo" in message]


@dataclass
class Environment:
    dynamodb: Any
    """FakeDynamoDB: the main table TABLE and the progress table PROGRESS_TABLE."""
    streams: Any
    """FakeStreams: a DynamoDB Streams client over the model's shards."""
    queue: FakeQueue
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    """Time passes on the model's clock (the function waits, e.g. backing off a throttled read)."""
    table_items: Callable[[], list[dict[str, Any]]] = list
    """The table's downloads now, as a scan reads them (the model keeps them apart from FakeDynamoDB): what an
    operator's repair that reads the table finds."""
    deleted: Callable[[], list[tuple[str, str]]] = list
    """The keys (song, download id) the application deleted and did not write again (not those Time to Live deleted):
    what an operator knows of their own application, asked when a repair reports a key whose item is gone."""


class Design:
    """A way of counting downloads from the stream; `invoke` is its Lambda handler."""

    name: str = "design"
    uses_windows: bool = True
    """Tumbling-window events (window, state, shardId); otherwise plain stream events."""
    reports_batch_item_failures: bool = False
    reports_rejected: bool = False
    """Whether the design promises a `rejected_download` message for every malformed download."""
    sweeps_on_schedule: bool = False
    """Whether the design has a scheduled invocation (`{"lineageSweep": ...}`) that the world fires."""
    keeps_index: bool = False
    """Whether the design keeps the sparse leaderboard index (period and order attributes) the oracle checks."""
    expiry_moves_its_key: bool = False
    """Whether an expiry by TTL moves its key's later records too (a design that applies each record by the key's
    version, not as a difference): one the mapping gave up leaves the key's next write moving from a stale state until
    recover applies it, so a failure record naming the expiry covers what its old image counts."""
    repair_reads_only_the_tables: bool = False
    """Whether the operator's repair knows only what the tables hold now (the table's items, the ledger), not the
    omniscient recount: then an expiry the stream trimmed before delivery, and a report named, may stay beyond it
    (`histories.reachable_truth`)."""
    first_record_moves_from_base: bool = False
    """Ledger mode: whether a download's first stream record moves it from the ledger's Base (nothing, when no backfill
    counted it) to its new image, so that a failure record naming an edit of a download from before the stream that
    no backfill read covers the whole new image (`histories.moved_whole`)."""

    def invoke(self, event: dict[str, Any], remaining_ms: Callable[[], int]) -> dict[str, Any] | None:
        raise NotImplementedError

    def restart(self) -> None:
        """A new function instance (the last one was killed): what it cached is gone (default: nothing cached)."""

    def recover(
        self,
        message: dict[str, Any],
        invoke: Callable[[dict[str, Any]], Any],
        recount: Callable[[set[tuple[str, str]] | None], None],
    ) -> None:
        """What the operator's `recover` does with one failure-queue message (default: nothing).

        `invoke` invokes the function directly; `recount` asks for a recount of aggregates from the
        raw downloads (None: the whole table), done once at the end of the recover run.
        """

    def backfill(self, image: dict[str, Any]) -> None:
        """Ledger mode: `leaderboard-tools backfill` counts one item of the table as its scan reads it (default: a
        design without a backfill counts nothing the stream does not hold)."""

    def recount(self, env: Environment, counts: dict[tuple[str, str], int]) -> None:
        """The operator's recount of whole months: each aggregate set to its count in the raw downloads."""
        for (song, month), count in counts.items():
            env.dynamodb.update_item(
                TableName=TABLE,
                Key={"songID": {"S": song}, "SK": {"S": month}},
                UpdateExpression="SET #count = :count, #month = if_not_exists(#month, :month)",
                ExpressionAttributeNames={"#count": "DownloadCount", "#month": "Month"},
                ExpressionAttributeValues={":count": {"N": str(count)}, ":month": {"S": month}},
            )
