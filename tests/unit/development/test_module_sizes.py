"""Rooms a newcomer can read whole: no module of the product (the functions, the shared core, the operator tools)
over 450 lines, so that a change finds one file that holds its concept, not a file that holds several."""

from __future__ import annotations

from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[3]
PRODUCT = ("lambda_src", "src/leaderboard_tools")
LIMIT = 450


@pytest.mark.parametrize("folder", PRODUCT)
def test_no_product_module_is_over_450_lines(folder: str) -> None:
    # given every Python module of the product folder
    modules = sorted((REPOSITORY / folder).rglob("*.py"))
    assert modules
    # when their lines are counted
    lengths = {str(module.relative_to(REPOSITORY)): len(module.read_text().splitlines()) for module in modules}
    # then none is over the limit
    assert {name: length for name, length in lengths.items() if length > LIMIT} == {}
