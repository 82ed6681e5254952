"""The unit tier stands apart from the benchmark: nothing it imports, directly or through the development package or
the tests' shared helpers (`tests/*.py`, `tests.unit...`), is `leaderboard_dev.bench` (whose plotting extras a
checkout for changing the product need not have), and bare `pytest` collects no acceptance test."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]
DEVELOPMENT = REPOSITORY / "development"
UNIT_TIER = (REPOSITORY / "tests" / "unit", REPOSITORY / "tests" / "stream_model")
BENCHMARK = "leaderboard_dev.bench"


def imported_names(path: Path) -> set[str]:
    """Every module an import statement of `path` names, and every dotted `leaderboard_dev` name in its strings (what
    `importlib.import_module` or a lazy import would load)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("leaderboard_dev.")
        ):
            names.add(node.value.split()[0])
    return names


def development_module_file(name: str, development: Path) -> Path | None:
    """The file of a module of the development package, or of the tests' own modules (`tests.streams`), which live
    beside it: the tests' helpers are imported by every tier."""
    parts = name.split(".")
    if parts[0] == "leaderboard_dev":
        base = development.joinpath(*parts)
    elif parts[0] == "tests":
        base = development.parent.joinpath(*parts)
    else:
        return None
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def benchmark_imports_reached_from(files: list[Path], development: Path = DEVELOPMENT) -> dict[str, list[str]]:
    """Each benchmark module reached, with the chain of files that reaches it."""
    reached: dict[str, list[str]] = {}
    seen: set[Path] = set()
    pending = [(file, [file.name]) for file in files]
    while pending:
        file, chain = pending.pop()
        if file in seen:
            continue
        seen.add(file)
        for name in imported_names(file):
            if name == BENCHMARK or name.startswith(BENCHMARK + "."):
                reached.setdefault(name, chain)
                continue
            module = development_module_file(name, development)
            if module is not None:
                pending.append((module, [*chain, module.name]))
    return reached


def test_the_unit_tier_imports_nothing_of_the_benchmark() -> None:
    # given every Python file of the unit tier and the stream model
    files = [path for folder in UNIT_TIER for path in sorted(folder.rglob("*.py")) if path != Path(__file__).resolve()]
    assert len(files) > 100
    # when their imports are followed through the development package
    reached = benchmark_imports_reached_from(files)
    # then none reaches the benchmark
    assert reached == {}


def test_the_boundary_check_sees_an_import_of_the_benchmark_through_the_development_package(tmp_path: Path) -> None:
    # given a test that imports a development module which imports the benchmark
    package = tmp_path / "leaderboard_dev"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "middle.py").write_text("import json\nfrom leaderboard_dev.bench.report import render\n")
    test = tmp_path / "test_reaches.py"
    test.write_text("from leaderboard_dev import middle\n")
    # when its imports are followed through that package
    reached = benchmark_imports_reached_from([test], development=tmp_path)
    # then the check names the benchmark module and the chain that reaches it
    assert reached[BENCHMARK + ".report"] == ["test_reaches.py", "middle.py"]
    # and the benchmark's own tests, which import it directly, are seen too
    assert benchmark_imports_reached_from(sorted((REPOSITORY / "tests" / "bench").glob("test_*.py")))


def test_the_boundary_check_sees_an_import_of_the_benchmark_through_a_shared_test_helper(tmp_path: Path) -> None:
    # given a unit test that imports a helper of the tests (`tests/*.py`, outside the unit tier's folders) which
    # imports the benchmark
    development = tmp_path / "development"
    (development / "leaderboard_dev").mkdir(parents=True)
    (development / "leaderboard_dev" / "__init__.py").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "helper.py").write_text("from leaderboard_dev.bench.boards import bucket\n")
    test = tmp_path / "test_reaches.py"
    test.write_text("from tests.helper import bucket\n")
    # when its imports are followed
    reached = benchmark_imports_reached_from([test], development=development)
    # then the check names the benchmark module and the chain through the helper
    assert reached[BENCHMARK + ".boards.bucket"] == ["test_reaches.py", "helper.py"]


def test_bare_pytest_collects_the_unit_tier_and_the_benchmark_s_own_tests_but_no_acceptance_test() -> None:
    # given the project's pytest settings
    settings = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    # then what `pytest` runs without arguments needs no emulator
    assert "tests/unit" in settings["testpaths"]
    assert "tests/bench" in settings["testpaths"]
    assert not any(path.startswith("tests/acceptance") for path in settings["testpaths"])
