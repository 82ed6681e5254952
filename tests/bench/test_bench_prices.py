"""The benchmark prices its runs with the sizing tool's prices (`leaderboard_tools.size.prices`), not copies of them."""

from __future__ import annotations

from leaderboard_dev.bench.pressure_cost import PRICES as BENCH_PRICES
from leaderboard_tools.size import prices


def test_the_benchmark_uses_the_prices_of_the_sizing_tool() -> None:
    # given the prices `leaderboard-tools size` uses
    # when the benchmark prices a run
    # then it uses the same figures
    assert BENCH_PRICES["dynamodb_write_request_unit_per_million"] == prices.WRITE_REQUEST_UNIT.usd
    assert BENCH_PRICES["lambda_request_per_million"] == prices.LAMBDA_REQUEST.usd
    assert BENCH_PRICES["lambda_gb_second_x86"] == prices.LAMBDA_GB_SECOND.usd
