"""A ledger item's versions as the repair reads and writes them: what every move changes, and a download's key."""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_core.claims import (
    BASE_CONTRIBUTION,
    CLAIM_KEY,
    READ_AT,
    READ_FROM_THE_TABLE,
    REBASES,
    rebases_condition,
)
from leaderboard_tools.reconcile.clock import server_time

VERSION = "Version"
LEDGER_PREFIX = "download#"
ATTEMPTS = 5
"""Reads of one key whose transaction was cancelled (a record applied meanwhile) before it is reported."""


def generation(ledger_item: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """What changes with every move of a ledger item: its Version (the handler's and the rebase's), or with none its
    Rebases (the rebase's)."""
    return (ledger_item.get(VERSION) or {}).get("S"), (ledger_item.get(REBASES) or {}).get("N")


def as_read(ledger_item: Mapping[str, Any]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The condition that a ledger item is still the one read: its Version as read, or with none (the backfill's) still
    none and its Rebases as read; and its Contribution as read. Every move of the item (the handler's, the rebase's)
    changes Version or Rebases, so a writer that read it before a move fails this and reads the key again."""
    names = {"#contribution": BASE_CONTRIBUTION, "#version": VERSION}
    values: dict[str, Any] = {}
    if VERSION in ledger_item:
        condition = "#version = :version"
        values[":version"] = ledger_item[VERSION]
    else:
        rebased, rebases_names, rebases_values = rebases_condition(ledger_item)
        condition = f"attribute_exists(#key) AND attribute_not_exists(#version) AND {rebased}"
        names |= {"#key": CLAIM_KEY, **rebases_names}
        values |= rebases_values
    if BASE_CONTRIBUTION in ledger_item:
        condition += " AND #contribution = :contribution"
        values[":contribution"] = ledger_item[BASE_CONTRIBUTION]
    else:
        condition += " AND attribute_not_exists(#contribution)"
    return condition, names, values


def refresh_read(dynamodb: Any, claims: str, ledger_item: Mapping[str, Any], read_at: int) -> bool:
    """A key found in step whose ledger item holds a version read from the table (`ReadAt`: no record applied since):
    `ReadAt` moved forward to this read's time, so a keep of the version is bounded by the latest read that saw the
    key's item (maybe a new item equal by value to the one read before, its records behind in the stream). Conditioned
    on the ledger item as read, its `ReadAt` included: a rebase that read earlier and refreshes later must not move
    `ReadAt` back past another's later read. False when a move or another refresh came between: the key is read again,
    and that later read refreshes it. A read whose time is not past `ReadAt` as read writes nothing: `ReadAt` is that
    late already."""
    if read_at <= Decimal(ledger_item[READ_AT]["N"]):
        return True
    condition, names, values = as_read(ledger_item)
    try:
        dynamodb.update_item(
            TableName=claims,
            Key={CLAIM_KEY: ledger_item[CLAIM_KEY]},
            UpdateExpression="SET #read_at = :read_at",
            ConditionExpression=f"{condition} AND #read_at = :read_at_as_read",
            ExpressionAttributeNames={**names, "#read_at": READ_AT},
            ExpressionAttributeValues={
                **values,
                ":read_at": {"N": str(read_at)},
                ":read_at_as_read": ledger_item[READ_AT],
            },
        )
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
            raise
        return False
    return True


def records_version(ledger_item: Mapping[str, Any]) -> bool:
    """A ledger item that counts something at a record's Version (no `~`): a rebase that finds its key in step moves it
    to its own read (`<record>~<n>` with `ReadAt`, no count moved). The item read may be a new one equal by value, the
    record's item deleted, both records still behind in the stream (S10 orders them after the Version); kept by that
    record only, the old item's deletion would spend an operator's keep and the new item's expiry count beside it."""
    version = (ledger_item.get(VERSION) or {}).get("S")
    counts = (ledger_item.get(BASE_CONTRIBUTION) or {}).get("M")
    return bool(version and counts and READ_FROM_THE_TABLE not in version)


def rebased_version(version: str) -> str:
    """Version after one more rebase: the same record, another suffix (`~1`, `~2`, ...)."""
    record, _, count = version.partition(READ_FROM_THE_TABLE)
    return f"{record}{READ_FROM_THE_TABLE}{int(count or 0) + 1}"


class ReadTimeMissing(RuntimeError):
    """A read the rebase writes a version from came without DynamoDB's Date header: the rebase stops there (what it
    moved before stays moved, each key in one transaction; run it again once the header comes through)."""


def read_time(response: Mapping[str, Any]) -> int:
    """DynamoDB's clock when it answered a read: the response's Date header (whole seconds), stamped between the
    request and its answer, like the read itself. A keep of the version written from the item read is bounded by it
    (claims.READ_AT); without it that keep would be bounded by nothing, so a missing header stops the rebase."""
    date = server_time(response)
    if not date:
        raise ReadTimeMissing(
            "DynamoDB's response carried no Date header: the rebase records when it read each item it moves a key "
            "to (a proxy dropping the header?); the keys moved so far stay moved, run the repair again"
        )
    return math.floor(date)


def shown_key(key: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A download's key as JSON holds it, binary values base64 (as `aws dynamodb get-item --key` takes them); None for a
    ledger item written before it kept its key."""
    if key is None:
        return None
    return {
        name: {kind: base64.b64encode(bytes(inner)).decode() if isinstance(inner, bytes | bytearray) else inner}
        for name, value in key.items()
        for kind, inner in value.items()
    }
