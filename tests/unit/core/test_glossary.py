"""The glossary of docs/design.md points at real code: every place its "Where it is defined" column names exists.

A reference is a path (`terraform/lambda.tf`, `leaderboard_tools/reconcile/recount.py`, `leaderboard_tools/backfill/`),
a file of the Lambdas or the tools (`catch_up.py`), a module (`shard_reader`, `leaderboard_core.claims`) or a name
defined in one (`delivery.Delivery`, `leaderboard_core.bookkeeping.RECOUNT_BAND`, `delivery.Delivery.is_direct`).
Names are found by reading the module, not importing it: a handler's module creates clients when imported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]
DESIGN = REPOSITORY / "docs" / "design.md"
ROOTS = (REPOSITORY, REPOSITORY / "src", REPOSITORY / "lambda_src")
MODULE_FOLDERS = (
    REPOSITORY / "lambda_src" / "aggregator",
    REPOSITORY / "lambda_src" / "query",
    REPOSITORY / "lambda_src",
    REPOSITORY / "src",
    REPOSITORY / "src" / "leaderboard_tools",
)


def glossary_rows() -> list[tuple[str, str]]:
    """(term, where it is defined) of every row of the glossary's table."""
    section = DESIGN.read_text().split("## Glossary", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip().strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    return [(cells[0], cells[-1]) for cells in rows[1:] if len(cells) == 3]


def references(where: str) -> list[str]:
    return re.findall(r"`([^`]+)`", where)


def _module_file(dotted: list[str]) -> Path | None:
    for folder in MODULE_FOLDERS:
        path = folder.joinpath(*dotted)
        for candidate in (path.with_suffix(".py"), path / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _defines(tree: ast.AST, names: list[str]) -> bool:
    """Whether `names` (a top-level name, then attributes of the class it names) is defined in the module's tree."""
    body = getattr(tree, "body", [])
    for node in body:
        defined: list[str] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined = [node.name]
        elif isinstance(node, ast.Assign):
            targets = [e for t in node.targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            defined = [target.id for target in targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined = [node.target.id]
        if names[0] in defined:
            return len(names) == 1 or _defines(node, names[1:])
    return False


def resolves(reference: str) -> bool:
    """Whether the reference names a path, a file, a module or a name defined in a module of the project."""
    if "/" in reference:
        return any((root / reference).exists() for root in ROOTS)
    if reference.endswith(".py"):
        return _module_file([reference.removesuffix(".py")]) is not None
    parts = reference.split(".")
    for split in range(len(parts), 0, -1):
        module = _module_file(parts[:split])
        if module is not None:
            return split == len(parts) or _defines(ast.parse(module.read_text()), parts[split:])
    return False


def test_the_glossary_has_its_terms() -> None:
    # given the glossary, when its rows are read, then the terms the code and the issue name are among them
    terms = " ".join(term for term, _ in glossary_rows())
    for term in (
        "progress table",
        "claim",
        "named record",
        "segment",
        "phase",
        "read context",
        "query kind",
        "downloads table",
        "aggregates table",
    ):
        assert f"**{term}**" in terms, term


def test_every_place_the_glossary_names_exists() -> None:
    # given every reference of the glossary's "Where it is defined" column
    named = [(term, reference) for term, where in glossary_rows() for reference in references(where)]
    assert len(named) > 30
    # when each is looked up, then it is a path, a file, a module or a name defined where it says
    missing = [f"{term}: {reference}" for term, reference in named if not resolves(reference)]
    assert missing == []


def test_a_reference_to_nothing_does_not_resolve() -> None:
    # given references to a file, a module, a name and a nested name that do not exist, then none resolves
    for reference in ("terraform/nothing.tf", "nothing.py", "delivery.Nothing", "delivery.Delivery.nothing"):
        assert not resolves(reference), reference
    # and their real neighbours do
    for reference in ("terraform/lambda.tf", "catch_up.py", "delivery.Delivery", "delivery.Delivery.is_direct"):
        assert resolves(reference), reference
