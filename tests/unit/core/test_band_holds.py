"""What a repair's band holds and how its close settles it (leaderboard_core.band_holds): the aggregator writes the
entries, the repair's close reads them; each side's tests live with its code (tests/unit/aggregator/test_band_holds.py,
tests/unit/tools/test_repair_band_retractions.py)."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from leaderboard_core.band_holds import (
    HeldRecord,
    held_by_download,
    held_entry,
    parse_held,
    settle,
    shard_lineage,
    shard_tag,
)
from leaderboard_core.bookkeeping import download_id

STREAM = "arn:aws:dynamodb:us-east-1:123456789012:table/music-downloads/stream/2018-03-01T00:00:00.000"
PARENT, CHILD = "shardId-00000001-parent", "shardId-00000002-child"
IDS = [download_id(f"d{number}") for number in range(8)]


def entry(download: str, shard: str, sequence: int, value: str) -> str:
    return f"{download}|{shard_tag(STREAM, shard)}|{sequence}|{value}"


@given(held=st.sets(st.sampled_from(IDS)), seen=st.sets(st.sampled_from(IDS)))
def test_without_retractions_the_close_adds_the_held_downloads_the_recount_did_not_count(
    held: set[str], seen: set[str]
) -> None:
    # given bare ids held (no retractions: each a download's INSERT) and the ids the recount counted
    records, malformed = held_by_download(held)
    # when the close settles them
    settlement = settle(records, lambda download: 1 if download in seen else 0, {})
    # then it adds exactly the held downloads the recount missed, as before retractions
    assert (settlement.change, settlement.unsettled, malformed) == (len(held - seen), [], [])


def test_a_download_s_last_record_in_a_shard_is_its_highest_sequence_whatever_the_set_s_order() -> None:
    # given d0 inserted (1), deleted (0) and written again (1), then deleted (0): held out of order, as a set holds them
    entries = [entry(IDS[0], PARENT, n, value) for n, value in ((9, "0"), (3, "1"), (7, "1"), (5, "0"))]
    # when the close settles d0, which the recount counted
    settlement = settle(held_by_download(entries)[0], lambda download: 1, {})
    # then the last record (sequence 9, deleted) says its part is 0: the recount's 1 is taken back
    assert settlement.change == -1


def test_a_child_shard_s_record_comes_after_its_parent_s_even_with_a_lower_sequence_number() -> None:
    # given d0 moved out of the aggregate in the parent shard (sequence 900), then back in the child (sequence 12):
    # AWS relates no child's sequence numbers to its parent's, only the lineage orders them
    entries = [entry(IDS[0], PARENT, 900, "0"), entry(IDS[0], CHILD, 12, "1")]
    lineage = shard_lineage(STREAM, [(PARENT, None), (CHILD, PARENT)])
    # when the close settles d0, which the recount did not count
    settlement = settle(held_by_download(entries)[0], lambda download: 0, lineage)
    # then the child's record is the last: d0 counts 1 here (the highest sequence would have said 0)
    assert (settlement.change, settlement.unsettled) == (1, [])


def test_records_of_shards_the_lineage_does_not_order_leave_their_download_unsettled_unless_they_agree() -> None:
    # given d0 held from two shards the stream's description does not list (its lineage unknown), with different
    # values, and d1 held from the same two shards, each saying 1
    entries = [
        entry(IDS[0], PARENT, 900, "0"),
        entry(IDS[0], CHILD, 12, "1"),
        entry(IDS[1], PARENT, 901, "1"),
        entry(IDS[1], CHILD, 13, "1"),
    ]
    # when the close settles them, the recount having counted neither
    settlement = settle(held_by_download(entries)[0], lambda download: 0, {})
    # then d0 is unsettled (nothing added for it), and d1 adds its 1 whichever record is last
    assert (settlement.change, settlement.unsettled) == (1, [IDS[0]])


def test_summed_parts_settle_in_exact_decimals() -> None:
    # given d0 (counted 2.5 by the recount) edited to 4.25 then 0.1, and d1 (not counted) held at 3
    entries = [entry(IDS[0], PARENT, 1, "4.25"), entry(IDS[0], PARENT, 2, "0.1"), entry(IDS[1], PARENT, 3, "3")]
    counted = {IDS[0]: Decimal("2.5")}
    # when the close settles them
    settlement = settle(held_by_download(entries)[0], lambda download: counted.get(download, 0), {})
    # then 0.1 - 2.5 + 3, exactly
    assert settlement.change == Decimal("0.6")


@given(
    sequence=st.integers(1, 10**40 - 1),
    value=st.one_of(st.integers(0, 10**12 - 1), st.decimals(0, 10**12 - 1, places=6, allow_nan=False)),
)
def test_an_entry_reads_back_as_the_record_written(sequence: int, value: int | Decimal) -> None:
    # given a held record as the aggregator writes it (its sequence number padded, as the aggregator keeps them)
    text = held_entry(IDS[0], shard_tag(STREAM, CHILD), str(sequence).zfill(40), value)
    # when the close reads it, then it is that record, and a string set's item DynamoDB takes (at most 92 bytes)
    assert parse_held(text) == HeldRecord(IDS[0], shard_tag(STREAM, CHILD), sequence, value)
    assert len(text.encode()) <= 92


def test_what_is_not_a_held_entry_is_set_apart_not_guessed() -> None:
    # given entries that are neither a download id nor a held record
    records, malformed = held_by_download(["a|b|c|1", "a|b|7|one", "a|b|7", "a||7|1"])
    # then none is read as a record
    assert (records, sorted(malformed)) == ({}, sorted(["a|b|c|1", "a|b|7|one", "a|b|7", "a||7|1"]))


# ---------------------------------------------------------------- the rule, against the history it settles

HISTORY = st.lists(st.one_of(st.just(0), st.just(1), st.decimals(0, 100, places=2)), min_size=1, max_size=6)


@given(data=st.data(), histories=st.lists(HISTORY, min_size=1, max_size=len(IDS)))
def test_recount_plus_close_plus_what_follows_the_fence_is_each_download_s_last_part(
    data: st.DataObject, histories: list[list[int | Decimal]]
) -> None:
    # given each download's part in one aggregate after each of its records (its history, in stream order); for each,
    # the records counted before the repair's snapshot (p), the state its recount read (j >= p), and the records
    # created by the fence (m >= j), held by the band; those after m are counted by the aggregator as they come
    # (each the difference from the record before); some downloads' records split across a parent and a child shard
    recount, after_fence, entries = Decimal(0), Decimal(0), []
    counted: dict[str, int | Decimal] = {}
    for download, history in zip(IDS, histories, strict=False):
        parts = [0, *history]
        processed = data.draw(st.integers(0, len(history)))
        read = data.draw(st.integers(processed, len(history)))
        fence = data.draw(st.integers(read, len(history)))
        split = data.draw(st.integers(0, len(history)))
        counted[download] = parts[read]
        recount += parts[read]
        for index in range(processed + 1, fence + 1):
            shard, sequence = (PARENT, 1000 + index) if index <= split else (CHILD, index)
            entries.append(entry(download, shard, sequence, str(parts[index])))
        after_fence += sum((parts[i] - parts[i - 1] for i in range(fence + 1, len(parts))), Decimal(0))
    # when the close settles the held records against what the recount counted
    lineage = shard_lineage(STREAM, [(PARENT, None), (CHILD, PARENT)])
    settlement = settle(held_by_download(entries)[0], lambda download: counted[download], lineage)
    # then the count ends at what each download's last record leaves (the table's truth), nothing unsettled
    assert settlement.unsettled == []
    assert recount + settlement.change + after_fence == sum((history[-1] for history in histories), Decimal(0))
