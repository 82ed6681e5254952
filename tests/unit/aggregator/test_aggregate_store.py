"""One conditional write per aggregate and shard, from exact lists: exact under redelivery, across shards (moto)."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import boto3
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from aggregate_store import (
    RECOUNTED_THROUGH,
    WATERMARKS_PRUNED,
    WATERMARKS_PRUNED_UNDER,
    AggregateStore,
    WatermarkContention,
)
from aggregate_writes import Contribution, watermark_value
from delivery import ShardRef
from download_records import AggregateKey, Schema
from leaderboard_core.bookkeeping import pad_sequence
from leaderboard_core.index_layout import leaderboard_partition, order_of
from shard_progress import ProgressStore
from tests.property_examples import examples
from tests.streams import STREAM_ARN, TABLE_ARN
from tests.unit.conftest import PROGRESS_TABLE, TABLE, count_of, create_progress_table, create_table

KEY = AggregateKey("song1", "2018-01")
SHARD_A = ShardRef(STREAM_ARN, "shardId-a")
SHARD_B = ShardRef(STREAM_ARN, "shardId-b")
NOW = 1_516_000_000
HOUR = 3600


def records(*sequences: int, created: int = NOW) -> list[Contribution]:
    return [Contribution(pad_sequence(str(n)), created) for n in sequences]


def store(client: Any, now: float = NOW, shards: int = 1) -> AggregateStore:
    progress = ProgressStore(client, PROGRESS_TABLE, clock=lambda: now)
    return AggregateStore(client, TABLE, Schema(), progress, clock=lambda: now, leaderboard_shards=shards)


def checkpoint(client: Any, shard: ShardRef, sequence: int, ended: bool = False) -> None:
    """The shard's progress as the aggregator keeps it: its item created when first seen, then its checkpoint raised."""
    progress = ProgressStore(client, PROGRESS_TABLE, clock=lambda: NOW)
    progress.first_seen(shard, None, None)
    progress.advance(shard, pad_sequence(str(sequence)), str(sequence), NOW, ended)


OTHERS = [ShardRef(STREAM_ARN, f"shardId-{name}") for name in "cdef"]


def fed_by_many_shards(client: Any) -> None:
    """Four more shards' watermarks on the aggregate, not yet passed by any checkpoint: with A's, more than pruning
    waits for."""
    for index, other in enumerate(OTHERS):
        store(client).apply(KEY, other, records(1000 + index))


def item(dynamodb: Any) -> dict[str, Any]:
    return dynamodb.get_item(TableName=TABLE, Key={"songID": {"S": "song1"}, "SK": {"S": "2018-01"}})["Item"]


def test_the_first_write_costs_one_update_and_records_the_shards_watermark(dynamodb: Any) -> None:
    # when three downloads of one shard are applied
    outcome = store(dynamodb).apply(KEY, SHARD_A, records(200, 205, 210))
    # then one write adds them, and the aggregate carries the shard's watermark and the month
    assert (outcome.added, outcome.already_applied, outcome.writes) == (3, 0, 1)
    stored = item(dynamodb)
    assert stored["Month"] == {"S": "2018-01"}
    assert stored["DownloadCount"] == {"N": "3"}
    assert stored[SHARD_A.watermark_name] == {"S": watermark_value(pad_sequence("210"), NOW, SHARD_A)}
    assert stored[SHARD_A.watermark_name]["S"].endswith("|2018-01-01T00:00:00.000|shardId-a")


def test_a_redelivered_list_adds_nothing(dynamodb: Any) -> None:
    store(dynamodb).apply(KEY, SHARD_A, records(200, 205, 210))
    outcome = store(dynamodb).apply(KEY, SHARD_A, records(200, 205, 210))
    assert (outcome.added, outcome.already_applied, outcome.writes) == (0, 3, 1)
    assert count_of(dynamodb, "song1", "2018-01") == 3


def test_a_longer_list_adds_exactly_the_records_above_the_watermark(dynamodb: Any) -> None:
    # given the first two downloads applied, as by an invocation whose response was lost
    store(dynamodb).apply(KEY, SHARD_A, records(200, 205))
    # when a reader with those and two newer ones writes
    outcome = store(dynamodb).apply(KEY, SHARD_A, records(200, 205, 210, 215))
    # then only the two newer ones are added, in a second, conditional write
    assert (outcome.added, outcome.already_applied, outcome.writes) == (2, 2, 2)
    assert count_of(dynamodb, "song1", "2018-01") == 4


def test_sibling_shards_of_one_song_count_independently_in_any_order(dynamodb: Any) -> None:
    # given one song split for heat: shard A holds 200 and 210, shard B 205 and 215, read at the same time
    store(dynamodb).apply(KEY, SHARD_B, records(205, 215))
    outcome = store(dynamodb).apply(KEY, SHARD_A, records(200, 210))
    # then nothing of A is taken for already applied: sequence numbers of two shards are never compared
    assert outcome.added == 2
    assert count_of(dynamodb, "song1", "2018-01") == 4


def test_a_child_shard_with_lower_sequence_numbers_still_counts(dynamodb: Any) -> None:
    store(dynamodb).apply(KEY, SHARD_A, records(900, 950))
    store(dynamodb).apply(KEY, SHARD_B, records(10, 20))
    assert count_of(dynamodb, "song1", "2018-01") == 4


def test_a_corrupt_watermark_refuses_the_records_instead_of_guessing(dynamodb: Any) -> None:
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "2018-01"},
            "DownloadCount": {"N": "7"},
            SHARD_A.watermark_name: {"S": "overwritten"},
        },
    )
    outcome = store(dynamodb).apply(KEY, SHARD_A, records(200))
    assert outcome.added == 0
    assert [(c.sequence[-3:], "overwritten" in why) for c, why in outcome.refused] == [("200", True)]
    assert count_of(dynamodb, "song1", "2018-01") == 7


def test_records_created_at_or_before_a_recount_fence_are_refused_and_later_ones_counted(dynamodb: Any) -> None:
    # given an aggregate repaired by a recount of every download created up to NOW
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "2018-01"},
            "DownloadCount": {"N": "5"},
            "LeaderboardOrder": {"N": str(order_of(5, "song1"))},
            RECOUNTED_THROUGH: {"N": str(NOW)},
        },
    )
    # when a reader brings one download created before the fence and one after
    outcome = store(dynamodb).apply(KEY, SHARD_A, [*records(200, created=NOW - 5), *records(210, created=NOW + 5)])
    # then the earlier one is refused (the recount holds it) and the later one counted
    assert outcome.added == 1
    assert [(c.sequence[-3:], "recount" in why) for c, why in outcome.refused] == [("200", True)]
    assert count_of(dynamodb, "song1", "2018-01") == 6


def test_few_watermarks_are_never_pruned(dynamodb: Any) -> None:
    # given an aggregate fed by two shards, A read to its end
    store(dynamodb).apply(KEY, SHARD_A, records(200, 210))
    checkpoint(dynamodb, SHARD_A, 210, ended=True)
    # when B writes it, then A's watermark stays: the item is small, and no later write will need a proof
    outcome = store(dynamodb).apply(KEY, SHARD_B, records(5))
    assert (outcome.pruned_watermarks, WATERMARKS_PRUNED in item(dynamodb)) == (0, False)


def test_a_watermark_is_pruned_only_once_its_shards_checkpoint_has_passed_it(dynamodb: Any) -> None:
    # given an aggregate fed by more shards than pruning waits for, and shard A's watermark an hour old
    fed_by_many_shards(dynamodb)
    old = NOW - HOUR - 100
    store(dynamodb, now=old).apply(KEY, SHARD_A, records(200, 210, created=old))
    # when shard B writes while A's checkpoint is still below the watermark, then it stays
    checkpoint(dynamodb, SHARD_A, 205)
    kept = store(dynamodb).apply(KEY, SHARD_B, records(5))
    assert (kept.pruned_watermarks, SHARD_A.watermark_name in item(dynamodb)) == (0, True)
    # when A's checkpoint has passed it, then the next write removes it and marks the aggregate pruned
    checkpoint(dynamodb, SHARD_A, 210)
    pruned = store(dynamodb).apply(KEY, SHARD_B, records(6))
    assert (pruned.pruned_watermarks, pruned.writes) == (1, 2)
    stored = item(dynamodb)
    assert SHARD_A.watermark_name not in stored
    assert stored[WATERMARKS_PRUNED] == {"N": "1"}
    assert count_of(dynamodb, "song1", "2018-01") == 8


def test_after_pruning_a_late_write_is_proven_counted_and_a_new_record_proven_uncounted(dynamodb: Any) -> None:
    # given A's watermark pruned once A's checkpoint passed 210 and A ended
    fed_by_many_shards(dynamodb)
    store(dynamodb).apply(KEY, SHARD_A, records(200, 210))
    checkpoint(dynamodb, SHARD_A, 210, ended=False)
    checkpoint(dynamodb, SHARD_A, 220, ended=True)
    store(dynamodb).apply(KEY, SHARD_B, records(5))
    assert SHARD_A.watermark_name not in item(dynamodb)
    # when a write of A's 200..210 lands late (an abandoned thread), then the checkpoint proves them counted
    late = store(dynamodb).apply(KEY, SHARD_A, records(200, 210))
    assert (late.added, late.already_applied, late.transactions) == (0, 2, 0)
    # and records of A above the checkpoint (a reader that started from it) are counted, in a transaction
    fresh = store(dynamodb).apply(KEY, SHARD_A, records(230, 240))
    assert (fresh.added, fresh.transactions) == (2, 1)
    assert count_of(dynamodb, "song1", "2018-01") == 9


def test_a_progress_table_recreated_since_pruning_vouches_for_nothing(dynamodb: Any) -> None:
    # given A's watermark pruned under the progress table's genesis
    fed_by_many_shards(dynamodb)
    store(dynamodb).apply(KEY, SHARD_A, records(200, 210))
    checkpoint(dynamodb, SHARD_A, 210, ended=True)
    store(dynamodb).apply(KEY, SHARD_B, records(5))
    # when the progress table is lost and recreated, and A is read again from its start
    for entry in dynamodb.scan(TableName=PROGRESS_TABLE)["Items"]:
        dynamodb.delete_item(TableName=PROGRESS_TABLE, Key={"ShardKey": entry["ShardKey"]})
    ProgressStore(dynamodb, PROGRESS_TABLE, clock=lambda: NOW).first_seen(SHARD_A, None, None)
    again = store(dynamodb).apply(KEY, SHARD_A, records(200, 210))
    # then nothing is added: the records are refused for a recount, never counted twice
    assert (again.added, len(again.refused)) == (0, 2)
    assert "recount" in again.refused[0][1]
    assert count_of(dynamodb, "song1", "2018-01") == 7


def test_watermarks_of_a_previous_stream_are_noticed(dynamodb: Any) -> None:
    previous = ShardRef(f"{TABLE_ARN}/stream/2017-06-01T00:00:00.000", "shardId-a")
    store(dynamodb).apply(KEY, previous, records(500))
    outcome = store(dynamodb).apply(KEY, SHARD_A, records(3))
    assert outcome.previous_stream_labels == ("2017-06-01T00:00:00.000",)
    assert count_of(dynamodb, "song1", "2018-01") == 2


def test_every_write_sets_the_index_partition_and_the_order_from_the_count(dynamodb: Any) -> None:
    # given four leaderboard shards
    sharded = store(dynamodb, shards=4)
    # when the aggregate is written twice
    sharded.apply(KEY, SHARD_A, records(200, 205))
    sharded.apply(KEY, SHARD_A, records(210))
    # then it sits in its shard's partition of the month, ordered by its count and id
    stored = item(dynamodb)
    assert stored["Month"] == {"S": leaderboard_partition("2018-01", "song1", 4)}
    assert stored["Month"]["S"].startswith("2018-01#")
    assert stored["LeaderboardOrder"] == {"N": str(order_of(3, "song1"))}


def test_an_aggregate_written_before_the_order_existed_gets_its_order_from_its_count(dynamodb: Any) -> None:
    # given an aggregate with a count of 7 and no order, as version 0.2 wrote it
    dynamodb.put_item(
        TableName=TABLE,
        Item={"songID": {"S": "song1"}, "SK": {"S": "2018-01"}, "Month": {"S": "2018-01"}, "DownloadCount": {"N": "7"}},
    )
    # when a download is added, then the first write is refused and the second sets the order outright
    outcome = store(dynamodb).apply(KEY, SHARD_A, records(200))
    assert (outcome.added, outcome.writes) == (1, 2)
    assert item(dynamodb)["LeaderboardOrder"] == {"N": str(order_of(8, "song1"))}


def test_a_new_shard_writes_an_aggregate_its_parent_pruned_without_a_transaction(dynamodb: Any) -> None:
    """docs/exactly-once.md: "A transaction only when a pruned aggregate is written again from a shard whose
    watermark was pruned (rare...)". In fact every shard that has never written the aggregate pays a
    failed UpdateItem plus a TransactWriteItems (two write units per item) once `WatermarksPruned` is set,
    i.e. every child shard (a new generation every few hours) on every aggregate whose parent was pruned.
    """
    progress = ProgressStore(dynamodb, PROGRESS_TABLE, clock=lambda: NOW)
    store = AggregateStore(dynamodb, TABLE, Schema(), progress, clock=lambda: NOW)
    parent, child, grandchild = (ShardRef(STREAM_ARN, f"shardId-{name}") for name in ("p", "c", "g"))
    store.apply(KEY, parent, [Contribution(pad_sequence("200"), NOW)])
    progress.first_seen(parent, None, None)
    progress.advance(parent, pad_sequence("200"), "200", NOW, ended=True)
    store.apply(KEY, child, [Contribution(pad_sequence("300"), NOW)])  # prunes the parent's watermark
    outcome = store.apply(KEY, grandchild, [Contribution(pad_sequence("400"), NOW)])
    assert (outcome.writes, outcome.transactions) == (1, 0)


def test_records_below_the_watermark_are_not_reported_as_refused_by_the_fence(dynamodb: Any) -> None:
    """The fence is applied before the watermark: a late or concurrent reader's already-counted records are
    reported as `refused_record` ("counted by a recount"), and `recover` recounts the aggregate for nothing."""
    progress = ProgressStore(dynamodb, PROGRESS_TABLE, clock=lambda: NOW)
    store = AggregateStore(dynamodb, TABLE, Schema(), progress, clock=lambda: NOW)
    shard = ShardRef(STREAM_ARN, "shardId-a")
    records = [Contribution(pad_sequence(str(n)), NOW - 100) for n in (200, 210)]
    store.apply(KEY, shard, records)
    dynamodb.update_item(
        TableName=TABLE,
        Key={"songID": {"S": "song1"}, "SK": {"S": "2018-01"}},
        UpdateExpression="SET #fence = :fence",
        ExpressionAttributeNames={"#fence": RECOUNTED_THROUGH},
        ExpressionAttributeValues={":fence": {"N": str(NOW)}},
    )
    late = store.apply(KEY, shard, records)
    assert (late.already_applied, late.refused) == (2, [])


NUMBER_OVERFLOW = "Number overflow. Attempting to store a number with magnitude larger than supported range"
"""What DynamoDB answers when an update's arithmetic passes 38 significant digits (UpdateItem's and
TransactWriteItems' ValidationError messages list it; it is also the message for imprecise sums)."""


class ThirtyEightDigits:
    """moto's DynamoDB with DynamoDB's number precision: a result past 38 significant digits is refused.

    AWS, *UpdateItem* (ValidationException) and *TransactWriteItems* (TransactionCanceledException,
    cancellation reason "Validation Error: Code: ValidationError Messages: ... Number overflow.
    Attempting to store a number with magnitude larger than supported range"). moto and the stream
    model's fake store the 39-digit order silently (the fake rounds it to 38 digits).
    """

    def __init__(self, client: Any, order_attribute: str = "LeaderboardOrder") -> None:
        self._client = client
        self._order = order_attribute
        self.transactions = 0

    def _too_precise(self, update: dict[str, Any]) -> bool:
        scaled = update.get("ExpressionAttributeValues", {}).get(":scaled")
        if scaled is None:
            return False
        item = self._client.get_item(TableName=update["TableName"], Key=update["Key"], ConsistentRead=True).get("Item")
        current = int(Decimal(item[self._order]["N"])) if item and self._order in item else 0
        digits = str(current + int(scaled["N"])).lstrip("-").rstrip("0")
        return len(digits) > 38

    def update_item(self, **parameters: Any) -> Any:
        if self._too_precise(parameters):
            self._check_condition(parameters)
            raise ClientError({"Error": {"Code": "ValidationException", "Message": NUMBER_OVERFLOW}}, "UpdateItem")
        return self._client.update_item(**parameters)

    def _check_condition(self, update: dict[str, Any]) -> None:
        """A failed condition answers first, with the item (which of the two DynamoDB checks first is undocumented)."""
        condition = update["ConditionExpression"]
        used = set(re.findall(r"[#:][A-Za-z0-9_]+", condition))
        check = {
            "TableName": update["TableName"],
            "Key": update["Key"],
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {k: v for k, v in update["ExpressionAttributeNames"].items() if k in used},
            "ExpressionAttributeValues": {k: v for k, v in update["ExpressionAttributeValues"].items() if k in used},
        }
        try:
            self._client.transact_write_items(TransactItems=[{"ConditionCheck": check}])
        except ClientError as error:
            item = self._client.get_item(TableName=update["TableName"], Key=update["Key"], ConsistentRead=True)
            failed = {"Code": "ConditionalCheckFailedException", "Message": "The conditional request failed"}
            raise ClientError({"Error": failed, "Item": item.get("Item", {})}, "UpdateItem") from error

    def transact_write_items(self, **parameters: Any) -> Any:
        self.transactions += 1
        actions = parameters["TransactItems"]
        if any("Update" in action and self._too_precise(action["Update"]) for action in actions):
            reasons = [
                {"Code": "ValidationError", "Message": NUMBER_OVERFLOW} if "Update" in action else {"Code": "None"}
                for action in actions
            ]
            error = {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"}
            raise ClientError({"Error": error, "CancellationReasons": reasons}, "TransactWriteItems")
        return self._client.transact_write_items(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_sum_past_38_digits_on_a_pruned_aggregate_is_refused_not_retried_for_ever(
    dynamodb: Any,
) -> None:
    """The all-time revenue board of a hot product (fed by more than four shards, so pruned) reaches 10^12.

    `_overflows` recognises DynamoDB's `ValidationException` from UpdateItem, not the same refusal
    inside a transaction (`TransactionCanceledException`, reason `ValidationError`): `_known_after`
    re-reads the item and retries the same transaction until `WatermarkContention`. The aggregate
    stays unwritten, the checkpoint waits below its record on every invocation, and every final
    invocation raises, for as long as the record is in the stream (24 hours).
    """
    # given a summed all-time board at 999,999,999,999.5 whose watermarks were pruned, and a shard never seen on it
    progress = ProgressStore(dynamodb, PROGRESS_TABLE)
    shard = ShardRef(STREAM_ARN, "shardId-00000000000000000001-00000001")
    progress.first_seen(shard, "100", None)
    key = AggregateKey("song1", "all")
    total = Decimal("999999999999.5")
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "all"},
            "Month": {"S": "all"},
            "DownloadCount": {"N": str(total)},
            "LeaderboardOrder": {"N": str(order_of(total, "song1", summed=True))},
            WATERMARKS_PRUNED: {"N": "1"},
            WATERMARKS_PRUNED_UNDER: {"S": progress.genesis()},
        },
    )
    client = ThirtyEightDigits(dynamodb)
    store = AggregateStore(client, TABLE, Schema(amount="Revenue"), progress)
    # when a download of revenue 1 from that shard is written
    try:
        refused: int | None = len(
            store.apply(key, shard, [Contribution("0" * 37 + "200", 1_516_000_000, Decimal(1))]).refused
        )
    except WatermarkContention:
        refused = None
    # then it is refused (reported, the checkpoint passes it), as the plain update refuses it, after one transaction
    # (main: WatermarkContention after 8 transactions, the aggregate unwritten and the checkpoint held below it)
    assert (refused, client.transactions) == (1, 1)


def test_a_sum_past_38_digits_on_an_unpruned_aggregate_is_refused(dynamodb: Any) -> None:
    """The same sum through the plain conditional update: refused and reported, never blocking (this holds)."""
    # given the same board, never pruned
    progress = ProgressStore(dynamodb, PROGRESS_TABLE)
    shard = ShardRef(STREAM_ARN, "shardId-00000000000000000001-00000001")
    progress.first_seen(shard, "100", None)
    total = Decimal("999999999999.5")
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "songID": {"S": "song1"},
            "SK": {"S": "all"},
            "Month": {"S": "all"},
            "DownloadCount": {"N": str(total)},
            "LeaderboardOrder": {"N": str(order_of(total, "song1", summed=True))},
        },
    )
    store = AggregateStore(ThirtyEightDigits(dynamodb), TABLE, Schema(amount="Revenue"), progress)
    # when a download of revenue 1 is written
    outcome = store.apply(
        AggregateKey("song1", "all"), shard, [Contribution("0" * 37 + "200", 1_516_000_000, Decimal(1))]
    )
    # then it is refused, to be reported
    assert len(outcome.refused) == 1


SHARDS = (ShardRef(STREAM_ARN, "shardId-a"), ShardRef(STREAM_ARN, "shardId-b"))


STEP = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 1), st.integers(1, 3)),
    st.tuples(st.just("read"), st.integers(0, 1)),
    st.tuples(st.just("catch up"), st.integers(0, 1)),
    st.tuples(st.just("write"), st.integers(0, 20)),
    st.tuples(st.just("advance"), st.integers(0, 20)),
)


class Reader:
    def __init__(self, shard: int, records: list[str]) -> None:
        self.shard = shard
        self.records = records
        self.written = False


def fresh_tables() -> Any:
    dynamodb = create_table(TABLE, fresh=True)
    if PROGRESS_TABLE in dynamodb.list_tables()["TableNames"]:
        boto3.client("dynamodb", region_name="us-east-1").delete_table(TableName=PROGRESS_TABLE)
    create_progress_table()
    return dynamodb


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=30))
def test_any_interleaving_of_readers_late_writes_and_pruning_is_exact(aws: None, steps: list[Any]) -> None:
    # given two shards of one aggregate, records two hours old, and one store and progress table
    dynamodb = fresh_tables()
    progress = ProgressStore(dynamodb, PROGRESS_TABLE, clock=lambda: NOW)
    store = AggregateStore(dynamodb, TABLE, Schema(), progress, clock=lambda: NOW)
    shard_records: list[list[str]] = [[], []]
    for shard in SHARDS:
        progress.first_seen(shard, None, None)
    readers: list[Reader] = []

    def read(shard: int) -> Reader:
        checkpoint = progress.read(SHARDS[shard]).checkpoint
        return Reader(shard, [s for s in shard_records[shard] if checkpoint is None or s > checkpoint])

    def write(reader: Reader) -> None:
        if reader.records and not reader.written:
            try:
                outcome = store.apply(KEY, SHARDS[reader.shard], [Contribution(s, NOW - 7200) for s in reader.records])
            except WatermarkContention:
                return
            for name in ("transactions", "pruned_watermarks", "already_applied"):
                if getattr(outcome, name):
                    event(name)
        reader.written = True

    # when readers read, write and advance in any order, late writes included
    for step in steps:
        if step[0] == "append":
            shard, count = step[1], step[2]
            start = len(shard_records[shard])
            shard_records[shard] += [pad_sequence(str((start + n + 1) * 10)) for n in range(count)]
        elif step[0] == "read":
            readers.append(read(step[1]))
        elif step[0] == "catch up":
            reader = read(step[1])
            write(reader)
            if reader.written and reader.records:
                progress.advance(
                    SHARDS[reader.shard], reader.records[-1], reader.records[-1].lstrip("0"), NOW - 7200, ended=False
                )
        elif step[0] == "write" and readers:
            write(readers[step[1] % len(readers)])
        elif step[0] == "advance" and readers:
            reader = readers[step[1] % len(readers)]
            if reader.written and reader.records:
                progress.advance(
                    SHARDS[reader.shard], reader.records[-1], reader.records[-1].lstrip("0"), NOW - 7200, ended=False
                )
        # then the count never exceeds what the shards hold
        assert (count_of(dynamodb, "song1", "2018-01") or 0) <= sum(map(len, shard_records))
    # and one catch-up per shard from its checkpoint makes it exact
    for shard in (0, 1):
        write(read(shard))
    assert (count_of(dynamodb, "song1", "2018-01") or 0) == sum(map(len, shard_records))
