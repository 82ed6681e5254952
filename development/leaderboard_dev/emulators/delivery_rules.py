"""Lambda's rules for delivering a DynamoDB stream to a function, each citing AWS's documentation: one definition for
the emulators' engine (stream_mapping.py: a faithful event source mapping of one shard) and the unit tier's stream
model (tests/stream_model/aws_delivery.py: an adversary, within what the documentation allows, over a whole stream).

What is here, both apply alike: the tumbling window a record belongs to, what a batch may hold, the event a windowed
invocation carries, whether an invocation succeeded (a function error, a window's state, a partial batch response),
when the retry quota or a record's age gives records up, and the on-failure record that names them. How deliveries
are paced, retried, split and ordered differs with the purpose and stays with each; the parity test
(tests/unit/stream_model/test_delivery_parity.py) plays one history through both.

Standard library only: LocalStack imports it, with stream_mapping, into its own interpreter (localstack.HOOK_MODULES).
"""

from __future__ import annotations

import copy
import datetime
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

LAMBDA_DDB = "Lambda Developer Guide, 'Using AWS Lambda with Amazon DynamoDB'"
LAMBDA_ERRORS = "Lambda Developer Guide, 'Retain discarded records for a DynamoDB event source in Lambda'"
LAMBDA_API = "Lambda API Reference, 'CreateEventSourceMapping'"
LAMBDA_WINDOWS = (
    "Lambda Developer Guide, 'Implementing stateful DynamoDB stream processing in Lambda' (tumbling windows)"
)
LAMBDA_BATCHING = "Lambda Developer Guide, 'How Lambda processes records from stream and queue-based event sources'"

DOCS: dict[str, tuple[str, str]] = {
    "batch-contents": (
        LAMBDA_BATCHING,
        "Lambda reads records from the event source until it has gathered a full batch, the batching window "
        "expires, or the batch reaches the payload limit of 6 MB. (BatchSize bounds the records; under tumbling "
        "windows an invocation carries records of its window only.)",
    ),
    "window-boundaries": (
        LAMBDA_WINDOWS,
        "Lambda determines tumbling window boundaries based on the time when records were inserted into the stream.",
    ),
    "window-state": (
        LAMBDA_WINDOWS,
        "with tumbling windows, you can maintain your state across invocations. ... If the response does not contain "
        "a state property, Lambda considers this a failed invocation.",
    ),
    "partial-batch": (
        LAMBDA_DDB,
        "If the batchItemFailures array contains multiple items, Lambda uses the record with the lowest sequence "
        "number as the checkpoint. Lambda then retries all records starting from that checkpoint.",
    ),
    "partial-batch-success": (
        LAMBDA_DDB,
        "Lambda treats a batch as a complete success if you return ... An empty batchItemFailure list, A null "
        "batchItemFailure list, An empty EventResponse, A null EventResponse; ... as a complete failure if you "
        "return ... An empty string itemIdentifier, A null itemIdentifier, An itemIdentifier with a bad key name.",
    ),
    "retry-quota": (
        LAMBDA_API,
        "MaximumRetryAttempts: Discard records after the specified number of retries. The default value is infinite "
        "(-1). When set to infinite (-1), failed records are retried until the record expires.",
    ),
    "record-age": (
        LAMBDA_API,
        "MaximumRecordAgeInSeconds: Discard records older than the specified age. The default value is infinite (-1).",
    ),
    "discarded-to-destination": (
        LAMBDA_ERRORS,
        "If the error handling measures fail, Lambda discards the records and continues processing batches from the "
        "stream. ... Each record sent to the destination is a JSON document with metadata about the failed "
        "invocation.",
    ),
}
"""The rules defined here, by the name the code cites them with: (where AWS says it, what it says)."""

PAYLOAD_LIMIT_BYTES = 6 * 1024 * 1024
"""batch-contents: the invocation payload's limit (6 MB, synchronous invocation)."""

Record = Mapping[str, Any]
Item = TypeVar("Item")


def iso_seconds(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_milliseconds(epoch: float) -> str:
    moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def window_start(inserted: float, seconds: int) -> int:
    """window-boundaries: the start of the tumbling window of a record inserted at `inserted` (epoch seconds), aligned
    on a multiple of the window's length since the epoch."""
    return int(inserted // seconds) * seconds


def batch_end(
    records: Sequence[Item],
    start: int,
    batch_size: int,
    window_of: Callable[[Item], int | None],
    size_of: Callable[[Item], int] = lambda _record: 0,
    payload_limit: int = PAYLOAD_LIMIT_BYTES,
) -> int:
    """batch-contents: where the batch of `records` starting at `start` ends. It holds at least one record, at most
    `batch_size`, no more than `payload_limit` bytes (`size_of`: a record's share of the payload) unless it is a
    single record, and records of one window only (`window_of`: the start of a record's window; None without one)."""
    end = start
    payload = 0
    first_window = window_of(records[start]) if start < len(records) else None
    while end < len(records):
        record = records[end]
        size = size_of(record)
        if end > start and (
            end - start >= batch_size or payload + size > payload_limit or window_of(record) != first_window
        ):
            break
        payload += size
        end += 1
    return end


def window_event(
    records: list[Any],
    start: int,
    seconds: int,
    state: Mapping[str, Any],
    shard_id: str,
    stream_arn: str,
    final: bool,
    terminated_early: bool,
) -> dict[str, Any]:
    """The event of one invocation of a tumbling window: its records, the window, the state the previous invocation
    returned (a copy), the shard, and whether it is the window's final invocation or the window ended early."""
    return {
        "Records": records,
        "window": {"start": iso_seconds(start), "end": iso_seconds(start + seconds)},
        "state": copy.deepcopy(dict(state)),
        "shardId": shard_id,
        "eventSourceARN": stream_arn,
        "isFinalInvokeForWindow": final,
        "isWindowTerminatedEarly": terminated_early,
    }


def window_state(response: Any) -> dict[str, Any] | None:
    """window-state: the state a windowed invocation's response carries; None, and the invocation failed, without."""
    state = response.get("state") if isinstance(response, dict) else None
    return state if isinstance(state, dict) else None


def reported_failures(response: Any, records: Sequence[Record]) -> list[int] | None:
    """partial-batch-success: the indexes of the records a partial batch response names; [] for a complete success,
    None for a complete failure. An identifier that names no record of the batch is a complete failure too (as in
    LocalStack; AWS does not say)."""
    if not isinstance(response, dict) or not response.get("batchItemFailures"):
        return []
    failures = response["batchItemFailures"]
    if not isinstance(failures, list):
        return None
    positions = {str(record["dynamodb"]["SequenceNumber"]): index for index, record in enumerate(records)}
    indexes: list[int] = []
    for failure in failures:
        identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        if not isinstance(identifier, str) or identifier not in positions:
            return None
        indexes.append(positions[identifier])
    return indexes


@dataclass(frozen=True)
class Outcome:
    succeeded: bool
    function_error: bool
    state: dict[str, Any] | None = None
    retry_from: int | None = None
    """partial-batch: the index of the lowest reported record; the records before it are done."""
    reported: tuple[int, ...] = ()
    """partial-batch: the indexes of every reported record."""


def judge(
    function_error: bool, response: Any, records: Sequence[Record], windowed: bool, report_batch_item_failures: bool
) -> Outcome:
    """Whether an invocation succeeded, from the function error and the response: a windowed invocation needs a state
    (window-state), and under ReportBatchItemFailures a response may fail some records (partial-batch)."""
    if function_error:
        return Outcome(succeeded=False, function_error=True)
    failed = reported_failures(response, records) if report_batch_item_failures else []
    if windowed:
        state = window_state(response)
        # AWS documents nothing about batchItemFailures beside a window's state; reported failures fail the
        # invocation, so that it is retried with the state it was given.
        if state is None or failed != []:
            return Outcome(succeeded=False, function_error=False)
        return Outcome(succeeded=True, function_error=False, state=state)
    if failed is None:
        return Outcome(succeeded=False, function_error=False)
    if failed:
        return Outcome(succeeded=False, function_error=False, retry_from=min(failed), reported=tuple(failed))
    return Outcome(succeeded=True, function_error=False)


def retries_exhausted(retries: int, maximum: int | None) -> bool:
    """retry-quota: `retries` retries of a batch exceed MaximumRetryAttempts (None or -1: infinite)."""
    return maximum is not None and maximum >= 0 and retries > maximum


def too_old(age_seconds: float, maximum: float | None) -> bool:
    """record-age: a record this old is discarded (MaximumRecordAgeInSeconds; None or -1: infinite). As old as the
    maximum is not older."""
    return maximum is not None and maximum >= 0 and age_seconds > maximum


def failure_record(
    condition: str,
    shard_id: str,
    stream_arn: str,
    first: tuple[str, float],
    last: tuple[str, float],
    batch_size: int,
    invoke_count: int,
    now: float,
    function_arn: str = "",
    function_error: bool | None = None,
) -> dict[str, Any]:
    """discarded-to-destination: the invocation record of discarded records, as the documented example has it.

    `first` and `last` are the sequence number and arrival time of the first and last record it names; `batch_size`
    how many it names. `function_error` says whether the last invocation failed with a function error (the record's
    responseContext); None leaves the response context out (no invocation, or none known).
    """
    record: dict[str, Any] = {
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "functionArn": function_arn,
            "condition": condition,
            "approximateInvokeCount": invoke_count,
        },
        "version": "1.0",
        "timestamp": iso_milliseconds(now),
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": first[0],
            "endSequenceNumber": last[0],
            "approximateArrivalOfFirstRecord": iso_seconds(first[1]),
            "approximateArrivalOfLastRecord": iso_seconds(last[1]),
            "batchSize": batch_size,
            "streamArn": stream_arn,
        },
    }
    if function_error is not None:
        record["responseContext"] = {"statusCode": 200, "executedVersion": "$LATEST"}
        if function_error:
            record["responseContext"]["functionError"] = "Unhandled"
    return record
