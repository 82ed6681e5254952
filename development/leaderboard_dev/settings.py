"""Where things are: repository paths and the one environment variable that picks the endpoint."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

REPOSITORY = Path(__file__).resolve().parents[2]
TERRAFORM_MODULE = REPOSITORY / "terraform"
EMULATOR_STACK = REPOSITORY / "development" / "emulator_stack"
"""The root configuration applied to emulators: the module with endpoint overrides and fake credentials."""
DIST = REPOSITORY / "dist"
STATE_DIR = REPOSITORY / ".emulator"

ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL"
DEFAULT_ENDPOINT = "http://127.0.0.1:4566"
DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class Endpoint:
    url: str
    region: str

    @property
    def host(self) -> str:
        return urlparse(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        return urlparse(self.url).port or 4566

    @property
    def is_loopback(self) -> bool:
        return self.host in {"127.0.0.1", "localhost", "::1"}

    def is_at(self, url: str) -> bool:
        """The same listener as `url`: the port, and the host, where any loopback name is one host."""
        other = Endpoint(url.rstrip("/"), self.region)
        same_host = self.host == other.host or (self.is_loopback and other.is_loopback)
        return same_host and self.port == other.port


def endpoint_from_environment() -> Endpoint:
    """AWS_ENDPOINT_URL names the LocalStack-compatible endpoint; boto3, the AWS CLI and the tests all read it."""
    url = os.environ.get(ENDPOINT_VARIABLE) or DEFAULT_ENDPOINT
    region = os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or DEFAULT_REGION
    return Endpoint(url.rstrip("/"), region)


def emulator_environment(endpoint: Endpoint) -> dict[str, str]:
    """Credentials and region an emulator accepts, for child processes (Terraform, boto3)."""
    return {
        ENDPOINT_VARIABLE: endpoint.url,
        "AWS_ACCESS_KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID", "test"),
        "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
        "AWS_DEFAULT_REGION": endpoint.region,
        "AWS_REGION": endpoint.region,
    }
