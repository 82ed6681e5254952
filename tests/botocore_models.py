"""The unit tier's botocore models, parsed once per test process.

Every boto3 session (the tools and the handlers make new ones per test, as they do per process in production) parses
the JSON models of its services again: some 20 ms a file, hundreds of times in a run. The models are the same files
for every session of a process, so the tests share what one session's loader parsed with the next; botocore's own
per-loader cache returns the same objects within one session already, so sharing them changes nothing it reads."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from botocore.loaders import Loader

_SHARED = ("load_service_model", "load_data", "load_data_with_path")


def _shared_across_loaders(method: Callable[..., Any]) -> Callable[..., Any]:
    parsed: dict[tuple[Any, ...], Any] = {}

    @functools.wraps(method)
    def load(self: Loader, *arguments: Any, **options: Any) -> Any:
        key = (tuple(self.search_paths), arguments, tuple(sorted(options.items())))
        if key not in parsed:
            parsed[key] = method(self, *arguments, **options)
        return parsed[key]

    load.shared_across_loaders = True  # type: ignore[attr-defined]
    return load


def share_parsed_models() -> None:
    """Once per process: later calls leave the loader as the first made it."""
    for name in _SHARED:
        method = getattr(Loader, name)
        if not getattr(method, "shared_across_loaders", False):
            setattr(Loader, name, _shared_across_loaders(method))
