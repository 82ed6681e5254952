"""The operator tools' command line: `leaderboard-tools top|rank|all|size|rekey|reconcile|recover`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from leaderboard_tools.commands import leaderboards


def command_size(arguments: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from leaderboard_tools.sizing import (
        PARTITION_WRITE_LIMIT,
        Boards,
        Workload,
        board_pressure,
        partition_load,
        shards_needed,
    )

    workload = Workload(
        downloads_per_second=arguments.downloads_per_second,
        songs=arguments.songs,
        zipf_exponent=arguments.zipf_exponent,
        batch_size=arguments.batch_size,
        aggregate_writes=arguments.aggregate_writes,
        window_seconds=arguments.window,
    )
    needed, load = shards_needed(workload, target_share=arguments.target_share)
    boards = Boards(periods=len(arguments.periods.split(",")), categories=arguments.categories)
    pressure = board_pressure(workload, boards, needed or 64)
    if arguments.json:
        print(
            json.dumps(
                {
                    "workload": dataclasses.asdict(workload),
                    "target_share": arguments.target_share,
                    "aggregate_updates_per_second": load.aggregate_updates_per_second,
                    "index_writes_per_second": load.index_writes_per_second,
                    "leaderboard_shards": needed,
                    "busiest_partition_index_writes_per_second": load.busiest_partition_index_writes_per_second,
                    "periods": arguments.periods.split(","),
                    "categories": arguments.categories,
                    "boards_per_download": boards.per_download,
                    "table_aggregate_updates_per_second": pressure.aggregate_updates_per_second,
                    "busiest_category_board_index_writes_per_second": (
                        pressure.busiest_category_board_index_writes_per_second
                    ),
                    "hottest_entity_writes_per_second": pressure.hottest_entity_writes_per_second,
                },
            )
        )
        return 0 if needed is not None else 1
    table = Table(title=f"{arguments.downloads_per_second:g} downloads/s over {arguments.songs} songs")
    for column in ("leaderboard_shards", "aggregate updates/s", "index writes/s", "busiest partition", "of its limit"):
        table.add_column(column, justify="right")
    shards = 1
    while shards <= max(needed or 64, 1):
        row = partition_load(workload, shards)
        table.add_row(
            str(shards),
            f"{row.aggregate_updates_per_second:,.0f}",
            f"{row.index_writes_per_second:,.0f}",
            f"{row.busiest_partition_index_writes_per_second:,.0f}/s",
            f"{row.busiest_share_of_limit:.0%}",
        )
        shards *= 2
    console = Console()
    console.print(table)
    if needed is None:
        console.print(
            f"No number of shards keeps the busiest partition under {arguments.target_share:.0%} of "
            f"{PARTITION_WRITE_LIMIT} writes/s: the most popular song alone writes too often. "
            "Use larger batches or aggregate_writes = per_window."
        )
        return 1
    console.print(f"leaderboard_shards = {needed}")
    if boards.per_download > 1:
        console.print(
            f"{boards.per_download} boards per download ({arguments.periods}"
            f"{f', {arguments.categories} categories' if arguments.categories else ''}): each period's overall board "
            f"as above; the table takes {pressure.aggregate_updates_per_second:,.0f} aggregate updates/s"
            + (
                f"; the busiest category board {pressure.busiest_category_board_index_writes_per_second:,.0f} "
                "index writes/s"
                if pressure.busiest_category_board_index_writes_per_second is not None
                else ""
            )
            + f"; the most popular song's table partition {pressure.hottest_entity_writes_per_second:,.0f} writes/s "
            f"({pressure.hottest_entity_share_of_limit:.0%} of {PARTITION_WRITE_LIMIT})."
        )
    return 0


EXIT_EXACT = 0
EXIT_ERROR = 1
EXIT_DIFFERENCES = 3
"""Differences remain that waiting will not fix: reported without --repair, a TTL month, a count TTL keeps, a band
that could not be recorded in its queue, a band DynamoDB's time could not be read for."""
EXIT_PENDING = 4
"""What remains waits only for the stream: downloads in flight, a checkpoint behind, a conflict, a band closed or
replaced (not known which). Run again later."""


def operator_setup(arguments: argparse.Namespace) -> tuple[Any, Any]:
    """boto3's session (profile, region, endpoint only if given) and the deployment read from --table."""
    from leaderboard_tools.deployment import NAME_FLAGS, Overrides, discover
    from leaderboard_tools.operator_aws import operator_clients

    aws = operator_clients(arguments.profile, arguments.region, arguments.endpoint_url)
    names = {name: value for name in NAME_FLAGS if (value := getattr(arguments, f"{name}_attribute", None)) is not None}
    overrides = Overrides(
        names=names,
        leaderboard_shards=getattr(arguments, "shards", None) if arguments.command != "rekey" else None,
        failure_queue_url=getattr(arguments, "queue_url", None),
        progress_table=arguments.progress_table,
    )
    return aws, discover(aws, arguments.table, overrides)


def command_rekey(arguments: argparse.Namespace) -> int:
    from leaderboard_tools.deployment import check_layout
    from leaderboard_tools.rekey import rekey

    aws, deployment = operator_setup(arguments)
    check_layout(deployment, arguments.shards)
    with progress_of("Moving aggregates", shown=sys.stderr.isatty()) as on_progress:
        report = rekey(aws.dynamodb, arguments.table, arguments.shards, names=deployment.names, on_progress=on_progress)
    print(json.dumps(vars(report)))
    return EXIT_EXACT if not report.failed else EXIT_ERROR


@contextmanager
def progress_of(description: str, shown: bool) -> Iterator[Callable[[int], None]]:
    """A progress bar on a terminal; a silent counter otherwise (JSON output, pipes)."""
    from rich.progress import Progress

    with Progress(transient=True, disable=not shown) as progress:
        task = progress.add_task(description, total=None)
        yield lambda done: progress.advance(task, done)


def reconcile_exit_code(differences: list[Any], refused: bool) -> int:
    if refused or any(d.state in ("differs", "ttl", "unrecorded", "unclocked") for d in differences):
        return EXIT_DIFFERENCES
    if any(not d.repaired for d in differences):
        return EXIT_PENDING
    return EXIT_EXACT


def operator_reconciler(
    arguments: argparse.Namespace, aws: Any, deployment: Any, on_progress: Callable[[int], None]
) -> Any:
    """The Reconciler as `reconcile` and `recover` configure it from their shared flags."""
    from leaderboard_tools.reconcile import Reconciler

    return Reconciler(
        aws,
        deployment,
        stream_budget_seconds=arguments.stream_budget_seconds,
        band_seconds=arguments.band_seconds,
        clock_margin_seconds=arguments.clock_margin_seconds,
        on_progress=on_progress,
    )


def command_reconcile(arguments: argparse.Namespace) -> int:
    aws, deployment = operator_setup(arguments)
    songs = [song for song in (arguments.songs or "").split(",") if song] or None
    with progress_of("Reading items", shown=sys.stderr.isatty() and not arguments.json) as on_progress:
        reconciler = operator_reconciler(arguments, aws, deployment, on_progress)
        run = reconciler.run({arguments.month: songs}, repair=arguments.repair)
    report = run.month(arguments.month)
    not_recounted = {"boardsNotRecounted": run.boards_not_recounted} if run.boards_not_recounted else {}
    if arguments.json:
        print(json.dumps(report.as_json() | ({"stream": run.stream.as_json()} if run.stream else {}) | not_recounted))
    else:
        print(
            f"{arguments.month}: {report.aggregates} aggregates, {report.downloads} downloads recounted "
            f"(count in {deployment.names.count}, {deployment.leaderboard_shards} leaderboard shards)"
        )
        if run.boards_not_recounted:
            print(f"  not recounted: {', '.join(run.boards_not_recounted)} (this recount covers month boards only)")
        if report.refused:
            print(f"  refused: {report.refused}")
        for difference in report.differences:
            state = difference.state + (f": {difference.reason}" if difference.reason else "")
            if difference.added_at_close:
                state += f"; {difference.added_at_close} more held by its band, added at the close"
            print(f"  {difference.entity_id}: stored {difference.stored}, recounted {difference.recounted} ({state})")
    return reconcile_exit_code(report.differences, report.refused is not None)


def command_recover(arguments: argparse.Namespace) -> int:
    from leaderboard_tools.deployment import DeploymentError
    from leaderboard_tools.recover import recover

    aws, deployment = operator_setup(arguments)
    if not deployment.failure_queue_url:
        raise DeploymentError("the deployment names no failure queue (FAILURE_QUEUE_URL): pass --queue-url")
    with progress_of("Reading items", shown=sys.stderr.isatty()) as on_progress:
        reconciler = operator_reconciler(arguments, aws, deployment, on_progress)
        report = recover(aws, deployment, reconciler, deployment.failure_queue_url)
    print(json.dumps(report.as_json()))
    if not report.kept:
        return EXIT_EXACT
    return EXIT_PENDING if report.pending else EXIT_DIFFERENCES


def month_argument(text: str) -> str:
    from leaderboard_core.buckets import MONTH_KEY

    if not MONTH_KEY.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a month YYYY-MM")
    return text


def add_operator_arguments(command: argparse.ArgumentParser) -> None:
    """What every operator tool takes: the table, where AWS is, and settings that stand in for the deployment's."""
    from leaderboard_tools.deployment import NAME_FLAGS, NAME_VARIABLES

    command.add_argument("--table", required=True, help="the module's table, <name>-downloads")
    where = command.add_argument_group("AWS (boto3's credential chain; an endpoint only if given)")
    where.add_argument("--profile", help="a profile of the shared AWS config files")
    where.add_argument("--region", help="default: the profile's or AWS_REGION")
    where.add_argument(
        "--endpoint-url", help="send every request there (also AWS_ENDPOINT_URL); default: AWS's regional endpoints"
    )
    settings = command.add_argument_group(
        "deployment settings: read from the table's aggregator; a flag fills what cannot be read and must "
        "agree with what can"
    )
    for name, flag in NAME_FLAGS.items():
        settings.add_argument(flag, dest=f"{name}_attribute", help=f"the aggregator's {NAME_VARIABLES[name]}")
    settings.add_argument("--progress-table", help="the aggregator's PROGRESS_TABLE_NAME")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="leaderboard-tools", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    leaderboards.register(commands)

    size = commands.add_parser(
        "size", help="leaderboard shards a workload needs: aggregate updates and index writes per partition"
    )
    size.add_argument("--downloads-per-second", type=float, required=True)
    size.add_argument("--songs", type=int, required=True)
    size.add_argument("--zipf-exponent", type=float, default=1.1)
    size.add_argument("--batch-size", type=int, default=100)
    size.add_argument("--aggregate-writes", choices=("per_batch", "per_window"), default="per_batch")
    size.add_argument("--window", type=float, default=60, help="tumbling window (s), for per_window")
    size.add_argument("--target-share", type=float, default=0.5, help="of a partition's write limit (default 0.5)")
    size.add_argument(
        "--periods", default="month", help="the module's leaderboard_periods, comma-separated (default month)"
    )
    size.add_argument(
        "--categories", type=int, default=0, help="categories the catalogue is spread over (0: no category boards)"
    )
    size.add_argument("--json", action="store_true")
    size.set_defaults(handler=command_size)

    move = commands.add_parser("rekey", help="move every aggregate to the index partitions of a leaderboard layout")
    add_operator_arguments(move)
    move.add_argument("--shards", type=int, required=True, help="the new leaderboard_shards (as deployed)")
    move.set_defaults(handler=command_rekey)

    for name, summary in (
        (
            "reconcile",
            "recount a month's aggregates from the downloads; --repair fixes those nothing in flight changes",
        ),
        ("recover", "make exact what the failure queue's messages name, then delete them"),
    ):
        command = commands.add_parser(name, help=summary)
        add_operator_arguments(command)
        command.add_argument("--shards", type=int, help="leaderboard_shards; default: the aggregator's")
        command.add_argument(
            "--stream-budget-seconds",
            type=float,
            default=300,
            help="longest read of one stream shard when checking for downloads in flight (default 300)",
        )
        command.add_argument(
            "--band-seconds",
            type=float,
            default=300,
            help="how long a repair waits after its fence for the records created before it (default 300); "
            "a later one is refused and reported",
        )
        command.add_argument(
            "--clock-margin-seconds",
            type=float,
            default=60,
            help="how far DynamoDB's clock may be from the stream's creation times, and this machine's from "
            "DynamoDB's (default 60); a smaller margin than the true skew can count a recounted download twice",
        )
        command.add_argument("--queue-url", help="the failure queue; default: the aggregator's FAILURE_QUEUE_URL")
        if name == "reconcile":
            command.add_argument("--month", required=True, type=month_argument, help="YYYY-MM")
            command.add_argument("--songs", help="comma-separated song ids (default: every song of the month)")
            command.add_argument("--repair", action="store_true")
            command.add_argument("--json", action="store_true")
            command.set_defaults(handler=command_reconcile)
        else:
            command.set_defaults(handler=command_recover)

    return run_command(parser.parse_args(argv))


def run_command(arguments: argparse.Namespace, errors: tuple[type[Exception], ...] = ()) -> int:
    """The parsed command's handler; what it raises for a person to read is printed, with exit code 1."""
    try:
        return arguments.handler(arguments)
    except (RuntimeError, *errors) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except (BotoCoreError, ClientError) as error:
        print(f"error: AWS: {error}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
