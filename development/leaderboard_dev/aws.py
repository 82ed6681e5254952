"""boto3 clients for the chosen endpoint, through localstack-client so any LocalStack-compatible emulator works."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.config import Config
from localstack_client.session import Session

from leaderboard_dev.settings import Endpoint

_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, read_timeout=120, connect_timeout=5)


@dataclass(frozen=True)
class Clients:
    dynamodb: Any
    dynamodbstreams: Any
    lambda_: Any
    sqs: Any
    logs: Any
    cloudwatch: Any = None
    sns: Any = None
    s3: Any = None
    scheduler: Any = None


def clients(endpoint: Endpoint) -> Clients:
    session = Session(region_name=endpoint.region, localstack_host=f"{endpoint.host}:{endpoint.port}")
    return Clients(
        dynamodb=session.client("dynamodb", config=_CONFIG),
        dynamodbstreams=session.client("dynamodbstreams", config=_CONFIG),
        lambda_=session.client("lambda", config=_CONFIG),
        sqs=session.client("sqs", config=_CONFIG),
        logs=session.client("logs", config=_CONFIG),
        cloudwatch=session.client("cloudwatch", config=_CONFIG),
        sns=session.client("sns", config=_CONFIG),
        s3=session.client("s3", config=_CONFIG),
        scheduler=session.client("scheduler", config=_CONFIG),
    )
