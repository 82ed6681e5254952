"""The mapping's filter lets exactly the new raw downloads through, malformed ones included.

The reference matcher is moto's EventBridge pattern engine, which flattens patterns to leaf
paths as AWS does; the same cases pin down MiniStack's matcher, patched and unpatched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ministack.services import lambda_svc
from moto.events.models import EventPattern

from leaderboard_dev.emulators.ministack_server import match_with_absent_parents
from tests.streams import aggregate_record, download_record, expired_download_record

TEMPLATE = Path(__file__).resolve().parents[3] / "terraform" / "templates" / "new_raw_event_filter.json.tftpl"


def rendered_pattern(period_attribute: str = "Month") -> dict[str, Any]:
    """What templatefile() renders: the one interpolation is the attribute name, JSON-encoded."""
    return json.loads(TEMPLATE.read_text().replace("${jsonencode(period_attribute)}", json.dumps(period_attribute)))


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
def test_the_filter_passes_new_raw_events_only(case: str, record: dict[str, Any], passes: bool) -> None:
    assert EventPattern.load(json.dumps(rendered_pattern())).matches_event(record) is passes


@pytest.mark.parametrize(("case", "record", "passes"), CASES, ids=[case for case, _, _ in CASES])
def test_the_patched_ministack_matcher_agrees_with_aws(
    case: str, record: dict[str, Any], passes: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lambda_svc, "_match_esm_filter", match_with_absent_parents)
    assert match_with_absent_parents(record, rendered_pattern()) is passes


def test_unpatched_ministack_drops_the_downloads_the_pattern_selects() -> None:
    """If this starts failing, MiniStack fixed nested `exists: false`: drop ministack_server's patch."""
    assert lambda_svc._match_esm_filter(download_record(1, "song1"), rendered_pattern()) is False


def test_a_custom_period_attribute_is_filtered_on() -> None:
    record = download_record(1, "product1", extra={"Day": {"S": "2018-01-01"}})
    assert EventPattern.load(json.dumps(rendered_pattern("Day"))).matches_event(record) is False
    assert EventPattern.load(json.dumps(rendered_pattern("Day"))).matches_event(download_record(2, "product1")) is True
