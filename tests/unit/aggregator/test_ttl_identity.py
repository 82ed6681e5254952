"""A TTL deletion the aggregator reads from the stream itself is known as TTL's, never taken back as a user's delete.

AWS: "Items that are deleted by the Time to Live process after expiration have the following fields:
Records[].userIdentity.type "Service", Records[].userIdentity.principalId "dynamodb.amazonaws.com"" (DynamoDB
Streams API, Record); GetRecords returns them under its Identity shape's names, Type and PrincipalId, as botocore
parses them, while Lambda events name them type and principalId.
"""

from __future__ import annotations

from typing import Any

from delivery import ShardRef
from download_records import Ignored, Schema, parse_record
from shard_reader import read_shard

STREAM_ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/songs/stream/2020-12-09T07:00:00.000"
SHARD = ShardRef(STREAM_ARN, "shardId-00000001607497000000-0abc1234")
RETRACTIONS = Schema(retractions=True)


def removed(sequence: int, identity: dict[str, str] | None) -> dict[str, Any]:
    """A REMOVE of a counted download, as GetRecords returns it (NEW_AND_OLD_IMAGES)."""
    keys = {"songID": {"S": "song1"}, "SK": {"S": f"download-{sequence}"}}
    image = {**keys, "UserID": {"S": "user1"}, "Timestamp": {"S": "2018-01-15T10:00:00Z"}}
    record: dict[str, Any] = {
        "eventID": str(sequence),
        "eventName": "REMOVE",
        "dynamodb": {"Keys": keys, "OldImage": image, "SequenceNumber": str(sequence), "SizeBytes": 100},
    }
    if identity is not None:
        record["userIdentity"] = identity
    return record


class OnePage:
    """A closed shard holding these records, read with botocore's field names."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records

    def get_shard_iterator(self, **_parameters: Any) -> dict[str, Any]:
        return {"ShardIterator": "start"}

    def get_records(self, **_parameters: Any) -> dict[str, Any]:
        return {"Records": self.records, "NextShardIterator": None}


def test_a_ttl_deletion_read_through_getrecords_is_ignored_and_a_users_delete_is_taken_back() -> None:
    # given a shard holding a TTL deletion and a user's delete, as GetRecords spells them
    shard = OnePage([removed(1, {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}), removed(2, None)])
    # when the aggregator reads the shard itself and classifies its records
    read = read_shard(shard, SHARD, (None, None), None, lambda _records, _bytes: True)
    parsed = [parse_record(record, RETRACTIONS) for record in read.records]
    # then the TTL deletion carries Lambda's field names and changes no count; the user's delete is a retraction
    assert read.records[0]["userIdentity"] == {"principalId": "dynamodb.amazonaws.com", "type": "Service"}
    assert "userIdentity" not in read.records[1]
    assert isinstance(parsed[0], Ignored)
    assert "TTL" in parsed[0].reason
    assert not isinstance(parsed[1], Ignored)
