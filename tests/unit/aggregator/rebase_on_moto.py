"""The one-reader repair (`leaderboard_tools.recover.rebase`) run on a LedgerWorld: helpers, not tests.

A LedgerWorld keeps the table's items in memory and writes only the stream; the repair reads the table, so
`rebase_world` first writes the world's items into it (the downloads beside the aggregates, as in the guide's table),
then runs the rebase with the deployment the operator tools would discover around the world's aggregator."""

from __future__ import annotations

import dataclasses
from typing import Any

from leaderboard_core.attributes import AttributeNames
from leaderboard_core.claims import claim_key
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.recover.drift import DriftReport, settle_drift
from leaderboard_tools.recover.rebase import RebaseReport, rebase
from tests.unit.aggregator.ledger_on_moto import LEDGER_TABLE, STREAM_ARN, TABLE, LedgerWorld, key_of

SINGLE_TABLE = "test-single-table"
"""A single-table design's downloads: keyed by PK alone, the song an attribute; the aggregates stay in their table."""


def deployment_of(world: LedgerWorld) -> Deployment:
    """What the operator tools discover around the world's aggregator: ledger mode, one reader per shard."""
    settings = world.deployed.settings
    schema = settings.schema
    return Deployment(
        table=TABLE,
        table_arn=settings.table_arn,
        stream_arn=STREAM_ARN,
        names=AttributeNames(
            schema.entity, schema.sort_key, schema.timestamp, schema.period, schema.count, schema.order
        ),
        leaderboard_shards=settings.leaderboard_shards,
        query_leaderboard_shards=settings.leaderboard_shards,
        query_leaderboard_shards_previous=None,
        ttl_attribute=None,
        window_seconds=60,
        failure_queue_url=world.deployed.queue_url,
        progress_table=settings.progress_table_name,
        aggregator_function="unit-test-function",
        query_function=None,
        mapping_uuid=None,
        mapping_state=None,
        periods=schema.periods,
        key_attributes=("songID", "SK"),
        sum_attribute=schema.amount,
        marker=schema.marker,
        claims_table=LEDGER_TABLE,
        retractions=True,
        ledger=True,
        stream_readers=1,
    )


def write_items(world: LedgerWorld) -> None:
    """The table holds the world's items as they are now: those written put, those deleted gone."""
    for item in world.dynamodb.scan(TableName=TABLE)["Items"]:
        if item["SK"]["S"].startswith(f"{item['songID']['S']}-d"):
            world.dynamodb.delete_item(TableName=TABLE, Key={"songID": item["songID"], "SK": item["SK"]})
    for (song, number), item in world.items.items():
        world.dynamodb.put_item(TableName=TABLE, Item={**item, **key_of(song, number)})


def rebase_world(world: LedgerWorld, dynamodb: Any = None) -> RebaseReport:
    """recover's repair in one-reader mode, on the world's table (through `dynamodb` when given)."""
    write_items(world)
    return rebase(dynamodb or world.dynamodb, deployment_of(world))


def repair_world(world: LedgerWorld, aggregates: list[tuple[str, str]]) -> tuple[RebaseReport, DriftReport]:
    """recover's whole repair in one-reader mode: the rebase, then the `aggregates` its messages name set to what the
    ledger counts in them."""
    rebased = rebase_world(world)
    return rebased, settle_drift(world.dynamodb, deployment_of(world), aggregates, settle_seconds=0)


def kept_expired(world: LedgerWorld, song: str, number: int) -> None:
    """The repair reports the key gone, and the operator, who knows Time to Live deleted it, names it expired."""
    claim = claim_key(key_of(song, number))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    assert rebase(world.dynamodb, deployment_of(world), expired=[claim]).kept_expired == 1


def single_table_deployment(world: LedgerWorld) -> Deployment:
    """The deployment the operator tools find for a single-table design: downloads keyed by PK in their own table."""
    world.dynamodb.create_table(
        TableName=SINGLE_TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
    )
    return dataclasses.replace(deployment_of(world), table=SINGLE_TABLE, aggregates_table=TABLE, key_attributes=("PK",))
