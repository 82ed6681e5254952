"""boto3 clients for the operator tools (reconcile, recover, rekey): AWS, as boto3 configures it, by default.

boto3's standard session resolves credentials (environment, shared files, SSO, instance and
container roles), the profile and the region as every AWS SDK does. An endpoint is used only when
one is given: `--endpoint-url`, or the SDKs' own `AWS_ENDPOINT_URL` setting ("When specified
directly within a profile or as an environment variable, this setting specifies the endpoint that
is used for all service requests", AWS SDKs and Tools Reference Guide, *Service-specific
endpoints*), which botocore reads itself. Nothing here knows about emulators:
`leaderboard_dev.aws` (localstack-client) serves the test harness and `make up`/`demo`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import NoRegionError, ProfileNotFound

OPERATOR_CONFIG = Config(retries={"mode": "standard", "max_attempts": 10}, connect_timeout=10, read_timeout=70)
"""Standard retries back off on throttling, LimitExceededException included (DynamoDB Streams answers
it when more than two processes read one shard)."""
LAMBDA_CONFIG = OPERATOR_CONFIG.merge(Config(read_timeout=910))
"""`recover` invokes the aggregator synchronously: a function may run up to 900 s."""


class OperatorSetupError(RuntimeError):
    """No region, an unknown profile: said plainly before any request is sent."""


@dataclass(frozen=True)
class OperatorClients:
    dynamodb: Any
    dynamodbstreams: Any
    lambda_: Any
    sqs: Any


def operator_clients(
    profile: str | None = None, region: str | None = None, endpoint_url: str | None = None
) -> OperatorClients:
    """Clients of one boto3 session; `endpoint_url` only when the operator gave one (else botocore decides)."""
    try:
        session = boto3.Session(profile_name=profile, region_name=region)
    except ProfileNotFound as error:
        raise OperatorSetupError(str(error)) from error
    options: dict[str, Any] = {"config": OPERATOR_CONFIG}
    if endpoint_url:
        options["endpoint_url"] = endpoint_url
    try:
        return OperatorClients(
            dynamodb=session.client("dynamodb", **options),
            dynamodbstreams=session.client("dynamodbstreams", **options),
            lambda_=session.client("lambda", **(options | {"config": LAMBDA_CONFIG})),
            sqs=session.client("sqs", **options),
        )
    except NoRegionError as error:
        raise OperatorSetupError(
            "no AWS region: pass --region, set AWS_REGION (or AWS_DEFAULT_REGION), or use a profile that has one"
        ) from error
