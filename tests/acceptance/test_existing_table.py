"""The module attached to a table a platform already has: a single-table design it reads and never changes.

The table is created here, outside the module, as a platform's own Terraform would: keyed PK/SK, with an index of
its own, a stream of both images, and item types beside the downloads (users, playlists) that carry a song and a
timestamp too. The module is applied with `source_table_name` and `source_item_filter`; the aggregates go to its own
`<name>-aggregates` table.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from collections import Counter
from typing import Any

from leaderboard_core.claims import BACKFILL_ITEM_PREFIX, CLAIM_KEY
from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import poll_until, wait_until_totals
from leaderboard_dev.loadgen import write_items
from leaderboard_dev.observe import scan_all
from leaderboard_dev.settings import REPOSITORY, Endpoint
from tests.acceptance.conftest import stack, stored

MONTHS = ("2019-03", "2019-04")
MARKER = {"attribute": "type", "value": "DOWNLOAD"}


def platform_item(kind: str, number: int, chance: random.Random) -> dict[str, Any]:
    """An item of the platform's table: a download (type DOWNLOAD), or another type that names a song and a time."""
    song = f"song{chance.randrange(12)}"
    timestamp = f"{chance.choice(MONTHS)}-{chance.randrange(1, 29):02d}T{chance.randrange(24):02d}:00:00Z"
    if kind == "DOWNLOAD":
        key = {"PK": {"S": f"SONG#{song}"}, "SK": {"S": f"DOWNLOAD#{number:05d}"}}
    else:
        key = {"PK": {"S": f"{kind}#{number:05d}"}, "SK": {"S": "PROFILE"}}
    return {
        **key,
        "type": {"S": kind},
        "songID": {"S": song},
        "Timestamp": {"S": timestamp},
        "UserID": {"S": f"user{chance.randrange(40)}"},
    }


def definition(aws: Clients, table: str) -> dict[str, Any]:
    """What the platform defined: keys, attributes, its indexes, its stream, billing and TTL."""
    described = aws.dynamodb.describe_table(TableName=table)["Table"]
    ttl = aws.dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    return {
        "keys": described["KeySchema"],
        "attributes": sorted(described["AttributeDefinitions"], key=lambda attribute: attribute["AttributeName"]),
        "indexes": sorted(index["IndexName"] for index in described.get("GlobalSecondaryIndexes", [])),
        "stream": described.get("StreamSpecification"),
        "stream_arn": described.get("LatestStreamArn"),
        "ttl": ttl.get("TimeToLiveStatus"),
    }


def items_of(aws: Clients, table: str) -> list[str]:
    return sorted(json.dumps(item, sort_keys=True) for item in scan_all(aws, TableName=table, ConsistentRead=True))


def enable_stream(aws: Clients, table: str) -> None:
    """The stream turned on after the table's history was written: what it carries starts now, as on a table whose
    stream is older than its 24 hours of retention."""
    aws.dynamodb.update_table(
        TableName=table, StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    )
    poll_until(
        lambda: aws.dynamodb.describe_table(TableName=table)["Table"].get("LatestStreamArn"),
        timeout=60,
        describe=f"the stream of {table}",
    )


def cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "leaderboard_tools", *arguments],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPOSITORY,
        env=os.environ.copy(),
        timeout=600,
    )


def reconciled(table: str, month: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """`reconcile` once nothing it finds is pending on the stream (exit code 4), within a bounded wait."""
    return poll_until(
        lambda: (
            outcome
            if (outcome := cli("reconcile", "--table", table, "--month", month, "--json", *flags)).returncode != 4
            else None
        ),
        timeout=180,
        interval=3,
        describe=f"reconcile of {month} from {table} not pending",
    )


GENRES = ("rock", "jazz", "pop")


def genred(item: dict[str, Any], chance: random.Random) -> dict[str, Any]:
    return {**item, "Genre": {"S": chance.choice(GENRES)}}


def boards_of(downloads: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    """The truth, from the items the test wrote: each download in its UTC month, and its genre's board of it."""
    counts: Counter[tuple[str, str]] = Counter()
    for item in downloads:
        song, month = item["songID"]["S"], item["Timestamp"]["S"][:7]
        counts[(song, month)] += 1
        if "Genre" in item:
            counts[(song, f"{month}@{item['Genre']['S']}")] += 1
    return counts


class Writer(threading.Thread):
    """Downloads arriving while the backfill runs, one small batch at a time, until stopped."""

    def __init__(self, aws: Clients, table: str, first: int, chance: random.Random) -> None:
        super().__init__(daemon=True)
        self._aws, self._table, self._next, self._chance = aws, table, first, chance
        self.written: list[dict[str, Any]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            batch = [
                genred(platform_item("DOWNLOAD", self._next + offset, self._chance), self._chance)
                for offset in range(5)
            ]
            write_items(self._aws.dynamodb, self._table, batch)
            self.written += batch
            self._next += len(batch)
            self._halt.wait(0.2)

    def stop(self) -> list[dict[str, Any]]:
        self._halt.set()
        self.join(timeout=60)
        return self.written


def segments_saved(aws: Clients, claims_table: str) -> int:
    """Segments the backfill has saved a position for: it has counted something and may be killed now."""
    items = scan_all(aws, TableName=claims_table, ConsistentRead=True)
    return sum(1 for item in items if item[CLAIM_KEY]["S"].startswith(BACKFILL_ITEM_PREFIX + "segment#"))


def test_a_backfill_killed_midway_and_run_again_counts_the_history_exactly_once_beside_the_stream(
    endpoint: Endpoint, aws: Clients, platform_table: str
) -> None:
    # given a platform's table holding 20,000 downloads over two months and three genres that its stream never
    # carried, beside other item types, and the module attached with claims
    chance = random.Random(28)
    history = [genred(platform_item("DOWNLOAD", number, chance), chance) for number in range(20_000)]
    others = [platform_item("USER", number, chance) for number in range(100)]
    write_items(aws.dynamodb, platform_table, history + others)
    enable_stream(aws, platform_table)
    defined, held = definition(aws, platform_table), items_of(aws, platform_table)
    variables = {
        "source_table_name": platform_table,
        "source_item_filter": MARKER,
        "category_attribute_name": "Genre",
        "backfill_claims": True,
    }
    with stack(endpoint, "backfill", **variables) as (_, outputs):
        aggregates, claims = outputs["aggregates_table_name"], outputs["claims_table_name"]
        # when downloads keep arriving while a backfill runs, is killed midway, and runs again to its end
        writer = Writer(aws, platform_table, 100_000, random.Random(29))
        writer.start()
        command = [sys.executable, "-m", "leaderboard_tools", "backfill", "--table", platform_table]
        first = subprocess.Popen(
            [*command, "--segments", "2", "--page-size", "50", "--max-read-units", "5"],
            cwd=REPOSITORY,
            env=os.environ.copy(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        poll_until(lambda: segments_saved(aws, claims) >= 1, timeout=300, describe="the backfill's first page")
        first.kill()
        first.communicate(timeout=60)
        resumed = subprocess.run(
            [*command, "--segments", "2", "--json"],
            cwd=REPOSITORY,
            env=os.environ.copy(),
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        written = writer.stop()
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        # then every board, month and genre, holds every download of the table once: the history and what arrived
        truth = boards_of(history + written)
        totals = {month: sum(count for (_, board), count in truth.items() if board == month) for month in MONTHS}
        wait_until_totals(aws.dynamodb, aggregates, outputs["leaderboard_index_name"], totals, timeout=300)
        assert stored(aws, aggregates) == dict(truth)
        # and a backfill run once more changes nothing, and the platform's table is as it was, with the writes
        again = subprocess.run(
            [*command, "--json"],
            cwd=REPOSITORY,
            env=os.environ.copy(),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert again.returncode == 0, again.stdout + again.stderr
        assert stored(aws, aggregates) == dict(truth)
        # and the claims may go once the aggregator has counted past the backfill's end, which it does
        released = poll_until(
            lambda: cli("backfill", "--table", platform_table, "--release-check").returncode == 0,
            timeout=300,
            interval=10,
            describe="the claims' release",
        )
        assert released
        assert definition(aws, platform_table) == defined
        assert items_of(aws, platform_table) == sorted([*held, *(json.dumps(item, sort_keys=True) for item in written)])


def test_a_platforms_single_table_is_counted_into_the_modules_aggregates_and_left_unchanged(
    endpoint: Endpoint, aws: Clients, platform_table: str
) -> None:
    # given a platform's single-table design holding other item types and downloads from before its stream
    chance = random.Random(27)
    history = [platform_item("DOWNLOAD", number, chance) for number in range(60)]
    write_items(aws.dynamodb, platform_table, [platform_item("USER", number, chance) for number in range(30)] + history)
    enable_stream(aws, platform_table)
    defined, held = definition(aws, platform_table), items_of(aws, platform_table)
    with stack(endpoint, "existing", source_table_name=platform_table, source_item_filter=MARKER) as (_, outputs):
        aggregates = outputs["aggregates_table_name"]
        assert outputs["table_name"] == platform_table
        assert aggregates != platform_table
        # when downloads arrive, mixed with more items of other types that name a song and a time too
        written = [platform_item("DOWNLOAD", number, chance) for number in range(1000, 1240)]
        others = [platform_item(kind, number, chance) for number, kind in enumerate(["PLAYLIST", "USER"] * 30, 100)]
        write_items(aws.dynamodb, platform_table, chance.sample(written + others, len(written) + len(others)))
        # then every month's leaderboard in the aggregates table adds up to the downloads the stream carried
        streamed = Counter((item["songID"]["S"], item["Timestamp"]["S"][:7]) for item in written)
        totals = {month: sum(count for (_, of), count in streamed.items() if of == month) for month in MONTHS}
        wait_until_totals(aws.dynamodb, aggregates, outputs["leaderboard_index_name"], totals, timeout=240)
        assert stored(aws, aggregates) == dict(streamed)
        # and the platform's table holds its own items and the writes, nothing of the module's, defined as before
        assert definition(aws, platform_table) == defined
        assert items_of(aws, platform_table) == sorted(
            [*held, *(json.dumps(item, sort_keys=True) for item in written + others)]
        )
        # and the operator tools, from either table, find the history the stream never carried, and only downloads
        truth = Counter((item["songID"]["S"], item["Timestamp"]["S"][:7]) for item in history + written)
        for table, month in zip((platform_table, aggregates), MONTHS, strict=True):
            found = reconciled(table, month)
            assert found.returncode == 3, found.stdout + found.stderr
            report = json.loads(found.stdout)
            assert {
                (difference["songID"], difference["stored"], difference["recounted"])
                for difference in report["differences"]
            } == {
                (song, streamed[(song, of)], count)
                for (song, of), count in truth.items()
                if of == month and count != streamed[(song, of)]
            }
        # and a repair from either table counts it: every board then holds every download of the table, once
        for table, month in zip((aggregates, platform_table), MONTHS, strict=True):
            repaired = reconciled(table, month, "--repair", "--clock-margin-seconds", "2")
            assert repaired.returncode == 0, repaired.stdout + repaired.stderr
        assert stored(aws, aggregates) == dict(truth)
