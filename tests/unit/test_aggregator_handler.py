from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import aggregator
from aggregate_store import AggregateStore
from aggregator import fault_injection_rate
from download_records import Schema
from tests.streams import aggregate_record, download_record
from tests.unit.conftest import TABLE, count_of


@pytest.fixture
def deployed(dynamodb: Any, sqs_queue: tuple[Any, str], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, str]:
    """The handler wired to moto's table and failure queue, as the module wires it to the real ones."""
    sqs, queue_url = sqs_queue
    monkeypatch.setattr(aggregator, "STORE", AggregateStore(dynamodb, TABLE, Schema()))
    monkeypatch.setattr(aggregator, "_sqs", sqs)
    monkeypatch.setattr(
        aggregator, "SETTINGS", dataclasses.replace(aggregator.SETTINGS, quarantine_queue_url=queue_url)
    )
    return dynamodb, sqs, queue_url


def test_a_batch_with_malformed_records_is_counted_and_the_bad_ones_reported(
    deployed: tuple[Any, Any, str], lambda_context: Any, caplog: pytest.LogCaptureFixture
) -> None:
    dynamodb, sqs, queue_url = deployed
    # given good downloads, two malformed ones and an aggregate record that slipped past a filter
    event = {
        "Records": [
            download_record(1, "song1"),
            download_record(2, "song1", timestamp=None),
            download_record(3, "song2"),
            download_record(4, "song1", timestamp="31/01/2018"),
            aggregate_record(5, "song1", "2018-01", 2),
            download_record(6, "song1"),
        ]
    }
    # when the handler runs
    response = aggregator.lambda_handler(event, lambda_context)
    # then the batch succeeds, the good downloads are counted, and nothing vanishes
    assert response == {"batchItemFailures": []}
    assert (count_of(dynamodb, "song1", "2018-01"), count_of(dynamodb, "song2", "2018-01")) == (2, 1)
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    bodies = sorted((json.loads(m["Body"]) for m in messages), key=lambda body: body["sequenceNumber"])
    assert [(b["kind"], b["sequenceNumber"][-1]) for b in bodies] == [
        ("rejected_download", "2"),
        ("rejected_download", "4"),
    ]
    assert bodies[0]["record"]["dynamodb"]["Keys"]["SK"] == {"S": "download-2"}
    summary = next(record for record in caplog.records if record.getMessage() == "batch summary")
    assert (summary.added, summary.rejected, summary.ignored) == (3, 2, {"aggregate item": 1})
    assert sum(1 for record in caplog.records if record.getMessage() == "rejected download record") == 2


def test_an_empty_event_is_a_successful_no_op(deployed: tuple[Any, Any, str], lambda_context: Any) -> None:
    assert aggregator.lambda_handler({"Records": []}, lambda_context) == {"batchItemFailures": []}


def test_fault_injection_needs_a_loopback_endpoint() -> None:
    # given a non-zero rate: on AWS (no or a real endpoint) it is inert, against a local emulator it applies
    assert fault_injection_rate({"TEST_FAULT_INJECTION_RATE": "0.2"}) == 0.0
    assert (
        fault_injection_rate(
            {"TEST_FAULT_INJECTION_RATE": "0.2", "AWS_ENDPOINT_URL": "https://dynamodb.us-east-1.amazonaws.com"}
        )
        == 0.0
    )
    assert (
        fault_injection_rate({"TEST_FAULT_INJECTION_RATE": "0.2", "AWS_ENDPOINT_URL": "http://127.0.0.1:4566"}) == 0.2
    )
    assert fault_injection_rate({"TEST_FAULT_INJECTION_RATE": "0", "AWS_ENDPOINT_URL": "http://localhost:4566"}) == 0.0
    assert fault_injection_rate({"AWS_ENDPOINT_URL": "http://localhost:4566"}) == 0.0
