"""docs/attaching.md, "The example on the emulator", run as written: its commands create a platform's table with a
history, apply terraform/examples/existing-table with the Terraform CLI, backfill and read the board.

The commands run in bash, block after block, each with what the blocks before it exported, in a view of the
repository: its own copy of terraform/ (the example's state and .terraform stay out of the work tree, and the unit
tier's plan of the example is not disturbed) beside the repository's dist/ and venv. The doc's first block (`make up
build` and the exports) is this suite's emulator and environment. Whatever happened, the doc's last block removes
what the others created.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import wait_until_totals
from leaderboard_dev.loadgen import write_items
from leaderboard_dev.observe import scan_all
from leaderboard_dev.settings import REPOSITORY, Endpoint, emulator_environment
from tests.acceptance.conftest import stored

SECTION = "\n## The example on the emulator\n"
PLATFORM_TABLE = "music-platform"
"""The example's defaults: source_table_name, and name's <name>-aggregates."""
AGGREGATES_TABLE = "music-leaderboards-aggregates"


def doc_blocks() -> list[str]:
    text = (REPOSITORY / "docs" / "attaching.md").read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)


class Shell:
    """bash in the checkout, each block starting with the variables the blocks before it exported."""

    def __init__(self, checkout: Path, environment: dict[str, str]) -> None:
        self._checkout, self._environment = checkout, environment
        self._exported = checkout / ".exported"

    def run(self, block: str, stop_at_failure: bool = True) -> subprocess.CompletedProcess[str]:
        script = "\n".join(
            [
                "set -euo pipefail" if stop_at_failure else "set -u",
                f'if [ -f "{self._exported}" ]; then source "{self._exported}"; fi',
                block,
                f'export -p > "{self._exported}"',
            ]
        )
        ran = subprocess.run(
            ["bash", "-c", script],
            cwd=self._checkout,
            env=self._environment,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if stop_at_failure:
            assert ran.returncode == 0, f"{block}\nexited {ran.returncode}:\n{ran.stdout}\n{ran.stderr}"
        return ran


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    shutil.copytree(
        REPOSITORY / "terraform",
        root / "terraform",
        ignore=shutil.ignore_patterns(".terraform", "terraform.tfstate*", ".terraform.lock.hcl"),
    )
    (root / "dist").symlink_to(REPOSITORY / "dist")
    (root / ".venv").symlink_to(Path(sys.prefix))
    return root


@pytest.fixture
def shell(checkout: Path, endpoint: Endpoint, aws: Clients) -> Iterator[Shell]:
    """The doc's first block's exports; afterwards its last block, then anything of the table left over."""
    assert shutil.which("aws"), (
        "docs/attaching.md's commands need the AWS CLI on PATH (make puts .venv-awscli/bin first)"
    )
    environment = {
        **{name: value for name, value in os.environ.items() if not name.startswith(("TF_VAR_", "TF_CLI_CONFIG"))},
        **emulator_environment(endpoint),
    }
    running = Shell(checkout, environment)
    try:
        yield running
    finally:
        removed = running.run(doc_blocks()[-1], stop_at_failure=False)
        if PLATFORM_TABLE in aws.dynamodb.list_tables()["TableNames"]:
            aws.dynamodb.delete_table(TableName=PLATFORM_TABLE)
        assert "Destroy complete!" in removed.stdout or "No changes" in removed.stdout, removed.stdout + removed.stderr


def download(number: int, chance: random.Random) -> dict[str, Any]:
    """A download as the doc's are: keyed by its song and its number, type DOWNLOAD, the song in songID."""
    song = f"song{chance.randrange(1, 6)}"
    return {
        "PK": {"S": f"SONG#{song}"},
        "SK": {"S": f"DOWNLOAD#{number}"},
        "type": {"S": "DOWNLOAD"},
        "songID": {"S": song},
        "Timestamp": {
            "S": f"2018-0{chance.choice((1, 2))}-{chance.randrange(1, 29):02d}T{chance.randrange(24):02d}:00:00Z"
        },
    }


def recount(aws: Clients) -> dict[tuple[str, str], int]:
    """The truth, from the platform's table as it ends: each item of type DOWNLOAD once, in its UTC month."""
    items = scan_all(aws, TableName=PLATFORM_TABLE, ConsistentRead=True)
    return dict(
        Counter((item["songID"]["S"], item["Timestamp"]["S"][:7]) for item in items if item["type"]["S"] == "DOWNLOAD")
    )


def test_the_existing_table_example_applies_to_the_emulator_and_backfills_its_history_as_attaching_md_says(
    aws: Clients, shell: Shell
) -> None:
    given, history, artifacts, apply, backfill, _ = doc_blocks()
    chance = random.Random(39)
    # given the emulator and the environment the doc's first block asks for
    assert "make up" in given
    assert "export AWS_ENDPOINT_URL=" in given
    # when the platform's table is created with the doc's history, and a longer one written here
    shell.run(history)
    write_items(aws.dynamodb, PLATFORM_TABLE, [download(number, chance) for number in range(100, 160)])
    # and the example is applied with the doc's zips, variables and Terraform CLI config
    shell.run(artifacts)
    applied = shell.run(apply)
    assert "Apply complete!" in applied.stdout
    # and downloads arrive on the stream, then the backfill counts the history and the board is read, as the doc runs
    write_items(aws.dynamodb, PLATFORM_TABLE, [download(number, chance) for number in range(1000, 1040)])
    shown = shell.run(backfill)
    # then every download of the table is on its month's board once, the history's and the stream's
    truth = recount(aws)
    assert sum(truth.values()) == 3 + 60 + 40
    totals = {month: sum(count for (_, of), count in truth.items() if of == month) for month in ("2018-01", "2018-02")}
    index = aws.dynamodb.describe_table(TableName=AGGREGATES_TABLE)["Table"]["GlobalSecondaryIndexes"][0]["IndexName"]
    wait_until_totals(aws.dynamodb, AGGREGATES_TABLE, index, totals, timeout=240)
    assert stored(aws, AGGREGATES_TABLE) == truth
    # and the backfill said it counted the history, and `top` printed the board
    assert f"backfill of {PLATFORM_TABLE}: done" in shown.stdout
    assert "top 10 · month 2018-01" in shown.stdout
