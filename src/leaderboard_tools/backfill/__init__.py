"""The backfill: a table's history (the downloads it held before the module was attached) counted exactly once beside
the stream, through the claims of `leaderboard_core.claims`.

While `backfill_claims = true` the aggregator claims every download it reads before counting it, and leaves those
the backfill claimed first. The backfill scans the downloads' table (a parallel Scan, consistent reads, paced on the
read units it consumes) and counts each page in transactions: for a chunk of downloads, one Put of each download's
claim (written only where nobody has claimed it) and one Update of each aggregate they count in, at most
MAX_TRANSACTION_ACTIONS actions on distinct items. A transaction cancelled because a claim was taken meanwhile (by the
stream, or by an earlier run of the backfill) is sent again without those downloads; one cancelled by a conflict or
by throttling is sent again after a pause. After each page, the segment's place in the scan is saved in the claims
table, so a run resumes where the last stopped; and since every count is made with its claim, a page counted again
counts nothing twice.

DynamoDB API Reference, TransactWriteItems: "a synchronous write operation that groups up to 100 action requests
... no two actions can target the same item ... The aggregate size of the items in the transaction cannot exceed
4 MB." botocore's standard retries do not retry a TransactionCanceledException (its throttled codes name
TransactionInProgressException, not this), so its reasons are read here.
"""

from leaderboard_tools.backfill.backfiller import Backfill
from leaderboard_tools.backfill.refusals import BackfillRefused
from leaderboard_tools.backfill.report import ALREADY_DONE, DONE, INTERRUPTED, STOPPED, UNFINISHED, BackfillReport
from leaderboard_tools.backfill.scan import ReadPacer
from leaderboard_tools.backfill.segments import DONE_ITEM
from leaderboard_tools.backfill.transactions import (
    MAX_ATTEMPTS,
    BackfillStopped,
    BackfillUnfinished,
    ScannedDownload,
    chunks,
    transaction_items,
)

__all__ = [
    "ALREADY_DONE",
    "DONE",
    "DONE_ITEM",
    "INTERRUPTED",
    "MAX_ATTEMPTS",
    "STOPPED",
    "UNFINISHED",
    "Backfill",
    "BackfillRefused",
    "BackfillReport",
    "BackfillStopped",
    "BackfillUnfinished",
    "ReadPacer",
    "ScannedDownload",
    "chunks",
    "transaction_items",
]
