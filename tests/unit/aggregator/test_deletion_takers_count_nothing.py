"""The keep invariant, once a REMOVE with no TTL identity is a deletion (replicated tables are refused by the replica
guard: a TTL deletion "replicated to global table regions" is the only one "not identifiable", Working with expired
items and time to live): a keep nobody took counts what it kept; one taken by a TTL expiry counts that expiry's old
image; one taken by a deletion counts nothing; every taking is undone by the read-back that disproves the taker and
redone for the new taker. The tool re-judges every count itself: each history below ends exact with no report.

AWS: an item's stream records "appear in the same sequence as the actual modifications to the item" (DynamoDB Streams),
so the first REMOVE after a version is its removal and an INSERT between proves a REMOVE after it a later item's;
"Lambda event source mappings process each event at least once" and a batch given up goes to the on-failure
destination, which recover reads back later, in any order.

The histories are review13's to review15's (their files named each in the test's docstring), each in every order of
the read-backs that matters."""

from __future__ import annotations

from itertools import permutations

import pytest

from leaderboard_core.claims import CLAIM_KEY, EXPIRY_PREFIX, GONE_PREFIX
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import (
    LEDGER_TABLE,
    OK,
    ROOT,
    TABLE,
    LedgerWorld,
    deliver,
    delivered,
    kinds,
    read_back,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of, kept_expired, rebase_world, write_items
from tests.unit.aggregator.test_one_reader_read_time import version
from tests.unit.aggregator.test_read_windows_of_gone_versions import CLAIM, MARGIN, ledger_items

__all__ = ["world"]  # fixtures, used by name


def answered_expired(world: LedgerWorld) -> None:
    """The operator names the key expired: applied, nothing left open."""
    write_items(world)
    answer = rebase(world.dynamodb, deployment_of(world), expired=[CLAIM])
    assert (answer.kept_expired, answer.unplaced) == (1, [])


def taken_by_a_deletion(world: LedgerWorld) -> tuple[str, str]:
    """review13's history up to the operator's answer: the open report of G bounded by I and taken by R, a deletion.
    Returns I' (still given up) and R."""
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    between = world.put(ROOT, "song1", 1, "2018-02")
    removal = world.delete(ROOT, "song1", 1)
    assert removal is not None
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    insert = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert read_back(world, ROOT, insert, insert)["readBack"] == "applied"
    assert read_back(world, ROOT, removal, removal)["readBack"] == "applied"
    write_items(world)
    return between, removal


def ends_exact(world: LedgerWorld, count: int) -> None:
    """The boards say `count` (a board at 0 lists nothing), nothing was reported, and the next run lists nothing."""
    assert world.boards() == ({("song1", "2018-02"): count} if count else {})
    assert kinds(world) == []
    assert rebase(world.dynamodb, deployment_of(world)).unplaced == []


BOUNDED_FIRST = [order for order in permutations(["insert", "removal", "between"]) if order[0] != "removal"]
"""The read-back orders of review13's history where R is not read back before every INSERT after G: R read back first
is applied on the ledger item as the key's removal (no report is then bounded for it to take), another mechanism."""


@pytest.mark.parametrize("order", BOUNDED_FIRST, ids="-".join)
def test_an_answer_on_a_deletion_taker_keeps_nothing_until_a_read_back_insert_below_it_gives_the_count_back(
    world: LedgerWorld, order: tuple[str, ...]
) -> None:
    """review13 refusal_on_a_taker_given_back, review14 closed_refusals and refusal_race, review15 close_race: G
    counted; its expiry trimmed; the key written again (I') and deleted (R), given up; the key reported gone at G;
    written again (I) and expired (E, delivered). The read-backs of I, R and I' come in any order, the operator's
    'expired' once I and R are read back (R not first, `BOUNDED_FIRST`). Truth: G's and I's expired downloads
    count (2)."""
    # given G delivered and expired by TTL (record trimmed), I' and its deletion R given up, the key reported gone at G,
    # and I written and expired (E delivered)
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    between = world.put(ROOT, "song1", 1, "2018-02")
    removal = world.delete(ROOT, "song1", 1)
    assert removal is not None
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    insert = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    records = {"insert": insert, "removal": removal, "between": between}
    # when recover reads them back in `order`, the operator naming the key expired once I and R are read back
    answer_after = max(order.index("insert"), order.index("removal"))
    for step, name in enumerate(order):
        assert read_back(world, ROOT, records[name], records[name])["readBack"] == "applied"
        if step == answer_after:
            answered_expired(world)
    # then G's and I's expired downloads count once each, with nothing reported
    ends_exact(world, 2)


@pytest.mark.parametrize("own_expiry_first", [False, True], ids=["answer_first", "own_expiry_first"])
def test_gs_own_ttl_expiry_read_back_below_a_deletion_taker_takes_the_keep_and_counts_g_once(
    world: LedgerWorld, own_expiry_first: bool
) -> None:
    """review15 lower_taker: as above, with G's own TTL expiry R0 given up too; I and R read back, R0 read back before
    or after the operator's 'expired'. Truth: G's and I's expired downloads count (2)."""
    # given G delivered; its TTL expiry R0, I' and the application's delete R of I' given up; the key reported gone at
    # G; I written and expired (E delivered); I then R read back
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    own_expiry = world.last(ROOT)
    world.put(ROOT, "song1", 1, "2018-02")
    removal = world.delete(ROOT, "song1", 1)
    assert removal is not None
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [CLAIM]
    insert = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert read_back(world, ROOT, insert, insert)["readBack"] == "applied"
    assert read_back(world, ROOT, removal, removal)["readBack"] == "applied"
    # when R0 is read back and the operator names the key expired, in either order
    if own_expiry_first:
        assert read_back(world, ROOT, own_expiry, own_expiry)["readBack"] == "applied"
    answered_expired(world)
    if not own_expiry_first:
        assert world.boards() == {("song1", "2018-02"): 1}
        assert read_back(world, ROOT, own_expiry, own_expiry)["readBack"] == "applied"
    # then G and I count once each, with nothing reported
    ends_exact(world, 2)


def kept_backfilled_download(world: LedgerWorld, expired: bool) -> tuple[str | None, str, str | None]:
    """A February download counted by the backfill (G), read more than the margin before its item is removed (by TTL
    when `expired`, trimmed; else by a deletion D0, given up); the key written again (I) and that item deleted (D1),
    both given up; the key reported gone at G and named expired. Returns D0 (None when expired), I and D1."""
    world.history_before_the_stream("song1", 1, "2018-02")
    assert world.backfill() == [("song1", 1)]
    world.pass_time(MARGIN + 10)
    first_removal = None
    if expired:
        world.expire(ROOT, "song1", 1)
    else:
        first_removal = world.delete(ROOT, "song1", 1)
    insert = world.put(ROOT, "song1", 1, "2018-02")
    later_removal = world.delete(ROOT, "song1", 1)
    assert later_removal is not None
    kept_expired(world, "song1", 1)
    return first_removal, insert, later_removal


@pytest.mark.parametrize("later_first", [True, False], ids=["later_deletion_first", "own_deletion_first"])
def test_a_keep_whose_deletion_taker_a_lower_deletion_replaces_counts_nothing(
    world: LedgerWorld, later_first: bool
) -> None:
    """review15 spent_keep_replaced: G removed by a deletion D0 (the operator's 'expired' wrong), the key written again
    (I, never read back) and deleted (D1); D1 and D0 read back in either order. Truth: nothing counts (0)."""
    # given G kept by the operator's 'expired', its own removal D0 a deletion
    first_removal, _, later_removal = kept_backfilled_download(world, expired=False)
    assert first_removal is not None
    # when D1 and D0 are read back, in either order
    for removal in [later_removal, first_removal] if later_first else [first_removal, later_removal]:
        assert read_back(world, ROOT, removal, removal)["readBack"] == "applied"
    # then G, deleted, counts nothing, and nothing is reported
    ends_exact(world, 0)


@pytest.mark.parametrize("insert_first", [False, True], ids=["deletion_first", "insert_first"])
def test_a_keep_whose_deletion_taker_a_read_back_insert_below_it_gives_back_counts_the_expired_download(
    world: LedgerWorld, insert_first: bool
) -> None:
    """review14 spent_keep_given_back: G expired (trimmed), the key written again (I) and deleted (D1); D1 and I read
    back in either order. Truth: G's expired download counts (1), I's deleted one does not."""
    # given G kept by the operator's 'expired'
    _, insert, later_removal = kept_backfilled_download(world, expired=True)
    # when D1 and I are read back, in either order
    for record in [insert, later_removal] if insert_first else [later_removal, insert]:
        assert read_back(world, ROOT, record, record)["readBack"] == "applied"
    # then G counts once, and nothing is reported
    ends_exact(world, 1)


@pytest.mark.parametrize("insert_first", [False, True], ids=["deletion_first", "insert_first"])
def test_a_record_versions_keep_whose_deletion_taker_a_read_back_insert_gives_back_counts_the_expired_download(
    world: LedgerWorld, insert_first: bool
) -> None:
    """A keep of a version the stream delivered (no read window): G delivered, expired (trimmed), the key written again
    (I) and deleted (D), both given up, the key named expired; D and I read back in either order. Truth: 1."""
    # given G delivered, expired with its record trimmed, I and D given up, the key reported gone and named expired
    g = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [g])) == OK
    world.expire(ROOT, "song1", 1)
    insert = world.put(ROOT, "song1", 1, "2018-02")
    deletion = world.delete(ROOT, "song1", 1)
    assert deletion is not None
    kept_expired(world, "song1", 1)
    # when D and I are read back, in either order
    for record in [insert, deletion] if insert_first else [deletion, insert]:
        assert read_back(world, ROOT, record, record)["readBack"] == "applied"
    # then G counts once, and nothing is reported
    ends_exact(world, 1)


@pytest.mark.parametrize("closed", [False, True], ids=["refused_for", "closed"])
def test_a_report_an_earlier_version_refused_or_closed_for_a_deletion_taker_is_listed_and_then_answerable(
    world: LedgerWorld, closed: bool
) -> None:
    """An item the previous version wrote (`Refused` with `RefusedFor`, maybe `Closed`, on review13's report taken by
    R) is neither lost nor breaks a run: listed with what it means now, and the answer applies to it."""
    # given the open report taken by R, marked as the earlier version's refusal (and close) for R
    between, removal = taken_by_a_deletion(world)
    [name] = ledger_items(world, f"{GONE_PREFIX}{CLAIM}|")
    marks = {":why": {"S": "a deletion or a replica's expiry"}, ":by": {"S": version(removal)}}
    expression = "SET Refused = :why, RefusedFor = :by" + (", Closed = :closed" if closed else "")
    world.dynamodb.update_item(
        TableName=LEDGER_TABLE,
        Key={CLAIM_KEY: {"S": name}},
        UpdateExpression=expression,
        ExpressionAttributeValues=marks | ({":closed": {"BOOL": True}} if closed else {}),
    )
    # when a run names nothing, then the operator answers it by the name listed
    [listed] = rebase(world.dynamodb, deployment_of(world)).unplaced
    label = name.removeprefix(f"{GONE_PREFIX}{CLAIM}|")
    answered = rebase(world.dynamodb, deployment_of(world), expired=[f"{CLAIM}@{label}"])
    # then the listing says what the earlier mark means now, and the answer applies, keeping nothing (R took it)
    assert "earlier version" in listed["why"]
    assert "a deletion, which keeps nothing" in listed["why"]
    assert (answered.kept_expired, answered.unplaced) == (1, [])
    assert world.boards() == {("song1", "2018-02"): 1}
    # and I' read back later gives R's taking back: exact, nothing reported
    assert read_back(world, ROOT, between, between)["readBack"] == "applied"
    ends_exact(world, 2)


def test_a_keep_an_earlier_version_let_a_deletion_spend_adds_nothing_when_a_read_back_insert_gives_it_back(
    world: LedgerWorld,
) -> None:
    """A keep taken by a deletion under the previous version (`KeptBy`, `KeptByExpiry` false, no `KeptByDeletion`):
    that version left the kept count in place. G expired (trimmed), the key written again (I) and deleted (D1); D1
    taken as the previous version took it, then I read back. Truth: 1."""
    # given G kept by the operator's 'expired', D1 delivered, and the keep and count left as the previous version did
    _, insert, later_removal = kept_backfilled_download(world, expired=True)
    assert read_back(world, ROOT, later_removal, later_removal)["readBack"] == "applied"
    [name] = [key for key in ledger_items(world, f"{EXPIRY_PREFIX}{CLAIM}|") if key.endswith("|kept")]
    world.dynamodb.update_item(
        TableName=LEDGER_TABLE, Key={CLAIM_KEY: {"S": name}}, UpdateExpression="REMOVE KeptByDeletion"
    )
    world.dynamodb.update_item(
        TableName=TABLE,
        Key={"songID": {"S": "song1"}, "SK": {"S": "2018-02"}},
        UpdateExpression="ADD DownloadCount :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    assert world.boards() == {("song1", "2018-02"): 1}
    # when I (between G's read and D1) is read back
    assert read_back(world, ROOT, insert, insert)["readBack"] == "applied"
    # then giving D1's taking back adds nothing: G counts once, nothing reported
    ends_exact(world, 1)
