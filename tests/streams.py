"""Hand-made DynamoDB Streams records in the standard shape, shared by unit and acceptance tests."""

from __future__ import annotations

from typing import Any

TABLE_ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/test-downloads"
STREAM_ARN = f"{TABLE_ARN}/stream/2018-01-01T00:00:00.000"
SHARD_ID = "shardId-00000000000000000001-aaaaaaaa"
CREATED = 1_516_000_000


def stream_record(sequence: int | str, event_name: str, keys: dict[str, Any], image: dict[str, Any]) -> dict[str, Any]:
    return {
        "eventID": f"event-{sequence}",
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "ApproximateCreationDateTime": CREATED,
            "Keys": keys,
            "NewImage": image,
            "SequenceNumber": str(sequence).zfill(21),
            "SizeBytes": 120,
            "StreamViewType": "NEW_IMAGE",
        },
        "eventSourceARN": STREAM_ARN,
    }


def download_record(
    sequence: int | str,
    song_id: str,
    timestamp: str | None = "2018-01-15T10:00:00Z",
    download_id: str | None = None,
    event_name: str = "INSERT",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A stream record of a download; timestamp=None leaves the attribute out (a malformed download)."""
    download_id = download_id or f"download-{sequence}"
    image: dict[str, Any] = {"songID": {"S": song_id}, "SK": {"S": download_id}, "UserID": {"S": "user1"}}
    if timestamp is not None:
        image["Timestamp"] = {"S": timestamp}
    image.update(extra or {})
    return stream_record(sequence, event_name, {"songID": {"S": song_id}, "SK": {"S": download_id}}, image)


def expired_download_record(sequence: int | str, song_id: str, download_id: str | None = None) -> dict[str, Any]:
    """A download deleted by the table's TTL, as AWS documents it: a REMOVE by the DynamoDB service.

    With the NEW_IMAGE view a REMOVE carries the keys only (there is no new image); TTL deletions
    name the service in userIdentity (DynamoDB Developer Guide, "DynamoDB Streams and Time to Live").
    """
    download_id = download_id or f"download-{sequence}"
    record = stream_record(sequence, "REMOVE", {"songID": {"S": song_id}, "SK": {"S": download_id}}, {})
    del record["dynamodb"]["NewImage"]
    record["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    return record


def aggregate_record(sequence: int, song_id: str, month: str, count: int, event_name: str = "INSERT") -> dict[str, Any]:
    """A stream record of the aggregator's own write, which the filter must keep away from it."""
    image = {"songID": {"S": song_id}, "SK": {"S": month}, "Month": {"S": month}, "DownloadCount": {"N": str(count)}}
    return stream_record(sequence, event_name, {"songID": {"S": song_id}, "SK": {"S": month}}, image)


def window_event(
    records: list[dict[str, Any]],
    state: dict[str, Any] | None = None,
    final: bool = False,
    shard_id: str = SHARD_ID,
    window_start: str = "2018-01-15T07:04:00Z",
    window_end: str = "2018-01-15T07:05:00Z",
) -> dict[str, Any]:
    """A tumbling-window event, shaped as Lambda's developer guide shows it."""
    return {
        "Records": records,
        "window": {"start": window_start, "end": window_end},
        "state": state or {},
        "shardId": shard_id,
        "eventSourceARN": STREAM_ARN,
        "isFinalInvokeForWindow": final,
        "isWindowTerminatedEarly": False,
    }
