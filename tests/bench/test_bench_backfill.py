"""The backfill part on a small history: the real backfill counts every download once, and what it costs is counted."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest

from leaderboard_dev.bench import backfill_cost
from leaderboard_tools.backfill.runs import HEARTBEAT_SECONDS

DOWNLOADS = 300


@pytest.fixture(scope="module")
def measured() -> backfill_cost.Measured:
    return backfill_cost.backfill_history(DOWNLOADS)


@pytest.fixture(scope="module")
def figures(measured: backfill_cost.Measured) -> dict[str, Any]:
    return backfill_cost.summarise(measured)


def month_of(timestamp: str) -> str:
    """The UTC month of an ISO 8601 time with its offset, read here with datetime alone."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(UTC).strftime("%Y-%m")


def string_item_bytes(item: dict[str, Any]) -> int:
    """DynamoDB's size of an item of strings only: each attribute's name and value, in UTF-8 bytes."""
    return sum(len(name.encode()) + len(value["S"].encode()) for name, value in item.items())


def test_every_download_of_the_history_is_counted_once(measured: backfill_cost.Measured) -> None:
    # given the generated history, recounted here per song and UTC month
    recount = Counter((item["songID"]["S"], month_of(item["Timestamp"]["S"])) for item in measured.items)
    # when the backfill has run to its end / then every aggregate holds exactly the recount
    assert len(measured.items) == DOWNLOADS
    assert measured.stored == dict(recount)


def test_the_scan_is_charged_for_the_size_of_the_items_it_read(figures: dict[str, Any], measured: Any) -> None:
    # given the history's total size, by DynamoDB's rule for strings
    total = sum(string_item_bytes(item) for item in measured.items)
    pages = figures["scan"]["pages"]
    # when / then the strongly consistent Scan costs its 4 KB units, each page rounding up at most one unit
    units = figures["read_units"][backfill_cost.DOWNLOADS]
    assert figures["scan"]["bytes_evaluated"] == total
    assert total / 4096 <= units <= total / 4096 + pages
    assert units > 0


def test_the_downloads_are_counted_in_transactions_only(figures: dict[str, Any], measured: Any) -> None:
    # given every write request the backfill sent
    writes = figures["write_requests"]
    claims = backfill_cost.CLAIMS
    segments = measured.report.segments
    # when / then the counts and claims go in transactions; the others are the run's own items (start, done, the
    # run's item and a fence per segment, one place saved per page, the run listed among the runs and its end, a
    # heartbeat per 30 s of the run, its fences deleted)
    assert writes[f"dynamodb TransactWriteItems {claims}"] == figures["transactions"] > 0
    assert writes[f"dynamodb PutItem {claims}"] == 2 + 1 + segments
    heartbeats = int(measured.seconds // HEARTBEAT_SECONDS)
    pages = figures["scan"]["pages"]
    assert pages + 2 <= writes[f"dynamodb UpdateItem {claims}"] <= pages + 2 + heartbeats
    assert writes[f"dynamodb DeleteItem {claims}"] == segments
    assert set(writes) == {
        f"dynamodb {operation} {claims}" for operation in ("TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem")
    }
    # and a transactional write is charged twice: a claim of under 1 KB costs 2 units
    assert figures["write_units"][claims] >= 2 * DOWNLOADS


def test_the_backfill_costs_something_per_million_items(figures: dict[str, Any]) -> None:
    # given the figures priced / then every component is paid, and the total is their sum
    dollars = figures["dollars_per_million_items"]
    assert all(value > 0 for value in dollars.values()), dollars
    assert figures["dollars_per_million_items_total"] == pytest.approx(sum(dollars.values()), abs=1e-3)
