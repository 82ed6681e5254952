#!/usr/bin/env python3
"""Build the Lambda zips in dist/ byte-for-byte reproducibly.

Each function folder under lambda_src/ holds its own modules and a requirements.txt that
pins every dependency; beside them goes the shared core, lambda_src/leaderboard_core/, as the
package `leaderboard_core`; nothing else of the repository goes into a zip. Entries are sorted,
timestamps and permissions fixed, and stored uncompressed so that a different zlib on
another machine cannot change a byte: the same sources give the same sha256, and
`terraform plan` stays empty after a rebuild.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SOURCES = ROOT / "lambda_src"
FUNCTIONS = ("aggregator", "query")
SHARED_CORE = "leaderboard_core"
FIXED_TIMESTAMP = (1980, 1, 1, 0, 0, 0)
LAMBDA_PLATFORM = ["--platform", "manylinux2014_x86_64", "--implementation", "cp", "--python-version", "3.12"]
EXCLUDED_PARTS = {"__pycache__", "bin", "tests"}
TIME_ZONES_TF = ROOT / "terraform" / "time_zones.tf"


def install_requirements(requirements: Path, target: Path) -> None:
    """Install the pinned wheels for the Lambda runtime, whatever Python runs the build."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-compile",
            "--only-binary=:all:",
            *LAMBDA_PLATFORM,
            "--target",
            str(target),
            "--requirement",
            str(requirements),
        ],
        check=True,
    )


def staged_files(stage: Path) -> list[Path]:
    files = [path for path in stage.rglob("*") if path.is_file()]
    kept = [path for path in files if not EXCLUDED_PARTS.intersection(path.relative_to(stage).parts)]
    return sorted((path for path in kept if path.suffix != ".pyc"), key=lambda path: path.relative_to(stage).as_posix())


def archived_bytes(path: Path, names: set[str]) -> bytes:
    """A file's bytes as zipped; a wheel's RECORD keeps only the rows of files in the zip.

    pip writes the console scripts it installs into `bin/` (left out of the zip) with this interpreter's path in
    their shebang, and records their hashes in RECORD: kept, they would make the zip depend on where the venv is.
    """
    content = path.read_bytes()
    if path.name != "RECORD" or not path.parent.name.endswith(".dist-info"):
        return content
    rows = content.decode().splitlines(keepends=True)
    kept = [row for row in rows if row.split(",", 1)[0] in names]
    return "".join(kept).encode()


def write_zip(stage: Path, artifact: Path) -> None:
    artifact.parent.mkdir(parents=True, exist_ok=True)
    # A partial file of its own: concurrent builders of one artifact each replace it whole.
    descriptor, partial_name = tempfile.mkstemp(prefix=f".{artifact.name}.", suffix=".partial", dir=artifact.parent)
    os.close(descriptor)
    partial = Path(partial_name)
    files = staged_files(stage)
    names = {path.relative_to(stage).as_posix() for path in files}
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_STORED) as archive:
        for path in files:
            info = zipfile.ZipInfo(path.relative_to(stage).as_posix(), date_time=FIXED_TIMESTAMP)
            info.create_system = 3
            info.external_attr = 0o100644 << 16
            archive.writestr(info, archived_bytes(path, names))
    partial.chmod(0o644)
    partial.replace(artifact)


def build_function(name: str, output_dir: Path) -> Path:
    source = SOURCES / name
    with tempfile.TemporaryDirectory(prefix=f"build-{name}-") as temporary:
        stage = Path(temporary)
        requirements = source / "requirements.txt"
        if requirements.exists():
            install_requirements(requirements, stage)
        for module in sorted(source.glob("*.py")):
            shutil.copyfile(module, stage / module.name)
        (stage / SHARED_CORE).mkdir()
        for module in sorted((SOURCES / SHARED_CORE).glob("*.py")):
            shutil.copyfile(module, stage / SHARED_CORE / module.name)
        artifact = output_dir / f"{name}.zip"
        write_zip(stage, artifact)
    return artifact


def time_zones_tf() -> str:
    """terraform/time_zones.tf: the zones leaderboard_time_zone may name, those of the tzdata both zips carry (run
    with the project's venv, which installs the same pin)."""
    sys.path.insert(0, str(SOURCES))
    import tzdata

    from leaderboard_core.buckets import time_zone_names

    names = "".join(f'    "{name}",\n' for name in time_zone_names())
    return (
        "# The zones leaderboard_time_zone may name: every zone of the IANA time zone database as the tzdata package\n"
        f"# pinned in lambda_src/*/requirements.txt holds it (tzdata {tzdata.__version__}, IANA {tzdata.IANA_VERSION}),"
        " which both zips carry.\n"
        "# Written by `python build.py --time-zones`; tests/unit/core/test_time_zones.py holds it equal to the\n"
        "# package.\n"
        f'locals {{\n  time_zone_data_version = "{tzdata.__version__}"\n  time_zones = [\n{names}  ]\n}}\n'
    )


def describe(artifact: Path) -> str:
    digest = hashlib.sha256(artifact.read_bytes()).digest()
    return (
        f"{artifact.relative_to(ROOT) if artifact.is_relative_to(ROOT) else artifact}  "
        f"{artifact.stat().st_size} bytes  sha256 {digest.hex()}  (base64 {base64.b64encode(digest).decode()})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, default=ROOT / "dist")
    parser.add_argument(
        "--time-zones", action="store_true", help=f"write {TIME_ZONES_TF.relative_to(ROOT)} from the pinned tzdata"
    )
    parser.add_argument(
        "functions", nargs="*", metavar="FUNCTION", help=f"any of {', '.join(FUNCTIONS)} (default: all)"
    )
    arguments = parser.parse_args(argv)
    if arguments.time_zones:
        TIME_ZONES_TF.write_text(time_zones_tf())
        return 0
    unknown = set(arguments.functions) - set(FUNCTIONS)
    if unknown:
        parser.error(f"unknown function(s): {', '.join(sorted(unknown))}")
    for name in arguments.functions or FUNCTIONS:
        print(describe(build_function(name, arguments.output_dir.resolve())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
