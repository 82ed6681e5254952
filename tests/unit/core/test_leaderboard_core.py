"""The shared core's buckets: every key the aggregator writes is one a request may name, of its period's length."""

from __future__ import annotations

import ast
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from leaderboard_core.buckets import bucket_key, is_bucket_key, periods_from_text
from leaderboard_core.periods import BUCKET_KEY_LENGTH, MONTH_KEY, PERIODS
from tests.property_examples import examples

MOMENTS = st.datetimes(min_value=datetime(1, 1, 8), max_value=datetime(9999, 12, 24), timezones=st.just(UTC))


@settings(max_examples=examples(300), deadline=None)
@given(moment=MOMENTS, period=st.sampled_from(PERIODS))
@example(moment=datetime(2019, 12, 30, tzinfo=UTC), period="week")
@example(moment=datetime(2021, 1, 3, 23, tzinfo=UTC), period="week")
def test_every_bucket_key_is_a_key_a_request_may_name_and_of_its_period_s_length(moment: datetime, period: str) -> None:
    # given any UTC moment, when its bucket is named
    key = bucket_key(moment, period)
    # then a request may name that board, and the recount knows its length (what a category may add)
    assert period == "all" or is_bucket_key(period, key)
    assert len(key) == BUCKET_KEY_LENGTH[period]


def test_every_period_has_a_key_length_and_an_unknown_one_is_refused() -> None:
    assert set(BUCKET_KEY_LENGTH) == set(PERIODS)
    with pytest.raises(ValueError, match="fortnight"):
        bucket_key(datetime(2018, 1, 15, tzinfo=UTC), "fortnight")


@pytest.mark.parametrize(
    ("text", "month"),
    [
        ("2018-01", True),
        ("2018-12", True),
        ("2018-1", False),
        ("2018-00", False),
        ("2018-13", False),
        ("2018-01\n", False),
    ],
)
def test_a_month_key_is_exactly_yyyy_mm(text: str, month: bool) -> None:
    assert bool(MONTH_KEY.match(text)) is month
    assert is_bucket_key("month", text) is month


def test_the_shared_core_imports_nothing_but_the_standard_library_and_itself() -> None:
    # given every module of the core that both zips and the operator distribution carry
    core = Path(__file__).resolve().parents[3] / "lambda_src" / "leaderboard_core"
    imported = set()
    for path in core.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    # then it runs wherever they run: nothing of boto3, Powertools, a function's own modules or the tools
    assert "datetime" in imported
    assert imported - set(sys.stdlib_module_names) - {"__future__", "leaderboard_core"} == set()


def test_a_period_named_twice_in_leaderboard_periods_is_refused() -> None:
    # given LEADERBOARD_PERIODS naming month twice (the module's validation refuses it, but the functions read the
    # variable themselves), when it is read, then it is refused: each download would otherwise count twice
    with pytest.raises(ValueError, match="named twice"):
        periods_from_text("month,month")
    assert periods_from_text("day,month") == ("day", "month")
