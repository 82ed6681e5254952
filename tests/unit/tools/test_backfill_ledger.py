"""`leaderboard-tools backfill` in ledger mode (the module's `ledger`): each download's ledger item stores what the
backfill counted of it (its entity and its contribution, board id -> amount), keys already in the ledger are skipped,
two runs at once, a killed run and a rerun count each key once, and there is nothing to release.

The stack, the oracle and the stream's side are test_backfill.py's: the stream claims a download through
`leaderboard_core.claims.stream_claim` and counts it when the claim is its own (`stream_counts`).
"""

from __future__ import annotations

import json
from collections import Counter
from email.utils import formatdate
from typing import Any

import pytest

from leaderboard_core.claims import (
    BACKFILL,
    BACKFILL_ITEM_PREFIX,
    BASE_CONTRIBUTION,
    BASE_ENTITY,
    CLAIM_KEY,
    CLAIM_OWNER,
    READ_AT,
    STREAM,
    claim_key,
)
from leaderboard_core.index_layout import ORDER_SCALE, order_tiebreak
from leaderboard_tools.backfill import DONE, BackfillRefused
from leaderboard_tools.backfill.release import LEDGER_VERDICT, release_check
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from tests.unit.tools.operator_stack import REGION, run
from tests.unit.tools.test_backfill import (
    Hooked,
    Killed,
    Stack,
    Written,
    backfill,
    claims_created_later,
    dynamodb,
    one_request_at_a_time,  # noqa: F401 (autouse: moto answers one DynamoDB request at a time)
    stack_with_claims,
    stored,
    stream_counts,
    write,
    write_history,
)

LEDGER_SETTINGS = {"LEDGER": "true", "RETRACTIONS": "true"}
"""The aggregator's environment in ledger mode: the module refuses `ledger` without `retractions`."""


def ledger_stack(periods: str = "month,day", **settings: str) -> Stack:
    return stack_with_claims(periods=periods, settings=LEDGER_SETTINGS | settings)


def ledger_items(stack: Stack) -> dict[str, dict[str, Any]]:
    """Claim key -> its ledger item, the backfill's own items left out."""
    items = dynamodb().scan(TableName=stack.claims, ConsistentRead=True)["Items"]
    return {item[CLAIM_KEY]["S"]: item for item in items if not item[CLAIM_KEY]["S"].startswith(BACKFILL_ITEM_PREFIX)}


def stored_contribution(item: dict[str, Any]) -> dict[str, int]:
    """A ledger item's Contribution as board id -> amount."""
    return {board: int(amount["N"]) for board, amount in item[BASE_CONTRIBUTION]["M"].items()}


def assert_each_download_counted_once_with_what_it_added(stack: Stack, streamed: list[Written]) -> None:
    """Every board holds its downloads once; every download has one ledger item: the stream's (nothing recorded) or
    the backfill's, with its entity and one in each of its boards."""
    assert stored(stack) == stack.oracle()
    items = ledger_items(stack)
    assert set(items) == {claim_key(download.key) for download in stack.written}
    streamed_keys = {claim_key(download.key) for download in streamed}
    for download in stack.written:
        item = items[claim_key(download.key)]
        if item[CLAIM_OWNER]["S"] == STREAM:
            assert claim_key(download.key) in streamed_keys
            assert BASE_CONTRIBUTION not in item
            continue
        assert item[CLAIM_OWNER]["S"] == BACKFILL
        assert item[BASE_ENTITY]["S"] == download.song
        assert stored_contribution(item) == dict.fromkeys(download.boards(stack.periods), 1)


# ------------------------------------------------------------------ what the ledger keeps of the backfill


def test_in_ledger_mode_each_download_the_backfill_counts_keeps_its_entity_and_contribution(aws: None) -> None:
    # given a ledger-mode stack (retractions on) with 30 downloads over months, days and genres, 6 of which the
    # stream counted first
    stack = ledger_stack()
    history = write_history(stack, 30)
    streamed = history[::5]
    assert [stream_counts(stack, download) for download in streamed] == [STREAM] * 6
    # when the backfill runs
    report = backfill(stack).run()
    # then it ran beside retractions, left the stream's 6 to it, and stored what it added for each of the other 24
    assert report.status == DONE
    assert (report.run.counted, report.run.claimed_by_stream) == (24, 6)
    assert_each_download_counted_once_with_what_it_added(stack, streamed)


def test_in_ledger_mode_two_runs_at_once_one_killed_and_a_rerun_count_each_download_once(aws: None) -> None:
    # given a ledger-mode stack with 40 downloads, and a first run (one segment, pages of 5)
    stack = ledger_stack(periods="month")
    write_history(stack, 40)
    late: list[Written] = []
    second: list[Any] = []

    def meanwhile(number: int) -> None:
        if number == 3:
            # a second run starts while the first is at its third page, and runs to its end; then a download is
            # written, which the stream claims and counts
            second.append(backfill(stack, segments=1, page_size=7).run())
            late.append(write(stack, "song2", "late", "2018-04-02T08:00:00Z", "rock"))
            assert stream_counts(stack, late[0]) == STREAM
        if number == 6:
            raise Killed  # the first run is killed at its sixth page

    # when the first run goes on beside the second, is killed, and is run again
    with pytest.raises(Killed):
        backfill(stack, Hooked(dynamodb(), before_scan=meanwhile), segments=1, page_size=5).run()
    rerun = backfill(stack, segments=1, page_size=5).run()
    # then the second run finished, the rerun found the backfill done, and every download is counted once: by one of
    # the runs, with what it added in the ledger, or (the late one) by the stream
    assert second[0].status == DONE
    assert rerun.finished
    assert_each_download_counted_once_with_what_it_added(stack, late)
    assert Counter(item[CLAIM_OWNER]["S"] for item in ledger_items(stack).values()) == {BACKFILL: 40, STREAM: 1}


def test_in_ledger_mode_a_run_killed_after_a_transaction_is_rerun_and_counts_nothing_twice(aws: None) -> None:
    # given a ledger-mode stack with 50 downloads, and a run killed just after its third transaction, before its
    # page's place was saved
    stack = ledger_stack()
    write_history(stack, 50)

    def kill_after_the_third(number: int, request: dict[str, Any]) -> None:
        if number == 3:
            raise Killed

    with pytest.raises(Killed):
        backfill(stack, Hooked(dynamodb(), after_transact=kill_after_the_third), segments=2, page_size=10).run()
    # when it is run again, and the stream then delivers every download
    report = backfill(stack, segments=2, page_size=10).run()
    owners = [stream_counts(stack, download) for download in stack.written]
    # then the rerun found what the killed run counted in the ledger, and the stream counted none of them again
    assert report.status == DONE
    assert report.run.claimed_by_backfill > 0
    assert owners == [BACKFILL] * 50
    assert_each_download_counted_once_with_what_it_added(stack, [])


# ------------------------------------------------------------------ nothing to release


def test_in_ledger_mode_the_release_check_says_there_is_nothing_to_release(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a ledger-mode stack whose history no backfill has counted
    stack = ledger_stack()
    write_history(stack, 5)
    clients = operator_clients(region=REGION)
    deployment = discover(clients, stack.table)
    # when the release is checked, as a table line and as JSON
    release = release_check(clients, deployment)
    text_code = run(["backfill", "--table", stack.table, "--release-check"])
    text = capsys.readouterr().out
    json_code = run(["backfill", "--table", stack.table, "--release-check", "--json"])
    answer = json.loads(capsys.readouterr().out)
    # then the deployment reads as ledger mode, and the answer is that the ledger is permanent: exit 0, not releasable
    assert deployment.ledger
    assert (release.ledger, release.releasable) == (True, False)
    assert (text_code, json_code) == (0, 0)
    assert "ledger mode: the ledger is permanent, nothing to release" in text
    assert (answer["ledger"], answer["releasable"], answer["verdict"]) == (True, False, LEDGER_VERDICT)


def test_in_ledger_mode_a_finished_backfill_says_nothing_is_to_be_released(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a ledger-mode stack with 8 downloads
    stack = ledger_stack()
    write_history(stack, 8)
    # when the backfill command runs to its end
    code = run(["backfill", "--table", stack.table, "--json"])
    report = json.loads(capsys.readouterr().out)
    # then its next step is none: nothing to release, keep ledger on (no backfill_claims to switch off)
    assert code == 0
    assert report["status"] == DONE
    assert "nothing to release" in report["next"]
    assert "ledger = true" in report["next"]
    assert "backfill_claims" not in report["next"]


def test_without_ledger_mode_the_deployment_reads_as_watermark_mode(aws: None) -> None:
    # given a stack with backfill_claims only
    stack = stack_with_claims()
    # when its deployment is read, then it is not in ledger mode, and its release check reads the claims
    clients = operator_clients(region=REGION)
    deployment = discover(clients, stack.table)
    assert not deployment.ledger
    assert not release_check(clients, deployment).ledger


# ------------------------------------------------------------------ what ledger mode still refuses


def test_in_ledger_mode_a_deployment_that_sums_is_refused(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    # given a ledger-mode stack that sums the downloads' Bytes
    stack = ledger_stack(SUM_ATTRIBUTE="Bytes")
    write_history(stack, 5)
    # when the backfill is run, then it is refused as not supported yet, and nothing was written
    assert run(["backfill", "--table", stack.table]) == 1
    assert "not supported yet" in capsys.readouterr().err
    assert (stored(stack), ledger_items(stack)) == ({}, {})


def test_in_ledger_mode_a_ledger_newer_than_the_aggregator_that_counted_is_refused(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a ledger turned on by a later apply than the module's, whose aggregator had counted a download before
    stack = ledger_stack()
    write_history(stack, 5)
    stream_counts(stack, stack.written[0])
    dynamodb().delete_item(TableName=stack.claims, Key={CLAIM_KEY: {"S": claim_key(stack.written[0].key)}})
    claims_created_later(stack, 1)
    # when the backfill is run, then it is refused, naming the ledger and what to do instead
    with pytest.raises(BackfillRefused, match="before the ledger recorded them"):
        backfill(stack).run()
    assert run(["backfill", "--table", stack.table]) == 1
    assert "attach a new stack (another name) with ledger = true" in capsys.readouterr().err


# ------------------------------------------------------------------ beside retractions: a board back at 0


def test_in_ledger_mode_a_board_whose_count_came_back_to_0_is_counted_into_and_returns_to_the_index(
    aws: None,
) -> None:
    # given a ledger-mode stack (months) whose aggregate of song1 in 2018-03 came back to 0 after retractions took
    # its downloads back, and so left the index: its count (0) kept, its period and order removed
    stack = ledger_stack(periods="month")
    dynamodb().put_item(
        TableName=stack.aggregates,
        Item={"songID": {"S": "song1"}, "SK": {"S": "2018-03"}, "DownloadCount": {"N": "0"}},
    )
    for n in range(3):
        write(stack, "song1", f"h{n}", "2018-03-10T10:00:00Z")
    # when the backfill counts the history
    report = backfill(stack).run()
    # then it counted into that board: back in the index, its order rebuilt from the count and the tie-breaker
    assert report.status == DONE
    assert stored(stack) == {("song1", "2018-03"): 3}
    item = dynamodb().get_item(TableName=stack.aggregates, Key={"songID": {"S": "song1"}, "SK": {"S": "2018-03"}})
    assert item["Item"]["Month"]["S"] == "2018-03"
    assert int(item["Item"]["LeaderboardOrder"]["N"]) == 3 * ORDER_SCALE + order_tiebreak("song1")
    assert_each_download_counted_once_with_what_it_added(stack, [])


def test_in_ledger_mode_each_ledger_item_records_when_the_scan_read_its_item(aws: None) -> None:
    # given a ledger-mode stack with 12 downloads, scanned in pages of 5 whose Date headers DynamoDB stamps a minute
    # apart
    stack = ledger_stack(periods="month")
    write_history(stack, 12)
    read_at: dict[str, int] = {}

    def stamped(request: dict[str, Any], page: dict[str, Any]) -> None:
        moment = 1_700_000_000 + 60 * len(set(read_at.values()))
        page["ResponseMetadata"]["HTTPHeaders"]["date"] = formatdate(moment, usegmt=True)
        for item in page.get("Items", []):
            read_at[claim_key({name: item[name] for name in ("songID", "SK")})] = moment

    # when the backfill runs
    report = backfill(stack, Hooked(dynamodb(), after_scan=stamped), segments=1, page_size=5).run()
    # then every ledger item it wrote records its page's Date (ReadAt, epoch seconds), three pages' worth
    assert report.status == DONE
    items = ledger_items(stack)
    assert {claim: int(items[claim][READ_AT]["N"]) for claim in read_at} == read_at
    assert len(set(read_at.values())) == 3
