"""The prices and billing rules the all-in part charges by, us-east-1, on demand, each with its source.

DynamoDB, DynamoDB Streams and Lambda come from `leaderboard_tools.size.prices` (what `size` states),
so the tool and the benchmark cannot disagree; SQS is added here. `confirmed` says how far each
price could be checked from here, without internet, through the search index: `aws` (read on
AWS's page), `secondary` (a dated page that transcribes AWS's), `unconfirmed` (no current source).
"""

from __future__ import annotations

from typing import Any

from leaderboard_tools.size.prices import (
    BILLING_RULES,
    LAMBDA_GB_SECOND,
    LAMBDA_REQUEST,
    LOOKED_UP,
    READ_REQUEST_UNIT,
    REGION,
    STREAMS_READ_REQUEST_UNIT,
    WRITE_REQUEST_UNIT,
    Price,
)

SQS_REQUEST = Price(
    item="SQS standard queue requests",
    usd=0.40,
    per=1e6,
    unit="million requests",
    confirmed="secondary",
    source="https://cloudburn.io/blog/amazon-sqs-pricing",
    note="2026-03-14, 'All prices are for US East (N. Virginia) as of March 2026': Standard $0.40/M (first 100B); "
    "AWS's page https://aws.amazon.com/sqs/pricing/ showed no figure through the search index",
)
PRICES = (
    WRITE_REQUEST_UNIT,
    READ_REQUEST_UNIT,
    STREAMS_READ_REQUEST_UNIT,
    LAMBDA_REQUEST,
    LAMBDA_GB_SECOND,
    SQS_REQUEST,
)

SIZE_RULES = (
    {
        "rule": "an item's size is the sum of its attribute names and values: a string its UTF-8 bytes, a number "
        "about 1 byte per two significant digits plus 1 byte, a Boolean or null 1 byte, a list or map 3 bytes plus 1 "
        "byte per element plus its elements",
        "quote": "The size of a number is approximately (number of UTF-8-encoded bytes of attribute name) + (1 byte "
        "per two significant digits) + (1 byte).",
        "source": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html",
        "confirmed": "aws",
    },
    {
        "rule": "reads round each item up to 4 KB: one read unit strongly consistent, half eventually consistent; a "
        "read of an item that does not exist consumes the same",
        "quote": "If you perform a read operation on an item that doesn't exist, DynamoDB will still consume read "
        "throughput as outlined above.",
        "source": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html",
        "confirmed": "aws",
    },
    {
        "rule": "a write rounds up to 1 KB the larger of the item before and after it; a conditional write that fails "
        "consumes write units all the same",
        "source": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html",
        "confirmed": "secondary",
    },
    {
        "rule": "each item a TransactWriteItems writes consumes twice the write units of the same write alone "
        "(all_in.TRANSACTIONAL_WRITE_FACTOR)",
        "quote": "DynamoDB performs two underlying reads or writes of every item in the transaction: one to prepare "
        "the transaction and one to commit the transaction.",
        "source": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html",
        "confirmed": "secondary",
    },
)


def price_table() -> dict[str, Any]:
    """What all_in.json records beside its figures: every price with its source, and the rules applied."""
    return {
        "region": REGION,
        "looked_up": LOOKED_UP,
        "prices": [price.as_json() for price in PRICES],
        "billing_rules": [*BILLING_RULES, *SIZE_RULES],
        "unconfirmed": [price.item for price in PRICES if price.confirmed != "aws"],
    }
