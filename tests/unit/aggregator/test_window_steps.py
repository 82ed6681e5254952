"""A final invocation reads a window longer than one read budget in bounded steps, within the one invocation.

The handler on moto's stream, read through pages of two records (GetRecords' `Limit`) and a read
budget of five records, so that a window of fifteen downloads is three budgets long.
"""

from __future__ import annotations

from typing import Any

import pytest

from aggregator import AggregatesNotWritten
from aggregator_settings import PER_WINDOW
from tests.unit.aggregator.handler_on_moto import Deployed
from tests.unit.conftest import FakeLambdaContext, count_of

BUDGET, PAGE = 5, 2


class SmallPages:
    """moto's stream read through pages of `PAGE` records, each read's records (one GetShardIterator on) counted."""

    def __init__(self, streams: Any) -> None:
        self._streams = streams
        self.reads: list[int] = []
        self.pages = 0

    def get_shard_iterator(self, **parameters: Any) -> Any:
        self.reads.append(0)
        return self._streams.get_shard_iterator(**parameters)

    def get_records(self, **parameters: Any) -> Any:
        page = self._streams.get_records(**{**parameters, "Limit": PAGE})
        self.pages += 1
        self.reads[-1] += len(page.get("Records") or [])
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams, name)


class TimeForPages(FakeLambdaContext):
    """An invocation with time for `pages` more pages of the stream, then only enough to write what it read."""

    def __init__(self, stream: SmallPages, pages: int, deadline_margin_ms: int) -> None:
        super().__init__()
        self._stream, self._last_page, self._left = stream, stream.pages + pages, deadline_margin_ms + 1000

    def get_remaining_time_in_millis(self) -> int:
        return 60_000 if self._stream.pages < self._last_page else self._left


def a_window_of_three_budgets(deployed: Deployed, lambda_context: Any) -> tuple[SmallPages, dict[str, Any]]:
    """Fifteen downloads delivered in two non-final batches of a per_window window; the state they hand on."""
    deployed.configure(aggregate_writes=PER_WINDOW, read_budget_records=BUDGET)
    pages = SmallPages(deployed.streams)
    deployed.use_streams(pages)
    deployed.write("song1", 9)
    deployed.write("song2", 6)
    records = deployed.stream_records()
    state = deployed.invoke(deployed.window_event(records[:8]), lambda_context)["state"]
    state = deployed.invoke(deployed.window_event(records[8:], state=state), lambda_context)["state"]
    return pages, state


def test_a_final_invocation_counts_a_window_of_three_read_budgets_in_one_invocation_step_by_step(
    deployed: Deployed, lambda_context: Any
) -> None:
    # given a per_window window of fifteen downloads, three read budgets of five
    pages, state = a_window_of_three_budgets(deployed, lambda_context)
    pages.reads.clear()
    # when its final invocation runs, with time to spare
    deployed.invoke(deployed.window_event([], state=state, final=True), lambda_context)
    # then it counted the whole window without failing, reading at most a budget and a page per step
    assert (count_of(deployed.dynamodb, "song1", "2018-01"), count_of(deployed.dynamodb, "song2", "2018-01")) == (9, 6)
    assert len(pages.reads) >= 3
    assert max(pages.reads) <= BUDGET + PAGE


def test_a_final_invocation_out_of_time_mid_window_fails_and_its_retry_counts_the_window_exactly(
    deployed: Deployed, lambda_context: Any
) -> None:
    # given a per_window window of fifteen downloads, three read budgets of five
    pages, state = a_window_of_three_budgets(deployed, lambda_context)
    final = deployed.window_event([], state=state, final=True)
    # when its final invocation has time for one step only
    with pytest.raises(AggregatesNotWritten):
        deployed.invoke(final, TimeForPages(pages, 3, deployed.settings.deadline_margin_ms))
    # then it fails, and its retry, with time to spare, counts every download of the window once
    deployed.invoke(final, lambda_context)
    assert (count_of(deployed.dynamodb, "song1", "2018-01"), count_of(deployed.dynamodb, "song2", "2018-01")) == (9, 6)
