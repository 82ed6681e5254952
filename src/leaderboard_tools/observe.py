"""Reading what a deployed stack did: its functions' structured log lines, and every item of a table."""

from __future__ import annotations

import json
from typing import Any

from leaderboard_tools.aws import Clients


def log_lines(aws: Clients, log_group: str) -> list[dict[str, Any]]:
    """Every JSON line the function logged (Powertools' structured lines), across all streams."""
    lines: list[dict[str, Any]] = []
    parameters: dict[str, Any] = {"logGroupName": log_group}
    while True:
        page = aws.logs.filter_log_events(**parameters)
        for event in page.get("events", []):
            for text in event["message"].splitlines():
                if text.lstrip().startswith("{"):
                    try:
                        lines.append(json.loads(text))
                    except ValueError:
                        continue
        if not page.get("nextToken"):
            return lines
        parameters["nextToken"] = page["nextToken"]


def scan_all(aws: Clients, **parameters: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    while True:
        page = aws.dynamodb.scan(**parameters)
        items.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return items
        parameters["ExclusiveStartKey"] = page["LastEvaluatedKey"]
