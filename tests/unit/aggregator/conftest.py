"""The aggregator's fixtures; the tables, queue and Lambda context come from tests/unit/conftest.py."""

from __future__ import annotations

from typing import Any

import pytest

from leaderboard_core.claims import CLAIM_KEY
from tests.unit.aggregator.handler_on_moto import Deployed, wire

CLAIMS = "test-claims"


@pytest.fixture
def deployed(dynamodb: Any, sqs_queue: tuple[Any, str]) -> Deployed:
    """The aggregator's handler on moto's table, stream, progress table and failure queue, as the module wires it."""
    sqs, queue_url = sqs_queue
    return wire(dynamodb, sqs, queue_url)


@pytest.fixture
def claiming(deployed: Deployed) -> Deployed:
    """The deployed aggregator with a claims table, as the module wires it with backfill_claims (ledger off)."""
    deployed.dynamodb.create_table(
        TableName=CLAIMS,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": CLAIM_KEY, "AttributeType": "S"}],
        KeySchema=[{"AttributeName": CLAIM_KEY, "KeyType": "HASH"}],
    )
    deployed.use_claims(CLAIMS, deployed.dynamodb)
    return deployed
