"""What AWS charges for what the module does, in us-east-1, on demand: the price table `size` states and cites.

Each price says where it was read and how far it is confirmed: `aws` (read on an AWS page or price
list), `secondary` (a dated page that transcribes AWS's, AWS's own page showing the billing rule but
not the number through the search index this was looked up with), `unconfirmed` (no source newer
than AWS's last price change was found; the long-published figure is used). The billing rules the
cost arithmetic relies on (what one request unit covers, which stream reads are billed) are in
BILLING_RULES, each with its source. Free tiers are left out: they are per account, not per load.

The benchmark's cost per million downloads (`leaderboard_dev.bench.pressure_cost.PRICES`) takes its
figures from here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

REGION = "us-east-1"
LOOKED_UP = "2026-12-02"
SECONDS_PER_MONTH = 730 * 3600
"""AWS's pricing pages and calculator count a month as 730 hours."""

Confirmation = Literal["aws", "secondary", "unconfirmed"]


@dataclass(frozen=True)
class Price:
    item: str
    usd: float
    per: float
    """Units the price is for: 1e6 for a price per million, 1 for a price per GB-second."""
    unit: str
    confirmed: Confirmation
    source: str
    note: str

    @property
    def per_unit(self) -> float:
        return self.usd / self.per

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


WRITE_REQUEST_UNIT = Price(
    item="DynamoDB on-demand write request unit (Standard table class)",
    usd=0.625,
    per=1e6,
    unit="million write request units",
    confirmed="secondary",
    source="https://airbyte.com/data-engineering-resources/dynamodb-pricing",
    note="2025-07-21, 'Current Pricing Structure (US East), after the 50% reduction implemented in late 2024'; "
    "AWS's page https://aws.amazon.com/dynamodb/pricing/on-demand/ (the billing rule) showed no figure through "
    "the search index",
)
READ_REQUEST_UNIT = Price(
    item="DynamoDB on-demand read request unit (Standard table class)",
    usd=0.125,
    per=1e6,
    unit="million read request units",
    confirmed="secondary",
    source="https://airbyte.com/data-engineering-resources/dynamodb-pricing",
    note="2025-07-21, the same page and reduction as the write request unit",
)
STREAMS_READ_REQUEST_UNIT = Price(
    item="DynamoDB Streams read request unit (one GetRecords call)",
    usd=0.02,
    per=1e5,
    unit="100,000 streams read request units",
    confirmed="unconfirmed",
    source="https://gist.github.com/allenheltondev/d028926b7fe3b0656c96af9140ab55e3",
    note="'DDB Stream Reads ... $.02 / 100,000' (2020, before the November 2024 cut of on-demand throughput, which "
    "may or may not have changed it): no current source found",
)
LAMBDA_REQUEST = Price(
    item="Lambda requests",
    usd=0.20,
    per=1e6,
    unit="million requests",
    confirmed="secondary",
    source="https://raw.githubusercontent.com/api-evangelist/aws-lambda/refs/heads/main/plans/aws-lambda-plans-pricing.yml",
    note="2026-09-20, '$0.20 per million requests', transcribed from https://aws.amazon.com/lambda/pricing/",
)
LAMBDA_GB_SECOND = Price(
    item="Lambda duration, x86",
    usd=0.0000166667,
    per=1,
    unit="GB-second",
    confirmed="secondary",
    source="https://app.unpkg.com/artillery@2.0.28/files/lib/platform/aws-lambda/prices.js",
    note="artillery 2.0.28's table for the base regions, citing https://aws.amazon.com/lambda/pricing/ (the first "
    "6 billion GB-seconds a month)",
)
PRICES = (WRITE_REQUEST_UNIT, READ_REQUEST_UNIT, STREAMS_READ_REQUEST_UNIT, LAMBDA_REQUEST, LAMBDA_GB_SECOND)

BILLING_RULES = (
    {
        "rule": "a standard write of an item up to 1 KB is one write request unit; a strongly consistent read of up "
        "to 4 KB one read request unit, an eventually consistent one half",
        "source": "https://aws.amazon.com/dynamodb/pricing/on-demand/ (Key terms)",
        "confirmed": "aws",
    },
    {
        "rule": "each GetRecords call is one streams read request unit; GetRecords calls that Lambda makes for a "
        "DynamoDB trigger (the event source mapping) are free, those of any other consumer billed; the other Streams "
        "APIs (GetShardIterator, DescribeStream) are not charged; the first 2,500,000 billed reads a month are free",
        "source": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CostOptimization_StreamsUsage.html",
        "confirmed": "aws",
    },
    {
        "rule": "an update that changes an indexed key attribute is two index writes (a delete of the previous index "
        "item and a put of the new one), billed as write request units",
        "source": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.Writes, as quoted in "
        "https://repost.aws/questions/QU2yF7CynBThyPzvg4szJAQA/dynamodb-cost-for-index-writes",
        "confirmed": "secondary",
    },
)

ASSUMPTIONS = (
    "every item written is under 1 KB and every item read under 4 KB: one request unit per request",
    "the aggregator's own GetRecords calls (it reads its shard from its checkpoint) are billed like any consumer's; "
    "the mapping's are free",
    "free tiers ignored; on-demand capacity, Standard table class, x86 Lambda, no Savings Plans",
)


def price_table() -> dict[str, Any]:
    """The table as `size --output json` prints it."""
    return {
        "region": REGION,
        "looked_up": LOOKED_UP,
        "seconds_per_month": SECONDS_PER_MONTH,
        "prices": [price.as_json() for price in PRICES],
        "billing_rules": list(BILLING_RULES),
        "assumptions": list(ASSUMPTIONS),
        "unconfirmed": [price.item for price in PRICES if price.confirmed != "aws"],
    }
