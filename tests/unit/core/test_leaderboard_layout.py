"""Where aggregates sit in the index: the aggregator's placement and order.

That the host tools' and the query function's copies place and order alike: test_one_definition.py.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from leaderboard_core import index_layout

IDS = st.text(min_size=1, max_size=40).filter(lambda text: "\x00" not in text)


@given(first=IDS, second=IDS, count=st.integers(0, index_layout.MAX_COUNT - 1))
def test_a_higher_count_always_orders_first_and_fits_in_38_digits(first: str, second: str, count: int) -> None:
    assert index_layout.order_of(count + 1, first) > index_layout.order_of(count, second)
    assert len(str(index_layout.order_of(count + 1, first))) <= 38


@given(first=IDS, second=IDS, count=st.integers(0, 1000))
def test_equal_counts_order_by_id_where_the_first_ten_bytes_differ(first: str, second: str, count: int) -> None:
    # read in descending order, the smaller id (by UTF-8 bytes) comes first
    a, b = first.encode()[:10], second.encode()[:10]
    if a == b:
        assert index_layout.order_of(count, first) == index_layout.order_of(count, second)
    else:
        smaller, larger = sorted((first, second), key=lambda text: text.encode())
        assert index_layout.order_of(count, smaller) > index_layout.order_of(count, larger)


def test_one_shard_is_the_guides_layout_and_several_name_their_shard() -> None:
    assert index_layout.leaderboard_partition("2018-01", "song3", 1) == "2018-01"
    assert (
        index_layout.leaderboard_partition("2018-01", "song3", 4)
        == f"2018-01#{index_layout.leaderboard_shard('song3', 4)}"
    )
    placements = {index_layout.leaderboard_shard(f"song{n}", 4) for n in range(200)}
    assert placements == {0, 1, 2, 3}
