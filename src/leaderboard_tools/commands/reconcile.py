"""`reconcile`: recount a board's aggregates from the downloads and, with --repair, fix what nothing in flight
changes. The recount is the reconcile package's Reconciler; this module reads the flags and prints its report."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from leaderboard_core.buckets import period_of_board
from leaderboard_core.periods import MONTH_KEY
from leaderboard_tools.argument_types import UsageError, song_ids
from leaderboard_tools.commands import EXIT_DIFFERENCES, EXIT_EXACT, EXIT_PENDING
from leaderboard_tools.commands.operator_common import (
    add_command,
    add_operator_arguments,
    add_reconciler_arguments,
    operator_reconciler,
    operator_setup,
    phase_bar,
)
from leaderboard_tools.output_format import add_output_argument, chosen_format, counted, text_line
from leaderboard_tools.reconcile.clock import CLOCK_MARGIN_SECONDS

DESCRIPTION = """Recount a board's aggregates from the download items and report every difference. With --repair, set
right each aggregate whose downloads are all counted (none still in the stream), each with a conditional write and a
band that keeps a late download from being counted twice (docs/operations.md, "Reconcile and recover"); with
--repair --dry-run, say what the repair would set, writing nothing. With stream_readers = 1, --repair is the rebase of
every key's ledger item to its item, with the aggregates (every board at once), and has no dry run."""
ONE_READER_DRY_RUN = (
    "with stream_readers = 1, --repair is the rebase: it moves every key's ledger item to what its item counts, with "
    "the aggregates (every board at once), and takes back or keeps the keys named by --deleted-keys or --expired-keys; "
    "it has no dry run. `reconcile` without --repair reports the board's differences, writing nothing"
)
ON_INTERRUPT = (
    "nothing was written (reconcile writes only with --repair, after its recount and its in-flight check): run the "
    "same command again"
)


def register(commands: Any) -> None:
    command = add_command(
        commands,
        "reconcile",
        "recount a board's aggregates from the downloads; --repair fixes those nothing in flight changes",
        DESCRIPTION,
    )
    add_operator_arguments(command)
    add_reconciler_arguments(command)
    board = command.add_mutually_exclusive_group(required=True)
    board.add_argument("--month", type=month_argument, help="a month board: YYYY-MM")
    board.add_argument(
        "--board",
        type=board_argument,
        help="any board the deployment keeps: 2018-01-15T10, 2018-01-15, 2018-W03, 2018-01, 2018, all, "
        "and <bucket>@<category> (the category percent-encoded)",
    )
    command.add_argument(
        "--songs",
        type=song_ids,
        help="comma-separated song ids, none empty (default: every song of the board)",
    )
    command.add_argument(
        "--repair",
        action="store_true",
        help="set right each difference no download in flight can change (exit code 4 for those that wait on the "
        "stream); refused without a progress table",
    )
    command.add_argument(
        "--deleted-keys",
        type=claim_keys,
        default=[],
        metavar="CLAIM_KEY,...",
        help="with --repair and stream_readers = 1: keys the rebase reported gone (their claimKey, or claimKey@label "
        "for one of a key's several open reports; comma-separated) that the application deleted, not Time to Live: "
        "their counts are taken back (a refused report: closed as it is)",
    )
    command.add_argument(
        "--expired-keys",
        type=claim_keys,
        default=[],
        metavar="CLAIM_KEY,...",
        help="with --repair and stream_readers = 1: keys the rebase reported gone (their claimKey, or claimKey@label "
        "for one of a key's several open reports; comma-separated) that Time to Live deleted: they stay counted (an "
        "expiry is retention), and the key's next write no longer takes them back",
    )
    command.add_argument(
        "--dry-run",
        action="store_true",
        help="with --repair: run its checks and say what it would repair (state would_repair), writing nothing",
    )
    add_output_argument(command)
    command.set_defaults(handler=run, on_interrupt=ON_INTERRUPT)


def month_argument(text: str) -> str:
    if not MONTH_KEY.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a month YYYY-MM (01 to 12)")
    return text


def claim_keys(text: str) -> list[str]:
    keys = [key for key in text.split(",") if key]
    if not keys or not all(key.startswith("download#") for key in keys):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of claim keys (download#...)")
    return keys


def board_argument(text: str) -> str:
    if period_of_board(text) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a board id: <bucket> or <bucket>@<category>")
    return text


def run(arguments: argparse.Namespace) -> int:
    if arguments.dry_run and not arguments.repair:
        raise UsageError("--dry-run shows what --repair would write: give both (without --repair nothing is written)")
    aws, deployment = operator_setup(arguments, arguments.shards, arguments.queue_url)
    if arguments.repair and arguments.dry_run and deployment.one_stream_reader:
        raise UsageError(ONE_READER_DRY_RUN)
    if arguments.repair and deployment.one_stream_reader:
        return rebase_ledger(
            aws,
            deployment,
            chosen_format(arguments),
            arguments.deleted_keys,
            arguments.expired_keys,
            arguments.clock_margin_seconds,
        )
    if arguments.deleted_keys or arguments.expired_keys:
        raise UsageError(
            "--deleted-keys and --expired-keys answer the rebase's report: give them with --repair, with "
            "stream_readers = 1"
        )
    songs = arguments.songs
    board = arguments.board or arguments.month
    output = chosen_format(arguments)
    with phase_bar("Reading items", shown=sys.stderr.isatty() and output != "json") as on_phase:
        reconciler = operator_reconciler(arguments, aws, deployment, on_phase)
        recount = reconciler.run({board: songs}, repair=arguments.repair, dry_run=arguments.dry_run)
    report = recount.month(board)
    if output == "json":
        print(json.dumps(report.as_json() | ({"stream": recount.stream.as_json()} if recount.stream else {})))
    elif output == "text":
        if report.refused:
            print(text_line(board, None, None, None, "refused", report.refused))
        for difference in report.differences:
            print(
                text_line(
                    board,
                    difference.entity_id,
                    difference.stored,
                    difference.recounted,
                    difference.state,
                    difference.reason,
                )
            )
    else:
        print(
            f"{board}: {counted(report.aggregates, 'aggregate')}, {counted(report.downloads, 'download')} recounted "
            f"(count in {deployment.names.count}, {counted(deployment.leaderboard_shards, 'leaderboard shard')})"
            + (" [dry run: nothing written]" if arguments.dry_run else "")
        )
        if report.refused:
            print(f"  refused: {report.refused}")
        for difference in report.differences:
            state = difference.state + (f": {difference.reason}" if difference.reason else "")
            if difference.added_at_close > 0:
                state += f"; {difference.added_at_close} more held by its band, added at the close"
            elif difference.added_at_close < 0:
                state += f"; {-difference.added_at_close} taken back at the close (retractions its band held)"
            print(f"  {difference.entity_id}: stored {difference.stored}, recounted {difference.recounted} ({state})")
    return reconcile_exit_code(report.differences, report.refused is not None)


def rebase_ledger(
    aws: Any,
    deployment: Any,
    output: str,
    deleted: list[str],
    expired: list[str] = (),
    clock_margin_seconds: float = CLOCK_MARGIN_SECONDS,
) -> int:
    """With one reader per shard the repair is the rebase of every key's ledger item (a key's move spans its old and
    new boards, so no board is repaired alone): its report, and 3 when it left keys for the operator. A key kept
    expired is bounded by when its version was read, give or take `clock_margin_seconds`."""
    from leaderboard_tools.commands.recover import rebase_table, rebase_text
    from leaderboard_tools.recover.rebase import rebase
    from leaderboard_tools.recover.replicas_seen import refuse_if_replicas_seen

    both = sorted(set(deleted) & set(expired))
    if both:
        raise UsageError(f"a key is either deleted or expired, not both: {', '.join(both)}")
    refuse_if_replicas_seen(aws.dynamodb, deployment)
    report = rebase(
        aws.dynamodb, deployment, deleted=deleted, expired=expired, clock_margin_seconds=clock_margin_seconds
    )
    answer = report.as_json()
    if output == "json":
        print(json.dumps(answer))
    else:
        print("\n".join(rebase_text(answer) if output == "text" else rebase_table(answer)))
    return EXIT_DIFFERENCES if report.differences_remain else EXIT_EXACT


def reconcile_exit_code(differences: list[Any], refused: bool) -> int:
    left = ("differs", "ttl", "unrecorded", "unclocked", "would_repair", "unsettled")
    if refused or any(d.state in left for d in differences):
        return EXIT_DIFFERENCES
    if any(not d.repaired for d in differences):
        return EXIT_PENDING
    return EXIT_EXACT
