"""The workers' scheduling (tests/scheduling.py): the long files' tests spread, every other file stays whole."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.scheduling import SPREAD, SpreadLongFiles
from tests.unit.conftest import REPOSITORY


def test_each_test_of_a_spread_file_is_a_unit_of_its_own_and_any_other_file_is_one_unit() -> None:
    # given the scheduler's split, without a running session
    split = SpreadLongFiles._split_scope.__get__(object.__new__(SpreadLongFiles))
    spread = "tests/unit/stream_model/test_exactly_once.py"
    whole = "tests/unit/terraform/test_module_validations.py"
    # when tests of each kind of file are split into work units
    units = {
        split(f"{spread}::test_a[x]"),
        split(f"{spread}::test_a[y]"),
        split(f"{whole}::test_b"),
        split(f"{whole}::test_c"),
    }
    # then the spread file's two tests are two units, the other file's two tests one
    assert units == {f"{spread}::test_a[x]", f"{spread}::test_a[y]", whole}


def test_every_spread_file_exists() -> None:
    # then no name in SPREAD is left behind by a renamed or moved file
    assert [name for name in sorted(SPREAD) if not (REPOSITORY / name).is_file()] == []


def test_a_loadfile_run_hands_a_spread_files_tests_to_both_workers() -> None:
    # given a spread file's quick tests (its malformed requests), run on two workers by file
    target = "tests/unit/query/test_query_verbs.py"
    # when pytest runs it with the project's conftest
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            "--dist",
            "loadfile",
            "-v",
            "-k",
            "malformed",
            target,
        ],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PROPERTY_EXAMPLES": "quick"},
    )
    # then both workers ran some of its tests
    assert result.returncode == 0, result.stdout[-3000:]
    workers = {line.split("]")[0].lstrip("[") for line in result.stdout.splitlines() if line.startswith("[gw")}
    assert workers == {"gw0", "gw1"}, result.stdout[-3000:]
