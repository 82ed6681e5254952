"""Ledger mode with one reader per shard (`stream_readers = 1`) attached to a platform's table whose stream already
feeds another team's function.

The platform's table, a single-table design keyed PK/SK (the song an attribute), holds downloads and items of
another type; an audit feed reads its stream through its own event source mapping. The module is applied with
`ledger`, `retractions` and `stream_readers = 1`: its mapping is the only steady reader it takes, retrying until the
records expire. Downloads are written, edited across months, genres and songs, deleted and written again under the
same key. Then every board equals a recount of the table's items as they are, the audit feed received every record of
the stream, and `leaderboard-tools readers` counts two readers of each shard (the module's one and the audit feed's):
exit 0. An on-failure record of a range already delivered, handed to the aggregator by `recover`, is read back and
changes nothing.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import poll_until
from leaderboard_dev.loadgen import write_items
from leaderboard_dev.observe import scan_all
from leaderboard_dev.settings import Endpoint
from tests.acceptance.conftest import stack, stored, stream_records
from tests.acceptance.test_existing_table import GENRES, MARKER, MONTHS, cli, enable_stream
from tests.acceptance.test_ledger_mode import audit_feed, recount, stream_record_ids, without_zeros

pytestmark = pytest.mark.acceptance


def download(number: int, chance: random.Random) -> dict[str, Any]:
    """A download of a single-table design: keyed by its user and a download id, its song an attribute."""
    user = f"user{chance.randrange(40)}"
    return {
        "PK": {"S": f"USER#{user}"},
        "SK": {"S": f"DOWNLOAD#{number:05d}"},
        "songID": {"S": f"song{chance.randrange(12)}"},
        "type": {"S": "DOWNLOAD"},
        "Timestamp": {"S": f"{chance.choice(MONTHS)}-{chance.randrange(1, 29):02d}T{chance.randrange(24):02d}:00:00Z"},
        "Genre": {"S": chance.choice(GENRES)},
        "UserID": {"S": user},
    }


def profile(number: int) -> dict[str, Any]:
    """An item of another type, which the module's filter leaves out."""
    return {"PK": {"S": f"USER#user{number}"}, "SK": {"S": "PROFILE"}, "type": {"S": "USER"}}


def change(
    aws: Clients, table: str, live: list[dict[str, Any]], deleted: list[dict[str, Any]], chance: random.Random
) -> str:
    """One of the platform's writes: an edit across months, genres or songs, a deletion, or a deleted key written
    again."""
    kinds = ["edit month", "edit genre", "edit song", "delete", "put again"]
    kind = chance.choice(kinds if deleted else ["delete"])
    if kind == "put again":
        item = deleted.pop(chance.randrange(len(deleted)))
        item = {**item, "Genre": {"S": chance.choice(GENRES)}}
        write_items(aws.dynamodb, table, [item])
        live.append(item)
        return kind
    item = live.pop(chance.randrange(len(live)))
    if kind == "delete":
        aws.dynamodb.delete_item(TableName=table, Key={"PK": item["PK"], "SK": item["SK"]})
        deleted.append(item)
        return kind
    if kind == "edit month":
        month = next(m for m in MONTHS if m != item["Timestamp"]["S"][:7])
        item = {**item, "Timestamp": {"S": month + item["Timestamp"]["S"][7:]}}
    elif kind == "edit song":
        item = {**item, "songID": {"S": f"song{(int(item['songID']['S'].removeprefix('song')) + 1) % 12}"}}
    else:
        item = {**item, "Genre": {"S": chance.choice([g for g in GENRES if g != item["Genre"]["S"]])}}
    write_items(aws.dynamodb, table, [item])
    live.append(item)
    return kind


def test_one_reader_per_shard_counts_edits_and_deletions_exactly_beside_another_consumer(
    endpoint: Endpoint, aws: Clients, platform_table: str
) -> None:
    # given a platform's table whose stream an audit feed reads, and the module attached to it in ledger mode with
    # one reader per shard: its mapping retries a failing batch until the records expire, bisected
    table = platform_table
    enable_stream(aws, table)
    variables = {
        "source_table_name": table,
        "source_item_filter": MARKER,
        "category_attribute_name": "Genre",
        "retractions": True,
        "ledger": True,
        "stream_readers": 1,
    }
    with audit_feed(aws, endpoint, table) as audit, stack(endpoint, "onereader", **variables) as (_, outputs):
        environment = aws.lambda_.get_function_configuration(FunctionName=outputs["aggregator_function_name"])[
            "Environment"
        ]["Variables"]
        assert (environment["STREAM_READERS"], environment["LEDGER"]) == ("1", "true")
        mapping = aws.lambda_.get_event_source_mapping(UUID=outputs["aggregator_event_source_mapping_uuid"])
        assert (mapping["MaximumRetryAttempts"], mapping["MaximumRecordAgeInSeconds"]) == (-1, -1)
        assert mapping["BisectBatchOnFunctionError"] is True
        # when 400 downloads (keyed by user, their song an attribute) and 30 items of another type are written, then
        # 300 changes: edits across months, genres and songs, deletions, and deleted keys written again
        chance = random.Random(41)
        live = [download(number, chance) for number in range(400)]
        write_items(aws.dynamodb, table, live + [profile(number) for number in range(30)])
        deleted: list[dict[str, Any]] = []
        kinds = [change(aws, table, live, deleted, chance) for _ in range(300)]
        assert {kind: kinds.count(kind) > 10 for kind in set(kinds)} == dict.fromkeys(
            ("edit month", "edit genre", "edit song", "delete", "put again"), True
        )
        # then every board, month and genre, equals a recount of the table's items as they are now
        truth = recount(aws, table)
        poll_until(
            lambda: without_zeros(stored(aws, outputs["aggregates_table_name"])) == truth,
            timeout=300,
            describe="the boards equal to the recount of the items",
        )
        # and the audit feed received every record of the stream
        stream_ids = stream_record_ids(endpoint, outputs["table_stream_arn"])
        poll_until(
            lambda: {item["id"]["S"] for item in scan_all(aws, TableName=audit)} == stream_ids,
            timeout=300,
            describe="the audit feed's records",
        )
        # and the stream has two readers of each shard, the module's mapping and the audit feed's: within the limit
        readers = cli("readers", "--table", table, "--json")
        assert readers.returncode == 0, readers.stdout + readers.stderr
        answer = json.loads(readers.stdout)
        assert [(reader["kind"], reader["readers"]) for reader in answer["readers"]] == [
            ("aggregator", 1),
            ("mapping", 1),
        ]
        assert (answer["readers"][0]["streamReaders"], answer["total"], answer["tooMany"]) == (1, 2, False)
        assert "momentary" in answer["readers"][0]["momentary"]
        # and an on-failure record naming a range the mapping delivered already is read back by the aggregator when
        # `recover` hands it over: applied again, it changes nothing, and the message is deleted
        shard_id, records = stream_records(aws, outputs["table_stream_arn"])
        aws.sqs.send_message(
            QueueUrl=outputs["failure_queue_url"],
            MessageBody=json.dumps(
                {
                    "requestContext": {"condition": "RetryAttemptsExhausted"},
                    "DDBStreamBatchInfo": {
                        "shardId": shard_id,
                        "streamArn": outputs["table_stream_arn"],
                        "startSequenceNumber": records[0]["dynamodb"]["SequenceNumber"],
                        "endSequenceNumber": records[99]["dynamodb"]["SequenceNumber"],
                        "batchSize": 100,
                    },
                }
            ),
        )
        recovered = cli("recover", "--table", table, "--json")
        assert recovered.returncode == 0, recovered.stdout + recovered.stderr
        (batch,) = json.loads(recovered.stdout)["batches"]
        assert (batch["shardId"], batch["done"], batch["readBack"]["readBack"]) == (shard_id, True, "applied")
        assert without_zeros(stored(aws, outputs["aggregates_table_name"])) == truth
