"""MiniStack's DynamoDB-stream event source mappings, delivered by the shared engine.

MiniStack 1.5.33 drops TumblingWindowInSeconds, and its stream poller ignores MaximumRetryAttempts,
BisectBatchOnFunctionError, ReportBatchItemFailures and MaximumBatchingWindowInSeconds and applies
MaximumRecordAgeInSeconds only on failure. ``install`` makes its Lambda service keep the mapping
fields it drops, and replaces its DynamoDB-stream poller with one worker thread per mapping that
reads the table's single shard (1,000 records a read, as many reads as a batch of up to 10,000
needs), applies MiniStack's own filter matcher, gathers for the batching window and hands the
records to ``stream_mapping.ShardDelivery``, with the function's adversarial retries switch
(``adversarial_retries.SwitchFiles``, off unless a test writes its file).
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ministack.core.arn import ArnParseError, parse_arn
from ministack.core.responses import json_response, request_scope
from ministack.services import dynamodb, dynamodb_streams, lambda_svc

from leaderboard_dev.emulators.adversarial_retries import SwitchFiles, directory_from_environment
from leaderboard_dev.emulators.stream_mapping import (
    POLL_INTERVAL_SECONDS,
    Gathering,
    InvocationNotDelivered,
    MappingSettings,
    ShardDelivery,
    sequence_number,
)

LOG = logging.getLogger(__name__)

# MiniStack models one shard per stream; DescribeStream names it so.
SHARD_ID: str = dynamodb_streams._DEFAULT_SHARD_ID
# "GetRecords can retrieve a maximum of 1 MB of data or 1000 stream records, whichever comes first."
READ_LIMIT = 1000
RETRY_INTERVAL_SECONDS = 0.5
# Mapping fields AWS echoes that MiniStack's Create/UpdateEventSourceMapping drop.
KEPT_FIELDS = ("TumblingWindowInSeconds", "MetricsConfig", "KMSKeyArn")

Scope = tuple[str, str, str]
"""(account, region, mapping UUID): MiniStack keys its stores by account and region."""

_workers: dict[Scope, _MappingWorker] = {}
_workers_lock = threading.Lock()


def install() -> None:
    """Patch MiniStack's Lambda service in place; call before it starts serving."""
    lambda_svc._create_esm = _keeping_fields(lambda_svc._create_esm, status=202)
    lambda_svc._update_esm = _keeping_fields(lambda_svc._update_esm, status=200)
    lambda_svc._poll_dynamodb_streams = poll_dynamodb_streams


def _keeping_fields(handler: Callable[..., tuple[int, dict[str, str], bytes]], status: int) -> Callable[..., Any]:
    """Store the fields MiniStack drops, so that Get/List echo them and Terraform sees no perpetual diff."""

    def handle(*arguments: Any) -> tuple[int, dict[str, str], bytes]:
        data: dict[str, Any] = arguments[-1]
        response = handler(*arguments)
        kept = {key: data[key] for key in KEPT_FIELDS if key in data}
        if response[0] != status or not kept:
            return response
        mapping = lambda_svc._esms.get(json.loads(response[2])["UUID"])
        if mapping is None:
            return response
        mapping.update(kept)
        return json_response(lambda_svc._esm_response(mapping), status)

    return handle


def poll_dynamodb_streams() -> bool:
    """Stand-in for MiniStack's pass over DynamoDB-stream mappings: keep one worker per mapping.

    The workers poll on their own, so that a batch being retried holds up neither MiniStack's
    poll loop (SQS, Kinesis) nor the other mappings. Returns False: this pass delivered nothing.
    """
    current: set[Scope] = set()
    for account, region, mapping in lambda_svc._iter_all_esms():
        if _stream_table(mapping.get("EventSourceArn", "")) is not None:
            current.add((account, region, mapping["UUID"]))
    with _workers_lock:
        for scope in current - _workers.keys():
            _workers[scope] = _MappingWorker(scope)
            _workers[scope].start()
        for scope in _workers.keys() - current:
            _workers.pop(scope).stop()
    return False


Record = dict[str, Any]


def read_for_batch(
    read: Callable[[int], list[Record]], matching: Callable[[list[Record]], list[Record]], batch_size: int
) -> tuple[list[Record], list[Record], bool]:
    """Read the shard, READ_LIMIT records at a time, until a batch's worth of records pass the filter.

    `read(offset)` returns up to READ_LIMIT records from `offset` past the mapping's position. Returns
    the records read, those that match (in order) and whether the shard was read up to the present.
    A batch of up to 10,000 records ("BatchSize ... DynamoDB Streams: Maximum is 10,000") takes
    several GetRecords calls of at most 1,000 records each.
    """
    read_so_far: list[Record] = []
    matched: list[Record] = []
    while True:
        chunk = read(len(read_so_far))
        read_so_far.extend(chunk)
        matched.extend(matching(chunk))
        if len(chunk) < READ_LIMIT:
            return read_so_far, matched, True
        if len(matched) >= batch_size:
            return read_so_far, matched, False


def records_to_skip(read: Sequence[Record], matching: Sequence[Record], delivered: int) -> int:
    """How far the position moves: past everything read once every match went out, else to the first match left."""
    if delivered == len(matching):
        return len(read)
    return [sequence_number(record) for record in read].index(sequence_number(matching[delivered]))


def _stream_table(source_arn: str) -> str | None:
    try:
        spec = parse_arn(source_arn)
    except ArnParseError:
        return None
    if spec.service != "dynamodb":
        return None
    table_and_label = lambda_svc._dynamodb_stream_table_from_arn_spec(spec)
    return None if table_and_label is None else table_and_label[0]


class _MappingWorker:
    """Reads one mapping's stream, in the mapping's account and region, and delivers it."""

    def __init__(self, scope: Scope) -> None:
        self.account, self.region, self.uuid = scope
        self._stopped = threading.Event()
        self._delivery: ShardDelivery | None = None
        self._gathering = Gathering()
        self._thread = threading.Thread(target=self._run, name=f"ddb-stream-mapping-{self.uuid}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._delivery is not None:
            self._delivery.close()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                with request_scope(self.account, self.region):
                    read_more = self._poll()
            except Exception:
                LOG.exception("DynamoDB stream mapping %s: poll failed", self.uuid)
                read_more = False
            if not read_more:
                self._stopped.wait(POLL_INTERVAL_SECONDS)

    def _poll(self) -> bool:
        """One GetRecords-like read and its delivery; True if the shard has more records to read now."""
        mapping = lambda_svc._esms.get(self.uuid)
        if mapping is None or not mapping.get("Enabled", True):
            return False
        source_arn = mapping["EventSourceArn"]
        table_name = _stream_table(source_arn)
        table = dynamodb._tables.get(table_name) if table_name else None
        if table_name is None or not table or table.get("LatestStreamArn") != source_arn:
            return False
        function, _config = lambda_svc._get_func_record_for_qualifier(mapping["FunctionName"], mapping.get("Qualifier"))
        if function is None:
            return False
        position = self._position(mapping, table_name)
        delivery = self._delivery_for(mapping, source_arn)
        batch_size = delivery.settings.batch_size
        read, matching, read_to_present = read_for_batch(
            lambda offset: dynamodb.stream_records_since(table_name, position + offset, READ_LIMIT),
            lambda chunk: lambda_svc._apply_filter_criteria(chunk, mapping),
            batch_size,
        )
        if matching and not self._gathering.ready(matching, delivery, read_to_present):
            return False
        batch = matching[:batch_size]
        done = delivery.deliver(batch)
        if batch:
            self._gathering.delivered()
        advanced = records_to_skip(read, matching, done)
        with lambda_svc._dynamodb_stream_positions_lock:
            lambda_svc._dynamodb_stream_positions[self.uuid] = position + advanced
        if read:
            mapping["LastProcessingResult"] = f"OK - {done} records"
        caught_up = read_to_present and done == len(matching)
        if caught_up:
            delivery.tick()
        return not caught_up and not self._stopped.is_set()

    def _position(self, mapping: dict[str, Any], table_name: str) -> int:
        """The mapping's read position, anchored as MiniStack anchors it (at creation for LATEST)."""
        horizon = dynamodb.stream_start_position(table_name)
        with lambda_svc._dynamodb_stream_positions_lock:
            positions = lambda_svc._dynamodb_stream_positions
            if self.uuid not in positions:
                starting = mapping.get("StartingPosition", "LATEST")
                positions[self.uuid] = (
                    horizon if starting == "TRIM_HORIZON" else dynamodb.stream_end_position(table_name)
                )
            # Records that expired meanwhile are gone: resume at the trim horizon.
            positions[self.uuid] = max(positions[self.uuid], horizon)
            return int(positions[self.uuid])

    def _delivery_for(self, mapping: dict[str, Any], source_arn: str) -> ShardDelivery:
        settings = MappingSettings.from_event_source_mapping(mapping, retry_interval_seconds=RETRY_INTERVAL_SECONDS)
        if self._delivery is None:
            switch = SwitchFiles(directory_from_environment(), settings.function_arn)
            self._delivery = ShardDelivery(
                settings,
                SHARD_ID,
                source_arn,
                self._invoke,
                self._send_failure_record,
                adversary=switch.policy,
                journal=switch.journal,
            )
            if self._stopped.is_set():
                self._delivery.close()
        else:
            self._delivery.update_settings(settings)
        return self._delivery

    def _invoke(self, payload: dict[str, Any]) -> tuple[bool, Any]:
        """Through MiniStack's own executor, which also writes the function's logs."""
        mapping = lambda_svc._esms.get(self.uuid) or {}
        function, _config = lambda_svc._get_func_record_for_qualifier(
            mapping.get("FunctionName", ""), mapping.get("Qualifier")
        )
        if function is None:
            raise InvocationNotDelivered(f"function {mapping.get('FunctionName')} not found")
        result = lambda_svc._execute_function(function, payload)
        if result.get("throttle"):
            raise InvocationNotDelivered(json.dumps(result.get("body")))
        if result.get("error"):
            LOG.warning("DynamoDB stream mapping %s: function error %s", self.uuid, result.get("body"))
            return True, result.get("body")
        return False, result.get("body")

    def _send_failure_record(self, failure_record: dict[str, Any]) -> None:
        """To the mapping's current on-failure destination, as MiniStack's own poller sends there."""
        mapping = lambda_svc._esms.get(self.uuid) or {}
        destination = ((mapping.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        if not destination:
            return
        body = json.dumps(failure_record)
        spec = parse_arn(destination)
        with request_scope(spec.account_id, spec.region):
            if spec.service == "sqs":
                from ministack.services import sqs

                queue = sqs._queue_by_arn(destination)
                if queue is None:
                    raise LookupError(f"on-failure destination {destination} does not exist")
                sqs._act_send_message({"MessageBody": body}, queue["url"])
            elif spec.service == "sns":
                from ministack.services import sns

                sns._fanout(destination, str(uuid.uuid4()), body, "Lambda ESM failure", "", {})
            else:
                raise ValueError(f"on-failure destination {destination} is not an SQS queue or SNS topic")
