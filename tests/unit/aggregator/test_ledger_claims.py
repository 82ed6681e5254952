"""The ledger's requests (leaderboard_core.claims): the backfill's Put records what it counted, the stream's claim sets
its two facts once, and what DynamoDB answers reads back as the same facts."""

from __future__ import annotations

from decimal import Decimal

import pytest

from aggregator_settings import Settings
from leaderboard_core.claims import (
    BACKFILL,
    BASE_CONTRIBUTION,
    BASE_ENTITY,
    CLAIM_OWNER,
    CLAIMS_TABLE_VARIABLE,
    LEDGER_VARIABLE,
    STREAM,
    STREAM_FROM,
    backfill_claim,
    ledger_claim,
    ledger_entry,
    stream_from,
)

KEY = {"songID": {"S": "song1"}, "SK": {"S": "song1-d1"}}
BASE_ENVIRONMENT = {
    "TABLE_NAME": "test-downloads",
    "TABLE_ARN": "arn:aws:dynamodb:us-east-1:000000000000:table/test-downloads",
    "PROGRESS_TABLE_NAME": "test-progress",
}


def test_the_backfills_claim_records_what_it_counted_only_when_told() -> None:
    # given a download the backfill counts in two boards
    # when its claim is built with and without what it counted
    plain = backfill_claim("claims", KEY)["Put"]["Item"]
    ledgered = backfill_claim("claims", KEY, "song1", {"2018-01": 1, "2018": Decimal("2.5")})["Put"]["Item"]
    # then the plain claim is the owner alone, the ledger's also the entity and the amounts per board
    assert set(plain) == {"ClaimKey", CLAIM_OWNER}
    assert ledgered[BASE_ENTITY] == {"S": "song1"}
    assert ledgered[BASE_CONTRIBUTION] == {"M": {"2018-01": {"N": "1"}, "2018": {"N": "2.5"}}}


def test_the_stream_claim_sets_owner_and_stream_from_only_where_none_is() -> None:
    # when the aggregator's ledger claim is built for a download's first record in a step
    request = ledger_claim("claims", KEY, stream_from("2018-01-01T00:00:00.000", "shardId-1", "0" * 39 + "7"))
    # then both facts are set with if_not_exists and the whole item comes back
    assert request["UpdateExpression"] == (
        "SET #owner = if_not_exists(#owner, :stream), #from = if_not_exists(#from, :first)"
    )
    assert request["ExpressionAttributeValues"][":first"] == {
        "S": "2018-01-01T00:00:00.000|shardId-1|" + "0" * 39 + "7"
    }
    assert request["ReturnValues"] == "ALL_NEW"


def test_the_ledger_item_reads_back_as_the_facts_written() -> None:
    # given a ledger item a backfill wrote and the stream then claimed
    attributes = {
        CLAIM_OWNER: {"S": BACKFILL},
        STREAM_FROM: {"S": "label|shardId-1|" + "0" * 39 + "7"},
        BASE_ENTITY: {"S": "song1"},
        BASE_CONTRIBUTION: {"M": {"2018-01": {"N": "1"}, "2018": {"N": "2.50"}}},
    }
    # when it is read from the claim's answer
    entry = ledger_entry({"Attributes": attributes})
    # then the owner, StreamFrom's parts and the Base are those written (whole amounts as int)
    assert (entry.owner, entry.stream_label, entry.shard_id, entry.sequence) == (
        BACKFILL,
        "label",
        "shardId-1",
        "0" * 39 + "7",
    )
    assert entry.base_entity == "song1"
    assert entry.base == {"2018-01": 1, "2018": Decimal("2.5")}
    assert isinstance(entry.base["2018-01"], int)
    # and an item the stream owns has no Base
    assert ledger_entry({"Attributes": {CLAIM_OWNER: {"S": STREAM}}}).base == {}


def test_ledger_mode_is_read_from_the_environment_and_implies_retractions() -> None:
    # given the aggregator's environment with LEDGER and a claims table
    environ = {**BASE_ENVIRONMENT, LEDGER_VARIABLE: "true", CLAIMS_TABLE_VARIABLE: "test-ledger"}
    # when the settings are read
    settings = Settings.from_environment(environ)
    # then ledger mode is on, its ledger the claims table, and the records are parsed as retractions parses them
    assert settings.ledger is True
    assert settings.claims_table_name == "test-ledger"
    assert settings.schema.retractions is True
    # and without LEDGER it is off, retractions as the environment says
    assert Settings.from_environment(BASE_ENVIRONMENT).ledger is False
    assert Settings.from_environment(BASE_ENVIRONMENT).schema.retractions is False


def test_ledger_mode_without_a_claims_table_is_refused_with_the_reason() -> None:
    # given LEDGER without CLAIMS_TABLE_NAME
    environ = {**BASE_ENVIRONMENT, LEDGER_VARIABLE: "true"}
    # when the settings are read, then they are refused, naming both variables
    with pytest.raises(ValueError, match="LEDGER is true but CLAIMS_TABLE_NAME is not set"):
        Settings.from_environment(environ)
