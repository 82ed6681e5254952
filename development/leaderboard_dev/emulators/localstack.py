"""Provision and launch LocalStack's community runtime on the host, without Docker.

Everything is fetched through PyPI and npm by exact pins kept in ``localstack_runtime/`` beside this file:
LocalStack would otherwise download DynamoDB Local, its javaagent and a JRE from the internet,
and run Lambda functions in Docker. Standard library only, since host-side tooling imports it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from leaderboard_dev.emulators.adversarial_retries import ADVERSARIAL_RETRIES_VARIABLE, DIRECTORY_NAME
from leaderboard_dev.emulators.stream_mapping import POLL_INTERVAL_SECONDS
from leaderboard_dev.file_lock import locked

EXECUTOR_NAME = "process"
HOOKS_DISTRIBUTION = "leaderboard-tools-localstack-hooks"
# What LocalStack imports of leaderboard_dev: the stream delivery engine, TTL's userIdentity, their LocalStack plugin.
HOOK_MODULES = (
    "__init__.py",
    "emulators/__init__.py",
    "emulators/stream_mapping.py",
    "emulators/delivery_rules.py",
    "emulators/adversarial_retries.py",
    "emulators/localstack_stream_mapping.py",
    "emulators/ttl_expiry.py",
)
HOOKS_PYPROJECT = f"""[build-system]
requires = ["setuptools>=70"]
build-backend = "setuptools.build_meta"

[project]
name = "{HOOKS_DISTRIBUTION}"
version = "0.1.0"
description = "Tumbling windows and TTL's userIdentity for LocalStack's DynamoDB streams, by leaderboard-tools."
requires-python = ">=3.12"
dependencies = []

[project.entry-points."localstack.hooks.on_infra_start"]
deliver_tumbling_windows = "leaderboard_dev.emulators.localstack_stream_mapping:deliver_tumbling_windows"
mark_ttl_expiries = "leaderboard_dev.emulators.localstack_stream_mapping:mark_ttl_expiries"

[tool.setuptools.packages.find]
where = ["src"]
"""
DYNAMODB_LOCAL_NPM = "amplify-dynamodb-simulator@2.9.30"
DYNAMODB_LOCAL_INTEGRITY = (
    "sha512-xTeeRLvzEfqyd5lh3bH4c0kHvSHHmmhD5ZDsHFKAQ5g2Zl6JqlFdutaQhCLHzxEp6Ry1o7TB6niIoXuQAnSewQ=="
)
LOCALSTACK_PYTHONS = ("3.13",)
FUNCTION_PYTHONS = ("3.12", "3.13")

# LocalStack looks up DynamoDB Local as "dynamodb-local" version "2" and runs it with Java "21".
_DDB_LOCAL_DIR = Path("dynamodb-local", "2")
_JAVA_HOME_LINK = Path("java", "21")
_DDB_AGENT_JAR = "ddb-local-loader-0.1.jar"
# DynamoDB Local's manifest puts its own folder on the classpath, so this file beside the jar quiets
# its INFO logging, as LocalStack's installer does by adding it to the jar.
_LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="Console" target="SYSTEM_OUT">
      <PatternLayout pattern="%d{HH:mm:ss.SSS} [%t] %-5level %logger{36} - %msg%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="WARN"><AppenderRef ref="Console"/></Root>
  </Loggers>
</Configuration>
"""


def prepare(cache_dir: Path) -> None:
    """Idempotently provision LocalStack, the function runtime, DynamoDB Local, the executor and the hooks.

    Each part is rebuilt only when the hash of its pinned inputs changes, so a warm call is cheap.
    """
    cache_dir = cache_dir.resolve()
    cache_dir.mkdir(parents=True, exist_ok=True)
    data = _data_dir()
    with locked(cache_dir / ".prepare.lock"):
        ls_python = _find_python(LOCALSTACK_PYTHONS)
        ls_key = _ensure(
            cache_dir / "localstack-venv",
            [str(ls_python), _digest_files([data / "localstack-requirements.txt"])],
            lambda venv: _make_venv(ls_python, venv, data / "localstack-requirements.txt"),
        )
        executor_src = data / "process_executor"
        _ensure(
            cache_dir / "localstack-venv" / ".process-executor",
            [ls_key, _digest_package(executor_src)],
            lambda marker: _install_executor(cache_dir / "localstack-venv", executor_src, marker),
        )
        package = Path(__file__).resolve().parents[1]
        _ensure(
            cache_dir / "localstack-venv" / ".stream-mapping-hooks",
            [ls_key, HOOKS_PYPROJECT, _digest_modules(package, HOOK_MODULES)],
            lambda marker: _install_hooks(cache_dir / "localstack-venv", package, marker),
        )
        fn_python = _find_python(FUNCTION_PYTHONS)
        _ensure(
            cache_dir / "function-venv",
            [str(fn_python), _digest_files([data / "function-runtime-requirements.txt"])],
            lambda venv: _make_venv(fn_python, venv, data / "function-runtime-requirements.txt"),
        )
        jdk = _find_jdk()
        _ensure(
            cache_dir / "libs" / _DDB_LOCAL_DIR,
            [
                DYNAMODB_LOCAL_NPM,
                DYNAMODB_LOCAL_INTEGRITY,
                str(jdk),
                _digest_files([data / "DynamoDBLocalAgent.java"]),
            ],
            lambda target: _install_dynamodb_local(target, jdk, data / "DynamoDBLocalAgent.java"),
        )
        _link(cache_dir / "libs" / _JAVA_HOME_LINK, jdk)


def launch_spec(cache_dir: Path, port: int, state_dir: Path) -> tuple[list[str], dict[str, str]]:
    """Return argv and environment that run LocalStack in the foreground on 127.0.0.1:<port>.

    LocalStack's library folders live under its filesystem root, so ``state_dir`` gets a link
    ``usr/lib/localstack`` to the prepared libraries (its "static libs" install target).
    """
    cache_dir = cache_dir.resolve()
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    _link(state_dir / "usr" / "lib" / "localstack", cache_dir / "libs")
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}
    env.update(
        {
            "OVERRIDE_IN_DOCKER": "0",  # else FILESYSTEM_ROOT is ignored
            "FILESYSTEM_ROOT": str(state_dir),
            "GATEWAY_LISTEN": f"127.0.0.1:{port}",
            "GATEWAY_SERVER": "hypercorn",  # the default (twisted) binds 0.0.0.0 whatever GATEWAY_LISTEN says
            "LOCALSTACK_HOST": f"127.0.0.1:{port}",  # localhost.localstack.cloud does not resolve here
            # Queue URLs http://127.0.0.1:<port>/<account>/<name>: the "path" form fails the Terraform provider.
            "SQS_ENDPOINT_STRATEGY": "off",
            "DNS_ADDRESS": "0",  # no DNS server on port 53
            "SKIP_SSL_CERT_DOWNLOAD": "1",
            "DISABLE_EVENTS": "1",
            # DynamoDB Local's own streams; the Kinesis-mock path lost records right after table creation.
            "PROVIDER_OVERRIDE_DYNAMODB": "v2",
            "PROVIDER_OVERRIDE_DYNAMODBSTREAMS": "v2",
            # In memory, DynamoDB Local applies writes several times faster than on its SQLite files;
            # the emulator keeps no state across restarts anyway.
            "DYNAMODB_IN_MEMORY": "1",
            "DYNAMODB_HEAP_SIZE": "1g",
            # LocalStack polls once a second by default (one page a poll) and backs off to 10 s while a
            # stream has no shard yet; AWS polls four times a second.
            "LAMBDA_EVENT_SOURCE_MAPPING_POLL_INTERVAL_SEC": str(POLL_INTERVAL_SECONDS),
            "LAMBDA_EVENT_SOURCE_MAPPING_MAX_BACKOFF_ON_EMPTY_POLL_SEC": "1",
            "LAMBDA_RUNTIME_EXECUTOR": EXECUTOR_NAME,
            "LAMBDA_PROCESS_EXECUTOR_PYTHON": str(cache_dir / "function-venv" / "bin" / "python"),
            # Where tests switch the stream mapping's adversarial retries on, per function.
            ADVERSARIAL_RETRIES_VARIABLE: str(state_dir / DIRECTORY_NAME),
        }
    )
    argv = [str(cache_dir / "localstack-venv" / "bin" / "python"), "-m", "localstack.runtime.main"]
    return argv, env


def _data_dir() -> Path:
    """Find ``localstack_runtime`` beside this file, or from the working directory (editable or not)."""
    here = Path(__file__).resolve()
    for candidate in (
        here.parent / "localstack_runtime",
        *(
            base / "development" / "leaderboard_dev" / "emulators" / "localstack_runtime"
            for base in [Path.cwd(), *Path.cwd().parents]
        ),
    ):
        if (candidate / "localstack-requirements.txt").is_file():
            return candidate
    raise FileNotFoundError(
        "development/leaderboard_dev/emulators/localstack_runtime/localstack-requirements.txt not found"
    )


def _ensure(target: Path, inputs: list[str], build: Callable[[Path], None]) -> str:
    """Build ``target`` unless its stamp matches ``inputs``; returns the key for dependants."""
    key = hashlib.sha256("\0".join(inputs).encode()).hexdigest()
    stamp = target.with_name(target.name + ".stamp")
    if target.exists() and stamp.is_file() and stamp.read_text() == key:
        return key
    stamp.unlink(missing_ok=True)
    _remove(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    build(target)
    stamp.write_text(key)
    return key


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _link(link: Path, target: Path) -> None:
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return
    _remove(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=True)


def _digest_files(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _digest_package(root: Path) -> str:
    """Hash what gets installed (metadata and sources), not the package's tests."""
    files = [root / "pyproject.toml", *sorted(p for p in (root / "src").rglob("*") if p.is_file())]
    digest = hashlib.sha256()
    for path in files:
        if "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _digest_modules(package: Path, modules: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for module in modules:
        digest.update(module.encode() + b"\0" + (package / module).read_bytes() + b"\0")
    return digest.hexdigest()


def _run(argv: list[str]) -> str:
    result = subprocess.run(argv, check=False, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return result.stdout


def _find_python(versions: tuple[str, ...]) -> Path:
    """Resolve a real interpreter (not a pyenv shim) from PATH, else from pyenv's versions dir."""
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for version in versions:
        candidates = [shutil.which(f"python{version}")]
        candidates += [
            str(p) for p in sorted(pyenv_root.glob(f"versions/{version}.*/bin/python{version}"), reverse=True)
        ]
        for candidate in filter(None, candidates):
            probe = subprocess.run(
                [
                    candidate,
                    "-c",
                    "import sys; print(sys.executable); print('%d.%d' % sys.version_info[:2])",
                ],
                check=False,
                capture_output=True,
                text=True,
            )
            lines = probe.stdout.split()
            if probe.returncode == 0 and len(lines) == 2 and lines[1] == version:
                return Path(lines[0])
    raise FileNotFoundError(f"no Python interpreter among {versions} on PATH or under {pyenv_root}")


def _make_venv(python: Path, venv: Path, requirements: Path) -> None:
    """Install an exact lock, so that every machine gets the same packages."""
    _run([str(python), "-m", "venv", str(venv)])
    _pip_install(venv, "--requirement", str(requirements))


def _pip_install(venv: Path, *arguments: str) -> None:
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "--quiet", *arguments])


def _install_executor(venv: Path, source: Path, marker: Path) -> None:
    """Install from a copy so that the build leaves no build/ or egg-info in the work tree."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / source.name
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "tests"))
        _pip_install(venv, "--no-deps", "--no-build-isolation", "--no-index", "--force-reinstall", str(copy))
    marker.write_text(EXECUTOR_NAME)


def _install_hooks(venv: Path, package: Path, marker: Path) -> None:
    """Install the engine and its LocalStack plugin alone, as a distribution of their own: LocalStack finds
    its hooks through entry points, and needs nothing else of leaderboard_dev. The distribution keeps its first
    name, so that a reinstall replaces an earlier copy instead of adding a second hook beside it."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / HOOKS_DISTRIBUTION
        for module in HOOK_MODULES:
            target = root / "src" / "leaderboard_dev" / module
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(package / module, target)
        (root / "pyproject.toml").write_text(HOOKS_PYPROJECT)
        _pip_install(venv, "--no-deps", "--no-build-isolation", "--no-index", "--force-reinstall", str(root))
    marker.write_text(HOOKS_DISTRIBUTION)


def _find_jdk() -> Path:
    candidates = [os.environ.get("JAVA_HOME")]
    if javac := shutil.which("javac"):
        candidates.append(str(Path(javac).resolve().parent.parent))
    candidates += [str(p) for p in sorted(Path("/usr/lib/jvm").glob("java-*-openjdk-*"), reverse=True)]
    for candidate in filter(None, candidates):
        home = Path(candidate).resolve()
        if (home / "bin" / "javac").is_file() and (home / "bin" / "jar").is_file():
            return home
    raise FileNotFoundError("no JDK with javac and jar found (JAVA_HOME, PATH, /usr/lib/jvm)")


def _install_dynamodb_local(target: Path, jdk: Path, agent_source: Path) -> None:
    """Unpack DynamoDB Local from its npm carrier and add the javaagent LocalStack expects."""
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        packed = json.loads(
            _run(
                [
                    "npm",
                    "pack",
                    DYNAMODB_LOCAL_NPM,
                    "--json",
                    "--silent",
                    "--pack-destination",
                    str(scratch),
                ]
            )
        )
        archive = scratch / packed[0]["filename"]
        actual = "sha512-" + base64.b64encode(hashlib.sha512(archive.read_bytes()).digest()).decode()
        if actual != DYNAMODB_LOCAL_INTEGRITY:
            raise RuntimeError(f"{DYNAMODB_LOCAL_NPM}: integrity {actual} != {DYNAMODB_LOCAL_INTEGRITY}")
        staging = scratch / "dynamodb-local"
        prefix = "package/emulator/"
        with tarfile.open(archive) as tar:
            members = []
            for member in tar.getmembers():
                if member.name.startswith(prefix) and len(member.name) > len(prefix):
                    member.name = member.name[len(prefix) :]
                    members.append(member)
            tar.extractall(staging, members=members, filter="data")
        (staging / "log4j2.xml").write_text(_LOG4J2_XML)
        classes = scratch / "classes"
        _run([str(jdk / "bin" / "javac"), "-d", str(classes), str(agent_source)])
        manifest = scratch / "MANIFEST.MF"
        manifest.write_text(f"Premain-Class: {agent_source.stem}\n")
        _run(
            [
                str(jdk / "bin" / "jar"),
                "--create",
                "--file",
                str(staging / _DDB_AGENT_JAR),
                "--manifest",
                str(manifest),
                "-C",
                str(classes),
                ".",
            ]
        )
        shutil.move(staging, target)
