"""What a Terraform configuration declares (variables, outputs, blocks), read with python-hcl2, for tests."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import hcl2


@functools.cache
def _parsed(text: str) -> dict[str, Any]:
    return hcl2.loads(text)  # type: ignore[no-any-return]


def hcl_document(path: Path) -> dict[str, Any]:
    """The file as python-hcl2 reads it, parsed once per text: a parse takes about a tenth of a second, and the
    Terraform tests read the module's few files hundreds of times. A copy, so a caller may change it."""
    return copy.deepcopy(_parsed(Path(path).read_text()))


def unquoted(text: str) -> str:
    return text.strip('"')


def blocks(directory: Path, kind: str) -> dict[str, dict[str, Any]]:
    """Every top-level `variable` or `output` block of the directory's .tf files, by name."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.glob("*.tf")):
        document = hcl_document(path)
        for block in document.get(kind, []):
            for name, body in block.items():
                found[unquoted(name)] = body
    return found


def variables(directory: Path) -> dict[str, dict[str, Any]]:
    return blocks(directory, "variable")


def outputs(directory: Path) -> dict[str, dict[str, Any]]:
    return blocks(directory, "output")


def resources(directory: Path, kind: str = "resource") -> dict[str, dict[str, Any]]:
    """Every `resource` (or `data`) block of the directory, keyed 'type.name'."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.glob("*.tf")):
        document = hcl_document(path)
        for block in document.get(kind, []):
            for resource_type, instances in block.items():
                for name, body in instances.items():
                    found[f"{unquoted(resource_type)}.{unquoted(name)}"] = body
    return found


def local_values(directory: Path) -> dict[str, Any]:
    """Every `locals` value of the directory's .tf files, by name (as hcl2 reads it: expressions stay text)."""
    found: dict[str, Any] = {}
    for path in sorted(directory.glob("*.tf")):
        document = hcl_document(path)
        for block in document.get("locals", []):
            found.update(block)
    return found
