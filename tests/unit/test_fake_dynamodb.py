"""The stream model's in-memory DynamoDB answers exactly as moto does, for every write the aggregators make.

The same random sequences of aggregate writes (the shipped store's, with its conditions,
pruning and refusals, and the previous design's) run against moto and against the fake;
every outcome and every item must be identical. What the model proves then rests on
DynamoDB's semantics as moto implements them, not on the fake's.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aggregate_store import AggregateStore, WatermarkRetention
from delivery import ShardRef
from download_records import AggregateKey, Schema, pad_sequence
from tests.stream_model.designs import TABLE, PreviousDesign
from tests.stream_model.fake_dynamodb import FakeDynamoDB
from tests.unit.conftest import create_table
from window_state import Segment

STREAMS = [
    "arn:aws:dynamodb:us-east-1:000000000000:table/model-downloads/stream/2018-01-01T00:00:00.000",
    "arn:aws:dynamodb:us-east-1:000000000000:table/model-downloads/stream/2019-06-01T00:00:00.000",
]
RETENTION = WatermarkRetention(maximum_record_age_seconds=60, window_seconds=10)


@st.composite
def segments(draw: st.DrawFn) -> list[Segment]:
    """One to three ascending segments of one shard, as a window state can carry them."""
    bounds = sorted(draw(st.lists(st.integers(1, 60), min_size=2, max_size=6, unique=True)))
    if len(bounds) % 2:
        bounds = bounds[:-1]
    result = []
    for low, high in zip(bounds[::2], bounds[1::2], strict=True):
        exact = draw(st.booleans())
        sequences = tuple(pad_sequence(str(n)) for n in range(low, high + 1)) if exact else None
        created = draw(st.integers(900, 1100))
        result.append(
            Segment(
                count=high - low + 1 if exact else draw(st.integers(1, 5)),
                low=pad_sequence(str(low)),
                high=pad_sequence(str(high)),
                low_created=created,
                high_created=created + draw(st.integers(0, 30)),
                attempted=draw(st.booleans()),
                sequences=sequences,
            )
        )
    return result


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["song1", "song2"]),
        st.sampled_from(STREAMS),
        st.sampled_from(["shardId-1", "shardId-2"]),
        segments(),
        st.integers(0, 400),
    ),
    min_size=1,
    max_size=12,
)
LEGACY_COUNTS = st.fixed_dictionaries({}, optional={"song1": st.integers(0, 9), "song2": st.integers(0, 9)})
"""Aggregates written before the index order existed: a count, no LeaderboardOrder."""


def run_store(client: Any, operations: list[Any], legacy: dict[str, int], shards: int) -> list[Any]:
    """Each operation's outcome (or error code) with the clock moved forward between them."""
    for song, count in legacy.items():
        client.update_item(
            TableName=TABLE,
            Key={"songID": {"S": song}, "SK": {"S": "2018-01"}},
            UpdateExpression="SET #month = :month, #count = :count",
            ExpressionAttributeNames={"#month": "Month", "#count": "DownloadCount"},
            ExpressionAttributeValues={":month": {"S": "2018-01"}, ":count": {"N": str(count)}},
        )
    clock = {"now": 1000.0}
    store = AggregateStore(client, TABLE, Schema(), RETENTION, clock=lambda: clock["now"], leaderboard_shards=shards)
    outcomes = []
    for song, stream, shard, segment_list, advance in operations:
        clock["now"] += advance
        try:
            outcome = store.apply(AggregateKey(song, "2018-01"), ShardRef(stream, shard), segment_list)
            outcomes.append(
                (
                    outcome.added,
                    outcome.already_applied,
                    outcome.writes,
                    len(outcome.refused),
                    outcome.pruned_watermarks,
                    outcome.previous_stream_labels,
                )
            )
        except ClientError as error:
            outcomes.append(error.response["Error"]["Code"])
        except Exception as error:  # the store's own refusals: inconsistency, contention
            outcomes.append(type(error).__name__)
    return outcomes


def items_of(client: Any) -> dict[str, Any]:
    result = {}
    for song in ("song1", "song2"):
        item = client.get_item(TableName=TABLE, Key={"songID": {"S": song}, "SK": {"S": "2018-01"}}).get("Item")
        result[song] = item
    return result


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS, legacy=LEGACY_COUNTS, shards=st.sampled_from([1, 4]))
def test_the_shipped_store_behaves_identically_on_moto_and_on_the_fake(
    aws: None, operations: list[Any], legacy: dict[str, int], shards: int
) -> None:
    # given the same random writes of the shipped store, over aggregates some of which predate the index order
    moto_client = create_table(TABLE, fresh=True)
    fake = FakeDynamoDB()
    # when they run against moto and against the fake
    on_moto = run_store(moto_client, operations, legacy, shards)
    on_fake = run_store(fake, operations, legacy, shards)
    # then every outcome and every resulting item is the same
    assert on_fake == on_moto
    assert items_of(fake) == items_of(moto_client)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(
        st.lists(st.integers(1, 40), min_size=1, max_size=6, unique=True).map(sorted), min_size=1, max_size=8
    )
)
def test_the_previous_design_behaves_identically_on_moto_and_on_the_fake(aws: None, batches: list[list[int]]) -> None:
    moto_client = create_table(TABLE, fresh=True)
    fake = FakeDynamoDB()
    key = AggregateKey("song1", "2018-01")
    for client in (moto_client, fake):
        design = PreviousDesign(client)
        for batch in batches:
            design._apply(key, [pad_sequence(str(n)) for n in batch])
    assert items_of(fake) == items_of(moto_client)
