"""Command line of the host-side tooling: `python -m leaderboard_tools up|down|demo|leaderboard`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from leaderboard_tools import emulator
from leaderboard_tools.settings import endpoint_from_environment


def command_up(arguments: argparse.Namespace) -> int:
    endpoint = endpoint_from_environment()
    began = time.monotonic()
    outcome = emulator.up(arguments.emulator, endpoint)
    if outcome == "started":
        print(f"{arguments.emulator}: started at {endpoint.url} in {time.monotonic() - began:.0f} s")
        return 0
    running = emulator.identify(endpoint) or "an unknown LocalStack-compatible emulator"
    print(f"reusing the endpoint that answers at {endpoint.url}: {running}")
    if running != arguments.emulator:
        print(f"warning: {arguments.emulator} was asked for; stop the running emulator to get it", file=sys.stderr)
    return 0


def command_down(arguments: argparse.Namespace) -> int:
    from leaderboard_tools.demo import demo_stack
    from leaderboard_tools.terraform_stack import TerraformError

    endpoint = endpoint_from_environment()
    stack = demo_stack(endpoint)
    if stack.exists():
        if emulator.endpoint_answers(endpoint):
            try:
                stack.destroy()
                print("destroyed the demo stack")
            except TerraformError as error:
                print(f"could not destroy the demo stack: {error}", file=sys.stderr)
                return 1
        stack.delete_workspace(force=True)
    print(emulator.down())
    return 0


def command_demo(arguments: argparse.Namespace) -> int:
    from leaderboard_tools import demo

    demo.run(endpoint_from_environment(), downloads=arguments.downloads, seed=arguments.seed)
    return 0


def command_leaderboard(arguments: argparse.Namespace) -> int:
    from leaderboard_tools.aws import clients
    from leaderboard_tools.demo import demo_stack
    from leaderboard_tools.leaderboard import invoke_function

    endpoint = endpoint_from_environment()
    outputs = demo_stack(endpoint).outputs()
    request = {"month": arguments.month, "limit": arguments.limit}
    print(json.dumps(invoke_function(clients(endpoint).lambda_, outputs["query_function_name"], request), indent=2))
    return 0


def command_check_terraform(arguments: argparse.Namespace) -> int:
    from leaderboard_tools.static_checks import check

    return 0 if check(str(Path(arguments.checkov).resolve()) if arguments.checkov else None) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="leaderboard-tools", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    up = commands.add_parser("up", help="start the emulator unless an endpoint already answers")
    up.add_argument("--emulator", choices=emulator.BACKENDS, default="ministack")
    up.set_defaults(handler=command_up)

    down = commands.add_parser("down", help="destroy the demo stack and stop what `up` started")
    down.set_defaults(handler=command_down)

    demo = commands.add_parser("demo", help="deploy, load skewed downloads, print the leaderboards")
    demo.add_argument("--downloads", type=int, default=3000)
    demo.add_argument("--seed", type=int, default=2018)
    demo.set_defaults(handler=command_demo)

    board = commands.add_parser("leaderboard", help="query the demo stack's leaderboard")
    board.add_argument("month")
    board.add_argument("--limit", type=int, default=10)
    board.set_defaults(handler=command_leaderboard)

    checks = commands.add_parser(
        "check-terraform", help="terraform fmt/validate on the module and examples, then checkov"
    )
    checks.add_argument("--checkov", help="path of the checkov executable; omitted: no security scan")
    checks.set_defaults(handler=command_check_terraform)

    arguments = parser.parse_args(argv)
    try:
        return arguments.handler(arguments)
    except (emulator.EmulatorError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
