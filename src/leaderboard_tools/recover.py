"""Answer the failure queue: make exact what each message names, then delete it; keep what is not exact yet.

The failure queue holds five kinds of messages:
- the mapping's on-failure record (`DDBStreamBatchInfo`: stream, shard, sequence range; no data),
  for a batch or window it gave up on. Those records stay in the stream (24 hours) behind the
  shard's checkpoint, and the aggregator counts from its checkpoint: recover reads the range
  (through empty pages, to the range's end or the shard's end) to name the aggregates it touches,
  invokes the deployed aggregator directly with `throughSequenceNumber` = the range's end unless the
  shard's progress `Checkpoint` already passed it, and deletes the message only once the
  checkpoint is at or past the end (everything at or below it is counted);
- `records_trimmed` (the aggregator's checkpoint fell behind the stream's retention): the lost
  records' downloads could be of any month (their timestamps are the writers'), so every month of
  the table is recounted and repaired;
- `refused_record`: its aggregate (when the message or its record names one) is recounted;
- `rejected_download`: a malformed download, never countable: reported, then deleted;
- `recount_band`, a band whose repair never closed it: a repair records each band in the band queue,
  delayed toward its deadline, and the aggregator meets the record there then and copies it here if
  the band is still open (without the band queue, the repair records it here itself; recover reads
  the band queue too, and answers its records the same way). Deleted with nothing to do once the
  aggregate no longer carries that band (closed, or replaced by a later repair, which recorded its
  own); kept while the band is open and its deadline has not passed on DynamoDB's clock; past it
  (the repair was killed), the aggregate is recounted and repaired, which replaces the band with
  one this run closes.

All recounts of a run happen at once, in one `reconcile --repair` pass over every month the
messages name. A message is deleted only when everything it names is exact; an aggregate with
downloads still in flight is pending, and its messages wait for the next run. While recover works
it keeps its messages invisible to other consumers, renewing their visibility timeout.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from leaderboard_tools.deployment import Deployment
from leaderboard_tools.reconcile import (
    BAND_MESSAGE_KIND,
    RECOUNT_BAND,
    AggregateId,
    ClockDisagrees,
    Reconciler,
    RecountUnsupported,
    RunReport,
    download_aggregate,
)
from leaderboard_tools.stream_reading import (
    ShardReader,
    is_open,
    sequence_of,
    shard_progress,
    starting_sequence,
    stream_shards,
)

VISIBILITY_SECONDS = 120
"""Renewed every third of it while recover runs: a crashed run frees its messages within two minutes."""
MAX_MESSAGES = 1000
"""Per run; the rest waits for the next run (memory and the run's length stay bounded)."""


@dataclass
class Message:
    message_id: str
    receipt_handle: str
    body: dict[str, Any]
    kind: str = "unknown"
    aggregates: dict[str, set[str] | None] = field(default_factory=dict)
    """Month -> songs to recount (None: the whole month)."""
    every_month: bool = False
    note: str = ""
    done: bool = False
    retry: bool = False
    """Not exact yet only because the stream has not caught up (downloads in flight, a checkpoint behind)."""
    batch: dict[str, Any] = field(default_factory=dict)
    """For the mapping's failure records: the range, the aggregates it touches, the checkpoint."""
    expired_band: AggregateId | None = None
    """For a band's record: the aggregate still carrying it past its deadline."""
    queue_url: str = ""
    """The queue it was received from, where it is deleted or made visible again."""

    def summary(self) -> dict[str, Any]:
        months = ["every month"] if self.every_month else sorted(self.aggregates)
        return {"kind": self.kind, "months": months, "note": self.note, "retry": self.retry}


@dataclass
class RecoveryReport:
    messages: int = 0
    deleted: int = 0
    kept: list[dict[str, Any]] = field(default_factory=list)
    batches: list[dict[str, Any]] = field(default_factory=list)
    rejected_downloads: list[dict[str, Any]] = field(default_factory=list)
    refused_records: list[dict[str, Any]] = field(default_factory=list)
    bands: list[dict[str, Any]] = field(default_factory=list)
    reconciled: list[dict[str, Any]] = field(default_factory=list)

    @property
    def pending(self) -> bool:
        """Everything kept waits only for the stream to catch up: run again later."""
        return bool(self.kept) and all(entry["retry"] for entry in self.kept)

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "deleted": self.deleted,
            "kept": self.kept,
            "batches": self.batches,
            "rejected_downloads": self.rejected_downloads,
            "refused_records": self.refused_records,
            "bands": self.bands,
            "reconciled": self.reconciled,
        }


class VisibilityKeeper:
    """Renews the visibility timeout of the messages recover holds, so no other consumer sees them meanwhile.

    SQS: a received message stays invisible for the visibility timeout, which ChangeMessageVisibility
    extends (up to 12 hours from its receipt).
    """

    def __init__(self, sqs: Any, queue_url: str, visibility_seconds: int) -> None:
        self._sqs = sqs
        self._queue_url = queue_url
        self._seconds = visibility_seconds
        self._held: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="visibility-keeper", daemon=True)

    def hold(self, messages: list[Message]) -> None:
        with self._lock:
            self._held.update({message.message_id: message.receipt_handle for message in messages})

    def release(self, message: Message) -> None:
        with self._lock:
            self._held.pop(message.message_id, None)

    def __enter__(self) -> VisibilityKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopped.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(self._seconds / 3):
            with self._lock:
                held = list(self._held.values())
            for start in range(0, len(held), 10):
                entries = [
                    {"Id": str(index), "ReceiptHandle": handle, "VisibilityTimeout": self._seconds}
                    for index, handle in enumerate(held[start : start + 10])
                ]
                try:
                    self._sqs.change_message_visibility_batch(QueueUrl=self._queue_url, Entries=entries)
                except (ClientError, BotoCoreError):
                    continue


def receive_all(sqs: Any, queue_url: str, visibility_seconds: int, limit: int = MAX_MESSAGES) -> list[dict[str, Any]]:
    """Messages until a long poll comes back empty (long polling queries all servers: no false empty answer)."""
    messages: list[dict[str, Any]] = []
    seen: set[str] = set()
    while len(messages) < limit:
        page = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=2,
            VisibilityTimeout=visibility_seconds,
        ).get("Messages", [])
        fresh = [message for message in page if message["MessageId"] not in seen]
        if not fresh:
            return messages
        seen.update(message["MessageId"] for message in fresh)
        messages.extend(fresh)
    return messages


def classify(raw: dict[str, Any], deployment: Deployment) -> Message:
    try:
        body = json.loads(raw["Body"])
    except ValueError:
        body = {}
    message = Message(raw["MessageId"], raw["ReceiptHandle"], body if isinstance(body, dict) else {})
    kind = message.body.get("kind")
    if "DDBStreamBatchInfo" in message.body:
        message.kind = "failed_batch"
    elif kind == "records_trimmed":
        message.kind = kind
        if _empty_gap(message.body):
            message.done, message.note = (
                True,
                "nothing was trimmed: the first readable record is not after the checkpoint",
            )
        else:
            message.every_month = True
    elif kind == "rejected_download":
        message.kind = kind
    elif kind == "refused_record":
        message.kind = kind
        found = _refused_aggregate(message.body, deployment)
        if found:
            message.aggregates = {found[1]: {found[0]}}
    elif kind == BAND_MESSAGE_KIND:
        message.kind = kind
    return message


def answer_band(message: Message, clients: Any, deployment: Deployment, reconciler: Reconciler) -> None:
    """Done if the aggregate no longer carries the band; waiting while its deadline has not passed; else its
    aggregate is named for the run's recount, whose repair replaces the band."""
    body = message.body
    entity, period, band, deadline = (body.get(key) for key in ("entityId", "period", "band", "deadline"))
    if not all(isinstance(value, str) for value in (entity, period, band)) or not isinstance(deadline, int):
        message.note = "the band's record names no aggregate, band and deadline"
        return
    names = deployment.names
    item = clients.dynamodb.get_item(
        TableName=deployment.table,
        Key={names.entity: {"S": entity}, names.sort_key: {"S": period}},
        ConsistentRead=True,
    ).get("Item")
    now = reconciler.dynamodb_time()
    if ((item or {}).get(RECOUNT_BAND) or {}).get("S") != band:
        if now <= deadline:
            # The record is sent before the band opens: until the deadline, absent may mean not open yet.
            message.retry, message.note = True, f"its band is not open, or closed already: kept until {deadline}"
        else:
            message.done, message.note = True, "its band is closed or replaced by a later repair's: nothing to do"
    elif now <= deadline:
        message.retry, message.note = True, f"its repair's band is open until {deadline}: run again after it"
    else:
        message.aggregates = {period: {entity}}
        message.expired_band = (entity, period)
        message.note = f"its repair's band outlived its deadline {deadline} (the repair was stopped): recount"


def _empty_gap(body: dict[str, Any]) -> bool:
    """The records lost lie strictly between the checkpoint and the first readable record: none if it is not after."""
    checkpoint, first = body.get("checkpoint"), body.get("firstReadableSequence")
    return (
        isinstance(checkpoint, str)
        and isinstance(first, str)
        and checkpoint.isdigit()
        and first.isdigit()
        and (int(first) <= int(checkpoint))
    )


def _refused_aggregate(body: dict[str, Any], deployment: Deployment) -> AggregateId | None:
    if isinstance(body.get("entityId"), str) and isinstance(body.get("period"), str):
        return body["entityId"], body["period"]
    record = body.get("record")
    if isinstance(record, dict) and "entityId" in record and "period" in record:
        return str(record["entityId"]), str(record["period"])
    return download_aggregate(record, deployment.names)


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
        progress = shard_progress(self._clients.dynamodb, self._deployment.progress_table, stream_arn, shard_id)
        return int(progress.checkpoint) if progress.checkpoint else None

    def answer(self, message: Message) -> None:
        """Mark the message done when its shard's checkpoint is at or past the range's end; else say why not."""
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
            ) + ": every month is recounted"
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
                "the shard is no longer in the stream and its checkpoint is before the range: every month is recounted"
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

    def _touched(self, shard: dict[str, Any], start: str, end: str) -> list[list[str]]:
        """The aggregates the range's downloads count in, read back from the stream (a report, not a decision)."""
        touched: set[AggregateId] = set()
        reader = ShardReader(
            self._clients.dynamodbstreams, self._deployment.stream_arn or "", budget_seconds=self._budget
        )

        def on_record(record: dict[str, Any]) -> None:
            found = download_aggregate(record, self._deployment.names)
            if found:
                touched.add(found)

        reader.read(
            shard["ShardId"],
            on_record,
            at=start,
            past_bound=lambda record: sequence_of(record) > int(end),
            open_shard=is_open(shard),
            shard_start=starting_sequence(shard),
        )
        return sorted([entity, month] for entity, month in touched)

    def _invoke(self, stream_arn: str, shard_id: str, end: str) -> dict[str, Any]:
        """The aggregator's direct-invocation contract: count the shard from its checkpoint through `end`."""
        assert self._deployment.aggregator_function is not None
        response = self._clients.lambda_.invoke(
            FunctionName=self._deployment.aggregator_function,
            Payload=json.dumps({"shardId": shard_id, "eventSourceARN": stream_arn, "throughSequenceNumber": end}),
        )
        payload = json.loads(response["Payload"].read() or b"null")
        if response.get("FunctionError"):
            raise RuntimeError(f"{response['FunctionError']}: {payload}")
        return payload if isinstance(payload, dict) else {}


def _targets(messages: list[Message]) -> dict[str, set[str] | None] | None:
    """Every month the messages name, at once (None: every month of the table)."""
    if any(message.every_month for message in messages):
        return None
    targets: dict[str, set[str] | None] = {}
    for message in messages:
        for month, songs in message.aggregates.items():
            if songs is None or targets.get(month, set()) is None:
                targets[month] = None
            else:
                current = targets.setdefault(month, set())
                assert current is not None
                current |= songs
    return targets


def _refusal(message: Message, run: RunReport | None) -> str | None:
    """Why the recount refused an aggregate the message names (TTL, or a board that is not a month's)."""
    if run is None:
        return None
    return next((r.refused for r in run.months if r.refused and r.month in message.aggregates), None)


def _exact(message: Message, run: RunReport | None) -> tuple[bool, bool]:
    """Whether everything the message names is exact now; if not, whether it waits only on the stream."""
    if run is None:
        return False, False
    reports = {report.month: report for report in run.months}
    months: Collection[str] = reports if message.every_month else message.aggregates
    exact, retry = True, True
    for month in months:
        report = reports.get(month)
        if report is None:
            continue
        if report.refused:
            exact, retry = False, False
            continue
        songs = None if message.every_month else message.aggregates.get(month)
        for difference in report.differences:
            if (songs is None or difference.entity_id in songs) and not difference.repaired:
                exact = False
                retry = retry and difference.state in ("pending", "conflict", "unknown")
    return exact, not exact and retry


def recover(
    clients: Any,
    deployment: Deployment,
    reconciler: Reconciler,
    queue_url: str,
    *,
    visibility_seconds: int = VISIBILITY_SECONDS,
    answerer: BatchAnswerer | None = None,
) -> RecoveryReport:
    """Answer the queue's messages (see the module); a clock refusal of the repair stops the run, saying what it did."""
    report = RecoveryReport()
    try:
        return _recover(report, clients, deployment, reconciler, queue_url, visibility_seconds, answerer)
    except ClockDisagrees as error:
        outcome = _stopped_outcome(error, report, visibility_seconds)
        raise ClockDisagrees(error.reason, error.repaired, outcome) from error


def _stopped_outcome(error: ClockDisagrees, report: RecoveryReport, visibility_seconds: int) -> str:
    """What a run stopped by a clock refusal did: the repair's writes, the aggregator's invocations, no deletion."""
    repair = (
        f"recover stopped; its repair had repaired {', '.join(error.repaired)} (their bands closed at once) and "
        "repaired nothing else"
        if error.repaired
        else "recover stopped; it changed no aggregate"
    )
    invoked = sum(1 for batch in report.batches if "aggregates" in batch)
    batches = (
        f"; before it, recover invoked the aggregator for {invoked} of the mapping's failed batches, which counts "
        "their records once from the shard's checkpoint whatever this machine's clock (nothing to undo)"
        if invoked
        else ""
    )
    return (
        f"{repair}{batches}; no message was deleted: they are visible again within {visibility_seconds} s for the "
        "next run, once this is fixed"
    )


def _recover(
    report: RecoveryReport,
    clients: Any,
    deployment: Deployment,
    reconciler: Reconciler,
    queue_url: str,
    visibility_seconds: int,
    answerer: BatchAnswerer | None,
) -> RecoveryReport:
    sqs = clients.sqs
    answerer = answerer or BatchAnswerer(clients, deployment)
    queues = [queue_url] + [url for url in (deployment.recount_band_queue_url,) if url and url != queue_url]
    with contextlib.ExitStack() as stack:
        keepers = {url: stack.enter_context(VisibilityKeeper(sqs, url, visibility_seconds)) for url in queues}
        messages = []
        for url in queues:
            received = [classify(raw, deployment) for raw in receive_all(sqs, url, visibility_seconds)]
            for message in received:
                message.queue_url = url
            keepers[url].hold(received)
            messages += received
        report.messages = len(messages)
        for message in messages:
            if message.kind == "failed_batch":
                answerer.answer(message)
                report.batches.append(message.batch | {"done": message.done, "note": message.note})
            elif message.kind == "rejected_download":
                report.rejected_downloads.append(
                    {"reason": message.body.get("reason"), "sequenceNumber": message.body.get("sequenceNumber")}
                )
                message.done = True
            elif message.kind == "refused_record":
                report.refused_records.append(
                    {"reason": message.body.get("reason"), "sequenceNumber": message.body.get("sequenceNumber")}
                )
                message.done = not message.aggregates
            elif message.kind == BAND_MESSAGE_KIND:
                answer_band(message, clients, deployment, reconciler)
                report.bands.append(
                    {key: message.body.get(key) for key in ("entityId", "period", "band", "deadline")}
                    | {"done": message.done, "note": message.note}
                )
                if message.expired_band is not None:
                    message.note = ""  # what the recount leaves says why it is kept, if it is
        to_recount = [m for m in messages if not m.done and (m.aggregates or m.every_month)]
        run = None
        if to_recount:
            expired = {m.expired_band for m in to_recount if m.expired_band is not None}
            try:
                run = reconciler.run(_targets(to_recount), repair=True, replace_bands=expired)
            except RecountUnsupported as unsupported:
                # The other messages are still answered; these stay, each saying why, for a recount by hand.
                for message in to_recount:
                    message.note = str(unsupported)
                to_recount = []
        if run is not None:
            report.reconciled = [month.as_json() for month in run.months]
        for message in messages:
            if message in to_recount:
                message.done, message.retry = _exact(message, run)
                if not message.done:
                    message.note = message.note or _refusal(message, run) or "not every aggregate it names is exact yet"
                if message.every_month and run is not None and run.boards_not_recounted:
                    # The lost records count in every board the aggregator keeps; only months are recounted here.
                    message.done, message.retry = False, False
                    message.note = (
                        f"its records also count in {', '.join(run.boards_not_recounted)}, which recover does not "
                        "recount: months were recounted; recount the other boards from the raw records"
                    )
            if message.done:
                sqs.delete_message(QueueUrl=message.queue_url, ReceiptHandle=message.receipt_handle)
                keepers[message.queue_url].release(message)
                report.deleted += 1
            else:
                report.kept.append(message.summary())
        # what is kept becomes visible again at once for the next run, instead of after the timeout
        for message in messages:
            if not message.done:
                keepers[message.queue_url].release(message)
                try:
                    sqs.change_message_visibility(
                        QueueUrl=message.queue_url, ReceiptHandle=message.receipt_handle, VisibilityTimeout=0
                    )
                except (ClientError, BotoCoreError):
                    continue
    return report
