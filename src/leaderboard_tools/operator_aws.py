"""boto3 clients for the operator tools (reconcile, recover, rekey, ...): AWS, as boto3 configures it, by default.

boto3's standard session resolves credentials (environment, shared files, SSO, instance and
container roles), the profile and the region as every AWS SDK does, and `AWS_REGION` before
`AWS_DEFAULT_REGION` as the SDKs document it ("AWS_REGION ... overrides the values in the environment
variable AWS_DEFAULT_REGION and the profile setting region", AWS CLI User Guide, *Environment
variables*; the pinned botocore reads only AWS_DEFAULT_REGION itself). An endpoint is used only when
one is given: `--endpoint-url`, or the SDKs' own `AWS_ENDPOINT_URL` setting ("When specified
directly within a profile or as an environment variable, this setting specifies the endpoint that
is used for all service requests", AWS SDKs and Tools Reference Guide, *Service-specific
endpoints*), which botocore reads itself. Nothing here knows about emulators:
`leaderboard_dev.aws` (localstack-client) serves the test harness and `make up`/`demo`.

The connection follows the AWS CLI's options (`--cli-connect-timeout`, `--cli-read-timeout`,
`--debug`: cli.py sets `CONNECTION` from them): a connect timeout of 5 s by default, at most three
attempts when the endpoint cannot be reached (up to ten on throttling), and one line on stderr for
each retry, so that an unreachable endpoint fails within seconds, and says so as it goes.
`aws_failure` words every AWS failure the same way for every command, with the flag or variable
that fixes it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    CredentialRetrievalError,
    HTTPClientError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    PartialCredentialsError,
    ProfileNotFound,
    SSOTokenLoadError,
    TokenRetrievalError,
    UnauthorizedSSOTokenError,
)
from botocore.exceptions import ConnectionError as AWSConnectionError

from leaderboard_tools.argument_types import UsageError
from leaderboard_tools.interruption import stop_worker_requests

CONNECT_TIMEOUT_SECONDS = 5.0
"""How long a connection may take to open (the AWS CLI's default is 60 s): AWS's regional endpoints answer in
milliseconds, and an unreachable one is then given up within 3 x 5 s plus the backoff, not a minute."""
READ_TIMEOUT_SECONDS = 70.0
"""Longer than any answer the tools wait for (SQS long polls are 2 s)."""
LAMBDA_READ_TIMEOUT_SECONDS = 910.0
"""`recover` invokes the aggregator synchronously: a function may run up to 900 s."""
MAX_ATTEMPTS = 10
"""Standard retries back off on throttling, LimitExceededException included (DynamoDB Streams answers it when more than
two processes read one shard)."""
TRANSPORT_ATTEMPTS = 3
"""Attempts of a request whose endpoint could not be reached or did not answer in time (connection refused, DNS, a
timeout): after three, the endpoint or the network is what is wrong, and waiting longer will not say more."""


@dataclass(frozen=True)
class Connection:
    """The AWS CLI's connection options, as the command line gave them (None: the tools' default)."""

    connect_timeout: float | None = None
    """--cli-connect-timeout: seconds; 0 waits without limit."""
    read_timeout: float | None = None
    """--cli-read-timeout: seconds, for every client (the aggregator's invocation included); 0 waits without limit."""
    report_retries: bool = True
    """One line on stderr for each retry."""


CONNECTION = Connection()
"""What every client of this module is made with: cli.py sets it from the flags for the command's run."""


@contextmanager
def connection(settings: Connection) -> Iterator[None]:
    """`settings` for the clients made within the block (a command's run); the defaults again after it."""
    global CONNECTION
    previous, CONNECTION = CONNECTION, settings
    try:
        yield
    finally:
        CONNECTION = previous


def client_config(read_timeout: float = READ_TIMEOUT_SECONDS) -> Config:
    """Standard retries and the timeouts `CONNECTION` asks for (0: none), else the defaults."""
    settings = CONNECTION
    connect = CONNECT_TIMEOUT_SECONDS if settings.connect_timeout is None else settings.connect_timeout or None
    read = read_timeout if settings.read_timeout is None else settings.read_timeout or None
    return Config(
        retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS}, connect_timeout=connect, read_timeout=read
    )


class OperatorSetupError(RuntimeError):
    """No region, an unknown profile: said plainly before any request is sent (its cause is botocore's error)."""


class EndpointSettingError(UsageError):
    """An endpoint setting botocore cannot use (AWS_ENDPOINT_URL=notaurl): a usage error, exit code 2."""


@dataclass(frozen=True)
class OperatorClients:
    dynamodb: Any
    dynamodbstreams: Any
    lambda_: Any
    sqs: Any


def operator_clients(
    profile: str | None = None, region: str | None = None, endpoint_url: str | None = None
) -> OperatorClients:
    """Clients of one boto3 session; `endpoint_url` only when the operator gave one (else botocore decides).

    The region: `region`, else AWS_REGION, else what boto3 finds (AWS_DEFAULT_REGION, the profile's)."""
    try:
        session = boto3.Session(profile_name=profile, region_name=region or os.environ.get("AWS_REGION") or None)
    except ProfileNotFound as error:
        raise OperatorSetupError(aws_failure(error)) from error
    options: dict[str, Any] = {"config": client_config()}
    if endpoint_url:
        options["endpoint_url"] = endpoint_url
    try:
        clients = OperatorClients(
            dynamodb=session.client("dynamodb", **options),
            dynamodbstreams=session.client("dynamodbstreams", **options),
            lambda_=session.client("lambda", **(options | {"config": client_config(LAMBDA_READ_TIMEOUT_SECONDS)})),
            sqs=session.client("sqs", **options),
        )
    except NoRegionError as error:
        raise OperatorSetupError(aws_failure(error)) from error
    except ValueError as error:
        if "endpoint" not in str(error).lower():
            raise
        raise EndpointSettingError(_endpoint_problem(endpoint_url)) from error
    for client in (clients.dynamodb, clients.dynamodbstreams, clients.lambda_, clients.sqs):
        watch_requests(client)
    return clients


def _endpoint_problem(given: str | None) -> str:
    """Which setting holds the endpoint botocore refused, and what it must be."""
    if given:
        source, value = "--endpoint-url", given
    else:
        services = sorted(name for name in os.environ if name.startswith("AWS_ENDPOINT_URL_"))
        names = ["AWS_ENDPOINT_URL", *services]
        found = [(name, os.environ[name]) for name in names if os.environ.get(name)]
        source, value = found[0] if found else ("the profile's endpoint_url", "")
    shown = f"={value}" if value else ""
    return f"{source}{shown} is not an endpoint URL: give http(s)://host[:port], or unset it to use AWS's endpoints"


# ------------------------------------------------------------------ retries: bounded when unreachable, and said


def watch_requests(client: Any) -> None:
    """The client's retries said on stderr, one line each; a request that cannot reach its endpoint given up after
    TRANSPORT_ATTEMPTS; a worker thread's next request refused once the run is interrupted (interruption.py).

    botocore's `needs-retry` handlers are asked in order and the first answer that is not None decides: this one runs
    first, notes why the attempt failed, and answers False (no retry) for a transport failure past its attempts, else
    None (botocore's standard retry decides). A retry is sent as a new request (`request-created`, its attempt
    number in the request's context), where it is said; that hook runs first too, before the request is signed."""
    events = client.meta.events
    service = client.meta.service_model.service_id.hyphenize()
    events.register_first(f"needs-retry.{service}", _before_retry_decision, unique_id="leaderboard-tools-retries")
    events.register_first(f"request-created.{service}", _on_request, unique_id="leaderboard-tools-requests")


_FAILURE_KEY = "leaderboard_tools_failure"
_LIMIT_KEY = "leaderboard_tools_attempts"
TRANSPORT_FAILURES = (AWSConnectionError, HTTPClientError)
"""The endpoint not reached, or not answering in time: refused, DNS, TLS, a proxy, a timeout, a closed connection."""
CREDENTIAL_FAILURES = (
    NoCredentialsError,
    PartialCredentialsError,
    CredentialRetrievalError,
    TokenRetrievalError,
    SSOTokenLoadError,
    UnauthorizedSSOTokenError,
)


def _before_retry_decision(
    attempts: int, request_dict: dict[str, Any], response: Any = None, caught_exception: Any = None, **_: Any
) -> bool | None:
    if caught_exception is not None:
        request_dict["context"][_FAILURE_KEY] = _short(caught_exception)
        if isinstance(caught_exception, TRANSPORT_FAILURES):
            request_dict["context"][_LIMIT_KEY] = TRANSPORT_ATTEMPTS
            if attempts >= TRANSPORT_ATTEMPTS:
                return False
        else:
            request_dict["context"].pop(_LIMIT_KEY, None)
        return None
    if response is not None:
        http, parsed = response
        error = (parsed or {}).get("Error") or {}
        if error.get("Code") or getattr(http, "status_code", 200) >= 500:
            request_dict["context"].pop(_LIMIT_KEY, None)  # an answer: botocore's own limit again
            request_dict["context"][_FAILURE_KEY] = f"{error.get('Code') or 'HTTP ' + str(http.status_code)}" + (
                f": {error['Message']}" if error.get("Message") else ""
            )
    return None


_said = threading.Lock()


def _on_request(request: Any, operation_name: str = "", **_: Any) -> None:
    stop_worker_requests()
    context = getattr(request, "context", None) or {}
    attempt = (context.get("retries") or {}).get("attempt") or 1
    if attempt > 1 and CONNECTION.report_retries:
        limit = context.get(_LIMIT_KEY) or (context.get("retries") or {}).get("max")
        of = f" of {limit}" if limit else ""
        host = _host(getattr(request, "url", ""))
        with _said:
            print(
                f"retrying {operation_name} at {host} (attempt {attempt}{of}) after: "
                f"{context.get(_FAILURE_KEY, 'a failed attempt')}",
                file=sys.stderr,
                flush=True,
            )


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc or url


def _short(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


# ------------------------------------------------------------------ one wording for every AWS failure

CREDENTIALS_FIX = (
    "use --profile (or AWS_PROFILE) for a profile that has credentials, or set AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones)"
)
"""What fixes credentials, in every message about them."""
REFUSED_CREDENTIALS = frozenset(
    {
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "InvalidSignatureException",
        "SignatureDoesNotMatch",
        "IncompleteSignature",
        "IncompleteSignatureException",
        "MissingAuthenticationToken",
        "MissingAuthenticationTokenException",
        "InvalidAccessKeyId",
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
        "AuthFailure",
    }
)
ACCESS_DENIED = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "KMSAccessDeniedException",
        "KMS.AccessDeniedException",
        "KmsAccessDeniedException",
    }
)
THROTTLED = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "LimitExceededException",
        "TooManyRequestsException",
        "SlowDown",
    }
)


def aws_failure(error: BaseException) -> str:
    """One line for an AWS failure: what happened and the flag or variable that fixes it."""
    if isinstance(error, CREDENTIAL_FAILURES):
        return f"no AWS credentials found ({_short(error)}): {CREDENTIALS_FIX}"
    if isinstance(error, NoRegionError):
        return "no AWS region: pass --region, or set AWS_REGION (or AWS_DEFAULT_REGION), or use a profile that has one"
    if isinstance(error, ProfileNotFound):
        profile = getattr(error, "kwargs", {}).get("profile", "")
        return (
            f"the AWS profile {profile!r} is in no AWS config file: check --profile or AWS_PROFILE "
            "(`aws configure list-profiles` lists them)"
        )
    if isinstance(error, TRANSPORT_FAILURES):
        return (
            f"cannot reach AWS ({_short(error)}), after {TRANSPORT_ATTEMPTS} attempts: check --endpoint-url (or "
            "AWS_ENDPOINT_URL), --region and the network; --cli-connect-timeout and --cli-read-timeout set the "
            "timeouts (seconds)"
        )
    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        message = str(error.response.get("Error", {}).get("Message", "")) or _short(error)
        operation = getattr(error, "operation_name", "") or "a request"
        if code in REFUSED_CREDENTIALS:
            return f"AWS refused the credentials ({code}: {message}): {CREDENTIALS_FIX}"
        if code in ACCESS_DENIED:
            return (
                f"AWS denied {operation} ({code}: {message}): the credentials' identity needs the permissions "
                "docs/operations.md lists (Permissions); check --profile (or AWS_PROFILE) and --region"
            )
        if code in THROTTLED:
            return f"AWS throttled {operation} past {MAX_ATTEMPTS} attempts ({code}: {message}): run again later"
        return f"AWS refused {operation} ({code}: {message})"
    return f"AWS: {_short(error)}"


def is_aws_failure(error: BaseException) -> bool:
    """Whether `error` is AWS refusing or unreachable (exit code 5), as opposed to a request the tools built wrong."""
    if isinstance(error, ParamValidationError):
        return False
    return isinstance(error, BotoCoreError | ClientError)


def fixable_aws_cause(error: BaseException) -> BaseException | None:
    """The AWS failure behind a tool's own error (a DeploymentError reading the table, say) when it is about the
    credentials, the access, throttling or the network, which the operator fixes the same way for every command."""
    seen: set[int] = set()
    cause = error.__cause__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ClientError):
            code = str(cause.response.get("Error", {}).get("Code", ""))
            if code in REFUSED_CREDENTIALS | ACCESS_DENIED | THROTTLED:
                return cause
        elif is_aws_failure(cause):
            return cause
        cause = cause.__cause__
    return None
