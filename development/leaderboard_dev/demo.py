"""`make demo`: deploy the emulator stack, load skewed downloads, print each month's top 10 and what to run next.

The stack keeps day boards beside the guide's months, and a board per genre (`Genre`, a download's category): what
the README's examples ask for (its "After `make demo`")."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from leaderboard_core.attributes import COUNT_FIELD, GUIDE_NAMES
from leaderboard_dev.aws import clients
from leaderboard_dev.leaderboard import invoke_function, wait_until_totals
from leaderboard_dev.loadgen import Download, true_counts, write_items, zipf_downloads
from leaderboard_dev.settings import Endpoint
from leaderboard_dev.terraform_stack import Stack

DEMO_STACK = "demo"
DEMO_PERIODS = ("day", "month")
CATEGORY_ATTRIBUTE = "Genre"
GENRES = ("rock", "pop", "jazz")
DEMO_VARIABLES = {"leaderboard_periods": list(DEMO_PERIODS), "category_attribute_name": CATEGORY_ATTRIBUTE}


def demo_stack(endpoint: Endpoint, workspace: str = DEMO_STACK) -> Stack:
    """The demo's resources are named `demo-…` (the README's names) in any workspace: the workspace (`make demo
    DEMO_WORKSPACE=…`) only says where its Terraform state is kept, so that a second demo on another emulator leaves
    this checkout's own state alone."""
    return Stack(DEMO_STACK, endpoint, dict(DEMO_VARIABLES), workspace=workspace)


def take_down(endpoint: Endpoint, workspace: str = DEMO_STACK) -> str:
    """Destroy the demo whose state the workspace keeps, only if it was applied at this endpoint (the state does not
    say which emulator holds it); say what was done. A failed destroy raises TerraformError."""
    stack = demo_stack(endpoint, workspace)
    deployed_at = stack.deployed_at()
    if not stack.exists():
        return f"no demo stack to destroy at {endpoint.url}"
    if deployed_at is None:
        return (
            "left the demo stack alone: its state does not say which emulator holds it; `make demo` with the "
            "AWS_ENDPOINT_URL it was deployed at notes it, and `make down` there then destroys it"
        )
    if not endpoint.is_at(deployed_at):
        return f"left the demo stack alone: it is deployed at {deployed_at}, not {endpoint.url}"
    stack.destroy()
    stack.delete_workspace(force=True)
    return f"destroyed the demo stack at {endpoint.url}"


def genre_of(song_id: str) -> str:
    """song001 rock, song002 pop, song003 jazz, song004 rock, ..."""
    return GENRES[(int(song_id.removeprefix("song")) - 1) % len(GENRES)]


def demo_item(download: Download) -> dict[str, Any]:
    return {**download.as_item(), CATEGORY_ATTRIBUTE: {"S": genre_of(download.song_id)}}


def next_steps(endpoint: Endpoint, table: str, function: str, workspace: str = DEMO_STACK) -> str:
    """What to run after the demo, on its stack (the README's "After `make demo`" says more)."""
    return (
        f"The demo's table is {table}, its query function {function}; it keeps day and month boards, overall and"
        f" per {CATEGORY_ATTRIBUTE} ({', '.join(GENRES)}). In another shell:\n"
        f"  export AWS_ENDPOINT_URL={endpoint.url} AWS_DEFAULT_REGION={endpoint.region}"
        " AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test\n"
        f"  .venv/bin/leaderboard-tools top --table {table} --month 2018-01 --limit 5\n"
        f"  .venv/bin/leaderboard-tools rank --table {table} --month 2018-01 --song song005 --around 2\n"
        f"  .venv/bin/leaderboard-tools top --table {table} --period day --key 2018-01-15 --category rock\n"
        'More in README.md, "After `make demo`". '
        f"`make down{'' if workspace == DEMO_STACK else f' DEMO_WORKSPACE={workspace}'}` destroys the demo stack and"
        " stops the emulator."
    )


def run(
    endpoint: Endpoint,
    downloads: int = 3000,
    songs: int = 100,
    seed: int = 2018,
    settle_timeout: float = 300,
    workspace: str = DEMO_STACK,
) -> None:
    console = Console()
    where = f"'{DEMO_STACK}'" + (f" (state in workspace '{workspace}')" if workspace != DEMO_STACK else "")
    console.print(f"[bold]Deploying[/] development/emulator_stack as {where} against {endpoint.url} ...")
    outputs = demo_stack(endpoint, workspace).apply()
    aws = clients(endpoint)
    table = outputs["table_name"]

    generated = zipf_downloads(downloads, songs=songs, seed=seed)
    expected = true_counts(generated)
    with Progress(
        TextColumn("Writing downloads"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as bar:
        task = bar.add_task("write", total=len(generated))
        write_items(
            aws.dynamodb, table, [demo_item(download) for download in generated], lambda n: bar.advance(task, n)
        )

    # Rewriting identical items emits no stream records, so a second demo run settles at the same totals.
    totals = {month: sum(counts.values()) for month, counts in expected.items()}
    with console.status("Waiting for the aggregates to settle ..."):
        wait_until_totals(aws.dynamodb, table, outputs["leaderboard_index_name"], totals, settle_timeout)

    for month in sorted(expected):
        page = invoke_function(aws.lambda_, outputs["query_function_name"], {"month": month, "limit": 10})
        leaderboard = Table(title=f"Top 10 songs, {month} ({totals[month]} downloads)")
        leaderboard.add_column("Rank", justify="right")
        leaderboard.add_column(GUIDE_NAMES.entity)
        leaderboard.add_column("Downloads", justify="right")
        for rank, item in enumerate(page["items"], start=1):
            leaderboard.add_row(str(rank), item[GUIDE_NAMES.entity], str(item[COUNT_FIELD]))
        console.print(leaderboard)
    console.print(
        next_steps(endpoint, table, outputs["query_function_name"], workspace),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
