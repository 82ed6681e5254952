"""What a recount or a repair refuses before it reads or writes anything: a deployment whose boards it cannot know or
whose aggregates it does not compute (sums), and a repair with nothing to prove settlement with."""

from __future__ import annotations

from typing import Any

from leaderboard_core.claims import BACKFILL_DONE, CLAIM_KEY
from leaderboard_tools.deployment import Deployment


class RepairUnavailable(RuntimeError):
    """The deployment gives the repair nothing to prove settlement with (no stream, no progress table)."""


class RecountUnsupported(RuntimeError):
    """The deployment keeps aggregates this recount does not compute (sums), or its boards are unknown: nothing is
    read."""


def check_supported(deployment: Deployment, table: str) -> None:
    if deployment.aggregator_function is None:
        raise RecountUnsupported(
            f"no aggregator of this module reads the stream of {table}, so the boards it keeps "
            "(LEADERBOARD_PERIODS, CATEGORY_ATTRIBUTE, SUM_ATTRIBUTE) are unknown: nothing was read or written; "
            "run it again once the aggregator's event source mapping exists"
        )
    if deployment.sum_attribute:
        raise RecountUnsupported(
            f"the aggregator sums {deployment.sum_attribute} (SUM_ATTRIBUTE): this recount counts downloads "
            "and would replace every sum by a count; nothing was read or written"
        )


ONE_READER_REPAIR = (
    "with one reader per shard (STREAM_READERS=1) the aggregator moves each download from what its ledger item says "
    "it counts: a recount that sets the aggregates alone would leave those items behind, and the key's next record "
    "would count it twice. The repair there is the rebase, which moves every key's ledger item to its item and the "
    "aggregates with it: `leaderboard-tools recover`, or `leaderboard-tools reconcile --repair` without --dry-run"
)


def check_repairable(deployment: Deployment, table: str, dynamodb: Any) -> None:
    if deployment.one_stream_reader:
        raise RepairUnavailable(f"{ONE_READER_REPAIR}; nothing was written")
    if not deployment.stream_arn:
        raise RepairUnavailable(f"{table} has no stream: nothing can show that no download is in flight")
    if not deployment.progress_table:
        raise RepairUnavailable(
            "the deployed aggregator keeps no progress table (PROGRESS_TABLE_NAME): this release cannot show "
            "which downloads are still in flight, so --repair would race the stream; deploy the current "
            "aggregator, or pass --progress-table"
        )
    if not deployment.recount_band_queue_url and not deployment.failure_queue_url:
        raise RepairUnavailable(
            "the deployment names no queue for the bands' records (RECOUNT_BAND_QUEUE_URL, or FAILURE_QUEUE_URL): "
            "a repair records each band before opening it, so that recover finds a band its repair never closed; "
            "pass --queue-url"
        )
    claims = deployment.claims_table
    if claims and not dynamodb.get_item(
        TableName=claims, Key={CLAIM_KEY: {"S": BACKFILL_DONE}}, ConsistentRead=True
    ).get("Item"):
        raise RepairUnavailable(
            f"a backfill may be counting the history of {table} (the aggregator claims downloads in "
            f"{claims}) and has not finished: a repair's recount would count what the backfill counts as well. "
            "Run `leaderboard-tools backfill` to its end first; nothing was written"
        )
    deployment.shards()
