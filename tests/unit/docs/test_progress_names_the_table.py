"""One concept, one name: "progress" names the aggregator's progress table (docs/design.md's glossary) and nothing else.

What a long operator run tells the terminal is its phases (`on_phase`, `phase_bar`, `PhaseBar`:
leaderboard_tools/reconcile/phases.py); a backfill resumes from its segments. A name with "progress" in it that is not
the table's would make the two meanings one again, so the operator tools' identifiers are read here, and the names the
reporting once had are looked for everywhere a reader meets them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]
TOOLS = REPOSITORY / "src" / "leaderboard_tools"
TABLE_NAMES = frozenset({"progress_table", "progress_item", "progress_key", "progress_created", "shard_progress"})
"""The identifiers that name the progress table, its name, a shard's item in it, its key, its creation time."""
TABLE_CLASSES = frozenset({"ShardProgress"})
"""A shard's item in the progress table, as the host reads it (stream_reading.py)."""
FORMER_NAMES = re.compile(r"\b_?on_progress\b|\bprogress_of\b|\bprogress_lines?\b|\bbackfill_progress\b")
"""What the phases and the backfill's segments were called before "progress" was kept for the table."""
READ = ("src", "development/leaderboard_dev", "tests", "docs")


def first_party(module: str | None) -> bool:
    return bool(module) and str(module).split(".")[0] in {"leaderboard_tools", "leaderboard_core", "leaderboard_dev"}


def progress_identifiers(source: str) -> set[str]:
    """Every identifier of `source` with "progress" in it (any case) that it names itself: definitions, arguments,
    keywords, variables and attributes; a name bound by importing it from a third-party module (rich's `Progress`,
    `ProgressColumn`) is the library's, not the project's."""
    tree = ast.parse(source)
    theirs = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and not first_party(node.module)
        for alias in node.names
    }
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            names.add(node.arg)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
    return {name for name in names - theirs if "progress" in name.lower()}


def not_the_table(names: set[str]) -> set[str]:
    return {name for name in names if name not in TABLE_NAMES | TABLE_CLASSES}


def test_the_operator_tools_use_progress_only_for_the_progress_table() -> None:
    # given every module of the operator tools
    modules = sorted(TOOLS.rglob("*.py"))
    assert modules
    # when the identifiers with "progress" in them are read
    found = {
        str(module.relative_to(REPOSITORY)): not_the_table(progress_identifiers(module.read_text()))
        for module in modules
    }
    # then each names the progress table
    assert {module: names for module, names in found.items() if names} == {}


def test_a_reporting_name_with_progress_in_it_is_found() -> None:
    # given a module that reports its phases through a callback named for progress, beside the table's names
    source = (
        "from rich.progress import Progress, ProgressColumn\n"
        "def run(progress_table: str, on_progress=print) -> None:\n"
        "    progress_item = shard_progress(progress_table)\n"
        "    with Progress(ProgressColumn()) as bar:\n"
        "        on_progress(1)\n"
        "class ProgressBar: ...\n"
    )
    # when its identifiers are read, then the callback and the class are found, and the table's names and rich's are not
    assert not_the_table(progress_identifiers(source)) == {"on_progress", "ProgressBar"}


def test_the_former_reporting_names_appear_nowhere() -> None:
    # given the product, the development tooling, the tests and the docs (not the CHANGELOG: it is history)
    files = [
        path
        for folder in READ
        for path in sorted((REPOSITORY / folder).rglob("*"))
        if path.suffix in {".py", ".md"} and path != Path(__file__).resolve()
    ]
    assert files
    # when they are searched for the names the phases and the segments once had
    found = {
        f"{path.relative_to(REPOSITORY)}:{number}": line.strip()
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if FORMER_NAMES.search(line)
    }
    # then none is left
    assert found == {}
