"""A shard's parent, closed, drained to its end before the shard's own records are counted: on moto's table, with a
stream client that presents moto's one shard as a closed parent, and a child holding the deletion of its download.
"""

from __future__ import annotations

import copy
from typing import Any

from shard_reader import EMPTY_PAGES_AT_THE_TIP
from stream_description import ShardFacts
from tests.unit.aggregator.handler_on_moto import Deployed
from tests.unit.conftest import count_of

CHILD = "shardId-00000002000000000000-c0ffee00"


class SplitStream:
    """moto's shard closed after its one download (DescribeStream gives it an EndingSequenceNumber), `empty` empty pages
    before it, and a child shard that holds the download's REMOVE.

    AWS, *DescribeStream*: "If both StartingSequenceNumber and EndingSequenceNumber are present, then that shard is
    closed and can no longer receive more data." *GetRecords*: "it might take multiple calls to get to a portion of the
    shard that contains stream records"; *NextShardIterator*: "If set to null, the shard has been closed and the
    requested iterator will not return any more data."
    """

    def __init__(self, streams: Any, parent: str, download: dict[str, Any], empty: int) -> None:
        self._streams = streams
        self.parent = parent
        self.end = download["dynamodb"]["SequenceNumber"]
        self.empty = empty
        removal = copy.deepcopy(download)
        removal["eventName"] = "REMOVE"
        removal["dynamodb"]["OldImage"] = removal["dynamodb"].pop("NewImage")
        removal["dynamodb"]["StreamViewType"] = "NEW_AND_OLD_IMAGES"
        removal["dynamodb"]["SequenceNumber"] = str(int(self.end) + 1000)
        self.removal = removal

    def describe_stream(self, **parameters: Any) -> Any:
        description = self._streams.describe_stream(StreamArn=parameters["StreamArn"])["StreamDescription"]
        closed = {"StartingSequenceNumber": self.end, "EndingSequenceNumber": self.end}
        child = {"StartingSequenceNumber": self.removal["dynamodb"]["SequenceNumber"]}
        description["Shards"] = [
            {"ShardId": self.parent, "SequenceNumberRange": closed},
            {"ShardId": CHILD, "ParentShardId": self.parent, "SequenceNumberRange": child},
        ]
        description.pop("LastEvaluatedShardId", None)
        return {"StreamDescription": description}

    def get_shard_iterator(self, **parameters: Any) -> Any:
        if parameters["ShardId"] == CHILD:
            passed = parameters["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER"
            return {"ShardIterator": f"child|{1 if passed else 0}"}
        answer = self._streams.get_shard_iterator(**parameters)
        return {"ShardIterator": f"parent|{self.empty}|{answer['ShardIterator']}"}

    def get_records(self, **parameters: Any) -> Any:
        iterator = parameters["ShardIterator"]
        if iterator.startswith("child|"):
            return {"Records": [self.removal][int(iterator.split("|")[1]) :], "NextShardIterator": "child|1"}
        _, left, real = iterator.split("|", 2)
        if int(left) > 0:
            return {"Records": [], "NextShardIterator": f"parent|{int(left) - 1}|{real}"}
        page = self._streams.get_records(**{**parameters, "ShardIterator": real})
        return {"Records": [r for r in page["Records"] if int(r["dynamodb"]["SequenceNumber"]) <= int(self.end)]}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams, name)


def _as_delivered(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """As a Lambda event carries it: its ARN named, its creation time a number."""
    created = record["dynamodb"]["ApproximateCreationDateTime"].timestamp()
    return {
        **record,
        "dynamodb": {**record["dynamodb"], "ApproximateCreationDateTime": created},
        "eventSourceARN": stream_arn,
    }


def test_a_closed_parent_is_read_past_a_run_of_empty_pages_before_its_childs_deletion_is_counted(
    deployed: Deployed, lambda_context: Any
) -> None:
    # given a download in a parent shard DescribeStream calls closed, behind more empty pages than an open shard's tip
    deployed.with_schema(retractions=True)
    deployed.write("song1", 1)
    iterator = deployed.streams.get_shard_iterator(
        StreamArn=deployed.stream_arn, ShardId=deployed.shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    download = deployed.streams.get_records(ShardIterator=iterator)["Records"][0]
    split = SplitStream(deployed.streams, deployed.shard_id, download, empty=EMPTY_PAGES_AT_THE_TIP + 1)
    deployed.use_streams(split)
    # when the mapping delivers the child's first window: the download's deletion
    event = deployed.window_event([_as_delivered(split.removal, deployed.stream_arn)], final=True)
    deployed.invoke({**event, "shardId": CHILD}, lambda_context)
    # then the parent's download was counted first: the count is back at 0 and no retraction is reported as uncounted
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 0
    assert [message["kind"] for message in deployed.failure_messages()] == []


def test_a_parent_this_instance_last_saw_open_is_described_again_and_read_to_its_end(
    deployed: Deployed, lambda_context: Any
) -> None:
    # given a download behind empty pages in a parent this function instance listed while it was still open (its
    # child listed already), and lineages swept since (the next sweep, which lists every shard anew, not yet due)
    deployed.with_schema(retractions=True)
    deployed.write("song1", 1)
    iterator = deployed.streams.get_shard_iterator(
        StreamArn=deployed.stream_arn, ShardId=deployed.shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    download = deployed.streams.get_records(ShardIterator=iterator)["Records"][0]
    split = SplitStream(deployed.streams, deployed.shard_id, download, empty=EMPTY_PAGES_AT_THE_TIP + 1)
    deployed.use_streams(split)
    listed = deployed.dependencies.shards
    listed[deployed.shard_id] = ShardFacts(None, download["dynamodb"]["SequenceNumber"])
    listed[CHILD] = ShardFacts(deployed.shard_id, split.removal["dynamodb"]["SequenceNumber"])
    deployed.dependencies.lineages_swept_at = deployed.dependencies.clock()
    # when, the parent closed since, the mapping delivers its child's first window: the download's deletion
    event = deployed.window_event([_as_delivered(split.removal, deployed.stream_arn)], final=True)
    deployed.invoke({**event, "shardId": CHILD}, lambda_context)
    # then the parent was read to its end first: the count is back at 0 and nothing is reported
    assert count_of(deployed.dynamodb, "song1", "2018-01") == 0
    assert [message["kind"] for message in deployed.failure_messages()] == []
