"""Local development's command line: `python -m leaderboard_dev <command>`.

Commands: up, down, demo, leaderboard, terraform-config, check-terraform, provider-schema, release."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from leaderboard_dev.emulators import lifecycle
from leaderboard_dev.settings import REPOSITORY, endpoint_from_environment
from leaderboard_tools.cli import run_command


def command_up(arguments: argparse.Namespace) -> int:
    endpoint = endpoint_from_environment()
    began = time.monotonic()
    outcome = lifecycle.up(arguments.emulator, endpoint)
    if outcome == "started":
        print(f"{arguments.emulator}: started at {endpoint.url} in {time.monotonic() - began:.0f} s")
        return 0
    running = lifecycle.identify(endpoint) or "an unknown LocalStack-compatible emulator"
    print(f"reusing the endpoint that answers at {endpoint.url}: {running}")
    if running != arguments.emulator:
        print(f"warning: {arguments.emulator} was asked for; stop the running emulator to get it", file=sys.stderr)
    return 0


def command_down(arguments: argparse.Namespace) -> int:
    """Only at the endpoint AWS_ENDPOINT_URL names, and only once it answers: a mistyped port must not cost the demo's
    state or another emulator."""
    from leaderboard_dev.demo import DEMO_STACK, take_down
    from leaderboard_dev.terraform_stack import TerraformError

    endpoint = endpoint_from_environment()
    if not lifecycle.endpoint_answers(endpoint):
        raise lifecycle.EmulatorError(lifecycle.not_answering(endpoint))
    try:
        print(take_down(endpoint, arguments.workspace or DEMO_STACK))
    except TerraformError as error:
        print(f"could not destroy the demo stack at {endpoint.url}: {error}", file=sys.stderr)
        return 1
    print(lifecycle.stop(endpoint))
    return 0


def command_demo(arguments: argparse.Namespace) -> int:
    from leaderboard_dev import demo

    workspace = arguments.workspace or demo.DEMO_STACK
    demo.run(endpoint_from_environment(), downloads=arguments.downloads, seed=arguments.seed, workspace=workspace)
    return 0


def command_leaderboard(arguments: argparse.Namespace) -> int:
    from leaderboard_dev.aws import clients
    from leaderboard_dev.demo import demo_stack
    from leaderboard_dev.leaderboard import invoke_function

    endpoint = endpoint_from_environment()
    outputs = demo_stack(endpoint).outputs()
    request = {"month": arguments.month, "limit": arguments.limit}
    print(json.dumps(invoke_function(clients(endpoint).lambda_, outputs["query_function_name"], request), indent=2))
    return 0


def command_terraform_config(arguments: argparse.Namespace) -> int:
    """For `eval`: the CLI config the project's own Terraform runs use, so that `terraform init` of any root
    configuration installs hashicorp/aws from this machine's mirror, offline."""
    from leaderboard_dev.terraform_stack import MIRROR_VARIABLE, cli_config, provider_mirror

    mirror = provider_mirror()
    if mirror is None:
        print(f"# no filesystem mirror of hashicorp/aws here ({MIRROR_VARIABLE}): terraform init uses the registry")
        return 0
    print(f"export TF_CLI_CONFIG_FILE={shlex.quote(str(cli_config(mirror)))}")
    return 0


def command_release(arguments: argparse.Namespace) -> int:
    from leaderboard_dev.release import read_manifest, release, verify

    released = release(arguments.version, arguments.output_dir)
    problems = verify(released.directory)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    manifest = read_manifest(released.directory)
    print(f"{released.directory}: release {manifest['version']} of {manifest['commit']} ({manifest['runtime']})")
    for name, digest in manifest["files"].items():
        print(f"  {name}  {digest['size']} bytes  sha256 {digest['sha256']}  base64 {digest['sha256_base64']}")
    state = "tagged" if released.tagged_now else "already tagged"
    print(f"{state} {released.tag} (annotated, local): `git push origin {released.tag}` publishes it")
    return 0


def command_check_terraform(arguments: argparse.Namespace) -> int:
    from leaderboard_dev.static_checks import check

    return 0 if check(str(Path(arguments.checkov).resolve()) if arguments.checkov else None) else 1


def command_provider_schema(arguments: argparse.Namespace) -> int:
    from leaderboard_dev import provider_schema

    wheel = provider_schema.package_path()
    if wheel is None:
        name = provider_schema.pinned_package()[0]
        print(f"no {name} in {provider_schema.PACKAGE_DIR}: `make provider-schema-package`", file=sys.stderr)
        return 1
    text = provider_schema.generate(wheel)
    target = provider_schema.SCHEMA_FILE
    if arguments.check:
        same = target.is_file() and target.read_text() == text
        print(f"{target.relative_to(REPOSITORY)}: {'reproduced' if same else 'differs from'} {wheel.name}")
        return 0 if same else 1
    target.write_text(text)
    content = json.loads(text)
    count = sum(len(types) for types in content["schemas"].values())
    version = content["provider_version"]
    print(f"{target.relative_to(REPOSITORY)}: {count} types of hashicorp/aws {version} from {wheel.name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="leaderboard_dev", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    up = commands.add_parser("up", help="start the emulator unless an endpoint already answers")
    up.add_argument("--emulator", choices=lifecycle.BACKENDS, default="ministack")
    up.set_defaults(handler=command_up)

    workspace = argparse.ArgumentParser(add_help=False)
    workspace.add_argument(
        "--workspace",
        help="the Terraform workspace keeping the demo's state (default demo; its resources are named demo-… in any)",
    )

    down = commands.add_parser("down", parents=[workspace], help="destroy the demo stack and stop what `up` started")
    down.set_defaults(handler=command_down)

    demo = commands.add_parser(
        "demo", parents=[workspace], help="deploy, load skewed downloads, print the leaderboards"
    )
    demo.add_argument("--downloads", type=int, default=3000)
    demo.add_argument("--seed", type=int, default=2018)
    demo.set_defaults(handler=command_demo)

    board = commands.add_parser("leaderboard", help="query the demo stack's leaderboard")
    board.add_argument("month")
    board.add_argument("--limit", type=int, default=10)
    board.set_defaults(handler=command_leaderboard)

    config = commands.add_parser(
        "terraform-config",
        help='the CLI config that installs hashicorp/aws from the local mirror: eval "$(... terraform-config)"',
    )
    config.set_defaults(handler=command_terraform_config)

    checks = commands.add_parser(
        "check-terraform", help="terraform fmt/validate on the module and examples, then checkov"
    )
    checks.add_argument("--checkov", help="path of the checkov executable; omitted: no security scan")
    checks.set_defaults(handler=command_check_terraform)

    schema = commands.add_parser(
        "provider-schema", help="the hashicorp/aws 6.x schema the module is checked against, from the pinned package"
    )
    schema.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    schema.set_defaults(handler=command_provider_schema)

    release = commands.add_parser(
        "release",
        help="the version pyproject.toml and CHANGELOG.md give, from a clean tree: zips, the tools' wheel, SHA256SUMS "
        "and manifest.json into dist/release/<version>, and the annotated tag v<version> (local)",
    )
    release.add_argument("--version", required=True, help="MAJOR.MINOR.PATCH[-PRERELEASE]: pyproject.toml's")
    release.add_argument("--output-dir", type=Path, help="default: dist/release/<version>")
    release.set_defaults(handler=command_release)

    return run_command(parser.parse_args(argv), (lifecycle.EmulatorError,))


if __name__ == "__main__":
    raise SystemExit(main())
