"""Review of recover's drift step with one reader per shard (recover/drift.py, rebase_check.py): every aggregate the
messages name, where no key the rebase left counts, is measured against the ledger between two consistent scans,
set (with its index order) on the condition that it holds the count read, and measured again after every write; a
message is deleted only once each aggregate it names equals what the ledger counts in it and a recount that writes
nothing finds it exact. Each test is named for what should hold, against another writer interposed where the AWS
isolation rules allow it. On moto, with the fixtures of test_recover_rebase_check.py."""

from __future__ import annotations

import dataclasses
import inspect
from decimal import Decimal
from typing import Any

import boto3

from leaderboard_core.claims import CLAIM_KEY, backfill_claim, claim_key
from leaderboard_core.index_layout import ORDER_SCALE, leaderboard_partition, order_of
from leaderboard_tools.deployment import discover
from leaderboard_tools.operator_aws import OperatorClients, operator_clients
from leaderboard_tools.recover.drift import DriftSettler
from tests.unit.tools.operator_stack import (
    MONTH,
    REGION,
    MotoStack,
    aggregate_item,
    set_count,
    stored_count,
    write_download,
)
from tests.unit.tools.test_recover_read_back import (
    CountingReconciler,
    delete_download,
    download_key,
    one_reader_stack,
    queue_depth,
    send,
    stale_ledger_item,
)
from tests.unit.tools.test_recover_rebase_check import (
    LedgerWrittenAtEveryRead,
    expiry_kept_in_ledger,
    records_trimmed,
    recover_once,
    refused_record,
)

FEBRUARY = "2018-02"
SHARD = "shardId-00000001000000000000-aaaa0000"


def version(sequence: int) -> dict[str, str]:
    return {"S": f"{SHARD}|{sequence:040d}"}


def aggregate_add(stack: MotoStack, board: str, amount: int) -> dict[str, Any]:
    """The aggregator's ADD to song1's aggregate in `board`, count and order moved together."""
    names = stack.names
    return {
        "Update": {
            "TableName": stack.aggregates_table,
            "Key": {names.entity: {"S": "song1"}, names.sort_key: {"S": board}},
            "UpdateExpression": "ADD #count :amount, #order :scaled",
            "ExpressionAttributeNames": {"#count": names.count, "#order": names.order},
            "ExpressionAttributeValues": {
                ":amount": {"N": str(amount)},
                ":scaled": {"N": str(amount * ORDER_SCALE)},
            },
        }
    }


def ledger_put(stack: MotoStack, download_id: str, board: str, sequence: int | None) -> dict[str, Any]:
    """song1's ledger item of `download_id` counting `board`: the handler's (with a Version) or, with no sequence, as
    the backfill writes it (no Version)."""
    item: dict[str, Any] = {
        CLAIM_KEY: {"S": claim_key(download_key(stack, "song1", download_id))},
        "Entity": {"S": "song1"},
        "Contribution": {"M": {board: {"N": "1"}}},
    }
    if sequence is not None:
        item["Version"] = version(sequence)
    else:
        item |= backfill_claim("music-claims", download_key(stack, "song1", download_id))["Put"]["Item"]
    return {"Put": {"TableName": "music-claims", "Item": item}}


def transact(actions: list[dict[str, Any]]) -> None:
    """One transaction of the aggregator's (or of another recover's rebase): the ledger moved with its aggregates."""
    boto3.client("dynamodb", region_name=REGION).transact_write_items(TransactItems=actions)


def rebased(stack: MotoStack, source: str, target: str) -> None:
    """Another recover's rebase moving song1's versionless download d1 from `source` to `target`: its ledger item and
    both aggregates in one transaction."""
    transact([ledger_put(stack, "d1", target, None), aggregate_add(stack, source, -1), aggregate_add(stack, target, 1)])


def versionless_ledger_item(stack: MotoStack) -> None:
    """song1's download d1 in MONTH, its ledger item as the backfill wrote it (no Version), counted once."""
    write_download(stack, "song1", "d1")
    transact([ledger_put(stack, "d1", MONTH, None)])
    set_count(stack, "song1", MONTH, 1)


def clients_with(dynamodb: Any) -> OperatorClients:
    real = operator_clients(region=REGION)
    return OperatorClients(dynamodb, real.dynamodbstreams, None, real.sqs)


class Interposed:
    """The DynamoDB client, with `before` run once at the first call that `matches` (what another writer does then)."""

    def __init__(self, dynamodb: Any, operation: str, matches: Any, before: Any, after: Any = None) -> None:
        self._dynamodb = dynamodb
        self._operation = operation
        self._matches = matches
        self._before = before
        self._after = after
        self.fired = False

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._dynamodb, name)
        if name != self._operation:
            return attribute

        def call(**parameters: Any) -> Any:
            if self.fired or not self._matches(parameters):
                return attribute(**parameters)
            self.fired = True
            self._before()
            answer = attribute(**parameters)
            if self._after is not None:
                self._after()
            return answer

        return call


def reads_aggregate(stack: MotoStack, board: str) -> Any:
    """The drift's read of song1's aggregate in `board` (its GetItem of the aggregate's key, not the recount's)."""
    return lambda parameters: (
        parameters.get("TableName") == stack.aggregates_table
        and parameters.get("Key", {}).get(stack.names.sort_key) == {"S": board}
        and any(frame.function == "stored" and frame.filename.endswith("drift.py") for frame in inspect.stack())
    )


def sets_drift(stack: MotoStack) -> Any:
    """The drift's guarded ADD: an UpdateItem of an aggregate conditioned on the count read."""
    return lambda parameters: (
        parameters.get("TableName") == stack.aggregates_table
        and ":stored" in parameters.get("ExpressionAttributeValues", {})
    )


# ---------------------------------------------------------------------------------------------------- findings


def test_an_aggregate_is_set_to_what_the_ledger_counts_when_its_count_returns_to_the_count_read_before_the_add(
    aws: None,
) -> None:
    # given a one-reader deployment with song1's aggregate holding 7 where its one download counts 1, its
    # refused_record, and, between the drift's measurement and its ADD, another recover setting it to 1 and the
    # aggregator then applying six new downloads of song1 (ledger and aggregate in one transaction each)
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song1", MONTH, 7)
    refused_record(stack, "song1", MONTH)

    def another_recover_then_six_downloads() -> None:
        transact([aggregate_add(stack, MONTH, -6)])
        for number in range(2, 8):
            write_download(stack, "song1", f"d{number}")
            transact([ledger_put(stack, f"d{number}", MONTH, number), aggregate_add(stack, MONTH, 1)])

    real = operator_clients(region=REGION)
    dynamodb = Interposed(real.dynamodb, "update_item", sets_drift(stack), another_recover_then_six_downloads)
    # when recover runs
    report, _ = recover_once(stack, clients=clients_with(dynamodb))
    # then the aggregate holds what the ledger (and the table) counts: seven downloads
    assert dynamodb.fired
    assert stored_count(stack, "song1", MONTH) == 7, report.as_json()


def test_a_versionless_ledger_item_moved_away_and_back_between_the_scans_does_not_set_its_aggregate_wrong(
    aws: None,
) -> None:
    # given a one-reader deployment whose download d1 of song1 the backfill counted (no Version) and whose download d9
    # the aggregator counted, song1's aggregate holding 8 (a drift of 6), its refused_record; around the drift's read of
    # the aggregate another recover's rebase moves d1 to February and back (its item edited there and back, the
    # records not delivered yet), and before the drift's ADD the aggregator applies d9's deletion
    stack = one_reader_stack()
    versionless_ledger_item(stack)
    write_download(stack, "song1", "d9")
    transact([ledger_put(stack, "d9", MONTH, 9)])
    set_count(stack, "song1", MONTH, 8)
    set_count(stack, "song1", FEBRUARY, 0)
    refused_record(stack, "song1", MONTH)

    def moved_away() -> None:
        rebased(stack, MONTH, FEBRUARY)

    def moved_back() -> None:
        rebased(stack, FEBRUARY, MONTH)

    def d9_deleted() -> None:
        delete_download(stack, "song1", "d9")
        gone = ledger_put(stack, "d9", MONTH, 10)
        gone["Put"]["Item"]["Contribution"] = {"M": {}}
        transact([gone, aggregate_add(stack, MONTH, -1)])

    real = operator_clients(region=REGION)
    around_the_read = Interposed(real.dynamodb, "get_item", reads_aggregate(stack, MONTH), moved_away, moved_back)
    dynamodb = Interposed(around_the_read, "update_item", sets_drift(stack), d9_deleted)
    # when recover runs
    report, _ = recover_once(stack, clients=clients_with(dynamodb))
    # then song1's aggregate in MONTH holds what the ledger counts in it (d1), or is left as it was (7 after d9)
    assert around_the_read.fired
    assert dynamodb.fired
    assert stored_count(stack, "song1", MONTH) in (1, 7), report.as_json()


def test_a_versionless_ledger_item_moved_away_and_back_around_the_read_is_caught_by_the_adds_condition(
    aws: None,
) -> None:
    # given a one-reader deployment whose download of song1 the backfill counted (no Version), song1's aggregate holding
    # 7, its refused_record, and, around the drift's read of the aggregate, another recover's rebase moving the key to
    # February and back (the table's item edited there and back, its records not delivered yet)
    stack = one_reader_stack()
    versionless_ledger_item(stack)
    set_count(stack, "song1", MONTH, 7)
    set_count(stack, "song1", FEBRUARY, 0)
    refused_record(stack, "song1", MONTH)

    def moved_away() -> None:
        rebased(stack, MONTH, FEBRUARY)

    def moved_back() -> None:
        rebased(stack, FEBRUARY, MONTH)

    real = operator_clients(region=REGION)
    dynamodb = Interposed(real.dynamodb, "get_item", reads_aggregate(stack, MONTH), moved_away, moved_back)
    # when recover runs
    report, _ = recover_once(stack, clients=clients_with(dynamodb))
    # then the scans read the same, but the ADD conditioned on the count read (6) failed on 7, the drift was measured
    # again, and the aggregate holds what the ledger counts; the message, exact, is deleted
    assert dynamodb.fired
    assert stored_count(stack, "song1", MONTH) == 1
    assert report.drift is not None
    assert report.drift.settled == [{"entityId": "song1", "board": MONTH, "stored": "7", "ledger": "1"}]
    assert (report.deleted, queue_depth(stack)) == (1, 0)


def test_a_message_is_deleted_only_once_its_aggregate_holds_what_the_ledger_counts(aws: None) -> None:
    # given the versionless key moved away and back around the drift's read, as above, and a second download of song1
    # written to the table meanwhile (its record not delivered yet)
    stack = one_reader_stack()
    versionless_ledger_item(stack)
    set_count(stack, "song1", MONTH, 7)
    set_count(stack, "song1", FEBRUARY, 0)
    refused_record(stack, "song1", MONTH)

    def moved_away() -> None:
        rebased(stack, MONTH, FEBRUARY)
        write_download(stack, "song1", "d2")

    def moved_back() -> None:
        rebased(stack, FEBRUARY, MONTH)

    real = operator_clients(region=REGION)
    dynamodb = Interposed(real.dynamodb, "get_item", reads_aggregate(stack, MONTH), moved_away, moved_back)
    # when recover runs, and then the mapping delivers the second download
    report, _ = recover_once(stack, clients=clients_with(dynamodb))
    transact([ledger_put(stack, "d2", MONTH, 2), aggregate_add(stack, MONTH, 1)])
    # then the message is kept, or song1's aggregate equals its two downloads
    assert dynamodb.fired
    assert queue_depth(stack) == 1 or stored_count(stack, "song1", MONTH) == 2, report.as_json()


def test_an_aggregate_set_to_what_the_ledger_counts_ranks_by_that_count(aws: None) -> None:
    # given a one-reader deployment whose download of song1 counts once, its aggregate's count edited by hand to 7
    # (its order left as the count 1's), and its refused_record
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    names = stack.names
    boto3.client("dynamodb", region_name=REGION).update_item(
        TableName=stack.aggregates_table,
        Key={names.entity: {"S": "song1"}, names.sort_key: {"S": MONTH}},
        UpdateExpression="SET #count = :count",
        ExpressionAttributeNames={"#count": names.count},
        ExpressionAttributeValues={":count": {"N": "7"}},
    )
    refused_record(stack, "song1", MONTH)
    # when recover runs
    report, _ = recover_once(stack)
    # then the aggregate is set to 1 and ranks as a count of 1
    item = aggregate_item(stack, "song1", MONTH)
    assert item is not None
    assert (report.deleted, item[names.count]["N"]) == (1, "1")
    assert Decimal(item[names.order]["N"]) == order_of(1, "song1")


def test_an_aggregate_is_set_while_the_ledger_moves_only_in_other_aggregates(aws: None) -> None:
    # given a one-reader deployment with song1's aggregate holding a count no download explains, its refused_record,
    # and the aggregator applying a download of song9 in February between every two scans of the ledger
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song1", MONTH, 999999999999)
    refused_record(stack, "song1", MONTH)
    real = operator_clients(region=REGION)
    dynamodb = LedgerWrittenAtEveryRead(real.dynamodb, stack.aggregates_table)
    # when recover runs
    report, _ = recover_once(stack, clients=clients_with(dynamodb))
    # then song1's aggregate, which no key that moved counts in, is set to what the ledger counts; the message deleted
    assert dynamodb.moves >= 1
    assert stored_count(stack, "song1", MONTH) == 1, report.as_json()
    assert (report.deleted, queue_depth(stack)) == (1, 0)


def test_an_aggregate_set_up_to_0_stays_out_of_the_sparse_index(aws: None) -> None:
    # given a one-reader deployment with song2's aggregate edited by hand to -3 where nothing counts, out of the index
    # (no Month, no order), and its refused_record
    stack = one_reader_stack()
    set_count(stack, "song2", MONTH, -3)
    names = stack.names
    boto3.client("dynamodb", region_name=REGION).update_item(
        TableName=stack.aggregates_table,
        Key={names.entity: {"S": "song2"}, names.sort_key: {"S": MONTH}},
        UpdateExpression="REMOVE #period, #order",
        ExpressionAttributeNames={"#period": names.period, "#order": names.order},
    )
    refused_record(stack, "song2", MONTH)
    # when recover runs
    report, _ = recover_once(stack)
    # then the aggregate holds 0 and is still out of the index
    item = aggregate_item(stack, "song2", MONTH)
    assert item is not None
    assert (report.deleted, item[names.count]["N"]) == (1, "0")
    assert names.period not in item


def test_a_message_is_kept_while_its_aggregate_differs_from_the_ledger_though_it_equals_the_tables_recount(
    aws: None,
) -> None:
    # given a one-reader deployment whose download d1 of song1 counts once, song1's aggregate holding 2 (a drift of 1,
    # which its refused_record reports), and a second download d2 written to the table after the rebase and before
    # the check, its record not delivered yet
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song1", MONTH, 2)
    refused_record(stack, "song1", MONTH)

    class WrittenMeanwhile(CountingReconciler):
        def run(self, targets: Any, repair: bool = False, **options: Any) -> Any:
            write_download(stack, "song1", "d2")
            return super().run(targets, repair=repair, **options)

    # when recover runs, and then the mapping delivers d2 (its ledger item and the aggregate's ADD together)
    report, _ = recover_once(stack, WrittenMeanwhile)
    transact([ledger_put(stack, "d2", MONTH, 2), aggregate_add(stack, MONTH, 1)])
    # then the message is kept, or song1's aggregate equals its two downloads
    assert queue_depth(stack) == 1 or stored_count(stack, "song1", MONTH) == 2, report.as_json()


def test_an_aggregate_another_recover_set_before_the_add_is_measured_again_and_not_moved_twice(aws: None) -> None:
    # given a one-reader deployment with song1's aggregate holding 7 where its one download counts 1, its
    # refused_record, and another recover setting it to 1 between this run's measurement and its ADD
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song1", MONTH, 7)
    refused_record(stack, "song1", MONTH)
    real = operator_clients(region=REGION)
    dynamodb = Interposed(
        real.dynamodb, "update_item", sets_drift(stack), lambda: transact([aggregate_add(stack, MONTH, -6)])
    )
    # when recover runs
    report, _ = recover_once(stack, clients=clients_with(dynamodb))
    # then its ADD's condition failed, the drift measured again is 0, and the aggregate holds 1; the message is deleted
    assert dynamodb.fired
    assert stored_count(stack, "song1", MONTH) == 1
    assert report.drift is not None
    assert (report.drift.settled, report.drift.left) == ([], [])
    assert (report.deleted, queue_depth(stack)) == (1, 0)


# ---------------------------------------------------------------------------------------------------- what held


def test_a_move_between_two_months_applied_between_the_scans_is_measured_again_and_the_aggregate_set_right(
    aws: None,
) -> None:
    # given a one-reader deployment with song1's downloads d1 and d5 in MONTH (both counted there), its aggregate
    # holding 7, its refused_record, and, at the drift's first read of the aggregate, the aggregator applying d5's edit
    # to February (the ledger's Version grows; both aggregates ADDed in the same transaction)
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    write_download(stack, "song1", "d5")
    transact([ledger_put(stack, "d5", MONTH, 5)])
    set_count(stack, "song1", MONTH, 7)
    set_count(stack, "song1", FEBRUARY, 0)
    refused_record(stack, "song1", MONTH)

    def edited_to_february() -> None:
        write_download(stack, "song1", "d5", timestamp="2018-02-10T10:00:00Z")
        transact(
            [ledger_put(stack, "d5", FEBRUARY, 6), aggregate_add(stack, MONTH, -1), aggregate_add(stack, FEBRUARY, 1)]
        )

    real = operator_clients(region=REGION)
    dynamodb = Interposed(real.dynamodb, "get_item", reads_aggregate(stack, MONTH), edited_to_february)
    # when recover runs
    report, _ = recover_once(stack, clients=clients_with(dynamodb))
    # then the scans differed, the ledger was measured again, and song1 in MONTH holds what the ledger counts (d1);
    # February keeps d5; the message, exact, is deleted
    assert dynamodb.fired
    assert (stored_count(stack, "song1", MONTH), stored_count(stack, "song1", FEBRUARY)) == (1, 1)
    assert report.drift is not None
    assert report.drift.settled == [{"entityId": "song1", "board": MONTH, "stored": "6", "ledger": "1"}]
    assert (report.deleted, queue_depth(stack)) == (1, 0)


def test_an_aggregate_the_ledger_counts_nothing_in_is_set_to_0_and_leaves_the_sparse_index(aws: None) -> None:
    # given a one-reader deployment with song2's aggregate holding 3 where no download and no ledger item counts, and
    # its refused_record
    stack = one_reader_stack()
    set_count(stack, "song2", MONTH, 3)
    refused_record(stack, "song2", MONTH)
    # when recover runs
    report, _ = recover_once(stack)
    # then the aggregate is 0 and out of the index (no Month, no order), and the message is deleted
    names = stack.names
    item = aggregate_item(stack, "song2", MONTH)
    assert item is not None
    assert item[names.count]["N"] == "0"
    assert names.period not in item
    assert names.order not in item
    assert (report.deleted, queue_depth(stack)) == (1, 0)


def test_with_leaderboard_shards_an_aggregate_with_no_item_is_created_in_its_shards_partition(aws: None) -> None:
    # given a one-reader deployment over 3 index partitions whose download of song1 its ledger counts, song1's
    # aggregate missing (deleted by hand), and its refused_record
    stack = one_reader_stack(shards=3)
    stale_ledger_item(stack, MONTH)
    names = stack.names
    boto3.client("dynamodb", region_name=REGION).delete_item(
        TableName=stack.aggregates_table, Key={names.entity: {"S": "song1"}, names.sort_key: {"S": MONTH}}
    )
    refused_record(stack, "song1", MONTH)
    # when recover runs
    report, _ = recover_once(stack)
    # then the aggregate is created with the ledger's count, in song1's partition of the month, ordered as a count of 1
    item = aggregate_item(stack, "song1", MONTH)
    assert item is not None
    assert item[names.count]["N"] == "1"
    assert item[names.period]["S"] == leaderboard_partition(MONTH, "song1", 3)
    assert Decimal(item[names.order]["N"]) == order_of(1, "song1")
    assert (report.deleted, queue_depth(stack)) == (1, 0)


def test_a_refused_record_naming_a_board_the_deployment_does_not_keep_is_kept(aws: None) -> None:
    # given a one-reader deployment keeping month boards only, and a refused_record of song1's aggregate in a day board
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song1", "2018-03-10", 5)
    refused_record(stack, "song1", "2018-03-10")
    # when recover runs
    report, _ = recover_once(stack)
    # then the check cannot recount that board and the message is kept, never deleted unchecked
    assert (report.deleted, queue_depth(stack)) == (0, 1)
    assert stored_count(stack, "song1", "2018-03-10") == 5


def test_a_trimmed_message_sets_an_aggregate_of_a_month_no_download_counts_in_and_is_deleted(aws: None) -> None:
    # given a one-reader deployment whose download of song1 is exact, song2's aggregate in December 2017 holding 3 where
    # nothing counts (no download of that month at all), and the aggregator's records_trimmed (every board)
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song2", "2017-12", 3)
    records_trimmed(stack)
    # when recover runs
    report, _ = recover_once(stack)
    # then the check recounts that month too: song2's aggregate is set to what the ledger counts (0), and the message,
    # everything exact, is deleted
    assert stored_count(stack, "song2", "2017-12") == 0
    assert report.drift is not None
    assert report.drift.settled == [{"entityId": "song2", "board": "2017-12", "stored": "3", "ledger": "0"}]
    assert (report.deleted, queue_depth(stack)) == (1, 0)


def test_a_refused_record_naming_no_aggregate_is_deleted_and_listed_with_its_reason(aws: None) -> None:
    # given a one-reader deployment whose aggregates are exact, and a refused_record that names neither an aggregate nor
    # a record (as the band queue's reader reports a band record it cannot parse)
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    send(stack, {"kind": "refused_record", "reason": "band record not understood: x", "sequenceNumber": "5"})
    # when recover runs
    report, _ = recover_once(stack)
    # then nothing is recounted for it (nothing names what to recount), and it is deleted, listed with its reason
    assert report.rebased is None
    assert report.drift is None
    assert report.refused_records == [{"reason": "band record not understood: x", "sequenceNumber": "5"}]
    assert (report.deleted, queue_depth(stack)) == (1, 0)


def test_a_summing_deployment_is_rebased_and_keeps_the_message_saying_its_boards_cannot_be_checked(aws: None) -> None:
    # given a one-reader deployment that sums an attribute (SUM_ATTRIBUTE), song1's aggregate holding 7 by hand, a
    # ledger item counting a March download whose item carries no amount, and the aggregate's refused_record
    stack = one_reader_stack(settings={"SUM_ATTRIBUTE": "Bytes"})
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song1", MONTH, 7)
    refused_record(stack, "song1", MONTH)
    # when recover runs
    report, _ = recover_once(stack)
    # then the rebase moves the key to what its item sums (nothing: no amount), the drift step sets nothing, and the
    # message is kept saying that a recount cannot check a summed board
    assert report.rebased is not None
    assert report.rebased.moved == 1
    assert report.drift is None
    assert stored_count(stack, "song1", MONTH) == 6
    (kept,) = report.kept
    assert "SUM_ATTRIBUTE" in kept["note"]
    assert "could not be checked" in kept["note"]
    assert queue_depth(stack) == 1


class PagesOfOne:
    """The DynamoDB client, its scans read one item a page, with `between_pages` run once after the first page of the
    drift's first scan of the ledger."""

    def __init__(self, dynamodb: Any, between_pages: Any) -> None:
        self._dynamodb = dynamodb
        self._between_pages = between_pages
        self.fired = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dynamodb, name)

    def get_paginator(self, operation: str) -> Any:
        paginator = self._dynamodb.get_paginator(operation)
        outer = self

        class OneItemPages:
            def paginate(self, **parameters: Any) -> Any:
                in_drift = any(
                    frame.function == "ledger" and frame.filename.endswith("drift.py") for frame in inspect.stack()
                )
                for page in paginator.paginate(**parameters, PaginationConfig={"PageSize": 1}):
                    yield page
                    if in_drift and not outer.fired:
                        outer.fired = True
                        outer._between_pages()

        return OneItemPages()


def test_a_download_counted_between_two_pages_of_a_scan_is_measured_again_or_in_both_scans(aws: None) -> None:
    # given a one-reader deployment with song1's aggregate holding 7 where its one download counts 1, its
    # refused_record, scans read one item a page, and the aggregator counting a new download of song1 (ledger item and
    # ADD together) after the first page of the drift's first scan of the ledger
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song1", MONTH, 7)
    refused_record(stack, "song1", MONTH)

    def counted_meanwhile() -> None:
        write_download(stack, "song1", "d3")
        transact([ledger_put(stack, "d3", MONTH, 3), aggregate_add(stack, MONTH, 1)])

    real = operator_clients(region=REGION)
    dynamodb = PagesOfOne(real.dynamodb, counted_meanwhile)
    # when recover runs
    report, _ = recover_once(stack, clients=clients_with(dynamodb))
    # then, wherever the page boundary fell, the aggregate holds what the ledger counts (d1 and d3), and the message is
    # deleted
    assert dynamodb.fired
    assert stored_count(stack, "song1", MONTH) == 2, report.as_json()
    assert (report.deleted, queue_depth(stack)) == (1, 0)


def test_a_whole_board_message_is_kept_while_an_aggregate_equal_to_the_recount_differs_from_the_ledger(
    aws: None,
) -> None:
    # given a one-reader deployment whose download of song1 is exact, song3's aggregate in MONTH edited by hand to 1
    # where no ledger item counts, the aggregator's records_trimmed (every board), and a download of song3 written to
    # the table after the rebase and before the check, its record not delivered yet
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    set_count(stack, "song3", MONTH, 1)
    records_trimmed(stack)

    class WrittenMeanwhile(CountingReconciler):
        def run(self, targets: Any, repair: bool = False, **options: Any) -> Any:
            write_download(stack, "song3", "d1")
            return super().run(targets, repair=repair, **options)

    # when recover runs
    report, _ = recover_once(stack, WrittenMeanwhile)
    # then song3's aggregate, equal to the table's recount, was measured against the ledger and set to what it counts
    # (0), and the message is kept, to run again once the mapping delivers the download
    assert report.drift is not None
    assert report.drift.settled == [{"entityId": "song3", "board": MONTH, "stored": "1", "ledger": "0"}]
    assert stored_count(stack, "song3", MONTH) == 0
    assert (report.deleted, queue_depth(stack)) == (0, 1)
    assert report.pending


def test_with_an_expiry_kept_in_the_ledger_a_message_whose_aggregate_equals_the_recount_is_kept_saying_why(
    aws: None,
) -> None:
    # given a one-reader deployment whose download of song1 counts once and whose aggregate holds 1, its refused_record,
    # and the ledger keeping a download expired by TTL counted (its own item, which names no aggregate)
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    refused_record(stack, "song1", MONTH)
    expiry_kept_in_ledger()
    # when recover runs
    report, _ = recover_once(stack)
    # then what the ledger counts in the aggregate is not known: the message is kept, saying why, not deleted unchecked
    assert stored_count(stack, "song1", MONTH) == 1
    assert (report.deleted, queue_depth(stack)) == (0, 1)
    (kept,) = report.kept
    assert kept["retry"] is False
    assert f"song1 in {MONTH} equals the table's recount but was not found equal to what the ledger" in kept["note"]
    assert "expired by TTL" in kept["note"]


def test_only_where_the_entity_is_the_tables_partition_key_are_other_entities_moves_passed_over(aws: None) -> None:
    # given a one-reader deployment (its table keyed by the entity first), the same deployment as if its table were
    # keyed otherwise (a download's entity could then change), and a download of song9 moved in the ledger between two
    # scans of it
    stack = one_reader_stack()
    stale_ledger_item(stack, MONTH)
    real = operator_clients(region=REGION)
    deployment = discover(real, stack.table)
    keyed_otherwise = dataclasses.replace(deployment, key_attributes=(stack.names.sort_key, stack.names.entity))
    settler = DriftSettler(real.dynamodb, deployment)
    first = settler.ledger()
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName="music-claims",
        Item={
            CLAIM_KEY: {"S": "download#song9-d1"},
            "Version": {"S": version(3)["S"]},
            "Entity": {"S": "song9"},
            "Contribution": {"M": {FEBRUARY: {"N": "1"}}},
        },
    )
    # when the two scans are compared for a measurement of song1's aggregates
    second = settler.ledger()
    # then song9's move is passed over only where song9's download can never count in song1's aggregates
    assert deployment.entity_is_partition
    assert settler.unchanged(first, second, {"song1"})
    assert not settler.unchanged(first, second, {"song1", "song9"})
    assert not DriftSettler(real.dynamodb, keyed_otherwise).unchanged(first, second, {"song1"})
