"""Ledger mode's backfill in the model: one item of the table counted as a backfill's scan reads it.

The transaction the lead's design gives `leaderboard-tools backfill` in ledger mode: the ledger item's Put, conditioned
on its absence (`leaderboard_core.claims.backfill_claim`, with the entity and what it counts), and one ADD per
aggregate the item counts in, all or nothing. A key with a ledger item already (the stream's, or another run's) is
skipped: the transaction is cancelled and nothing is written.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from download_records import Schema
from leaderboard_core.claims import backfill_claim
from leaderboard_core.index_layout import ORDER_SCALE, leaderboard_partition, order_tiebreak
from ledger_records import image_counts
from tests.stream_model.environment import TABLE

LEDGER_TABLE = "model-downloads-claims"
"""The claims table, kept for good as the ledger."""


def backfill_item(dynamodb: Any, schema: Schema, image: dict[str, Any], leaderboard_shards: int = 1) -> bool:
    """Count one scanned item in one transaction with its ledger item; False where the key has one already (or the
    item is no download)."""
    counted = image_counts(image, schema)
    if counted is None:
        return False
    keys = {name: image[name] for name in (schema.entity, schema.sort_key) if name in image}
    entity = (image.get(schema.entity) or {}).get("S", "")
    claim = backfill_claim(LEDGER_TABLE, keys, entity, {board: amount for (_, board), amount in counted.items()})
    updates = [_add(schema, entity, board, amount, leaderboard_shards) for (entity, board), amount in counted.items()]
    try:
        dynamodb.transact_write_items(TransactItems=[claim, *updates])
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
            raise
        return False
    return True


def _add(schema: Schema, entity: str, board: str, amount: Decimal, leaderboard_shards: int) -> dict[str, Any]:
    """One aggregate's ADD, in the index under its board, its order moved by the amount as the aggregator's is."""
    summed = schema.amount is not None
    return {
        "Update": {
            "TableName": TABLE,
            "Key": {schema.entity: {"S": entity}, schema.sort_key: {"S": board}},
            "UpdateExpression": "ADD #count :amount "
            "SET #period = :period, #order = if_not_exists(#order, :tie) + :scaled",
            "ExpressionAttributeNames": {"#count": schema.count, "#period": schema.period, "#order": schema.order},
            "ExpressionAttributeValues": {
                ":amount": {"N": str(amount)},
                ":period": {"S": leaderboard_partition(board, entity, leaderboard_shards)},
                ":tie": {"N": str(order_tiebreak(entity, summed))},
                ":scaled": {"N": str(int(amount * ORDER_SCALE))},
            },
        }
    }
