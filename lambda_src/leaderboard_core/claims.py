"""Claims: which of the two counters of a download counts it, while a backfill counts a table's history.

The aggregator counts what the stream delivers; `leaderboard-tools backfill` counts what a scan of the table finds.
A download written while both run may be met by both, in either order, any number of times (retries, a killed
backfill run again). Whichever claims it first counts it: one conditional write per download in the claims table,
which the other's claim then finds. A claim is never released: the backfill's is written in the same transaction
as the counts it adds, the aggregator's before its counts (a crash between them leaves the claim, and the retry
counts the download as its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leaderboard_core.source_items import download_identity

CLAIMS_TABLE_VARIABLE = "CLAIMS_TABLE_NAME"
CLAIM_KEY = "ClaimKey"
"""The claims table's partition key: `download#<identity of the whole primary key>`, or a backfill's own items."""
CLAIM_OWNER = "Owner"
STREAM = "stream"
BACKFILL = "backfill"
BACKFILL_ITEM_PREFIX = "backfill#"
"""The backfill's own items in the claims table: its start, each scan segment's place, its end."""
BACKFILL_DONE = BACKFILL_ITEM_PREFIX + "done"
"""Written when a backfill has counted the whole table: until then `reconcile --repair` refuses."""

LEDGER_VARIABLE = "LEDGER"
"""The aggregator's environment: "true" in ledger mode, where the claims table is kept for good as the ledger."""
STREAM_FROM = "StreamFrom"
"""Ledger mode: the first record of a download the stream applied, `<stream label>|<shard id>|<padded sequence>`;
set once, never changed."""
BASE_ENTITY = "Entity"
"""Ledger mode, on a download the backfill counted: the entity it counted it for."""
BASE_CONTRIBUTION = "Contribution"
"""Ledger mode, on a download the backfill counted: what it added, board id -> amount."""


def claim_key(key: Mapping[str, Any]) -> str:
    """A download's claim, from every attribute of its primary key (a stream record's Keys, a scanned item's key)."""
    return "download#" + download_identity(key, entity="")


def stream_claim(table: str, key: Mapping[str, Any]) -> dict[str, Any]:
    """The aggregator's claim: an UpdateItem that sets the owner only if none is set, and returns the owner."""
    return {
        "TableName": table,
        "Key": {CLAIM_KEY: {"S": claim_key(key)}},
        "UpdateExpression": "SET #owner = if_not_exists(#owner, :stream)",
        "ExpressionAttributeNames": {"#owner": CLAIM_OWNER},
        "ExpressionAttributeValues": {":stream": {"S": STREAM}},
        "ReturnValues": "ALL_NEW",
    }


def owner_of(response: Mapping[str, Any]) -> str | None:
    """Who owns a claim, from the UpdateItem's answer."""
    return ((response.get("Attributes") or {}).get(CLAIM_OWNER) or {}).get("S")


def backfill_claim(table: str, key: Mapping[str, Any]) -> dict[str, Any]:
    """The backfill's claim, a transaction's Put: written only where nobody has claimed the download."""
    return {
        "Put": {
            "TableName": table,
            "Item": {CLAIM_KEY: {"S": claim_key(key)}, CLAIM_OWNER: {"S": BACKFILL}},
            "ConditionExpression": "attribute_not_exists(#key)",
            "ExpressionAttributeNames": {"#key": CLAIM_KEY},
        }
    }
