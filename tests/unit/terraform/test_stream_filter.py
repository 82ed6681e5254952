"""The mapping's filter lets exactly the new raw downloads through, malformed ones included.

The reference matcher is moto's EventBridge pattern engine, which flattens patterns to leaf
paths as AWS does; the same cases pin down MiniStack's matcher, patched and unpatched.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ministack.services import lambda_svc
from moto.events.models import EventPattern

from leaderboard_dev.emulators.ministack_server import match_with_absent_parents
from leaderboard_dev.settings import TERRAFORM_MODULE
from leaderboard_dev.terraform_stack import terraform_environment
from tests.streams import aggregate_record, download_record, expired_download_record
from tests.terraform_cli import terraform

RENDERED: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}


@pytest.fixture(scope="module")
def module_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module, initialised apart: `terraform console` evaluates its filter without touching AWS."""
    copy = tmp_path_factory.mktemp("module") / "terraform"
    shutil.copytree(TERRAFORM_MODULE, copy, ignore=shutil.ignore_patterns(".terraform*", "tests", "examples"))
    initialised = terraform(copy, "init", "-backend=false", "-input=false")
    assert initialised.returncode == 0, initialised.stderr
    return copy


def rendered_pattern(module_copy: Path, **variables: str) -> dict[str, Any]:
    """The pattern lambda.tf gives the mapping, as Terraform renders it for these variables."""
    key = tuple(sorted(variables.items()))
    if key not in RENDERED:
        arguments = [
            argument
            for name, value in {"name": "filter", **variables}.items()
            for argument in ("-var", f"{name}={value}")
        ]
        result = subprocess.run(
            ["terraform", "console", *arguments],
            cwd=module_copy,
            env=terraform_environment(None),
            input="local.new_raw_event_filter\n",
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        RENDERED[key] = json.loads(json.loads(result.stdout.strip().splitlines()[-1]))
    return RENDERED[key]


CASES = [
    ("new download", download_record(1, "song1"), True),
    ("download without Timestamp", download_record(2, "song1", timestamp=None), True),
    ("download with a bad Timestamp", download_record(3, "song1", timestamp="soon"), True),
    ("aggregate created", aggregate_record(4, "song1", "2018-01", 1), False),
    ("aggregate updated", aggregate_record(5, "song1", "2018-01", 2, event_name="MODIFY"), False),
    ("download modified", download_record(6, "song1", event_name="MODIFY"), False),
    ("download removed", download_record(7, "song1", event_name="REMOVE"), False),
    ("download expired by TTL", expired_download_record(8, "song1"), False),
]


@pytest.mark.parametrize(("case", "record", "passes"), CASES, ids=[case for case, _, _ in CASES])
def test_the_filter_passes_new_raw_events_only(
    case: str, record: dict[str, Any], passes: bool, module_copy: Path
) -> None:
    assert EventPattern.load(json.dumps(rendered_pattern(module_copy))).matches_event(record) is passes


@pytest.mark.parametrize(("case", "record", "passes"), CASES, ids=[case for case, _, _ in CASES])
def test_the_patched_ministack_matcher_agrees_with_aws(
    case: str, record: dict[str, Any], passes: bool, monkeypatch: pytest.MonkeyPatch, module_copy: Path
) -> None:
    monkeypatch.setattr(lambda_svc, "_match_esm_filter", match_with_absent_parents)
    assert match_with_absent_parents(record, rendered_pattern(module_copy)) is passes


def test_unpatched_ministack_drops_the_downloads_the_pattern_selects(module_copy: Path) -> None:
    """If this starts failing, MiniStack fixed nested `exists: false`: drop ministack_server's patch."""
    assert lambda_svc._match_esm_filter(download_record(1, "song1"), rendered_pattern(module_copy)) is False


def test_a_custom_period_attribute_is_filtered_on(module_copy: Path) -> None:
    pattern = rendered_pattern(module_copy, period_attribute_name="Day")
    record = download_record(1, "product1", extra={"Day": {"S": "2018-01-01"}})
    assert EventPattern.load(json.dumps(pattern)).matches_event(record) is False
    assert EventPattern.load(json.dumps(pattern)).matches_event(download_record(2, "product1")) is True


MARKED = {"type": {"S": "DOWNLOAD"}}
SHARED_TABLE_CASES = [
    ("download", download_record(1, "song1", extra=MARKED), True),
    (
        "download carrying the period attribute",
        download_record(2, "song1", extra={**MARKED, "Month": {"S": "x"}}),
        True,
    ),
    ("malformed download", download_record(3, "song1", timestamp=None, extra=MARKED), True),
    ("another item type", download_record(4, "song1", extra={"type": {"S": "USER"}}), False),
    ("the marker as a number", download_record(5, "song1", extra={"type": {"N": "1"}}), False),
    ("no marker", download_record(6, "song1"), False),
    ("download modified", download_record(7, "song1", event_name="MODIFY", extra=MARKED), False),
    ("download removed", download_record(8, "song1", event_name="REMOVE", extra=MARKED), False),
]


@pytest.mark.parametrize(
    ("case", "record", "passes"), SHARED_TABLE_CASES, ids=[case for case, _, _ in SHARED_TABLE_CASES]
)
def test_with_a_separate_aggregates_table_the_filter_passes_the_marked_inserts(
    case: str, record: dict[str, Any], passes: bool, module_copy: Path
) -> None:
    # given the filter for a source table whose downloads carry type = DOWNLOAD (aggregates live elsewhere)
    pattern = rendered_pattern(
        module_copy, source_table_name="platform", source_item_filter='{attribute="type",value="DOWNLOAD"}'
    )
    # when a record of that table's stream meets it, then AWS's matcher and the patched MiniStack's agree with the case
    assert EventPattern.load(json.dumps(pattern)).matches_event(record) is passes
    assert match_with_absent_parents(record, pattern) is passes


def test_with_a_separate_aggregates_table_every_insert_passes(module_copy: Path) -> None:
    # given the module's own downloads table with the aggregates apart: nothing on the stream but downloads
    pattern = rendered_pattern(module_copy, separate_aggregates_table="true")
    # then every INSERT passes, a download carrying an attribute named like the period included, and nothing else
    assert EventPattern.load(json.dumps(pattern)).matches_event(
        download_record(1, "song1", extra={"Month": {"S": "x"}})
    )
    assert not EventPattern.load(json.dumps(pattern)).matches_event(download_record(2, "song1", event_name="MODIFY"))
    assert pattern == {"eventName": ["INSERT"]}
