from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import build


def stage_with(root: Path, files: dict[str, str]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return root


FILES = {
    "aggregator.py": "print('handler')\n",
    "pkg/__init__.py": "",
    "pkg/module.py": "x = 1\n",
    "pkg/__pycache__/module.cpython-312.pyc": "bytecode",
    "bin/jp.py": "#!/usr/bin/python3.11\n",
    "pkg-1.0.dist-info/RECORD": "pkg/module.py,,\n",
}


def test_the_same_sources_give_the_same_bytes_whatever_their_mtimes_and_modes(tmp_path: Path) -> None:
    # given two stages with the same content but different timestamps, permissions and creation order
    first = stage_with(tmp_path / "a", FILES)
    second = stage_with(tmp_path / "b", dict(reversed(FILES.items())))
    for path in second.rglob("*"):
        os.utime(path, (1_700_000_000, 1_700_000_000))
        if path.is_file():
            path.chmod(0o755)
    # when both are zipped
    build.write_zip(first, tmp_path / "a.zip")
    build.write_zip(second, tmp_path / "b.zip")
    # then the artifacts are identical
    digest = [hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() for name in ("a.zip", "b.zip")]
    assert digest[0] == digest[1]


def test_the_zip_holds_code_and_metadata_but_no_bytecode_or_host_scripts(tmp_path: Path) -> None:
    build.write_zip(stage_with(tmp_path / "stage", FILES), tmp_path / "out.zip")
    with zipfile.ZipFile(tmp_path / "out.zip") as archive:
        infos = archive.infolist()
    assert [info.filename for info in infos] == [
        "aggregator.py",
        "pkg-1.0.dist-info/RECORD",
        "pkg/__init__.py",
        "pkg/module.py",
    ]
    assert {info.date_time for info in infos} == {build.FIXED_TIMESTAMP}
    assert {info.external_attr >> 16 for info in infos} == {0o100644}


def test_each_function_declares_every_dependency_pinned() -> None:
    for function in build.FUNCTIONS:
        requirements = (build.SOURCES / function / "requirements.txt").read_text().splitlines()
        pins = [line for line in requirements if line and not line.startswith("#")]
        assert pins, function
        assert all("==" in pin for pin in pins), pins
