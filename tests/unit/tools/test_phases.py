"""A long run names its phases as it goes, each with a count and, where one is known, its total: what the phase
bar of `reconcile --repair`, `recover` and `backfill` shows (phase, count, rate, ETA), on moto's stack."""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import boto3
import pytest
from rich.console import Console

from leaderboard_tools.backfill import DONE
from leaderboard_tools.commands.operator_common import phase_bar
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from leaderboard_tools.reconcile.phases import (
    ANSWERING_MESSAGES,
    BEGINNING_BACKFILL,
    CLOSING_BANDS,
    ENDING_BACKFILL,
    READING_AGGREGATES,
    READING_QUEUE,
    READING_STREAM,
    RECOUNTING,
    REPAIRING,
    SCANNING_HISTORY,
    WAITING_FOR_FENCE,
    WAITING_FOR_STREAM,
)
from leaderboard_tools.recover import recover
from tests.unit.tools.operator_stack import MONTH, QUICK_RECOVERY, REGION, drifted_song, reconciler, stored_count
from tests.unit.tools.test_backfill import (  # the backfill's stack, and moto serving one request at a time
    backfill,
    one_request_at_a_time,  # noqa: F401
    stack_with_claims,
    write_history,
)


@dataclass
class Phase:
    name: str
    total: int | None
    approximate: bool
    unit: str
    bound: bool = False
    done: int = 0


@dataclass
class Recorder:
    """An `on_phase` with `phase`, as the phase bar is: what a run reports, in order."""

    phases: list[Phase] = field(default_factory=list)

    def __call__(self, done: int) -> None:
        self.phases[-1].done += done

    def phase(
        self,
        name: str,
        total: int | None = None,
        *,
        approximate: bool = False,
        unit: str = "items",
        bound: bool = False,
    ) -> None:
        self.phases.append(Phase(name, total, approximate, unit, bound))

    @property
    def names(self) -> list[str]:
        return [phase.name for phase in self.phases]

    def __getitem__(self, name: str) -> Phase:
        return next(phase for phase in self.phases if phase.name == name)


def test_a_repair_reports_its_phases_in_order_with_their_counts(aws: None) -> None:
    # given a drifted song (two downloads, hand-edited to five), and a repair of its whole month
    stack = drifted_song()
    phases = Recorder()
    report = reconciler(stack, band_seconds=5, on_phase=phases).run_month(MONTH, repair=True)
    assert report.repaired
    assert stored_count(stack, "song1", MONTH) == 2
    # then it named each phase as it began it, in the order it went through them
    assert phases.names == [
        READING_AGGREGATES,
        RECOUNTING,
        READING_STREAM,
        REPAIRING,
        WAITING_FOR_FENCE,
        WAITING_FOR_STREAM,
        CLOSING_BANDS,
    ]
    # and the scans' totals are DescribeTable's ItemCount, said to be approximate, their counts the items scanned
    items = boto3.client("dynamodb", region_name=REGION).describe_table(TableName=stack.table)["Table"]["ItemCount"]
    for scan in (READING_AGGREGATES, RECOUNTING):
        assert (phases[scan].total, phases[scan].approximate) == (items, True)
        assert phases[scan].done == items  # the downloads and the aggregate, in one table
    # and the others count what they are about, out of an exact total
    shards = phases[READING_STREAM]
    assert (shards.unit, shards.done, shards.approximate) == ("shards", shards.total, False)
    assert (phases[REPAIRING].unit, phases[REPAIRING].total, phases[REPAIRING].done) == ("aggregates", 1, 1)
    assert (phases[CLOSING_BANDS].unit, phases[CLOSING_BANDS].total, phases[CLOSING_BANDS].done) == (
        "bands",
        1,
        1,
    )
    # and the waits are counted in seconds, never past their total: the fence's exact, the stream's a bound (the wait
    # ends as soon as the stream shows nothing left)
    for wait in (WAITING_FOR_FENCE, WAITING_FOR_STREAM):
        assert phases[wait].unit == "s"
        assert phases[wait].total is not None
        assert phases[wait].done <= max(phases[wait].total or 0, 1) + 1
    assert (phases[WAITING_FOR_FENCE].bound, phases[WAITING_FOR_STREAM].bound) == (False, True)


def test_a_recount_without_repair_only_reads(aws: None) -> None:
    stack = drifted_song()
    phases = Recorder()
    reconciler(stack, on_phase=phases).run_month(MONTH)
    assert phases.names == [READING_AGGREGATES, RECOUNTING]


def test_a_recount_of_named_songs_counts_the_aggregates_it_reads(aws: None) -> None:
    stack = drifted_song()
    phases = Recorder()
    reconciler(stack, on_phase=phases).run({MONTH: ["song1", "song9"]})
    assert phases.names == [READING_AGGREGATES, RECOUNTING]
    read = phases[READING_AGGREGATES]
    assert (read.total, read.done, read.unit, read.approximate) == (2, 2, "aggregates", False)
    assert phases[RECOUNTING].total is None  # a Query per song: how many items, nothing says beforehand


def test_recover_names_its_own_phases_before_the_repairs(aws: None) -> None:
    # given a stack whose failure queue holds nothing
    stack = drifted_song()
    phases = Recorder()
    clients = operator_clients(region=REGION)
    # when recover runs
    report = recover(
        clients,
        discover(clients, stack.table),
        reconciler(stack, on_phase=phases),
        stack.queue_url,
        visibility_seconds=30,
        pacing=QUICK_RECOVERY,
    )
    # then it read the queue, then answered what it held (nothing: no recount followed)
    assert report.messages == 0
    assert phases.names == [READING_QUEUE, ANSWERING_MESSAGES]


@pytest.mark.usefixtures("one_request_at_a_time")
def test_a_backfill_reports_its_phases_in_order(aws: None) -> None:
    # given a table's history of 20 downloads
    stack = stack_with_claims(periods="month", category=False)
    write_history(stack, 20, genres=False)
    phases = Recorder()
    # when the backfill runs to its end
    report = backfill(stack, on_phase=phases).run()
    # then it read where its segments stand, scanned the history (out of ItemCount), then recorded its end
    assert report.status == DONE
    assert phases.names == [BEGINNING_BACKFILL, SCANNING_HISTORY, ENDING_BACKFILL]
    scan = phases[SCANNING_HISTORY]
    assert scan.approximate
    assert scan.done >= 20


def test_the_bar_names_the_phase_and_shows_the_count_the_rate_and_the_eta() -> None:
    # given the phase bar on a terminal
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=160, color_system=None)
    with phase_bar("Reading items", shown=True, console=console) as bar:
        # when a run names a scan with an approximate total, and advances it
        bar.phase(RECOUNTING, 1000, approximate=True)
        bar(250)
        bar(250)
        bar._display.refresh()
        scanning = screen.getvalue()
        # and then a wait counted in seconds, which the bar shows by the clock, and a wait with a bound
        bar.phase(WAITING_FOR_FENCE, 65, unit="s")
        bar._display.refresh()
        bar.phase(WAITING_FOR_STREAM, 300, unit="s", bound=True)
        bar._display.refresh()
    # then the line names the phase, says the total is approximate, and counts, with the time remaining
    assert RECOUNTING in scanning
    assert "approximate" in scanning
    assert "500 of ~1,000 items" in scanning
    assert "ETA" in scanning
    assert WAITING_FOR_FENCE in screen.getvalue()
    assert "0 of 65 s" in screen.getvalue()
    assert "ETA 0:01:0" in screen.getvalue()
    assert "at most 0:0" in screen.getvalue()
    assert bar.phases == ["Reading items", RECOUNTING, WAITING_FOR_FENCE, WAITING_FOR_STREAM]


def test_the_bar_is_silent_off_a_terminal() -> None:
    screen = io.StringIO()
    with phase_bar("Reading items", shown=False, console=Console(file=screen)) as bar:
        bar.phase(RECOUNTING, 10)
        bar(10)
    assert screen.getvalue() == ""
    assert bar.phases == ["Reading items", RECOUNTING]
