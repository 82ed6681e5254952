"""What `rekey`, `reconcile`, `recover`, `backfill` and `readers` share: the deployment's flags, reaching it, the
phase bar, and the Reconciler that `reconcile` and `recover` configure alike."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from leaderboard_tools.argument_types import (
    endpoint_url,
    leaderboard_shards,
    non_negative_float,
    positive_float,
    table_name,
    url,
)
from leaderboard_tools.commands import EXIT_CODES
from leaderboard_tools.deployment import NAME_FLAGS, NAME_VARIABLES
from leaderboard_tools.output_format import rich_console


def add_command(commands: Any, name: str, summary: str, description: str | None = None) -> argparse.ArgumentParser:
    """A command's parser: its one-line help in the list, a description in its own --help, the exit codes after."""
    return commands.add_parser(
        name,
        help=summary,
        description=textwrap.fill(" ".join((description or summary).split()), width=100),
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_operator_arguments(command: argparse.ArgumentParser) -> None:
    """What every operator tool takes: the table, where AWS is, and settings that stand in for the deployment's."""
    add_table_arguments(command)
    settings = command.add_argument_group(
        "deployment settings: read from the table's aggregator; a flag fills what cannot be read and must "
        "agree with what can"
    )
    for name, flag in NAME_FLAGS.items():
        settings.add_argument(flag, dest=f"{name}_attribute", help=f"the aggregator's {NAME_VARIABLES[name]}")
    settings.add_argument("--progress-table", type=table_name, help="the aggregator's PROGRESS_TABLE_NAME")


def add_table_arguments(command: argparse.ArgumentParser) -> None:
    """The table and where AWS is: what a tool takes that reads the deployment but writes nothing (`readers`)."""
    command.add_argument(
        "--table",
        required=True,
        type=table_name,
        help="the downloads' table (<name>-downloads, or source_table_name), or <name>-aggregates",
    )
    where = command.add_argument_group("AWS (boto3's credential chain; an endpoint only if given)")
    where.add_argument("--profile", help="a profile of the shared AWS config files (default: AWS_PROFILE)")
    where.add_argument("--region", help="default: AWS_REGION, else AWS_DEFAULT_REGION, else the profile's")
    where.add_argument(
        "--endpoint-url",
        type=endpoint_url,
        help="send every request there (also AWS_ENDPOINT_URL); default: AWS's regional endpoints",
    )


def add_reconciler_arguments(command: argparse.ArgumentParser) -> None:
    """The flags of `reconcile` and `recover` that stand in for the deployment's or bound the Reconciler's waits."""
    command.add_argument(
        "--shards", type=leaderboard_shards, help="leaderboard_shards (1 to 64); default: the aggregator's"
    )
    command.add_argument(
        "--stream-budget-seconds",
        type=positive_float,
        default=300,
        help="longest read of one stream shard when checking for downloads in flight (default 300)",
    )
    command.add_argument(
        "--band-seconds",
        type=positive_float,
        default=300,
        help="how long a repair waits after its fence for the records created before it (default 300); "
        "a later one is refused and reported",
    )
    command.add_argument(
        "--clock-margin-seconds",
        type=non_negative_float,
        default=60,
        help="how far DynamoDB's clock may be from the stream's creation times, and this machine's from "
        "DynamoDB's (default 60); a smaller margin than the true skew can count a recounted download twice",
    )
    command.add_argument("--queue-url", type=url, help="the failure queue; default: the aggregator's FAILURE_QUEUE_URL")


def operator_setup(
    arguments: argparse.Namespace, leaderboard_shards: int | None = None, failure_queue_url: str | None = None
) -> tuple[Any, Any]:
    """boto3's session (profile, region, endpoint only if given) and the deployment read from --table.

    `rekey` passes no shards: its --shards is the layout it moves to, not the deployment's."""
    from leaderboard_tools.deployment import Overrides, discover
    from leaderboard_tools.operator_aws import operator_clients

    aws = operator_clients(arguments.profile, arguments.region, arguments.endpoint_url)
    names = {name: value for name in NAME_FLAGS if (value := getattr(arguments, f"{name}_attribute", None)) is not None}
    overrides = Overrides(
        names=names,
        leaderboard_shards=leaderboard_shards,
        failure_queue_url=failure_queue_url,
        progress_table=getattr(arguments, "progress_table", None),
    )
    return aws, discover(aws, arguments.table, overrides)


class PhaseBar:
    """What `phase_bar` yields. Called with a count, it advances the current phase; `phase(name, total, ...)` starts
    the next one, on the same line (the reconcile package's `on_phase` protocol, reconcile/phases.py)."""

    def __init__(self, display: Any, description: str, total: int | None, approximate: bool) -> None:
        self._display = display
        self._task: Any = None
        self.phases: list[str] = []
        """Every phase started, in order (the first is the command's own description)."""
        self.phase(description, total, approximate=approximate)

    def __call__(self, done: int) -> None:
        self._display.advance(self._task, done)

    def phase(
        self,
        name: str,
        total: int | None = None,
        *,
        approximate: bool = False,
        unit: str = "items",
        bound: bool = False,
    ) -> None:
        """The next phase, on the line of the last one: `total` approximate (from ItemCount), or `bound` (the most it
        can take: its time remaining is "at most"), in `unit`s ("s": a wait, shown by the clock)."""
        if self._task is not None:
            self._display.update(self._task, visible=False)
            self._display.stop_task(self._task)
        described = f"{name} (approximate total: ItemCount)" if approximate and total else name
        self._task = self._display.add_task(
            described, total=total or None, unit=unit, approximate=approximate and bool(total), bound=bound
        )
        self.phases.append(name)


@contextmanager
def phase_bar(
    description: str, shown: bool, total: int | None = None, *, approximate: bool = False, console: Any = None
) -> Iterator[PhaseBar]:
    """The phase bar: a line on stderr when it is a terminal (a rich progress display); a silent counter otherwise
    (JSON output, pipes).

    One line: the phase (a run names each as it starts it, through the yielded object's `phase`), the count, the
    rate, the time elapsed and, where a total is known, the bar, "of ~N" for an approximate total (such as
    DescribeTable's ItemCount) and the time remaining."""
    from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
    from rich.progress_bar import ProgressBar as Bar
    from rich.text import Text

    def waited(task: Task) -> float | None:
        """A wait (unit "s") is shown by the clock, not by the counts its run reports every few seconds."""
        if task.fields.get("unit") != "s" or task.total is None:
            return None
        return min(task.elapsed or 0.0, task.total)

    class ClockedBar(BarColumn):
        def render(self, task: Task) -> Bar:
            seconds = waited(task)
            if seconds is None:
                return super().render(task)
            return Bar(total=max(task.total or 0, 1), completed=seconds, width=self.bar_width, animation_time=0)

    class Count(ProgressColumn):
        def render(self, task: Task) -> Text:
            unit = task.fields.get("unit", "items")
            completed = task.completed if (seconds := waited(task)) is None else seconds
            if task.total is None:
                return Text(f"{completed:,.0f} {unit}" if completed else "", style="progress.download")
            about = "~" if task.fields.get("approximate") else ""
            return Text(f"{completed:,.0f} of {about}{task.total:,.0f} {unit}", style="progress.download")

    class Rate(ProgressColumn):
        def render(self, task: Task) -> Text:
            unit = task.fields.get("unit", "items")
            if not task.speed or unit == "s":
                return Text("")
            return Text(f"{task.speed:,.0f} {unit}/s", style="progress.data.speed")

    class Remaining(ProgressColumn):
        def render(self, task: Task) -> Text:
            seconds = waited(task)
            remaining = task.time_remaining if seconds is None else (task.total or 0) - seconds
            if task.total is None or remaining is None:
                return Text("")
            minutes, whole = divmod(int(remaining), 60)
            hours, minutes = divmod(minutes, 60)
            label = "at most" if task.fields.get("bound") else "ETA"
            return Text(f"{label} {hours}:{minutes:02d}:{whole:02d}", style="progress.remaining")

    columns = (
        TextColumn("[progress.description]{task.description}"),
        ClockedBar(),
        Count(),
        Rate(),
        TimeElapsedColumn(),
        Remaining(),
    )
    with Progress(*columns, console=console or rich_console(stderr=True), transient=True, disable=not shown) as display:
        yield PhaseBar(display, description, total, approximate)


def operator_reconciler(
    arguments: argparse.Namespace, aws: Any, deployment: Any, on_phase: Callable[[int], None]
) -> Any:
    """The Reconciler as `reconcile` and `recover` configure it from their shared flags; it names its phases through
    `on_phase.phase` where `on_phase` has one (a PhaseBar)."""
    from leaderboard_tools.reconcile import Reconciler

    return Reconciler(
        aws,
        deployment,
        stream_budget_seconds=arguments.stream_budget_seconds,
        band_seconds=arguments.band_seconds,
        clock_margin_seconds=arguments.clock_margin_seconds,
        on_phase=on_phase,
    )
