"""MiniStack, as the project launches it, keeps the mapping fields its API drops (Terraform would see a diff)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ministack.services import lambda_svc

from leaderboard_tools.emulators import ministack_stream_mapping

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
