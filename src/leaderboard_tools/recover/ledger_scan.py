"""The rebase's scans: the ledger table's items, sorted as they are read (the downloads' ledger items; the gone reports
and the expiries a key named expired follows, kept aside), and the table's downloads. Rebaser's collaborator
(rebase.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import Any

from leaderboard_core.claims import CLAIM_KEY, EXPIRY_PREFIX, FOLLOWS, GONE_PREFIX, UNORDERED
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.reconcile.recount import download_scan_parameters
from leaderboard_tools.recover.ledger_versions import LEDGER_PREFIX

VersionCounted = Callable[[Mapping[str, Any], str], tuple[str, str, frozenset[tuple[str, Decimal]]]]


class LedgerScan:
    """One rebase's scans, and what the ledger scan keeps aside for the gone keys' judgement."""

    def __init__(
        self,
        dynamodb: Any,
        deployment: Deployment,
        claims: str,
        expired: frozenset[str],
        version_counted: VersionCounted,
    ) -> None:
        self.dynamodb = dynamodb
        self.deployment = deployment
        self.claims = claims
        self.expired = expired
        self.version_counted = version_counted
        self.gone_reports: dict[str, dict[str, dict[str, Any]]] = {}
        """Claim key -> label -> the gone report's own item (`gone#<claim key>|<label>`): the versions reported gone."""
        self.follows: dict[str, dict[tuple[str, str, frozenset[tuple[str, Decimal]]], str]] = {}
        """Claim key named expired -> (label, entity, counts) of each expiry of the key applied after the key's record
        at that label (`Follows`, `Entity`, `Contribution` on `expired#...`): what it kept -> its item's key."""
        self.unordered: dict[str, dict[str, str]] = {}
        """Claim key -> its expiries kept unordered (`Unordered`): their items' keys -> the label refused against."""

    def scan(self, **parameters: Any) -> Iterator[dict[str, Any]]:
        """Every item a scan with `parameters` reads, page by page."""
        for page in self.dynamodb.get_paginator("scan").paginate(**parameters):
            yield from page.get("Items", [])

    def ledger_items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every download's ledger item (not the backfill's own items, nor the expiries' `expired#...`); the gone
        reports' items, the expiries kept unordered and, for keys named expired, what their expiries' items follow, kept
        aside."""
        expired = self.expired | {name.rpartition("@")[0] for name in self.expired if "@" in name}
        for item in self.scan(TableName=self.claims, ConsistentRead=True):
            claim = item[CLAIM_KEY]["S"]
            owner, _, label = claim.partition("|")
            if claim.startswith(LEDGER_PREFIX):
                yield claim, item
            elif claim.startswith(GONE_PREFIX):
                self.gone_reports.setdefault(owner[len(GONE_PREFIX) :], {})[label] = item
            elif claim.startswith(EXPIRY_PREFIX) and UNORDERED in item:
                self.unordered.setdefault(owner[len(EXPIRY_PREFIX) :], {})[claim] = item[UNORDERED]["S"]
            elif claim.startswith(EXPIRY_PREFIX) and owner[len(EXPIRY_PREFIX) :] in expired and FOLLOWS in item:
                followed = self.follows.setdefault(owner[len(EXPIRY_PREFIX) :], {})
                followed[self.version_counted(item, FOLLOWS)] = claim

    def downloads(self) -> Iterator[dict[str, Any]]:
        """The table's items as the backfill scans them, those source_item_filter leaves out too (they count nothing
        now, and a key the ledger counts for must be told from a key that is gone)."""
        deployment = self.deployment
        parameters = download_scan_parameters(dataclasses.replace(deployment, marker=None), with_key=True)
        names = parameters["ExpressionAttributeNames"]
        projected = {names[placeholder] for placeholder in parameters["ProjectionExpression"].split(", ")}
        for placeholder, name in (
            ("#marker", deployment.marker.attribute if deployment.marker is not None else None),
            ("#amount", deployment.sum_attribute),
        ):
            if name is not None and name not in projected:
                parameters["ProjectionExpression"] += f", {placeholder}"
                names[placeholder] = name
                projected.add(name)
        yield from self.scan(TableName=deployment.table, **parameters)
