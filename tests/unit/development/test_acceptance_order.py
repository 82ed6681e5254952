"""The files' order for the workers (tests/acceptance/conftest.py, tests/unit/conftest.py): every acceptance file named
once, so none runs last unseen; every unit file named exists, so a renamed one is not silently put last."""

from __future__ import annotations

from pathlib import Path

from tests.acceptance.conftest import LONGEST_FIRST
from tests.unit.conftest import LONGEST_FIRST as UNIT_LONGEST_FIRST

REPOSITORY = Path(__file__).resolve().parents[3]
ACCEPTANCE = REPOSITORY / "tests" / "acceptance"


def test_the_longest_first_order_names_every_acceptance_file_once() -> None:
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert set(LONGEST_FIRST) == {path.name for path in ACCEPTANCE.glob("test_*.py")}


def test_the_unit_tier_s_longest_first_order_names_existing_files_once() -> None:
    assert len(set(UNIT_LONGEST_FIRST)) == len(UNIT_LONGEST_FIRST)
    assert [name for name in UNIT_LONGEST_FIRST if not (REPOSITORY / name).is_file()] == []
