"""`make release VERSION=x.y.z`: the files a platform repository consumes, in dist/release/<version>/, and the tag.

One version, written once: `version` in the repository's pyproject.toml (the operator distribution's). A release
is refused unless the version asked for is that one, CHANGELOG.md describes it (`## [x.y.z] - YYYY-MM-DD`), the
working tree is HEAD's, and no tag `vx.y.z` names another commit; then the artifacts are built and HEAD gets the
annotated tag `vx.y.z`, whose message is the CHANGELOG's section. Nothing is pushed.

The zips come from build.py (reproducible: the same commit gives the same bytes anywhere), so a
platform team can rebuild a release and compare. Beside them, the operator tools' wheel, built from the
commit's own files (`git archive`), SHA256SUMS (`sha256sum -c` reads it) and manifest.json: the version,
the commit, the runtime the wheels were installed for, and each file's sha256, hex and base64; the
base64 form is what the module's *_package_source_code_hash inputs take, so a stack can read them from
the manifest instead of hashing a file it does not have.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from packaging.version import Version

from leaderboard_dev.settings import REPOSITORY

MANIFEST = "manifest.json"
CHECKSUMS = "SHA256SUMS"
SEMANTIC_VERSION = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?")
TAG_PREFIX = "v"
CHANGELOG = "CHANGELOG.md"
CHANGELOG_HEADING = re.compile(r"^## \[(?P<version>[^\]]+)\](?P<rest>.*)$", re.MULTILINE)
RELEASE_DATE = re.compile(r" - \d{4}-\d{2}-\d{2}")
OPERATOR_DISTRIBUTION = "leaderboard_tools"
DIFFERS_FROM_HEAD = (
    "the working tree differs from HEAD (`git status`): commit or stash first, so that the tag, the manifest's commit "
    "and the files are one thing"
)


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


def _build_script(repository: Path = REPOSITORY) -> ModuleType:
    """build.py itself, for the platform it installs wheels for: the manifest states what the build did."""
    spec = importlib.util.spec_from_file_location("leaderboard_build", repository / "build.py")
    if spec is None or spec.loader is None:
        raise ReleaseError("build.py cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lambda_platform(repository: Path = REPOSITORY) -> dict[str, str]:
    """The Lambda runtime and architecture build.py installs the pinned wheels for."""
    options = _build_script(repository).LAMBDA_PLATFORM
    python_version = options[options.index("--python-version") + 1]
    platform = options[options.index("--platform") + 1]
    architecture = "arm64" if platform.endswith("aarch64") else "x86_64"
    return {"runtime": f"python{python_version}", "architecture": architecture}


def _git(repository: Path, *arguments: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        ["git", *arguments], cwd=repository, input=stdin, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise ReleaseError(f"git {' '.join(arguments)}: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout.strip()


def source_commit(repository: Path = REPOSITORY) -> tuple[str, bool]:
    """HEAD's commit, and whether the working tree differs from it (untracked files included)."""
    return _git(repository, "rev-parse", "HEAD"), bool(_git(repository, "status", "--porcelain"))


def package_version(repository: Path = REPOSITORY) -> str:
    """The version, written once: the operator distribution's, in pyproject.toml."""
    project: dict[str, Any] = tomllib.loads((repository / "pyproject.toml").read_text())["project"]
    return str(project["version"])


def changelog_section(version: str, repository: Path = REPOSITORY) -> str:
    """CHANGELOG.md's section of a released version, from its heading `## [x.y.z] - YYYY-MM-DD` to the next."""
    text = (repository / CHANGELOG).read_text()
    headings = list(CHANGELOG_HEADING.finditer(text))
    for index, heading in enumerate(headings):
        if heading["version"] != version:
            continue
        if not RELEASE_DATE.fullmatch(heading["rest"].rstrip()):
            raise ReleaseError(
                f"{CHANGELOG}'s heading {heading[0]!r} has no release date: `## [{version}] - YYYY-MM-DD`"
            )
        end = headings[index + 1].start() if index + 1 < len(headings) else len(text)
        return text[heading.start() : end].strip() + "\n"
    raise ReleaseError(
        f"{CHANGELOG} does not describe {version}: move what it says under [Unreleased] into a section "
        f"`## [{version}] - YYYY-MM-DD` first"
    )


def check_version(version: str, repository: Path = REPOSITORY) -> str:
    """The release's notes (its CHANGELOG section), if `version` is the one the repository gives; else refused."""
    if not SEMANTIC_VERSION.fullmatch(version):
        raise ReleaseError(f"version {version!r} is not MAJOR.MINOR.PATCH[-PRERELEASE]")
    written = package_version(repository)
    if written != version:
        raise ReleaseError(
            f"pyproject.toml's version is {written}, not {version}: the version is written there once "
            "(and described in CHANGELOG.md); change it there, commit, then release"
        )
    return changelog_section(version, repository)


def tag_name(version: str) -> str:
    return f"{TAG_PREFIX}{version}"


def tagged_commit(version: str, repository: Path = REPOSITORY) -> str | None:
    """The commit the tag `vx.y.z` names, None without one."""
    try:
        return _git(repository, "rev-parse", "--verify", "--quiet", f"refs/tags/{tag_name(version)}^{{commit}}")
    except ReleaseError:
        return None


def manifest_for(
    version: str, commit: str, clean: bool, directory: Path, repository: Path = REPOSITORY
) -> dict[str, Any]:
    files = sorted(path.name for path in directory.iterdir() if path.is_file())
    return {
        "name": "dynamodb-materialized-aggregation",
        "version": version,
        "commit": commit,
        "source_tree_clean": clean,
        **lambda_platform(repository),
        "files": {name: vars(PackageDigest.of(directory / name)) for name in files},
    }


def build_operator_wheel(version: str, commit: str, output_dir: Path, repository: Path = REPOSITORY) -> Path:
    """The operator distribution's wheel, built from the commit's files (`git archive`), never the working tree's
    leftovers; its timestamps are the commit's (SOURCE_DATE_EPOCH)."""
    with tempfile.TemporaryDirectory(prefix="release-source-") as temporary:
        source = Path(temporary) / "source"
        archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=repository, capture_output=True)
        if archive.returncode != 0:
            raise ReleaseError(f"git archive {commit}: {archive.stderr.decode(errors='replace').strip()}")
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as files:
            files.extractall(source, filter="data")
        environment = {**os.environ, "SOURCE_DATE_EPOCH": _git(repository, "show", "-s", "--format=%ct", commit)}
        built = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", temporary, str(source)],
            env=environment,
            capture_output=True,
            text=True,
            check=False,
        )
        wheels = sorted(Path(temporary).glob(f"{OPERATOR_DISTRIBUTION}-*.whl"))
        if built.returncode != 0 or len(wheels) != 1:
            raise ReleaseError(f"the operator wheel did not build:\n{built.stderr or built.stdout}")
        if Version(wheels[0].name.split("-")[1]) != Version(version):
            raise ReleaseError(f"{wheels[0].name} is not version {version}")
        return Path(shutil.copy2(wheels[0], output_dir / wheels[0].name))


def build_release(
    version: str,
    output_dir: Path | None = None,
    allow_dirty: bool = False,
    repository: Path = REPOSITORY,
    operator_wheel: bool = False,
) -> Path:
    """Build the release into output_dir (default dist/release/<version>), replacing what was there: the zips, with
    operator_wheel the tools' wheel of HEAD, the manifest and SHA256SUMS. What `make release` checks first is
    `release`'s; this builds any semantic version (the tests' and the consumer stack's own)."""
    if not SEMANTIC_VERSION.fullmatch(version):
        raise ReleaseError(f"version {version!r} is not MAJOR.MINOR.PATCH[-PRERELEASE]")
    commit, dirty = source_commit(repository)
    if dirty and not allow_dirty:
        raise ReleaseError(DIFFERS_FROM_HEAD)
    target = (output_dir or repository / "dist" / "release" / version).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".release-{version}-", dir=target.parent) as temporary:
        staging = Path(temporary)
        subprocess.run([sys.executable, str(repository / "build.py"), "--output-dir", str(staging)], check=True)
        if operator_wheel:
            build_operator_wheel(version, commit, staging, repository)
        manifest = manifest_for(version, commit, not dirty, staging, repository)
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        listed = (*manifest["files"], MANIFEST)
        sums = "".join(f"{PackageDigest.of(staging / name).sha256}  {name}\n" for name in listed)
        (staging / CHECKSUMS).write_text(sums)
        staging.chmod(0o755)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
        staging.mkdir()  # TemporaryDirectory removes its own path on exit
    return target


@dataclass(frozen=True)
class Release:
    directory: Path
    tag: str
    commit: str
    tagged_now: bool


def release(version: str, output_dir: Path | None = None, repository: Path = REPOSITORY) -> Release:
    """`make release`: refused unless the version is the repository's, described in CHANGELOG.md, the tree is HEAD's
    and its tag is free (or already names HEAD: the same release built again); then built, and HEAD tagged."""
    notes = check_version(version, repository)
    commit, dirty = source_commit(repository)
    if dirty:
        raise ReleaseError(DIFFERS_FROM_HEAD)
    tag = tag_name(version)
    tagged = tagged_commit(version, repository)
    if tagged is not None and tagged != commit:
        raise ReleaseError(f"tag {tag} already names {tagged}, not HEAD ({commit}): a version is released once")
    directory = build_release(version, output_dir, repository=repository, operator_wheel=True)
    if tagged is None:
        message = f"dynamodb-materialized-aggregation {version}\n\n{notes}"
        # whitespace cleanup only: git's default would strip the notes' `### Added` lines as comments
        _git(repository, "tag", "--annotate", "--cleanup=whitespace", "--file=-", tag, commit, stdin=message)
    return Release(directory, tag, commit, tagged_now=tagged is None)


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
