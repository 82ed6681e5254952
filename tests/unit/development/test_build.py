from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import build
import pytest


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


def test_builders_of_one_artifact_at_once_each_leave_it_whole(tmp_path: Path) -> None:
    # given one stage, and several builders writing the same artifact at the same time (the bench's parallel stacks)
    stage = stage_with(tmp_path / "stage", FILES)
    artifact = tmp_path / "shared" / "faulty.zip"
    # when they all write it
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda _: build.write_zip(stage, artifact), range(16)))
    # then none failed, the artifact is the zip one builder alone makes, and no partial file is left
    build.write_zip(stage, tmp_path / "alone.zip")
    assert artifact.read_bytes() == (tmp_path / "alone.zip").read_bytes()
    assert [path.name for path in artifact.parent.iterdir()] == ["faulty.zip"]


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


def test_a_wheels_record_names_only_what_the_zip_holds_so_the_venvs_path_leaves_no_trace(tmp_path: Path) -> None:
    # given two stages whose host script differs only by the interpreter path in its shebang, as pip writes them
    # from venvs in two checkouts, and a RECORD listing that script's hash
    def record(script: str) -> str:
        digest = hashlib.sha256(script.encode()).hexdigest()
        return (
            f"../../bin/jp.py,sha256={digest},{len(script)}\npkg/module.py,sha256=abc,6\npkg-1.0.dist-info/RECORD,,\n"
        )

    stages = []
    for name, interpreter in (("a", "/work/main/.venv/bin/python"), ("b", "/work/elsewhere/.venv/bin/python")):
        script = f"#!{interpreter}\n"
        stages.append(
            stage_with(tmp_path / name, {**FILES, "bin/jp.py": script, "pkg-1.0.dist-info/RECORD": record(script)})
        )
    # when both are zipped
    build.write_zip(stages[0], tmp_path / "a.zip")
    build.write_zip(stages[1], tmp_path / "b.zip")
    # then the zips are identical, and the RECORD keeps the rows of the files in the zip
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        assert (
            archive.read("pkg-1.0.dist-info/RECORD").decode()
            == "pkg/module.py,sha256=abc,6\npkg-1.0.dist-info/RECORD,,\n"
        )


def test_each_function_declares_every_dependency_pinned() -> None:
    for function in build.FUNCTIONS:
        requirements = (build.SOURCES / function / "requirements.txt").read_text().splitlines()
        pins = [line for line in requirements if line and not line.startswith("#")]
        assert pins, function
        assert all("==" in pin for pin in pins), pins


RUNTIME_PACKAGES = ("boto3", "botocore", "jmespath", "s3transfer", "dateutil", "six.py", "urllib3")
"""What the Lambda Python runtime provides besides the standard library: the AWS SDK and what it needs."""
FUNCTION_ENVIRONMENT = {
    "TABLE_NAME": "t",
    "PROGRESS_TABLE_NAME": "t-progress",
    "TABLE_ARN": "arn:aws:dynamodb:us-east-1:000000000000:table/t",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "x",
    "AWS_SECRET_ACCESS_KEY": "x",
    "POWERTOOLS_SERVICE_NAME": "import-check",
}


def lambda_runtime_path(tmp_path: Path) -> Path:
    """A folder holding only the runtime's packages, linked from this interpreter's site-packages."""
    import boto3

    site = Path(boto3.__file__).resolve().parents[1]
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    for name in RUNTIME_PACKAGES:
        (runtime / name).symlink_to(site / name)
    return runtime


def import_in_clean_interpreter(task: Path, runtime: Path, module: str) -> subprocess.CompletedProcess[str]:
    """`python -I -S`: no site-packages, no user site, no PYTHONPATH; only the function's code and the runtime."""
    code = f"import sys; sys.path[:0] = [{str(task)!r}, {str(runtime)!r}]; import {module}"
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],
        capture_output=True,
        text=True,
        env={**FUNCTION_ENVIRONMENT, "PATH": os.environ.get("PATH", "")},
        check=False,
    )


@pytest.mark.parametrize("function", build.FUNCTIONS)
def test_each_built_zip_imports_with_only_what_the_lambda_runtime_provides(
    function: str, built_zips: dict[str, Path], tmp_path: Path
) -> None:
    artifact = built_zips[function]
    # given the zip unpacked as Lambda unpacks it, and an interpreter that sees nothing else but boto3
    task = tmp_path / "task"
    with zipfile.ZipFile(artifact) as archive:
        archive.extractall(task)
    runtime = lambda_runtime_path(tmp_path)
    # when its handler module is imported, then it imports
    result = import_in_clean_interpreter(task, runtime, function)
    assert result.returncode == 0, result.stderr
    # and the same zip without its bundled dependencies does not: the check can tell a missing dependency
    for bundled in task.iterdir():
        if bundled.is_dir():
            shutil.rmtree(bundled)
    stripped = import_in_clean_interpreter(task, runtime, function)
    assert stripped.returncode != 0
    assert "ModuleNotFoundError" in stripped.stderr
