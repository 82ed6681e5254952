"""When the claims may go: once the aggregator has counted past every stream record created before the backfill's end.

The backfill scanned downloads written up to its end; their stream records were created by then (within the clock
margin, docs/operations.md). Until the aggregator's checkpoint of every shard has passed each of them, one may still
be counted by the stream: its claim says the backfill has it. Read from each shard's checkpoint, as `reconcile`'s
in-flight check reads (the progress table, not IteratorAge, which says what the mapping delivered, not what the
aggregator counted).

In ledger mode (the module's `ledger`) the claims table is the ledger and is kept for good: there is nothing to
release, at any time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leaderboard_core.claims import CLAIM_KEY
from leaderboard_tools.backfill.refusals import claims_table_of
from leaderboard_tools.backfill.segments import DONE_ITEM, ENDED_AT
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.reconcile.clock import CLOCK_MARGIN_SECONDS
from leaderboard_tools.reconcile.reconciler import Reconciler
from leaderboard_tools.reconcile.report import StreamCheck


@dataclass
class Release:
    ended_at: float | None
    """The backfill's end (epoch seconds, DynamoDB's clock); None: no backfill has finished."""
    waiting: int | None = None
    """Download records created before the end plus the margin that the aggregator has not counted past; None:
    unknown (a shard could not be read that far)."""
    stream: StreamCheck | None = None
    ledger: bool = False
    """Ledger mode: the ledger is permanent, and nothing is to be released."""

    @property
    def releasable(self) -> bool:
        return not self.ledger and self.ended_at is not None and self.waiting == 0


LEDGER_VERDICT = "ledger mode: the ledger is permanent, nothing to release"
"""What a release check answers in ledger mode."""


def release_check(clients: Any, deployment: Deployment, margin_seconds: float = CLOCK_MARGIN_SECONDS) -> Release:
    """When the claims may go; in ledger mode at once, without a read: never (the ledger is permanent)."""
    if deployment.ledger:
        return Release(None, ledger=True)
    claims = claims_table_of(deployment)
    done = clients.dynamodb.get_item(TableName=claims, Key={CLAIM_KEY: {"S": DONE_ITEM}}, ConsistentRead=True)
    ended = ((done.get("Item") or {}).get(ENDED_AT) or {}).get("N")
    if ended is None:
        return Release(None)
    found, check = Reconciler(clients, deployment)._in_flight(None, int(float(ended) + margin_seconds))
    return Release(float(ended), None if found is None else check.in_flight, check)
