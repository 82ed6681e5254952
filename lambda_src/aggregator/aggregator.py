"""Aggregator Lambda: counts new downloads from the table's stream into per-board aggregate items, exactly once.

This module is the function's entry and nothing more: the deployment's settings and clients, made once per
instance, and `handle`, which hands each event to the module that answers it. Where each kind goes:

- the band queue's records (a repair's band at its deadline): `band_records.py`;
- with one reader per shard (STREAM_READERS=1, ledger mode only), every other event: `one_reader.py`;
- with retractions on, before anything that may apply a stream record: the replica guard, `replica_guard.py`;
- the schedule's lineage sweep: `lineage_sweep.py` (a shard's ancestors: `shard_lineage.py`);
- a delivery of a shard (the mapping's window or a direct invocation) with two readers per shard, the default:
  `two_readers.py`, which reads the shard from its checkpoint in steps (`catch_up.py`) and writes the aggregates
  under its watermark (`aggregate_store.py`; with claims `stream_claims.py`, with the ledger `ledger.py`).

The clients every module is handed are in `dependencies.py`, made in `wiring.py`; the settings in
`aggregator_settings.py`.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config

from aggregator_settings import Settings
from band_records import is_band_record_event, settle_band_records
from batch_report import publish
from dependencies import Dependencies
from invocation_context import InvocationContext
from lineage_sweep import LineageSweepUnreported, is_lineage_sweep_event, sweep_lineages_on_schedule
from one_reader import handle_one_reader
from telemetry import logger, metrics
from two_readers import handle_delivery
from wiring import dependencies_for

_SDK_CONFIG = Config(retries={"mode": "adaptive", "max_attempts": 8}, connect_timeout=2, read_timeout=5)

SETTINGS = Settings.from_environment(dict(os.environ))
_dynamodb = boto3.client("dynamodb", config=_SDK_CONFIG)
_streams = boto3.client("dynamodbstreams", config=_SDK_CONFIG)
_sqs = boto3.client("sqs", config=_SDK_CONFIG)
DEPENDENCIES = dependencies_for(
    SETTINGS,
    _dynamodb,
    _streams,
    _sqs,
    ThreadPoolExecutor(max_workers=max(1, SETTINGS.write_concurrency), thread_name_prefix="aggregate-writer"),
)


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The function's entry (terraform/lambda.tf): the deployment's settings and clients, made once per instance."""
    return handle(event, context, SETTINGS, DEPENDENCIES)


@metrics.log_metrics
@logger.inject_lambda_context
def handle(
    event: dict[str, Any], context: LambdaContext, settings: Settings, dependencies: Dependencies
) -> dict[str, Any]:
    """One invocation, with the settings and clients it is given: a band queue's records, the lineage sweep, or a
    delivery of a shard (the mapping's window or a direct invocation); with one reader per shard, one_reader's.
    With retractions on, whatever may apply a stream record first passes the replica guard (replica_guard.py); a
    band record applies none."""
    if is_band_record_event(event):
        return settle_band_records(event, dependencies)
    if dependencies.replica_guard is not None:
        dependencies.replica_guard.check()
    if settings.stream_readers == 1:
        return handle_one_reader(event, context, settings, dependencies)
    if is_lineage_sweep_event(event):
        return _sweep_lineages(event, context, settings, dependencies)
    return handle_delivery(event, context, settings, dependencies)


def _sweep_lineages(
    event: dict[str, Any], context: LambdaContext, settings: Settings, dependencies: Dependencies
) -> dict[str, Any]:
    """The schedule's sweep with two readers per shard, its log line and metrics whether or not it reported all."""
    started = time.monotonic()
    invocation = InvocationContext(settings, dependencies, context.get_remaining_time_in_millis)
    try:
        response, report = sweep_lineages_on_schedule(event, invocation)
    except LineageSweepUnreported as failure:
        publish(failure.report, started, succeeded=False)
        raise
    publish(report, started, succeeded=True)
    return response
