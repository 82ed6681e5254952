"""Where a record stands against its download's StreamFrom (ledger.place_of): by sequence within one shard, by lineage
(the progress table's ParentShardId) across shards, and nowhere across unrelated shards or streams."""

from __future__ import annotations

from dataclasses import dataclass

from delivery import ShardRef
from leaderboard_core.bookkeeping import pad_sequence
from leaderboard_core.claims import STREAM, LedgerEntry
from ledger import Lineage, Place, place_of
from progress_item import Progress

STREAM_ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/2018-01-01T00:00:00.000"
PARENT, CHILD, GRANDCHILD, OTHER = "shard-parent", "shard-child", "shard-grandchild", "shard-other"


@dataclass
class Parents:
    """The progress table as the lineage reads it: each shard's ParentShardId."""

    parents: dict[str, str | None]

    def lower_bound(self, shard: ShardRef) -> Progress:
        if shard.shard_id not in self.parents:
            return Progress()
        return Progress(parent_shard_id=self.parents[shard.shard_id], exists=True)

    read = lower_bound


LINEAGE = Lineage(Parents({PARENT: None, CHILD: PARENT, GRANDCHILD: CHILD, OTHER: None}))  # type: ignore[arg-type]


def entry(shard_id: str, sequence: int, label: str = "2018-01-01T00:00:00.000") -> LedgerEntry:
    return LedgerEntry(STREAM, label, shard_id, pad_sequence(str(sequence)))


def place(shard_id: str, sequence: int, first: LedgerEntry) -> Place | str:
    return place_of(first, ShardRef(STREAM_ARN, shard_id), pad_sequence(str(sequence)), LINEAGE)


def test_within_one_shard_the_sequence_places_a_record() -> None:
    # given StreamFrom at record 500 of a shard, then records of the same shard are placed by their sequence numbers
    first = entry(CHILD, 500)
    assert [place(CHILD, sequence, first) for sequence in (499, 500, 501)] == [Place.PRECEDES, Place.IS, Place.FOLLOWS]


def test_across_a_split_the_lineage_places_a_record_whatever_its_sequence_number() -> None:
    # given StreamFrom in a child whose sequence numbers are lower than its parent's
    first = entry(CHILD, 500)
    # then every record of the parent precedes it, and every record of a grandchild follows it
    assert place(PARENT, 9_000_000, first) is Place.PRECEDES
    assert place(GRANDCHILD, 1, first) is Place.FOLLOWS
    # and with StreamFrom in the parent, the child's records follow it
    assert place(CHILD, 1, entry(PARENT, 9_000_000)) is Place.FOLLOWS


def test_unrelated_shards_another_stream_and_an_unknown_shard_place_nothing() -> None:
    # given StreamFrom in one shard
    first = entry(CHILD, 500)
    # then a record of a shard of another lineage, of a shard the progress table does not know, or of another stream
    # is placed nowhere, and the reason names what is unrelated
    unrelated = place(OTHER, 1, first)
    assert isinstance(unrelated, str)
    assert CHILD in unrelated
    assert OTHER in unrelated
    assert isinstance(place("shard-unknown", 1, first), str)
    other_stream = place(CHILD, 501, entry(CHILD, 500, label="2017-01-01T00:00:00.000"))
    assert isinstance(other_stream, str)
    assert "2017-01-01T00:00:00.000" in other_stream
