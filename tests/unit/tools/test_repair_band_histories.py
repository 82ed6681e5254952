"""Generated histories around a repair's band: every download counted at most once, every missing one reported.

The adversary is what AWS leaves open: a written item's stream record may not be readable yet ("near-real time",
no bound; DynamoDB Developer Guide, *Change data capture for DynamoDB Streams*), so the repair's looks at the stream
may miss any record (its in-flight checks see nothing here), and the mapping may deliver any prefix of the shard
before the band closes and the rest after it (records of a shard arrive in order; how late is bounded only by the
24-hour retention). Downloads are written before the repair (the recount sees them) or while its band is open (it
does not). The oracle is the number of downloads written, counted here and not by the code under test.

Invariants: the count never exceeds the downloads (no double count); the downloads missing from it are at most the
records refused, which the failure queue reports (no silent loss); and a record delivered while the band is open is
never refused (the repair's band). `test_the_histories_break_a_close_that_adds_every_held_download`
keeps the naive close the oracle must break.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile import Reconciler, StreamCheck
from tests.property_examples import examples
from tests.unit.tools.operator_stack import (
    MONTH,
    QUICK_BANDS,
    REGION,
    ModelAggregator,
    MotoStack,
    deploy,
    once_the_band_opens,
    set_count,
    stored_count,
    write_download,
)

pytestmark = pytest.mark.slow  # hypothesis histories at length: CI runs them, make check does not


class Mapping:
    """The mapping, delivering the shard's download records in order, as far as a history says."""

    def __init__(self, stack: MotoStack) -> None:
        self.aggregator = ModelAggregator(stack)
        self.stack = stack

    def deliver(self, downloads: int | None) -> None:
        """Deliver the next `downloads` download records (every record when None), with the aggregate's own between."""
        shard_id = self.aggregator.shard_ids()[0]
        records = self.aggregator._records(shard_id, self.aggregator.checkpoint(shard_id))
        delivered = 0
        for record in records:
            is_download = record["dynamodb"]["Keys"][self.stack.names.sort_key]["S"] != MONTH
            if downloads is not None and is_download and delivered == downloads:
                return
            self.aggregator._count(shard_id, record)
            delivered += is_download


def blind(reconciler: Reconciler, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repair's looks at the stream find nothing in flight: records not yet readable, as AWS allows."""
    monkeypatch.setattr(reconciler, "_in_flight", lambda months, bound, budget=None: (set(), StreamCheck()))


def play(
    monkeypatch: pytest.MonkeyPatch, before: int, during: int, delivered_in_band: int
) -> tuple[int, int, int, list[str]]:
    """One history; returns (downloads written, final count, records refused, reasons of refusals in the band)."""
    stack = deploy(name=f"band{time.monotonic_ns()}")
    mapping = Mapping(stack)
    write_download(stack, "song1", "d-counted")
    mapping.deliver(None)
    set_count(stack, "song1", MONTH, 7)
    for number in range(before):
        write_download(stack, "song1", f"before-{number}")
    band_refusals: list[str] = []

    def while_band_open() -> None:
        for number in range(during):
            write_download(stack, "song1", f"during-{number}")
        refused_before = len(mapping.aggregator.refused)
        mapping.deliver(delivered_in_band)
        band_refusals.extend(str(entry) for entry in mapping.aggregator.refused[refused_before:])

    clients = operator_clients(region=REGION)
    sleep = once_the_band_opens(stack, while_band_open, month=MONTH)
    reconciler = Reconciler(
        clients, discover(clients, stack.table), empty_page_pause=0, sleep=sleep, **QUICK_BANDS | {"band_seconds": 120}
    )
    blind(reconciler, monkeypatch)
    report = reconciler.run_month(MONTH, repair=True)
    assert [d.state for d in report.differences] == ["repaired"]
    mapping.deliver(None)
    return 1 + before + during, stored_count(stack, "song1", MONTH) or 0, len(mapping.aggregator.refused), band_refusals


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=st.integers(0, 3), during=st.integers(0, 3), delivered_in_band=st.integers(0, 6))
def test_every_history_counts_each_download_at_most_once_and_reports_every_one_missing(
    aws: None, monkeypatch: pytest.MonkeyPatch, before: int, during: int, delivered_in_band: int
) -> None:
    # given downloads written before a repair (recounted, their records unread) and while its band is open, the
    # mapping delivering some of their records while the band is open and the rest after it closed
    written, count, refused, refused_in_band = play(monkeypatch, before, during, delivered_in_band)
    # then nothing is counted twice, what is missing was reported, and nothing delivered in the band was refused
    assert count <= written
    assert written - count <= refused
    assert refused_in_band == []


def test_the_histories_break_a_close_that_adds_every_held_download(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a close that ignores what the recount saw (adds every held download)
    from leaderboard_tools import reconcile

    original = reconcile.Reconciler._close

    def naive_close(self: Any, band: Any, caught_up: bool) -> None:
        band.seen = set()
        original(self, band, caught_up)

    monkeypatch.setattr(reconcile.Reconciler, "_close", naive_close)
    # when a download the recount saw is delivered while the band is open, then the history counts it twice
    written, count, _, _ = play(monkeypatch, before=1, during=0, delivered_in_band=1)
    assert count > written
