"""Request-counting builds: the shipped function, every AWS request it sends counted in the function and logged.

A deployed function's DynamoDB requests cannot be counted from outside on the emulator (MiniStack's
ConsumedCapacity is a constant per request, and BatchGetItem reports none), and the shipped code logs
its writes, not its reads. So the benchmark deploys, on both sides of a comparison alike, the shipped
zip with its handler module renamed and a wrapper in its place (as `leaderboard_dev.fault_builds`
does): the wrapper counts each request botocore sends, by operation, table, index and read
consistency, with the keys a BatchGetItem names and the entries each Query page evaluated
(`ScannedCount`), and logs one `test-only request count` line per invocation, with the handler's own
time (and, for the query function, the request it answered). Nothing of the function's behaviour
changes; the shipped zips carry no such wrapper.
"""

from __future__ import annotations

import tempfile
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import build

COUNT_MESSAGE = "test-only request count"
WRAPPER = '''"""REQUEST-COUNTING BUILD, for benchmarks only: the shipped {module} handler, each AWS request it
sends counted and logged once per invocation ({message!r})."""

import json
import threading
import time

import botocore.client

import {shipped} as shipped

_LOCK = threading.Lock()
_CALLS = []
_SEND = botocore.client.BaseClient._make_api_call


def _table_of(parameters):
    if "TableName" in parameters:
        return parameters["TableName"]
    for collection in ("RequestItems", "TransactItems"):
        items = parameters.get(collection)
        if isinstance(items, dict) and items:
            return next(iter(items))
        if isinstance(items, list) and items:
            action = next(iter(items[0].values()))
            return action.get("TableName")
    return None


def _counted(self, operation_name, api_params):
    answer, failed = None, True
    try:
        answer = _SEND(self, operation_name, api_params)
        failed = False
        return answer
    finally:
        table = _table_of(api_params)
        call = {{
            "operation": operation_name,
            "table": table,
            "index": api_params.get("IndexName"),
            "consistent": bool(api_params.get("ConsistentRead")),
            "failed": failed,
        }}
        if operation_name == "BatchGetItem":
            requested = api_params.get("RequestItems", {{}})
            call["keys"] = sum(len(request.get("Keys", [])) for request in requested.values())
            call["consistent"] = any(request.get("ConsistentRead") for request in requested.values())
        if operation_name in ("Query", "Scan") and answer is not None:
            call["scanned"] = answer.get("ScannedCount", answer.get("Count", 0))
        with _LOCK:
            _CALLS.append(call)


botocore.client.BaseClient._make_api_call = _counted


def lambda_handler(event, context):
    with _LOCK:
        _CALLS.clear()
    began = time.perf_counter()
    try:
        return shipped.lambda_handler(event, context)
    finally:
        with _LOCK:
            calls = list(_CALLS)
        print(
            json.dumps(
                {{
                    "message": {message!r},
                    "function_request_id": getattr(context, "aws_request_id", None),
                    "handler_ms": round(1000 * (time.perf_counter() - began), 3),
                    "calls": calls,
                    "event": event if {log_event!r} else None,
                }}
            )
        )
'''


def counting_build(shipped_zip: Path, module: str, output: Path, log_event: bool = False) -> Path:
    """The shipped zip, `<module>.py` renamed to `shipped_<module>.py` and the counting wrapper in its place;
    `log_event`: each line also holds the request (small for the query function, a whole batch for the aggregator)."""
    with tempfile.TemporaryDirectory(prefix="counting-build-") as scratch:
        stage = Path(scratch)
        with zipfile.ZipFile(shipped_zip) as archive:
            archive.extractall(stage)
        shipped = f"shipped_{module}"
        (stage / f"{module}.py").rename(stage / f"{shipped}.py")
        (stage / f"{module}.py").write_text(
            WRAPPER.format(module=module, shipped=shipped, message=COUNT_MESSAGE, log_event=log_event)
        )
        build.write_zip(stage, output)
    return output


def counted_invocations(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `test-only request count` lines of a counting build's log: one per invocation."""
    return [line for line in lines if line.get("message") == COUNT_MESSAGE]


def requests_by_kind(invocations: list[dict[str, Any]], table: str) -> Counter[str]:
    """Requests to `table` by operation, a strongly consistent read named apart (`GetItem (consistent)`)."""
    counted: Counter[str] = Counter()
    for invocation in invocations:
        for call in invocation["calls"]:
            if call["table"] == table:
                counted[call["operation"] + (" (consistent)" if call["consistent"] else "")] += 1
    return counted
