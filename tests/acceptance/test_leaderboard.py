"""The module applied to the emulator: downloads in, exact monthly leaderboards out."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import (
    NotSettled,
    index_ranking,
    invoke_function,
    poll_until,
    query_all_pages,
    wait_until_totals,
)
from leaderboard_dev.loadgen import Download, utc_month, write_items
from leaderboard_dev.observe import log_lines, scan_all
from leaderboard_dev.settings import Endpoint, emulator_environment
from leaderboard_dev.terraform_stack import Stack
from leaderboard_tools import cli
from tests.acceptance.conftest import stack

# Distinct counts per month, so the expected order has no ties; February reverses January's order.
JANUARY = {f"hit{n:02d}": 3 * n + 2 for n in range(1, 13)}
FEBRUARY = {**{f"hit{n:02d}": 41 - 3 * n for n in range(1, 13)}, "newcomer": 50}
# Local times that fall into another UTC month: the guide's slicing would file them wrongly.
BOUNDARY_DOWNLOADS = [("edge-song", "2018-01-31T23:30:00-05:00"), ("edge-song", "2018-03-01T00:30:00+02:00")]


@pytest.fixture(scope="module")
def deployment(endpoint: Endpoint) -> Iterator[tuple[Stack, dict[str, Any]]]:
    with stack(endpoint, "acc", batch_size=50) as deployed_stack:
        yield deployed_stack


@pytest.fixture(scope="module")
def loaded(deployment: tuple[Stack, dict[str, Any]], aws: Clients) -> dict[str, Any]:
    """Writes the known distribution in shuffled order, two malformed downloads, and waits until it settles."""
    _, outputs = deployment
    rng = random.Random(42)
    played = list(BOUNDARY_DOWNLOADS)
    for month, counts in (("2018-01", JANUARY), ("2018-02", FEBRUARY)):
        for song, count in counts.items():
            played += [
                (song, f"{month}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:15:00Z") for _ in range(count)
            ]
    rng.shuffle(played)
    items = [
        Download(song, f"download-{number:06d}", f"user{number % 97}", timestamp).as_item()
        for number, (song, timestamp) in enumerate(played)
    ]
    malformed = [
        {"songID": {"S": "hit01"}, "SK": {"S": "malformed-no-timestamp"}, "UserID": {"S": "user1"}},
        {"songID": {"S": "hit01"}, "SK": {"S": "malformed-bad-timestamp"}, "Timestamp": {"S": "31/01/2018 10:00"}},
    ]
    expected: dict[str, Counter[str]] = {}
    for item in items:
        expected.setdefault(utc_month(item["Timestamp"]["S"]), Counter())[item["songID"]["S"]] += 1
    write_items(aws.dynamodb, outputs["table_name"], items + malformed)
    totals = {month: sum(counts.values()) for month, counts in expected.items()}
    wait_until_totals(aws.dynamodb, outputs["table_name"], outputs["leaderboard_index_name"], totals, timeout=240)
    return {"expected": expected, "downloads": len(items), "malformed": malformed, "outputs": outputs}


def ranking(counts: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def test_downloads_count_in_their_utc_month(loaded: dict[str, Any], aws: Clients) -> None:
    # given two downloads whose local dates are January 31st and March 1st but both in February UTC
    function = loaded["outputs"]["query_function_name"]
    # then both count in February, none in January or March
    february = invoke_function(aws.lambda_, function, {"month": "2018-02", "limit": 1000})["items"]
    january = invoke_function(aws.lambda_, function, {"month": "2018-01", "limit": 1000})["items"]
    assert {"songID": "edge-song", "downloadCount": 2} in february
    assert "edge-song" not in {item["songID"] for item in january}
    assert invoke_function(aws.lambda_, function, {"month": "2018-03"})["items"] == []


@pytest.mark.parametrize("month", ["2018-01", "2018-02"])
def test_limit_one_returns_the_top_song(loaded: dict[str, Any], aws: Clients, month: str) -> None:
    page = invoke_function(aws.lambda_, loaded["outputs"]["query_function_name"], {"month": month, "limit": 1})
    top_song, top_count = ranking(loaded["expected"][month])[0]
    assert page["items"] == [{"songID": top_song, "downloadCount": top_count}]


@pytest.mark.parametrize("month", ["2018-01", "2018-02"])
def test_limit_ten_returns_the_top_ten_with_exact_counts(loaded: dict[str, Any], aws: Clients, month: str) -> None:
    page = invoke_function(aws.lambda_, loaded["outputs"]["query_function_name"], {"month": month, "limit": 10})
    assert [(item["songID"], item["downloadCount"]) for item in page["items"]] == ranking(loaded["expected"][month])[
        :10
    ]
    assert page["next_token"] is not None


@pytest.mark.parametrize("month", ["2018-01", "2018-02"])
def test_following_next_token_lists_every_song_in_order(loaded: dict[str, Any], aws: Clients, month: str) -> None:
    listed = query_all_pages(aws.lambda_, loaded["outputs"]["query_function_name"], month, page_size=4)
    assert listed == ranking(loaded["expected"][month])


@pytest.mark.parametrize("month", ["2018-01", "2018-02"])
def test_a_direct_index_query_gives_the_same_ordering(loaded: dict[str, Any], aws: Clients, month: str) -> None:
    outputs = loaded["outputs"]
    assert index_ranking(aws.dynamodb, outputs["table_name"], outputs["leaderboard_index_name"], month) == ranking(
        loaded["expected"][month]
    )


def test_the_index_is_sparse_holding_aggregates_only(loaded: dict[str, Any], aws: Clients) -> None:
    # given the table holds every download and one aggregate per song and month
    outputs = loaded["outputs"]
    table_items = scan_all(aws, TableName=outputs["table_name"])
    index_items = scan_all(aws, TableName=outputs["table_name"], IndexName=outputs["leaderboard_index_name"])
    aggregates = sum(len(counts) for counts in loaded["expected"].values())
    # then the index holds exactly the aggregates, and no download record
    assert len(table_items) == loaded["downloads"] + len(loaded["malformed"]) + aggregates
    assert len(index_items) == aggregates
    assert all(item["SK"]["S"] == item["Month"]["S"] for item in index_items)
    assert not any(item["SK"]["S"].startswith(("download-", "malformed-")) for item in index_items)


def batch_summaries(aws: Clients, log_group: str) -> list[dict[str, Any]]:
    return [line for line in log_lines(aws, log_group) if line.get("message") == "batch summary"]


def test_the_aggregator_is_never_invoked_for_its_own_writes(loaded: dict[str, Any], aws: Clients) -> None:
    # given every download counted (the fixture waited for the boards); the function's lines reach CloudWatch Logs
    # after its invocations return, so the last ones may still be on their way
    log_group = loaded["outputs"]["aggregator_log_group_name"]

    def every_download_summarised() -> list[dict[str, Any]] | None:
        summaries = batch_summaries(aws, log_group)
        return summaries if sum(line["added"] for line in summaries) >= loaded["downloads"] else None

    # when the batch summaries have arrived (a bounded poll for what they added; on its timeout, what is there)
    try:
        summaries = poll_until(every_download_summarised, timeout=90, interval=3, describe="every download summarised")
    except NotSettled:
        summaries = batch_summaries(aws, log_group)
    assert summaries, "the aggregator logged no batch summary: its logs are not reaching CloudWatch Logs"
    # then every download was counted exactly once, and no aggregate record ever reached the function in an event (the
    # aggregator reads its shard itself from its checkpoint, and may read its own writes there: `ignored` counts those)
    assert sum(line["added"] for line in summaries) == loaded["downloads"]
    assert [line["ignored_delivered"] for line in summaries if line["ignored_delivered"]] == []


def test_malformed_downloads_are_reported_in_the_failure_queue_not_lost(loaded: dict[str, Any], aws: Clients) -> None:
    queue_url = loaded["outputs"]["failure_queue_url"]
    reported: dict[str, str] = {}

    def both_reported() -> bool:
        messages = aws.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        )
        for message in messages:
            body = json.loads(message["Body"])
            if body.get("kind") == "rejected_download":
                reported[body["record"]["dynamodb"]["Keys"]["SK"]["S"]] = body["reason"]
            aws.sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        return set(reported) >= {"malformed-no-timestamp", "malformed-bad-timestamp"}

    poll_until(both_reported, timeout=60, interval=1, describe="both malformed downloads in the failure queue")
    assert set(reported) == {"malformed-no-timestamp", "malformed-bad-timestamp"}
    assert "Timestamp" in reported["malformed-no-timestamp"]


@pytest.mark.parametrize(
    "request_body",
    [
        {},
        {"month": "2018-13"},
        {"month": "2018-01", "limit": 0},
        {"month": "2018-01", "limit": 1001},
        {"month": "2018-01", "next_token": "forged"},
    ],
)
def test_bad_requests_get_an_error_object(loaded: dict[str, Any], aws: Clients, request_body: dict[str, Any]) -> None:
    response = invoke_function(aws.lambda_, loaded["outputs"]["query_function_name"], request_body)
    assert set(response) == {"error"}
    assert response["error"]["code"] == "InvalidRequest"


def test_the_cli_prints_a_months_top_as_a_table_and_as_json(
    loaded: dict[str, Any], aws: Clients, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    # given the environment a person sets to point boto3's standard session at the emulator
    for name, value in emulator_environment(endpoint).items():
        monkeypatch.setenv(name, value)
    argv = ["top", "--table", loaded["outputs"]["table_name"], "--month", "2018-02", "--limit", "3"]
    # when the top 3 of February is asked as a table, then each place, song and count is in its column
    assert cli.main(argv) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    expected = ranking(loaded["expected"]["2018-02"])[:3]
    assert [(row[1], row[3], row[5]) for row in rows] == [
        (str(place), song, str(count)) for place, (song, count) in enumerate(expected, start=1)
    ]
    # and as JSON, the function's response unchanged; `all` and `rank` from the same flags
    assert cli.main([*argv, "--json"]) == 0
    direct = invoke_function(aws.lambda_, loaded["outputs"]["query_function_name"], {"month": "2018-02", "limit": 3})
    assert json.loads(capsys.readouterr().out) == direct
    assert cli.main(["all", "--table", argv[2], "--month", "2018-02", "--page-size", "5", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [(i["songID"], i["downloadCount"]) for i in listing["items"]] == ranking(loaded["expected"]["2018-02"])
    assert listing["next_token"] is None
    assert cli.main(["rank", "--table", argv[2], "--month", "2018-02", "--song", expected[1][0], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rank"] == 2


def test_the_schedule_invokes_the_lineage_sweep_of_the_table_s_stream(loaded: dict[str, Any], aws: Clients) -> None:
    outputs = loaded["outputs"]
    # given the schedule the module deployed, every 15 minutes by default
    schedule = aws.scheduler.get_schedule(Name=outputs["lineage_sweep_schedule_name"])
    target = schedule["Target"]
    # when the aggregator is invoked with the schedule's own input, as EventBridge Scheduler invokes it
    answer = invoke_function(aws.lambda_, target["Arn"], json.loads(target["Input"]))
    # then it swept the lineages of the table's stream through every shard, finding nothing lost
    assert schedule["ScheduleExpression"] == "rate(15 minutes)"
    assert target["Arn"] == outputs["aggregator_function_arn"]
    assert (answer["streamArn"], answer["finished"]) == (outputs["table_stream_arn"], True)
    assert answer["summary"]["records_trimmed"] is False


def test_a_second_plan_after_apply_is_empty(deployment: tuple[Stack, dict[str, Any]], loaded: dict[str, Any]) -> None:
    deployed_stack, _ = deployment
    assert deployed_stack.pending_changes() is None
