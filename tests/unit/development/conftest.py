"""The development tooling's tests (build, release, emulators, stacks, provider proxy). A fixture only one file uses
stays in that file; the shared ones are here and in tests/unit/conftest.py.
"""

from __future__ import annotations

from pathlib import Path

import build
import pytest


@pytest.fixture(scope="session")
def built_zips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each function's zip built from the sources as they are now (not whatever `make build` left in dist/), once per
    test process."""
    output = tmp_path_factory.mktemp("dist")
    return {function: build.build_function(function, output) for function in build.FUNCTIONS}
