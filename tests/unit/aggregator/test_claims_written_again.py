"""Watermark mode with backfill_claims: a download key deleted and written again (another month) is counted once, as
its claim was first made, and the second write is reported naming ledger mode, never counted silently in both months
or left silently in the old one."""

from __future__ import annotations

from typing import Any

from leaderboard_core.claims import BACKFILL, CLAIM_KEY, CLAIM_OWNER, claim_key
from tests.unit.aggregator.conftest import CLAIMS
from tests.unit.aggregator.handler_on_moto import Deployed
from tests.unit.conftest import TABLE, FakeLambdaContext, count_of

KEY = {"songID": {"S": "song1"}, "SK": {"S": "song1-d0"}}


def rewrite_in_february(deployed: Deployed) -> None:
    deployed.dynamodb.delete_item(TableName=TABLE, Key=KEY)
    deployed.write("song1", 1, timestamp="2018-02-15T10:00:00Z")


def refusals(deployed: Deployed) -> list[dict[str, Any]]:
    return [message for message in deployed.failure_messages() if message["kind"] == "refused_record"]


def test_a_key_the_stream_claimed_first_written_again_in_another_month_is_reported_not_counted_twice(
    claiming: Deployed, lambda_context: FakeLambdaContext
) -> None:
    # given a January download the stream claimed and counted
    claiming.write("song1", 1)
    claiming.invoke(claiming.window_event(claiming.stream_records()), lambda_context)
    # when it is deleted and written again under the same key in February, and read (and read again by a retry)
    rewrite_in_february(claiming)
    records = claiming.stream_records()
    claiming.invoke(claiming.direct_event(records), lambda_context)
    claiming.invoke(claiming.window_event(records), lambda_context)
    # then January keeps its one count, February counts nothing, and the second write is reported once, naming its
    # board and ledger mode
    assert count_of(claiming.dynamodb, "song1", "2018-01") == 1
    assert count_of(claiming.dynamodb, "song1", "2018-02") is None
    reported = refusals(claiming)
    assert [(message["entityId"], message["board"]) for message in reported] == [("song1", "2018-02")]
    assert "ledger = true" in reported[0]["reason"]


def test_a_key_the_backfill_claimed_first_written_again_in_another_month_is_reported(
    claiming: Deployed, lambda_context: FakeLambdaContext
) -> None:
    # given a January download on the stream that a backfill claimed (and counted) before the stream read it
    claiming.write("song1", 1)
    claiming.dynamodb.put_item(TableName=CLAIMS, Item={CLAIM_KEY: {"S": claim_key(KEY)}, CLAIM_OWNER: {"S": BACKFILL}})
    # when it is deleted and written again in February, and the stream reads all of it
    rewrite_in_february(claiming)
    claiming.invoke(claiming.direct_event(claiming.stream_records()), lambda_context)
    # then the stream counts neither write (the backfill's claim), and the February write is reported: the item now
    # says February, which the backfill's count does not
    assert count_of(claiming.dynamodb, "song1", "2018-01") is None
    assert count_of(claiming.dynamodb, "song1", "2018-02") is None
    reported = refusals(claiming)
    assert [(message["entityId"], message["board"]) for message in reported] == [("song1", "2018-02")]
    assert "ledger = true" in reported[0]["reason"]


def test_a_retry_of_the_first_write_is_no_second_write(claiming: Deployed, lambda_context: FakeLambdaContext) -> None:
    # given three downloads counted, their claims made
    claiming.write("song1", 3)
    records = claiming.stream_records()
    claiming.invoke(claiming.direct_event(records), lambda_context)
    # when the same records are read again by a stale reader and delivered again
    claiming.invoke(claiming.window_event(records), lambda_context)
    # then nothing is reported and each counts once
    assert count_of(claiming.dynamodb, "song1", "2018-01") == 3
    assert refusals(claiming) == []
