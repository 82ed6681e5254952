"""MiniStack's TTL expiry, as the project launches it, writes the REMOVE record AWS writes for each item it deletes.

AWS: "Items that are deleted by the Time to Live process after expiration have the following fields:
Records[].userIdentity.type "Service", Records[].userIdentity.principalId "dynamodb.amazonaws.com""
(DynamoDB Streams API, Record). MiniStack's DynamoDB, Streams API and gateway run in this process, in an account
of the tests' own; its reaper's own code makes one pass on a thread named as MiniStack names it, on a clock of the
test's (leaderboard_dev/emulators/ministack_ttl.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import types
from collections.abc import Iterator
from typing import Any

import pytest
from ministack import app
from ministack.core.responses import request_scope
from ministack.services import dynamodb, dynamodb_streams
from moto.events.models import EventPattern

from leaderboard_dev.emulators import ministack_ttl

ACCOUNT = "123456789012"
REGION = "eu-west-3"
TABLE = "downloads-ttl"
TTL_ATTRIBUTE = "ExpiresAt"
NOW = time.time() + 86_400
"""The tests' clock, a day ahead: items expire by it only, so MiniStack's own reaper thread leaves them alone."""
TTL_FILTER = {"userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]}}
"""The filter the DynamoDB guide gives for TTL deletions ("DynamoDB Streams and Time to Live")."""


@pytest.fixture
def ministack(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """What ``install`` patches, restored afterwards; the tests' table dropped."""
    patched = [(dynamodb, "_remove_item"), (dynamodb, "_build_change_record"), (dynamodb_streams, "_get_records")]
    for module, name in [*patched, (app, "_handle_pre_body_request")]:
        monkeypatch.setattr(module, name, getattr(module, name))
    with request_scope(ACCOUNT, REGION):
        yield
        for store in (dynamodb._tables, dynamodb._ttl_settings, dynamodb._stream_records, dynamodb._stream_trimmed):
            store.pop(TABLE, None)


def table_with_ttl(view_type: str = "NEW_AND_OLD_IMAGES") -> None:
    status, _, body = dynamodb._create_table(
        {
            "TableName": TABLE,
            "KeySchema": [{"AttributeName": "songID", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
            "AttributeDefinitions": [
                {"AttributeName": "songID", "AttributeType": "S"},
                {"AttributeName": "SK", "AttributeType": "S"},
            ],
            "BillingMode": "PAY_PER_REQUEST",
            "StreamSpecification": {"StreamEnabled": True, "StreamViewType": view_type},
        }
    )
    assert status == 200, body
    specification = {"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
    assert dynamodb._update_ttl({"TableName": TABLE, "TimeToLiveSpecification": specification})[0] == 200


def download(name: str, expires_at: float | None) -> dict[str, Any]:
    item = {"songID": {"S": "song1"}, "SK": {"S": name}, "Month": {"S": "2018-06"}}
    if expires_at is not None:
        item[TTL_ATTRIBUTE] = {"N": str(int(expires_at))}
    assert dynamodb._put_item({"TableName": TABLE, "Item": item})[0] == 200
    return item


def key(name: str) -> dict[str, Any]:
    return {"songID": {"S": "song1"}, "SK": {"S": name}}


def stored(name: str) -> bool:
    return "Item" in json.loads(dynamodb._get_item({"TableName": TABLE, "Key": key(name)})[2])


def removes() -> list[dict[str, Any]]:
    """The REMOVE records in the table's stream as MiniStack keeps them (the events its mappings deliver)."""
    return [record for record in dynamodb.stream_live_records(TABLE) if record["eventName"] == "REMOVE"]


class _PassDone(BaseException):
    """Ends the reaper's loop after one pass (the loop catches Exception only)."""


def reaper_pass(now: float) -> None:
    """One pass of MiniStack's own ``_ttl_reaper`` at `now`, on a thread named as MiniStack names the reaper's."""
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        if naps:
            raise _PassDone
        naps.append(seconds)

    scope = {**dynamodb._ttl_reaper.__globals__, "time": types.SimpleNamespace(sleep=sleep, time=lambda: now)}
    reaper = types.FunctionType(dynamodb._ttl_reaper.__code__, scope)

    def run() -> None:
        with contextlib.suppress(_PassDone):
            reaper()

    thread = threading.Thread(target=run, name=ministack_ttl.REAPER_THREAD)
    thread.start()
    thread.join(timeout=30)
    assert naps == [60]


def test_unpatched_ministack_reaper_deletes_an_expired_item_without_a_stream_record(ministack: None) -> None:
    """If this starts failing, MiniStack's reaper writes stream records itself: drop the patch of ``ministack_ttl``."""
    table_with_ttl()
    download("download-001", NOW - 60)
    reaper_pass(NOW)
    assert not stored("download-001")
    assert removes() == []


@pytest.mark.parametrize(
    ("view_type", "carries_old_image"),
    [("NEW_AND_OLD_IMAGES", True), ("OLD_IMAGE", True), ("NEW_IMAGE", False), ("KEYS_ONLY", False)],
)
def test_an_item_the_reaper_deletes_is_a_remove_record_with_ttls_identity(
    ministack: None, view_type: str, carries_old_image: bool
) -> None:
    # given a stream of the view type, an item past its expiry, one before it and one without it
    ministack_ttl.install()
    table_with_ttl(view_type)
    expired = download("download-001", NOW - 60)
    download("download-002", NOW + 60)
    download("download-003", None)
    # when the reaper makes its pass
    reaper_pass(NOW)
    # then only the expired item is gone, and its deletion is one REMOVE carrying TTL's identity as Lambda spells it
    assert [stored(name) for name in ("download-001", "download-002", "download-003")] == [False, True, True]
    [record] = removes()
    assert record["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    change = record["dynamodb"]
    assert change["Keys"] == key("download-001")
    assert change.get("OldImage") == (expired if carries_old_image else None)
    assert "NewImage" not in change
    assert change["StreamViewType"] == view_type
    assert change["SequenceNumber"] > max(
        other["dynamodb"]["SequenceNumber"] for other in dynamodb.stream_live_records(TABLE) if other is not record
    )
    assert abs(change["ApproximateCreationDateTime"] - time.time()) < 60
    # and the guide's TTL filter selects it
    assert EventPattern.load(json.dumps(TTL_FILTER)).matches_event(record)


def test_getrecords_spells_ttls_identity_as_the_identity_shape_and_a_users_delete_carries_none(
    ministack: None,
) -> None:
    # given one item deleted by a user and one deleted by the reaper
    ministack_ttl.install()
    table_with_ttl()
    download("download-001", None)
    download("download-002", NOW - 60)
    assert dynamodb._delete_item({"TableName": TABLE, "Key": key("download-001")})[0] == 200
    reaper_pass(NOW)
    # when the stream is read with GetRecords
    stream_arn = dynamodb._tables[TABLE]["LatestStreamArn"]
    status, _, body = dynamodb_streams._get_shard_iterator(
        {"StreamArn": stream_arn, "ShardId": dynamodb_streams._DEFAULT_SHARD_ID, "ShardIteratorType": "TRIM_HORIZON"}
    )
    assert status == 200, body
    status, _, body = dynamodb_streams._get_records({"ShardIterator": json.loads(body)["ShardIterator"]})
    assert status == 200, body
    # then the reaper's REMOVE names TTL as the API's Identity shape does; the user's names no one
    identities = {
        record["dynamodb"]["Keys"]["SK"]["S"]: record.get("userIdentity")
        for record in json.loads(body)["Records"]
        if record["eventName"] == "REMOVE"
    }
    assert identities == {
        "download-001": None,
        "download-002": {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"},
    }


def test_the_expiry_endpoint_deletes_the_expired_items_now_and_counts_them(
    ministack: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given three items past their expiry and two not
    ministack_ttl.install()
    table_with_ttl()
    for number in range(3):
        download(f"download-00{number}", NOW - 60)
    download("download-003", NOW + 60)
    download("download-004", None)
    monkeypatch.setattr(ministack_ttl, "time", types.SimpleNamespace(time=lambda: NOW))
    # when LocalStack's developer endpoint is called on the gateway
    response = asyncio.run(app._handle_pre_body_request("DELETE", "/_aws/dynamodb/expired", {}, {}, "request-1"))
    # then it answered with the count, the expired items are gone, and each deletion is a REMOVE with TTL's identity
    status, _, body = response
    assert (status, json.loads(body)) == (200, {"ExpiredItems": 3})
    assert [stored(f"download-00{number}") for number in range(5)] == [False, False, False, True, True]
    assert sorted(record["dynamodb"]["Keys"]["SK"]["S"] for record in removes()) == [
        "download-000",
        "download-001",
        "download-002",
    ]
    assert all(record["userIdentity"] == ministack_ttl.LAMBDA_IDENTITY for record in removes())


def test_other_gateway_requests_go_on_to_ministack(ministack: None) -> None:
    ministack_ttl.install()
    response = asyncio.run(app._handle_pre_body_request("GET", "/_ministack/ready", {}, {}, "request-1"))
    assert response[0] in (200, 503)
