"""Reading what a deployed stack did: its functions' structured log lines, and every item of a table."""

from __future__ import annotations

import json
from typing import Any

from leaderboard_dev.aws import Clients


def log_lines(aws: Clients, log_group: str, since_ms: int | None = None) -> list[dict[str, Any]]:
    """Every JSON line the function logged (Powertools' structured lines), across all streams.

    `since_ms` (epoch milliseconds) keeps only the events logged from then on: one phase of a run.
    """
    lines: list[dict[str, Any]] = []
    parameters: dict[str, Any] = {"logGroupName": log_group}
    if since_ms is not None:
        parameters["startTime"] = since_ms
    for page in aws.logs.get_paginator("filter_log_events").paginate(**parameters):
        for event in page.get("events", []):
            if since_ms is not None and event.get("timestamp", since_ms) < since_ms:
                continue
            for text in event["message"].splitlines():
                if text.lstrip().startswith("{"):
                    try:
                        lines.append(json.loads(text))
                    except ValueError:
                        continue
    return lines


def scan_all(aws: Clients, **parameters: Any) -> list[dict[str, Any]]:
    pages = aws.dynamodb.get_paginator("scan").paginate(**parameters)
    return [item for page in pages for item in page.get("Items", [])]


def aggregator_invocations(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per invocation of the shipped aggregator, a faulty build of it, or the guide's baseline.

    The shipped aggregator logs one `batch summary` per invocation. A faulty build's failing
    invocation logs the summary of the half it let through and a `test-only fault injected` line
    with the same request id: it failed, and its records were not checkpointed. The guide's
    baseline logs one `guide invocation` line. Each entry: records, succeeded, aggregate_writes,
    distinct_aggregates, duration_ms, final, already_applied (downloads a write found counted already:
    redelivered work), records_read (stream records the aggregator read itself), window_start and the first and
    last sequence numbers, the ranges of its own reads, the checkpoints
    before and after and the request id (ours only).
    """
    faults = {
        line.get("function_request_id"): line for line in lines if line.get("message") == "test-only fault injected"
    }
    entries = []
    for line in lines:
        if line.get("message") == "guide invocation":
            entries.append(_invocation(line, line["records_received"], bool(line.get("succeeded"))))
        elif line.get("message") == "batch summary":
            fault = faults.get(line.get("function_request_id"))
            if fault is not None:
                entries.append(_invocation(line, fault["records_received"], succeeded=False))
            else:
                entries.append(_invocation(line, line["records_received"], bool(line.get("succeeded"))))
    return entries


def _invocation(line: dict[str, Any], records: int, succeeded: bool) -> dict[str, Any]:
    return {
        "records": records,
        "succeeded": succeeded,
        "aggregate_writes": line.get("aggregate_writes", 0),
        "distinct_aggregates": line.get("distinct_aggregates", 0),
        "duration_ms": line.get("duration_ms", 0),
        "final": bool(line.get("final_invocation")),
        "already_applied": line.get("already_applied", 0),
        "records_read": line.get("records_read", 0),
        "window_start": line.get("window_start"),
        "first_sequence": line.get("first_sequence"),
        "last_sequence": line.get("last_sequence"),
        "read_ranges": line.get("read_ranges") or [],
        "checkpoint_before": line.get("checkpoint_before"),
        "checkpoint_after": line.get("checkpoint_after"),
        "request_id": line.get("function_request_id"),
    }
