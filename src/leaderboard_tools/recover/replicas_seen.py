"""recover's replica refusal: while the aggregator's `#replicas-seen` item exists, recover answers nothing.

The aggregator writes that item to the progress table (lambda_src/aggregator/replica_guard.py) the first time, with
retractions (or ledger) on, DescribeTable shows the stream's table replicated. From then on a deletion in the stream
cannot be told from another region's expiry (AWS: TTL deletions replicated to global table regions "are not
identifiable in DynamoDB streams in the regions the deletion is replicated to"), so no gone report's answer, no keep
and no read-back can be judged: the deployment is no longer exact since about the item's time, and the operator
detaches it and recounts (docs/exactly-once-retractions.md, "Replicated tables"). The tool never deletes the item.
"""

from __future__ import annotations

import time
from typing import Any

from leaderboard_core.bookkeeping import REPLICAS_SEEN_KEY, SHARD_KEY, replicas_seen_of
from leaderboard_tools.deployment import Deployment


class ReplicasSeen(RuntimeError):
    """The deployment's table was found replicated with retractions on: recover and the rebase write nothing."""


def replicas_seen_refusal(dynamodb: Any, deployment: Deployment) -> str | None:
    """The deployment-level refusal when the aggregator recorded a replica and retractions (or ledger) are on; None
    otherwise (retractions off: a REMOVE changes no count, so a replica no longer matters to the counts)."""
    if not (deployment.retractions or deployment.ledger) or not deployment.progress_table:
        return None
    found = replicas_seen_of(
        dynamodb.get_item(
            TableName=deployment.progress_table, Key={SHARD_KEY: {"S": REPLICAS_SEEN_KEY}}, ConsistentRead=True
        ).get("Item")
    )
    if found is None:
        return None
    first_seen, named = found
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(first_seen))
    signs = "; ".join(named) or "replicated"
    return (
        f"the aggregator found {deployment.table} replicated ({signs}) at {since} (item {REPLICAS_SEEN_KEY} in "
        f"{deployment.progress_table}): with retractions on, a deletion in its stream cannot be told from another "
        "region's expiry, so this deployment is no longer exact since about then and recover answers nothing (no "
        "gone report's answer, no keep, no read-back). Detach (retractions = false and ledger = false), or remove "
        "the replica and, once its records have left the stream (24 h), delete that item by hand; then recount with "
        "`leaderboard-tools reconcile --repair` "
        '(docs/exactly-once-retractions.md, "Replicated tables"); nothing was written'
    )


def refuse_if_replicas_seen(dynamodb: Any, deployment: Deployment) -> None:
    """Raise ReplicasSeen (the command exits 1, writing nothing) when `replicas_seen_refusal` says so."""
    refusal = replicas_seen_refusal(dynamodb, deployment)
    if refusal is not None:
        raise ReplicasSeen(refusal)
