"""Ledger mode's refusals at plan say what is wrong and what to set: each message, as `terraform test` prints it.

validations.tftest.hcl proves each refusal fails on the expected check (expect_failures); this file plans the same
settings without expecting the failure, in a copy of the module, so that each run fails and prints its message.
"""

from __future__ import annotations

import shutil

import pytest

from leaderboard_dev.settings import TERRAFORM_MODULE
from tests.terraform_cli import terraform

VALIDATIONS = TERRAFORM_MODULE / "tests" / "validations.tftest.hcl"
GLOBAL_TABLE = (
    "  override_data {\n    target = data.aws_dynamodb_table.source\n    values = { stream_enabled = true, "
    'stream_view_type = "NEW_AND_OLD_IMAGES", replica = [{ region_name = "us-east-1" }] }\n  }\n'
)
REFUSALS = {
    "ledger_without_retractions": (
        {"ledger": "true"},
        "",
        "ledger = true needs retractions = true: the ledger moves each download's contribution through its edits and "
        "deletions, which reach the aggregator (with the old images it reads) only with retractions. Set "
        "retractions = true, or ledger = false.",
    ),
    "ledger_beside_backfill_claims": (
        {"ledger": "true", "retractions": "true", "backfill_claims": "true"},
        "",
        "ledger with backfill_claims: ledger mode keeps the claims table for good as its ledger, in which the "
        "backfill counts at any time with nothing to release, so backfill_claims is redundant. Remove "
        "backfill_claims (or set it to false) and keep ledger = true.",
    ),
    "retractions_on_an_attached_table_without_ledger": (
        {"source_table_name": '"platform"', "retractions": "true"},
        "",
        "retractions = true on the attached table platform needs ledger = true: the table holds downloads written "
        "before its stream was read, and a deletion or an edit of one the aggregator never counted would take back "
        "or move another download's count, silently. Set ledger = true (with retractions = true): the ledger records "
        "what was counted of each download and takes back only that. Or keep retractions = false.",
    ),
    "retractions_on_a_global_table_in_ledger_mode": (
        {
            "source_table_name": '"platform"',
            "global_table_aggregating_region": '"eu-west-1"',
            "retractions": "true",
            "ledger": "true",
        },
        GLOBAL_TABLE,
        'retractions = true on platform, a table with replicas (a global table), ledger or not: AWS says "TTL '
        "deletions that are replicated to global table regions are not identifiable in DynamoDB streams in the "
        'regions the deletion is replicated to" (DynamoDB Developer Guide, Working with expired items and time to '
        "live), so an expiry in another region would reach this stream as a deletion and take its download's count "
        "back. Keep retractions = false (and ledger = false) on a global table.",
    ),
    "one_stream_reader_without_ledger": (
        {"retractions": "true", "stream_readers": "1"},
        "",
        "stream_readers = 1 needs ledger = true: only the ledger's versioned items let the aggregator apply what the "
        "mapping delivers (retried, out of order, bisected) without reading the shard itself. Set ledger = true (with "
        "retractions = true), or keep stream_readers = 2.",
    ),
    "retractions_beside_backfill_claims_without_ledger": (
        {"retractions": "true", "backfill_claims": "true"},
        "",
        "backfill_claims with retractions: a backfill's claims name who counted a download, not which image of it "
        "was counted, so an edit during the backfill could move its contribution twice. Use ledger = true instead "
        "of backfill_claims (with retractions = true): the ledger records what the backfill counted of each "
        "download, so a backfill may run beside retractions at any time.",
    ),
}


def words(text: str) -> str:
    """Terraform wraps a message to its width: compare the words."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each refusal's run, planned without expecting its failure: run name -> what terraform test printed for it."""
    copy = tmp_path_factory.mktemp("module") / "terraform"
    shutil.copytree(TERRAFORM_MODULE, copy, ignore=shutil.ignore_patterns(".terraform*", "tests", "examples"))
    header = VALIDATIONS.read_text().split('\nrun "', 1)[0]
    (copy / "tests").mkdir()
    # one file a run: terraform test skips the runs of a file after one fails
    for name, (variables, override, _) in REFUSALS.items():
        run = (
            f'\nrun "{name}" {{\n  command = plan\n\n  variables {{\n'
            + "".join(f"    {variable} = {value}\n" for variable, value in variables.items())
            + f"  }}\n{override}}}\n"
        )
        (copy / "tests" / f"{name}.tftest.hcl").write_text(header + run)
    initialised = terraform(copy, "init", "-backend=false", "-input=false")
    assert initialised.returncode == 0, initialised.stderr
    printed = {}
    for name in REFUSALS:
        result = terraform(copy, "test", f"-filter=tests/{name}.tftest.hcl")
        printed[name] = result.stdout + result.stderr
        assert result.returncode != 0, printed[name]
        assert f'run "{name}"... fail' in printed[name], printed[name]
    return printed


@pytest.mark.parametrize("refusal", list(REFUSALS))
def test_each_ledger_refusal_says_what_is_wrong_and_what_to_set(refused: dict[str, str], refusal: str) -> None:
    assert words(REFUSALS[refusal][2]) in words(refused[refusal]), refused[refusal]
