"""`make release`: reproducible zips with checksums and a manifest whose hashes the module takes as they are."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from leaderboard_dev import release
from leaderboard_dev.settings import REPOSITORY


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return release.build_release("1.2.3-rc.1", tmp_path_factory.mktemp("release") / "1.2.3-rc.1", allow_dirty=True)


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


def test_the_manifest_names_version_commit_runtime_and_both_hash_forms(built: Path) -> None:
    manifest = json.loads((built / "manifest.json").read_text())
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPOSITORY, capture_output=True, text=True).stdout.strip()
    assert (manifest["version"], manifest["commit"]) == ("1.2.3-rc.1", head)
    assert (manifest["runtime"], manifest["architecture"]) == ("python3.12", "x86_64")
    for name in ("aggregator.zip", "query.zip"):
        digest = manifest["files"][name]
        assert base64.b64decode(digest["sha256_base64"]).hex() == digest["sha256"]
        assert digest["size"] == (built / name).stat().st_size


def test_the_released_zips_are_the_bytes_build_py_gives(built: Path, tmp_path: Path) -> None:
    # given the release, when build.py builds the same sources elsewhere
    subprocess.run([sys.executable, str(REPOSITORY / "build.py"), "--output-dir", str(tmp_path)], check=True)
    # then every zip is byte for byte the released one
    for name in ("aggregator.zip", "query.zip"):
        assert (tmp_path / name).read_bytes() == (built / name).read_bytes()


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
    monkeypatch.setattr(release, "source_commit", lambda: ("0" * 40, True))
    with pytest.raises(release.ReleaseError, match="differs from HEAD"):
        release.build_release("1.2.3", tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("version", ["v1.2.3", "1.2", "01.2.3", "1.2.3 "])
def test_a_version_that_is_not_semantic_is_refused(version: str, tmp_path: Path) -> None:
    with pytest.raises(release.ReleaseError, match=r"MAJOR\.MINOR\.PATCH"):
        release.build_release(version, tmp_path / "out", allow_dirty=True)
