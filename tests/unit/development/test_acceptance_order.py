"""The acceptance files' order (tests/acceptance/conftest.py): every file named once, so none runs last unseen."""

from __future__ import annotations

from pathlib import Path

from tests.acceptance.conftest import LONGEST_FIRST

ACCEPTANCE = Path(__file__).resolve().parents[2] / "acceptance"


def test_the_longest_first_order_names_every_acceptance_file_once() -> None:
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert set(LONGEST_FIRST) == {path.name for path in ACCEPTANCE.glob("test_*.py")}
