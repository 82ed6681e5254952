"""Ledger mode: every INSERT, MODIFY and REMOVE of a download moves its contribution from what the ledger says to what
the new image says, so the boards end where the items' last images say, whoever counted first and however the records
are read. Each test compares the boards with a recount of the items made by the test itself."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.aggregator.ledger_on_moto import ROOT, LedgerWorld


@pytest.fixture
def world(dynamodb: Any, sqs_queue: tuple[Any, str]) -> LedgerWorld:
    sqs, queue_url = sqs_queue
    return LedgerWorld(dynamodb, sqs, queue_url)


def test_a_modify_that_makes_a_rejected_download_valid_counts_it(world: LedgerWorld) -> None:
    # given a download written with an unreadable timestamp, read (rejected, reported), then fixed by a rewrite
    world.put(ROOT, "song1", 1, "2018-01", valid=False)
    world.read(ROOT)
    world.put(ROOT, "song1", 1, "2018-01")
    # when the fix is read
    world.read(ROOT)
    # then the download counts once, as its item now says
    assert world.recount() == {("song1", "2018-01"): 1}
    assert world.boards() == world.recount()
    assert [message["kind"] for message in world.reports()] == ["rejected_download"]
