"""How pytest-xdist hands the tests to its workers under `--dist loadfile`: a file at a time (some files share a folder
or Terraform state among their tests), except the files of SPREAD, whose tests are long and independent of each other
(no fixture wider than a test, no shared folder) and go one at a time to whichever worker is free. Held together, the
stream model's file alone is several minutes of work on one worker, and the run waits for that worker at its end."""

from __future__ import annotations

from xdist.scheduler import LoadFileScheduling

SPREAD = frozenset(
    {
        "tests/unit/stream_model/test_exactly_once.py",
        "tests/unit/stream_model/test_guard_mutations.py",
        "tests/unit/stream_model/test_naive_designs.py",
        "tests/unit/stream_model/test_one_reader.py",
        "tests/unit/query/test_query_verbs_adversarial.py",
        "tests/unit/query/test_query_verbs.py",
        "tests/unit/query/test_query_boards.py",
        "tests/unit/query/test_rank_policies.py",
        "tests/unit/tools/test_backfill_histories.py",
        "tests/unit/tools/test_backfill.py",
        "tests/unit/tools/test_cli_newcomer.py",
        "tests/unit/tools/test_repair_edges.py",
        "tests/unit/tools/test_repair_band_histories.py",
        "tests/unit/tools/test_band_records.py",
        "tests/unit/aggregator/test_window_steps.py",
        "tests/unit/aggregator/test_catch_up_memory.py",
        "tests/unit/aggregator/test_catch_up_nested_items.py",
        "tests/unit/aggregator/test_aggregator_handler.py",
    }
)


class SpreadLongFiles(LoadFileScheduling):
    """`--dist loadfile`, with each test of a SPREAD file a work unit of its own."""

    def _split_scope(self, nodeid: str) -> str:
        file = super()._split_scope(nodeid)
        return nodeid if file in SPREAD else file
