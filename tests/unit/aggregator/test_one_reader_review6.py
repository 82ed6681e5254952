"""A sixth review of one reader per shard (STREAM_READERS=1): the operator's keep of an expired key (`--expired-keys`,
`ExpiryKept`, `KeptBy`) and its bound (`KeptUntil`, the lowest INSERT or MODIFY after the kept version). Each test is
named for what should hold. Those marked xfail are findings: the reason says what happens instead, silent or loud, and
the AWS sentence that allows the history. The rest are angles tried that held."""

from __future__ import annotations

from leaderboard_core.claims import claim_key
from leaderboard_tools.reconcile.clock import CLOCK_MARGIN_SECONDS
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import (
    CHILD,
    OK,
    ROOT,
    Interleaved,
    LedgerWorld,
    deliver,
    delivered,
    key_of,
    ledger_client,
    read_back,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of, kept_expired, rebase_world

__all__ = ["world"]  # fixtures, used by name


def expired_while_behind(world: LedgerWorld, song: str, number: int) -> None:
    """The repair (run for a trim elsewhere) finds the key's item gone while the mapping has not yet delivered its
    last records, reports it gone, and the operator, who knows Time to Live deleted it, names it expired."""
    claim = claim_key(key_of(song, number))
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim]
    assert rebase(world.dynamodb, deployment_of(world), expired=[claim]).kept_expired == 1


# ------------------------------------------------------------------------------------------------------------ findings


def test_a_kept_version_modified_before_it_expired_is_taken_by_its_remove_and_counts_once(world: LedgerWorld) -> None:
    # given a January download delivered; the application then moves its TTL (a MODIFY that counts the same) and Time
    # to Live deletes it, neither record delivered yet when the repair finds the item gone; the operator names it
    # expired
    first = world.put(ROOT, "song1", 1, "2018-01", extra={"ExpiresAt": {"N": "1517443200"}})
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    touched = world.put(ROOT, "song1", 1, "2018-01", extra={"ExpiresAt": {"N": "1518048000"}})
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    expired_while_behind(world, "song1", 1)
    # when the mapping catches up and delivers both records, in one batch
    assert deliver(world, ROOT, delivered(world, ROOT, [touched, expiry])) == OK
    # then the one expired download counts once in January
    assert world.boards() == {("song1", "2018-01"): 1}


def test_a_kept_version_edited_into_another_month_before_it_expired_counts_once_where_it_expired(
    world: LedgerWorld,
) -> None:
    # given a January download delivered; the application edits it into February and Time to Live then deletes it,
    # neither record delivered yet when the repair finds the item gone; the operator names it expired
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    edit = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    expired_while_behind(world, "song1", 1)
    # when the mapping catches up and delivers both records
    assert deliver(world, ROOT, delivered(world, ROOT, [edit, expiry])) == OK
    # then the one expired download counts once, in February, where its item was when it expired
    assert world.boards() == {("song1", "2018-02"): 1}


def test_a_keys_next_write_retried_after_its_own_expiry_leaves_the_keep_to_the_kept_versions_remove(
    world: LedgerWorld,
) -> None:
    # given a January download delivered, its expiry by TTL trimmed (never delivered), kept by the operator; the key
    # written again into January and expired by TTL, the batch of both failing once (an outage) and bisected
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    again = world.put(ROOT, "song1", 1, "2018-01")
    world.expire(ROOT, "song1", 1)
    second = world.last(ROOT)
    # when the retries deliver the second half (the expiry) before the first (the write)
    assert deliver(world, ROOT, delivered(world, ROOT, [second])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    # then both expired downloads stay counted in January (retention, S12)
    assert world.boards() == {("song1", "2018-01"): 2}


def test_a_backfilled_keep_whose_remove_never_comes_is_not_taken_by_the_next_items_expiry(world: LedgerWorld) -> None:
    # given a download the backfill counted in January (no Version), its expiry by TTL trimmed, kept by the operator;
    # more than the clock margin passes after the backfill read it
    world.history_before_the_stream("song1", 1, "2018-01")
    assert world.backfill() == [("song1", 1)]
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    world.pass_time(CLOCK_MARGIN_SECONDS + 1)
    # when the key is written again into January, delivered, and that item expires by TTL, delivered
    again = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    # then both expired downloads stay counted in January
    assert world.boards() == {("song1", "2018-01"): 2}


def test_a_rebased_keep_whose_remove_never_comes_is_not_taken_by_the_next_items_expiry(world: LedgerWorld) -> None:
    # given a download delivered in February, its edit into January lost and rebased (Version `<record>~1`), then its
    # expiry by TTL trimmed, kept by the operator; more than the clock margin passes after the rebase read it
    first = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.put(ROOT, "song1", 1, "2018-01")
    assert rebase_world(world).moved == 1
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    world.pass_time(CLOCK_MARGIN_SECONDS + 1)
    # when the key is written again into January, delivered, and that item expires by TTL, delivered
    again = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    # then both expired downloads stay counted in January
    assert world.boards() == {("song1", "2018-01"): 2}


# ------------------------------------------------------------------------------------------------ angles that held


def test_a_keys_next_write_and_its_expiry_in_one_batch_bound_the_keep_for_the_kept_remove_read_back(
    world: LedgerWorld,
) -> None:
    # given a January download delivered, its expiry in a given-up batch, kept by the operator; the key written again
    # into January and expired, both delivered in one batch
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    again = world.put(ROOT, "song1", 1, "2018-01")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [again, world.last(ROOT)])) == OK
    # when recover reads the kept expiry back, twice
    assert read_back(world, ROOT, expiry, expiry)["readBack"] == "applied"
    assert read_back(world, ROOT, expiry, expiry)["readBack"] == "applied"
    # then both expired downloads count in January, each once
    assert world.boards() == {("song1", "2018-01"): 2}


def test_the_kept_remove_the_next_write_and_its_expiry_in_one_delivery_count_each_expiry_once(
    world: LedgerWorld,
) -> None:
    # given a January download delivered; its expiry, the key written again into February and that item's expiry, none
    # delivered yet when the repair finds the item gone; the operator names it expired
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    again = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    second = world.last(ROOT)
    expired_while_behind(world, "song1", 1)
    # when the mapping delivers the three records in one batch, and then again (a retry)
    assert deliver(world, ROOT, delivered(world, ROOT, [expiry, again, second])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [expiry, again, second])) == OK
    # then each expired download counts once, where its item was
    assert world.boards() == {("song1", "2018-01"): 1, ("song1", "2018-02"): 1}


def test_a_bound_committed_between_a_later_expirys_read_and_transaction_keeps_both_expired_downloads(
    world: LedgerWorld,
) -> None:
    # given a January download delivered from the parent shard, its expiry in a given-up batch, kept by the operator; a
    # split, the key written again into January on the child and expired there
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    world.split(ROOT, CHILD, 5_000_000)
    again = world.put(CHILD, "song1", 1, "2018-01")
    world.expire(CHILD, "song1", 1)
    second = world.last(CHILD)

    def write_first() -> None:
        ledger_client(world, world.dynamodb)
        assert deliver(world, CHILD, delivered(world, CHILD, [again])) == OK

    # when the child's expiry is delivered and the write's invocation commits its bound between the expiry's read and
    # its transaction, and recover then reads the parent's kept expiry back
    interleaved = ledger_client(world, Interleaved(world.dynamodb, "transact_write_items", write_first))
    assert deliver(world, CHILD, delivered(world, CHILD, [second])) == OK
    assert read_back(world, ROOT, expiry, expiry)["readBack"] == "applied"
    # then the write came between, and both expired downloads stay counted in January
    assert interleaved.calls == 1
    assert world.boards() == {("song1", "2018-01"): 2}


def test_the_kept_remove_read_back_after_the_keys_next_insert_in_a_child_counts_once(world: LedgerWorld) -> None:
    # given a January download delivered from the parent, its expiry in a given-up batch, kept by the operator; a
    # split, and the key written again into January on the child, delivered, then written again (a MODIFY), delivered
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    world.split(ROOT, CHILD, 5_000_000)
    again = world.put(CHILD, "song1", 1, "2018-01")
    touched = world.put(CHILD, "song1", 1, "2018-01")
    assert deliver(world, CHILD, delivered(world, CHILD, [touched])) == OK
    assert deliver(world, CHILD, delivered(world, CHILD, [again])) == OK
    # when recover reads the parent's expiry back
    assert read_back(world, ROOT, expiry, expiry)["readBack"] == "applied"
    # then the expired download counts once beside the live one: January 2
    assert world.boards() == {("song1", "2018-01"): 2}


def test_an_application_delete_of_the_next_item_retried_before_its_write_spends_the_keep_and_counts_right(
    world: LedgerWorld,
) -> None:
    # given a January download delivered, its expiry by TTL trimmed, kept by the operator; the key written again into
    # January and deleted by the application, the batch of both bisected and its second half retried first
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    world.expire(ROOT, "song1", 1)
    kept_expired(world, "song1", 1)
    again = world.put(ROOT, "song1", 1, "2018-01")
    removal = world.delete(ROOT, "song1", 1)
    assert removal is not None
    # when the delete is delivered before the write, then both again
    assert deliver(world, ROOT, delivered(world, ROOT, [removal])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [again])) == OK
    assert deliver(world, ROOT, delivered(world, ROOT, [again, removal])) == OK
    # then only the expired download counts: January 1
    assert world.boards() == {("song1", "2018-01"): 1}
