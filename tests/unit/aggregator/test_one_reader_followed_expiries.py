"""One reader per shard: the nearest variants of review 7's two findings fixed by fix50. A gone version's answer and
a write of the key found between the version and the expiry that said it `Follows` it (followed_expiries.py); a keep
taken below Version whose index step a retry must still do (the expiry's own item names the aggregates, `Decreased`)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from leaderboard_core.claims import claim_key
from leaderboard_tools.recover.rebase import rebase
from tests.unit.aggregator.ledger_on_moto import (
    LEDGER_TABLE,
    OK,
    ROOT,
    Interleaved,
    LedgerWorld,
    deliver,
    delivered,
    fails_at,
    in_index,
    key_of,
    kinds,
    ledger_client,
    read_back,
    world,
)
from tests.unit.aggregator.rebase_on_moto import deployment_of, kept_expired, rebase_world, write_items

__all__ = ["world"]  # fixtures, used by name

DAY = 24 * 3600
"""DynamoDB Streams' retention: "Stream records whose age exceeds this limit are subject to removal" (S5)."""


def named_expired(world: LedgerWorld, song: str, number: int) -> tuple[int, bool]:
    """The operator names the key expired (`reconcile --repair --expired-keys`): what the run kept, and whether it left
    anything for the operator (gone, unplaced)."""
    write_items(world)
    report = rebase(world.dynamodb, deployment_of(world), expired=[claim_key(key_of(song, number))])
    return report.kept_expired, report.differences_remain


def decreased_named(world: LedgerWorld) -> list[str]:
    """The ledger's items (the keys' and the expiries' own) that still name aggregates to take out of the index."""
    items = world.dynamodb.scan(TableName=LEDGER_TABLE, ConsistentRead=True)["Items"]
    return [item["ClaimKey"]["S"] for item in items if item.get("Decreased", {}).get("L")]


def gone_then_rewritten_and_expired(world: LedgerWorld) -> str:
    """A February download delivered, its expiry by TTL trimmed during a pause past the retention, the repair reporting
    the key gone; the key written again with February's content in a batch the mapping gave up, and that item's expiry
    delivered (it says it follows the gone version, with its content). Returns the given-up write."""
    february = world.put(ROOT, "song1", 1, "2018-02")
    assert deliver(world, ROOT, delivered(world, ROOT, [february])) == OK
    world.expire(ROOT, "song1", 1)
    world.clock += DAY + 3600
    assert [gone["claimKey"] for gone in rebase_world(world).gone] == [claim_key(key_of("song1", 1))]
    again = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    assert deliver(world, ROOT, delivered(world, ROOT, [world.last(ROOT)])) == OK
    assert "records_trimmed" in kinds(world)
    assert world.boards() == {("song1", "2018-02"): 1}
    return again


def test_a_gone_versions_answer_after_the_write_between_was_read_back_keeps_the_trimmed_expiry(
    world: LedgerWorld,
) -> None:
    # given a gone February version, the key written again with its content in a given-up batch and that item's expiry
    # delivered; recover reads the given-up write back before the operator answers
    again = gone_then_rewritten_and_expired(world)
    assert read_back(world, ROOT, again, again)["readBack"] == "applied"
    assert world.boards() == {("song1", "2018-02"): 1}
    # when the operator names the key expired, twice
    answers = [named_expired(world, "song1", 1) for _ in range(2)]
    # then the first answer keeps the gone version, bounded by the write; the second finds nothing left to answer, and
    # both expired downloads stay counted in February, nothing reported
    assert answers == [(1, False), (0, False)]
    assert world.boards() == {("song1", "2018-02"): 2}
    assert kinds(world) == []


def test_a_gone_versions_answer_then_the_write_between_read_back_twice_keeps_the_trimmed_expiry_once(
    world: LedgerWorld,
) -> None:
    # given a gone February version, the key written again with its content in a given-up batch and that item's expiry
    # delivered; the operator names the key expired (the expiry taken for the version's own)
    again = gone_then_rewritten_and_expired(world)
    assert named_expired(world, "song1", 1) == (0, False)
    # when recover reads the given-up write back, twice, and the operator names the key expired again
    answers = [read_back(world, ROOT, again, again)["readBack"] for _ in range(2)]
    again_named = named_expired(world, "song1", 1)
    # then both expired downloads stay counted in February, each once
    assert answers == ["applied", "applied"]
    assert again_named == (0, False)
    assert world.boards() == {("song1", "2018-02"): 2}


def test_a_keep_taken_below_version_whose_invocation_dies_after_the_index_step_leaves_nothing_to_redo(
    world: LedgerWorld,
) -> None:
    # given a January download delivered, edited into February and expired by TTL in a batch the mapping gave up, kept
    # by the operator; the key written again into March, delivered
    first = world.put(ROOT, "song1", 1, "2018-01")
    assert deliver(world, ROOT, delivered(world, ROOT, [first])) == OK
    edit = world.put(ROOT, "song1", 1, "2018-02")
    world.expire(ROOT, "song1", 1)
    expiry = world.last(ROOT)
    kept_expired(world, "song1", 1)
    march = world.put(ROOT, "song1", 1, "2018-03")
    assert deliver(world, ROOT, delivered(world, ROOT, [march])) == OK
    # when recover reads the given-up batch back, the invocation dying after the index step (before the expiry's own
    # item forgets the aggregates it named), and reads it back again
    dies = ledger_client(
        world, Interleaved(world.dynamodb, "update_item", instead=fails_at(2, "InternalServerError", "UpdateItem"))
    )
    with pytest.raises(ClientError):
        read_back(world, ROOT, edit, expiry)
    assert not in_index(world, "song1", "2018-01")
    dies.instead = None
    assert read_back(world, ROOT, edit, expiry)["readBack"] == "applied"
    # then the expired download counts in February, beside March, January is out of the index, and no item of the
    # ledger names an aggregate still to take out
    assert world.boards() == {("song1", "2018-02"): 1, ("song1", "2018-03"): 1}
    assert not in_index(world, "song1", "2018-01")
    assert decreased_named(world) == []
