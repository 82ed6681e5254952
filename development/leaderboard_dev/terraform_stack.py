"""Apply, inspect and destroy the emulator stack (development/emulator_stack) in a workspace, via python-terraform."""

from __future__ import annotations

import atexit
import json
import os
import queue
import re
import shutil
import subprocess
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from python_terraform import IsFlagged, Terraform

from leaderboard_dev.file_lock import locked
from leaderboard_dev.provider_proxy import CachingProviderProxy
from leaderboard_dev.settings import EMULATOR_STACK, STATE_DIR, Endpoint, emulator_environment

MIRROR_VARIABLE = "TF_PROVIDER_MIRROR"
WELL_KNOWN_MIRRORS = (
    Path("/opt/tf-plugins"),
    Path("/usr/share/terraform/plugins"),
    Path.home() / ".terraform.d" / "plugins",
)


class TerraformError(RuntimeError):
    pass


def provider_mirror() -> Path | None:
    """The filesystem mirror of hashicorp/aws to install from, or None for the registry.

    TF_PROVIDER_MIRROR names it; unset, a well-known mirror on this machine is used if there is one.
    """
    configured = os.environ.get(MIRROR_VARIABLE)
    candidates = [Path(configured)] if configured else list(WELL_KNOWN_MIRRORS)
    for candidate in candidates:
        if (candidate / "registry.terraform.io" / "hashicorp" / "aws").is_dir():
            return candidate
    if configured:
        raise TerraformError(f"{MIRROR_VARIABLE}={configured} holds no registry.terraform.io/hashicorp/aws")
    return None


def cli_config(mirror: Path, directory: Path | None = None) -> Path:
    """A CLI config taking hashicorp/aws from the mirror and anything else from the registry (in .emulator/)."""
    directory = directory or STATE_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "terraform-cli.tfrc"
    text = (
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        f'    path    = "{mirror}"\n'
        '    include = ["registry.terraform.io/hashicorp/aws"]\n'
        "  }\n"
        '  direct {\n    exclude = ["registry.terraform.io/hashicorp/aws"]\n  }\n'
        "}\n"
    )
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


PROVIDER_GOGC = "800"
"""Go's garbage collector target for Terraform and the AWS provider it starts. Every plan, apply and destroy starts
the provider more than once, and each start builds its schema of thousands of resources; at Go's default (100) a
third of that CPU is collection. 800 costs about 1 GB per provider process and saves that third: provider starts are
what the acceptance suite computes most of on two cores. A GOGC already set is kept."""


def terraform_environment(endpoint: Endpoint | None) -> dict[str, str]:
    environment = dict(os.environ)
    environment["TF_IN_AUTOMATION"] = "1"
    environment.setdefault("GOGC", PROVIDER_GOGC)
    mirror = provider_mirror()
    if mirror is not None:
        environment["TF_CLI_CONFIG_FILE"] = str(cli_config(mirror))
    elif not Path(environment.get("TF_CLI_CONFIG_FILE", "~")).expanduser().is_file():
        environment.pop("TF_CLI_CONFIG_FILE", None)
    if endpoint is not None:
        environment.update(emulator_environment(endpoint))
    return environment


_INITIALISED: set[Path] = set()
"""Working folders this process has run `terraform init` in."""

REATTACH_VARIABLE = "TF_REATTACH_PROVIDERS"
SHARED_PROVIDER_VARIABLE = "LEADERBOARD_SHARED_PROVIDER"
"""0: every Terraform command starts its own provider processes, as Terraform does by default."""
CACHING_PROXY_VARIABLE = "LEADERBOARD_PROVIDER_PROXY"
"""0: Terraform attaches to the shared provider directly, without the caching proxy."""
PROVIDER_START_TIMEOUT = 60.0
"""Seconds a provider started in debug mode has to print where it listens before Terraform starts its own."""


@dataclass
class _RunningProvider:
    process: subprocess.Popen[str]
    reattach: str
    proxy: CachingProviderProxy | None

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


class SharedProvider:
    """One AWS provider process per Python process, which every Terraform command of it attaches to.

    Terraform starts a provider several times per command; each start builds the AWS provider's schema of
    thousands of resources and validates them, which is most of the acceptance suite's CPU. Started once in debug
    mode, the provider serves every command through TF_REATTACH_PROVIDERS (the protocol Terraform's own provider
    tests use), behind a proxy that replays its schema and its validation of the provider block
    (leaderboard_dev.provider_proxy). It dies with the thread that started it (PR_SET_PDEATHSIG) and is terminated
    at exit; one that died is started again, and one that cannot be started leaves Terraform to start its own."""

    _running: dict[tuple[str, str], _RunningProvider] = {}

    @classmethod
    def reattach(cls, binary: Path, working_dir: Path, environment: dict[str, str]) -> str | None:
        """TF_REATTACH_PROVIDERS for a command in `working_dir`, or None when no shared provider could be started."""
        key = cls.key(working_dir, environment)
        running = cls._running.pop(key, None)
        if running is not None:
            if running.process.poll() is None:
                cls._running[key] = running
                return running.reattach
            running.stop()
        try:
            running = cls._start(binary, working_dir, environment)
        except TerraformError as error:
            warnings.warn(f"no shared provider, Terraform starts its own: {error}", stacklevel=2)
            return None
        if not cls._running:
            atexit.register(cls.stop_all)
        cls._running[key] = running
        return running.reattach

    @staticmethod
    def key(working_dir: Path, environment: dict[str, str]) -> tuple[str, str]:
        """One provider per working folder (its relative paths) and endpoint (its configuration)."""
        return str(working_dir.resolve()), environment.get("AWS_ENDPOINT_URL", "")

    @classmethod
    def stop(cls, working_dir: Path, environment: dict[str, str]) -> None:
        running = cls._running.pop(cls.key(working_dir, environment), None)
        if running is not None:
            running.stop()

    @classmethod
    def stop_all(cls) -> None:
        while cls._running:
            cls._running.popitem()[1].stop()

    @classmethod
    def _start(cls, binary: Path, working_dir: Path, environment: dict[str, str]) -> _RunningProvider:
        """Relative paths in a configuration (a Lambda's zip) are the provider's: it runs in the working folder."""
        # A second configuration of one provider process fails with a CA bundle ("unable to add custom RootCAs
        # HTTPClient"); an emulator at an http:// endpoint needs none.
        environment = {name: value for name, value in environment.items() if name != "AWS_CA_BUNDLE"}
        process = subprocess.Popen(
            [*_DIE_WITH_PARENT, str(binary), "-debug"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env=environment,
            cwd=working_dir,
            text=True,
        )
        try:
            reattach = json.loads(_reattach_line(process, PROVIDER_START_TIMEOUT))
        except (TerraformError, ValueError):
            process.kill()
            process.wait()
            raise
        proxy = None
        if os.environ.get(CACHING_PROXY_VARIABLE, "1") == "1":
            ((_, provider),) = reattach.items()
            upstream = provider["Addr"]
            proxy = CachingProviderProxy(f"{upstream['Network']}:{upstream['String']}")
            provider["Addr"] = {"Network": "unix", "String": str(proxy.socket_path)}
        return _RunningProvider(process, json.dumps(reattach), proxy)


def _reattach_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The JSON a provider in debug mode prints; read in a thread so that a provider printing nothing cannot hang
    the run. The thread goes on draining stdout, which would otherwise fill and block the provider."""
    assert process.stdout is not None
    stdout = process.stdout
    found: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:
        for line in stdout:
            line = line.strip()
            if line.startswith(f"{REATTACH_VARIABLE}="):
                found.put(line.split("=", 1)[1].strip("'"))
        found.put(None)

    threading.Thread(target=drain, daemon=True).start()
    try:
        value = found.get(timeout=timeout)
    except queue.Empty:
        raise TerraformError(f"{process.args} printed no {REATTACH_VARIABLE} in {timeout:.0f} s") from None
    if value is None:
        raise TerraformError(f"{process.args} exited ({process.wait()}) without printing {REATTACH_VARIABLE}")
    return value


_DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "TERM", "--"] if shutil.which("setpriv") else []
"""The provider ends with the process that started it (PR_SET_PDEATHSIG), set by util-linux's setpriv before it
execs the provider: a `preexec_fn` would run Python in a child forked from a process holding gRPC threads, which
aborts it at times (SIGABRT, "Other threads are currently calling into gRPC, skipping fork() handlers")."""


def installed_provider(working_dir: Path) -> Path | None:
    """The hashicorp/aws binary `terraform init` installed in the working folder, None before init."""
    providers = working_dir / ".terraform" / "providers" / "registry.terraform.io" / "hashicorp" / "aws"
    found = sorted(providers.glob("*/*/terraform-provider-aws*"))
    return found[-1] if found else None


ALREADY_EXISTS = re.compile(
    r"^Error: creating (?P<kind>[^(\n]+?) \((?P<name>[^)\n]+)\):[^\n]*"
    r"(?:EntityAlreadyExists|ResourceAlreadyExistsException|ResourceInUseException|ResourceConflictException"
    r"|ConflictException: Schedule \S+ already exists in group (?P<group>[^.\s]+))"
    r".*?^\s+with (?P<address>[^,\s]+),",
    re.MULTILINE | re.DOTALL,
)
ENDPOINT_NOTE = "endpoint.json"
ORPHAN_ROUNDS = 3
"""Applies that may each adopt what the one before created without knowing it."""


def orphans(error: str, stack_name: str) -> list[tuple[str, str]]:
    """(address, import id) of each resource the apply created but did not record: its create reported the
    resource exists, under a name of this stack's own (unique per deployment, so nothing else made it). A create
    whose response the provider lost (an emulator under load) is retried by the SDK, and the retry finds its own
    first attempt: CreateRole, for one, is not idempotent. A schedule is imported as `<group>/<name>`."""
    found = []
    for block in re.split(r"(?m)^(?=Error: )", error):
        match = ALREADY_EXISTS.match(block)
        if match and (match["name"] == stack_name or match["name"].startswith(f"{stack_name}-")):
            import_id = f"{match['group']}/{match['name']}" if match["group"] else match["name"]
            found.append((match["address"], import_id))
    return found


@dataclass
class Stack:
    """One deployment of the emulator stack, isolated in a workspace named after its prefix unless `workspace` names
    another (the demo's resources keep the names the README gives, wherever its state is kept)."""

    name: str
    endpoint: Endpoint | None
    variables: dict[str, Any] = field(default_factory=dict)
    working_dir: Path = EMULATOR_STACK
    workspace: str = ""

    @property
    def workspace_name(self) -> str:
        return self.workspace or self.name

    def __post_init__(self) -> None:
        self._terraform = Terraform(working_dir=str(self.working_dir))

    @property
    def all_variables(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "aws_endpoint_url": self.endpoint.url if self.endpoint else "",
            "region": self.endpoint.region if self.endpoint else os.environ.get("AWS_REGION", "us-east-1"),
            **self.variables,
        }

    def _run(
        self, command: str, *arguments: str, in_workspace: bool = True, check: bool = True, **options: Any
    ) -> tuple[int, str, str]:
        """python-terraform passes os.environ to Terraform, so the environment is swapped in for the call."""
        environment = terraform_environment(self.endpoint)
        if in_workspace:
            environment["TF_WORKSPACE"] = self.workspace_name
        else:
            environment.pop("TF_WORKSPACE", None)
        binary = installed_provider(self.working_dir) if command != "init" else None
        if binary is not None and os.environ.get(SHARED_PROVIDER_VARIABLE, "1") == "1":
            reattach = SharedProvider.reattach(binary, self.working_dir, environment)
            if reattach is not None:
                environment[REATTACH_VARIABLE] = reattach
        previous = dict(os.environ)
        os.environ.clear()
        os.environ.update(environment)
        try:
            code, out, err = self._terraform.cmd(
                command, *arguments, capture_output=True, no_color=IsFlagged, **options
            )
        finally:
            os.environ.clear()
            os.environ.update(previous)
        if check and code != 0:
            raise TerraformError(f"terraform {command} failed ({code}):\n{err or out}")
        return code, out or "", err or ""

    def init(self) -> None:
        """Locked: stacks applied in parallel (one pytest worker each) share the working directory's .terraform.
        Initialised once per process and folder: the next stacks only need their workspace."""
        with locked(self.working_dir / ".terraform-init.lock"):
            if self.working_dir.resolve() not in _INITIALISED:
                self._run("init", in_workspace=False, input=False)
                _INITIALISED.add(self.working_dir.resolve())
            self._run("workspace select", "-or-create", self.workspace_name, in_workspace=False)

    def apply(self) -> dict[str, Any]:
        """Apply; a resource of this stack's that an earlier create left out of the state is imported (by its name)
        and the apply run again. Any other failure, or an import that fails, raises."""
        self.init()
        self._note_endpoint()
        code, out, err = self._apply_once()
        for _ in range(ORPHAN_ROUNDS):
            found = orphans(err, self.name) if code != 0 else []
            if not found:
                break
            for address, name in found:
                warnings.warn(f"{self.name}: {address} was created but not recorded; importing {name}", stacklevel=2)
                self._run("import", address, name, input=False, var=self.all_variables)
            code, out, err = self._apply_once()
        if code != 0:
            raise TerraformError(f"terraform apply failed ({code}):\n{err or out}")
        return self.outputs()

    def _apply_once(self) -> tuple[int, str, str]:
        return self._run("apply", check=False, input=False, auto_approve=IsFlagged, var=self.all_variables)

    def outputs(self) -> dict[str, Any]:
        """`terraform output -json` for all outputs: python-terraform's output(name) predates Terraform 1.x."""
        _, out, _ = self._run("output", json=IsFlagged)
        return {name: value["value"] for name, value in json.loads(out or "{}").items()}

    def pending_changes(self) -> str | None:
        """The plan's text when it would change anything, None when it is empty."""
        code, out, err = self._run(
            "plan", check=False, input=False, detailed_exitcode=IsFlagged, var=self.all_variables
        )
        if code == 0:
            return None
        if code == 2:
            return out
        raise TerraformError(f"terraform plan failed ({code}):\n{err or out}")

    def destroy(self) -> None:
        """Explicit flags: python-terraform's destroy() adds -force, which Terraform 1.x rejects. No refresh: the
        state holds every resource this stack created, which is what a destroy needs, and reading each one first
        is a third of the destroy's time."""
        self._run("destroy", input=False, auto_approve=IsFlagged, refresh="false", var=self.all_variables)

    def exists(self) -> bool:
        return (self._workspace_dir / "terraform.tfstate").is_file()

    @property
    def _workspace_dir(self) -> Path:
        return self.working_dir / "terraform.tfstate.d" / self.workspace_name

    def _note_endpoint(self) -> None:
        """Beside the workspace's state, which `terraform workspace delete` removes with it: the state does not say
        which emulator holds its resources, and `down` must destroy them there and nowhere else."""
        if self.endpoint is not None:
            self._workspace_dir.mkdir(parents=True, exist_ok=True)
            (self._workspace_dir / ENDPOINT_NOTE).write_text(json.dumps({"url": self.endpoint.url}))

    def deployed_at(self) -> str | None:
        """The endpoint this stack was last applied at; None for a stack applied before it was noted."""
        try:
            return str(json.loads((self._workspace_dir / ENDPOINT_NOTE).read_text())["url"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def delete_workspace(self, force: bool = False) -> None:
        """force drops a state that still lists resources: for an emulator that is gone with everything in it."""
        self._run("workspace select", "default", in_workspace=False, check=False)
        self._run(
            "workspace delete", self.workspace_name, in_workspace=False, check=False, force=IsFlagged if force else None
        )


@contextmanager
def deployed(stack: Stack) -> Iterator[dict[str, Any]]:
    """Apply, yield the outputs, and destroy afterwards even when apply or the body failed."""
    try:
        yield stack.apply()
    finally:
        stack.destroy()
        stack.delete_workspace()
