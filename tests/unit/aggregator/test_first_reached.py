"""The tie-break `first_reached`: among equal counts, the entity whose latest counted download is older lists first,
whatever the batching, the retries, the stream shards and the leaderboard shards (moto, against an oracle that parses
the timestamps itself)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import query
from aggregate_store import AggregateStore
from aggregate_writes import Contribution
from aggregator_settings import Settings
from delivery import ShardRef
from download_records import AggregateKey, Schema
from index_reads import Layout
from leaderboard_core.bookkeeping import pad_sequence
from leaderboard_core.buckets import utc_moment
from leaderboard_core.index_layout import (
    FIRST_REACHED,
    LATEST_COUNTED,
    ORDER_SCALE,
    TIE_BREAK_VARIABLE,
    instant_of,
    ranked_order,
)
from shard_progress import ProgressStore
from tests.property_examples import examples
from tests.streams import STREAM_ARN
from tests.unit.conftest import PROGRESS_TABLE, TABLE, FakeLambdaContext, create_progress_table, create_table

MONTH = "2018-01"
NOW = 1_516_000_000
ENTITIES = ["a", "b", "song1", "song2", "sång", "song10"]
TIMESTAMPS = [
    "2018-01-03T10:00:00Z",
    "2018-01-03T10:00:00.001Z",
    "2018-01-03T11:00:00+01:00",
    "2018-01-09T08:30:00.250Z",
    "2018-01-20T23:59:59.999Z",
    "2018-01-31T12:00:00",
]
"""Few instants, two of them the same instant in other offsets: many equal latest downloads as well as equal counts."""
STREAM_SHARDS = [ShardRef(STREAM_ARN, "shardId-a"), ShardRef(STREAM_ARN, "shardId-b")]

Download = tuple[str, str, int]
"""(entity, Timestamp, stream shard index)."""


def store(client: Any, shards: int) -> AggregateStore:
    progress = ProgressStore(client, PROGRESS_TABLE, clock=lambda: NOW)
    schema = Schema(tie_break=FIRST_REACHED)
    return AggregateStore(client, TABLE, schema, progress, clock=lambda: NOW, leaderboard_shards=shards)


def oracle(downloads: list[Download]) -> list[tuple[str, int]]:
    """Count descending, then the latest download's instant ascending, then the entity id: from the data alone."""
    counts: dict[str, int] = {}
    latest: dict[str, datetime] = {}
    for entity, timestamp, _ in downloads:
        text = timestamp.replace("Z", "+00:00")
        moment = datetime.fromisoformat(text)
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        counts[entity] = counts.get(entity, 0) + 1
        latest[entity] = max(latest.get(entity, moment), moment)
    ranked = sorted(counts, key=lambda entity: (-counts[entity], latest[entity], entity))
    return [(entity, counts[entity]) for entity in ranked]


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[list[Download], list[tuple[int, list[int]]]]:
    """Downloads on two stream shards, each shard's cut into batches, the batches delivered in an order that keeps each
    shard's own, with retries of batches already delivered anywhere after them."""
    downloads = draw(
        st.lists(
            st.tuples(st.sampled_from(ENTITIES), st.sampled_from(TIMESTAMPS), st.integers(0, 1)),
            min_size=1,
            max_size=30,
        )
    )
    batches: list[tuple[int, list[int]]] = []
    for shard in (0, 1):
        mine = [index for index, download in enumerate(downloads) if download[2] == shard]
        while mine:
            size = draw(st.integers(1, len(mine)))
            batches.append((shard, mine[:size]))
            mine = mine[size:]
    order = draw(st.permutations(range(len(batches))))
    by_shard: dict[int, list[int]] = {0: [], 1: []}
    for position in order:
        by_shard[batches[position][0]].append(position)
    queues = {shard: sorted(positions) for shard, positions in by_shard.items()}
    delivered: list[tuple[int, list[int]]] = []
    for position in order:
        shard = batches[position][0]
        batch = batches[queues[shard].pop(0)]
        delivered.append(batch)
        if delivered and draw(st.booleans()):
            delivered.append(draw(st.sampled_from(delivered)))
    return downloads, delivered


def deliver(client: Any, shards: int, downloads: list[Download], batch: tuple[int, list[int]]) -> None:
    """As the aggregator does: one shard's batch, grouped by aggregate, each group written once."""
    shard, indexes = batch
    groups: dict[AggregateKey, list[Contribution]] = {}
    for index in indexes:
        entity, timestamp, _ = downloads[index]
        contribution = Contribution(
            pad_sequence(str(100 + index)), NOW, download_id=f"d{index}", instant=instant_of(utc_moment(timestamp))
        )
        groups.setdefault(AggregateKey(entity, MONTH), []).append(contribution)
    for key, contributions in groups.items():
        store(client, shards).apply(key, STREAM_SHARDS[shard], contributions)


def listing(client: Any, shards: int, monkeypatch: pytest.MonkeyPatch, limit: int) -> list[tuple[str, int]]:
    """The board as the query function pages it."""
    monkeypatch.setattr(query, "_dynamodb", client)
    monkeypatch.setattr(query, "AGGREGATES_TABLE_NAME", TABLE)
    monkeypatch.setattr(query, "LAYOUT", Layout(shards))
    listed: list[tuple[str, int]] = []
    token = None
    while True:
        request: dict[str, Any] = {"month": MONTH, "limit": limit} | ({"next_token": token} if token else {})
        answer = query.lambda_handler(request, FakeLambdaContext())
        listed += [(item["songID"], item["downloadCount"]) for item in answer["items"]]
        token = answer["next_token"]
        if token is None:
            return listed


@pytest.mark.parametrize("shards", [1, 4])
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=deliveries(), limit=st.integers(1, 4))
def test_the_listing_is_the_oracles_whatever_the_batching_retries_and_shards(
    aws: None, monkeypatch: pytest.MonkeyPatch, shards: int, history: Any, limit: int
) -> None:
    # given downloads delivered in batches, in any order a stream allows, with retries of batches already written
    downloads, delivered = history
    client = create_table(fresh=True)
    if PROGRESS_TABLE not in client.list_tables()["TableNames"]:
        create_progress_table()
    # when each batch is written as the aggregator writes it
    for batch in delivered:
        deliver(client, shards, downloads, batch)
    # then the board lists as the oracle ranks the data: count, then the older latest download, then the id
    assert listing(client, shards, monkeypatch, limit) == oracle(downloads)


def test_an_older_batch_written_after_a_newer_one_leaves_the_newer_latest(dynamodb: Any) -> None:
    # given a song whose download of the 20th is counted
    newer = Contribution(pad_sequence("300"), NOW, instant=instant_of(utc_moment("2018-01-20T00:00:00Z")))
    older = Contribution(pad_sequence("200"), NOW, instant=instant_of(utc_moment("2018-01-02T00:00:00Z")))
    key = AggregateKey("song1", MONTH)
    store(dynamodb, 1).apply(key, STREAM_SHARDS[1], [newer])
    # when another shard's download of the 2nd is counted after it
    store(dynamodb, 1).apply(key, STREAM_SHARDS[0], [older])
    # then the count is 2 and the latest stays the 20th's, in the order too
    item = dynamodb.get_item(TableName=TABLE, Key={"songID": {"S": "song1"}, "SK": {"S": MONTH}})["Item"]
    assert item["DownloadCount"] == {"N": "2"}
    assert item[LATEST_COUNTED] == {"N": str(newer.instant)}
    assert item["LeaderboardOrder"] == {
        "N": str(ranked_order(2, "song1", latest=newer.instant, tie_break=FIRST_REACHED))
    }


class ReadThenRaced:
    """moto's client, except that another writer writes right after its first read."""

    def __init__(self, client: Any, other_writer: Any) -> None:
        self._client = client
        self._other_writer = other_writer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def get_item(self, **parameters: Any) -> Any:
        answer = self._client.get_item(**parameters)
        if self._other_writer is not None:
            other_writer, self._other_writer = self._other_writer, None
            other_writer()
        return answer


def test_a_write_that_raced_another_is_made_again_without_lowering_the_latest(dynamodb: Any) -> None:
    # given a song read by one writer, then written by another with a newer download
    key = AggregateKey("song1", MONTH)
    newer = Contribution(pad_sequence("300"), NOW, instant=instant_of(utc_moment("2018-01-20T00:00:00Z")))
    older = Contribution(pad_sequence("200"), NOW, instant=instant_of(utc_moment("2018-01-02T00:00:00Z")))
    slow = store(ReadThenRaced(dynamodb, lambda: store(dynamodb, 1).apply(key, STREAM_SHARDS[1], [newer])), 1)
    # when the first writer writes its older download from what it read
    outcome = slow.apply(key, STREAM_SHARDS[0], [older])
    # then its condition failed once, and it was made again from the item: both counted, the newer latest kept
    assert (outcome.added, outcome.writes) == (1, 2)
    item = dynamodb.get_item(TableName=TABLE, Key={"songID": {"S": "song1"}, "SK": {"S": MONTH}})["Item"]
    assert (item["DownloadCount"], item[LATEST_COUNTED]) == ({"N": "2"}, {"N": str(newer.instant)})


SETTINGS = {"TABLE_NAME": "t", "TABLE_ARN": "arn", "PROGRESS_TABLE_NAME": "p"}


def test_the_aggregator_reads_the_tie_break_the_module_gives_it() -> None:
    # when the aggregator reads its environment, then the tie-break is the module's, `entity` when unset
    assert Settings.from_environment({**SETTINGS, TIE_BREAK_VARIABLE: FIRST_REACHED}).schema.tie_break == FIRST_REACHED
    assert Settings.from_environment(SETTINGS).schema.tie_break == "entity"
    # and an unknown one, or first_reached with retractions (which the plan refuses), stops it before any write
    with pytest.raises(ValueError, match="not one of entity, first_reached"):
        Settings.from_environment({**SETTINGS, TIE_BREAK_VARIABLE: "oldest"})
    with pytest.raises(ValueError, match="cannot restore the previous latest"):
        Settings.from_environment({**SETTINGS, TIE_BREAK_VARIABLE: FIRST_REACHED, "RETRACTIONS": "true"})


@given(
    value=st.integers(0, 10**12 - 2),
    latest=st.integers(0, 315537897599999),
    later=st.integers(1, 10**6),
    first=st.text(min_size=1, max_size=12),
    second=st.text(min_size=1, max_size=12),
)
@settings(max_examples=examples(200))
def test_the_order_ranks_value_then_the_older_latest_then_the_id(
    value: int, latest: int, later: int, first: str, second: str
) -> None:
    # then one more download outweighs any instant and id, an older latest any id, and the id decides the rest
    assert ranked_order(value + 1, first, latest=latest + later, tie_break=FIRST_REACHED) > ranked_order(
        value, second, latest=0, tie_break=FIRST_REACHED
    )
    if latest + later < 10**15:
        assert ranked_order(value, first, latest=latest, tie_break=FIRST_REACHED) > ranked_order(
            value, second, latest=latest + later, tie_break=FIRST_REACHED
        )
    if first.encode()[:4] < second.encode()[:4]:
        assert ranked_order(value, first, latest=latest, tie_break=FIRST_REACHED) > ranked_order(
            value, second, latest=latest, tie_break=FIRST_REACHED
        )
    assert ranked_order(value, first, latest=latest, tie_break=FIRST_REACHED) // ORDER_SCALE == value
    assert len(str(ranked_order(10**12 - 1, "\0", latest=0, tie_break=FIRST_REACHED))) <= 38


@given(
    value=st.decimals(min_value=0, max_value=Decimal("999999999999.999998"), places=6),
    latest=st.integers(0, 315537897599999),
    first=st.text(min_size=1, max_size=12),
    second=st.text(min_size=1, max_size=12),
)
@settings(max_examples=examples(200))
def test_a_sums_order_ranks_value_then_the_older_latest(value: Decimal, latest: int, first: str, second: str) -> None:
    # then the sum's smallest step outweighs any instant and id, and an older latest any id
    step = Decimal("0.000001")
    assert ranked_order(value + step, first, True, latest, FIRST_REACHED) > ranked_order(
        value, second, True, 0, FIRST_REACHED
    )
    if latest > 0:
        assert ranked_order(value, first, True, latest - 1, FIRST_REACHED) > ranked_order(
            value, second, True, latest, FIRST_REACHED
        )
    assert len(str(ranked_order(Decimal("999999999999.999999"), "\0", True, 0, FIRST_REACHED))) <= 38


def test_among_lists_a_set_in_the_boards_order_under_first_reached(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given equal counts whose latest downloads differ, and an entity never downloaded
    downloads: list[Download] = [
        ("song1", "2018-01-20T00:00:00Z", 0),
        ("song2", "2018-01-05T00:00:00Z", 0),
        ("a", "2018-01-09T00:00:00Z", 1),
        ("song1", "2018-01-02T00:00:00Z", 1),
        ("song2", "2018-01-03T00:00:00Z", 1),
    ]
    deliver(dynamodb, 4, downloads, (0, [0, 1]))
    deliver(dynamodb, 4, downloads, (1, [2, 3, 4]))
    assert listing(dynamodb, 4, monkeypatch, 10) == oracle(downloads)
    # when a set of them is asked, under the competition policy
    request = {"month": MONTH, "among": ["zz-silent", "song1", "a", "song2"], "rankPolicy": "competition"}
    answer = query.lambda_handler(request, FakeLambdaContext())
    # then it lists as the board does (song2's latest download is older than song1's), the silent one last
    assert [(item["songID"], item["downloadCount"], item["rank"]) for item in answer["items"]] == [
        ("song2", 2, 1),
        ("song1", 2, 1),
        ("a", 1, 3),
        ("zz-silent", 0, 4),
    ]
    assert [song for song, _ in oracle(downloads)] == ["song2", "song1", "a"]
