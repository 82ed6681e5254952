"""`readers`: who reads the table's stream, against the two readers a shard allows (the work is `reader_count.py`).

Run it before attaching the module to a platform's table (docs/attaching.md): with no aggregator of the module on the
stream yet, it counts the readers the module will add (`--stream-readers`, 2 unless given)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from leaderboard_tools.commands import EXIT_DIFFERENCES, EXIT_EXACT
from leaderboard_tools.commands.operator_common import add_command, add_table_arguments, operator_setup
from leaderboard_tools.deployment import DeploymentError
from leaderboard_tools.output_format import add_output_argument, chosen_format, counted, text_line

STATE_NOTES = {
    "Disabled": " (it reads again once enabled)",
    "Disabling": " (it reads again once enabled)",
    "Deleting": " (until it is gone)",
}
"""Why a mapping that is not reading now is counted."""


DESCRIPTION = """Who reads the table's stream: the module's aggregator (its mapping and its own reads: 2; with
stream_readers = 1 in ledger mode, its mapping only: 1) and every other event source mapping (1 each), against the 2
readers DynamoDB Streams allows a shard before it throttles. Run it before attaching the module to a platform's table
too, with the --stream-readers it will be applied with (docs/attaching.md); it writes nothing."""


def register(commands: Any) -> None:
    command = add_command(
        commands,
        "readers",
        "who reads the table's stream: the module's aggregator (2, or 1 with stream_readers = 1) and every other "
        "mapping (1 each), of the 2 readers a shard allows; runs before the module is attached too",
        DESCRIPTION,
    )
    add_table_arguments(command)
    command.add_argument(
        "--stream-readers",
        type=int,
        choices=(1, 2),
        help="the module's stream_readers: what it will take before it is attached (default 2); attached, the "
        "aggregator's STREAM_READERS, which this must agree with",
    )
    add_output_argument(command)
    command.set_defaults(handler=run, on_interrupt="nothing was written (readers only reads)")


def run(arguments: argparse.Namespace) -> int:
    """0: at most two readers of each shard; 3: more (DynamoDB Streams throttles them), with what to do."""
    from leaderboard_tools.operator_aws import operator_clients
    from leaderboard_tools.reader_count import stream_readers

    try:
        aws, deployment = operator_setup(arguments)
    except DeploymentError:
        # No aggregator of the module reads the stream yet (run before `terraform apply` against the source table),
        # or not one discovery can read: the stream and its mappings are read from the table itself.
        aws, deployment = operator_clients(arguments.profile, arguments.region, arguments.endpoint_url), None
    report = stream_readers(aws, arguments.table, deployment, arguments.stream_readers)
    output = chosen_format(arguments)
    if output == "json":
        print(json.dumps(report.as_json()))
    elif output == "text":
        answer = report.as_json()
        for reader in answer["readers"]:
            print(text_line(reader["readers"], reader["kind"], reader["function"] or "", _described(reader)))
        print(text_line(answer["total"], "total", answer["allowed"], "too many" if answer["tooMany"] else "ok"))
    else:
        print(_text(report.as_json()))
    warning = report.warning()
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    return EXIT_DIFFERENCES if report.too_many else EXIT_EXACT


def _text(report: dict[str, Any]) -> str:
    lines = [f"readers of each shard of the stream of {report['table']} ({report['streamArn']}):"]
    for reader in report["readers"]:
        lines.append(f"  {reader['readers']}  {_described(reader)}")
    lines.append(
        f"  {counted(report['total'], 'reader')}; a shard allows {report['allowed']}"
        + (": too many, DynamoDB Streams throttles them" if report["tooMany"] else "")
    )
    lines.append(
        "not counted: a Kinesis streaming destination (DynamoDB writes it, it does not read the stream); not listed: "
        "a process reading the stream itself (a DynamoDB Streams Kinesis Adapter application), which AWS does not name"
    )
    return "\n".join(lines)


def _described(reader: dict[str, Any]) -> str:
    mappings = "; ".join(
        f"mapping {mapping['uuid']} {mapping['state']}, batch size {mapping['batchSize']}"
        + STATE_NOTES.get(mapping["state"], "")
        for mapping in reader["mappings"]
    )
    function = (reader["function"] or "").split(":function:")[-1]
    one_reader = reader["kind"] == "aggregator" and reader["streamReaders"] == 1
    if reader["kind"] == "aggregator" and not reader["attached"]:
        if one_reader:
            return f"the module's aggregator, not attached yet: its mapping only, once applied; {reader['momentary']}"
        return "the module's aggregator, not attached yet: its mapping and its own reads of the shard, once applied"
    if one_reader:
        return (
            f"the module's aggregator {function} ({mappings}), its mapping the only steady reader (ledger mode, "
            f"stream_readers = 1); {reader['momentary']}"
        )
    if reader["kind"] == "aggregator":
        mode = ", in ledger mode too" if reader.get("ledger") else ""
        return f"the module's aggregator {function} ({mappings}) and its own reads of the shard{mode}"
    note = f"; {reader['note']}" if reader.get("note") else ""
    return f"{function} ({mappings}{note})"
