"""The operator's answers (`--deleted-keys`, `--expired-keys`) read against the gone reports open: each answer touches
exactly the report it names. A name is a claim key, or `<claim key>@<label>` for one report of a key that has more
than one open; a bare key with more than one open report is refused, nothing written for it, its labels listed."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from leaderboard_core.claims import KEPT_BY, REFUSED

Labels = frozenset[str] | None
"""The labels an answer names for a key; None: the key bare, answering its one open report (or its ledger item)."""


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
        open_labels = sorted(reports.get(claim, {}))
        if len(open_labels) > 1:
            refused[claim] = open_labels
        else:
            answered.setdefault(claim, None)
    for claim in refused:
        answered.pop(claim, None)
    return answered, refused


def touches(labels: Labels, label: str, report: Mapping[str, Any] | None) -> bool:
    """Whether an answer naming `labels` of a key answers its report of `label`: a named label always; a bare key, any
    (`report` unread: every open report counts alike)."""
    return labels is None or label in labels


def close_write(table: str, key: dict[str, Any], report: Mapping[str, Any]) -> dict[str, Any]:
    """The close of a refused report (the operator's `--deleted-keys`: judged, the count as it is), on `Refused` and
    `KeptBy` as read: deleted."""
    names, values = {"#refused": REFUSED, "#by": KEPT_BY}, {":refused": report[REFUSED]}
    condition = "#refused = :refused AND attribute_not_exists(#by)"
    if KEPT_BY in report:
        condition = "#refused = :refused AND #by = :by"
        values[":by"] = report[KEPT_BY]
    write = {"TableName": table, "Key": key, "ExpressionAttributeNames": names, "ConditionExpression": condition}
    return {"Delete": write | {"ExpressionAttributeValues": values}}
