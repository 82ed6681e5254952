"""Query Lambda: any board's leaderboard from the sparse index, exact and paginated; ranks, neighbours, rolling windows.

A board is one period bucket (hour, day, ISO week, month, year, all), overall or of one category
(boards.py), its aggregates spread over the index partitions of its leaderboard shards
(index_reads.py). This module holds the handler and the function's settings; each kind of request
is a module of its own, and query_kinds.py says which a request is.

Requests (docs/query-contract.md)
  {"month": "2018-01", "limit": 10, "next_token": "..."}
      -> {"month": "2018-01", "items": [{"songID": "song3", "downloadCount": 12}, ...], "next_token": "..." | null}
  {"month": "2018-01", "songID": "song3"}
      -> {"month": "2018-01", "songID": "song3", "downloadCount": 12, "rank": 4}
  {"period": "day", "key": "2018-01-15", "category": "rock", ...}: the same for any maintained board
  {..., "songID": "song3", "around": 2}: the rank, and the song with two entries above and below
  {"period": "day", "key": "2018-01-15", "last": 7, "limit": 10}: the exact top 10 of seven days (rolling.py)
  {..., "rankPolicy": "competition"}: ties ranked 1, 2, 2, 4 (or "dense": 1, 2, 2, 3) in pages, ranks and ranges
  {"month": "2018-01", "among": ["song1", "song2"]}: a set ranked among itself (among.py)
A bad request gets {"error": {"code": "InvalidRequest", "message": "..."}}; a leaderboard that cannot be
read (DynamoDB failed, or the read outgrew its budget or the function's time) gets
{"error": {"code": "Unavailable", "message": "..."}}, logged at error level. Never a stack trace.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from boards import boards_from_environment
from index_reads import IndexSchema, Layout, Unavailable
from leaderboard_core.attributes import NAME_VARIABLES
from leaderboard_core.source_items import AGGREGATES_TABLE_VARIABLE
from query_kinds import parse_kind_and_request
from read_context import ReadContext
from request_parsing import InvalidRequest

logger = Logger()

DEADLINE_MARGIN_MS = 2000
"""Time before the timeout after which no Query starts: a rank answers its lower bound, a page Unavailable."""
MAX_READER_THREADS = 32


def error_response(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


GUIDE_SCHEMA = IndexSchema()
"""The guide's index and attribute names: what the function uses where the module sets none."""


READ_NAMES = tuple(name for name in NAME_VARIABLES if name != "timestamp")
"""The attribute names the query function reads: a download's timestamp is none of its business."""


def schema_from_environment(environ: Mapping[str, str]) -> IndexSchema:
    """The module sets these from its attribute-name variables; the defaults are the guide's names."""
    return IndexSchema(
        **{name: environ.get(NAME_VARIABLES[name], getattr(GUIDE_SCHEMA, name)) for name in READ_NAMES},
        index_name=environ.get("INDEX_NAME", GUIDE_SCHEMA.index_name),
    )


def aggregates_table_from_environment(environ: Mapping[str, str]) -> str:
    """Where the aggregates and their index are: the downloads' table in the guide's layout, else <name>-aggregates
    (a function deployed before the aggregates could have a table of their own names it TABLE_NAME)."""
    return environ.get(AGGREGATES_TABLE_VARIABLE) or environ.get("TABLE_NAME", "")


def layout_from_environment(environ: Mapping[str, str]) -> Layout:
    previous = environ.get("LEADERBOARD_SHARDS_PREVIOUS") or None
    return Layout(int(environ.get("LEADERBOARD_SHARDS", "1")), int(previous) if previous else None)


def reader_threads(layout: Layout) -> int:
    """One thread per partition a request reads at once, up to MAX_READER_THREADS.

    A rolling window reads the partitions of all its buckets, and its point reads, at once, so any
    deployment may use them all; the pool starts a thread only when no idle one is free.
    """
    return MAX_READER_THREADS


def client_config(threads: int) -> Config:
    """botocore keeps 10 connections by default; every reader thread, and the handler's own, may hold one at once."""
    return Config(retries={"mode": "standard", "max_attempts": 3}, max_pool_connections=threads + 1)


SCHEMA = schema_from_environment(os.environ)
LAYOUT = layout_from_environment(os.environ)
BOARDS = boards_from_environment(os.environ)
AGGREGATES_TABLE_NAME = aggregates_table_from_environment(os.environ)
_THREADS = reader_threads(LAYOUT)
_dynamodb = boto3.client("dynamodb", config=client_config(_THREADS))
_READERS = ThreadPoolExecutor(max_workers=_THREADS, thread_name_prefix="partition")


def read_context(context: LambdaContext) -> ReadContext:
    """This invocation's reads: the deployment's table, index and shards, the reader threads, the function's clock."""
    return ReadContext(
        _dynamodb,
        AGGREGATES_TABLE_NAME,
        SCHEMA,
        LAYOUT,
        _READERS.map,
        lambda: context.get_remaining_time_in_millis() < DEADLINE_MARGIN_MS,
        BOARDS.summed,
    )


@logger.inject_lambda_context
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    try:
        kind, request = parse_kind_and_request(event, SCHEMA, LAYOUT, BOARDS)
    except InvalidRequest as error:
        logger.info("invalid request", extra={"reason": str(error)})
        return error_response("InvalidRequest", str(error))
    where = {"request": kind.name, "board": request.board.id, "period": request.board.period}
    try:
        return kind.answer(read_context(context), request)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "Unknown")
        logger.exception("leaderboard unavailable", extra={**where, "error_code": code})
        return error_response("Unavailable", f"DynamoDB refused the read ({code}); try again later")
    except BotoCoreError as error:
        logger.exception("leaderboard unavailable", extra=where)
        return error_response("Unavailable", f"DynamoDB could not be reached ({type(error).__name__}); try again later")
    except Unavailable as error:
        logger.error("leaderboard unavailable", extra={**where, "reason": str(error)})
        return error_response("Unavailable", str(error))
