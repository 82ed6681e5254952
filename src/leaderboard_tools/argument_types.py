"""Flag values checked when the command line is parsed, against the module's own limits: argparse's `type=` functions.

A value refused here is argparse's one line (`leaderboard-tools rekey: error: argument --shards: ...`) and exit code 2,
before anything reaches AWS. Every command's flags use these, so that one value is refused alike everywhere.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from urllib.parse import urlsplit

LEADERBOARD_SHARDS = range(1, 65)
"""The module's `leaderboard_shards` (and `leaderboard_shards_previous`): "a whole number from 1 to 64"
(terraform/variables.tf, whose validation tests/unit/tools/test_cli_errors.py holds equal to this)."""
TABLE_NAME = re.compile(r"\A[A-Za-z0-9_.-]{3,255}\Z")
"""DynamoDB's table names: 3 to 255 characters of a-z, A-Z, 0-9, underscore, hyphen and dot."""
SCAN_SEGMENTS = range(1, 1_000_001)
"""DynamoDB Scan's TotalSegments: 1 to 1,000,000."""


class UsageError(RuntimeError):
    """Flags (or an environment variable) that cannot go together or be used, found only once the command runs: said in
    one line as argparse says its own, exit code 2."""


def _number(text: str, kind: type[int] | type[float]) -> int | float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'a whole number' if kind is int else 'a number'}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def whole_number(least: int, most: int) -> Callable[[str], int]:
    """A whole number from `least` to `most` (a limit of the module's or of the function's)."""

    def parse(text: str) -> int:
        value = int(_number(text, int))
        if not least <= value <= most:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from {least:,} to {most:,}")
        return value

    return parse


def number_within(least: float, most: float) -> Callable[[str], float]:
    """A finite number from `least` to `most`."""

    def parse(text: str) -> float:
        value = float(_number(text, float))
        if not least <= value <= most:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of at least {least:,g} and at most {most:,g}")
        return value

    return parse


def positive_int(text: str) -> int:
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive whole number")
    return value


def positive_float(text: str) -> float:
    """A finite number above 0 (budgets, rates): nan, inf, 0 and negatives are refused."""
    value = float(_number(text, float))
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def non_negative_float(text: str) -> float:
    """A finite number, 0 or more (a clock margin: 0 trusts the clocks outright)."""
    value = float(_number(text, float))
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def timeout_seconds(text: str) -> float:
    """The AWS CLI's --cli-connect-timeout / --cli-read-timeout: seconds, finite, 0 or more; 0 waits without limit."""
    return non_negative_float(text)


def leaderboard_shards(text: str) -> int:
    """`leaderboard_shards` as the module accepts it: a whole number from 1 to 64."""
    value = int(_number(text, int))
    if value not in LEADERBOARD_SHARDS:
        raise argparse.ArgumentTypeError(
            f"{text} is not a leaderboard_shards the module accepts: a whole number from "
            f"{LEADERBOARD_SHARDS.start} to {LEADERBOARD_SHARDS.stop - 1}"
        )
    return value


def scan_segments(text: str) -> int:
    value = int(_number(text, int))
    if value not in SCAN_SEGMENTS:
        raise argparse.ArgumentTypeError(f"{text} is not a number of scan segments: 1 to {SCAN_SEGMENTS.stop - 1:,}")
    return value


def table_name(text: str) -> str:
    if not TABLE_NAME.match(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a DynamoDB table name (3 to 255 characters: letters, digits, '_', '-', '.')"
        )
    return text


def song_ids(text: str) -> list[str]:
    """Comma-separated ids, at least one, none empty: `--songs ""` or `--songs ,,` is a mistake, not "every song"."""
    songs = text.split(",")
    if not text or any(not song for song in songs):
        raise argparse.ArgumentTypeError(
            f"{text!r} holds an empty song id: give one or more ids separated by commas (every song: leave --songs out)"
        )
    return list(dict.fromkeys(songs))


def endpoint_url(text: str) -> str:
    """An endpoint as botocore takes it: http:// or https:// and a host botocore accepts (it raises ValueError on
    anything else, and only once the client is made)."""
    from botocore.utils import is_valid_endpoint_url, is_valid_ipv6_endpoint_url

    problem = url_problem(text)
    if problem is None and not (is_valid_endpoint_url(text) or is_valid_ipv6_endpoint_url(text)):
        problem = "its host is no host name or IP address"
    if problem:
        raise argparse.ArgumentTypeError(f"{text!r} is not an endpoint URL: {problem}")
    return text


def url(text: str) -> str:
    """A URL such as a queue's (https://sqs.<region>.amazonaws.com/<account>/<name>)."""
    if url_problem(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a URL: {url_problem(text)}")
    return text


def url_problem(text: str) -> str | None:
    """What makes `text` no http(s) URL with a host, or None."""
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as error:
        return f"give http(s)://host[:port] ({error})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "give http(s)://host[:port]"
    return None
