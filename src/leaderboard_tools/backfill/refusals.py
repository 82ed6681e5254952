"""Refusals, before anything is written: a deployment whose history the backfill cannot count exactly once."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from leaderboard_core.index_layout import FIRST_REACHED
from leaderboard_tools.deployment import Deployment


class BackfillRefused(RuntimeError):
    """The backfill cannot count this deployment's history exactly: nothing was written."""


def claims_table_of(deployment: Deployment) -> str:
    """The claims table, or BackfillRefused saying why no backfill can run beside this aggregator."""
    claims = deployment.claims_table
    if not claims:
        function = deployment.aggregator_function or "no aggregator of the module reads the table's stream, so it"
        raise BackfillRefused(
            f"the aggregator {function} claims nothing (no CLAIMS_TABLE_NAME in its environment): a backfill beside "
            "it would count twice the downloads the stream also delivers. Apply the module with "
            "backfill_claims = true (or, with retractions = true, ledger = true), then run the backfill; nothing was "
            "written"
        )
    if deployment.sum_attribute:
        raise BackfillRefused(
            f"the deployment sums {deployment.sum_attribute} (SUM_ATTRIBUTE): the backfill counts downloads, a "
            "backfill of sums is not supported yet; nothing was written"
        )
    if deployment.tie_break == FIRST_REACHED:
        raise BackfillRefused(
            "the aggregator breaks ties by first_reached (LEADERBOARD_TIE_BREAK): the backfill adds counts without "
            'their downloads\' instants. Apply leaderboard_tie_break = "entity", run the backfill to its end, apply '
            "first_reached again, then `leaderboard-tools reconcile --repair`; nothing was written"
        )
    if deployment.retractions and not deployment.ledger:
        raise BackfillRefused(
            "the aggregator follows edits and deletions of downloads (RETRACTIONS=true): a claim names who counts a "
            "download, not which image of it was counted, so an edit or deletion while the backfill runs could be "
            "counted twice or lost. Apply retractions = false, run the backfill to its end, apply "
            "backfill_claims = false and retractions = true, then `leaderboard-tools reconcile --repair` the boards "
            "the edits and deletions made meanwhile touched (or apply ledger = true instead of backfill_claims: the "
            "ledger records what the backfill counted of each download, and a backfill runs beside retractions); "
            "nothing was written"
        )
    if not deployment.progress_table:
        raise BackfillRefused(
            "the aggregator keeps no progress table (PROGRESS_TABLE_NAME): not a module this backfill knows; "
            "nothing was written"
        )
    deployment.shards()
    return claims


def check_history(dynamodb: Any, deployment: Deployment, claims: str) -> None:
    """Before a backfill's first run: BackfillRefused when the aggregator may have counted downloads it did not claim
    (its claims came in a later apply than the aggregator, and aggregates exist). A resumed run is not checked again:
    its own aggregates would refuse it."""
    assert deployment.progress_table
    try:
        claims_created = dynamodb.describe_table(TableName=claims)["Table"]["CreationDateTime"]
        progress_created = dynamodb.describe_table(TableName=deployment.progress_table)["Table"]["CreationDateTime"]
    except ClientError as error:
        raise BackfillRefused(f"cannot read the claims or the progress table: {error}; nothing was written") from error
    # The module creates the claims table before the progress table (depends_on): a newer claims table came with a
    # later apply than the aggregator's first, which may have counted downloads before it claimed them.
    if claims_created > progress_created and any_aggregate(dynamodb, deployment):
        if deployment.ledger:
            raise BackfillRefused(
                f"the ledger {claims} was created at {claims_created.isoformat()}, later than the progress table "
                f"{deployment.progress_table} ({progress_created.isoformat()}), and {deployment.aggregates} holds "
                "aggregates: the aggregator counted downloads before the ledger recorded them, and the backfill "
                "would count those again (nor can the ledger say what they contributed when they are edited). Ledger "
                "mode is turned on in the apply that attaches the module: attach a new stack (another name) with "
                "ledger = true and run the backfill there (docs/attaching.md); nothing was written"
            )
        raise BackfillRefused(
            f"the claims table {claims} was created at {claims_created.isoformat()}, later than the progress table "
            f"{deployment.progress_table} ({progress_created.isoformat()}), and {deployment.aggregates} holds "
            "aggregates: the aggregator counted downloads before it claimed them, and the backfill would count those "
            "again. Apply backfill_claims = false, then count the history with `leaderboard-tools reconcile --repair` "
            "(board by board); nothing was written"
        )


def any_aggregate(dynamodb: Any, deployment: Deployment) -> bool:
    """Whether the aggregates table holds an aggregate: one item of its sparse leaderboard index (keyed by the period
    attribute, which only aggregates carry), else a scan for an item carrying that attribute."""
    names = deployment.names
    description = dynamodb.describe_table(TableName=deployment.aggregates)["Table"]
    for index in description.get("GlobalSecondaryIndexes") or []:
        hash_key = next((key["AttributeName"] for key in index["KeySchema"] if key["KeyType"] == "HASH"), None)
        if hash_key == names.period:
            page = dynamodb.scan(TableName=deployment.aggregates, IndexName=index["IndexName"], Limit=1)
            return bool(page.get("Items"))
    parameters: dict[str, Any] = {
        "TableName": deployment.aggregates,
        "FilterExpression": "attribute_exists(#period)",
        "ExpressionAttributeNames": {"#period": names.period},
        "ProjectionExpression": "#period",
    }
    return any(page.get("Items") for page in dynamodb.get_paginator("scan").paginate(**parameters))
