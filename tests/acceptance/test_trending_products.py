"""terraform/examples/trending-products applied on the emulator and checked end to end, then its sums under faults.

The example's own files run in a temporary directory with one change: its `provider "aws"` block
is replaced by the emulator wiring of development/emulator_stack (and the module is sourced from this
working tree). Its zips come from the emulator's S3, as on AWS from the platform's bucket.

One stack serves every assertion:
- purchases (productID, SK = the purchase id, Category, Revenue, PurchasedAt) over eleven days and
  three ISO weeks around a new year, with ties, six-decimal amounts, offsets and a product without
  a category; every daily and weekly board, overall and per category, the rolling windows, the
  ranks with their neighbours, against a recount the test makes of the purchases it wrote;
- malformed purchases (Revenue missing, a string, seven decimals) rejected and reported, never 0;
- then the same configuration with a faulty build of the aggregator (a share of the invocations
  fail after half of their records) and the emulator's adversarial retries (reordered, split,
  merged, with fresh states): more purchases, and every board's sum is the recount, exactly.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from leaderboard_dev.aws import Clients
from leaderboard_dev.emulators.adversarial_retries import AdversarialRetries, read_journal
from leaderboard_dev.leaderboard import NotSettled, invoke_function, poll_until
from leaderboard_dev.loadgen import write_items
from leaderboard_dev.observe import aggregator_invocations, log_lines, scan_all
from leaderboard_dev.settings import EMULATOR_STACK, REPOSITORY, TERRAFORM_MODULE, Endpoint, emulator_environment
from leaderboard_dev.terraform_stack import Stack, deployed
from leaderboard_tools import cli
from tests.acceptance.conftest import FaultBuilds, adversarial_retries

EXAMPLE = TERRAFORM_MODULE / "examples" / "trending-products"
DIST = REPOSITORY / "dist"
PREFIX = "dynamodb-materialized-aggregation"
PERIODS = ("day", "week")
CATEGORIES = ("books", "games", "home & kitchen")
TUMBLING_WINDOW_SECONDS = 60
"""The module's default, which the example keeps."""
FAULT_RATE = 0.4

# The example's attribute names, as its main.tf sets them (the test reads the aggregates by them).
ENTITY, CATEGORY, REVENUE, PURCHASED_AT = "productID", "Category", "Revenue", "PurchasedAt"
BOARD, TOTAL = "Board", "RevenueTotal"

Board = tuple[str, str, str | None]
"""(period, bucket key, category or None for the overall board)."""


def bucket(moment: datetime, period: str) -> str:
    """The recount's own bucket arithmetic: UTC days, ISO 8601 weeks."""
    if period == "day":
        return moment.strftime("%Y-%m-%d")
    year, week, _ = moment.isocalendar()
    return f"{year:04d}-W{week:02d}"


def board_id(key: str, category: str | None) -> str:
    return key if category is None else f"{key}@{quote(category, safe='')}"


@dataclass
class Recount:
    """Sums per board and product, from the purchases the test wrote: the truth."""

    boards: dict[Board, dict[str, Decimal]] = field(default_factory=dict)
    purchases: int = 0

    def add(self, product: str, category: str | None, revenue: Decimal, moment: datetime) -> None:
        self.purchases += 1
        for period in PERIODS:
            for counted_in in {None, category}:
                sums = self.boards.setdefault((period, bucket(moment.astimezone(UTC), period), counted_in), {})
                sums[product] = sums.get(product, Decimal(0)) + revenue

    def aggregates(self) -> dict[tuple[str, str], Decimal]:
        """(board id, product) -> sum: what the table's aggregates must hold."""
        return {
            (board_id(key, category), product): total
            for (_, key, category), sums in self.boards.items()
            for product, total in sums.items()
            if total != 0
        }

    def retract(self, item: dict[str, Any]) -> None:
        """A purchase refunded (deleted) or about to be corrected: its revenue taken back from every board."""
        product, category, revenue, moment = purchase_of(item)
        self.add(product, category, -revenue, moment)
        self.purchases -= 2


def purchase_of(item: dict[str, Any]) -> tuple[str, str | None, Decimal, datetime]:
    """A purchase item's product, category, revenue and moment (its offset kept: `add` counts it in UTC)."""
    moment = datetime.fromisoformat(item[PURCHASED_AT]["S"].replace("Z", "+00:00"))
    return item[ENTITY]["S"], item.get(CATEGORY, {}).get("S"), Decimal(item[REVENUE]["N"]), moment


def ranking(sums: dict[str, Decimal]) -> list[tuple[str, Decimal]]:
    """The listing order: the sum descending, then the product id by its UTF-8 bytes."""
    return sorted(
        ((p, total) for p, total in sums.items() if total != 0), key=lambda entry: (-entry[1], entry[0].encode())
    )


def purchase(
    number: int, product: str, category: str | None, revenue: str, moment: datetime, offset: timedelta
) -> dict[str, Any]:
    local = moment.astimezone(timezone(offset))
    item = {
        ENTITY: {"S": product},
        "SK": {"S": f"purchase-{number:05d}"},
        PURCHASED_AT: {"S": local.isoformat(timespec="seconds").replace("+00:00", "Z")},
        REVENUE: {"N": revenue},
    }
    if category is not None:
        item[CATEGORY] = {"S": category}
    return item


def purchases(seed: int, first: int, count: int, start: datetime, days: int, recount: Recount) -> list[dict[str, Any]]:
    """`count` purchases of a Zipf-like catalogue over `days` days from `start`, each added to `recount`.

    Products p-00..p-23 have a category each; the gift card has none; twin-a and twin-b are always
    bought together at the same price (a tie on every board they are in). Amounts have two
    decimals, a few six; a few timestamps carry an offset (their UTC day is another)."""
    chance = random.Random(seed)
    products = [f"p-{n:02d}" for n in range(24)]
    items = []
    number = first
    while len(items) < count:
        moment = start + timedelta(seconds=chance.randrange(days * 86_400))
        offset = timedelta(hours=chance.choice((0, 0, 0, 5.5, -8)))
        draw = chance.random()
        if draw < 0.08:
            price = f"{chance.randrange(1, 500)}.{chance.randrange(100):02d}"
            for twin in ("twin-a", "twin-b"):
                items.append(purchase(number, twin, "games", price, moment, offset))
                recount.add(twin, "games", Decimal(price), moment)
                number += 1
            continue
        if draw < 0.14:
            product, category = "gift-card", None
        else:
            rank = min(int(chance.expovariate(0.18)), len(products) - 1)
            product, category = products[rank], CATEGORIES[rank % len(CATEGORIES)]
        decimals = 6 if chance.random() < 0.1 else 2
        price = f"{chance.randrange(0, 900)}.{chance.randrange(10**decimals):0{decimals}d}"
        items.append(purchase(number, product, category, price, moment, offset))
        recount.add(product, category, Decimal(price), moment)
        number += 1
    return items


MALFORMED = [
    {ENTITY: {"S": "p-00"}, "SK": {"S": "malformed-1"}, PURCHASED_AT: {"S": "2025-01-02T10:00:00Z"}},
    {
        ENTITY: {"S": "p-00"},
        "SK": {"S": "malformed-2"},
        PURCHASED_AT: {"S": "2025-01-02T10:00:00Z"},
        REVENUE: {"S": "12.50"},
    },
    {
        ENTITY: {"S": "p-00"},
        "SK": {"S": "malformed-3"},
        PURCHASED_AT: {"S": "2025-01-02T10:00:00Z"},
        REVENUE: {"N": "0.1234567"},
    },
]
"""Purchases the aggregator must reject and report: Revenue missing, a string, seven decimals."""


# ---------------------------------------------------------------- the example, applied


def emulator_configuration(directory: Path) -> None:
    """The example's files, its provider block replaced by development/emulator_stack's, its module from this tree."""
    main = (EXAMPLE / "main.tf").read_text()
    provider = re.search(r'^provider "aws" \{\n.*?^\}\n', main, flags=re.MULTILINE | re.DOTALL)
    assert provider is not None, "the example configures its provider"
    emulator_main = (EMULATOR_STACK / "main.tf").read_text()
    wiring = emulator_main[emulator_main.index("locals {") : emulator_main.index('module "leaderboard"')]
    main = main.replace(provider.group(0), wiring)
    assert 'source = "../.."' in main
    main = main.replace('source = "../.."', f'source = "{os.path.relpath(TERRAFORM_MODULE, directory)}"')
    (directory / "main.tf").write_text(main)
    for name in ("variables.tf", "outputs.tf", "versions.tf"):
        (directory / name).write_text((EXAMPLE / name).read_text())
    (directory / "emulator.tf").write_text('variable "aws_endpoint_url" {\n  type = string\n}\n')


def base64_sha256(path: Path) -> str:
    return base64.b64encode(hashlib.sha256(path.read_bytes()).digest()).decode()


def release_variables(aws: Clients, bucket: str, version: str, aggregator: Path) -> dict[str, str]:
    """Upload the zips as a release `version` to the bucket; the example's variables for it."""
    query = DIST / "query.zip"
    for name, path in (("aggregator.zip", aggregator), ("query.zip", query)):
        aws.s3.upload_file(str(path), bucket, f"{PREFIX}/{version}/{name}")
    return {
        "package_s3_bucket": bucket,
        "release_version": version,
        "aggregator_package_source_code_hash": base64_sha256(aggregator),
        "query_package_source_code_hash": base64_sha256(query),
    }


@dataclass
class Trending:
    deployment: Stack
    outputs: dict[str, Any]
    bucket: str
    recount: Recount = field(default_factory=Recount)


@pytest.fixture(scope="module")
def trending(endpoint: Endpoint, aws: Clients, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trending]:
    directory = tmp_path_factory.mktemp("trending-products")
    emulator_configuration(directory)
    bucket = f"artifacts-{uuid.uuid4().hex[:8]}"
    aws.s3.create_bucket(Bucket=bucket)
    variables = release_variables(aws, bucket, "0.0.0-trending", DIST / "aggregator.zip")
    deployment = Stack(f"trending-{uuid.uuid4().hex[:6]}", endpoint, variables, working_dir=directory)
    try:
        with deployed(deployment) as outputs:
            yield Trending(deployment, outputs, bucket)
    finally:
        for listed in aws.s3.list_objects_v2(Bucket=bucket).get("Contents", []):
            aws.s3.delete_object(Bucket=bucket, Key=listed["Key"])
        aws.s3.delete_bucket(Bucket=bucket)


def stored(aws: Clients, table: str) -> dict[tuple[str, str], Decimal]:
    """(board id, product) -> the aggregate's sum, by consistent reads of the table."""
    items = scan_all(
        aws,
        TableName=table,
        FilterExpression="attribute_exists(#board)",
        ExpressionAttributeNames={"#board": BOARD},
        ConsistentRead=True,
    )
    return {(item["SK"]["S"], item[ENTITY]["S"]): Decimal(item[TOTAL]["N"]) for item in items}


def wait_until_exact(aws: Clients, table: str, recount: Recount, timeout: float, evidence: Any = None) -> None:
    expected = recount.aggregates()
    seen: dict[str, dict[tuple[str, str], Decimal]] = {}

    def exact() -> bool:
        seen["stored"] = stored(aws, table)
        return seen["stored"] == expected

    try:
        poll_until(exact, timeout=timeout, interval=3, describe=f"the sums of {recount.purchases} purchases")
    except NotSettled as error:
        found = seen.get("stored", {})
        wrong = {key: (found.get(key), value) for key, value in expected.items() if found.get(key) != value}
        extra = sorted(set(found) - set(expected))
        context = evidence() if callable(evidence) else evidence
        raise AssertionError(
            f"{error}: wrong {dict(list(wrong.items())[:10])}, unexpected {extra[:10]}; {context}"
        ) from None


START = datetime(2024, 12, 27, tzinfo=UTC)
"""Eleven days to 2025-01-06: ISO weeks 2024-W52, 2025-W01 (from Monday 2024-12-30) and 2025-W02."""


@pytest.fixture(scope="module")
def purchased(trending: Trending, aws: Clients) -> Trending:
    """Purchases and malformed ones written, shuffled; waits until the aggregates hold the recount."""
    items = purchases(seed=16, first=0, count=450, start=START, days=11, recount=trending.recount)
    mixed = items + MALFORMED
    random.Random(1).shuffle(mixed)
    write_items(aws.dynamodb, trending.outputs["table_name"], mixed)
    wait_until_exact(aws, trending.outputs["table_name"], trending.recount, timeout=300)
    return trending


def answer_of(aws: Clients, function: str, request: dict[str, Any]) -> dict[str, Any]:
    answer = invoke_function(aws.lambda_, function, request)
    assert "error" not in answer, (request, answer)
    return answer


def board_request(period: str, key: str, category: str | None) -> dict[str, Any]:
    return {"period": period, "key": key} | ({"category": category} if category is not None else {})


def listed(aws: Clients, function: str, board: Board, limit: int) -> list[tuple[str, Decimal]]:
    """Every entry of a board through the query function, page after page; each sum an exact decimal string."""
    entries: list[tuple[str, Decimal]] = []
    request = {**board_request(*board), "limit": limit}
    for _ in range(200):
        page = answer_of(aws, function, request)
        for item in page["items"]:
            assert isinstance(item["downloadCount"], str), item
            entries.append((item[ENTITY], Decimal(item["downloadCount"])))
        if page["next_token"] is None:
            return entries
        request = {**board_request(*board), "limit": limit, "next_token": page["next_token"]}
    raise AssertionError("the listing did not end")


def every_board_is_its_recount(aws: Clients, function: str, recount: Recount, limit: int) -> None:
    for board, sums in sorted(recount.boards.items(), key=lambda entry: (entry[0][0], entry[0][1], entry[0][2] or "")):
        assert listed(aws, function, board, limit) == ranking(sums), board


# ---------------------------------------------------------------- end to end


def test_every_daily_and_weekly_board_overall_and_per_category_is_the_recount(
    purchased: Trending, aws: Clients
) -> None:
    # given 450 purchases over eleven days, and the boards the recount says they touch
    boards = purchased.recount.boards
    assert {period for period, _, _ in boards} == set(PERIODS)
    assert {key for period, key, _ in boards if period == "week"} == {"2024-W52", "2025-W01", "2025-W02"}
    assert {category for _, _, category in boards} == {None, *CATEGORIES}
    # when every board is listed through the query function, then each is its recount, sums exact to the digit
    every_board_is_its_recount(aws, purchased.outputs["query_function_name"], purchased.recount, limit=1000)
    # and a board listed in small pages is the same
    week = ("week", "2025-W01", None)
    assert listed(aws, purchased.outputs["query_function_name"], week, limit=4) == ranking(boards[week])


def window_recount(recount: Recount, period: str, keys: list[str], category: str | None) -> list[tuple[str, Decimal]]:
    total: dict[str, Decimal] = {}
    for key in keys:
        for product, value in recount.boards.get((period, key, category), {}).items():
            total[product] = total.get(product, Decimal(0)) + value
    return ranking(total)


TRENDING = [
    ("day", "2025-01-05", 7, None, ["2024-12-30", "2024-12-31", *(f"2025-01-0{day}" for day in range(1, 6))]),
    ("day", "2025-01-02", 3, "home & kitchen", ["2024-12-31", "2025-01-01", "2025-01-02"]),
    ("week", "2025-W02", 2, None, ["2025-W01", "2025-W02"]),
    ("week", "2025-W01", 2, "books", ["2024-W52", "2025-W01"]),
]


@pytest.mark.parametrize(("period", "key", "last", "category", "keys"), TRENDING)
def test_trending_is_the_top_of_the_recounted_rolling_window(
    purchased: Trending, aws: Clients, period: str, key: str, last: int, category: str | None, keys: list[str]
) -> None:
    function = purchased.outputs["query_function_name"]
    expected = window_recount(purchased.recount, period, keys, category)
    assert len(expected) > 3
    for limit in (1, 3, 10):
        # when the top `limit` of the last `last` buckets is asked
        answer = answer_of(aws, function, {**board_request(period, key, category), "last": last, "limit": limit})
        # then it is the recount's, complete, with the reads it took
        assert answer["complete"] is True, answer
        assert [(item[ENTITY], Decimal(item["downloadCount"])) for item in answer["items"]] == expected[:limit]
        assert answer["reads"]["queries"] >= 1


@pytest.mark.parametrize("board", [("week", "2025-W01", None), ("day", "2025-01-03", "games")])
def test_a_products_rank_and_neighbours_are_the_recounts(purchased: Trending, aws: Clients, board: Board) -> None:
    function = purchased.outputs["query_function_name"]
    ordered = ranking(purchased.recount.boards[board])
    if board[2] == "games":
        sums = purchased.recount.boards[board]
        assert sums["twin-a"] == sums["twin-b"], "the twins tie on this board"
    for place, (product, total) in enumerate(ordered):
        # when a product's rank is asked with two neighbours on each side
        answer = answer_of(aws, function, {**board_request(*board), ENTITY: product, "around": 2})
        # then it is its place in the recount's listing, and the neighbours are the recount's, ties included
        assert (answer[ENTITY], Decimal(answer["downloadCount"]), answer["rank"]) == (product, total, place + 1)
        first = max(0, place - 2)
        assert [(item[ENTITY], Decimal(item["downloadCount"]), item["rank"]) for item in answer["items"]] == [
            (entity, value, first + offset + 1) for offset, (entity, value) in enumerate(ordered[first : place + 3])
        ]
    # and a product without purchases that week has no rank
    absent = answer_of(aws, function, {**board_request(*board), ENTITY: "never-bought"})
    assert (absent["downloadCount"], absent["rank"]) == ("0", None)


def test_malformed_purchases_are_reported_and_never_counted(purchased: Trending, aws: Clients) -> None:
    # given three malformed purchases of p-00 written with the others (the aggregates already equal the recount
    # without them): then each is in the failure queue as a rejected download
    queue = purchased.outputs["failure_queue_url"]
    reported: dict[str, dict[str, Any]] = {}

    def all_reported() -> bool:
        for message in aws.sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        ):
            body = json.loads(message["Body"])
            image = (body.get("record") or {}).get("dynamodb", {}).get("NewImage", {})
            if body.get("kind") == "rejected_download" and "SK" in image:
                reported[image["SK"]["S"]] = body
        return set(reported) >= {"malformed-1", "malformed-2", "malformed-3"}

    poll_until(all_reported, timeout=60, interval=1, describe="the malformed purchases in the failure queue")
    assert all(REVENUE in body["reason"] for body in reported.values()), reported
    # and no aggregate counted them (as 0 or otherwise): the aggregates are still the recount of the others
    assert stored(aws, purchased.outputs["table_name"]) == purchased.recount.aggregates()


def test_the_cli_names_the_products(
    purchased: Trending, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a person's environment pointing boto3 at the emulator
    for name, value in emulator_environment(endpoint).items():
        monkeypatch.setenv(name, value)
    function = purchased.outputs["query_function_name"]
    argv = ["top", "--function", function, "--entity-attribute", ENTITY, "--period", "week", "--key", "2025-W01"]
    # when the CLI asks for the week's top 3, as JSON and as a table
    assert cli.main([*argv, "--limit", "3", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert cli.main([*argv, "--limit", "3"]) == 0
    table = capsys.readouterr().out
    # then both name the recount's top 3 products
    expected = ranking(purchased.recount.boards[("week", "2025-W01", None)])[:3]
    assert [(item[ENTITY], Decimal(item["downloadCount"])) for item in answer["items"]] == expected
    assert ENTITY in table
    assert all(product in table and f"{total.normalize():f}" in table for product, total in expected)


def refund_and_correct(aws: Clients, table: str, items: list[dict[str, Any]], recount: Recount, seed: int) -> None:
    """Refund (delete) a few of `items` and correct the revenue of a few others, keeping `recount` the truth."""
    chance = random.Random(seed)
    chosen = chance.sample(items, 5)
    for item in chosen[:3]:
        aws.dynamodb.delete_item(TableName=table, Key={ENTITY: item[ENTITY], "SK": item["SK"]})
        recount.retract(item)
        items.remove(item)
    for item in chosen[3:]:
        corrected = f"{chance.randrange(0, 900)}.{chance.randrange(100):02d}"
        aws.dynamodb.update_item(
            TableName=table,
            Key={ENTITY: item[ENTITY], "SK": item["SK"]},
            UpdateExpression="SET #revenue = :revenue",
            ExpressionAttributeNames={"#revenue": REVENUE},
            ExpressionAttributeValues={":revenue": {"N": corrected}},
        )
        recount.retract(item)
        item[REVENUE] = {"N": corrected}
        product, category, revenue, moment = purchase_of(item)
        recount.add(product, category, revenue, moment)


def test_refunds_and_corrections_take_revenue_back_from_every_board(purchased: Trending, aws: Clients) -> None:
    # given the example's purchases counted, with retractions on (refunds)
    table = purchased.outputs["table_name"]
    items = scan_all(
        aws,
        TableName=table,
        FilterExpression="attribute_exists(#at) AND attribute_type(#revenue, :number)",
        ExpressionAttributeNames={"#at": PURCHASED_AT, "#revenue": REVENUE},
        ExpressionAttributeValues={":number": {"S": "N"}},
        ConsistentRead=True,
    )
    items = [item for item in items if not item["SK"]["S"].startswith("malformed")]
    # when three purchases are refunded (deleted) and two have their revenue corrected
    refund_and_correct(aws, table, items, purchased.recount, seed=28)
    # then every aggregate is the recount of the purchases as they now are, and so is every board
    wait_until_exact(aws, table, purchased.recount, timeout=180)
    every_board_is_its_recount(aws, purchased.outputs["query_function_name"], purchased.recount, limit=1000)


# ---------------------------------------------------------------- sums under faults


def test_every_sum_is_exact_under_injected_faults_and_adversarial_retries(
    purchased: Trending, aws: Clients, fault_builds: FaultBuilds, switch_directory: Path
) -> None:
    # given the same configuration with a faulty build of the shipped aggregator: 40 % of the invocations with
    # records fail after half of them (their writes land), so the mapping retries
    deployment, recount = purchased.deployment, purchased.recount
    faulty = fault_builds.faulty(FAULT_RATE)
    deployment.variables.update(release_variables(aws, purchased.bucket, "0.0.0-faulty", faulty))
    outputs = deployment.apply()
    function, table = outputs["aggregator_function_name"], outputs["table_name"]
    # and the emulator's retries reordered, split, merged with newer records, with fresh states
    policy = AdversarialRetries(seed=16, reorder=0.6, split=0.3, merge=0.5, fresh_state=0.5, short_batches=1.0)
    already = len(read_journal(switch_directory, function))
    since_ms = int(time.time() * 1000)
    with adversarial_retries(switch_directory, function, policy):
        # when more purchases arrive in eight bursts, each delivered in two or more first deliveries (short batches):
        # 16 or more invocations with records, none failing once in 3,500 runs (0.6^16)
        written: list[dict[str, Any]] = []
        for burst in range(8):
            more = purchases(
                seed=160 + burst, first=1000 + 100 * burst, count=30, start=START, days=11, recount=recount
            )
            # the last burst's records are created after this moment, so the window holding them ends after it
            last_burst_started = time.time()
            write_items(aws.dynamodb, table, more)
            # and refunds and corrections of earlier bursts' purchases ride the same faults and retries
            if written:
                refund_and_correct(aws, table, written, recount, seed=280 + burst)
            written += more
            time.sleep(2)

        def played() -> str:
            return f"{len(retries_played(switch_directory, function, already))} retries played"

        # then every aggregate is the recount of every purchase written, to the last decimal
        wait_until_exact(aws, table, recount, timeout=420, evidence=played)
        # and still is once the last purchase's window has had its final invocation
        poll_until(
            lambda: final_invocation_after(aws, outputs["aggregator_log_group_name"], since_ms, last_burst_started),
            timeout=TUMBLING_WINDOW_SECONDS + 120,
            interval=3,
            describe="the final invocation of the last purchase's window",
        )
        assert stored(aws, table) == recount.aggregates()
    # and the faults and the adversarial retries really happened
    lines = log_lines(aws, outputs["aggregator_log_group_name"], since_ms)
    faults = sum(1 for line in lines if line.get("message") == "test-only fault injected")
    retries = retries_played(switch_directory, function, already)
    with_records = sum(1 for invocation in aggregator_invocations(lines) if invocation["records"])
    print(f"\nunder faults: {with_records} invocations with records, {faults} failed, {len(retries)} retries played")
    assert faults > 0
    assert any(entry["succeeded"] and (entry["reordered"] or entry["merged"] or entry["split"]) for entry in retries)
    # and every board, read through the query function, lists the recount's sums
    every_board_is_its_recount(aws, outputs["query_function_name"], recount, limit=1000)


def retries_played(directory: Path, function: str, already: int) -> list[dict[str, Any]]:
    """The retries the emulator's stream mapping played since the journal held `already` entries."""
    return [entry for entry in read_journal(directory, function)[already:] if entry["event"] == "retry"]


def final_invocation_after(aws: Clients, log_group: str, since_ms: int, moment: float) -> bool:
    """A successful final invocation of a window that ends after `moment` (epoch seconds) has been logged."""
    for line in log_lines(aws, log_group, since_ms):
        if line.get("message") == "batch summary" and line.get("final_invocation") and line.get("succeeded"):
            start = datetime.fromisoformat(str(line["window_start"]).replace("Z", "+00:00")).timestamp()
            if start + TUMBLING_WINDOW_SECONDS > moment:
                return True
    return False


pytestmark = pytest.mark.acceptance
