"""`recover`: make exact what the failure queue's messages name, then delete them (`leaderboard_tools.recover`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from leaderboard_tools.commands import EXIT_DIFFERENCES, EXIT_EXACT, EXIT_PENDING
from leaderboard_tools.commands.operator_common import (
    add_command,
    add_operator_arguments,
    add_reconciler_arguments,
    operator_reconciler,
    operator_setup,
    phase_bar,
)
from leaderboard_tools.deployment import DeploymentError
from leaderboard_tools.output_format import add_output_argument, chosen_format, counted, text_line

DESCRIPTION = """Answer the failure queue (and the band queue): count the batches the event source mapping gave up on
(with stream_readers = 1, the aggregator reads each back; a range no longer in the stream is repaired by the rebase of
every key's ledger item, as trimmed records are), recount and repair the aggregates a refused record or an expired
band names (with stream_readers = 1: the rebase), report the malformed downloads with their item's key, and delete
each message once everything it names is exact; what is not exact yet is kept for the next run (docs/operations.md,
"Reconcile and recover")."""
ON_INTERRUPT = "recover had not begun to answer the queue: nothing was changed; run the same command again"


def register(commands: Any) -> None:
    command = add_command(
        commands, "recover", "make exact what the failure queue's messages name, then delete them", DESCRIPTION
    )
    add_operator_arguments(command)
    add_reconciler_arguments(command)
    add_output_argument(command)
    command.set_defaults(handler=run, on_interrupt=ON_INTERRUPT)


def run(arguments: argparse.Namespace) -> int:
    """The report; 0 when no message is kept, else 4 if waiting will settle them, 3 if it will not."""
    from leaderboard_tools.recover import recover

    aws, deployment = operator_setup(arguments, arguments.shards, arguments.queue_url)
    if not deployment.failure_queue_url:
        raise DeploymentError("the deployment names no failure queue (FAILURE_QUEUE_URL): pass --queue-url")
    output = chosen_format(arguments)
    with phase_bar("Reading items", shown=sys.stderr.isatty() and output != "json") as on_phase:
        reconciler = operator_reconciler(arguments, aws, deployment, on_phase)
        report = recover(aws, deployment, reconciler, deployment.failure_queue_url)
    answer = report.as_json()
    if output == "json":
        print(json.dumps(answer))
    elif output == "text":
        print("\n".join(_text(answer)))
    else:
        print(_table(answer))
    if report.differences_remain:
        return EXIT_DIFFERENCES
    return EXIT_PENDING if report.kept else EXIT_EXACT


def _key(key: dict[str, Any] | None) -> str:
    if not key:
        return "(the message names no key)"
    return ", ".join(f"{name}={value if isinstance(value, str) else json.dumps(value)}" for name, value in key.items())


def _text(answer: dict[str, Any]) -> list[str]:
    """`--output text`: one line per message answered, its kind first."""
    lines = [text_line("messages", answer["messages"], "deleted", answer["deleted"], "kept", len(answer["kept"]))]
    lines += [
        text_line("rejected_download", _key(entry["key"]), entry["sequenceNumber"], entry["reason"])
        for entry in answer["rejected_downloads"]
    ]
    lines += [text_line("rejected_fix", answer["rejected_fix"])] if answer["rejected_downloads"] else []
    lines += [
        text_line("refused_record", entry["sequenceNumber"], entry["reason"]) for entry in answer["refused_records"]
    ]
    lines += [
        text_line(
            "failed_batch", batch.get("shardId"), batch.get("start"), batch.get("end"), batch["done"], batch["note"]
        )
        for batch in answer["batches"]
    ]
    lines += [
        text_line("recount_band", band["entityId"], band["board"], band["done"], band["note"])
        for band in answer["bands"]
    ]
    lines += rebase_text(answer["rebased"])
    lines += drift_text(answer["drift"])
    lines += [
        text_line("kept", entry["kind"], ",".join(entry["boards"]), "pending" if entry["retry"] else "", entry["note"])
        for entry in answer["kept"]
    ]
    return lines


def rebase_text(rebased: dict[str, Any] | None) -> list[str]:
    """`--output text`: the rebase's tally, then each key it left as it is or found gone."""
    if rebased is None:
        return []
    tally = [rebased[name] for name in ("keys_read", "in_step", "moved", "counted", "taken_back", "kept_expired")]
    return [
        text_line("rebase", *tally),
        *(text_line("rebase_unplaced", entry["claimKey"], entry["why"]) for entry in rebased["unplaced"]),
        *(
            text_line("rebase_rejected", entry["claimKey"], json.dumps(entry["key"]), entry["why"])
            for entry in rebased.get("rejected", [])
        ),
        *(
            text_line(
                "rebase_gone",
                entry["claimKey"],
                entry["entityId"],
                json.dumps(entry["counts"]),
                entry["why"],
                json.dumps(entry["key"]),
            )
            for entry in rebased["gone"]
        ),
    ]


def drift_text(drift: dict[str, Any] | None) -> list[str]:
    """`--output text`: each aggregate set to what the ledger counts in it, then each one left as it is."""
    if drift is None:
        return []
    return [
        *(
            text_line("drift_settled", entry["entityId"], entry["board"], entry["stored"], entry["ledger"])
            for entry in drift["settled"]
        ),
        *(
            text_line(
                "drift_left", entry["entityId"], entry["board"], "pending" if entry["retry"] else "", entry["why"]
            )
            for entry in drift["left"]
        ),
    ]


def drift_table(drift: dict[str, Any]) -> list[str]:
    """For a person: the aggregates set to what the ledger counts in them, and those left as they are."""
    lines = [
        f"aggregates the ledger does not explain: {len(drift['settled'])} set to what the ledger counts, "
        f"{len(drift['left'])} left"
    ]
    lines += [
        f"  set: {entry['entityId']} in {entry['board']}: {entry['stored']} -> {entry['ledger']}"
        for entry in drift["settled"]
    ]
    lines += [f"  left: {entry['entityId']} in {entry['board']}: {entry['why']}" for entry in drift["left"]]
    return lines


def rebase_table(rebased: dict[str, Any]) -> list[str]:
    """For a person: the rebase's tally, then each key it left as it is or found gone."""
    lines = [
        f"rebase of the ledger: {counted(rebased['keys_read'], 'key')} read, {rebased['in_step']} in step, "
        f"{rebased['moved']} moved, {rebased['counted']} counted, {rebased['taken_back']} taken back, "
        f"{rebased['kept_expired']} kept as expired"
    ]
    lines += [f"  left as it is: {entry['claimKey']}: {entry['why']}" for entry in rebased["unplaced"]]
    lines += [
        f"  rejected: {json.dumps(entry['key'])} ({entry['claimKey']}): {entry['why']}"
        for entry in rebased.get("rejected", [])
    ]
    lines += [
        f"  gone: {entry['entityId']} {entry['counts']} ({entry['claimKey']}, key {json.dumps(entry['key'])}): "
        f"{entry['why']}"
        for entry in rebased["gone"]
    ]
    if rebased["gone"]:
        lines.append(
            "  each key gone that the application deleted (not Time to Live): `leaderboard-tools reconcile --repair "
            "--deleted-keys <claimKey>,...` takes it back; each that Time to Live deleted: `--expired-keys "
            "<claimKey>,...` keeps it counted if named before the key's next write is applied (after it: reported, "
            "not kept)"
        )
    return lines


def _table(answer: dict[str, Any]) -> str:
    """For a person: what was answered, what is kept and why, and the keys of the items to fix."""
    lines = [
        f"recover: {counted(answer['messages'], 'message')} received, {answer['deleted']} deleted, "
        f"{len(answer['kept'])} kept"
    ]
    if answer["rejected_downloads"]:
        lines.append(f"  malformed downloads (never counted; {answer['rejected_fix']}):")
        lines += [
            f"    {_key(entry['key'])}: {entry['reason']} (sequence {entry['sequenceNumber']})"
            for entry in answer["rejected_downloads"]
        ]
    if answer["refused_records"]:
        lines.append("  refused records (their aggregates made exact):")
        lines += [f"    sequence {entry['sequenceNumber']}: {entry['reason']}" for entry in answer["refused_records"]]
    if answer["batches"]:
        lines.append("  batches the mapping gave up on:")
        lines += [
            f"    shard {batch.get('shardId')} {batch.get('start')}..{batch.get('end')}: "
            + ("counted" if batch["done"] else "not yet")
            + (f" ({batch['note']})" if batch.get("note") else "")
            for batch in answer["batches"]
        ]
    if answer["bands"]:
        lines.append("  bands of repairs:")
        lines += [
            f"    {band['entityId']} in {band['board']}: "
            + ("done" if band["done"] else "kept")
            + (f" ({band['note']})" if band.get("note") else "")
            for band in answer["bands"]
        ]
    for board in answer["reconciled"]:
        states = [difference["state"] for difference in board["differences"]]
        if states or board.get("refused"):
            repaired, pending = states.count("repaired"), states.count("pending")
            left = len(states) - repaired - pending
            lines.append(
                f"  recount of {board['board']}: {repaired} repaired, {pending} pending, {left} left"
                + (f"; refused: {board['refused']}" if board.get("refused") else "")
            )
    if answer["rebased"] is not None:
        lines += ["  " + line for line in rebase_table(answer["rebased"])]
    if answer["drift"] is not None:
        lines += ["  " + line for line in drift_table(answer["drift"])]
    if answer["kept"]:
        lines.append("  kept for the next run:")
        lines += [
            f"    {entry['kind']} ({', '.join(entry['boards']) or 'no board'}): {entry['note']}"
            + (" [waits on the stream: run again later]" if entry["retry"] else "")
            for entry in answer["kept"]
        ]
    return "\n".join(lines)
