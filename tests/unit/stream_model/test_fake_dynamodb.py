"""The stream model's in-memory DynamoDB answers exactly as moto does, for every write the designs make.

The same random sequences of writes (the shipped store's, with its progress table, pruning,
transactions and recount fences; the previous design's; and raw TransactWriteItems of
ConditionCheck and Update across two tables) run against moto and against the fake; every
outcome and every item must be identical. What the model proves then rests on DynamoDB's
semantics as moto implements them, not on the fake's.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aggregate_store import AggregateStore
from aggregate_writes import Contribution
from delivery import ShardRef
from download_records import AggregateKey, Schema
from leaderboard_core.bookkeeping import pad_sequence
from shard_progress import ProgressStore
from tests.property_examples import examples
from tests.stream_model.environment import TABLE as MODEL_TABLE
from tests.stream_model.fake_dynamodb import FakeDynamoDB
from tests.stream_model.naive_designs import PreviousDesign
from tests.unit.conftest import PROGRESS_TABLE, TABLE, create_progress_table, create_table

STREAMS = [
    "arn:aws:dynamodb:us-east-1:000000000000:table/test-downloads/stream/2018-01-01T00:00:00.000",
    "arn:aws:dynamodb:us-east-1:000000000000:table/test-downloads/stream/2019-06-01T00:00:00.000",
]
SHARDS = [ShardRef(stream, shard) for stream in STREAMS for shard in ("shardId-1", "shardId-2")]
SETTLE = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def contributions(draw: st.DrawFn) -> list[Contribution]:
    """One shard's records of one aggregate in a contiguous range, ascending, as the shipped reader gives them."""
    sequences = sorted(draw(st.lists(st.integers(1, 60), min_size=1, max_size=5, unique=True)))
    created = draw(st.integers(900, 1100))
    return [Contribution(pad_sequence(str(n)), created + index) for index, n in enumerate(sequences)]


APPLY = st.tuples(
    st.just("apply"), st.sampled_from(["song1", "song2"]), st.integers(0, 3), contributions(), st.integers(0, 4000)
)
ADVANCE = st.tuples(st.just("advance"), st.integers(0, 3), st.integers(1, 60), st.booleans(), st.integers(0, 4000))
FENCE = st.tuples(st.just("fence"), st.sampled_from(["song1", "song2"]), st.integers(900, 1100))
OPERATIONS = st.lists(st.one_of(APPLY, APPLY, ADVANCE, FENCE), min_size=1, max_size=14)
LEGACY_COUNTS = st.fixed_dictionaries({}, optional={"song1": st.integers(0, 9), "song2": st.integers(0, 9)})
"""Aggregates written before the index order existed: a count, no LeaderboardOrder."""


def aggregate_key(song: str) -> dict[str, Any]:
    return {"songID": {"S": song}, "SK": {"S": "2018-01"}}


def run_store(client: Any, operations: list[Any], legacy: dict[str, int], shards: int) -> list[Any]:
    """Each operation's outcome (or error code), with the clock moved forward between them."""
    for song, count in legacy.items():
        client.update_item(
            TableName=TABLE,
            Key=aggregate_key(song),
            UpdateExpression="SET #month = :month, #count = :count",
            ExpressionAttributeNames={"#month": "Month", "#count": "DownloadCount"},
            ExpressionAttributeValues={":month": {"S": "2018-01"}, ":count": {"N": str(count)}},
        )
    clock = {"now": 1000.0}
    progress = ProgressStore(client, PROGRESS_TABLE, clock=lambda: clock["now"])
    store = AggregateStore(client, TABLE, Schema(), progress, clock=lambda: clock["now"], leaderboard_shards=shards)
    outcomes: list[Any] = []
    for operation in operations:
        try:
            if operation[0] == "apply":
                _, song, shard, contributed, advance = operation
                clock["now"] += advance
                outcome = store.apply(AggregateKey(song, "2018-01"), SHARDS[shard], contributed)
                outcomes.append(
                    (outcome.added, outcome.already_applied, outcome.writes, outcome.transactions, len(outcome.refused))
                )
            elif operation[0] == "advance":
                _, shard, sequence, ended, advance = operation
                clock["now"] += advance
                outcomes.append(progress.advance(SHARDS[shard], pad_sequence(str(sequence)), 1000, ended))
            else:
                _, song, through = operation
                client.update_item(
                    TableName=TABLE,
                    Key=aggregate_key(song),
                    UpdateExpression="SET RecountedThrough = :through",
                    ConditionExpression="attribute_not_exists(RecountedThrough) OR RecountedThrough < :through",
                    ExpressionAttributeValues={":through": {"N": str(through)}},
                )
                outcomes.append("fenced")
        except ClientError as error:
            outcomes.append(error.response["Error"]["Code"])
        except Exception as error:  # the store's own refusals: contention, corrupt watermarks
            outcomes.append(type(error).__name__)
    return outcomes


def items_of(client: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for song in ("song1", "song2"):
        result[song] = client.get_item(TableName=TABLE, Key=aggregate_key(song)).get("Item")
    for shard in SHARDS:
        key = {"ShardKey": {"S": f"{shard.stream_arn}|{shard.shard_id}"}}
        progress = client.get_item(TableName=PROGRESS_TABLE, Key=key).get("Item")
        result[shard.shard_id + shard.stream_arn[-6:]] = progress
    return result


def fresh_moto() -> Any:
    client = create_table(TABLE, fresh=True)
    if PROGRESS_TABLE in client.list_tables()["TableNames"]:
        client.delete_table(TableName=PROGRESS_TABLE)
    create_progress_table()
    return client


@SETTLE
@given(operations=OPERATIONS, legacy=LEGACY_COUNTS, shards=st.sampled_from([1, 4]))
def test_the_shipped_store_behaves_identically_on_moto_and_on_the_fake(
    aws: None, operations: list[Any], legacy: dict[str, int], shards: int
) -> None:
    # given the same random writes of the shipped store and its progress table, fences and legacy aggregates
    moto_client = fresh_moto()
    fake = FakeDynamoDB()
    # when they run against moto and against the fake
    on_moto = run_store(moto_client, operations, legacy, shards)
    on_fake = run_store(fake, operations, legacy, shards)
    # then every outcome and every resulting item is the same
    assert on_fake == on_moto
    assert items_of(fake) == items_of(moto_client)


CONDITIONS = st.sampled_from(
    [
        None,
        "attribute_not_exists(#a)",
        "attribute_exists(#a)",
        "attribute_not_exists(#a) OR #a < :v",
        "#a = :v",
        "#a <> :v AND attribute_exists(#b)",
        "NOT (#a >= :v)",
    ]
)
ACTION = st.tuples(
    st.sampled_from(["ConditionCheck", "Update"]),
    st.sampled_from([(TABLE, "song1"), (TABLE, "song2"), (PROGRESS_TABLE, "p1"), (PROGRESS_TABLE, "p2")]),
    CONDITIONS,
    st.integers(1, 5),
    st.sampled_from(["ALL_OLD", "NONE", None]),
)
TRANSACTIONS = st.lists(
    st.lists(ACTION, min_size=1, max_size=3, unique_by=lambda action: action[1]), min_size=1, max_size=6
)


def item_key(table: str, name: str) -> dict[str, Any]:
    return aggregate_key(name) if table == TABLE else {"ShardKey": {"S": name}}


def transaction(actions: list[Any]) -> list[dict[str, Any]]:
    entries = []
    for kind, (table, name), condition, value, returned in actions:
        used = condition or ""
        action: dict[str, Any] = {"TableName": table, "Key": item_key(table, name)}
        names = {key: attribute for key, attribute in (("#a", "A"), ("#b", "B")) if key in used}
        values = {":v": {"S": str(value)}} if ":v" in used else {}
        if condition:
            action["ConditionExpression"] = condition
        if kind == "Update":
            action["UpdateExpression"] = "SET #a = :new, #b = :new"
            names.update({"#a": "A", "#b": "B"})
            values[":new"] = {"S": str(value + 1)}
        elif not condition:
            action["ConditionExpression"] = "attribute_exists(#a)"
            names["#a"] = "A"
        if names:
            action["ExpressionAttributeNames"] = names
        if values:
            action["ExpressionAttributeValues"] = values
        if returned:
            action["ReturnValuesOnConditionCheckFailure"] = returned
        entries.append({kind: action})
    return entries


def run_transactions(client: Any, transactions: list[list[Any]]) -> list[Any]:
    outcomes: list[Any] = []
    for actions in transactions:
        try:
            client.transact_write_items(TransactItems=transaction(actions))
            outcomes.append("ok")
        except ClientError as error:
            reasons = [
                {key: value for key, value in reason.items() if key in ("Code", "Item")}
                for reason in error.response.get("CancellationReasons", [])
            ]
            outcomes.append((error.response["Error"]["Code"], reasons))
    return outcomes


@SETTLE
@given(transactions=TRANSACTIONS)
def test_transactions_behave_identically_on_moto_and_on_the_fake(aws: None, transactions: list[list[Any]]) -> None:
    # given random transactions of ConditionChecks and Updates across the main and the progress table
    moto_client = fresh_moto()
    fake = FakeDynamoDB()
    # when they run against moto and against the fake
    on_moto = run_transactions(moto_client, transactions)
    on_fake = run_transactions(fake, transactions)
    # then every outcome (cancellation reasons in order, items returned with ALL_OLD) and every item is the same
    assert on_fake == on_moto
    for table, name in [(TABLE, "song1"), (TABLE, "song2"), (PROGRESS_TABLE, "p1"), (PROGRESS_TABLE, "p2")]:
        key = item_key(table, name)
        assert fake.get_item(TableName=table, Key=key).get("Item") == moto_client.get_item(
            TableName=table, Key=key
        ).get("Item")


def test_a_cancelled_transaction_names_each_failed_condition_and_changes_nothing() -> None:
    # given a progress item whose checkpoint has passed, and an aggregate without a watermark
    fake = FakeDynamoDB()
    fake.update_item(
        TableName=PROGRESS_TABLE,
        Key={"ShardKey": {"S": "s"}},
        UpdateExpression="SET Checkpoint = :c",
        ExpressionAttributeValues={":c": {"S": "5"}},
    )
    check = {
        "ConditionCheck": {
            "TableName": PROGRESS_TABLE,
            "Key": {"ShardKey": {"S": "s"}},
            "ConditionExpression": "attribute_not_exists(Checkpoint) OR Checkpoint < :low",
            "ExpressionAttributeValues": {":low": {"S": "3"}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }
    update = {
        "Update": {
            "TableName": TABLE,
            "Key": aggregate_key("song1"),
            "UpdateExpression": "ADD DownloadCount :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        }
    }
    # when the transaction is attempted
    try:
        fake.transact_write_items(TransactItems=[check, update])
        raised = None
    except ClientError as error:
        raised = error.response
    # then it is cancelled with the reasons in request order, the failed check's item, and nothing written
    assert raised is not None
    assert raised["Error"]["Code"] == "TransactionCanceledException"
    assert [reason["Code"] for reason in raised["CancellationReasons"]] == ["ConditionalCheckFailed", "None"]
    assert raised["CancellationReasons"][0]["Item"]["Checkpoint"] == {"S": "5"}
    assert fake.get_item(TableName=TABLE, Key=aggregate_key("song1")) == {}


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(
        st.lists(st.integers(1, 40), min_size=1, max_size=6, unique=True).map(sorted), min_size=1, max_size=8
    )
)
def test_the_previous_design_behaves_identically_on_moto_and_on_the_fake(aws: None, batches: list[list[int]]) -> None:
    # given version 0.1's conditional writes of one aggregate, batch after batch
    moto_client = create_table(MODEL_TABLE, fresh=True)
    fake = FakeDynamoDB()
    key = {"songID": {"S": "song1"}, "SK": {"S": "2018-01"}}
    # when they run against moto and against the fake
    for client in (moto_client, fake):
        design = PreviousDesign.__new__(PreviousDesign)
        design.client = client
        for batch in batches:
            design._apply(("song1", "2018-01"), [pad_sequence(str(n)) for n in batch])
    # then the aggregate is the same
    assert fake.get_item(TableName=MODEL_TABLE, Key=key) == {
        "Item": moto_client.get_item(TableName=MODEL_TABLE, Key=key)["Item"]
    }


def run_deletes(client: Any) -> list[Any]:
    """Puts, then Deletes alone and in transactions: of an item there, of one not there, and on a failed condition."""
    outcomes: list[Any] = []
    for song in ("song1", "song2"):
        client.put_item(TableName=TABLE, Item={**aggregate_key(song), "A": {"S": "1"}})
    exists = {"ConditionExpression": "attribute_exists(#a)", "ExpressionAttributeNames": {"#a": "A"}}
    requests: list[tuple[str, dict[str, Any]]] = [
        ("transaction", {"TableName": TABLE, "Key": aggregate_key("song1")}),
        ("transaction", {"TableName": TABLE, "Key": aggregate_key("song3")}),
        ("transaction", {"TableName": TABLE, "Key": aggregate_key("song1"), **exists}),
        ("alone", {"TableName": TABLE, "Key": aggregate_key("song3"), **exists}),
        ("alone", {"TableName": TABLE, "Key": aggregate_key("song2")}),
    ]
    for how, delete in requests:
        try:
            if how == "alone":
                client.delete_item(**delete)
            else:
                client.transact_write_items(TransactItems=[{"Delete": delete}])
            outcomes.append("ok")
        except ClientError as error:
            outcomes.append(error.response["Error"]["Code"])
        outcomes.append(
            [client.get_item(TableName=TABLE, Key=aggregate_key(song)).get("Item") for song in ("song1", "song2")]
        )
    return outcomes


def test_deletes_behave_identically_on_moto_and_on_the_fake(aws: None) -> None:
    # given an item of each of two songs, on moto and on the fake
    # when Deletes run alone and in transactions, unconditioned and on a condition that fails
    on_moto = run_deletes(fresh_moto())
    on_fake = run_deletes(FakeDynamoDB())
    # then every outcome and every item is the same
    assert on_fake == on_moto
    assert "TransactionCanceledException" in on_moto
    assert "ConditionalCheckFailedException" in on_moto
