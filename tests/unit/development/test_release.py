"""`make release`: one version, written once (pyproject.toml), that the CHANGELOG describes and the docs name; refused
otherwise or from a dirty tree; reproducible zips with checksums and a manifest whose hashes the module takes as they
are, the operator tools' wheel, and the annotated tag."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from leaderboard_dev import release
from leaderboard_dev.settings import REPOSITORY
from tests.unit.development.working_tree import clone_of_working_tree, git


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return release.build_release("1.2.3-rc.1", tmp_path_factory.mktemp("release") / "1.2.3-rc.1", allow_dirty=True)


@pytest.mark.slow  # builds a release (a clean clone, the zips): CI runs it
def test_a_release_holds_the_zips_their_checksums_and_the_manifest(built: Path) -> None:
    assert sorted(path.name for path in built.iterdir()) == [
        "SHA256SUMS",
        "aggregator.zip",
        "manifest.json",
        "query.zip",
    ]
    assert release.verify(built) == []
    checked = subprocess.run(["sha256sum", "--check", "SHA256SUMS"], cwd=built, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.slow  # builds a release (a clean clone, the zips): CI runs it
def test_the_manifest_names_version_commit_runtime_and_both_hash_forms(built: Path) -> None:
    manifest = json.loads((built / "manifest.json").read_text())
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPOSITORY, capture_output=True, text=True).stdout.strip()
    assert (manifest["version"], manifest["commit"]) == ("1.2.3-rc.1", head)
    assert (manifest["runtime"], manifest["architecture"]) == ("python3.12", "x86_64")
    for name in ("aggregator.zip", "query.zip"):
        digest = manifest["files"][name]
        assert base64.b64decode(digest["sha256_base64"]).hex() == digest["sha256"]
        assert digest["size"] == (built / name).stat().st_size


@pytest.mark.slow  # builds a release (a clean clone, the zips): CI runs it
def test_the_released_zips_are_the_bytes_build_py_gives(built: Path, tmp_path: Path) -> None:
    # given the release, when build.py builds the same sources elsewhere
    subprocess.run([sys.executable, str(REPOSITORY / "build.py"), "--output-dir", str(tmp_path)], check=True)
    # then every zip is byte for byte the released one
    for name in ("aggregator.zip", "query.zip"):
        assert (tmp_path / name).read_bytes() == (built / name).read_bytes()


@pytest.mark.slow  # builds a release (a clean clone, the zips): CI runs it
def test_a_changed_file_is_reported(built: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in built.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    (copy / "query.zip").write_bytes(b"not the release")
    assert release.verify(copy) == [
        "query.zip: sha256 differs from SHA256SUMS",
        "query.zip: differs from manifest.json",
    ]


def test_a_release_of_a_tree_that_differs_from_its_commit_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(release, "source_commit", lambda repository: ("0" * 40, True))
    with pytest.raises(release.ReleaseError, match="differs from HEAD"):
        release.build_release("1.2.3", tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("version", ["v1.2.3", "1.2", "01.2.3", "1.2.3 "])
def test_a_version_that_is_not_semantic_is_refused(version: str, tmp_path: Path) -> None:
    with pytest.raises(release.ReleaseError, match=r"MAJOR\.MINOR\.PATCH"):
        release.build_release(version, tmp_path / "out", allow_dirty=True)


# One version, written once: pyproject.toml's, which the CHANGELOG describes and every consumer-facing page names.

RELEASE_MENTIONS = re.compile(
    r"ref=v(?P<ref>[0-9][^\"'\s)&]*)"
    r"|@v(?P<pin>[0-9][^\"'\s)]*)"
    r"|VERSION=(?P<make>[0-9][^\s`]*)"
    r"|release_version=(?P<variable>[0-9][^\s`\\]*)"
    r"|release/(?P<folder>[0-9][^/\s]*)/"
    r"|dynamodb-materialized-aggregation/(?P<key>[0-9][^/\s]*)/"
)
"""How a page names a release: a git ref or pip pin, `make release VERSION=`, the examples' release_version, a
release folder (dist/release/x.y.z/, releases/.../x.y.z/) or an S3 key prefix."""


def consumer_pages() -> list[Path]:
    return [
        REPOSITORY / "README.md",
        *sorted((REPOSITORY / "docs").glob("*.md")),
        *sorted((REPOSITORY / "terraform" / "examples").glob("*/README.md")),
    ]


def test_the_version_is_written_once_and_the_changelog_describes_it() -> None:
    version = release.package_version()
    assert release.SEMANTIC_VERSION.fullmatch(version)
    notes = release.check_version(version)
    assert notes.startswith(f"## [{version}] - ")


def test_every_page_names_the_version_pyproject_gives() -> None:
    # given the version and every page a consumer or operator reads
    version = release.package_version()
    named = {
        (path.relative_to(REPOSITORY).as_posix(), match[0]): next(
            value for value in match.groupdict().values() if value
        )
        for path in consumer_pages()
        for match in RELEASE_MENTIONS.finditer(path.read_text())
    }
    # then each release they name is that one
    assert {where: value for where, value in named.items() if value != version} == {}
    # and the README's consumer block pins the module's tag and reads that release's manifest
    block = (REPOSITORY / "README.md").read_text().split("## Using the module from another stack", 1)[1]
    block = block.split("```hcl\n", 1)[1].split("```", 1)[0]
    assert f'//terraform?ref=v{version}"' in block
    assert f"/dynamodb-materialized-aggregation/{version}/manifest.json" in block


# The refusals, on a repository of two files: pyproject.toml and CHANGELOG.md.

CHANGELOG_TEXT = """# Changelog

## [Unreleased]

- a change not yet released

## [1.4.0] - 2026-12-01

### Added

- the paged listing

## [1.3.0] - 2026-11-01

- the first
"""


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    directory = tmp_path / "repository"
    directory.mkdir()
    (directory / "pyproject.toml").write_text('[project]\nname = "leaderboard-tools"\nversion = "1.4.0"\n')
    (directory / "CHANGELOG.md").write_text(CHANGELOG_TEXT)
    git(directory, "init", "--quiet")
    git(directory, "add", "--all")
    git(directory, "commit", "--quiet", "-m", "1.4.0")
    git(directory, "config", "user.name", "release-test")
    git(directory, "config", "user.email", "release-test@example.com")
    return directory


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Path]]:
    """build_release replaced by a record of its calls: the refusals and the tag, without building."""
    calls: list[tuple[str, Path]] = []

    def build(version: str, output_dir: Path | None, *, repository: Path, operator_wheel: bool) -> Path:
        assert operator_wheel
        calls.append((version, repository))
        target = output_dir or repository / "dist" / "release" / version
        target.mkdir(parents=True)
        return target

    monkeypatch.setattr(release, "build_release", build)
    return calls


def tags(repository: Path) -> list[str]:
    return git(repository, "tag", "--list").split()


@pytest.mark.parametrize(
    ("version", "refusal"),
    [
        ("1.5.0", "pyproject.toml's version is 1.4.0, not 1.5.0"),
        ("1.3.0", "pyproject.toml's version is 1.4.0, not 1.3.0"),
        ("v1.4.0", r"not MAJOR\.MINOR\.PATCH"),
    ],
)
def test_a_version_other_than_the_one_written_is_refused(
    repository: Path, builds: list[tuple[str, Path]], version: str, refusal: str, tmp_path: Path
) -> None:
    with pytest.raises(release.ReleaseError, match=refusal):
        release.release(version, tmp_path / "out", repository=repository)
    assert (builds, tags(repository)) == ([], [])


def test_a_version_the_changelog_does_not_describe_is_refused(
    repository: Path, builds: list[tuple[str, Path]], tmp_path: Path
) -> None:
    # given pyproject.toml at 1.5.0 and a CHANGELOG whose 1.5.0 is still [Unreleased]
    (repository / "pyproject.toml").write_text('[project]\nname = "leaderboard-tools"\nversion = "1.5.0"\n')
    git(repository, "commit", "--quiet", "--all", "-m", "1.5.0")
    # when it is released, then it is refused, with what to write
    with pytest.raises(release.ReleaseError, match=r"does not describe 1\.5\.0: .*`## \[1\.5\.0\] - YYYY-MM-DD`"):
        release.release("1.5.0", tmp_path / "out", repository=repository)
    # and a heading without its date is refused too
    text = CHANGELOG_TEXT.replace("## [Unreleased]\n", "## [Unreleased]\n\n## [1.5.0]\n")
    (repository / "CHANGELOG.md").write_text(text)
    git(repository, "commit", "--quiet", "--all", "-m", "1.5.0 described")
    with pytest.raises(release.ReleaseError, match="has no release date"):
        release.release("1.5.0", tmp_path / "out", repository=repository)
    assert (builds, tags(repository)) == ([], [])


@pytest.mark.parametrize("change", ["modified", "untracked", "staged"])
def test_a_tree_that_differs_from_head_is_refused(
    repository: Path, builds: list[tuple[str, Path]], change: str, tmp_path: Path
) -> None:
    if change == "modified":
        (repository / "CHANGELOG.md").write_text(CHANGELOG_TEXT + "\n- more\n")
    else:
        (repository / "notes.txt").write_text("draft\n")
        if change == "staged":
            git(repository, "add", "notes.txt")
    with pytest.raises(release.ReleaseError, match="differs from HEAD"):
        release.release("1.4.0", tmp_path / "out", repository=repository)
    assert (builds, tags(repository)) == ([], [])


def test_a_release_tags_head_once_with_its_changelog_section(
    repository: Path, builds: list[tuple[str, Path]], tmp_path: Path
) -> None:
    # when the version written is released from a clean tree
    released = release.release("1.4.0", tmp_path / "out", repository=repository)
    head = git(repository, "rev-parse", "HEAD")
    # then it is built for that version and HEAD gets the annotated tag v1.4.0, whose message is the section
    assert builds == [("1.4.0", repository)]
    assert (released.tag, released.commit, released.tagged_now) == ("v1.4.0", head, True)
    assert git(repository, "cat-file", "-t", "v1.4.0") == "tag"
    assert git(repository, "rev-parse", "v1.4.0^{commit}") == head
    message = git(repository, "tag", "--list", "--format=%(contents)", "v1.4.0")
    assert message.splitlines()[0] == "dynamodb-materialized-aggregation 1.4.0"
    assert "## [1.4.0] - 2026-12-01\n\n### Added\n\n- the paged listing" in message
    assert "1.3.0" not in message
    assert "not yet released" not in message
    # and the same release again builds again and leaves the tag as it is
    again = release.release("1.4.0", tmp_path / "out-again", repository=repository)
    assert (again.tag, again.tagged_now, tags(repository)) == ("v1.4.0", False, ["v1.4.0"])


def test_a_version_tagged_on_another_commit_is_refused(
    repository: Path, builds: list[tuple[str, Path]], tmp_path: Path
) -> None:
    # given v1.4.0 on the commit before HEAD
    git(repository, "tag", "--annotate", "-m", "1.4.0", "v1.4.0")
    (repository / "README.md").write_text("later\n")
    git(repository, "add", "README.md")
    git(repository, "commit", "--quiet", "-m", "later")
    # when 1.4.0 is released again, then it is refused
    refusal = r"tag v1\.4\.0 already names \w+, not HEAD .*: a version is released once"
    with pytest.raises(release.ReleaseError, match=refusal):
        release.release("1.4.0", tmp_path / "out", repository=repository)
    assert builds == []


# `make release` end to end, on a clone whose HEAD is this working tree.


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, release.Release]:
    clone = tmp_path_factory.mktemp("release-clone") / "clone"
    clone_of_working_tree(clone)
    return clone, release.release(release.package_version(clone), repository=clone)


@pytest.mark.slow  # builds a release (a clean clone, the zips): CI runs it
def test_a_release_of_a_clean_clone_tags_it_and_its_files_carry_the_changelog_version(
    released: tuple[Path, release.Release],
) -> None:
    clone, made = released
    version = release.package_version(clone)
    # then dist/release/<version>/ holds the zips, the operator wheel of that version, the manifest and the sums
    assert made.directory == clone / "dist" / "release" / version
    wheel = f"leaderboard_tools-{version}-py3-none-any.whl"
    assert sorted(path.name for path in made.directory.iterdir()) == sorted(
        ["SHA256SUMS", "aggregator.zip", "manifest.json", "query.zip", wheel]
    )
    assert release.verify(made.directory) == []
    manifest = release.read_manifest(made.directory)
    assert (manifest["version"], manifest["commit"], manifest["source_tree_clean"]) == (version, made.commit, True)
    assert set(manifest["files"]) == {"aggregator.zip", "query.zip", wheel}
    # the CHANGELOG describes it, and the clone's HEAD has the annotated tag v<version>
    assert release.check_version(version, clone).startswith(f"## [{version}] - ")
    assert made.tagged_now
    assert git(clone, "cat-file", "-t", f"v{version}") == "tag"
    assert git(clone, "rev-parse", f"v{version}^{{commit}}") == git(clone, "rev-parse", "HEAD") == made.commit
    # the wheel is the operator distribution alone, at that version
    with zipfile.ZipFile(made.directory / wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(f"leaderboard_tools-{version}.dist-info/METADATA").decode()
    assert {name.split("/")[0] for name in names} == {
        "leaderboard_tools",
        "leaderboard_core",
        f"leaderboard_tools-{version}.dist-info",
    }
    assert f"\nVersion: {version}\n" in metadata
    # and the tree is as clean as before: nothing the release wrote is left for git to see
    assert git(clone, "status", "--porcelain") == ""
