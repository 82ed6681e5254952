"""The guide's per-record handler, as the baseline: one ADD per download, no idempotence.

Deployed as `aggregator.lambda_handler` through the same module (leaderboard_dev.fault_builds
writes FAULT_RATE into the build), failing the same share of invocations after half of their
records as the faulty build of ours, so the runs compare. The changes to the guide's code: the
module's mapping uses a tumbling window, whose invocations must return a `state`, so it returns
an empty one; and it logs one line per invocation for the comparison. Its aggregates carry no
LeaderboardOrder, so the module's index does not list them: the comparisons read the table.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

import boto3

table = boto3.resource("dynamodb").Table(os.environ["TABLE_NAME"])
FAULT_RATE = 0.0


def log(records: list[dict[str, Any]], succeeded: bool, started: float, writes: int) -> None:
    """One line per invocation, shaped like the shipped aggregator's batch summary where they compare."""
    inserts = [r["dynamodb"]["NewImage"] for r in records if r.get("eventName") == "INSERT"]
    line = {
        "message": "guide invocation",
        "records_received": len(records),
        "distinct_aggregates": len({(i["songID"]["S"], i["Timestamp"]["S"][:7]) for i in inserts}),
        "aggregate_writes": writes,
        "duration_ms": round((time.monotonic() - started) * 1000),
        "succeeded": succeeded,
    }
    print(json.dumps(line))


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    started = time.monotonic()
    records = event["Records"]
    fail_after = len(records) // 2 if records and random.random() < FAULT_RATE else None
    writes = 0
    for index, record in enumerate(records):
        if fail_after is not None and index == fail_after:
            log(records, succeeded=False, started=started, writes=writes)
            raise RuntimeError("test-only fault injected")
        if record["eventName"] == "INSERT":
            new_image = record["dynamodb"]["NewImage"]
            song_id = new_image["songID"]["S"]
            timestamp = new_image["Timestamp"]["S"]
            month = timestamp[:7]
            table.update_item(
                Key={"songID": song_id, "SK": month},
                UpdateExpression="ADD DownloadCount :inc SET #m = :month",
                ExpressionAttributeNames={"#m": "Month"},
                ExpressionAttributeValues={":inc": 1, ":month": month},
            )
            writes += 1
    log(records, succeeded=True, started=started, writes=writes)
    return {"state": {}}
