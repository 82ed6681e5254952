"""How to fix a rejected download so that it counts: what reaches the stream depends on how the item is rewritten,
and what the aggregator counts of it depends on the deployment's mode.

DynamoDB Developer Guide, "Change data capture for DynamoDB Streams": a stream record's eventName is "INSERT - A new
item was added to the table", "MODIFY - One or more of an existing item's attributes were modified", "REMOVE - The
item was deleted from the table". An UpdateItem, and a PutItem over an existing key, write a MODIFY; a DeleteItem
writes a REMOVE, and a PutItem of a key the table does not hold an INSERT. Without `retractions` the aggregator counts
INSERTs only (docs/exactly-once-retractions.md): a malformed download fixed in place stays uncounted for ever.
"""

from __future__ import annotations

from leaderboard_tools.deployment import Deployment

WATERMARK_FIX = (
    "fix each item as a new write: DeleteItem of its key, then PutItem of the fixed item (or PutItem of it under a "
    "new key, then DeleteItem of the old one); only that reaches the stream as an INSERT, which the aggregator "
    "counts. An UpdateItem, or a PutItem over the same key, reaches it as a MODIFY, which it passes over with "
    "retractions = false: the download would stay uncounted"
)
RETRACTIONS_FIX = (
    "fix each item in place (UpdateItem, or PutItem over the same key): with retractions on, the MODIFY counts it "
    "where its fixed image says"
)
LEDGER_FIX = (
    "fix each item in place (UpdateItem or PutItem) or rewrite it under a new key: in ledger mode every change of a "
    "download moves its contribution to where its latest image says"
)


def rejected_download_fix(retractions: bool, ledger: bool = False) -> str:
    """What to do with the items of the rejected downloads recover reports, in the deployment's mode."""
    if ledger:
        return LEDGER_FIX
    return RETRACTIONS_FIX if retractions else WATERMARK_FIX


def fix_for(deployment: Deployment) -> str:
    return rejected_download_fix(deployment.retractions, ledger=deployment.ledger)
