"""LocalStack's DynamoDB-stream mappings with a tumbling window, delivered by the shared engine.

LocalStack 4.14.0 stores TumblingWindowInSeconds and ignores it. This LocalStack plugin, an
``on_infra_start`` hook that ``leaderboard_dev.emulators.localstack`` installs into LocalStack's
own venv, gives such mappings a DynamoDB poller that hands each shard's filtered records to
``stream_mapping.ShardDelivery``, with the function's adversarial retries switch
(``adversarial_retries.SwitchFiles``, off unless a test writes its file); mappings without a
window keep LocalStack's own poller. A second hook gives the REMOVE records of the items LocalStack's TTL
emulation deletes TTL's userIdentity (``ttl_expiry``), and the windowed poller carries it into the events
before the mapping's filter criteria are applied.
It runs inside LocalStack's interpreter only.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from localstack.runtime import hooks
from localstack.services.lambda_.api_utils import function_locators_from_arn
from localstack.services.lambda_.event_source_mapping.esm_worker import EsmWorker
from localstack.services.lambda_.event_source_mapping.pipe_utils import get_internal_client, to_json_str
from localstack.services.lambda_.event_source_mapping.pollers.dynamodb_poller import DynamoDBPoller
from localstack.services.lambda_.event_source_mapping.pollers.sqs_poller import get_queue_url
from localstack.utils.aws.arns import parse_arn

from leaderboard_dev.emulators.adversarial_retries import SwitchFiles, directory_from_environment
from leaderboard_dev.emulators.stream_mapping import (
    InvocationNotDelivered,
    MappingSettings,
    Record,
    ShardDelivery,
    approximate_creation_time,
    insertion_time_within_the_minute,
    sequence_number,
)
from leaderboard_dev.emulators.ttl_expiry import ExpiryLedger, carry_user_identity, note_expiries, stamp_expiries

LOG = logging.getLogger(__name__)
RETRY_INTERVAL_SECONDS = 0.5
EXPIRIES = ExpiryLedger()


@hooks.on_infra_start()
def deliver_tumbling_windows() -> None:
    """Make LocalStack build a ``WindowedDynamoDBPoller`` for every DynamoDB-stream mapping with a window."""
    from localstack.services.lambda_.event_source_mapping.esm_worker_factory import EsmWorkerFactory

    build_worker = EsmWorkerFactory.get_esm_worker
    if getattr(build_worker, "delivers_tumbling_windows", False):
        return

    def get_esm_worker(factory: EsmWorkerFactory) -> EsmWorker:
        worker = build_worker(factory)
        mapping = factory.esm_config
        if isinstance(worker.poller, DynamoDBPoller) and (mapping.get("TumblingWindowInSeconds") or 0) > 0:
            worker.poller = WindowedDynamoDBPoller(worker.poller, mapping)
            _close_poller_when_stopped(worker)
            LOG.info(
                "event source mapping %s: tumbling window of %s s delivered by leaderboard-tools",
                mapping["UUID"],
                mapping["TumblingWindowInSeconds"],
            )
        return worker

    get_esm_worker.delivers_tumbling_windows = True  # type: ignore[attr-defined]
    EsmWorkerFactory.get_esm_worker = get_esm_worker  # type: ignore[method-assign]
    LOG.info("DynamoDB-stream mappings with TumblingWindowInSeconds are delivered by leaderboard-tools")


@hooks.on_infra_start()
def mark_ttl_expiries() -> None:
    """Make the stream records of LocalStack's TTL deletions carry TTL's userIdentity, as on AWS.

    The v2 providers, which ``launch_spec`` selects: DynamoDB Local's own streams.
    """
    from localstack.services.dynamodb.v2 import provider as dynamodb_provider
    from localstack.services.dynamodbstreams.v2.provider import DynamoDBStreamsProvider

    note_expiries(dynamodb_provider, EXPIRIES)
    stamp_expiries(DynamoDBStreamsProvider, EXPIRIES)
    LOG.info("the REMOVE records of items deleted by TTL carry TTL's userIdentity, by leaderboard-tools")


def _close_poller_when_stopped(worker: EsmWorker) -> None:
    """A delivery retrying without limit would otherwise keep the worker's thread after stop or delete:
    LocalStack closes a poller only once its loop has returned."""
    for name in ("stop", "delete", "stop_for_shutdown"):
        method = getattr(worker, name)

        def stop_then_close(method: Any = method) -> None:
            method()
            worker.poller.close()

        setattr(worker, name, stop_then_close)


class WindowedDynamoDBPoller(DynamoDBPoller):
    """LocalStack's DynamoDB poller, reading and filtering as it does, delivering through the engine."""

    def __init__(self, replaced: DynamoDBPoller, mapping: dict[str, Any]) -> None:
        super().__init__(
            replaced.source_arn,
            replaced.source_parameters,
            replaced.source_client,
            replaced.processor,
            partner_resource_arn=replaced.partner_resource_arn,
            esm_uuid=replaced.esm_uuid,
            shards=replaced.shards,
        )
        self.settings = MappingSettings.from_event_source_mapping(
            mapping, retry_interval_seconds=RETRY_INTERVAL_SECONDS
        )
        sender = replaced.processor.sender  # always a LambdaSender for a mapping
        self._lambda = sender.target_client
        self._function_arn: str = sender.target_arn
        self.deliveries: dict[str, ShardDelivery] = {}
        self._insertion_times: dict[str, float] = {}
        self._switch = SwitchFiles(directory_from_environment(), self._function_arn)

    def poll_events_from_shard(self, shard_id: str, shard_iterator: str) -> None:
        response = self.get_records(shard_iterator)
        read_at = time.time()
        records: list[dict[str, Any]] = response.get("Records", [])
        next_iterator = response.get("NextShardIterator")
        if next_iterator:
            self.shards[shard_id] = next_iterator
        events = self._matching_events(shard_id, records)
        self._insertion_times = {
            sequence_number(event): insertion_time_within_the_minute(stamped, read_at)
            for event in events
            if (stamped := approximate_creation_time(event)) is not None
        }
        delivery = self._delivery(shard_id)
        delivery.deliver(events)
        if not next_iterator:
            # "If set to null, the shard has been closed and the requested iterator does not return any
            # more data" (GetRecords); LocalStack then looks up the shards again.
            delivery.end_of_shard()
            self.deliveries.pop(shard_id, None)
            self.shards = self.initialize_shards()
        elif len(records) < self.stream_parameters["BatchSize"]:
            delivery.tick()

    def transform_into_events(self, records: list[dict[str, Any]], shard_id: str) -> list[dict[str, Any]]:
        """LocalStack's events, with the userIdentity that Lambda's events carry (a TTL deletion's)."""
        return carry_user_identity(records, super().transform_into_events(records, shard_id))

    def _matching_events(self, shard_id: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The steps of LocalStack's ``forward_events_to_target`` up to its invocation: filtered after the events
        carry their userIdentity."""
        events = self.transform_into_events(records, shard_id)
        matching = self.post_filter(self.filter_events(self.pre_filter(events)))
        return self.add_source_metadata(matching)

    def _delivery(self, shard_id: str) -> ShardDelivery:
        if shard_id not in self.deliveries:
            self.deliveries[shard_id] = ShardDelivery(
                self.settings,
                shard_id,
                self.source_arn,
                self._invoke,
                self._send_failure_record,
                insertion_time=self._insertion_time,
                adversary=self._switch.policy,
                journal=self._switch.journal,
            )
            if self._is_shutdown.is_set():
                self.deliveries[shard_id].close()
        return self.deliveries[shard_id]

    def _insertion_time(self, record: Record) -> float | None:
        """DynamoDB Local stamps records to the minute only (AWS: to the second), which would put every
        record into a window that is long over, and make it up to a minute older than it is."""
        return self._insertion_times.get(sequence_number(record), approximate_creation_time(record))

    def _invoke(self, payload: dict[str, Any]) -> tuple[bool, Any]:
        """Synchronously, as LocalStack's LambdaSender invokes, but with the window's payload."""
        _name, qualifier, _account, _region = function_locators_from_arn(self._function_arn)
        try:
            result = self._lambda.invoke(
                FunctionName=self._function_arn,
                Payload=to_json_str(payload),
                InvocationType="RequestResponse",
                **({"Qualifier": qualifier} if qualifier else {}),
            )
        except (BotoCoreError, ClientError) as error:
            raise InvocationNotDelivered(str(error)) from error
        body = result["Payload"].read()
        try:
            response = json.loads(body) if body else None
        except ValueError:
            response = body.decode(errors="replace")
        if result.get("FunctionError"):
            LOG.debug("function %s failed: %s", self._function_arn, response)
        return bool(result.get("FunctionError")), response

    def _send_failure_record(self, failure_record: dict[str, Any]) -> None:
        """To the mapping's on-failure destination, as LocalStack's ``send_events_to_dlq`` sends."""
        destination = (self.stream_parameters.get("DeadLetterConfig") or {}).get("Arn")
        if not destination:
            return
        service = parse_arn(destination)["service"]
        body = json.dumps(failure_record)
        if service == "sqs":
            get_internal_client(destination).send_message(QueueUrl=get_queue_url(destination), MessageBody=body)
        elif service == "sns":
            get_internal_client(destination).publish(TopicArn=destination, Message=body)
        else:
            raise ValueError(f"on-failure destination {destination} is not an SQS queue or SNS topic")

    def close(self) -> None:
        super().close()
        for delivery in self.deliveries.values():
            delivery.close()
