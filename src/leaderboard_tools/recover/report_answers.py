"""The operator's answers (`--deleted-keys`, `--expired-keys`) read against the gone reports open: each answer touches
exactly the report it names. A name is a claim key, or `<claim key>@<label>` for one report of a key that has more
than one open; a bare key with more than one open report is refused, nothing written for it, its labels listed."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from leaderboard_core.claims import CLOSED, KEPT_BY, REFUSED, REFUSED_FOR

Labels = frozenset[str] | None
"""The labels an answer names for a key; None: the key bare, answering its one open report (or its ledger item)."""


def taker(report: Mapping[str, Any]) -> str | None:
    """A gone report's taker (`KeptBy`), as read."""
    return (report.get(KEPT_BY) or {}).get("S")


def lifted(report: Mapping[str, Any]) -> bool:
    """A refusal for a taker (`RefusedFor`) that a record read back since gave back or replaced: answerable again."""
    return REFUSED_FOR in report and taker(report) != report[REFUSED_FOR].get("S")


def closed(report: Mapping[str, Any]) -> bool:
    """A refusal the operator closed, on a taker that still stands: not listed, and no bare key answers it."""
    return CLOSED in report and not lifted(report)


def split_name(name: str, reports: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> tuple[str, str | None]:
    """(claim key, label) of `<claim key>@<label>` naming an open report; (name, None) for anything else."""
    claim, at, label = name.rpartition("@")
    if at and label in reports.get(claim, {}):
        return claim, label
    return name, None


def resolve(
    names: Collection[str], reports: Mapping[str, Mapping[str, Mapping[str, Any]]]
) -> tuple[dict[str, Labels], dict[str, list[str]]]:
    """The keys the names answer, with the labels each names, and the bare keys refused (-> their open labels)."""
    answered: dict[str, Labels] = {}
    refused: dict[str, list[str]] = {}
    for name in names:
        claim, label = split_name(name, reports)
        if label is not None:
            previous = answered.get(claim) or frozenset()
            answered[claim] = previous | {label}
            continue
        open_labels = sorted(label for label, report in reports.get(claim, {}).items() if not closed(report))
        if len(open_labels) > 1:
            refused[claim] = open_labels
        else:
            answered.setdefault(claim, None)
    for claim in refused:
        answered.pop(claim, None)
    return answered, refused


def touches(labels: Labels, label: str, report: Mapping[str, Any] | None) -> bool:
    """Whether an answer naming `labels` of a key answers its report of `label`: a named label always; a bare key any
    but a closed one."""
    if labels is None:
        return report is None or not closed(report)
    return label in labels


def close_write(table: str, key: dict[str, Any], report: Mapping[str, Any]) -> dict[str, Any]:
    """The close of a refused report (the operator's `--deleted-keys`: the count right as it is, or put right by hand),
    on `Refused` and `KeptBy` as read. Resting on a taker, it is kept, marked `Closed` with that taker (`RefusedFor`):
    the aggregator reopens it, reported, if a record read back later gives the taker back. Resting on none, deleted."""
    names, values = {"#refused": REFUSED, "#by": KEPT_BY}, {":refused": report[REFUSED]}
    write: dict[str, Any] = {"TableName": table, "Key": key, "ExpressionAttributeNames": names}
    if taker(report) is None:
        write |= {"ConditionExpression": "#refused = :refused AND attribute_not_exists(#by)"}
        return {"Delete": write | {"ExpressionAttributeValues": values}}
    write |= {"UpdateExpression": "SET #closed = :closed, #for = :by"}
    write |= {"ConditionExpression": "#refused = :refused AND #by = :by"}
    names |= {"#closed": CLOSED, "#for": REFUSED_FOR}
    values |= {":closed": {"BOOL": True}, ":by": report[KEPT_BY]}
    return {"Update": write | {"ExpressionAttributeValues": values}}
