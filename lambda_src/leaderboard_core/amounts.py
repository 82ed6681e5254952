"""What a summed attribute (SUM_ATTRIBUTE) adds: the aggregator and the operator's rebase read one amount the same way.

A sum's order is value x 10^26 plus a tie-breaker (index_layout): exact within DynamoDB's 38 digits only for values
below 10^12 with at most 6 decimals, so any other number is no amount.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from leaderboard_core.index_layout import MAX_COUNT, MAX_DECIMALS

MAX_AMOUNT = Decimal(MAX_COUNT + 1)
"""The order attribute holds value x 10^26 plus a tie-breaker: exact within DynamoDB's 38 digits below this."""


def amount_of(value: Any) -> Decimal | None:
    """A number attribute's value if it can be summed exactly (at most 6 decimals, below 10^12), else None."""
    if not isinstance(value, dict) or not isinstance(value.get("N"), str):
        return None
    try:
        amount = Decimal(value["N"])
    except InvalidOperation:
        return None
    if not amount.is_finite() or abs(amount) >= MAX_AMOUNT or -amount.as_tuple().exponent > MAX_DECIMALS:
        return None
    return amount.normalize() if amount != amount.to_integral_value() else Decimal(int(amount))
