"""The aggregator's fixtures; the tables, queue and Lambda context come from tests/unit/conftest.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.aggregator.handler_on_moto import Deployed, wire


@pytest.fixture
def deployed(dynamodb: Any, sqs_queue: tuple[Any, str]) -> Deployed:
    """The aggregator's handler on moto's table, stream, progress table and failure queue, as the module wires it."""
    sqs, queue_url = sqs_queue
    return wire(dynamodb, sqs, queue_url)
