"""make check runs a `matrix` test's first case; CI, `make test` and bare `pytest` run every case."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.unit.conftest import REPOSITORY

MATRIX_FILE = "tests/unit/tools/test_cli_newcomer.py"
BOARD_MATRIX = "test_every_board_command_takes_either_table_of_an_attached_deployment"


def collected(*options: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *options, MATRIX_FILE],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return re.findall(r"^\S+::(\S+)$", result.stdout, flags=re.MULTILINE)


def test_make_checks_selection_keeps_a_matrix_tests_first_case_and_every_plain_test() -> None:
    # given the file's tests as CI collects them, and as make check selects them
    every = collected()
    checked = collected("-m", "not slow")
    board_cases = [test for test in every if test.startswith(BOARD_MATRIX + "[")]
    assert len(board_cases) == 16

    # then make check keeps the matrix's first case alone, and every test that is not a matrix's
    assert [test for test in checked if test.startswith(BOARD_MATRIX + "[")] == board_cases[:1]
    assert "test_top_on_the_source_table_prints_what_its_query_function_answers" in checked
    assert "test_size_piped_to_head_ends_with_141_as_its_help_promises" in checked
    assert set(checked) < set(every)
