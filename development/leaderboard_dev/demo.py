"""`make demo`: deploy the emulator stack, load skewed downloads, print each month's top 10."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from leaderboard_core.attributes import COUNT_FIELD, GUIDE_NAMES
from leaderboard_dev.aws import clients
from leaderboard_dev.leaderboard import invoke_function, wait_until_totals
from leaderboard_dev.loadgen import true_counts, write_items, zipf_downloads
from leaderboard_dev.settings import Endpoint
from leaderboard_dev.terraform_stack import Stack

DEMO_STACK = "demo"


def demo_stack(endpoint: Endpoint) -> Stack:
    return Stack(DEMO_STACK, endpoint)


def run(
    endpoint: Endpoint, downloads: int = 3000, songs: int = 100, seed: int = 2018, settle_timeout: float = 300
) -> None:
    console = Console()
    console.print(f"[bold]Deploying[/] development/emulator_stack as '{DEMO_STACK}' against {endpoint.url} ...")
    outputs = demo_stack(endpoint).apply()
    aws = clients(endpoint)
    table = outputs["table_name"]

    generated = zipf_downloads(downloads, songs=songs, seed=seed)
    expected = true_counts(generated)
    with Progress(
        TextColumn("Writing downloads"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as bar:
        task = bar.add_task("write", total=len(generated))
        write_items(aws.dynamodb, table, [download.as_item() for download in generated], lambda n: bar.advance(task, n))

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
    console.print("`make down` destroys the demo stack and stops the emulator.")
