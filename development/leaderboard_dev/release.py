"""`make release VERSION=x.y.z`: the files a platform repository consumes, in dist/release/<version>/.

The zips come from build.py (reproducible: the same commit gives the same bytes anywhere), so a
platform team can rebuild a release and compare. Beside them, SHA256SUMS (`sha256sum -c` reads it)
and manifest.json: the version, the commit, the runtime the wheels were installed for, and each
zip's sha256, hex and base64; the base64 form is what the module's *_package_source_code_hash
inputs take, so a stack can read them from the manifest instead of hashing a file it does not have.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from leaderboard_dev.settings import DIST, REPOSITORY

RELEASES = DIST / "release"
MANIFEST = "manifest.json"
CHECKSUMS = "SHA256SUMS"
PACKAGES = ("aggregator.zip", "query.zip")
SEMANTIC_VERSION = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?")


class ReleaseError(RuntimeError):
    pass


@dataclass(frozen=True)
class PackageDigest:
    size: int
    sha256: str
    sha256_base64: str

    @classmethod
    def of(cls, path: Path) -> PackageDigest:
        digest = hashlib.sha256(path.read_bytes()).digest()
        return cls(path.stat().st_size, digest.hex(), base64.b64encode(digest).decode())


def _build_script() -> ModuleType:
    """build.py itself, for the platform it installs wheels for: the manifest states what the build did."""
    spec = importlib.util.spec_from_file_location("leaderboard_build", REPOSITORY / "build.py")
    if spec is None or spec.loader is None:
        raise ReleaseError("build.py cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lambda_platform() -> dict[str, str]:
    """The Lambda runtime and architecture build.py installs the pinned wheels for."""
    options = _build_script().LAMBDA_PLATFORM
    python_version = options[options.index("--python-version") + 1]
    platform = options[options.index("--platform") + 1]
    architecture = "arm64" if platform.endswith("aarch64") else "x86_64"
    return {"runtime": f"python{python_version}", "architecture": architecture}


def source_commit(repository: Path = REPOSITORY) -> tuple[str, bool]:
    """HEAD's commit, and whether the working tree differs from it (untracked files included)."""

    def git(*arguments: str) -> str:
        return subprocess.run(
            ["git", *arguments], cwd=repository, capture_output=True, text=True, check=True
        ).stdout.strip()

    return git("rev-parse", "HEAD"), bool(git("status", "--porcelain"))


def manifest_for(version: str, commit: str, clean: bool, directory: Path) -> dict[str, Any]:
    return {
        "name": "dynamodb-materialized-aggregation",
        "version": version,
        "commit": commit,
        "source_tree_clean": clean,
        **lambda_platform(),
        "files": {name: vars(PackageDigest.of(directory / name)) for name in PACKAGES},
    }


def build_release(version: str, output_dir: Path | None = None, allow_dirty: bool = False) -> Path:
    """Build the release into output_dir (default dist/release/<version>), replacing what was there."""
    if not SEMANTIC_VERSION.fullmatch(version):
        raise ReleaseError(f"version {version!r} is not MAJOR.MINOR.PATCH[-PRERELEASE]")
    commit, dirty = source_commit()
    if dirty and not allow_dirty:
        raise ReleaseError(
            "the working tree differs from HEAD: commit first, so that the manifest's commit is what the zips hold"
        )
    target = (output_dir or RELEASES / version).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".release-{version}-", dir=target.parent) as temporary:
        staging = Path(temporary)
        subprocess.run([sys.executable, str(REPOSITORY / "build.py"), "--output-dir", str(staging)], check=True)
        manifest = manifest_for(version, commit, not dirty, staging)
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        listed = (*PACKAGES, MANIFEST)
        sums = "".join(f"{PackageDigest.of(staging / name).sha256}  {name}\n" for name in listed)
        (staging / CHECKSUMS).write_text(sums)
        staging.chmod(0o755)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
        staging.mkdir()  # TemporaryDirectory removes its own path on exit
    return target


def read_manifest(directory: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((directory / MANIFEST).read_text())
    return manifest


def verify(directory: Path) -> list[str]:
    """What does not match in a release folder: each SHA256SUMS line and each manifest digest, checked."""
    problems = []
    for line in (directory / CHECKSUMS).read_text().splitlines():
        expected, name = line.split("  ", 1)
        if PackageDigest.of(directory / name).sha256 != expected:
            problems.append(f"{name}: sha256 differs from SHA256SUMS")
    for name, recorded in read_manifest(directory)["files"].items():
        if vars(PackageDigest.of(directory / name)) != recorded:
            problems.append(f"{name}: differs from manifest.json")
    return problems
