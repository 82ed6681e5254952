"""The operator tools' command line, `leaderboard-tools COMMAND`: every command the modules of `COMMANDS` register, the
board commands top, rank, all, range, range-by-count, card, score and among (the package commands/leaderboards), size,
rekey, reconcile, recover, backfill, readers and completion. `--help` names each command registered (its description
lists them from the registered subparsers) and the exit codes.

Every command ends with one line on stderr when it cannot do what was asked, and an exit code from one table (below,
and docs/operations.md, "Exit codes"): no traceback on any input, on a closed pipe or on Ctrl-C. The AWS CLI's
connection options (`--cli-connect-timeout`, `--cli-read-timeout`, `--debug`) are taken before the command or after
it, by every command. A usage error is three lines: a one-line usage, the error, and where the whole usage is.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import textwrap
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, NoReturn

from botocore.exceptions import BotoCoreError, ClientError

from leaderboard_tools.argument_types import UsageError, endpoint_url, timeout_seconds
from leaderboard_tools.commands import (
    EXIT_AWS,
    EXIT_BROKEN_PIPE,
    EXIT_CODES,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    backfill,
    completion,
    leaderboards,
    readers,
    reconcile,
    recover,
    rekey,
    size,
)
from leaderboard_tools.interruption import Interrupted, stopping_workers

COMMANDS = (leaderboards, size, rekey, reconcile, recover, backfill, readers, completion)
"""Each module registers its parser and binds its `run`; in this order `--help` lists them (`leaderboards`: top,
rank, all, range, range-by-count, card and score)."""
DESCRIPTION = """The operator tools of the DynamoDB materialized-aggregation module: read the leaderboards, size the
leaderboard shards, and keep a deployment's counts exact. Its commands: {commands}. `leaderboard-tools COMMAND --help`
describes each."""
"""--help's description; {commands}: the name of every command registered, in their order."""
DISTRIBUTION_PACKAGE = "leaderboard_tools"
DEBUG_LOGGERS = ("botocore", "boto3", "urllib3", "s3transfer", "leaderboard_tools")
"""What --debug shows on stderr, as the AWS CLI's --debug does: botocore's requests, retries and responses."""


def main(argv: list[str] | None = None) -> int:
    """The command's exit code; a closed stdout (`| head`), wherever it is met, ends the command with 141."""
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _drop_stdout()
        return EXIT_BROKEN_PIPE


def _main(argv: list[str] | None) -> int:
    try:
        with stopping_workers():
            parser, commands = build_parser()
            arguments = parser.parse_args(argv)
            _check_endpoint(commands, arguments)
            from leaderboard_tools.operator_aws import Connection, connection

            settings = Connection(
                connect_timeout=arguments.cli_connect_timeout, read_timeout=arguments.cli_read_timeout
            )
            with connection(settings), debug_logging(arguments.debug):
                return run_command(arguments)
    except SystemExit:  # argparse: --help, --version, a usage error (2); what --help printed may meet a closed pipe
        sys.stdout.flush()
        raise
    except KeyboardInterrupt:  # while the command line was read, before any command ran
        _say("interrupted: nothing was run")
        return EXIT_INTERRUPTED


class ToolsParser(argparse.ArgumentParser):
    """argparse's parser, whose usage error is three lines: a one-line usage (what the command requires), the error,
    and where the whole usage is (`--help`), with argparse's exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.short_usage()}\n{self.prog}: error: {message}\n{help_hint(self.prog)}\n")

    def print_help(self, file: IO[str] | None = None) -> None:
        """argparse's, but a closed stdout is not ignored: main ends the command with 141 as any other."""
        (file or sys.stdout).write(self.format_help())

    def short_usage(self) -> str:
        """`usage: PROG [options] REQUIRED...`: the flags and arguments the command cannot run without, on one line."""
        groups = [group for group in self._mutually_exclusive_groups if group.required]
        grouped = {id(action) for group in groups for action in group._group_actions}
        required = [action for action in self._actions if action.required or id(action) in grouped]
        formatter = argparse.HelpFormatter(self.prog, width=1_000_000)
        formatter.add_usage(None, required, groups, prefix="")
        shown = " ".join(formatter.format_help().split())
        return f"usage: {self.prog} [options]{shown[len(self.prog) :]}"


HELP_HINT_END = " --help' describes every flag"


def help_hint(prog: str) -> str:
    """A usage error's last line: where the whole usage is."""
    return f"'{prog}{HELP_HINT_END}"


def build_parser() -> tuple[argparse.ArgumentParser, Any]:
    """The top-level parser and its subcommands, each AWS-reaching one with the AWS CLI's connection options."""
    parser = ToolsParser(
        prog="leaderboard-tools", epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action=VersionAction, help="the installed leaderboard-tools' version, and exit")
    add_connection_arguments(parser, top_level=True)
    commands = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(commands)
    named = DESCRIPTION.format(commands=", ".join(commands.choices))
    parser.description = textwrap.fill(" ".join(named.split()), width=100, break_on_hyphens=False)
    for command_parser in commands.choices.values():
        add_connection_arguments(command_parser, top_level=False)
    return parser, commands


def add_connection_arguments(parser: argparse.ArgumentParser, top_level: bool) -> None:
    """--cli-connect-timeout, --cli-read-timeout and --debug: on the top-level parser with their defaults, on each
    command without (argparse.SUPPRESS), so that one given after the command is kept and one before it not undone."""
    taken = set(parser._option_string_actions)  # a command that declares one itself keeps its own
    group = parser.add_argument_group("connection (the AWS CLI's options; before or after the command)")
    default: Any = argparse.SUPPRESS
    options: list[tuple[str, dict[str, Any]]] = [
        (
            "--cli-connect-timeout",
            {
                "type": timeout_seconds,
                "metavar": "SECONDS",
                "default": None if top_level else default,
                "help": "how long opening a connection may take (default 5; 0: no limit); an endpoint that cannot be "
                "reached is given up after 3 attempts",
            },
        ),
        (
            "--cli-read-timeout",
            {
                "type": timeout_seconds,
                "metavar": "SECONDS",
                "default": None if top_level else default,
                "help": "how long an answer may take once connected (default 70, and 910 for the aggregator's "
                "invocation by recover; 0: no limit)",
            },
        ),
        (
            "--debug",
            {
                "action": "store_true",
                "default": False if top_level else default,
                "help": "botocore's debug log on stderr (requests, retries, responses), as the AWS CLI's --debug",
            },
        ),
    ]
    for flag, settings in options:
        if flag not in taken:
            group.add_argument(flag, **settings)


class VersionAction(argparse.Action):
    """argparse's `version` action, whose version is read only when asked for (reading the installed distributions
    takes a moment every command would pay)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"{parser.prog} {tools_version()}")
        parser.exit()


def tools_version() -> str:
    """The installed distribution's version (whatever the distribution providing this package is named)."""
    from importlib import metadata

    try:
        names = metadata.packages_distributions().get(DISTRIBUTION_PACKAGE) or ["leaderboard-tools"]
        return metadata.version(names[0])
    except metadata.PackageNotFoundError:
        return "(version unknown: not installed as a distribution; run from a source tree)"


def _check_endpoint(commands: Any, arguments: argparse.Namespace) -> None:
    """--endpoint-url on a command that does not check it as it is parsed: refused the same way (exit code 2)."""
    given = getattr(arguments, "endpoint_url", None)
    if isinstance(given, str):
        try:
            endpoint_url(given)
        except argparse.ArgumentTypeError as error:
            commands.choices[arguments.command].error(f"argument --endpoint-url: {error}")


@contextmanager
def debug_logging(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s - %(threadName)s - %(name)s - %(levelname)s - %(message)s"))
    loggers = [logging.getLogger(name) for name in DEBUG_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)


def run_command(arguments: argparse.Namespace, errors: tuple[type[Exception], ...] = ()) -> int:
    """The parsed command's handler; what it raises is one line on stderr and an exit code (see EXIT_CODES)."""
    from leaderboard_tools.operator_aws import aws_failure, fixable_aws_cause, is_aws_failure

    try:
        return int(arguments.handler(arguments))
    except KeyboardInterrupt as error:
        outcome = error.outcome if isinstance(error, Interrupted) else getattr(arguments, "on_interrupt", None)
        _say(f"interrupted: {outcome}" if outcome else "interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise
    except UsageError as error:
        _say(f"{_prog(arguments)}: error: {error}")
        return EXIT_USAGE
    except (RuntimeError, *errors) as error:
        cause = fixable_aws_cause(error)
        if cause is None:
            _say(f"error: {error}")
            return EXIT_ERROR
        _say(f"error: {_worded(error, cause, aws_failure(cause))}")
        return EXIT_AWS
    except (BotoCoreError, ClientError) as error:
        if is_aws_failure(error):
            _say(f"error: {aws_failure(error)}")
            return EXIT_AWS
        _say(f"error: {error}")
        return EXIT_ERROR
    except Exception as error:  # a bug: one line, the traceback with --debug
        if getattr(arguments, "debug", False):
            traceback.print_exc()
        _say(f"error: unexpected {type(error).__name__}: {error} (a bug of leaderboard-tools; --debug shows where)")
        return EXIT_ERROR


def _worded(error: BaseException, cause: BaseException, wording: str) -> str:
    """The tool's message with the AWS failure in it said the one way (operator_aws.aws_failure)."""
    text, cause_text = str(error), str(cause)
    if wording in text:
        return text
    if cause_text and cause_text in text:
        return text.replace(cause_text, wording)
    return f"{text}: {wording}"


def _prog(arguments: argparse.Namespace) -> str:
    return f"leaderboard-tools {getattr(arguments, 'command', '')}".rstrip()


def _say(line: str) -> None:
    with contextlib.suppress(BrokenPipeError, ValueError):  # stderr closed as well: nothing left to tell
        print(line, file=sys.stderr, flush=True)


def _drop_stdout() -> None:
    """What the Python docs advise on SIGPIPE: stdout pointed at devnull, so that the interpreter's last flush at exit
    does not fail again (and print "Exception ignored ... BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor (a test's captured stdout)
        pass


if __name__ == "__main__":
    raise SystemExit(main())
