"""`backfill`: count the downloads a table held before the module was attached, exactly once beside the stream (the
engine is the `leaderboard_tools.backfill` package; the claims it needs are the module's `backfill_claims`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from leaderboard_tools.argument_types import positive_float, positive_int, scan_segments
from leaderboard_tools.commands import EXIT_ERROR, EXIT_EXACT, EXIT_INTERRUPTED, EXIT_PENDING
from leaderboard_tools.commands.operator_common import add_command, add_operator_arguments, operator_setup, phase_bar
from leaderboard_tools.output_format import add_output_argument, chosen_format, counted, text_line

BOARDS_LISTED = 50
"""Boards the table report lists; --output json lists every one."""
DESCRIPTION = """Count the downloads a table held before the module was attached, each exactly once beside the stream
(the aggregator and the backfill claim each download; docs/attaching.md). It resumes where a run stopped, at the rate
--max-read-units allows; --release-check says when backfill_claims may be switched off. In ledger mode (ledger = true)
it records what it counts of each download in the ledger, may run at any time, and has nothing to release."""
ON_INTERRUPT = "the backfill resumes where its segments stopped: run the same command again"


def register(commands: Any) -> None:
    command = add_command(
        commands,
        "backfill",
        "count the table's history (downloads written before the module was attached) exactly once beside the "
        "stream; needs backfill_claims = true or ledger = true",
        DESCRIPTION,
    )
    add_operator_arguments(command)
    command.add_argument(
        "--segments",
        type=scan_segments,
        default=4,
        help="parallel scan segments (default 4; a resumed run: the same)",
    )
    command.add_argument(
        "--max-read-units",
        type=positive_float,
        default=100.0,
        help="read units a second the scan may consume, over all segments (default 100)",
    )
    command.add_argument(
        "--page-size",
        type=positive_int,
        default=100,
        help="items per scan page (default 100; one page per segment is in memory)",
    )
    command.add_argument(
        "--release-check",
        action="store_true",
        help="only check whether backfill_claims may be switched off: 0 yes (every run has ended, and the aggregator "
        "has counted past every record created before the last run's end), 4 not yet; a run not heard from for two "
        "minutes (killed) is ended; in ledger mode 0: nothing to release",
    )
    add_output_argument(command)
    command.set_defaults(handler=run, on_interrupt=ON_INTERRUPT)


def run(arguments: argparse.Namespace) -> int:
    """0: the backfill is done (now or before); 4: unfinished, run again; 130: interrupted, run again; 1: refused or
    stopped."""
    from leaderboard_tools.backfill import ALREADY_DONE, INTERRUPTED, STOPPED, Backfill

    aws, deployment = operator_setup(arguments)
    output = chosen_format(arguments)
    if arguments.release_check:
        return _release_check(aws, deployment, output)
    shown = sys.stderr.isatty() and output != "json"
    total = int(aws.dynamodb.describe_table(TableName=deployment.table)["Table"].get("ItemCount") or 0)
    with phase_bar("Backfilling items (approximate total)", shown=shown, total=total or None) as on_phase:
        report = Backfill(
            aws.dynamodb,
            deployment,
            segments=arguments.segments,
            max_read_units=arguments.max_read_units,
            page_size=arguments.page_size,
            on_phase=on_phase,
        ).run()
    if output == "json":
        print(json.dumps(report.as_json()))
    elif output == "text":
        print("\n".join(_text_lines(report.as_json())))
    else:
        print(_text(report.as_json(), already=report.status == ALREADY_DONE))
    if report.error:
        print(f"error: {report.error}", file=sys.stderr)
    if report.finished:
        return EXIT_EXACT
    if report.status == INTERRUPTED:
        print(
            "interrupted: the segments stopped at their next request; the backfill resumes from each segment's saved "
            "place, and what it counted past it is claimed, so nothing is counted twice: run the same command again",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    return EXIT_ERROR if report.status == STOPPED else EXIT_PENDING


def _text_lines(report: dict[str, Any]) -> list[str]:
    """`--output text`: the run's figures as name and value, then one line per board counted and per rejection."""
    claimed = report["alreadyClaimed"]
    lines = [
        text_line(name, report[key])
        for name, key in (
            ("table", "table"),
            ("status", "status"),
            ("segments", "segments"),
            ("segments_done", "segmentsDone"),
            ("read_units", "readUnits"),
            ("items_scanned", "itemsScanned"),
            ("downloads_read", "downloadsRead"),
            ("counted", "counted"),
            ("rejected", "rejected"),
            ("ended_at", "endedAt"),
            ("next", "next"),
        )
        if key in report
    ]
    lines += [text_line("already_claimed", owner, count) for owner, count in claimed.items()]
    lines += [text_line("counted_in", board, count) for board, count in report["countedPerBoard"].items()]
    lines += [
        text_line("rejected_item", json.dumps(example["key"]), example["reason"])
        for example in report["rejectedExamples"]
    ]
    return lines


def _release_check(aws: Any, deployment: Any, output: str) -> int:
    """0: the claims may go (apply backfill_claims = false), or ledger mode: nothing to release; 4: not yet, or no
    backfill has finished."""
    from leaderboard_tools.backfill.release import release_check
    from leaderboard_tools.backfill.report import iso

    release = release_check(aws, deployment)
    verdict = release.verdict
    if output == "text":
        print(text_line(deployment.table, iso(release.ended_at), release.waiting, release.releasable, verdict))
    elif output == "json":
        print(
            json.dumps(
                {
                    "table": deployment.table,
                    "endedAt": iso(release.ended_at),
                    "waiting": release.waiting,
                    "releasable": release.releasable,
                    "ledger": release.ledger,
                    "countedUntil": iso(release.counted_until),
                    "running": [run.run_id for run in release.running],
                    "endedNow": [run.run_id for run in release.ended_now],
                    "verdict": verdict,
                }
            )
        )
    elif release.ledger:
        print(f"backfill of {deployment.table}: {verdict}")
    else:
        print(f"backfill of {deployment.table}, ended {iso(release.ended_at) or 'never'}: {verdict}")
    return EXIT_EXACT if release.releasable or release.ledger else EXIT_PENDING


def _text(report: dict[str, Any], already: bool) -> str:
    lines = [
        f"backfill of {report['table']}: {report['status']} ({report['segmentsDone']} of "
        f"{counted(report['segments'], 'segment')} done)"
    ]
    if already:
        lines.append(f"  the backfill finished at {report['endedAt']} (DynamoDB's clock): this run changed nothing")
    else:
        claimed = report["alreadyClaimed"]
        lines += [
            f"  read units consumed: {report['readUnits']}",
            f"  items scanned: {report['itemsScanned']} (downloads read: {report['downloadsRead']})",
            f"  downloads counted: {report['counted']} ({counted(report['transactions'], 'transaction')}, "
            f"{report['retries']} sent again)",
        ]
        boards = list(report["countedPerBoard"].items())
        lines += [f"    {board}: {count}" for board, count in boards[:BOARDS_LISTED]]
        if len(boards) > BOARDS_LISTED:
            more = counted(len(boards) - BOARDS_LISTED, "more board")
            lines.append(f"    ... and {more} (--output json lists them all)")
        lines.append(
            f"  already claimed, not counted again: {claimed['stream']} by the stream, {claimed['backfill']} by an "
            f"earlier backfill run" + (f", {claimed['unknown']} by an unknown owner" if claimed["unknown"] else "")
        )
        lines.append(f"  rejected (not countable, not claimed): {report['rejected']}")
        lines += [f"    {json.dumps(example['key'])}: {example['reason']}" for example in report["rejectedExamples"]]
    if report["total"] is not None:
        total = report["total"]
        lines.append(
            f"  every run: {total['counted']} counted, {counted(total['itemsScanned'], 'item')} scanned, "
            f"{total['rejected']} rejected, {counted(total['readUnits'], 'read unit')}"
        )
    if report["endedAt"]:
        lines.append(f"  scan ended by {report['endedAt']} (DynamoDB's clock)")
    lines.append(f"next: {report['next']}")
    return "\n".join(lines)
