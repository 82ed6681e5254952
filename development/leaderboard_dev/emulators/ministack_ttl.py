"""MiniStack's TTL expiry with the stream records AWS writes: a REMOVE per expired item, with TTL's userIdentity.

AWS: "Items that are deleted by the Time to Live process after expiration have the following fields:
Records[].userIdentity.type "Service", Records[].userIdentity.principalId "dynamodb.amazonaws.com""
(DynamoDB Streams API, Record). MiniStack 1.5.33's reaper (``_ttl_reaper``, a thread that wakes once a minute)
deletes expired items through ``_remove_item``, which writes no stream record.

``install`` sends the reaper's deletions down DeleteItem's path (``_remove_item``, then ``_emit_stream_event``:
Keys, the OldImage the view type carries, sequence number, creation time, replicas, Kinesis destinations), with
TTL's identity on the table's own record only: "TTL deletions that are replicated to global table regions are not
identifiable in DynamoDB streams in the regions the deletion is replicated to" (developer guide, "Working with
expired items"). MiniStack keeps its records as Lambda events, which spell the identity ``type``/``principalId``;
its GetRecords is made to answer with the API's Identity shape, ``Type``/``PrincipalId``. The gateway also answers
LocalStack's developer endpoint ``DELETE /_aws/dynamodb/expired``: it deletes the expired items now, so that tests
need not wait for the reaper, and answers ``{"ExpiredItems": <count>}``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ministack import app
from ministack.core.arn import parse_arn
from ministack.core.responses import json_response, request_scope
from ministack.services import dynamodb, dynamodb_streams

from leaderboard_dev.emulators.ttl_expiry import GETRECORDS_IDENTITY, lambda_user_identity

REAPER_THREAD = "dynamodb-ttl-reaper"
"""The name MiniStack gives its reaper's thread."""
EXPIRED_PATH = "/_aws/dynamodb/expired"
LAMBDA_IDENTITY: dict[str, Any] = lambda_user_identity(GETRECORDS_IDENTITY) or {}
_GETRECORDS_FIELDS = {"type": "Type", "principalId": "PrincipalId"}

Item = dict[str, Any]
Response = tuple[int, dict[str, str], bytes]

_expiring = threading.local()
"""The TableArn of the table whose expired item this thread is deleting, while it does."""


def install() -> None:
    """Patch MiniStack's DynamoDB, its Streams API and its gateway in place; call before it starts serving."""
    if getattr(dynamodb._remove_item, "writes_expiries", False):
        return
    dynamodb._remove_item = _reaping_with_records(dynamodb._remove_item)
    dynamodb._build_change_record = _stamping_expiries(dynamodb._build_change_record)
    dynamodb_streams._get_records = _spelling_identity_as_the_api(dynamodb_streams._get_records)
    app._handle_pre_body_request = _serving_expiry(app._handle_pre_body_request)


def expire(table: dict[str, Any], pk_val: Any, sk_val: Any) -> Item | None:
    """Delete one expired item as TTL does; returns it, or None if it was gone already."""
    arn = parse_arn(table["TableArn"])
    _expiring.table_arn = table["TableArn"]
    try:
        with request_scope(arn.account_id, arn.region):
            old_item: Item | None = dynamodb._remove_item(table, pk_val, sk_val)
            if old_item is not None:
                dynamodb._emit_stream_event(table["TableName"], "REMOVE", old_item, None)
    finally:
        _expiring.table_arn = None
    return old_item


def expire_items(now: float | None = None) -> int:
    """What the reaper does once a minute, now: delete every expired item, in every account and region."""
    moment = time.time() if now is None else now
    expired = 0
    with dynamodb._lock:
        for (account, region, table_name), setting in list(dynamodb._ttl_settings.all_items()):
            attribute = setting.get("AttributeName", "")
            table = dynamodb._tables.get_scoped(account, region, table_name)
            if setting.get("TimeToLiveStatus") != "ENABLED" or not attribute or not table:
                continue
            for pk_val, items in list(table["items"].items()):
                for sk_val, item in list(items.items()):
                    if has_expired(item.get(attribute), moment):
                        expired += expire(table, pk_val, sk_val) is not None
    return expired


def has_expired(value: Any, now: float) -> bool:
    """The reaper's rule: a TTL attribute whose value is a time at or before now."""
    if value is None:
        return False
    try:
        return float(dynamodb._extract_key_val(value)) <= now
    except (TypeError, ValueError):
        return False


def _reaping_with_records(remove_item: Callable[..., Item | None]) -> Callable[..., Item | None]:
    """The reaper's deletions become expiries; every other caller's stay as they are."""

    @functools.wraps(remove_item)
    def remove(table: dict[str, Any], pk_val: Any, sk_val: Any) -> Item | None:
        if getattr(_expiring, "table_arn", None) is None and threading.current_thread().name == REAPER_THREAD:
            return expire(table, pk_val, sk_val)
        return remove_item(table, pk_val, sk_val)

    remove.writes_expiries = True  # type: ignore[attr-defined]
    return remove


def _stamping_expiries(build_change_record: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    @functools.wraps(build_change_record)
    def build(table: dict[str, Any], event_name: str, *arguments: Any) -> dict[str, Any]:
        record = build_change_record(table, event_name, *arguments)
        if event_name == "REMOVE" and table.get("TableArn") == getattr(_expiring, "table_arn", None):
            record["userIdentity"] = dict(LAMBDA_IDENTITY)
        return record

    return build


def _spelling_identity_as_the_api(get_records: Callable[[dict[str, Any]], Response]) -> Callable[..., Response]:
    @functools.wraps(get_records)
    def handle(data: dict[str, Any]) -> Response:
        status, headers, body = get_records(data)
        if status != 200 or b'"userIdentity"' not in body:
            return status, headers, body
        page = json.loads(body)
        for record in page.get("Records") or []:
            identity = record.get("userIdentity")
            if isinstance(identity, dict):
                record["userIdentity"] = {_GETRECORDS_FIELDS.get(name, name): value for name, value in identity.items()}
        return json_response(page, status, content_type=headers.get("Content-Type", "application/x-amz-json-1.0"))

    return handle


def _serving_expiry(handle_pre_body_request: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(handle_pre_body_request)
    async def handle(method: str, path: str, *arguments: Any) -> Any:
        if method == "DELETE" and path == EXPIRED_PATH:
            expired = await asyncio.to_thread(expire_items)
            return json_response({"ExpiredItems": expired}, content_type="application/json")
        return await handle_pre_body_request(method, path, *arguments)

    return handle
