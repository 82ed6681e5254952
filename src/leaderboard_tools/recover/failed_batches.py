"""The mapping's on-failure records, answered through the aggregator: from the shard's progress (two readers per shard),
or by its read-back of the range (one reader per shard: the module's `stream_readers = 1`)."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from leaderboard_tools.deployment import Deployment
from leaderboard_tools.reconcile import (
    AggregateId,
    download_aggregates,
)
from leaderboard_tools.recover.failure_messages import Message
from leaderboard_tools.stream_reading import (
    ShardReader,
    is_open,
    sequence_of,
    shard_progress,
    starting_sequence,
    stream_shards,
)

READ_BACK_EVENT = "readBack"
"""The one-reader aggregator's event: `{"readBack": <DDBStreamBatchInfo>}`, read that range and apply it. Its answer's
`readBack` says "applied", or "trimmed" / "unreadable" with `recount` true (the range is not in the stream whole)."""
READ_BACK_APPLIED = "applied"
BATCH_FIELDS = {"shardId": "shardId", "start": "startSequenceNumber", "end": "endSequenceNumber"}
"""The report's name of each field of the on-failure record's range."""


class BatchAnswerer:
    """Answers the mapping's on-failure records through the aggregator and the progress table."""

    def __init__(self, clients: Any, deployment: Deployment, stream_budget_seconds: float = 120.0) -> None:
        self._clients = clients
        self._deployment = deployment
        self._budget = stream_budget_seconds
        self._shards: dict[str, dict[str, Any]] | None = None

    def _shard(self, shard_id: str) -> dict[str, Any] | None:
        if self._shards is None:
            stream = self._deployment.stream_arn
            self._shards = (
                {s["ShardId"]: s for s in stream_shards(self._clients.dynamodbstreams, stream)} if stream else {}
            )
        return self._shards.get(shard_id)

    def _checkpoint(self, stream_arn: str, shard_id: str) -> int | None:
        assert self._deployment.progress_table is not None
        progress_item = shard_progress(self._clients.dynamodb, self._deployment.progress_table, stream_arn, shard_id)
        return int(progress_item.checkpoint) if progress_item.checkpoint else None

    def answer(self, message: Message) -> None:
        """Mark the message done when its range is counted; else say why not, or name every board for a recount."""
        if self._deployment.one_stream_reader:
            self._read_back(message)
            return
        info = message.body["DDBStreamBatchInfo"]
        stream_arn, shard_id = info.get("streamArn"), info.get("shardId")
        start, end = info.get("startSequenceNumber"), info.get("endSequenceNumber")
        if not (stream_arn and shard_id and start and end) or not str(end).isdigit():
            message.note = "the failure record names no shard and sequence range"
            return
        summary = message.batch = {"shardId": shard_id, "start": start, "end": end}
        if stream_arn != self._deployment.stream_arn or not self._deployment.progress_table:
            message.every_month = True
            message.note = (
                "not the table's current stream"
                if stream_arn != self._deployment.stream_arn
                else "the deployed aggregator keeps no progress table"
            ) + ": every board is recounted"
            return
        checkpoint = self._checkpoint(stream_arn, shard_id)
        if checkpoint is not None and checkpoint >= int(end):
            summary["checkpoint"] = str(checkpoint)
            message.done, message.note = True, "already counted: the shard's checkpoint is past the range"
            return
        shard = self._shard(shard_id)
        if shard is None:
            message.every_month = True
            message.note = (
                "the shard is no longer in the stream and its checkpoint is before the range: every board is recounted"
            )
            return
        summary["aggregates"] = self._touched(shard, start, end)
        try:
            response = self._invoke(stream_arn, shard_id, end)
        except (ClientError, BotoCoreError, RuntimeError) as error:
            message.retry, message.note = True, f"the aggregator could not count the range ({error}): run again"
            return
        checkpoint = self._checkpoint(stream_arn, shard_id)
        summary["checkpoint"] = None if checkpoint is None else str(checkpoint)
        summary["aggregator"] = {key: response.get(key) for key in ("checkpoint", "reachedBound")}
        if checkpoint is not None and checkpoint >= int(end):
            message.done, message.note = True, "counted by the aggregator through the range's end"
        else:
            message.retry, message.note = True, "the aggregator did not reach the range's end yet: run again"

    def _read_back(self, message: Message) -> None:
        """One reader per shard: no checkpoint says what was counted, so the aggregator reads the range back and applies
        it by its ledger items' versions (anything of it applied already changes nothing). A range the stream no longer
        holds whole (trimmed past the 24 hours, or unreadable) is repaired as `records_trimmed` is, by the rebase of
        every key's ledger item (rebase.py): its downloads could be of any key. recover reads nothing of the range
        itself: the aggregator's read is the one momentary reader."""
        info = message.body["DDBStreamBatchInfo"]
        if not isinstance(info, dict):
            message.note = "the failure record names no shard and sequence range"
            return
        message.batch = {key: info.get(name) for key, name in BATCH_FIELDS.items()}
        try:
            response = self._invoke_with({READ_BACK_EVENT: info})
        except (ClientError, BotoCoreError, RuntimeError) as error:
            message.retry, message.note = True, f"the aggregator could not read the range back ({error}): run again"
            return
        outcome = response.get(READ_BACK_EVENT)
        message.batch["readBack"] = {key: value for key, value in response.items() if key not in BATCH_FIELDS.values()}
        if outcome == READ_BACK_APPLIED and response.get("recount") is not True:
            message.done, message.note = True, "read back and applied by the aggregator"
        elif response.get("recount") is True:
            message.every_month = True
            reason = f" ({response['reason']})" if response.get("reason") else ""
            message.note = f"the range is {outcome or 'unreadable'}{reason}: every key's ledger item is rebased"
        else:
            message.retry = True
            message.note = (
                f"the aggregator did not read the range back (it answered {response!r}): is it deployed with "
                "stream_readers = 1? run again"
            )

    def _touched(self, shard: dict[str, Any], start: str, end: str) -> list[list[str]]:
        """The aggregates the range's downloads count in, read back from the stream (a report, not a decision)."""
        touched: set[AggregateId] = set()
        reader = ShardReader(
            self._clients.dynamodbstreams, self._deployment.stream_arn or "", budget_seconds=self._budget
        )

        def on_record(record: dict[str, Any]) -> None:
            touched.update(download_aggregates(record, self._deployment))

        reader.read(
            shard["ShardId"],
            on_record,
            at=start,
            past_bound=lambda record: sequence_of(record) > int(end),
            open_shard=is_open(shard),
            shard_start=starting_sequence(shard),
        )
        return sorted([entity, board] for entity, board in touched)

    def _invoke(self, stream_arn: str, shard_id: str, end: str) -> dict[str, Any]:
        """The aggregator's direct-invocation contract: count the shard from its checkpoint through `end`."""
        return self._invoke_with({"shardId": shard_id, "eventSourceARN": stream_arn, "throughSequenceNumber": end})

    def _invoke_with(self, event: dict[str, Any]) -> dict[str, Any]:
        """The aggregator's answer to `event`; a function error is raised with what it said."""
        assert self._deployment.aggregator_function is not None
        response = self._clients.lambda_.invoke(
            FunctionName=self._deployment.aggregator_function, Payload=json.dumps(event)
        )
        payload = json.loads(response["Payload"].read() or b"null")
        if response.get("FunctionError"):
            raise RuntimeError(f"{response['FunctionError']}: {payload}")
        return payload if isinstance(payload, dict) else {}
