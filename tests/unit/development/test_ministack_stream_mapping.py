"""MiniStack, as the project launches it, keeps the mapping fields its API drops (Terraform would see a diff)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ministack.services import lambda_svc

from leaderboard_dev.emulators import ministack_stream_mapping

FUNCTION = "window-recorder"
STREAM_ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/songs/stream/2020-12-09T07:00:00.000"


@pytest.fixture
def ministack(monkeypatch: pytest.MonkeyPatch) -> Any:
    """MiniStack's Lambda service in this process, with one function, no poller thread, restored afterwards."""
    for name in ("_create_esm", "_update_esm", "_poll_dynamodb_streams"):
        monkeypatch.setattr(lambda_svc, name, getattr(lambda_svc, name))
    monkeypatch.setattr(lambda_svc, "_ensure_poller", lambda: None)
    arn = f"arn:aws:lambda:us-east-1:000000000000:function:{FUNCTION}"
    lambda_svc._functions[FUNCTION] = {"config": {"FunctionName": FUNCTION, "FunctionArn": arn}}
    yield lambda_svc
    lambda_svc._functions.pop(FUNCTION, None)
    for mapping_uuid in [mapping["UUID"] for mapping in lambda_svc._esms.values()]:
        lambda_svc._esms.pop(mapping_uuid, None)
        lambda_svc._release_esm_poll_state(mapping_uuid)


def create(service: Any, **fields: Any) -> dict[str, Any]:
    request = {"FunctionName": FUNCTION, "EventSourceArn": STREAM_ARN, "StartingPosition": "LATEST", **fields}
    status, _headers, body = service._create_esm(request)
    assert status == 202
    return json.loads(body)


def test_unpatched_ministack_drops_the_tumbling_window(ministack: Any) -> None:
    """If this starts failing, MiniStack stores TumblingWindowInSeconds itself: drop the field patch."""
    assert "TumblingWindowInSeconds" not in create(ministack, TumblingWindowInSeconds=5)


def test_the_launcher_keeps_the_tumbling_window_on_create_get_and_update(ministack: Any) -> None:
    ministack_stream_mapping.install()
    created = create(ministack, TumblingWindowInSeconds=5, BatchSize=2)
    assert created["TumblingWindowInSeconds"] == 5
    assert json.loads(ministack._get_esm(created["UUID"])[2])["TumblingWindowInSeconds"] == 5
    status, _headers, body = ministack._update_esm(created["UUID"], {"TumblingWindowInSeconds": 30})
    assert (status, json.loads(body)["TumblingWindowInSeconds"]) == (200, 30)
    assert json.loads(ministack._get_esm(created["UUID"])[2])["TumblingWindowInSeconds"] == 30


def stream(count: int) -> list[dict[str, Any]]:
    """Records 1..count; even numbers are aggregates (dropped by the filter), odd ones downloads."""
    return [
        {"dynamodb": {"SequenceNumber": str(n).zfill(21)}, "eventName": "INSERT" if n % 2 else "MODIFY"}
        for n in range(1, count + 1)
    ]


def downloads_only(chunk: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [record for record in chunk if record["eventName"] == "INSERT"]


def reader(records: list[dict[str, Any]], reads: list[int]) -> Any:
    def read(offset: int) -> list[dict[str, Any]]:
        reads.append(offset)
        return records[offset : offset + ministack_stream_mapping.READ_LIMIT]

    return read


def test_a_batch_of_ten_thousand_is_read_in_reads_of_a_thousand_records() -> None:
    # given 25,000 records in the shard, half of them passing the filter
    shard, reads = stream(25_000), []
    # when the worker reads for a batch of 10,000
    read, matching, to_present = ministack_stream_mapping.read_for_batch(reader(shard, reads), downloads_only, 10_000)
    # then it made GetRecords-sized reads until 10,000 records matched, and the shard has more
    assert reads == list(range(0, 20_000, 1000))
    assert (len(read), len(matching), to_present) == (20_000, 10_000, False)


def test_a_read_shorter_than_the_read_limit_is_the_present() -> None:
    shard, reads = stream(1_500), []
    read, matching, to_present = ministack_stream_mapping.read_for_batch(reader(shard, reads), downloads_only, 10_000)
    assert (reads, len(read), len(matching), to_present) == ([0, 1000], 1_500, 750, True)


def test_the_position_moves_past_what_was_delivered_and_not_past_the_first_record_left() -> None:
    shard = stream(10)
    matching = downloads_only(shard)  # 1, 3, 5, 7, 9
    # every match delivered: past everything read, filtered records included
    assert ministack_stream_mapping.records_to_skip(shard, matching, delivered=5) == 10
    # the first two delivered: up to record 5, the first one left
    assert ministack_stream_mapping.records_to_skip(shard, matching, delivered=2) == 4
    # nothing matched: past everything read
    assert ministack_stream_mapping.records_to_skip(shard, [], delivered=0) == 10
