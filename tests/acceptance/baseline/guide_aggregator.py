"""The guide's per-record handler, as the baseline: one ADD per download, no idempotence.

Deployed as `aggregator.lambda_handler` through the same module, with the same test-only
fault injection as ours (fail after writing part of the batch), so the runs compare. The one
change to the guide's code: the module's mapping uses a tumbling window, whose invocations must
return a `state`, so it returns an empty one.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

import boto3

table = boto3.resource("dynamodb").Table(os.environ["TABLE_NAME"])
FAULT_RATE = float(os.environ.get("TEST_FAULT_INJECTION_RATE", "0") or "0")


def log(records: int, succeeded: bool) -> None:
    print(json.dumps({"message": "guide invocation", "records_received": records, "succeeded": succeeded}))


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    records = event["Records"]
    fail_after = len(records) // 2 if records and random.random() < FAULT_RATE else None
    for index, record in enumerate(records):
        if fail_after is not None and index == fail_after:
            log(len(records), succeeded=False)
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
    log(len(records), succeeded=True)
    return {"state": {}}
