"""The mapping's filter lets exactly the new raw downloads through, malformed ones included.

The reference matcher is moto's EventBridge pattern engine, which flattens patterns to leaf
paths as AWS does; the same cases pin down MiniStack's matcher, patched and unpatched.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from ministack.services import lambda_svc
from moto.events.models import EventPattern

from leaderboard_dev.emulators.ministack_server import match_with_absent_parents
from leaderboard_dev.settings import TERRAFORM_MODULE
from tests.streams import aggregate_record, download_record, expired_download_record
from tests.terraform_cli import terraform

RENDERED: dict[tuple[Any, ...], Any] = {}


@pytest.fixture(scope="module")
def module_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module, initialised apart: `terraform console` evaluates its filter without touching AWS."""
    copy = tmp_path_factory.mktemp("module") / "terraform"
    shutil.copytree(TERRAFORM_MODULE, copy, ignore=shutil.ignore_patterns(".terraform*", "tests", "examples"))
    initialised = terraform(copy, "init", "-backend=false", "-input=false")
    assert initialised.returncode == 0, initialised.stderr
    return copy


def rendered(module_copy: Path, expression: str, **variables: str) -> Any:
    """An expression of the module, as Terraform renders it for these variables (JSON-decoded once)."""
    key = (expression, *sorted(variables.items()))
    if key not in RENDERED:
        arguments = [
            argument
            for name, value in {"name": "filter", **variables}.items()
            for argument in ("-var", f"{name}={value}")
        ]
        result = terraform(module_copy, "console", *arguments, input=f"jsonencode({expression})\n", timeout=300)
        assert result.returncode == 0, result.stderr
        RENDERED[key] = json.loads(json.loads(result.stdout.strip().splitlines()[-1]))
    return RENDERED[key]


def rendered_pattern(module_copy: Path, **variables: str) -> dict[str, Any]:
    """The INSERT pattern lambda.tf gives the mapping, as Terraform renders it for these variables."""
    return json.loads(rendered(module_copy, "local.new_raw_event_filter", **variables))


def rendered_filters(module_copy: Path, **variables: str) -> list[str]:
    """Every pattern lambda.tf gives the mapping, as the strings the mapping is given."""
    return rendered(module_copy, "local.event_filters", **variables)


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


# ---------------------------------------------------------------- retractions

TTL = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
"""The userIdentity of a REMOVE by TTL (DynamoDB Developer Guide, "DynamoDB Streams and Time to Live")."""
DOWNLOAD = {"songID": {"S": "song1"}, "SK": {"S": "download-1"}, "Timestamp": {"S": "2018-01-15T10:00:00Z"}}
AGGREGATE = {"songID": {"S": "song1"}, "SK": {"S": "2018-01"}, "Month": {"S": "2018-01"}, "DownloadCount": {"N": "2"}}
AGGREGATE_AT_ZERO = {"songID": {"S": "song1"}, "SK": {"S": "2018-01"}, "DownloadCount": {"N": "0"}}
DEFAULT_INSERT_FILTER = '{"dynamodb":{"NewImage":{"Month":{"S":[{"exists":false}]}}},"eventName":["INSERT"]}'
"""Today's filter, byte for byte: retractions off must leave the mapping as it is."""
MARKER_VARIABLE = '{attribute="type",value="DOWNLOAD"}'


def change_record(
    event_name: str,
    old: dict[str, Any] | None,
    new: dict[str, Any] | None = None,
    identity: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A record of a stream with the view type NEW_AND_OLD_IMAGES: a REMOVE has no new image, an INSERT no old one."""
    record = download_record(1, "song1", event_name=event_name)
    del record["dynamodb"]["NewImage"]
    images = {"OldImage": old, "NewImage": new}
    record["dynamodb"].update({name: image for name, image in images.items() if image is not None})
    record["dynamodb"]["StreamViewType"] = "NEW_AND_OLD_IMAGES"
    return record if identity is None else {**record, "userIdentity": identity}


def passes(patterns: list[str], record: dict[str, Any]) -> bool:
    """AWS's matcher over the mapping's filters, which are ORed."""
    return any(EventPattern.load(pattern).matches_event(record) for pattern in patterns)


def test_without_retractions_the_mapping_keeps_todays_one_filter(module_copy: Path) -> None:
    assert rendered_filters(module_copy) == [DEFAULT_INSERT_FILTER]
    assert rendered_filters(module_copy, retractions="false") == [DEFAULT_INSERT_FILTER]


def test_with_retractions_the_filters_are_todays_and_three_for_changes(module_copy: Path) -> None:
    # given the guide's layout (aggregates beside the downloads) with retractions
    filters = rendered_filters(module_copy, retractions="true")
    # then today's INSERT filter comes first, unchanged, and the changes of non-aggregates follow
    not_aggregate = {"Month": {"S": [{"exists": False}]}, "DownloadCount": {"N": [{"exists": False}]}}
    assert filters[0] == DEFAULT_INSERT_FILTER
    assert [json.loads(pattern) for pattern in filters[1:]] == [
        {"eventName": ["MODIFY"], "dynamodb": {"OldImage": not_aggregate}},
        {
            "eventName": ["REMOVE"],
            "userIdentity": {"principalId": [{"exists": False}]},
            "dynamodb": {"OldImage": not_aggregate},
        },
        {
            "eventName": ["REMOVE"],
            "userIdentity": {"principalId": [{"anything-but": ["dynamodb.amazonaws.com"]}]},
            "dynamodb": {"OldImage": not_aggregate},
        },
    ]


def test_with_retractions_and_a_marker_the_filters_follow_items_into_and_out_of_it(module_copy: Path) -> None:
    # given a source table whose downloads carry type = DOWNLOAD, with retractions
    filters = rendered_filters(
        module_copy, source_table_name="platform", source_item_filter=MARKER_VARIABLE, retractions="true"
    )
    # then five filters, AWS's default quota: the marked INSERT, a MODIFY from or into the marker, the marked REMOVEs
    marked = {"type": {"S": ["DOWNLOAD"]}}
    assert [json.loads(pattern) for pattern in filters] == [
        {"eventName": ["INSERT"], "dynamodb": {"NewImage": marked}},
        {"eventName": ["MODIFY"], "dynamodb": {"OldImage": marked}},
        {"eventName": ["MODIFY"], "dynamodb": {"NewImage": marked}},
        {
            "eventName": ["REMOVE"],
            "userIdentity": {"principalId": [{"exists": False}]},
            "dynamodb": {"OldImage": marked},
        },
        {
            "eventName": ["REMOVE"],
            "userIdentity": {"principalId": [{"anything-but": ["dynamodb.amazonaws.com"]}]},
            "dynamodb": {"OldImage": marked},
        },
    ]


LAYOUTS = {
    "the guide's": {},
    "a separate aggregates table": {"separate_aggregates_table": "true"},
    "a source table": {"source_table_name": "platform"},
}


@pytest.mark.parametrize("marker", [None, MARKER_VARIABLE], ids=["no marker", "a marker"])
@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_with_retractions_the_filters_stay_within_the_default_quota(
    layout: dict[str, str], marker: str | None, module_copy: Path
) -> None:
    """ "By default, you can define up to five different filters for a single event source mapping" (Lambda guide)."""
    variables = {**layout, "retractions": "true", **({"source_item_filter": marker} if marker else {})}
    assert 1 < len(rendered_filters(module_copy, **variables)) <= 5


RETRACTION_CASES = [
    ("new download", change_record("INSERT", None, DOWNLOAD), True),
    (
        "download edited",
        change_record("MODIFY", DOWNLOAD, {**DOWNLOAD, "Timestamp": {"S": "2018-02-01T00:00:00Z"}}),
        True,
    ),
    ("download deleted", change_record("REMOVE", DOWNLOAD), True),
    ("download deleted by a named principal", change_record("REMOVE", DOWNLOAD, identity={"principalId": "x"}), True),
    ("download expired by TTL", change_record("REMOVE", DOWNLOAD, identity=TTL), False),
    ("aggregate created", change_record("INSERT", None, AGGREGATE), False),
    ("aggregate updated", change_record("MODIFY", AGGREGATE, {**AGGREGATE, "DownloadCount": {"N": "3"}}), False),
    ("aggregate back at 0 leaves the index", change_record("MODIFY", AGGREGATE, AGGREGATE_AT_ZERO), False),
    ("aggregate at 0 counted again", change_record("MODIFY", AGGREGATE_AT_ZERO, AGGREGATE), False),
    ("aggregate at 0 deleted", change_record("REMOVE", AGGREGATE_AT_ZERO), False),
    ("item with the period edited", change_record("MODIFY", {**DOWNLOAD, "Month": {"S": "x"}}, DOWNLOAD), False),
]


@pytest.mark.parametrize(("case", "record", "passes_"), RETRACTION_CASES, ids=[case for case, _, _ in RETRACTION_CASES])
def test_with_retractions_changes_of_downloads_pass_and_those_of_aggregates_and_expiries_do_not(
    case: str, record: dict[str, Any], passes_: bool, monkeypatch: pytest.MonkeyPatch, module_copy: Path
) -> None:
    monkeypatch.setattr(lambda_svc, "_match_esm_filter", match_with_absent_parents)
    # given the guide's layout with retractions
    filters = rendered_filters(module_copy, retractions="true")
    # when a record of its stream meets the mapping's filters, then AWS's matcher and the patched MiniStack's agree
    assert passes(filters, record) is passes_
    assert any(match_with_absent_parents(record, json.loads(pattern)) for pattern in filters) is passes_


UNMARKED = {**DOWNLOAD, "type": {"S": "USER"}}
MARKED = {**DOWNLOAD, "type": {"S": "DOWNLOAD"}}
MARKED_CASES = [
    ("marked download edited", change_record("MODIFY", MARKED, MARKED), True),
    ("item marked", change_record("MODIFY", UNMARKED, MARKED), True),
    ("item unmarked", change_record("MODIFY", MARKED, UNMARKED), True),
    ("other item edited", change_record("MODIFY", UNMARKED, UNMARKED), False),
    ("marked download deleted", change_record("REMOVE", MARKED), True),
    ("other item deleted", change_record("REMOVE", UNMARKED), False),
    ("marked download expired by TTL", change_record("REMOVE", MARKED, identity=TTL), False),
]


@pytest.mark.parametrize(("case", "record", "passes_"), MARKED_CASES, ids=[case for case, _, _ in MARKED_CASES])
def test_with_retractions_and_a_marker_changes_into_and_out_of_the_marker_pass(
    case: str, record: dict[str, Any], passes_: bool, monkeypatch: pytest.MonkeyPatch, module_copy: Path
) -> None:
    monkeypatch.setattr(lambda_svc, "_match_esm_filter", match_with_absent_parents)
    # given a source table whose downloads carry type = DOWNLOAD, with retractions
    filters = rendered_filters(
        module_copy, source_table_name="platform", source_item_filter=MARKER_VARIABLE, retractions="true"
    )
    assert passes(filters, record) is passes_
    assert any(match_with_absent_parents(record, json.loads(pattern)) for pattern in filters) is passes_


@pytest.mark.parametrize(
    ("case", "record"),
    [(case, record) for case, record, _ in RETRACTION_CASES + MARKED_CASES],
    ids=[case for case, _, _ in RETRACTION_CASES + MARKED_CASES],
)
def test_the_patched_ministack_matcher_agrees_with_aws_on_each_retraction_filter(
    case: str, record: dict[str, Any], monkeypatch: pytest.MonkeyPatch, module_copy: Path
) -> None:
    """Filter by filter, not only ORed: a REMOVE with no userIdentity must not match `anything-but`."""
    monkeypatch.setattr(lambda_svc, "_match_esm_filter", match_with_absent_parents)
    for variables in ({}, {"source_table_name": "platform", "source_item_filter": MARKER_VARIABLE}):
        for pattern in rendered_filters(module_copy, retractions="true", **variables):
            expected = EventPattern.load(pattern).matches_event(record)
            assert match_with_absent_parents(record, json.loads(pattern)) is expected, pattern


@pytest.mark.parametrize(
    ("rules", "matches"),
    [
        ([{"anything-but": ["dynamodb.amazonaws.com"]}], False),
        ([None], False),
        (["x"], False),
        ([{"prefix": "x"}], False),
        ([{"exists": True}], False),
        ([{"exists": False}], True),
        ([{"anything-but": ["x"]}, {"exists": False}], True),
    ],
    ids=["anything-but", "null", "a value", "prefix", "exists", "does not exist", "either"],
)
def test_in_the_patched_ministack_an_absent_field_matches_only_exists_false(
    rules: list[Any], matches: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "For an event pattern to match an event, the event must contain all the field names listed in the event
    pattern" (EventBridge User Guide, "Event pattern syntax"); "Does not exist" is `"exists": false` (Lambda guide)."""
    monkeypatch.setattr(lambda_svc, "_match_esm_filter", match_with_absent_parents)
    record = {"eventName": "REMOVE", "dynamodb": {}}
    for pattern in ({"userIdentity": {"principalId": rules}}, {"eventName": ["REMOVE"], "principalId": rules}):
        assert match_with_absent_parents(record, pattern) is matches
        assert EventPattern.load(json.dumps(pattern)).matches_event(record) is matches
