"""`backfill --release-check` beside runs that have not ended: another run still scanning, a run killed, a run paused.

The claims may go only when no run can still claim and the aggregator has counted past every record created before
the last moment any run could count. The stream is played by the test's model of the aggregator (test_backfill's
`ClaimingModelAggregator` while the claims are on, the plain `ModelAggregator` once they are off); the oracle is the
test's own (every download it wrote, counted once in its month).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from leaderboard_core.claims import CLAIM_KEY, claim_key
from leaderboard_tools.backfill import DONE, UNFINISHED
from leaderboard_tools.backfill import runs as backfill_runs
from leaderboard_tools.backfill.release import release_check
from leaderboard_tools.backfill.runs import LEASE_SECONDS, RUNS, RUNS_ITEM, run_item
from leaderboard_tools.backfill.segments import DynamoTime
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import operator_clients
from tests.unit.tools.operator_stack import REGION, ModelAggregator, run
from tests.unit.tools.test_backfill import (
    ClaimingModelAggregator,
    Hooked,
    Killed,
    Stack,
    backfill,
    claims_in,
    dynamodb,
    one_request_at_a_time,  # noqa: F401 - the fixture: moto answers one DynamoDB request at a time
    stack_with_claims,
    stored,
    write,
    write_history,
)

WAIT_SECONDS = 10.0


def dynamo_now(stack: Stack, shift: float = 0.0) -> Callable[[], float]:
    """DynamoDB's clock (the latest it can be now), moved by `shift` seconds: a run that ended in the past, a check
    made after a run's lease has run out."""
    clock = DynamoTime(dynamodb(), stack.table)
    return lambda: clock.latest() + shift


def release_after_the_lease(stack: Stack) -> Any:
    clients = operator_clients(region=REGION)
    return release_check(clients, discover(clients, stack.table), dynamo_time=dynamo_now(stack, LEASE_SECONDS + 1))


def release_now(stack: Stack) -> Any:
    clients = operator_clients(region=REGION)
    return release_check(clients, discover(clients, stack.table))


def release_command(stack: Stack, capsys: pytest.CaptureFixture[str]) -> tuple[int | BaseException, dict[str, Any]]:
    capsys.readouterr()
    code = run(["backfill", "--table", stack.table, "--release-check", "--output", "json"])
    return code, json.loads(capsys.readouterr().out)


def registered_runs(stack: Stack) -> list[str]:
    item = dynamodb().get_item(TableName=stack.claims, Key={CLAIM_KEY: {"S": RUNS_ITEM}}, ConsistentRead=True)
    return sorted(item.get("Item", {}).get(RUNS, {}).get("SS", []))


def test_a_download_a_run_still_scanning_counted_after_another_run_ended_keeps_the_claims(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given 10 downloads of history, and run B scanning them three at a time; before B's second page, run A runs to
    # its end (its end recorded two minutes before what follows), the aggregator reads every record so far (each left
    # to the backfill), and a download is written
    stack = stack_with_claims(periods="month", category=False)
    write_history(stack, 10, genres=False)
    aggregator = ClaimingModelAggregator(stack.moto, claims_table=stack.claims)
    late: list[Any] = []

    def run_a_ends_then_a_download_is_written(number: int) -> None:
        if number == 2:
            assert backfill(stack, segments=1, page_size=3, dynamo_time=dynamo_now(stack, -120)).run().status == DONE
            aggregator.run()
            late.append(write(stack, "song9", "late", "2018-03-20T10:00:00Z"))

    def killed_once_it_counted_the_late_download(number: int, request: dict[str, Any]) -> None:
        if late and claim_key(late[0].key) in claims_in(request):
            raise Killed

    b = Hooked(
        dynamodb(),
        before_scan=run_a_ends_then_a_download_is_written,
        after_transact=killed_once_it_counted_the_late_download,
    )
    # when B, still scanning, claims and counts that download, and is killed
    with pytest.raises(Killed):
        backfill(stack, b, segments=1, page_size=3).run()
    assert stored(stack) == stack.oracle()
    # then the release check refuses: B may still count (it never ended), and it names B
    code, answer = release_command(stack, capsys)
    assert (code, answer["releasable"]) == (4, False)
    assert len(answer["running"]) == 1
    assert "may still count" in answer["verdict"]
    # and once B's lease has run out, the check ends B, and still refuses: the download B counted is on the stream,
    # not yet counted past by the aggregator (turned off now, the aggregator would count it again: 2 against 1)
    after_lease = release_after_the_lease(stack)
    assert [seen.run_id for seen in after_lease.ended_now] == answer["running"]
    assert (after_lease.waiting, after_lease.releasable) == (1, False)
    # and once the aggregator has read it (left to the backfill), the claims may go, and the boards stay exact
    aggregator.run()
    code, answer = release_command(stack, capsys)
    assert (code, answer["releasable"], answer["running"]) == (0, True, [])
    ModelAggregator(stack.moto).run()
    assert stored(stack) == stack.oracle()


def test_a_killed_run_keeps_the_claims_until_its_lease_runs_out_and_a_rerun_finishes_the_backfill(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given 12 downloads, a run killed after its second transaction, and a rerun that finishes the backfill
    stack = stack_with_claims(periods="month", category=False)
    write_history(stack, 12, genres=False)

    def kill_after_the_second(number: int, request: dict[str, Any]) -> None:
        if number == 2:
            raise Killed

    with pytest.raises(Killed):
        backfill(stack, Hooked(dynamodb(), after_transact=kill_after_the_second), segments=1, page_size=3).run()
    rerun = backfill(stack, segments=1, page_size=3).run()
    assert rerun.status == DONE
    aggregator = ClaimingModelAggregator(stack.moto, claims_table=stack.claims)
    aggregator.run()
    assert len(registered_runs(stack)) == 2
    # when the release is checked within the killed run's lease, then it refuses, naming the one run that never ended
    within = release_now(stack)
    assert (within.releasable, len(within.running)) == (False, 1)
    assert "ended by this check once it has not been heard from" in within.verdict
    # when it is checked after the lease, then the killed run is ended, and the claims may go (the aggregator has
    # counted past every record: nothing was written since)
    after = release_after_the_lease(stack)
    assert [seen.run_id for seen in after.ended_now] == [seen.run_id for seen in within.running]
    assert (after.waiting, after.releasable) == (0, True)
    assert "ended 1 run not heard from" in after.verdict
    # and a check run again ends nothing more and says the same
    again = release_now(stack)
    assert (again.ended_now, again.running, again.releasable) == ([], [], True)
    ModelAggregator(stack.moto).run()
    assert stored(stack) == stack.oracle()


def test_a_run_ended_by_the_release_check_while_paused_counts_nothing_more_when_it_wakes(aws: None) -> None:
    # given 9 downloads and a run paused before its second page while another run finishes the backfill; the check,
    # after the paused run's lease, ends it; then a download is written
    stack = stack_with_claims(periods="month", category=False)
    write_history(stack, 9, genres=False)
    ended: list[Any] = []

    def paused_past_its_lease(number: int) -> None:
        if number == 2:
            assert backfill(stack, segments=1, page_size=3).run().status == DONE
            ended.append(release_after_the_lease(stack))
            write(stack, "song9", "late", "2018-03-20T10:00:00Z")

    # when the paused run wakes and scans on
    report = backfill(stack, Hooked(dynamodb(), before_scan=paused_past_its_lease), segments=1, page_size=3).run()
    # then the check had ended it (the other run had ended itself), and the first transaction it sends is refused:
    # it stops unfinished, saying why, having counted nothing of the late download
    assert len(ended[0].ended_now) == 1
    assert report.status == UNFINISHED
    assert "ended by `backfill --release-check`" in (report.error or "")
    assert ("song9", "2018-03") not in stored(stack)
    # and the stream counts that download (its claim is the stream's), once
    ClaimingModelAggregator(stack.moto, claims_table=stack.claims).run()
    assert stored(stack) == stack.oracle()
    assert release_now(stack).releasable


def test_two_runs_that_both_end_release_once_the_aggregator_passed_the_later_end(aws: None) -> None:
    # given two runs at once (the second begins before the first's second page) that both end
    stack = stack_with_claims(periods="month", category=False)
    write_history(stack, 9, genres=False)
    second: list[Any] = []

    def another_run(number: int) -> None:
        if number == 2:
            second.append(backfill(stack, segments=1, page_size=3).run())

    first = backfill(stack, Hooked(dynamodb(), before_scan=another_run), segments=1, page_size=3).run()
    assert (first.status, second[0].status) == (DONE, DONE)
    # when the release is checked before the aggregator read the stream, then it waits on the 9 records; no run is
    # running, none is ended by the check
    before = release_now(stack)
    assert (before.running, before.ended_now, before.waiting, before.releasable) == ([], [], 9, False)
    # when the aggregator has read them, then the claims may go, with no lease to wait out
    ClaimingModelAggregator(stack.moto, claims_table=stack.claims).run()
    after = release_now(stack)
    assert (after.running, after.ended_now, after.waiting, after.releasable) == ([], [], 0, True)
    assert after.counted_until is not None
    assert after.counted_until >= max(first.ended_at or 0, second[0].ended_at or 0)


def test_a_live_run_keeps_saying_so_and_is_not_ended(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # given heartbeats every 10 ms, and a run paused before its second page while another run finishes the backfill
    monkeypatch.setattr(backfill_runs, "HEARTBEAT_SECONDS", 0.01)
    stack = stack_with_claims(periods="month", category=False)
    write_history(stack, 6, genres=False)
    seen: list[Any] = []

    def heard_twice(number: int) -> None:
        if number != 2:
            return
        (run_id,) = registered_runs(stack)
        assert backfill(stack, segments=1, page_size=3).run().status == DONE
        first = heard_at(stack, run_id)
        deadline = time.monotonic() + WAIT_SECONDS
        while heard_at(stack, run_id) == first and time.monotonic() < deadline:
            time.sleep(0.02)
        seen.append((first, heard_at(stack, run_id), release_now(stack)))

    # when the release is checked while it is paused
    report = backfill(stack, Hooked(dynamodb(), before_scan=heard_twice), segments=1, page_size=3).run()
    # then its heartbeat moved, the check found it running and ended nothing, and the run went on to its end
    first, later, check = seen[0]
    assert later != first
    assert (len(check.running), check.ended_now, check.releasable) == (1, [], False)
    assert report.status == DONE


def heard_at(stack: Stack, run_id: str) -> float:
    item = dynamodb().get_item(TableName=stack.claims, Key={CLAIM_KEY: {"S": run_item(run_id)}}, ConsistentRead=True)
    return float(item["Item"]["HeardAt"]["N"])


def test_each_segment_counts_behind_a_fence_of_its_own_which_the_run_deletes_at_its_end(aws: None) -> None:
    # given 30 downloads and a run of three segments
    stack = stack_with_claims(periods="month", category=False)
    write_history(stack, 30, genres=False)
    client = Hooked(dynamodb())
    # when it runs to its end
    assert backfill(stack, client, segments=3, page_size=4).run().status == DONE
    # then every transaction ends with one ConditionCheck, on the fence of its segment: three fences, one per segment,
    # so that a segment's transactions never conflict with another's on it
    checks = [
        [action for action in request["TransactItems"] if "ConditionCheck" in action] for request in client.transactions
    ]
    assert all(
        len(found) == 1 and "ConditionCheck" in request["TransactItems"][-1]
        for found, request in zip(checks, client.transactions, strict=True)
    )
    fences = {found[0]["ConditionCheck"]["Key"][CLAIM_KEY]["S"] for found in checks}
    (run_id,) = registered_runs(stack)
    assert fences == {f"backfill#fence#{run_id}#{segment}" for segment in range(3)}
    # and none is left once the run has ended, its end recorded
    left = [
        dynamodb().get_item(TableName=stack.claims, Key={CLAIM_KEY: {"S": fence}}, ConsistentRead=True).get("Item")
        for fence in fences
    ]
    assert left == [None, None, None]
    item = dynamodb().get_item(TableName=stack.claims, Key={CLAIM_KEY: {"S": run_item(run_id)}}, ConsistentRead=True)
    assert "EndedAt" in item["Item"]
    assert stored(stack) == stack.oracle()


def test_a_cancellation_reads_the_fence_last_ended_when_gone_and_sent_again_on_a_conflict() -> None:
    # given a chunk of one download counted in one aggregate, and its transaction's three reasons (claim, aggregate,
    # fence)
    from leaderboard_tools.backfill import ScannedDownload
    from leaderboard_tools.backfill.transactions import read_cancellation
    from tests.unit.tools.test_backfill import _deployment

    chunk = [ScannedDownload({"songID": {"S": "song1"}, "SK": {"S": "d1"}}, "download#d1", "song1", ("2018-03",))]
    aggregates = [("song1", "2018-03")]
    gone = [{"Code": "None"}, {"Code": "None"}, {"Code": "ConditionalCheckFailed"}]
    conflict = [{"Code": "None"}, {"Code": "None"}, {"Code": "TransactionConflict"}]
    # when each is read, then a fence gone ends the run, a conflict on it sends the same again, and neither is read
    # as the aggregate's or the claim's
    ended = read_cancellation(chunk, aggregates, gone, _deployment(), fenced=True)
    assert (ended.ended, ended.retry, ended.claimed, ended.refused, ended.errors) == (True, False, {}, [], [])
    again = read_cancellation(chunk, aggregates, conflict, _deployment(), fenced=True)
    assert (again.ended, again.retry, again.claimed, again.refused, again.errors) == (False, True, {}, [], [])
