"""Recover what the failure queue reports: recount the aggregates its messages touch, then delete the messages.

The queue holds three kinds of messages:
- the mapping's failure records (a batch given up on: stream, shard and sequence range, no data);
  their records are read back from the stream while it retains them (24 hours) to find the
  aggregates they touch; after that, every aggregate of the months the batch arrived in;
- `rejected_download`: a malformed download, never countable; reported, nothing to recount;
- `refused_record`: a record the aggregator could not count exactly (another stream, no shard,
  not confirmed by the stream, older than a pruned watermark); its aggregate is recounted.

A message is deleted only once every aggregate it touches is settled and equal to its recount
(repaired if needed), so running recover twice changes nothing the second time. The records a
batch held may already be partly counted (the function wrote part of them before failing): only
a recount from the downloads in the table can tell, which is why recover reconciles rather than
replays.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from leaderboard_tools.leaderboard_layout import AttributeNames
from leaderboard_tools.loadgen import utc_month
from leaderboard_tools.reconcile import Reconciler, ReconcileRefused

WHOLE_MONTH = "*"
MAX_PAGES = 200


@dataclass
class Message:
    receipt_handle: str
    body: dict[str, Any]
    kind: str
    aggregates: dict[str, set[str]] = field(default_factory=dict)
    """month -> entity ids to recount, or {WHOLE_MONTH} for every aggregate of the month."""
    note: str = ""


@dataclass
class RecoveryReport:
    messages: int = 0
    deleted: int = 0
    kept: list[dict[str, Any]] = field(default_factory=list)
    rejected_downloads: list[dict[str, Any]] = field(default_factory=list)
    reconciled: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "deleted": self.deleted,
            "kept": self.kept,
            "rejected_downloads": self.rejected_downloads,
            "reconciled": self.reconciled,
        }


def receive_all(sqs: Any, queue_url: str, visibility_seconds: int) -> list[dict[str, Any]]:
    """Every message now visible, held invisible for the run; a message not deleted comes back after it."""
    messages: list[dict[str, Any]] = []
    seen: set[str] = set()
    while True:
        page = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=visibility_seconds
        ).get("Messages", [])
        fresh = [message for message in page if message["MessageId"] not in seen]
        if not fresh:
            return messages
        seen.update(message["MessageId"] for message in fresh)
        messages.extend(fresh)


def classify(raw: dict[str, Any], streams: Any, names: AttributeNames) -> Message:
    try:
        body = json.loads(raw["Body"])
    except ValueError:
        body = {}
    message = Message(raw["ReceiptHandle"], body if isinstance(body, dict) else {}, kind="unknown")
    if "DDBStreamBatchInfo" in message.body:
        message.kind = "failed_batch"
        message.aggregates, message.note = _batch_aggregates(message.body["DDBStreamBatchInfo"], streams, names)
    elif message.body.get("kind") == "rejected_download":
        message.kind = "rejected_download"
    elif message.body.get("kind") == "refused_record":
        message.kind = "refused_record"
        message.aggregates = _refused_aggregates(message.body.get("record"), names)
    return message


def _download_aggregate(record: Any, names: AttributeNames) -> tuple[str, str] | None:
    if not isinstance(record, dict):
        return None
    image = (record.get("dynamodb") or {}).get("NewImage") or {}
    entity = (image.get(names.entity) or {}).get("S")
    timestamp = (image.get(names.timestamp) or {}).get("S")
    if not entity or not timestamp or names.period in image:
        return None
    try:
        return entity, utc_month(timestamp)
    except ValueError:
        return None


def _refused_aggregates(record: Any, names: AttributeNames) -> dict[str, set[str]]:
    if isinstance(record, dict) and "entityId" in record and "period" in record:
        return {record["period"]: {record["entityId"]}}
    found = _download_aggregate(record, names)
    return {found[1]: {found[0]}} if found else {}


def _batch_aggregates(info: dict[str, Any], streams: Any, names: AttributeNames) -> tuple[dict[str, set[str]], str]:
    """The aggregates a discarded batch touched, read back from the stream; or whole months when it is gone."""
    try:
        records = _read_range(streams, info)
    except (ClientError, BotoCoreError) as error:
        months = _arrival_months(info)
        return {month: {WHOLE_MONTH} for month in months}, f"records not readable ({error}); whole months recounted"
    aggregates: dict[str, set[str]] = defaultdict(set)
    for record in records:
        found = _download_aggregate(record, names)
        if found:
            aggregates[found[1]].add(found[0])
    return dict(aggregates), f"{len(records)} records read back from the stream"


def _read_range(streams: Any, info: dict[str, Any]) -> list[dict[str, Any]]:
    start, end = info["startSequenceNumber"], info["endSequenceNumber"]
    iterator = streams.get_shard_iterator(
        StreamArn=info["streamArn"],
        ShardId=info["shardId"],
        ShardIteratorType="AT_SEQUENCE_NUMBER",
        SequenceNumber=start,
    ).get("ShardIterator")
    records: list[dict[str, Any]] = []
    for _ in range(MAX_PAGES):
        if not iterator:
            break
        page = streams.get_records(ShardIterator=iterator, Limit=1000)
        for record in page.get("Records", []):
            if int(record["dynamodb"]["SequenceNumber"]) > int(end):
                return records
            records.append(record)
        if not page.get("Records") and records:
            break
        iterator = page.get("NextShardIterator")
    return records


def _arrival_months(info: dict[str, Any]) -> set[str]:
    """The months around the batch's arrival: a download's timestamp may precede its arrival by some time."""
    months = set()
    for key in ("approximateArrivalOfFirstRecord", "approximateArrivalOfLastRecord"):
        arrived = datetime.fromisoformat(str(info[key]).replace("Z", "+00:00")).astimezone(UTC)
        for moment in (arrived - timedelta(days=1), arrived):
            months.add(f"{moment.year:04d}-{moment.month:02d}")
    return months


def recover(sqs: Any, streams: Any, reconciler: Reconciler, queue_url: str, names: AttributeNames) -> RecoveryReport:
    report = RecoveryReport()
    raw_messages = receive_all(sqs, queue_url, visibility_seconds=900)
    messages = [classify(raw, streams, names) for raw in raw_messages]
    report.messages = len(messages)
    wanted: dict[str, set[str]] = defaultdict(set)
    for message in messages:
        for month, entities in message.aggregates.items():
            wanted[month] |= entities
    settled_months: set[str] = set()
    for month, entities in sorted(wanted.items()):
        entity_ids = None if WHOLE_MONTH in entities else sorted(entities)
        try:
            outcome = reconciler.run(month, entity_ids, repair=True)
        except ReconcileRefused as refusal:
            report.reconciled.append({"month": month, "refused": str(refusal)})
            continue
        report.reconciled.append(outcome.as_json())
        if all(difference.repaired for difference in outcome.differences):
            settled_months.add(month)
    for message in messages:
        if message.kind == "rejected_download":
            report.rejected_downloads.append(
                {"reason": message.body.get("reason"), "sequenceNumber": message.body.get("sequenceNumber")}
            )
        done = message.kind != "unknown" and set(message.aggregates) <= settled_months
        if done:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message.receipt_handle)
            report.deleted += 1
        else:
            report.kept.append({"kind": message.kind, "months": sorted(message.aggregates), "note": message.note})
    return report
