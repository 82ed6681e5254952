"""`top`, `rank`, `all`, `range`, `range-by-count`, `card`, `score` and `among`: leaderboards for people, asked of the
deployed query function and printed.

The commands are one family: they name the function the same way (`--table` or `--function`), the board the same way
(`--month`, or `--period` with `--key`, and `--category`), reach AWS the same way, and print the same way
(`--output json|table|text`, output_format.py). Each adds the flags of its request (docs/query-contract.md):

| command          | Redis              | request                                  |
|------------------|--------------------|------------------------------------------|
| `top`            | ZREVRANGE 0 n-1    | `limit` (with `last`: a rolling window)  |
| `rank`           | ZREVRANK           | the entity, `around`                     |
| `all`            | ZREVRANGE 0 -1     | `fromRank` 1, page after page            |
| `range`          | ZREVRANGE          | `fromRank`, `toRank`                     |
| `range-by-count` | ZREVRANGEBYSCORE   | `minCount`, `maxCount`                   |
| `card`           | ZCARD              | `size`                                   |
| `score`          | ZSCORE             | the entity, `score`                      |
| `among`          |                    | `among`: entities ranked among themselves|

`--rank-policy ordinal|competition|dense` asks the commands that rank (all but `card` and `score`) for that policy's
ranks: ties share competition's 1, 2, 2, 4 or dense's 1, 2, 2, 3.

Names: Redis's where they are free. `size` is the capacity sizing command, so a board's size is `card` (ZCARD: the
board's cardinality; `count` would be read as an entity's count); `score` is ZSCORE's (an entity's value, cheaper
than `rank`: one read); the ranges are `range` (by rank, as ZRANGE) and `range-by-count` (ZRANGEBYSCORE: the score
here is the count, or the sum, as the contract's `downloadCount`).

Listings (`all`, `range`, `range-by-count`) page as the AWS CLI does: `--page-size` entries an invocation,
`--max-items` in all, then a NextToken that `--starting-token` resumes from (with the same flags). They print each
page as it arrives: JSON as one document written item by item, text a line per entry, and tables too, their column
widths fixed by the first page (streamed_table.py). Flags are checked before anything is asked: a malformed month or
key, a number outside the function's limits, or flags that contradict each other exit 2, as argparse does.

The rest is every command's (cli.py, the exit codes of commands/__init__.py): AWS refusing or unreachable is exit 5 in
operator_aws's words, a closed pipe 141, Ctrl-C one line and 130, a listing's line naming the token to resume from.
"""

from __future__ import annotations

import argparse
from typing import Any

from leaderboard_core.periods import PERIOD_NAMES
from leaderboard_tools.argument_types import whole_number
from leaderboard_tools.commands.leaderboards.flags import (
    ALL_PAGE_SIZE,
    LAST_BUCKETS,
    MAX_AMONG,
    MAX_AROUND,
    MAX_LIMIT,
    MAX_RANK,
    MAX_WINDOW_LIMIT,
    RANK_POLICIES,
    RANKED_COMMANDS,
    count_argument,
    entity_argument,
    key_argument,
)
from leaderboard_tools.commands.leaderboards.verbs import LISTINGS, run
from leaderboard_tools.commands.operator_common import add_command
from leaderboard_tools.commands.reconcile import month_argument
from leaderboard_tools.output_format import add_output_argument

__all__ = ["LAST_BUCKETS", "MAX_AROUND", "MAX_LIMIT", "MAX_RANK", "MAX_WINDOW_LIMIT", "SUMMARIES", "register", "run"]

# ---------------------------------------------------------------- the parsers


SUMMARIES = {
    "top": "the top entries of a board, or of a rolling window (--last)",
    "rank": "the rank of one entity in a board, and its neighbours (--around)",
    "all": "every entry of a board with its rank, page after page (--max-items, --starting-token)",
    "range": "the entries at ranks --from-rank to --to-rank of a board, each with its rank (Redis ZREVRANGE)",
    "range-by-count": "the entries of a board whose count (or sum) is within --min-count and --max-count, highest "
    "first (Redis ZREVRANGEBYSCORE)",
    "card": "how many entries a board lists (Redis ZCARD)",
    "score": "one entity's count (or sum) on a board, or that it is not on it (Redis ZSCORE)",
    "among": "entities (--song, repeated) ranked among themselves on a board: friends",
}


def register(commands: Any) -> None:
    """`top`, `rank`, `all`, `range`, `range-by-count`, `card`, `score` and `among`, with the flags they share."""
    for name, summary in SUMMARIES.items():
        command = add_command(commands, name, summary)
        target = command.add_mutually_exclusive_group(required=True)
        target.add_argument(
            "--table",
            help="either table of a deployment: the downloads' (<name>-downloads, or source_table_name) or "
            "<name>-aggregates; its query function is <name>-query beside it",
        )
        target.add_argument("--function", help="the query function's name or ARN")
        board = command.add_argument_group("board")
        board.add_argument(
            "--month", type=month_argument, help='YYYY-MM: the guide\'s monthly board, asked as {"month": ...}'
        )
        board.add_argument("--period", choices=PERIOD_NAMES, help="a period the deployment keeps (leaderboard_periods)")
        board.add_argument(
            "--key",
            type=key_argument,
            help="the period's bucket on the deployment's clock (leaderboard_time_zone): 2018-01-15T10, 2018-01-15, "
            "2018-W03, 2018-01, 2018, a season's S2026-01-05 (default: now)",
        )
        board.add_argument("--category", help="a category's board (category_attribute_name)")
        _add_own_arguments(command, name)
        command.add_argument(
            "--entity-attribute", default="songID", help="the module's entity_attribute_name (default songID)"
        )
        add_output_argument(command)
        aws = command.add_argument_group("AWS (default: boto3's standard configuration)")
        aws.add_argument("--profile", help="a profile of the shared AWS config files (default: AWS_PROFILE)")
        aws.add_argument("--region", help="default: AWS_REGION, else AWS_DEFAULT_REGION, else the profile's")
        aws.add_argument("--endpoint-url", help="default: AWS_ENDPOINT_URL if set, else AWS")
        command.set_defaults(
            handler=run, usage_error=command.error, on_interrupt=f"nothing was written ({name} only reads)"
        )


def _add_own_arguments(command: argparse.ArgumentParser, name: str) -> None:
    if name == "top":
        command.add_argument(
            "--limit",
            type=whole_number(1, MAX_LIMIT),
            default=10,
            help=f"entries (default 10; 1-{MAX_LIMIT}, with --last 1-{MAX_WINDOW_LIMIT})",
        )
        command.add_argument(
            "--last",
            type=whole_number(*LAST_BUCKETS),
            help="a rolling window: the sum of the last N buckets to --key (2-48)",
        )
    elif name in ("rank", "score"):
        command.add_argument("--song", "--id", dest="song", required=True, type=entity_argument, help="the entity id")
        if name == "rank":
            command.add_argument(
                "--around",
                type=whole_number(0, MAX_AROUND),
                help=f"also list N entries above and N below it (0-{MAX_AROUND})",
            )
    elif name == "among":
        command.add_argument(
            "--song",
            "--id",
            dest="song",
            action="append",
            required=True,
            type=entity_argument,
            help=f"an entity id; repeat it for each (1-{MAX_AMONG})",
        )
    if name == "range":
        command.add_argument(
            "--from-rank",
            "--from",
            dest="from_rank",
            type=whole_number(1, MAX_RANK),
            default=1,
            help="the first rank, 1-based",
        )
        command.add_argument(
            "--to-rank", "--to", dest="to_rank", type=whole_number(1, MAX_RANK), help="the last rank (default: the end)"
        )
    elif name == "range-by-count":
        command.add_argument(
            "--min-count", "--min", dest="min_count", type=count_argument, help="the lowest count (or sum), included"
        )
        command.add_argument(
            "--max-count", "--max", dest="max_count", type=count_argument, help="the highest count (or sum), included"
        )
    if name in RANKED_COMMANDS:
        command.add_argument(
            "--rank-policy",
            choices=RANK_POLICIES,
            help="how ties rank: ordinal 1, 2, 3, 4 by id (default), competition 1, 2, 2, 4 or dense 1, 2, 2, 3",
        )
    if name in LISTINGS:
        paging = command.add_argument_group("paging (as the AWS CLI's)")
        paging.add_argument(
            "--page-size",
            type=whole_number(1, MAX_LIMIT),
            default=ALL_PAGE_SIZE,
            help=f"entries per invocation of the function (1-{MAX_LIMIT}, default {ALL_PAGE_SIZE})",
        )
        paging.add_argument(
            "--max-items",
            type=whole_number(1, 10**12),
            help="entries to print in all; then the NextToken to resume from",
        )
        paging.add_argument("--starting-token", help="a NextToken printed before: resume the listing there")
