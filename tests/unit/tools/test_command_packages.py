"""A package per operator verb with more than one file: the code only one command reaches lies in packages.

The verbs are the CLI's subcommands, read from its parser (`cli.build_parser`); each is run by the module of its
handler, in `leaderboard_tools.commands` (a module, or a package that several verbs share, as `leaderboards`). A
command's own modules are those its modules import, directly or through others (read from the source, imports
inside functions too), that no other command reaches. They come in two layers (docs/design.md, "Where a change
goes"): the parser and output under `commands/`, the work beside it. In each layer, a command with more than one own
module keeps them in one package: never loose files beside other commands' modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

from leaderboard_tools import cli

SOURCE = Path(__file__).resolve().parents[3] / "src"
PACKAGE = "leaderboard_tools"
COMMANDS = f"{PACKAGE}.commands"


def command_units() -> dict[str, list[str]]:
    """`leaderboard_tools.commands.<unit>` -> the verbs the parser dispatches to it."""
    _, commands = cli.build_parser()
    units: dict[str, list[str]] = {}
    for verb, parser in commands.choices.items():
        module = parser.get_default("handler").__module__
        units.setdefault(".".join(module.split(".")[:3]), []).append(verb)
    return units


def source_modules(source: Path) -> dict[str, Path]:
    """Every module of the package under `source`, by its dotted name (a package by its `__init__.py`)."""
    modules = {}
    for path in (source / PACKAGE).rglob("*.py"):
        parts = path.relative_to(source).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported(name: str, modules: Mapping[str, Path]) -> set[str]:
    """The package's modules that module `name` imports (each package a dotted name passes through, too)."""
    path = modules[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            found.update(".".join(parts[:end]) for end in range(1, len(parts) + 1) if ".".join(parts[:end]) in modules)
    return found


def reached(start: Iterable[str], modules: Mapping[str, Path]) -> set[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(imported(name, modules))
    return seen


def loose_modules(source: Path, units: Iterable[str]) -> dict[str, list[str]]:
    """Per command unit, its own modules that are loose: more than one own module in a layer, not all in one package.

    One package means: every module of the layer sits in one folder with an `__init__.py` (the package's own
    `__init__` counts as in it), which is not `leaderboard_tools` or `leaderboard_tools.commands` themselves."""
    modules = source_modules(source)
    reach = {unit: reached([m for m in modules if m == unit or m.startswith(f"{unit}.")], modules) for unit in units}
    loose: dict[str, list[str]] = {}
    for unit, its in reach.items():
        others = set().union(*(other for name, other in reach.items() if name != unit))
        own = its - others
        for layer in (
            [m for m in own if m.startswith(f"{COMMANDS}.")],
            [m for m in own if not m.startswith(f"{COMMANDS}.")],
        ):
            packages = {m if modules[m].name == "__init__.py" else m.rsplit(".", 1)[0] for m in layer}
            tops = {".".join(p.split(".")[: 3 if p.startswith(f"{COMMANDS}.") else 2]) for p in packages}
            if len(layer) > 1 and (len(tops) != 1 or tops & {PACKAGE, COMMANDS} or packages & {PACKAGE, COMMANDS}):
                loose.setdefault(unit, []).extend(sorted(layer))
    return loose


def test_every_operator_verb_of_more_than_one_module_is_a_package() -> None:
    # given the verbs of the CLI's parser, grouped by the command module that runs them
    units = command_units()
    assert {"size", "rekey", "reconcile", "recover", "backfill", "readers", "top"} <= {
        v for vs in units.values() for v in vs
    }
    # when each command's own modules are found from the imports
    loose = loose_modules(SOURCE, units)
    # then none lies loose: each command of more than one module, in each layer, is one package
    assert loose == {}


def test_loose_modules_of_one_command_are_found(tmp_path: Path) -> None:
    # given a command `verb` whose work is two loose modules beside the package's shared one, and `other`'s one module
    files = {
        "__init__.py": "",
        "shared.py": "",
        "sizing.py": "from leaderboard_tools import shared\n",
        "prices.py": "",
        "commands/__init__.py": "",
        "commands/verb.py": (
            "def run():\n    from leaderboard_tools.sizing import x\n    from leaderboard_tools import prices\n"
        ),
        "commands/other.py": "from leaderboard_tools import shared, rekey\n",
        "rekey.py": "",
    }
    for name, text in files.items():
        (tmp_path / PACKAGE / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / PACKAGE / name).write_text(text)
    units = [f"{COMMANDS}.verb", f"{COMMANDS}.other"]
    # when its own modules are looked at, then the two loose ones are found, and `other`'s one module is not
    assert loose_modules(tmp_path, units) == {f"{COMMANDS}.verb": [f"{PACKAGE}.prices", f"{PACKAGE}.sizing"]}
    # and once they are a package of their own, nothing is loose
    (tmp_path / PACKAGE / "size").mkdir()
    (tmp_path / PACKAGE / "size" / "__init__.py").write_text("")
    for name in ("sizing.py", "prices.py"):
        (tmp_path / PACKAGE / name).rename(tmp_path / PACKAGE / "size" / name)
    (tmp_path / PACKAGE / "commands" / "verb.py").write_text("from leaderboard_tools.size import prices, sizing\n")
    assert loose_modules(tmp_path, units) == {}
