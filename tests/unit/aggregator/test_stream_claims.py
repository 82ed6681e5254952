"""While a backfill may run (CLAIMS_TABLE_NAME), the aggregator claims each download before counting it, and leaves
the downloads a backfill claimed first to the backfill: each download is counted by exactly one of them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.exceptions import ClientError

from download_records import parse_record
from leaderboard_core.claims import BACKFILL, CLAIM_KEY, CLAIM_OWNER, STREAM, claim_key, stream_claim
from stream_claims import StreamClaims
from tests.unit.aggregator.conftest import CLAIMS
from tests.unit.aggregator.handler_on_moto import Deployed, client_error
from tests.unit.conftest import FakeLambdaContext, count_of
from two_readers import AggregatesNotWritten

MONTH = "2018-01"


def download_key(song: str, number: int) -> dict[str, Any]:
    return {"songID": {"S": song}, "SK": {"S": f"{song}-d{number}"}}


def owners(dynamodb: Any, song: str, numbers: range) -> dict[int, str | None]:
    """Who claimed each download, read from the claims table."""
    found = {}
    for number in numbers:
        item = dynamodb.get_item(TableName=CLAIMS, Key={CLAIM_KEY: {"S": claim_key(download_key(song, number))}})
        found[number] = ((item.get("Item") or {}).get(CLAIM_OWNER) or {}).get("S")
    return found


class FailingClaims:
    """The DynamoDB client as the claims see it, throttled on the claims of some downloads, the first time only."""

    def __init__(self, client: Any, failing: set[str]) -> None:
        self._client = client
        self.failing = set(failing)

    def update_item(self, **parameters: Any) -> Any:
        claim = parameters["Key"][CLAIM_KEY]["S"]
        if claim in self.failing:
            self.failing.discard(claim)
            raise client_error("ProvisionedThroughputExceededException", "UpdateItem")
        return self._client.update_item(**parameters)


def claim_as(dynamodb: Any, owner: str, key: dict[str, Any]) -> None:
    dynamodb.put_item(TableName=CLAIMS, Item={CLAIM_KEY: {"S": claim_key(key)}, CLAIM_OWNER: {"S": owner}})


def test_downloads_a_backfill_claimed_first_are_left_to_it(
    claiming: Deployed, lambda_context: FakeLambdaContext
) -> None:
    # given five downloads on the stream, two of which a backfill already claimed (and counted)
    claiming.write("song1", 5)
    for number in (1, 3):
        claim_as(claiming.dynamodb, BACKFILL, download_key("song1", number))
    # when the aggregator counts the shard, and a retry reads it again
    response = claiming.invoke(claiming.direct_event(claiming.stream_records()), lambda_context)
    claiming.invoke(claiming.window_event(claiming.stream_records()), lambda_context)
    # then it counts the three others, and each download has one owner: the stream, or the backfill that was first
    assert count_of(claiming.dynamodb, "song1", MONTH) == 3
    assert owners(claiming.dynamodb, "song1", range(5)) == {0: STREAM, 1: BACKFILL, 2: STREAM, 3: BACKFILL, 4: STREAM}
    assert response["summary"]["counted_by_backfill"] == 2


def test_a_retry_counts_the_downloads_its_earlier_attempt_claimed_once(
    claiming: Deployed, lambda_context: FakeLambdaContext
) -> None:
    # given three downloads an earlier attempt claimed for the stream (as its claim names each: by its record) before
    # it died, having counted none
    claiming.write("song1", 3)
    records = claiming.stream_records()
    for record in records:
        claiming.dynamodb.update_item(**stream_claim(CLAIMS, record["dynamodb"]["Keys"], record["eventID"]))
    event = claiming.window_event(records)
    # when the batch is delivered, and then delivered again (a retry)
    claiming.invoke(event, lambda_context)
    claiming.invoke(event, lambda_context)
    # then the claims it holds are its own: every download counted, once
    assert count_of(claiming.dynamodb, "song1", MONTH) == 3


def test_a_download_whose_claim_fails_waits_below_the_checkpoint_and_is_counted_later(
    claiming: Deployed, lambda_context: FakeLambdaContext
) -> None:
    # given five downloads, and claims throttled the first time for the third
    claiming.write("song1", 5)
    third = claim_key(download_key("song1", 2))
    failing = FailingClaims(claiming.dynamodb, {third})
    claiming.use_claims(CLAIMS, failing)
    records = claiming.stream_records()
    # when a direct invocation asks for the shard through its last record
    with pytest.raises(AggregatesNotWritten):
        claiming.invoke(claiming.direct_event(records), lambda_context)
    # then neither the third nor anything after it is counted (an aggregate's watermark would pass it), and the
    # invocation says it did not get there: the checkpoint stays below the third
    assert count_of(claiming.dynamodb, "song1", MONTH) == 2
    checkpoint = claiming.checkpoint()
    assert checkpoint is None or int(checkpoint) < int(records[2]["dynamodb"]["SequenceNumber"])
    # when the next batch reads the shard again, then it is counted, and the others are not counted twice
    claiming.invoke(claiming.window_event(records), lambda_context)
    assert count_of(claiming.dynamodb, "song1", MONTH) == 5
    assert set(owners(claiming.dynamodb, "song1", range(5)).values()) == {STREAM}


def test_without_a_claims_table_nothing_is_claimed(deployed: Deployed, lambda_context: FakeLambdaContext) -> None:
    # given the aggregator as deployed without backfill_claims
    assert deployed.dependencies.claims is None
    deployed.write("song1", 2)
    # when it counts the shard, then it counts every download, and writes to no claims table (there is none)
    deployed.invoke(deployed.window_event(deployed.stream_records()), lambda_context)
    assert count_of(deployed.dynamodb, "song1", MONTH) == 2
    with pytest.raises(ClientError):
        deployed.dynamodb.describe_table(TableName=CLAIMS)


class ConflictingOnce:
    """The aggregates' client as a backfill's transaction on the same aggregate makes it: the first update is refused
    with TransactionConflictException (DynamoDB Developer Guide, *Transaction conflict handling*), not applied."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.conflicts = 0

    def update_item(self, **parameters: Any) -> Any:
        if self.conflicts == 0:
            self.conflicts += 1
            raise client_error("TransactionConflictException", "UpdateItem")
        return self._client.update_item(**parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_an_update_refused_by_a_backfills_transaction_is_tried_again_at_once(
    claiming: Deployed, lambda_context: FakeLambdaContext
) -> None:
    # given three downloads, and the first aggregate update meeting a backfill's transaction on the same aggregate
    claiming.write("song1", 3)
    conflicting = ConflictingOnce(claiming.dynamodb)
    claiming.use_store(conflicting)
    # when a direct invocation counts the shard through its last record
    response = claiming.invoke(claiming.direct_event(claiming.stream_records()), lambda_context)
    # then it got there in the same invocation: the refused update was read again and written, every download once
    assert conflicting.conflicts == 1
    assert response["reachedBound"] is True
    assert count_of(claiming.dynamodb, "song1", MONTH) == 3


def test_no_claim_starts_once_the_invocation_is_nearly_out_of_time(claiming: Deployed) -> None:
    # given five downloads read from the shard, and the invocation's time nearly up after two claims
    claiming.write("song1", 5)
    downloads = [parse_record(record, claiming.settings.schema) for record in claiming.stream_records()]
    started: list[str] = []

    class Recording:
        def update_item(self, **parameters: Any) -> Any:
            started.append(parameters["Key"][CLAIM_KEY]["S"])
            return claiming.dynamodb.update_item(**parameters)

    claims = StreamClaims(Recording(), CLAIMS, ThreadPoolExecutor(max_workers=1))
    # when they are claimed
    outcome = claims.sort(downloads, late=lambda: len(started) >= 2)  # type: ignore[arg-type]
    # then the first two are claimed for the stream, and no claim started for the others: they wait, unclaimed
    assert [len(outcome.ours), len(outcome.backfilled), len(outcome.unclaimed)] == [2, 0, 3]
    assert len(started) == 2
    assert owners(claiming.dynamodb, "song1", range(5)) == {0: STREAM, 1: STREAM, 2: None, 3: None, 4: None}
