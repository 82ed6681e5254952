"""Query Lambda: a month's leaderboard from the sparse index, highest count first, paginated.

Request  {"month": "2018-01", "limit": 10, "next_token": "..."}
Response {"month": "2018-01", "items": [{"songID": "song3", "downloadCount": 12}], "next_token": "..." | null}
A bad request gets {"error": {"code": "InvalidRequest", "message": "..."}}, never a stack trace.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError

logger = Logger()

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
_MONTH = re.compile(r"^[0-9]{4}-(0[1-9]|1[0-2])$")
_NUMBER = re.compile(r"^-?[0-9]{1,38}$")
_MAX_TOKEN_LENGTH = 4096


class InvalidRequest(Exception):
    pass


@dataclass(frozen=True)
class IndexSchema:
    index_name: str = "MonthDownloadsIndex"
    entity: str = "songID"
    sort_key: str = "SK"
    period: str = "Month"
    count: str = "DownloadCount"


@dataclass(frozen=True)
class LeaderboardRequest:
    month: str
    limit: int
    start_key: dict[str, Any] | None


def parse_request(event: Any, schema: IndexSchema) -> LeaderboardRequest:
    if not isinstance(event, dict):
        raise InvalidRequest("the request must be a JSON object")
    unknown = set(event) - {"month", "limit", "next_token"}
    if unknown:
        raise InvalidRequest(f"unknown fields: {', '.join(sorted(unknown))}")
    month = event.get("month")
    if not isinstance(month, str) or not _MONTH.match(month):
        raise InvalidRequest("month is required, formatted YYYY-MM")
    limit = event.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be an integer from 1 to {MAX_LIMIT}")
    token = event.get("next_token")
    start_key = None if token is None else decode_token(token, month, schema)
    return LeaderboardRequest(month, limit, start_key)


def encode_token(last_evaluated_key: dict[str, Any]) -> str:
    payload = json.dumps(last_evaluated_key, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


def decode_token(token: Any, month: str, schema: IndexSchema) -> dict[str, Any]:
    """Accept only a key of the exact shape this function issues, for the month asked about.

    The token is the index position and nothing else, so a well-formed but invented one can
    at most start the listing at another place of the same month.
    """
    if not isinstance(token, str) or not token or len(token) > _MAX_TOKEN_LENGTH:
        raise InvalidRequest("next_token is not a token issued by this function")
    try:
        key = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidRequest("next_token is not a token issued by this function") from None
    expected_types = {schema.entity: "S", schema.sort_key: "S", schema.period: "S", schema.count: "N"}
    if not isinstance(key, dict) or set(key) != set(expected_types):
        raise InvalidRequest("next_token is not a token issued by this function")
    for name, attribute_type in expected_types.items():
        value = key[name]
        if not isinstance(value, dict) or list(value) != [attribute_type] or not isinstance(value[attribute_type], str):
            raise InvalidRequest("next_token is not a token issued by this function")
    if key[schema.period]["S"] != month:
        raise InvalidRequest("next_token belongs to another month")
    if not _NUMBER.match(key[schema.count]["N"]):
        raise InvalidRequest("next_token is not a token issued by this function")
    return key


def query_leaderboard(client: Any, table_name: str, schema: IndexSchema, request: LeaderboardRequest) -> dict[str, Any]:
    parameters: dict[str, Any] = {
        "TableName": table_name,
        "IndexName": schema.index_name,
        "KeyConditionExpression": "#period = :period",
        "ExpressionAttributeNames": {"#period": schema.period},
        "ExpressionAttributeValues": {":period": {"S": request.month}},
        "ScanIndexForward": False,
        "Limit": request.limit,
    }
    if request.start_key is not None:
        parameters["ExclusiveStartKey"] = request.start_key
    page = client.query(**parameters)
    items = [
        {"songID": item[schema.entity]["S"], "downloadCount": int(item[schema.count]["N"])}
        for item in page.get("Items", [])
    ]
    last_key = page.get("LastEvaluatedKey")
    return {"month": request.month, "items": items, "next_token": encode_token(last_key) if last_key else None}


def error_response(message: str) -> dict[str, Any]:
    return {"error": {"code": "InvalidRequest", "message": message}}


def schema_from_environment(environ: Mapping[str, str]) -> IndexSchema:
    """The module sets these from its attribute-name variables; the defaults are the guide's names."""
    return IndexSchema(
        index_name=environ.get("INDEX_NAME", "MonthDownloadsIndex"),
        entity=environ.get("ENTITY_ATTRIBUTE", "songID"),
        sort_key=environ.get("SORT_KEY_ATTRIBUTE", "SK"),
        period=environ.get("PERIOD_ATTRIBUTE", "Month"),
        count=environ.get("COUNT_ATTRIBUTE", "DownloadCount"),
    )


SCHEMA = schema_from_environment(os.environ)
TABLE_NAME = os.environ.get("TABLE_NAME", "")
_dynamodb = boto3.client("dynamodb")


@logger.inject_lambda_context
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    try:
        request = parse_request(event, SCHEMA)
    except InvalidRequest as error:
        logger.info("invalid request", extra={"reason": str(error)})
        return error_response(str(error))
    try:
        return query_leaderboard(_dynamodb, TABLE_NAME, SCHEMA, request)
    except ClientError as error:
        if request.start_key is None or error.response.get("Error", {}).get("Code") != "ValidationException":
            raise
        logger.info("start key rejected by DynamoDB", extra={"reason": str(error)})
        return error_response("next_token is not valid for this leaderboard")
