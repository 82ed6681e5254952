"""Where aggregates sit in the index: the aggregator's placement and order, and the host tools' copy of them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import download_records
import leaderboard_order
from leaderboard_tools import leaderboard_layout

IDS = st.text(min_size=1, max_size=40).filter(lambda text: "\x00" not in text)


@given(entity_id=IDS, shards=st.integers(1, 64), count=st.integers(0, leaderboard_order.MAX_COUNT))
def test_the_host_tools_place_and_order_aggregates_exactly_as_the_aggregator(
    entity_id: str, shards: int, count: int
) -> None:
    assert leaderboard_layout.leaderboard_partition("2018-01", entity_id, shards) == (
        leaderboard_order.leaderboard_partition("2018-01", entity_id, shards)
    )
    assert leaderboard_layout.order_of(count, entity_id) == leaderboard_order.order_of(count, entity_id)


@given(first=IDS, second=IDS, count=st.integers(0, leaderboard_order.MAX_COUNT - 1))
def test_a_higher_count_always_orders_first_and_fits_in_38_digits(first: str, second: str, count: int) -> None:
    assert leaderboard_order.order_of(count + 1, first) > leaderboard_order.order_of(count, second)
    assert len(str(leaderboard_order.order_of(count + 1, first))) <= 38


@given(first=IDS, second=IDS, count=st.integers(0, 1000))
def test_equal_counts_order_by_id_where_the_first_ten_bytes_differ(first: str, second: str, count: int) -> None:
    # read in descending order, the smaller id (by UTF-8 bytes) comes first
    a, b = first.encode()[:10], second.encode()[:10]
    if a == b:
        assert leaderboard_order.order_of(count, first) == leaderboard_order.order_of(count, second)
    else:
        smaller, larger = sorted((first, second), key=lambda text: text.encode())
        assert leaderboard_order.order_of(count, smaller) > leaderboard_order.order_of(count, larger)


def test_one_shard_is_the_guides_layout_and_several_name_their_shard() -> None:
    assert leaderboard_order.leaderboard_partition("2018-01", "song3", 1) == "2018-01"
    assert (
        leaderboard_order.leaderboard_partition("2018-01", "song3", 4)
        == f"2018-01#{leaderboard_order.leaderboard_shard('song3', 4)}"
    )
    placements = {leaderboard_order.leaderboard_shard(f"song{n}", 4) for n in range(200)}
    assert placements == {0, 1, 2, 3}


OFFSETS = st.one_of(
    st.sampled_from(["Z", "z", "+00:00", "-05:00", "+05:30", "+14:00", "-12:00", ""]),
    st.builds(
        lambda sign, hours, minutes: f"{sign}{hours:02d}:{minutes:02d}",
        st.sampled_from("+-"),
        st.integers(0, 23),
        st.integers(0, 59),
    ),
)
TIMESTAMPS = st.builds(
    lambda moment, precision, offset, before, after: (
        f"{before}{moment.isoformat(timespec=precision) if precision else moment.date().isoformat()}{offset}{after}"
    ),
    st.datetimes(),
    st.sampled_from(["seconds", "milliseconds", "microseconds", "minutes", None]),
    OFFSETS,
    st.sampled_from(["", " ", "\t", "  \n"]),
    st.sampled_from(["", " ", "\n", " \t"]),
)


def month_or_error(parse: object, timestamp: str) -> str:
    try:
        return parse(timestamp)  # type: ignore[operator]
    except ValueError:
        return "rejected"


@given(timestamp=st.one_of(TIMESTAMPS, st.text(max_size=40)))
def test_the_host_tools_read_a_download_s_month_exactly_as_the_aggregator(timestamp: str) -> None:
    # given any timestamp a writer may put in a download (offsets, a lowercase z, surrounding spaces, garbage),
    # when the recount and the aggregator each derive its month, then they agree, or both reject it
    assert month_or_error(leaderboard_layout.month_of, timestamp) == month_or_error(
        download_records.month_of, timestamp
    )
