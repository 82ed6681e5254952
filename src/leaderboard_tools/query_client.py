"""The deployed query function as a client sees it: its name, invoking it, and following its pages.

The function is the module's `<name>-query` beside either table of a deployment (`<name>-downloads`,
`<name>-aggregates`, or a platform's own table it is attached to), or named outright:
invoking it is all a person needs the permission for. The client is the operator tools'
(`operator_aws.py`): boto3's standard session, an endpoint only when one is given (or the SDKs'
own `AWS_ENDPOINT_URL`), so the same request reads a stack on AWS or on an emulator.

AWS refusing or unreachable (no region, an unknown profile, no or refused credentials, access denied, throttled, the
endpoint not reached) is not said here: botocore's error goes up as it is (no region and an unknown profile as
operator_aws's OperatorSetupError), and cli.py says it as for every command, in operator_aws's words, exit code 5.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from leaderboard_tools.deployment import AGGREGATES_SUFFIX, QUERY_SUFFIX

TABLE_SUFFIX = "-downloads"
"""The module's names: table `<name>-downloads`, query function `<name>-query` (terraform/main.tf)."""
MAX_PAGES = 100_000
"""A listing stops after this many pages: 100 million entries, far past any board this module keeps."""


class CommandError(RuntimeError):
    """What the person must change (a flag, a name), or the function failing: said plainly, exit code 1."""


class NoSuchFunction(CommandError):
    """Lambda has no function of that name where the client asked (its region, or its endpoint)."""

    def __init__(self, function: str, region: str | None) -> None:
        where = f" in {region}" if region else ""
        super().__init__(f"the query function {function} does not exist{where}")
        self.function = function


class AnswerError(RuntimeError):
    """The query function answered an error object (InvalidRequest, Unavailable)."""

    def __init__(self, answer: dict[str, Any]) -> None:
        error = answer.get("error", {})
        super().__init__(f"{error.get('code', 'Error')}: {error.get('message', answer)}")
        self.answer = answer


def query_function_named(table: str) -> str | None:
    """`<name>-query` for the module's tables named as it names them: `<name>-downloads`, `<name>-aggregates`;
    None for another name (a platform's own table, attached with source_table_name)."""
    for suffix in (TABLE_SUFFIX, AGGREGATES_SUFFIX):
        if table.endswith(suffix) and len(table) > len(suffix):
            return table[: -len(suffix)] + QUERY_SUFFIX
    return None


def query_function_of(table: str, clients: Callable[[], Any] | None = None) -> str:
    """The query function of a deployment, from either of its tables: by the module's names, else (a platform's own
    table, attached with source_table_name) from the deployment read around it with `clients()` (deployment.discover:
    the aggregator reading its stream, and `<name>-query` beside it). CommandError when neither finds one."""
    named = query_function_named(table)
    if named is not None:
        return named
    from leaderboard_tools.deployment import DeploymentError, discover

    unnamed = f"not named like the module's tables (<name>{TABLE_SUFFIX}, <name>{AGGREGATES_SUFFIX})"
    if clients is None:
        raise CommandError(
            f"{table} is {unnamed}: pass either table of a deployment, or name the function with --function"
        )
    try:
        deployment = discover(clients(), table)
    except DeploymentError as error:
        raise CommandError(f"{error}. {table} is {unnamed}: name its query function with --function") from error
    if deployment.query_function is None:
        raise CommandError(
            f"no query function of the module found for table {table}: none serves {deployment.aggregates} beside "
            f"the aggregator {deployment.aggregator_function}: name it with --function"
        )
    return deployment.query_function


def lambda_client(profile: str | None, region: str | None, endpoint_url: str | None) -> Any:
    """The operator tools' Lambda client (boto3's standard session; reads wait past any function's timeout).

    No region or an unknown profile: operator_aws.OperatorSetupError, exit code 5 as for every command."""
    from leaderboard_tools.operator_aws import operator_clients

    return operator_clients(profile, region, endpoint_url).lambda_


def invoke(client: Any, function: str, request: dict[str, Any]) -> dict[str, Any]:
    """The function's answer; NoSuchFunction if there is none of that name, CommandError if it fails or answers no
    query answer, AnswerError if it answers an error object. AWS refusing the invocation or not reached: botocore's
    error, as it is (see the module)."""
    from botocore.exceptions import ClientError

    try:
        response = client.invoke(FunctionName=function, Payload=json.dumps(request).encode())
    except ClientError as error:
        if error.response.get("Error", {}).get("Code", "") == "ResourceNotFoundException":
            raise NoSuchFunction(function, getattr(getattr(client, "meta", None), "region_name", None)) from error
        raise
    payload = json.loads(response["Payload"].read() or b"null")
    if response.get("FunctionError"):
        raise CommandError(f"{function} failed: {payload}")
    if not isinstance(payload, dict):
        raise CommandError(f"{function} answered {payload!r}, not a query answer")
    if "error" in payload:
        raise AnswerError(payload)
    return payload


def listing_pages(
    client: Any,
    function: str,
    request: dict[str, Any],
    page_size: int,
    max_items: int | None = None,
    starting_token: str | None = None,
) -> Iterator[dict[str, Any]]:
    """A listing's pages as the AWS CLI pages: `page_size` entries an invocation, `max_items` in all, from a token.

    The last page asks only for the entries still wanted, so the listing stops on a page's end and that page's
    next_token is where it resumes (a NextToken to print): no page is cut. A page may hold no entries and a token
    (a range by rank on its way to its first rank): it is followed like any other.
    """
    token, listed = starting_token, 0
    for _ in range(MAX_PAGES):
        limit = page_size if max_items is None else min(page_size, max_items - listed)
        answer = invoke(client, function, {**request, "limit": limit, **({"next_token": token} if token else {})})
        yield answer
        listed += len(answer.get("items", []))
        token = answer.get("next_token")
        if token is None or (max_items is not None and listed >= max_items):
            return
    raise CommandError(f"the listing did not end after {MAX_PAGES} pages")
